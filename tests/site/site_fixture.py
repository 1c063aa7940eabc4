"""Helpers of the site tests: build the site from a fixture results folder (test data)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The results factory is shared with the statistics tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "stats"))

from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.results import signing

REPO = Path(__file__).resolve().parent.parent.parent


def build(
    results: Path,
    out: Path,
    config: Path = REPO / "mkdocs.yml",
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` of `config` reading `results`, into `out`. The build runs with
    a home of its own: the key that signed the test data (this process's) is pinned for it,
    as a maintainer pins theirs (never the folder's own list). `extra_env`: more variables."""
    pins = out.parent / "pinned_keys.json"
    signing.trust_file(pins, signing.local_public())
    env = {
        **os.environ,
        "ARI_RESULTS_DIR": str(results),
        "NO_MKDOCS_2_WARNING": "1",
        "ARI_HOME": str(out.parent / "ari-home"),
        signing.TRUSTED_KEYS_ENV: str(pins),
        **(extra_env or {}),
    }
    return subprocess.run(
        _build_argv(config, out), env=env, capture_output=True, text=True, timeout=600
    )


def _build_argv(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)]


def build_peak(results: Path, out: Path) -> tuple[int, str, int]:
    """`build`, measured: (exit code, its output, the peak resident memory in KiB of the build
    and whatever it waited for). A small interpreter starts the build and reads its
    RUSAGE_CHILDREN: neither this process's (it holds the largest child of every earlier test
    on this worker) nor the build's own `wait4` (a child forked from this large process starts
    its peak at this process's size, which exec keeps) would measure the build alone."""
    peak_file = out.parent / "build-peak.txt"
    measure = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[2:]).returncode\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "open(sys.argv[1], 'w').write(str(peak))\n"
        "sys.exit(code)\n"
    )
    pins = out.parent / "pinned_keys.json"
    signing.trust_file(pins, signing.local_public())
    env = {
        **os.environ,
        "ARI_RESULTS_DIR": str(results),
        "NO_MKDOCS_2_WARNING": "1",
        "ARI_HOME": str(out.parent / "ari-home"),
        signing.TRUSTED_KEYS_ENV: str(pins),
    }
    argv = [
        sys.executable,
        "-S",
        "-c",
        measure,
        str(peak_file),
        *_build_argv(REPO / "mkdocs.yml", out),
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr, int(peak_file.read_text())


TRANSCRIPT_LINES = 8000  # ~270 KB: several pages of the transcript view

# An audit log in the runner's format: one JSON object per `runner` call (test data).
AUDIT_TEXT = (
    '{"argv": ["time_left"], "end_s": 0.043, "exit_code": 0, "note": null, "seq": 1, '
    '"start": "2026-11-22T10:00:00.04+00:00", "start_s": 0.04}\n'
    '{"argv": ["python", "starter/train.py", "--out", "bundles/a b"], "end_s": 128.4, '
    '"exit_code": 1, "note": null, "seq": 2, "start": "2026-11-22T10:00:00.05+00:00", '
    '"start_s": 0.05}\n'
    '{"argv": ["python", "x.py"], "end_s": 3590.0, "exit_code": null, '
    '"note": "refused: reserved window", "seq": 3, "start_s": 3590.0}\n'
    # bytes that are not UTF-8 (0xff 0xfe, then "<b>"), and an argument in no known form
    '{"argv": ["printf", {"b64": "//48Yj4="}, {"b64": "not base64!"}], "end_s": 3591.0, '
    '"exit_code": 0, "note": null, "seq": 4, "start_s": 3591.0}\n'
)
# Usage of gpt-x's runs, by seed (the parts do not overlap; test data).
USAGE = [
    {"input_tokens": 1000, "output_tokens": 200, "reasoning_tokens": 300,
     "cache_read_tokens": 4000, "cache_write_tokens": 500, "cost_usd": 1.25},
    {"input_tokens": 2000, "output_tokens": 100, "reasoning_tokens": None,
     "cache_read_tokens": 6000, "cache_write_tokens": 0, "cost_usd": 0.75},
]  # fmt: skip


def make_fixture(results: Path) -> None:
    """Two tracks, ties, provisional, failed, invalid and legacy runs, artifacts (test data)."""
    fix = {
        "id": "fix-promote",
        "track": "v1-test",
        "date": "2026-11-01",
        "title": "Grade the promoted candidate",
        "description": "Runs before revision 2 were graded on their best public candidate.",
        "revision": 2,
        "action": "legacy",
    }
    write_registry(
        results,
        [
            track_dict(protocol_revision=2, title="Official test track"),
            track_dict("demo-test", demo=True, title="Demo test track", budget_s=600),
        ],
        [fix],
    )
    transcript = "".join(f"step {k}: the agent thinks <b>&</b>\n" for k in range(TRANSCRIPT_LINES))
    rows = [
        ("gpt-x", "high", [62, 66, 70]),  # 66 ± 2.3 -> [63.7, 68.3]
        ("claude-y", None, [58, 64]),  # 61 ± 3 -> [58, 64]: overlaps gpt-x -> tie at 1
        ("gemini-z", "low", [30]),  # single run: provisional, rank 3
        ("o-mini", None, [10, 0, 14]),  # a failed run counted as 0: 8 ± 4.2, rank 4
    ]
    n = 0
    for model, effort, scores in rows:
        for seed, passed in enumerate(scores):
            status = "failed" if passed == 0 else "valid"
            run = run_dict(
                f"run{n}", model=model, effort=effort, seed=seed, passed=passed, status=status,
                revision=2, public=[20.0, 55.0, 80.0 + seed],
            )  # fmt: skip
            if model == "gpt-x" and seed < len(USAGE):  # the third run reports nothing
                run["usage"] = USAGE[seed]
            write_run(results, run, artifacts={"transcript": transcript, "audit": AUDIT_TEXT})
            n += 1
    write_run(results, run_dict("inv0", model="claude-y", seed=9, status="invalid", revision=2))
    # A second scored run of gpt-x's seed 0 (a repeat) and a claude-y run with its own budget:
    # both listed on their row pages, neither averaged (the order above stays as it is).
    write_run(
        results,
        run_dict("rep0", model="gpt-x", effort="high", seed=0, passed=99, revision=2,
                 started_at="2026-11-22T12:00:00Z"),
    )  # fmt: skip
    short = run_dict("odd0", model="claude-y", seed=5, passed=100, revision=2)
    short["timings"]["budget_s"] = 600
    write_run(results, short)
    write_run(results, run_dict("old0", model="old-model", passed=95, revision=1, public=[100.0]))
    demo = run_dict(
        "demo0", track="demo-test", model="scripted-baseline", agent="scripted", passed=5
    )
    demo["timings"]["budget_s"] = 600  # the demo track's budget
    write_run(results, demo)
    for seed in (1, 2):  # run ids as the toolkit makes them: long, so the runs table is wide
        run_id = f"20261122T15205{seed}-scripted-baseline-s{seed}-8735"
        demo = run_dict(run_id, track="demo-test", model="scripted-baseline", agent="scripted",
                        seed=seed, passed=4 + seed)  # fmt: skip
        demo["timings"]["budget_s"] = 600
        write_run(results, demo, artifacts={"audit": AUDIT_TEXT})


# Expected order of the official table: (rank label, model). gpt-x and claude-y overlap.
EXPECTED_ORDER = [("1–2", "gpt-x"), ("1–2", "claude-y"), ("3", "gemini-z"), ("4", "o-mini")]


__all__ = [
    "AUDIT_TEXT",
    "EXPECTED_ORDER",
    "REPO",
    "build",
    "make_fixture",
    "run_dict",
    "track_dict",
    "write_registry",
    "write_run",
]
