"""The suite on pytest-xdist workers (`make test`), checked by running a small suite on two
workers with the real tests/conftest.py and looking at what each test saw.

- Each worker has a state dir (ARI_HOME) of its own, and a user's is kept. The controller
  imports tests/conftest.py before it starts the workers, which inherit its environment: without
  care they would share its ARI_HOME, and two of them extracting the default corpus at once
  collide on its temporary file (one fails).
- Tests of one `xdist_group` run on one worker under `--dist loadgroup` (with pytest 9.2,
  xdist 3.8 alone ignores the groups: tests/conftest.py names them in the node ids), and so do
  the tests of a module with a module-scoped fixture (it is built once, not once per worker).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    import pytest

    @pytest.mark.parametrize("i", range(8))
    def test_probe(i, worker_id):
        time.sleep(0.2)  # long enough that both workers get some of the tests
        out = Path(os.environ["PROBE_OUT"]) / f"{i}.txt"
        out.write_text(worker_id + " " + os.environ.get("ARI_HOME", ""))

    @pytest.mark.xdist_group("together")
    @pytest.mark.parametrize("i", range(6))
    def test_grouped(i, worker_id):
        time.sleep(0.2)
        (Path(os.environ["PROBE_OUT"]) / f"group-{i}.txt").write_text(worker_id)

    @pytest.fixture(scope="module")
    def built_once():
        return "a costly set-up"

    @pytest.mark.parametrize("i", range(6))
    def test_shared_setup(i, built_once, worker_id):
        time.sleep(0.2)
        (Path(os.environ["PROBE_OUT"]) / f"module-{i}.txt").write_text(worker_id)
    """
)


def _run(tmp_path: Path, **env: str) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """Run the probe on 2 workers: each worker's ARI_HOMEs, the workers that ran the group's
    tests, and those that ran the tests of the module-scoped fixture."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    out = tmp_path / "out"
    out.mkdir()
    environ = {k: v for k, v in os.environ.items() if k not in ("ARI_HOME", "ARI_TEST_HOME")}
    scratch = tmp_path / "tmp"  # the inner session's temporary folders: checked afterwards
    scratch.mkdir()
    environ.update(PROBE_OUT=str(out), TMPDIR=str(scratch), **env)
    environ.pop("PYTEST_XDIST_WORKER", None)  # this test may itself run on a worker
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-n", "2", "--dist=loadgroup", "-p", "tests.conftest"]  # the real conftest
    command += ["--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"), str(probe)]
    done = subprocess.run(
        command,
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen: dict[str, set[str]] = {}
    for file in sorted(out.glob("[0-9]*.txt")):
        worker, home = file.read_text().split(" ", 1)
        seen.setdefault(worker, set()).add(home)
    grouped = {file.read_text() for file in out.glob("group-*.txt")}
    assert len(list(out.glob("group-*.txt"))) == 6, done.stdout
    module = {file.read_text() for file in out.glob("module-*.txt")}
    assert len(list(out.glob("module-*.txt"))) == 6, done.stdout
    return seen, grouped, module


def test_each_worker_has_a_state_dir_of_its_own(tmp_path: Path) -> None:
    seen, _, _ = _run(tmp_path)
    assert len(seen) == 2, seen  # both workers ran tests
    homes = [home for found in seen.values() for home in found]
    assert all(len(found) == 1 for found in seen.values()), seen  # one per worker
    assert len(set(homes)) == 2, f"the workers share a state dir: {seen}"
    assert all(Path(home).name.startswith("ari-test-home-") for home in homes), seen
    # ... and the session removes them (and the controller's) when it ends: none is left behind.
    assert not list((tmp_path / "tmp").glob("ari-test-home-*")), "the suite left state dirs"


def test_a_state_dir_the_user_set_is_kept(tmp_path: Path) -> None:
    mine = tmp_path / "my-home"
    seen, _, _ = _run(tmp_path, ARI_HOME=str(mine))
    assert {home for found in seen.values() for home in found} == {str(mine)}, seen


def test_the_tests_of_a_group_run_on_one_worker(tmp_path: Path) -> None:
    seen, grouped, module = _run(tmp_path)
    assert len(seen) == 2, seen  # both workers had tests: the group could have been split
    assert len(grouped) == 1, f"the group's tests ran on {sorted(grouped)}"
    assert len(module) == 1, f"the module-scoped fixture was built on {sorted(module)}"


class _Test:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_each_files_tests_are_spread_over_the_run_in_their_own_order() -> None:
    """Under xdist the workers take the tests about in the order given: in file order all of
    them were in one folder at once (tests/agents, which mostly waits: idle cores). Spread,
    every stretch of the run holds a share of each file, and the order is the same each time."""
    from tests.conftest import _spread

    sizes = {"tests/agents/test_relay.py": 40, "tests/grading/test_x.py": 20}
    sizes |= {f"tests/run/test_{i}.py": 1 for i in range(12)}
    items = [_Test(f"{f}::t{i}") for f, n in sizes.items() for i in range(n)]
    spread = _spread(items)  # type: ignore[arg-type]
    assert sorted(t.nodeid for t in spread) == sorted(t.nodeid for t in items)
    assert [t.nodeid for t in _spread(items)] == [t.nodeid for t in spread]  # type: ignore[arg-type]
    for file, n in sizes.items():
        mine = [t.nodeid for t in spread if t.nodeid.startswith(file + "::")]
        assert mine == [f"{file}::t{i}" for i in range(n)]  # a file's own order is kept
    for quarter in range(4):  # each quarter of the run: about a quarter of each large file
        part = spread[quarter * len(spread) // 4 : (quarter + 1) * len(spread) // 4]
        for file in ("tests/agents/test_relay.py", "tests/grading/test_x.py"):
            share = sum(t.nodeid.startswith(file) for t in part) / sizes[file]
            assert 0.15 <= share <= 0.35, (quarter, file, share)
    # The one-test files are not bunched at one place (all at "half way"): spread too.
    places = [i for i, t in enumerate(spread) if t.nodeid.startswith("tests/run/")]
    assert places[-1] - places[0] > len(spread) // 2, places
