"""The generic model-free solvers: each is real (it answers the structure it targets), and the
quality gate refuses a non-public bank that any of them answers, whatever the wording."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from exam_helpers import SYLLABLES, MakeBank

from exam_builder.bank import Bank, load_bank
from exam_builder.build import BuildError, build_exam, prepare_exam
from exam_builder.document import visible_tail
from exam_builder.families import BUILTIN
from exam_builder.generate import GeneratedDocument, generate_documents
from exam_builder.solvers import GENERIC, MAX_GUESS_CHARS, Solver, graded, run
from exam_builder.solvers.text import Prompt
from toolkit.cli import cli

STRUCTURED = Path(__file__).parent / "banks" / "structured"
OLD_SHAPES = Path(__file__).parent / "banks" / "old_shapes"


def score(
    solver: Solver, documents: list[GeneratedDocument], family: str, *, own_tier: bool = False
) -> float:
    """Percent of `family`'s questions `solver` answers (prompts cut as the grader cuts them);
    `own_tier`: of its own documents only, not its tier-1 registers."""
    questions = [q for d in documents for q in d.questions if q.family == family]
    if own_tier:
        questions = [q for q in questions if q.tier != 1]
    hits = sum(graded(run(solver, visible_tail(q.prompt)), q.answer) for q in questions)
    return 100.0 * hits / len(questions)


def test_a_guess_is_right_only_when_it_starts_with_the_whole_answer() -> None:
    assert graded("Vosk", "Vosk") and graded("Vosk.\nQ: more", "Vosk")
    assert not graded("Vos", "Vosk")  # too short: padding cannot complete it
    assert not graded("", "Vosk") and not graded(None, "Vosk")
    assert not graded("Vosk", "Vosk ok")
    # An answer is never matched by a guess it merely contains (no "answer in output").
    assert not graded("the rest of the document: Vosk", "Vosk")


def test_a_guess_is_cut_to_a_bounded_length() -> None:
    echo = Solver("echo", "the whole prompt", lambda p: p.text * 100)
    guess = run(echo, "x" * 1000)
    assert guess is not None and len(guess) == MAX_GUESS_CHARS


DEMO_TARGETS = {
    # solver: (family it targets, floor the honest implementation clears; measured values on
    # the demo bank are in the maintainers' exam page). Families named old_* are the built-in
    # families as they were before issue 28 reworked them (tests/exam_builder/banks/old_shapes):
    # the solvers were written for those shapes, which the reworked families no longer have.
    "definition": ("vocabulary", 90.0),
    "relation": ("old_passages", 80.0),
    "table_field": ("old_records", 90.0),
    "labelled_field": ("old_extraction", 40.0),
    "list_next": ("old_lists", 75.0),
    "progression": ("numeric", 90.0),
    "clock": ("old_schedules", 60.0),
    "string_rule": ("symbolic", 90.0),
}


@pytest.mark.parametrize("solver", list(DEMO_TARGETS))
def test_each_solver_answers_the_family_it_targets(
    solver: str, demo_documents: list[GeneratedDocument]
) -> None:
    family, floor = DEMO_TARGETS[solver]
    documents = demo_documents
    if family.startswith("old_"):
        documents = generate_documents(load_bank(OLD_SHAPES))
    # The family's own documents: its tier-1 register is a layout no generic solver reads
    # (test_lookup_tier.py), so on the whole demo family the figure is about halved.
    assert score(GENERIC[solver], documents, family, own_tier=True) >= floor


# Structures no demo family has: a name whose value changes, and a repeated refrain.
MOVES = """
from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line

def generate(rng, params, lexicon):
    people = lexicon.names(4)
    where = {}
    lines = []
    for _ in range(6):
        who = rng.choice(people)
        where[who] = lexicon.name()
        lines.append(f"{who} went to {where[who]}.")
    doc = Document()
    doc.say(" ".join(lines) + "\\n")
    for who in [w for w in people if w in where][: params.questions]:
        doc.say(f"Where {who} is now: ")
        doc.ask(where[who])
        doc.say("\\n")
    return doc

def solve(prompt, params):
    who = last_line(prompt).split()[1]
    return [s.split()[-1] for s in prompt.replace(".", "").split("\\n")[0].split(" went to ")]

def solve(prompt, params):
    import re
    who = last_line(prompt).split()[1]
    return re.findall(rf"\\b{who} went to (\\w+)", prompt)[-1]

FAMILY = Family("moves", Params, generate, solve, "a name's latest place")
"""

REFRAIN = """
from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line

def generate(rng, params, lexicon):
    refrain = lexicon.words(5)
    doc = Document()
    doc.say("Sing: " + " ".join(refrain) + "\\n")
    for _ in range(3):
        doc.say(" ".join(lexicon.words(6)) + "\\n")
    doc.say("Sing: " + " ".join(refrain[:2]) + " ")
    doc.ask(" ".join(refrain[2:]))
    doc.say("\\n")
    return doc

def solve(prompt, params):
    start = " ".join(last_line(prompt).split()[1:])
    first = prompt.split("\\n")[0]
    return first[len("Sing: ") + len(start) + 1 :]

FAMILY = Family("refrain", Params, generate, solve, "a refrain sung again")
"""

PLUGIN_TARGETS = {
    "last_value": ("moves", 90.0),
    "induction": ("refrain", 90.0),
    "prompt_ngram": ("refrain", 60.0),
}


@pytest.fixture
def plugin_documents(make_bank: MakeBank) -> list[GeneratedDocument]:
    bank = make_bank(
        f'id = "shapes"\nseed = "s"\nsyllables = {SYLLABLES}\n'
        '[[families]]\nfamily = "moves"\ncount = 30\n'
        '[[families]]\nfamily = "refrain"\ncount = 20\n',
        {"moves.py": MOVES, "refrain.py": REFRAIN},
    )
    return generate_documents(load_bank(bank))


@pytest.mark.parametrize("solver", list(PLUGIN_TARGETS))
def test_each_solver_answers_a_plugin_family_of_its_structure(
    solver: str, plugin_documents: list[GeneratedDocument]
) -> None:
    family, floor = PLUGIN_TARGETS[solver]
    assert score(GENERIC[solver], plugin_documents, family) >= floor


# A plug-in family in wording no engine has ever used, whose structure is a plain key/value
# definition: the public engine reads none of it, the definition solver all of it.
VAULTS = """
from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line

def generate(rng, params, lexicon):
    vaults = [(lexicon.name(), lexicon.word()) for _ in range(4)]
    doc = Document()
    for name, item in vaults:
        doc.say(f"Vault {name} -> {item}\\n")
    for name, item in rng.sample(vaults, 2):
        doc.say(f"Opening vault {name} reveals ")
        doc.ask(item)
        doc.say("\\n")
    return doc

def solve(prompt, params):
    name = last_line(prompt).split()[2]
    return prompt.split(f"Vault {name} -> ")[1].split("\\n")[0]

FAMILY = Family("vaults", Params, generate, solve, "vault contents")
"""


def _vaults_bank(make_bank: MakeBank) -> Path:
    return make_bank(
        f'id = "vaults"\nseed = "s"\nsyllables = {SYLLABLES}\n'
        '[[families]]\nfamily = "vaults"\ncount = 20\n',
        {"vaults.py": VAULTS},
    )


def test_the_gate_refuses_a_bank_a_generic_solver_cracks(
    make_bank: MakeBank, tmp_path: Path, english: bytes
) -> None:
    bank = _vaults_bank(make_bank)
    with pytest.raises(BuildError, match=r"definition answers vaults \(100\.0%\)") as refused:
        build_exam(bank, tmp_path / "exam", english_text=english)
    assert "public engine" not in str(refused.value)  # its wording is new: only structure
    assert not (tmp_path / "exam").exists()


def test_check_prints_the_solver_by_family_table_and_refuses(make_bank: MakeBank) -> None:
    bank = _vaults_bank(make_bank)
    result = CliRunner().invoke(
        cli,
        ["build-exam", "--bank", str(bank), "--check", "--train-data", str(bank / "bank.toml")],
        terminal_width=250,
    )
    assert result.exit_code == 1, result.output
    assert "Generic model-free solvers" in result.output
    for name in GENERIC:
        assert name in result.output
    assert "definition answers vaults (100.0%)" in result.output


def test_a_public_bank_is_reported_not_gated(
    make_bank: MakeBank, tmp_path: Path, english: bytes
) -> None:
    bank = _vaults_bank(make_bank)
    (bank / "bank.toml").write_text(
        (bank / "bank.toml").read_text(encoding="utf-8").replace("\nseed", "\npublic = true\nseed"),
        encoding="utf-8",
    )
    manifest = build_exam(bank, tmp_path / "exam", english_text=english)
    assert manifest.quality.families["vaults"].generic["definition"] == 100.0
    assert manifest.quality.families["vaults"].generic_any == 100.0


def test_the_structured_bank_passes_every_gate_and_stores_the_table(
    tmp_path: Path, english: bytes
) -> None:
    manifest = build_exam(STRUCTURED, tmp_path / "exam", english_text=english, allow_in_repo=True)
    report = manifest.quality
    assert not report.public_bank and list(report.generic_solvers) == list(GENERIC)
    for name, fq in report.families.items():
        assert fq.reference == 100.0 and fq.public_engine == 0.0, name
        assert set(fq.generic) == set(GENERIC), name
        assert all(pct <= 5.0 for pct in fq.generic.values()), (name, fq.generic)


def test_solvers_share_one_parse_and_survive_any_prompt(demo_bank: Bank) -> None:
    odd = ["", "\n", "▒▒▒", "a" * 1024, "1, 2, 3\n" * 100, "x: y\n" * 200, "| a | b |\n" * 90]
    for text in odd:
        prompt = Prompt(text)
        for solver in GENERIC.values():
            guess = run(solver, prompt)
            assert guess is None or (isinstance(guess, str) and "▒" not in guess)


# Attacks: plug-in families in wording the engine never used, each with a classic structure
# (written the way a bank author might). The public engine reads none; one generic solver
# reads each, and the gate must refuse the bank naming that solver and family.
_HEAD = """
import re
from exam_builder.document import Document
from exam_builder.families.base import Family, Params, last_line
"""

CRACKED = {
    "badges": (
        "definition",
        """
def generate(rng, params, lexicon):
    rows = [(lexicon.name(), lexicon.word()) for _ in range(5)]
    doc = Document()
    for name, code in rows:
        doc.say(f"{name}'s badge: {code}\\n")
    for name, code in rng.sample(rows, 3):
        doc.say(f"Show me the badge of {name}, please. ")
        doc.ask(code)
        doc.say("\\n")
    return doc

def solve(prompt, params):
    name = re.search(r"badge of (\\w+),", last_line(prompt))[1]
    return re.search(rf"{name}'s badge: (\\w+)", prompt)[1]
""",
    ),
    "harbour": (
        "table_field",
        """
COLUMNS = ["port", "cargo", "flag"]

def generate(rng, params, lexicon):
    ships = {lexicon.name(): [lexicon.name(), lexicon.word(), lexicon.word()] for _ in range(5)}
    doc = Document()
    doc.say("| ship | " + " | ".join(COLUMNS) + " |\\n|---|---|---|---|\\n")
    for ship, cells in ships.items():
        doc.say(f"| {ship} | " + " | ".join(cells) + " |\\n")
    for ship in rng.sample(list(ships), 3):
        k = rng.randrange(3)
        doc.say(f"What {COLUMNS[k]} for {ship}? ")
        doc.ask(ships[ship][k])
        doc.say("\\n")
    return doc

def solve(prompt, params):
    col, ship = re.fullmatch(r"What (\\w+) for (\\w+)\\? ", last_line(prompt)).groups()
    row = re.search(rf"^\\| {ship} \\| (.*) \\|$", prompt, re.M)[1].split(" | ")
    return row[COLUMNS.index(col)]
""",
    ),
    "chain": (
        "list_next",
        """
def generate(rng, params, lexicon):
    items = lexicon.words(6)
    doc = Document()
    doc.say("Order of the rite\\n")
    for i, item in enumerate(items, 1):
        doc.say(f"{i}. {item}\\n")
    for k in rng.sample(range(5), 3):
        doc.say(f"Right after {items[k]} we have ")
        doc.ask(items[k + 1])
        doc.say("\\n")
    return doc

def solve(prompt, params):
    item = last_line(prompt).split()[2]
    items = re.findall(r"^\\d+\\. (\\w+)$", prompt, re.M)
    return items[items.index(item) + 1]
""",
    ),
    "tally": (
        "number_rule",
        """
def generate(rng, params, lexicon):
    start, step = rng.randint(100, 400), rng.randint(7, 40)
    doc = Document()
    doc.say(f"Tally kept at {lexicon.name()}\\n")
    for day in range(1, 6):
        doc.say(f"Day {day}: {start + step * (day - 1)}\\n")
    for day in rng.sample(range(6, 15), 3):
        doc.say(f"Day {day}: ")
        doc.ask(str(start + step * (day - 1)))
        doc.say("\\n")
    return doc

def solve(prompt, params):
    day = int(re.fullmatch(r"Day (\\d+): ", last_line(prompt))[1])
    shown = [int(v) for v in re.findall(r"^Day \\d+: (\\d+)$", prompt, re.M)]
    return str(shown[0] + (shown[1] - shown[0]) * (day - 1))
""",
    ),
    "feeder": (
        "number_rule",
        """
def generate(rng, params, lexicon):
    m, c = rng.randint(2, 9), rng.randint(3, 60)
    doc = Document()
    xs = rng.sample(range(10, 99), 7)
    for x in xs[:4]:
        doc.say(f"feed {x} -> {m * x + c}\\n")
    for x in xs[4:]:
        doc.say(f"feed {x} -> ")
        doc.ask(str(m * x + c))
        doc.say("\\n")
    return doc

def solve(prompt, params):
    x = int(re.fullmatch(r"feed (\\d+) -> ", last_line(prompt))[1])
    pairs = re.findall(r"feed (\\d+) -> (\\d+)", prompt)[:2]
    (x0, y0), (x1, y1) = [tuple(map(int, p)) for p in pairs]
    m = (y1 - y0) // (x1 - x0)
    return str(y0 + m * (x - x0))
""",
    ),
    "manifests": (
        "labelled_field",
        """
def generate(rng, params, lexicon):
    rows = [(lexicon.name(), lexicon.name(), lexicon.word()) for _ in range(4)]
    doc = Document()
    for name, port, cargo in rows:
        doc.say(f"{name} - port={port}; cargo={cargo}\\n")
    for name, port, cargo in rng.sample(rows, 3):
        doc.say(f"Hold of {name} carries cargo ")
        doc.ask(cargo)
        doc.say("\\n")
    return doc

def solve(prompt, params):
    name = last_line(prompt).split()[2]
    return re.search(rf"^{name} - port=\\w+; cargo=(\\w+)$", prompt, re.M)[1]
""",
    ),
    "sightings": (
        "last_value",
        """
def generate(rng, params, lexicon):
    people = lexicon.names(3)
    seen = {}
    doc = Document()
    for _ in range(7):
        who = rng.choice(people)
        seen[who] = lexicon.name()
        doc.say(f"Later {who} turned up near {seen[who]}. ")
    doc.say("\\n")
    for who in [w for w in people if w in seen]:
        doc.say(f"Last seen, {who} was close to ")
        doc.ask(seen[who])
        doc.say("\\n")
    return doc

def solve(prompt, params):
    who = last_line(prompt).split()[2]
    return re.findall(rf"{who} turned up near (\\w+)\\.", prompt)[-1]
""",
    ),
    "ciphers": (
        "after_key",
        """
def generate(rng, params, lexicon):
    rows = [(lexicon.word(), f"{lexicon.word()}-{rng.randint(100, 999)}") for _ in range(5)]
    doc = Document()
    for word, code in rows:
        doc.say(f"{word} {code}\\n")
    for word, code in rng.sample(rows, 3):
        doc.say(f"Cipher for {word} ~ ")
        doc.ask(code)
        doc.say("\\n")
    return doc

def solve(prompt, params):
    word = last_line(prompt).split()[2]
    return re.search(rf"^{word} (\\S+)$", prompt, re.M)[1]
""",
    ),
    "drumbeats": (
        "progression",
        """
def generate(rng, params, lexicon):
    start, ratio = rng.randint(2, 9), rng.randint(2, 3)
    doc = Document()
    doc.say(f"The drums of {lexicon.name()} beat\\n")
    for k in range(5):
        doc.say(f"{start * ratio ** k}\\n")
    doc.ask(str(start * ratio ** 5))
    return doc

def solve(prompt, params):
    beats = [int(v) for v in prompt.split()[-3:]]
    return str(beats[-1] * beats[-1] // beats[-2])
""",
    ),
    "succession": (
        "after_key",
        """
def generate(rng, params, lexicon):
    heirs = lexicon.words(7)
    lines = [f"{a} is followed by {b}." for a, b in zip(heirs, heirs[1:])]
    rng.shuffle(lines)
    doc = Document()
    doc.say(" ".join(lines) + "\\n")
    for k in rng.sample(range(6), 3):
        doc.say(f"Heir to {heirs[k]}? ")
        doc.ask(heirs[k + 1])
        doc.say("\\n")
    return doc

def solve(prompt, params):
    heir = last_line(prompt).split()[2][:-1]
    return re.search(rf"\\b{heir} is followed by (\\w+)", prompt)[1]
""",
    ),
    "beats": (
        "progression",
        """
ORDINAL = ["seventh", "eighth", "ninth", "tenth"]

def generate(rng, params, lexicon):
    a, d = rng.randint(100, 300), rng.randint(3, 30)
    doc = Document()
    doc.say(f"Beats of {lexicon.name()}: " + " ".join(str(a + d * k) for k in range(6)) + "\\n")
    for k in rng.sample(range(4), 3):
        doc.say(f"The {ORDINAL[k]} one falls on ")
        doc.ask(str(a + d * (k + 6)))
        doc.say("\\n")
    return doc

def solve(prompt, params):
    k = ORDINAL.index(last_line(prompt).split()[1]) + 7
    a, b = [int(v) for v in prompt.split("\\n")[0].split(": ")[1].split()[:2]]
    return str(a + (b - a) * (k - 1))
""",
    ),
    "bells": (
        "clock",
        """
def generate(rng, params, lexicon):
    slots = sorted(rng.sample(range(6 * 12, 20 * 12), 6))
    bells = [(lexicon.name(), f"{s // 12:02d}:{s % 12 * 5:02d}") for s in slots]
    order = list(bells)
    rng.shuffle(order)
    doc = Document()
    for name, time in order:
        doc.say(f"{name} rings at {time}\\n")
    for k in rng.sample(range(5), 3):
        doc.say(f"Once {bells[k][1]} is past, the next to ring is ")
        doc.ask(bells[k + 1][0])
        doc.say("\\n")
    return doc

def solve(prompt, params):
    after = last_line(prompt).split()[1]
    rings = re.findall(r"^(\\w+) rings at (\\d\\d:\\d\\d)$", prompt, re.M)
    return min((t, n) for n, t in rings if t > after)[1]
""",
    ),
    "interview": (
        "relation",
        """
def generate(rng, params, lexicon):
    people = lexicon.names(4)
    lamps = {x: lexicon.name() for x in people}
    goats = {x: lexicon.name() for x in people}
    facts = [f"{x} keeps a lamp named {lamps[x]}." for x in people]
    facts += [f"{x} owns a goat named {goats[x]}." for x in people]
    rng.shuffle(facts)
    doc = Document()
    doc.say(" ".join(facts) + "\\n")
    for x in rng.sample(people, 3):
        doc.say(f"Q: How is the lamp of {x} called?\\nA: ")
        doc.ask(lamps[x])
        doc.say("\\n")
    return doc

def solve(prompt, params):
    who = prompt.split("\\n")[-2].split()[-2]
    return re.search(rf"{who} keeps a lamp named (\\w+)\\.", prompt)[1]
""",
    ),
}


@pytest.mark.parametrize("family", list(CRACKED))
def test_the_gate_refuses_a_new_wording_of_a_known_structure(
    family: str, make_bank: MakeBank, tmp_path: Path
) -> None:
    solver, source = CRACKED[family]
    bank = make_bank(
        f'id = "attack"\nseed = "s"\nsyllables = {SYLLABLES}\n'
        f'[[families]]\nfamily = "{family}"\ncount = 12\n',
        {
            f"{family}.py": _HEAD
            + source
            + (f'\nFAMILY = Family("{family}", Params, generate, solve, "attack")\n')
        },
    )
    prepared = prepare_exam(bank, english_text=None)
    quality = prepared.manifest.quality.families[family]
    assert quality.reference == 100.0 and quality.public_engine == 0.0
    assert quality.generic[solver] >= 50.0, quality.generic  # it reads this structure
    # (most also copy their answers, so the chance floor refuses them too)
    [problem] = [p for p in prepared.problems if p.startswith("generic model-free")]
    assert f"{solver} answers {family} (" in problem, quality.generic


ENTRY_READERS = ("key_glued", "key_trailing", "key_spaced", "register")
"""The entry readers: each reads its register layout whatever the parameters
(test_entry_readers.py); the demo's tier 1 is the public layout, which two of them read."""


@pytest.mark.parametrize("solver", ["key_glued", "register"])
def test_the_entry_readers_answer_the_demo_s_tier_one(
    solver: str, demo_documents: list[GeneratedDocument]
) -> None:
    tier_one = [q for d in demo_documents for q in d.questions if q.tier == 1]
    hits = sum(graded(run(GENERIC[solver], visible_tail(q.prompt)), q.answer) for q in tier_one)
    assert hits == len(tier_one) > 40


def test_every_solver_has_a_target() -> None:
    attacked = {solver for solver, _ in CRACKED.values()}
    wording = {f"wording_{family}" for family in BUILTIN}  # test_entry_readers.py
    targets = set(DEMO_TARGETS) | set(PLUGIN_TARGETS) | set(ENTRY_READERS) | wording
    assert targets | attacked == set(GENERIC)
