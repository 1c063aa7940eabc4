"""Each built-in family's own solver with its wording left free: what an attacker who has read
the engine writes against a hidden bank that rewords a public family.

The public engine check (`exam_builder.quality`) runs the families' solvers with their default
parameters, so a bank that rewords every phrase escapes it. These solvers run the same code
with every phrase of the family's templates matched as any text on its line
(`phrasing.ANY_WORDING`): the layout (where the slots stand, what they hold) is the family's,
the words are inferred from the prompt. One solver per built-in family, named
`wording_<family>`; a family's solver that cannot read the prompt, or reads it wrong, guesses
nothing or a wrong answer, never an error.
"""

from __future__ import annotations

from collections.abc import Callable

from exam_builder.families import BUILTIN, AnyFamily
from exam_builder.families.phrasing import ANY_WORDING
from exam_builder.solvers.base import Solver
from exam_builder.solvers.text import Prompt


def _guess(family: AnyFamily) -> Callable[[Prompt], str | None]:
    params = family.params()

    def guess(p: Prompt) -> str | None:
        token = ANY_WORDING.set(True)
        try:
            return family.solve(p.text, params)
        except Exception:  # the family's layout is not this prompt's: no guess
            return None
        finally:
            ANY_WORDING.reset(token)

    return guess


WORDING: tuple[Solver, ...] = tuple(
    Solver(f"wording_{name}", f"{name}'s own layout, its wording inferred", _guess(family))
    for name, family in BUILTIN.items()
)
