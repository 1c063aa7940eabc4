"""Exam engine speed: build 100 and 100,000 questions and print questions/second.

Targets (issue 2): the 100-question exam in under 1 s; generation scaling linearly. The quality
report is measured in full at 100 questions; at 100,000 the reference solver still runs on every
question, but the English baseline and the copy heuristic run on a 1,000-question sample (their
cost per question is the same at any size), and the output says so.

Run: .venv/bin/python benchmarks/bench_exam.py
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
import time
from pathlib import Path

from exam_builder.bank import Bank, load_bank
from exam_builder.baselines import trained_ngram
from exam_builder.build import build_exam
from exam_builder.exam_file import serialize
from exam_builder.generate import GeneratedDocument, generate_documents
from exam_builder.quality import NGRAM_ORDER, quality_report
from toolkit.text.corpus import default_corpus

DEMO = Path(__file__).resolve().parents[1] / "exam_builder" / "banks" / "public" / "demo"
SAMPLE = 1_000


def scaled(bank: Bank, total: int) -> Bank:
    """The demo bank with its family counts scaled to `total` questions."""
    per, extra = divmod(total, len(bank.families))
    families = [
        dataclasses.replace(f, count=per + (i < extra)) for i, f in enumerate(bank.families)
    ]
    return dataclasses.replace(bank, families=families)


def timed(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def sample_documents(docs: list[GeneratedDocument], n: int) -> list[GeneratedDocument]:
    """About `n` questions' worth of documents, drawn reproducibly."""
    per_doc = max(1, sum(len(d.questions) for d in docs) // len(docs))
    return random.Random(0).sample(docs, min(len(docs), n // per_doc))


def main() -> None:
    demo = load_bank(DEMO)
    english, t_corpus = timed(default_corpus)
    _, t_train = timed(trained_ngram, english, NGRAM_ORDER)
    print(f"default corpus: {len(english):,} bytes, loaded in {t_corpus:.2f} s")
    print(f"English baseline ({NGRAM_ORDER}-gram) trained in {t_train:.2f} s (once per process)")
    print()

    rates = {}
    for total in (100, 100_000):
        bank = scaled(demo, total)
        docs, t_gen = timed(generate_documents, bank)
        questions = [q for d in docs for q in d.questions]
        data, t_ser = timed(serialize, questions)
        rates[total] = total / t_gen
        print(f"== {total:,} questions ({len(docs):,} documents, {len(data):,} bytes)")
        print(f"  generate   {t_gen:8.3f} s  {total / t_gen:10,.0f} questions/s")
        print(f"  serialize  {t_ser:8.3f} s  {total / t_ser:10,.0f} questions/s")
        if total <= SAMPLE:
            _, t_q = timed(quality_report, bank, docs, english)
            print(f"  quality    {t_q:8.3f} s  (full report: reference, baseline, copy)")
        else:
            _, t_ref = timed(quality_report, bank, docs, None)
            part = sample_documents(docs, SAMPLE)
            n_part = sum(len(d.questions) for d in part)
            _, t_q = timed(quality_report, bank, part, english)
            print(f"  reference+copy on all {total:,}: {t_ref:.2f} s")
            print(
                f"  SAMPLED: full report on {n_part:,} questions in {t_q:.2f} s "
                f"(~{t_q / n_part * 1000:.2f} ms/question)"
            )
    print()
    print(f"generation rate at 100,000 / at 100: {rates[100_000] / rates[100]:.2f} (1.0 = linear)")

    with tempfile.TemporaryDirectory() as tmp:
        _, t_build = timed(build_exam, DEMO, Path(tmp) / "a", english_text=english)
        _, t_plain = timed(build_exam, DEMO, Path(tmp) / "b", english_text=None)
    print(f"build_exam(demo, 100 questions): {t_build:.3f} s with the English baseline (model")
    print(f"  already trained), {t_plain:.3f} s without; target < 1 s")


if __name__ == "__main__":
    main()
