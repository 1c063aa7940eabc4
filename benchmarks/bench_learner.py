"""The learnability frontier: per family of a bank, the best model-free score beside the
reference learner's, for model variants of the cpu scale.

For every family of the bank (default: the look-up variants in benchmarks/learner_variants/)
it builds the exam in memory, takes each family's best model-free score from the quality report
(chance, generic, baseline, copy), then trains and grades the reference learner on it
(`toolkit.learn`) for each model variant asked, and prints one row per family and variant.
This is the table the maintainers' exam page quotes: a family is worth its place when the
learner's score is far above the model-free one.

Run:
    .venv/bin/python benchmarks/bench_learner.py [--bank DIR] [--steps 2000] [--seconds CAP] \\
        [--variant cpu] [--variant cpu+d_model=64+batch_size=32] [--families a,b] [--json OUT]

A variant is `cpu` (toolkit.learn.scale.CPU) with `+field=value` changes of its shape
(n_layer, n_head, d_model, block_size) or of its training (batch_size, batch_bytes, lr, text_weight,
mask_share, copy_share, reask).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from exam_builder.bank import load_bank
from exam_builder.build import prepare_exam
from exam_builder.exam_file import Question
from toolkit.commands.exam_tables import model_free_best
from toolkit.learn.reference import learn_family
from toolkit.learn.scale import CPU, Scale

HERE = Path(__file__).resolve().parent
VARIANTS = HERE / "learner_variants"
SHAPE_FIELDS = ("n_layer", "n_head", "d_model", "block_size")


def variant(spec: str) -> Scale:
    """`cpu` with `+field=value` changes (see the module docstring)."""
    base, *changes = spec.split("+")
    if base != "cpu":
        raise SystemExit(f"variant {spec!r}: starts with 'cpu'")
    shape, train = {}, {}
    for change in changes:
        key, _, value = change.partition("=")
        number = float(value) if "." in value or "e" in value else int(value)
        if key in SHAPE_FIELDS:
            shape[key] = int(number)
        elif key in ("batch_size", "batch_bytes"):
            train[key] = int(number)
        elif key in ("lr", "text_weight", "mask_share", "copy_share", "reask"):
            train[key] = float(number)
        else:
            raise SystemExit(f"variant {spec!r}: unknown field {key!r}")
    return dataclasses.replace(CPU, shape=dataclasses.replace(CPU.shape, **shape), **train)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bank", type=Path, default=VARIANTS)
    parser.add_argument("--steps", type=int, default=CPU.steps, help="steps a family")
    parser.add_argument("--seconds", type=float, default=None, help="a cap a family")
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--families", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    variants = args.variant or ["cpu"]
    bank = load_bank(args.bank)
    prepared = prepare_exam(args.bank, english_text=None)
    exam = [Question.model_validate_json(line) for line in prepared.exam_bytes.splitlines()]
    quality = prepared.manifest.quality
    names = args.families.split(",") if args.families else list(quality.families)
    rows = []
    print(f"bank {bank.id}: {len(names)} families, {args.steps:,} steps a family and variant")
    print(
        f"{'family':<14} {'variant':<36} {'model-free':>10} {'learner':>8} {'steps':>7} {'loss':>6}"
    )
    for name in names:
        free = model_free_best(quality.families[name], public_bank=False)
        for spec in variants:
            started = time.monotonic()
            learned = learn_family(
                bank, name, exam, variant(spec), steps=args.steps, seconds=args.seconds
            )
            passed = sum(r.passed for r in learned)
            total = sum(r.total for r in learned)
            pct = 100.0 * passed / total
            loss = learned[0].final_loss
            row = {
                "family": name,
                "variant": spec,
                "model_free_best": free,
                "learner": round(pct, 2),
                "passed": passed,
                "total": total,
                "steps": learned[0].steps,
                "final_loss": loss,
                "seconds": round(time.monotonic() - started, 1),
            }
            rows.append(row)
            shown = "—" if loss is None else f"{loss:.3f}"
            print(
                f"{name:<14} {spec:<36} {free:>10.1f} {pct:>10.1f} {learned[0].steps:>10} "
                f"{shown:>10}",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps({"bank": bank.id, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
