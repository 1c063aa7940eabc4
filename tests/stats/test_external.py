"""External data: MLE-bench's published mean ± SEM for one agent, from its per-seed counts.

Each split becomes a track whose exam has as many questions as the split has competitions; each
seed becomes a run that "passed" its any-medal count. The statistics must reproduce the
published numbers to the published precision (two decimals).
"""

from __future__ import annotations

import json
from pathlib import Path

from results_factory import run_dict, track_dict, write_registry, write_run

from toolkit.stats import leaderboard, load_results

DATA = Path(__file__).parent / "data" / "mle_bench_famou_agent.json"


def test_famou_agent_any_medal_reproduces_the_published_numbers(tmp_path: Path) -> None:
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    results = tmp_path / "results"
    tracks = []
    for i, (split, info) in enumerate(doc["splits"].items()):
        exam = f"{i:08x}"
        tracks.append(
            track_dict(f"mle-{split}", exam_sha256=exam, exam_questions=info["competitions"])
        )
        for seed, medals in enumerate(info["medals"]):
            total = info["competitions"]
            run = run_dict(f"{split}-s{seed}", track=f"mle-{split}", model=doc["agent"], seed=seed)
            run["score"] = {"percent": 100 * medals / total, "passed": medals, "total": total}
            run["families"] = {}
            run["config"]["exam_sha256"] = exam + "0" * 56
            write_run(results, run)
    write_registry(results, tracks)
    loaded = load_results(results)
    for split, info in doc["splits"].items():
        (row,) = leaderboard(loaded, f"mle-{split}")
        assert row.n == 3 and not row.provisional
        assert row.se is not None
        mean, sem = info["published"]
        assert (round(row.mean or 0.0, 2), round(row.se, 2)) == (mean, sem), split
