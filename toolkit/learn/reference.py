"""One family trained, exported and graded; the learnability table of a whole exam.

For each family asked, `learn_family` trains a fresh model for a budget of steps on the
family's training text (`corpus`, `trainer`; for the public-side learner, a public bank's
generator with every register parameter drawn per document, `randomized`), writes its bundle,
and grades that bundle with the real grader (`toolkit.grading.grade_bundle`, in a local
sandbox) on the family's questions of the exam, which are written to a scratch exam file of
their own. The grading is hidden: the report keeps
only which questions passed, never what the bundle wrote. The table has a row per (family,
tier): questions, passed and percent, with the family's training figures beside them.

One draw of a small model can miss a look-up that another draw of the same budget learns (a
lottery measured on half a machine). With `draws` above one, the family trains that many
models (seeds `seed`, `seed + 1`, ...), each is graded on held-out questions of its own
training text's generator (`held_out`: documents no training reads, never the exam), and only
the best is graded on the exam: what an agent would do with the same budget and its own
validation text.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from exam_builder.bank import Bank, BankError, BankFamily
from exam_builder.exam_file import Question, serialize
from exam_builder.families.register import MIN_PAIRS
from exam_builder.generate import question_tier
from exam_builder.learnability import LearnReport, LearnRow, percent, totals
from toolkit.learn.corpus import Corpus, focused, smallest
from toolkit.learn.randomized import RandomizedCorpus, has_register
from toolkit.learn.scale import Scale
from toolkit.learn.trainer import Tick, Trained, train_family


def family_questions(exam: list[Question], family: str) -> list[Question]:
    return [q for q in exam if q.family == family]


def grade_passed(bundle: Path, questions: list[Question], device: str, work: Path) -> set[str]:
    """Ids of `questions` that `bundle` answers, graded by the real grader (hidden: nothing the
    bundle wrote is kept); a bundle that fails as a whole passes none."""
    from toolkit.grading import grade_bundle

    exam_file = work / "exam.jsonl"
    exam_file.write_bytes(serialize(questions))
    report = grade_bundle(
        bundle,
        exam_file,
        device=device,
        phases=("generate",),
        hidden=True,
        ablation=False,
    )
    return set(report.passed_ids) if report.ok else set()


HELD_OUT_FROM = 1_000_000_000
"""Held-out documents are numbered from here: far past any training run's (a run reads at
most a few hundred thousand documents), so no draw has trained on them."""
HELD_OUT_QUESTIONS = 24
"""Held-out questions a draw is graded on."""
MAX_DRAWS = 4


def held_out(corpus: Corpus, family: str, n: int = HELD_OUT_QUESTIONS) -> list[Question]:
    """`n` questions of `corpus`'s own generator (its seed, its parameters: the public bank's
    for the public-side learner), from documents no training reads: the check that picks a
    draw. Never the exam: the training text's seed is not the exam's (`corpus.learn_seed`)."""
    out: list[Question] = []
    number = HELD_OUT_FROM
    while len(out) < n:
        prompts = corpus.document(number).prompts()
        out += [
            Question(id=f"held-out-{number}-{span}", family=family, prompt=prompt, answer=answer)
            for span, (prompt, answer) in enumerate(prompts)
        ]
        number += 1
    return out[:n]


def corpus_of(
    bank: Bank, entry: BankFamily, scale: Scale, *, randomize: bool = False, small: bool = False
) -> Corpus:
    """`entry`'s training text as `scale` writes it: the bank's own documents, or with
    `randomize` its generator's with every register parameter drawn afresh per document
    (`randomized`; `small`: at the fewest entries)."""
    shares = (scale.mask_share, scale.text_weight, scale.reask)
    if randomize:
        pairs = MIN_PAIRS if small else None
        return RandomizedCorpus(
            bank, entry, pairs=pairs, mask_share=shares[0], text_weight=shares[1], reask=shares[2]
        )
    return Corpus(bank, entry, mask_share=shares[0], text_weight=shares[1], reask=shares[2])


def learn_family(
    bank: Bank,
    family: str,
    exam: list[Question],
    scale: Scale,
    *,
    steps: int,
    seconds: float | None = None,
    randomize: bool = False,
    tick: Tick | None = None,
    grading: Callable[[], None] | None = None,
    work: Path | None = None,
    seed: int = 0,
    draws: int = 1,
) -> list[LearnRow]:
    """Train on `family`'s text for `steps` (a cap of `seconds` may cut it short), grade on its
    questions of `exam`: a row per tier. `seed` draws the model's initial weights and batch
    windows. `randomize`: the public-side learner, trained on `bank`'s generator with every
    register parameter drawn per document (`randomized`), never on the exam's own bank.
    `draws`: models trained (seeds `seed` on), the one that passes most `held_out` questions
    (then the lowest loss, then the first) graded on the exam."""
    if not 1 <= draws <= MAX_DRAWS:
        raise ValueError(f"draws: 1 to {MAX_DRAWS}, not {draws}")
    entry = next((e for e in bank.families if e.family.name == family), None)
    if entry is None:
        known = ", ".join(e.family.name for e in bank.families)
        raise BankError(f"{bank.path}: no family {family!r} in this bank (it has {known})")
    questions = family_questions(exam, family)
    if not questions:
        raise BankError(f"the exam has no question of family {family!r}")
    with tempfile.TemporaryDirectory(prefix=f"ari-learn-{family}-", dir=work) as tmp:
        trained_on = focused(entry, scale.train_tiers)
        checks = (
            held_out(corpus_of(bank, trained_on, scale, randomize=randomize), family)
            if draws > 1
            else []
        )
        made: list[tuple[Path, Trained, int]] = []
        for draw in range(draws):
            # Each draw reads the same text from its start: only the model's draw differs.
            corpus = corpus_of(bank, trained_on, scale, randomize=randomize)
            small: Corpus | None = None
            if scale.small_share > 0 and randomize and has_register(trained_on):
                small = corpus_of(bank, trained_on, scale, randomize=True, small=True)
            elif scale.small_share > 0 and (small_entry := smallest(trained_on)) is not None:
                small = corpus_of(bank, small_entry, scale)
            bundle = Path(tmp) / f"bundle-{draw}"
            trained = train_family(
                corpus,
                scale,
                bundle,
                steps=steps,
                seconds=seconds,
                small=small,
                seed=seed + draw,
                tick=tick,
            )
            score = 0
            if draws > 1:
                check_dir = Path(tmp) / f"held-out-{draw}"
                check_dir.mkdir()
                score = len(grade_passed(bundle, checks, scale.device, check_dir))
            made.append((bundle, trained, score))
        best = max(range(draws), key=lambda i: (made[i][2], -_loss(made[i][1]), -i))
        bundle, trained, _ = made[best]
        if grading is not None:
            grading()  # the slow part after training: say so before it starts
        passed = grade_passed(bundle, questions, scale.device, Path(tmp))
    tiers = {q.id: question_tier(q, entry.family) for q in questions}
    rows = rows_of(family, questions, tiers, passed, trained)
    if draws == 1:
        return rows
    scores = [score for _, _, score in made]
    extra = {"draw": seed + best, "held_out": scores, "held_out_total": len(checks)}
    return [row.model_copy(update=extra) for row in rows]


def _loss(trained: Trained) -> float:
    """A draw's final loss for the tie-break (none measured: the worst)."""
    loss = trained.final_loss
    return loss if loss == loss else float("inf")


def rows_of(
    family: str, questions: list[Question], tiers: dict[str, int], passed: set[str], t: Trained
) -> list[LearnRow]:
    """A row per tier of `family`'s questions (`tiers`: each question's), lowest first."""
    rows = []
    for tier in sorted(set(tiers.values())):
        mine = [q for q in questions if tiers[q.id] == tier]
        right = sum(q.id in passed for q in mine)
        rows.append(
            LearnRow(
                family=family,
                tier=tier,
                total=len(mine),
                passed=right,
                percent=percent(right, len(mine)),
                steps=t.steps,
                bytes_seen=t.bytes_seen,
                final_loss=round(t.final_loss, 4) if t.final_loss == t.final_loss else None,
                seconds=round(t.seconds, 1),
                budget_steps=t.budget,
                cut=t.cut,
            )
        )
    return rows


def report_of(
    rows: list[LearnRow],
    scale: Scale,
    budget: tuple[int, float | None],
    bank: Bank,
    exam_sha256: str,
    seed: int = 0,
    randomize: bool = False,
    draws: int = 1,
) -> LearnReport:
    """The whole table, with totals per family, per tier and overall (`budget`: the steps
    and the cap in seconds each family had)."""
    by_family: dict[str, list[LearnRow]] = {}
    by_tier: dict[str, list[LearnRow]] = {}
    for row in rows:
        by_family.setdefault(row.family, []).append(row)
        by_tier.setdefault(str(row.tier), []).append(row)
    shape = scale.shape
    return LearnReport(
        scale=scale.name,
        device=scale.device,
        model=f"{shape.n_layer} layers x {shape.d_model}, context {shape.block_size}",
        seconds_per_family=budget[1],
        steps_per_family=budget[0],
        learner="public-side" if randomize else "own-bank",
        seed=seed,
        draws=draws,
        bank_id=bank.id,
        exam_sha256=exam_sha256,
        rows=rows,
        families={f: totals(r) for f, r in by_family.items()},
        tiers={t: totals(by_tier[t]) for t in sorted(by_tier)},
        total=totals(rows),
    )
