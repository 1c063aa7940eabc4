"""Issue #50, item 5: an official track's hidden grading runs alone on its host.

What a host still shares between sandboxes (a file lock on a file both read, free memory, the
task count, CPU time) cannot all be closed, so it is refused instead: every run holds the host
lock shared for its session, an official hidden grading holds it alone (`grading_lock`), and a
campaign that would put two runs of an official track on one host is refused unless its
operator names the measured rate.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from toolkit.campaign import setup
from toolkit.campaign.config import CampaignError
from toolkit.campaign.local_engine import cpu_slots
from toolkit.host import grading_lock
from toolkit.host.grading_lock import HostLock
from toolkit.tracks.model import get_track

REPO = Path(__file__).resolve().parents[1]

# Another process holding the lock shared (a run's session) until its stdin closes.
HOLDER = """
import sys
from pathlib import Path
from toolkit.host.grading_lock import HostLock
lock = HostLock(Path(sys.argv[1]))
lock.share()
print("shared", flush=True)
sys.stdin.read()
"""


def _holder(folder: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "shared\n"
    return holder


def test_a_hidden_grading_waits_for_every_other_session(tmp_path: Path) -> None:
    holder = _holder(tmp_path)
    heard: list[str] = []
    grading = HostLock(tmp_path)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (grading.exclusive(heard.append), done.set()))
    thread.start()
    try:
        assert not done.wait(1.0), "the grading started beside a live session"
        assert heard and "alone on its host" in heard[0]
        assert holder.stdin is not None
        holder.stdin.close()  # the other run's session ends
        assert done.wait(30), "the grading never started"
        assert grading.mode == "exclusive"
    finally:
        holder.kill()
        holder.wait()
        thread.join(30)
    # While it grades, no session starts; once it is over, they do.
    session = HostLock(tmp_path)
    started = threading.Event()
    waiter = threading.Thread(target=lambda: (session.share(), started.set()))
    waiter.start()
    assert not started.wait(1.0), "a session started during a hidden grading"
    grading.release()
    assert started.wait(30)
    waiter.join()
    session.release()


def test_sessions_side_by_side_and_no_starving_a_waiting_grading(tmp_path: Path) -> None:
    """Sessions share the lock; a grading that waits closes the gate to new ones, so sessions
    that keep starting cannot keep it waiting forever."""
    first, second = HostLock(tmp_path), HostLock(tmp_path)
    first.share()
    second.share()  # side by side: no wait
    grading = HostLock(tmp_path)
    thread = threading.Thread(target=grading.exclusive)
    thread.start()
    time.sleep(0.5)  # the grading waits, holding the gate
    late = HostLock(tmp_path)
    late_started = threading.Event()
    late_thread = threading.Thread(target=lambda: (late.share(), late_started.set()))
    late_thread.start()
    assert not late_started.wait(0.5), "a new session slipped in ahead of the waiting grading"
    first.release()
    second.release()
    thread.join(30)
    assert grading.mode == "exclusive"
    assert not late_started.is_set()
    grading.release()
    assert late_started.wait(30)
    late_thread.join()
    late.release()


def test_a_campaign_of_an_official_track_runs_one_at_a_time_unless_the_rate_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(grading_lock.ACCEPT_ENV, "")  # restored after: setup sets it
    official = get_track(REPO / "results", "v1-h100-1h")
    demo = get_track(REPO / "results", "demo-cpu-3")
    rate = grading_lock.accepted_rate()
    setup.accept_host_channel(official, cpu_slots(1), None)  # one at a time: fine
    setup.accept_host_channel(demo, cpu_slots(2), None)  # a demo track: fine
    with pytest.raises(CampaignError) as refused:
        setup.accept_host_channel(official, cpu_slots(2), None)
    assert "official" in str(refused.value) and rate in str(refused.value)
    assert f"--accept-host-channel {rate}" in str(refused.value)
    with pytest.raises(CampaignError, match="name the measured rate"):
        setup.accept_host_channel(official, cpu_slots(2), "1bit/s")
    setup.accept_host_channel(official, cpu_slots(2), rate)
    assert grading_lock.channel_accepted()  # the campaign's runs inherit it


def test_the_command_refuses_two_runs_of_an_official_track_on_one_host(tmp_path: Path) -> None:
    """`campaign run --slots 2` on an official track: refused in one line with the reason and
    the measured rate, before any work; with a wrong rate too."""
    from tests.campaign.conftest import toolkit, write_campaign

    path = write_campaign(tmp_path, seeds=[0, 1], budget=10)
    text = path.read_text().replace('"demo-cpu-3"', '"v1-h100-1h"')
    path.write_text("\n".join(line for line in text.splitlines() if "budget_s" not in line))
    before = sorted(p.name for p in (tmp_path / "results").iterdir())
    out = toolkit("campaign", "run", str(path), "--slots", "2")
    assert out.returncode != 0, out.stdout + out.stderr
    rate = grading_lock.accepted_rate()
    said = " ".join(out.stderr.split())
    assert "is official" in said and f"--accept-host-channel {rate}" in said, out.stderr
    wrong = toolkit("campaign", "run", str(path), "--slots", "2", "--accept-host-channel", "9bit/s")
    assert wrong.returncode != 0 and "name the measured rate" in wrong.stderr, wrong.stderr
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == before
