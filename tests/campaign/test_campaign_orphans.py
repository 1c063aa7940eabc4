"""A run never outlives its campaign driver unnoticed, and interruptions use no attempt.

The attack: a driver killed while its run process is still importing (about a third of a second
on an idle box) used to leave a run whose watcher watched init: it ran to the end unsupervised
and kept its claim, so a restarted driver waited on it while more runs than slots went on.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.campaign.conftest import write_campaign
from toolkit.campaign.claims import Claims, holder
from toolkit.campaign.job import Report, make_job
from toolkit.campaign.plan import KeyPlan, RunKey
from toolkit.campaign.setup import open_campaign
from toolkit.results.model import RunResult

# The driver: names itself for its run process, starts it, and dies at once (the run process
# is then still importing the toolkit).
DYING_DRIVER = """
import os, subprocess, sys
from toolkit.campaign.child import PARENT_ENV, parent_token
env = dict(os.environ)
env[PARENT_ENV] = parent_token()
child = subprocess.Popen(
    [sys.executable, "-m", "toolkit.campaign.child", sys.argv[1], sys.argv[2]],
    env=env, stdin=subprocess.DEVNULL, start_new_session=True,
)
print(child.pid, flush=True)
os._exit(0)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_run_whose_driver_dies_while_it_starts_stops_at_once(tmp_path: Path) -> None:
    file = write_campaign(tmp_path, seeds=[0], budget=30)
    campaign = open_campaign(file)
    key = RunKey("demo-cpu-3", "scripted-baseline", None, 0)
    results = tmp_path / "results"
    job = make_job(campaign.file, campaign.track, key, attempt=1, results_dir=results)
    job_file, report_file = tmp_path / "job.json", tmp_path / "report.json"
    job_file.write_text(job.model_dump_json())
    driver = subprocess.run(
        [sys.executable, "-c", DYING_DRIVER, str(job_file), str(report_file)],
        capture_output=True,
        text=True,
        check=True,
    )
    child = int(driver.stdout.strip())
    deadline = time.monotonic() + 300
    while not _gone(child):
        assert time.monotonic() < deadline, "the orphaned run process is still running"
        time.sleep(0.2)
    report = Report.model_validate_json(report_file.read_text())
    assert report.error is not None and "its campaign driver died" in report.error, report
    # It stopped before its run began: nothing ran unsupervised, nothing was published.
    assert list(results.glob("*/*.json")) == []


def test_plan_shows_a_claimed_key_as_running(tmp_path: Path) -> None:
    key = RunKey("demo-cpu-3", "scripted-baseline", None, 0)
    assert holder(tmp_path, key) is None
    claims = Claims(tmp_path)
    assert claims.claim(key)
    assert holder(tmp_path, key) is not None  # another process looking sees it held
    claims.release_all()
    assert holder(tmp_path, key) is None


def test_interrupted_runs_use_no_attempt() -> None:
    """A driver killed N times does not make its campaign give up on a key: only invalid
    results the harness judged so itself use attempts."""
    from tests.stats.results_factory import run_dict

    key = RunKey("demo-cpu-3", "scripted-baseline", None, 0)
    base = RunResult.model_validate(run_dict("r0", status="invalid", status_reason="x", passed=0))
    interrupted = base.model_copy(update={"interrupted": True})
    broken = base.model_copy(update={"interrupted": False})
    plan = KeyPlan(key, "rerun", [(Path(f"r{i}.json"), interrupted) for i in range(5)])
    assert plan.invalid_count == 0
    plan.results.append((Path("x.json"), broken))
    assert plan.invalid_count == 1
