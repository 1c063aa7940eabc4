"""The look-up probes of the learnability frontier, one family per plug-in (a bank lists a
family once): a register of single-letter keys with three-digit values on one line, then
questions that name a key either exactly as the register writes it (`echo`: "Again: K ", the
bytes before the answer are those before the value, what an induction head and the generic
`induction` solver copy) or in a line of their own (`asked`: "Bin K? "); and the easiest of all
(`glued_family`): every byte of a value unique in the document, glued to its key, so that a
one-byte induction head copies the whole answer; and `split`, the same with the register's
letters dotted and the answers joined, so that what follows the key is not the answer)."""

import re
import string
from typing import Any

from exam_builder.document import Document
from exam_builder.families.base import AnyFamily, Family, Params, last_line

QUESTIONS = {"echo": ("Again: {} ", r"Again: (\w) "), "asked": ("Bin {}? ", r"Bin (\w)\? ")}


def family(name: str, pairs: int, style: str) -> AnyFamily:
    """The probe `name`: `pairs` keys in the register, questions of `style` (echo, asked)."""
    ask, read = QUESTIONS[style]

    def generate(rng, params, lexicon):  # type: ignore[no-untyped-def]
        keys = rng.sample(string.ascii_letters, pairs)
        values = rng.sample(range(100, 1000), pairs)
        doc = Document()
        register = ", ".join(f"{k} {v}" for k, v in zip(keys, values, strict=True))
        doc.say(f"Stores of {lexicon.name()}: {register}\n")
        for i in rng.sample(range(pairs), min(params.questions, pairs)):
            doc.say(ask.format(keys[i]))
            doc.ask(str(values[i]))
            doc.say("\n")
        return doc

    def solve(prompt, params):  # type: ignore[no-untyped-def]
        key = re.fullmatch(read, last_line(prompt))[1]
        return re.search(rf"(?<![A-Za-z]){key} (\d+)", prompt)[1]

    return Family(name, Params, generate, solve, f"look-up probe ({style})", tiers=(1,))


def glued_family(name: str, pairs: int, split: bool = False) -> AnyFamily:
    """The probe `name`: a register `# Kabc Mdef ...` of `pairs` upper-case keys, each glued to
    three lower-case letters used nowhere else in the document; questions `? K` (the answer
    follows the key without a space, exactly as in the register). `split`: the register writes
    the letters dotted (`# Ka.b.c ...`), the answer is still `abc`."""

    def generate(rng: Any, params: Any, lexicon: Any) -> Document:
        keys = rng.sample(string.ascii_uppercase, pairs)
        letters = rng.sample(string.ascii_lowercase, 3 * pairs)
        values = ["".join(letters[3 * i : 3 * i + 3]) for i in range(pairs)]
        written = [".".join(v) for v in values] if split else values
        doc = Document()
        doc.say("# " + " ".join(k + v for k, v in zip(keys, written, strict=True)) + "\n")
        for i in rng.sample(range(pairs), min(params.questions, pairs)):
            doc.say("? " + keys[i])
            doc.ask(values[i])
            doc.say("\n")
        return doc

    def solve(prompt: str, params: Any) -> str:
        key = last_line(prompt)[-1]
        found = re.search(rf"{key}([a-z](?:\.?[a-z]){{2}})", prompt)
        return found[1].replace(".", "")  # type: ignore[index]

    kind = "split" if split else "glued"
    return Family(name, Params, generate, solve, f"look-up probe ({kind})", tiers=(1,))
