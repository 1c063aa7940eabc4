"""Benchmark: statistics and `mkdocs build` for 10,000 runs over 200 rows and 3 tracks.

Everything is synthetic TEST DATA generated into a temporary folder (model names say so); the
repository's results/ is never touched. Prints seconds for each stage, and ratios against
references measured in the same process, so numbers from different machines can be compared:

- load: read + validate every results file (pydantic) and check its ed25519 signature, vs a bare
  `json.loads` of the same files (every synthetic run is signed, with a key made for the run of
  the benchmark in its temporary folder);
- statistics: rows, mean, SE and overlap-aware ranks for every track (target < 1 s);
- build: `mkdocs build --strict` of the whole site (target < 60 s on 2 cores), vs a build of
  an empty results folder (mkdocs + theme overhead).

Usage: .venv/bin/python benchmarks/bench_site.py [--runs 10000] [--rows 200] [--tracks 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from toolkit.results import signing
from toolkit.stats import leaderboard, load_results

REPO = Path(__file__).resolve().parent.parent
EXAM = "3f571c9c" + "0" * 56


def _track(i: int) -> dict[str, Any]:
    return {
        "id": f"bench-{i}",
        "title": f"Benchmark track {i} (synthetic test data)",
        "benchmark_version": "1.0",
        "exam_sha256": EXAM[:8],
        "exam_questions": 100,
        "budget_s": 3600,
        "per_call_limit_s": 1200,
        "reserved_s": 300,
        "size_limit_bytes": 16_000_000,
        "hardware": "synthetic",
        "protocol_revision": 2,
    }


def _run(
    run_id: str,
    track: str,
    model: str,
    effort: str | None,
    seed: int,
    rng: random.Random,
    artifacts: dict[str, str],
) -> dict[str, Any]:
    status = rng.choices(["valid", "failed", "invalid"], weights=[90, 7, 3])[0]
    passed = 0 if status == "failed" else rng.randint(0, 100)
    candidates = [
        {
            "id": f"c{k:03d}",
            "submitted_at": f"2026-11-22T10:{10 + k:02d}:00Z",
            "elapsed_s": 300.0 * (k + 1),
            "sha256": f"{k:064x}",
            "packed_bytes": rng.randint(100_000, 16_000_000),
            "public_score": float(rng.randint(0, 100)),
        }
        for k in range(rng.randint(1, 8))
    ]
    last = candidates[-1]
    return {
        "run_id": run_id,
        "track": track,
        "model": model,
        "effort": effort,
        "agent": "opencode",
        "seed": seed,
        "started_at": "2026-11-22T10:00:00Z",
        "status": status,
        "status_reason": None if status == "valid" else "synthetic",
        "score": {"percent": float(passed), "passed": passed, "total": 100},
        "bits_per_byte": round(rng.uniform(0.8, 3.0), 4) if status != "failed" else None,
        "families": {
            "passages": {"passed": passed // 2, "total": 50},
            "records": {"passed": passed - passed // 2, "total": 50},
        },
        "promoted": None
        if status == "failed"
        else {
            "id": last["id"],
            "sha256": last["sha256"],
            "packed_bytes": last["packed_bytes"],
            "promoted_at": last["submitted_at"],
            "elapsed_s": last["elapsed_s"],
        },
        "candidates": candidates,
        "timings": {"budget_s": 3600, "used_s": 3500, "runner_s": 3000},
        "config": {
            "toolkit_version": "bench",
            "task_brief_sha256": "c" * 64,
            "exam_sha256": EXAM,
            "public_set_sha256": "b" * 64,
            "backend": "local",
            # about 5% legacy runs, graded under the superseded revision 1
            "protocol_revision": 1 if rng.random() < 0.05 else 2,
        },
        "artifacts": artifacts,
    }


def generate(root: Path, runs: int, rows: int, tracks: int, with_artifacts: bool) -> None:
    """Write the synthetic results folder."""
    rng = random.Random(0)
    root.mkdir(parents=True)
    (root / "tracks.json").write_text(json.dumps([_track(i) for i in range(tracks)]), "utf-8")
    for i in range(runs):
        row = i % rows
        track = f"bench-{row % tracks}"
        model, effort = f"synthetic-model-{row // 2:03d}", ["low", "high"][row % 2]
        run_id = f"run{i:05d}"
        folder = root / track
        folder.mkdir(exist_ok=True)
        artifacts = {}
        if with_artifacts:
            (folder / run_id).mkdir()
            lines = "".join(f"[{k:04d}] synthetic transcript line\n" for k in range(60))
            (folder / run_id / "transcript.txt").write_text(lines, "utf-8")
            (folder / run_id / "audit.jsonl").write_text('{"call": "runner"}\n' * 10, "utf-8")
            artifacts = {
                "transcript": f"{run_id}/transcript.txt",
                "audit": f"{run_id}/audit.jsonl",
            }
        run = _run(run_id, track, model, effort, i // rows, rng, artifacts)
        run["signature"] = signing.sign(run).model_dump()
        (folder / f"{run_id}.json").write_text(json.dumps(run), "utf-8")
    signing.trust(root, signing.local_public())


def _build(results: Path, out: Path) -> float:
    env = {**os.environ, "ARI_RESULTS_DIR": str(results), "NO_MKDOCS_2_WARNING": "1"}
    cmd = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "-q",
        "-f",
        str(REPO / "mkdocs.yml"),
        "-d",
        str(out),
    ]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"mkdocs build failed:\n{done.stdout}{done.stderr}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--tracks", type=int, default=3)
    parser.add_argument("--no-artifacts", action="store_true", help="runs without logs")
    parser.add_argument("--skip-build", action="store_true", help="statistics only")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ari-bench-site-") as tmp:
        os.environ["ARI_HOME"] = str(Path(tmp) / "home")  # the signing key, made for this run
        results = Path(tmp) / "results"
        start = time.perf_counter()
        generate(results, args.runs, args.rows, args.tracks, not args.no_artifacts)
        print(
            f"generated {args.runs} synthetic runs, {args.rows} rows, {args.tracks} tracks "
            f"in {time.perf_counter() - start:.2f} s (test data)"
        )

        start = time.perf_counter()
        for path in sorted(results.glob("*/*.json")):
            json.loads(path.read_bytes())
        ref_load = time.perf_counter() - start

        start = time.perf_counter()
        loaded = load_results(results)
        load_s = time.perf_counter() - start

        unverified = sum(1 for r in loaded.runs if r.unverified)
        assert unverified == 0, f"{unverified} synthetic runs do not verify"

        start = time.perf_counter()
        boards = {t: leaderboard(loaded, t) for t in loaded.tracks}
        stats_s = time.perf_counter() - start
        n_rows = sum(len(b) for b in boards.values())

        print(
            f"load + validate : {load_s:7.3f} s  ({load_s / ref_load:.1f}x bare json.loads "
            f"{ref_load:.3f} s)"
        )
        print(
            f"statistics      : {stats_s:7.3f} s  ({n_rows} rows incl. legacy; target < 1 s: "
            f"{'ok' if stats_s < 1 else 'MISSED'})"
        )
        if args.skip_build:
            return
        empty = Path(tmp) / "empty"
        empty.mkdir()
        ref_build = _build(empty, Path(tmp) / "public-empty")
        build_s = _build(results, Path(tmp) / "public")
        pages = sum(1 for _ in (Path(tmp) / "public").rglob("*.html"))
        print(
            f"mkdocs build    : {build_s:7.3f} s  ({pages} HTML files; {build_s / ref_build:.1f}x "
            f"an empty site {ref_build:.2f} s; target < 60 s: "
            f"{'ok' if build_s < 60 else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
