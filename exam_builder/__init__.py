"""The ARI Bench exam engine: families, banks, masking, canonical exam files and hashing.

Public API (the `toolkit` CLI is a thin layer over it; this package never imports `toolkit`):

- `exam_builder.build.build_exam(bank_dir, out_dir, *, english_text, allow_in_repo=False)`:
  build `exam.jsonl` + `manifest.json`, returning the `Manifest`; `prepare_exam` does the
  same in memory.
- `exam_builder.generate.generate_questions(bank)`: the questions of a bank (pure).
- `exam_builder.bank.load_bank(bank_dir)`: read and validate a bank (`BankError` otherwise).
- `exam_builder.exam_file`: the exam file format (`Question`, `load_exam`, `serialize`).
- `exam_builder.document.MASK`: what stands in a prompt for an earlier answer.

Maintainers' guide: site/docs/maintainers/exams.md.
"""

BUILDER_VERSION = "1.3.0"
"""1.1.0 (issue 28): the chance floor and the private solver pool join the gate, and the manifest
reports them; the exam bytes of every bank are unchanged, so no pinned hash moved.
1.2.0 (issue 28, part 3): the built-in families were reworked so that no answer is a value of
its prompt (joined or computed answers; fields found by value, operations shown by examples,
arrivals through a legs table): every exam built from them changed, the public demo exam
included, hence the demo track `demo-cpu-2`.
1.3.0 (issue 37): difficulty tiers. Every built-in family makes a tier-1 register look-up beside
its own documents where a bank sets a mix, and an exam follows the mix family by family; a bank
without a mix keeps its bytes. The public demo and validation banks set one (40% tier 1), so
their exams changed: the demo track `demo-cpu-3`."""
