"""Generic model-free solvers: what anyone can answer without a model, whatever the wording.

The families' reference solvers parse their own templates: a hidden bank rewords them, and
they read nothing. The solvers here read *structures* instead (a definition, a table with a
header, a list, a progression, a repeated span...), so rewording alone does not stop them. The
quality gate (`exam_builder.quality`) runs every one on every question of a hidden bank and
refuses a family that any of them answers more than 5% of the time: such a family measures
hand-written rules, not a trained model. They are public on purpose: a hidden bank must be
secret in its wording and content, never in the structures it relies on.
"""

from __future__ import annotations

from exam_builder.solvers.base import MAX_GUESS_CHARS, Solver, graded, run
from exam_builder.solvers.copying import INDUCTION, NGRAM
from exam_builder.solvers.entries import KEY_GLUED, KEY_SPACED, KEY_TRAILING, REGISTER
from exam_builder.solvers.lookup import AFTER_KEY, DEFINITION, LAST_VALUE, RELATION
from exam_builder.solvers.records import LABELLED_FIELD, LIST_NEXT, TABLE_FIELD
from exam_builder.solvers.sequences import CLOCK, NUMBER_RULE, PROGRESSION, STRING_RULE
from exam_builder.solvers.wording import WORDING

GENERIC: dict[str, Solver] = {
    s.name: s
    for s in (
        DEFINITION,
        RELATION,
        LAST_VALUE,
        AFTER_KEY,
        KEY_GLUED,
        KEY_TRAILING,
        KEY_SPACED,
        REGISTER,
        TABLE_FIELD,
        LABELLED_FIELD,
        LIST_NEXT,
        PROGRESSION,
        NUMBER_RULE,
        CLOCK,
        STRING_RULE,
        INDUCTION,
        NGRAM,
        *WORDING,
    )
}
"""Every generic solver, by name, in the order the gate's table lists them."""

__all__ = ["GENERIC", "MAX_GUESS_CHARS", "Solver", "graded", "run"]
