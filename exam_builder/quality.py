"""The quality report: is each family locally learnable and globally unfamiliar?

Per family, three solvers answer every question from the prompt as the grader sends it (its
last `CONTEXT_BYTES` bytes):

- reference: the family's own solver, parsing the visible context. Must be 100%: otherwise some
  answer is not determined by what the model can see.
- baseline: a byte n-gram model of ordinary English text (`baselines.NgramModel`). Must be at
  most `BASELINE_LIMIT` percent: otherwise English statistics alone answer the family.
- copy: continue the longest earlier match (`baselines.copy_continue`); reported, not gated.
- public engine: every built-in reference solver of this repository, with its *default*
  parameters, tried on every question (a question counts when any of them returns its answer).
  This is what anyone with the public engine can answer without a model: a bundle of copied
  solvers. For a bank that is not public (`public = true` in `bank.toml` marks the demo and
  validation banks) it must be at most `PUBLIC_ENGINE_LIMIT` percent per family: a hidden bank
  rewords and re-parameterises every family, so that the defaults no longer read its prompts.
- generic solvers: every model-free solver of `exam_builder.solvers`, each on its own, written
  against structures (definitions, tables, lists, progressions, repeated spans...) rather
  than any wording. For a bank that is not public each must be at most `GENERIC_LIMIT` percent
  per family: rewording does not stop them, only structures the public engine lacks do. The
  best of them per question (`generic_any`, an oracle that knows which one to trust) is
  reported, not gated.
- chance: the blind guesser's floor (`exam_builder.chance`): the expected score of the best
  blind strategy (a pick among the prompt's values of the answer's shape, or among sums and
  differences of its numbers, or the family's most common answer). For a bank that is not
  public it must be at most the bank's `chance_limit` (default and highest
  `CHANCE_LIMIT`, 2%) per family.
- pool: the private solver pool (`exam_builder.pool`): solvers kept beside a hidden bank, in
  its `solvers/` folder or a folder passed to the build, never in this repository. Each must
  be at most `GENERIC_LIMIT` percent per family; the manifest keeps only the best score per
  family and the pool's size, never the solvers' names.

A solver that is not told the answer's length writes a finite guess: it is right when the
guess's first `len(answer)` bytes are the answer (`exam_builder.solvers.graded`), as the
grader judges a bundle's output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from exam_builder.bank import Bank, BankError, BankFamily
from exam_builder.baselines import NgramModel, copy_continue, trained_ngram
from exam_builder.chance import PRIOR_SAMPLE, STRATEGIES, best_constant, question_chance
from exam_builder.document import visible_tail
from exam_builder.exam_file import Question
from exam_builder.families import BUILTIN, AnyFamily, Params
from exam_builder.generate import GeneratedDocument, Progress, question_tier, sample_answers
from exam_builder.solvers import GENERIC, Solver, graded, run
from exam_builder.solvers.text import Prompt

CONTEXT_BYTES = 1024
"""The grader sends each prompt's last 1,024 bytes; every solver here sees the same."""
BASELINE_LIMIT = 5.0
"""Highest context-free baseline score (percent) a family may have."""
PUBLIC_ENGINE_LIMIT = 5.0
"""Highest public-engine score (percent) a family of a bank that is not public may have."""
GENERIC_LIMIT = 5.0
"""Highest score (percent) one generic solver may have on a family of a bank that is not public."""
NGRAM_ORDER = 6


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True)


class FamilyQuality(_Model):
    """Scores (percent of questions answered exactly) of one family, or of the whole exam."""

    questions: int = Field(description="Questions scored.")
    reference: float = Field(description="Reference solver (reads only the prompt), percent.")
    baseline: float | None = Field(description="Context-free English byte model, percent.")
    copy_: float = Field(alias="copy", description="Copy heuristic, percent.")
    public_engine: float | None = Field(
        default=None,
        description="Built-in solvers with default parameters, percent (None: not measured).",
    )
    generic: dict[str, float] = Field(
        default_factory=dict, description="Per generic solver (by name), percent."
    )
    generic_any: float | None = Field(
        default=None, description="Questions some generic solver answers, percent (not gated)."
    )
    chance: float | None = Field(
        default=None,
        description="Blind guesser's floor: the best blind strategy's expected score, percent.",
    )
    chance_strategy: str | None = Field(
        default=None, description="The blind strategy that gives `chance` (chance.STRATEGIES)."
    )
    pool: float | None = Field(
        default=None,
        description="Best private-pool solver's score, percent (None: no pool was run).",
    )
    max_prompt_bytes: int = Field(description="Longest prompt in bytes (the grader sends 1,024).")
    tiers: dict[int, FamilyQuality] | None = Field(
        default=None,
        description="The same figures per difficulty tier (exam_builder.families.base.TIERS), "
        "for the questions that have one (None: the exam has no tiers).",
    )


class BaselineInfo(_Model):
    """What the context-free baseline was trained on."""

    kind: str = Field(description="Model, e.g. 'byte 6-gram, greedy, back-off'.")
    training_bytes: int = Field(description="Size of the training text.")
    training_sha256: str = Field(description="SHA-256 of the training text.")


class QualityReport(_Model):
    """The per-family quality report stored in the manifest and printed by `build-exam`."""

    context_bytes: int = Field(description="Bytes of each prompt the solvers saw.")
    public_bank: bool = Field(
        default=False, description="The bank is public: the public-engine gate does not apply."
    )
    baseline: BaselineInfo | None = Field(description="None when no English text was given.")
    generic_solvers: dict[str, str] = Field(
        default_factory=dict, description="The generic solvers run: name -> structure exploited."
    )
    chance_limit: float | None = Field(
        default=None, description="Highest chance floor a family may have (the bank's), percent."
    )
    pool_solvers: int = Field(
        default=0, description="Private-pool solvers run (their names are not published)."
    )
    families: dict[str, FamilyQuality] = Field(description="Per family, in exam order.")
    total: FamilyQuality = Field(description="Over the whole exam.")

    _pool_detail: dict[str, dict[str, float]] = PrivateAttr(default_factory=dict)
    _engine_detail: dict[str, dict[int, dict[str, int]]] = PrivateAttr(default_factory=dict)

    @property
    def engine_detail(self) -> dict[str, dict[int, dict[str, int]]]:
        """Family -> tier -> public-engine solver (a built-in family's, defaults) -> questions
        it answers; empty in a report read from a manifest."""
        return self._engine_detail

    @property
    def pool_detail(self) -> dict[str, dict[str, float]]:
        """Family -> private-pool solver -> percent; empty in a report read from a manifest."""
        return self._pool_detail

    @property
    def chance_floor(self) -> float | None:
        """The exam's chance floor (percent): the total's, each family by its best strategy."""
        return self.total.chance


@dataclass
class _Tally:
    """Running counts of one family (or of the whole exam)."""

    questions: int = 0
    reference: int = 0
    baseline: int = 0
    copy: int = 0
    public_engine: int = 0
    engine: dict[str, int] = field(default_factory=dict)  # public-engine solver -> hits
    generic_any: int = 0
    generic: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GENERIC, 0))
    chance: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STRATEGIES, 0.0))
    pool: dict[str, int] = field(default_factory=dict)
    max_prompt_bytes: int = 0

    def add(self, other: _Tally, *, same_family: bool = False) -> None:
        """Add `other`'s counts. `same_family`: questions of this tally's family, each blind
        strategy summed on its own; otherwise another family's, whose best strategy adds to
        every strategy (a guesser picks its strategy per family)."""
        self.questions += other.questions
        self.reference += other.reference
        self.baseline += other.baseline
        self.copy += other.copy
        self.public_engine += other.public_engine
        for name, hits in other.engine.items():
            self.engine[name] = self.engine.get(name, 0) + hits
        self.generic_any += other.generic_any
        for name, hits in other.generic.items():
            self.generic[name] += hits
        # A guesser may pick its strategy per family: the exam's floor adds each family's best
        # (each strategy's value is a sum of per-question chances, `prior` included).
        best = max(other.chance.values(), default=0.0)
        for s in STRATEGIES:
            self.chance[s] += other.chance[s] if same_family else best
        for name, hits in other.pool.items():
            self.pool[name] = self.pool.get(name, 0) + hits
        self.max_prompt_bytes = max(self.max_prompt_bytes, other.max_prompt_bytes)

    def quality(
        self,
        with_baseline: bool,
        with_pool: bool,
        total: bool = False,
        tiers: dict[int, FamilyQuality] | None = None,
    ) -> FamilyQuality:
        def pct(hits: float) -> float:
            return round(100.0 * hits / self.questions, 2) if self.questions else 0.0

        strategy = max(STRATEGIES, key=lambda s: self.chance[s])

        return FamilyQuality.model_validate(
            {
                "questions": self.questions,
                "reference": pct(self.reference),
                "baseline": pct(self.baseline) if with_baseline else None,
                "copy": pct(self.copy),
                "public_engine": pct(self.public_engine),
                "generic": {name: pct(hits) for name, hits in self.generic.items()},
                "generic_any": pct(self.generic_any),
                "chance": pct(self.chance[strategy]),
                "chance_strategy": None if total else strategy,
                "pool": max(map(pct, self.pool.values()), default=0.0) if with_pool else None,
                "max_prompt_bytes": self.max_prompt_bytes,
                "tiers": tiers,
            }
        )


@cache
def _engine_defaults() -> list[tuple[AnyFamily, Params]]:
    """Every built-in family with its default parameters (built once: validating them is
    most of the public engine's cost)."""
    return [(family, family.params()) for family in BUILTIN.values()]


def public_engine_answers(prompt: str) -> dict[str, str]:
    """What the built-in solvers, each with its default parameters, answer to `prompt`, by
    the solver's family name."""
    answers: dict[str, str] = {}
    for family, params in _engine_defaults():
        try:
            answers[family.name] = family.solve(prompt, params)
        except Exception:  # a solver that cannot read the prompt: no answer from it
            continue
    return answers


def quality_report(
    bank: Bank,
    documents: list[GeneratedDocument],
    english_text: bytes | None,
    progress: Progress | None = None,
    pool: dict[str, Solver] | None = None,
) -> QualityReport:
    """Score every solver on every question (`BankError` if a plug-in solver crashes).

    `pool`: the private solver pool (`exam_builder.pool.load_pool`), by name; None or empty
    runs none."""
    pool = pool or {}
    ngram = trained_ngram(english_text, NGRAM_ORDER) if english_text is not None else None
    tallies: dict[str, _Tally] = {}
    by_tier: dict[str, dict[int, _Tally]] = {}  # family -> tier -> counts
    last: dict[str, tuple[BankFamily, int]] = {}  # per family, its last document's number
    for doc in documents:
        entry = doc.entry
        name = entry.family.name
        tally = tallies.setdefault(name, _Tally(pool=dict.fromkeys(pool, 0)))
        for q in doc.questions:
            one = _score(bank, entry, q, ngram, pool)
            tally.add(one, same_family=True)
            tiers = by_tier.setdefault(name, {})
            tier = question_tier(q, entry.family)
            if tier not in tiers:
                tiers[tier] = _Tally(pool=dict.fromkeys(pool, 0))
            tiers[tier].add(one, same_family=True)
        last[name] = (entry, doc.number)
        if progress is not None:
            progress(len(doc.questions))

    for name, (entry, number) in last.items():
        _, rate = best_constant(sample_answers(bank, entry, number + 1, PRIOR_SAMPLE))
        for t in [tallies[name], *by_tier.get(name, {}).values()]:
            t.chance["prior"] = rate * t.questions
    flags = (ngram is not None, bool(pool))
    total = _Tally()
    for tally in tallies.values():
        total.add(tally)
    info = None
    if ngram is not None:
        info = BaselineInfo(
            kind=f"byte {ngram.order}-gram, greedy, back-off",
            training_bytes=ngram.training_bytes,
            training_sha256=ngram.training_sha256,
        )
    report = QualityReport(
        context_bytes=CONTEXT_BYTES,
        public_bank=bank.public,
        baseline=info,
        generic_solvers={name: solver.structure for name, solver in GENERIC.items()},
        chance_limit=bank.chance_limit,
        pool_solvers=len(pool),
        families={
            name: t.quality(*flags, tiers=_per_tier(by_tier.get(name), *flags))
            for name, t in tallies.items()
        },
        total=total.quality(*flags, total=True, tiers=_exam_tiers(by_tier, *flags)),
    )
    report._pool_detail = {
        family: {name: round(100.0 * hits / t.questions, 2) for name, hits in t.pool.items()}
        for family, t in tallies.items()
        if t.questions
    }
    report._engine_detail = {
        family: {tier: dict(t.engine) for tier, t in tiers.items() if t.engine}
        for family, tiers in by_tier.items()
    }
    return report


def _score(
    bank: Bank,
    entry: BankFamily,
    q: Question,
    ngram: NgramModel | None,
    pool: dict[str, Solver],
) -> _Tally:
    """Every solver's result on one question, as the counts of a one-question tally."""
    one = _Tally(questions=1, pool=dict.fromkeys(pool, 0))
    prompt = visible_tail(q.prompt, CONTEXT_BYTES)
    context = prompt.encode("utf-8")
    answer = q.answer.encode("utf-8")
    try:
        solved = entry.family.solve(prompt, entry.params)
    except Exception as exc:
        if entry.source != "built-in":
            msg = f"solve raised {type(exc).__name__} on {q.id}: {exc}"
            raise BankError(f"{bank.where(entry)}: {msg}") from exc
        solved = None  # a built-in solver that cannot read a prompt: counted as wrong
    one.reference = int(solved == q.answer)
    if ngram is not None:
        one.baseline = int(ngram.generate(context, len(answer)) == answer)
    one.copy = int(copy_continue(context, len(answer)) == answer)
    engine = [n for n, a in public_engine_answers(prompt).items() if graded(a, q.answer)]
    one.public_engine = int(bool(engine))
    one.engine = dict.fromkeys(engine, 1)
    parsed = Prompt(prompt)
    hits = [name for name, solver in GENERIC.items() if graded(run(solver, parsed), q.answer)]
    for name in hits:
        one.generic[name] += 1
    one.generic_any = int(bool(hits))
    for strategy, p in question_chance(prompt, q.answer).items():
        one.chance[strategy] += p
    for name, solver in pool.items():
        try:
            guess = run(solver, parsed)
        except Exception as exc:  # a bug of the pool: stop, naming the solver
            msg = f"pool solver {name} raised {type(exc).__name__} on {q.id}: {exc}"
            raise BankError(msg) from exc
        one.pool[name] += graded(guess, q.answer)
    one.max_prompt_bytes = len(q.prompt.encode("utf-8"))
    return one


def _per_tier(
    tiers: dict[int, _Tally] | None, with_baseline: bool, with_pool: bool
) -> dict[int, FamilyQuality] | None:
    """One family's figures per tier (None: its questions have no tiers)."""
    if not tiers:
        return None
    return {t: tiers[t].quality(with_baseline, with_pool) for t in sorted(tiers)}


def _exam_tiers(
    by_tier: dict[str, dict[int, _Tally]], with_baseline: bool, with_pool: bool
) -> dict[int, FamilyQuality] | None:
    """The whole exam's figures per tier: each family's counts added (the chance floor of a
    tier adds each family's best strategy on that tier)."""
    if not by_tier:
        return None
    out: dict[int, _Tally] = {}
    for tiers in by_tier.values():
        for t, tally in tiers.items():
            out.setdefault(t, _Tally()).add(tally)
    return {t: out[t].quality(with_baseline, with_pool, total=True) for t in sorted(out)}


def pool_problems(report: QualityReport) -> list[str]:
    """Why the private pool refuses the exam, naming its solvers: only a report just made by
    `quality_report` knows them (the manifest keeps the best score per family, no names)."""
    cracked = [
        f"{solver} answers {family} ({pct}%)"
        for family, by_solver in report.pool_detail.items()
        for solver, pct in by_solver.items()
        if pct > GENERIC_LIMIT
    ]
    if not cracked or report.public_bank:
        return []
    return [
        f"the private solver pool cracks families: {', '.join(cracked)} (limit "
        f"{GENERIC_LIMIT}% per solver and family): give them structures these solvers do not "
        "read (see the maintainers' exam page), or leave the family out"
    ]


def engine_leaks(report: QualityReport, family: str, fq: FamilyQuality) -> str:
    """Which tiers of a family the public engine answers, by which solver, and the bank.toml
    table whose default wording lets it (empty for a report read from a manifest)."""
    parts = []
    for tier, by_solver in sorted(report.engine_detail.get(family, {}).items()):
        tq = (fq.tiers or {}).get(tier)
        if tq is None or not tq.questions or not by_solver:
            continue
        solver, hits = max(by_solver.items(), key=lambda kv: kv[1])
        table = "[families.params.lookup.phrases]" if tier == 1 else "[families.params.phrases]"
        share = round(100.0 * hits / tq.questions, 1)
        parts.append(
            f"tier {tier}: the public {solver} solver answers {hits}/{tq.questions} ({share}%), "
            f"default wording of {table}"
        )
    return ": " + ", ".join(parts) if parts else ""


def quality_problems(report: QualityReport) -> list[str]:
    """Why an exam with this report must not be published (empty when it may)."""
    problems = []
    for name, fq in report.families.items():
        if fq.reference < 100.0:
            problems.append(
                f"family {name}: the reference solver answers only {fq.reference}% from the "
                f"visible {report.context_bytes} bytes (longest prompt {fq.max_prompt_bytes} "
                "bytes): some answers are not determined by the prompt; shrink the documents"
            )
        if fq.baseline is not None and fq.baseline > BASELINE_LIMIT:
            problems.append(
                f"family {name}: the context-free English baseline answers {fq.baseline}% "
                f"(limit {BASELINE_LIMIT}%): its answers are guessable without the prompt"
            )
    limit = report.chance_limit
    lucky = [
        f"{name} ({fq.chance}% by '{fq.chance_strategy}')"
        for name, fq in report.families.items()
        if fq.chance is not None and limit is not None and fq.chance > limit
    ]
    if lucky and not report.public_bank:
        problems.append(
            f"a blind guesser scores on families {', '.join(lucky)} (chance limit {limit}% "
            "each): it picks among the prompt's values of the answer's shape (strategies "
            "shape, once, fields, joined, record), among sums, differences and products of its "
            "numbers (arith, arith-record), adds a count's numbers with random signs (signs), "
            "or always writes the family's most common answer (prior); give each family many "
            "more same-shape distractors, or answers that are computed from facts the question "
            "does not point to, among many numbers, from a wide range, then rebuild (see "
            "exam_builder.chance and the maintainers' exam page)"
        )
    leaks = [
        f"{name} ({fq.public_engine}%{engine_leaks(report, name, fq)})"
        for name, fq in report.families.items()
        if fq.public_engine is not None and fq.public_engine > PUBLIC_ENGINE_LIMIT
    ]
    if leaks and not report.public_bank:
        problems.append(
            f"the public engine's own solvers, with their default parameters, answer families "
            f"{'; '.join(leaks)} (limit {PUBLIC_ENGINE_LIMIT}% each): anyone with this "
            "repository answers them without a model; give each leaking tier its own wording "
            "in the bank.toml table named (tier 1, the register: its heading and question in "
            "[families.params.lookup.phrases], its separator and alphabets in "
            "[families.params.lookup]; the family's own tiers: [families.params.phrases], "
            "headings, questions, openings) and other parameters (vocabularies, sizes), then "
            "rebuild (or mark the bank `public = true` if it is meant to be public)"
        )
    cracked = [
        f"{solver} answers {name} ({pct}%)"
        for name, fq in report.families.items()
        for solver, pct in fq.generic.items()
        if pct > GENERIC_LIMIT
    ]
    if cracked and not report.public_bank:
        problems.append(
            f"generic model-free solvers (exam_builder.solvers) crack families: "
            f"{', '.join(cracked)} (limit {GENERIC_LIMIT}% per solver and family): a bundle "
            "of hand-written rules answers them whatever their wording; give each of them a "
            "structure these solvers do not read (see the maintainers' exam page: several "
            "hops, distractors, answers composed of two facts, no fixed format), or leave the "
            "family out"
        )
    return problems + pool_problems(report)
