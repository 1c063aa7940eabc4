"""What a run leaves behind, and how a reader trusts it.

- `model`: the per-run result file (`RunResult`), the only thing the site reads;
- `signing`: ed25519 signatures that bind a result file to the harness that wrote it;
- `chain`: the append-only, hash-chained logs (submission history, audit log) a result points to;
- `published`: reading a results folder's files without following a link out of it.

Checking a published run after the fact (re-grading its archive) is `toolkit.run.verify`.
"""
