"""Look-up variant 'echo10': a register of 10 single-letter keys with three-digit values,
then questions that name a key exactly as the register writes it ("Again: K "): the bytes
before the answer are those before the value, what an induction head (and the generic
`induction` solver) copies."""

import re
import string

from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line

PAIRS = 10
STYLE = "echo"


def _question(key):
    return f"Again: {key} " if STYLE == "echo" else f"Bin {key}? "


def generate(rng, params, lexicon):
    keys = rng.sample(string.ascii_letters, PAIRS)
    values = rng.sample(range(100, 1000), PAIRS)
    doc = Document()
    pairs = ", ".join(f"{k} {v}" for k, v in zip(keys, values, strict=True))
    doc.say(f"Stores of {lexicon.name()}: {pairs}\n")
    for i in rng.sample(range(PAIRS), min(params.questions, PAIRS)):
        doc.say(_question(keys[i]))
        doc.ask(str(values[i]))
        doc.say("\n")
    return doc


def solve(prompt, params):
    pattern = r"Again: (\w) " if STYLE == "echo" else r"Bin (\w)\? "
    key = re.fullmatch(pattern, last_line(prompt))[1]
    return re.search(rf"(?<![A-Za-z]){key} (\d+)", prompt)[1]


FAMILY = Family("echo10", Params, generate, solve, "a look-up variant", tiers=(1,))
