"""Session-wide test settings: the toolkit's state dir is a temporary folder, never ~/.cache;
under pytest-xdist (`make test` runs the suite on several workers), the tests that share one
host-wide resource run on one worker (`xdist_group`, with `--dist loadgroup`)."""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# One state dir for the whole session so that the default corpus is extracted once (a few
# seconds), not once per test. Set at import time so that subprocesses inherit it too.
# Under pytest-xdist the workers are started by the controller, after it imported this file:
# they inherit its ARI_HOME, so a worker takes a folder of its own in place of the one the
# controller made (one the user set is kept). A shared one would let two workers extract the
# corpus into one file at once (its fixed temporary name: one of them fails) and share one run
# journal.
# Each process removes the folder it made when it exits (the controller's too, which its workers
# do not use), so that a run of the suite leaves nothing in /tmp.
_OURS = "ARI_TEST_HOME"  # the folder this file chose, as opposed to a user's ARI_HOME
_STATE = Path(tempfile.mkdtemp(prefix="ari-test-home-"))
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)
if os.environ.get("ARI_HOME") in (None, "", os.environ.get(_OURS)):
    os.environ["ARI_HOME"] = os.environ[_OURS] = str(_STATE)
    # The host lock of official hidden gradings (`toolkit.host.grading_lock`): each worker's
    # own, so that one worker's gradings never wait for another worker's runs (the lock's
    # own tests give it a folder of theirs).
    os.environ["ARI_HOST_LOCK_DIR"] = str(_STATE)

# One thread per process, in the test processes and in every sandboxed tree they start (a
# caller's own value wins). `make test` runs three workers on CI's two cores, each starting
# sandboxes that would otherwise size their pools to the whole box: more busy threads than
# cores. Measured on 2 cores: tests/grading 340.7 s against 397.6 s, tests/starter 74 s
# against 86-90 s. tests/sandbox/test_cores.py unsets the override for its own sizing tests.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ARI_SANDBOX_THREADS"):
    os.environ.setdefault(_name, "1")
# A run publishes its hidden grading at the end of the grading's time bucket (a minute for a
# normal one: a file's ctime cannot be set back). The suite's runs publish at once; the test of
# that wait (tests/grading/test_channels_ctime.py) sets it back and shortens the bucket.
os.environ.setdefault("ARI_PUBLISH_WAIT", "none")
# Byte-code caches on, as Python has them unless told otherwise. A box may turn them off for
# every process (PYTHONDONTWRITEBYTECODE: the project's 2-core test box does): then each of the
# suite's Python processes (toolkit commands, run and campaign processes, harnesses, helpers)
# compiles the toolkit from its sources again, about 0.3 CPU s a process (`toolkit --version`:
# 0.87 against 0.58 CPU s), and each pytest worker rewrites every test module anew. Operators'
# servers keep the caches; the grader never packs a bundle's (`pack.CACHE_DIR`), git ignores
# them. Set before the workers start, so that they and everything they start inherit it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture
def repo_root() -> Path:
    """The repository root (tests run from a checkout)."""
    return Path(__file__).resolve().parent.parent


# -- the Docker engine (docker backend tests; see tests/docker_engine.py) -----------------------
_engine_failure: list[str] = []


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[object]:
    """A real Docker engine with the project's images, for the whole session (else skip/fail)."""
    from tests import docker_engine as support

    if _engine_failure:
        support.unavailable(_engine_failure[0])
    try:
        engine = support.start_engine()
    except Exception as exc:
        _engine_failure.append(f"{type(exc).__name__}: {exc}")
        support.unavailable(_engine_failure[0])
    print(f"\ndocker engine: {engine.how} in {engine.setup_s:.1f}s ({engine.host})")
    yield engine
    support.stop_engine(engine)


# -- parallel runs (pytest-xdist) ----------------------------------------------------------------
# Each worker is a process of its own, with its own ARI_HOME (set above at import). What cannot
# be had twice on one host runs on one worker: the Docker engine and its images (a second
# session would start a second dockerd and build the images again), the Ray cluster, the
# real-kernel cgroup tests (they make and remove the toolkit's top-level cgroup), and the tests
# that scan the host's shared scratch places (/tmp, /var/tmp, /dev/shm) for what a sandbox left.
# A module with a module-scoped set-up keeps its tests on one worker (`_builds_per_module`).
_GROUPS: dict[str, tuple[str, ...]] = {
    "ray": ("tests/campaign/test_ray_campaign.py",),
    "cgroup-kernel": ("tests/sandbox/test_cgroup2_real.py", "tests/sandbox/test_cgroup2_kernel.py"),
    "host-scratch": (
        "tests/sandbox/test_sandbox_persistence.py",
        "tests/grading/test_grade_persistence.py",
    ),
}


@functools.cache
def _resolved(path: str) -> Path:
    """A path resolved once per collection: resolving each test's file and each of its
    fixtures' files anew took 2.5 of a worker's 9 CPU seconds of collection."""
    return Path(path).resolve()


def _group(item: pytest.Item) -> str | None:
    path = _resolved(str(item.path))
    try:
        rel = path.relative_to(_resolved(__file__).parent.parent)
    except ValueError:
        rel = path  # a test file outside the checkout (a suite a test runs)
    # A backend parameter ("docker") asks for the engine inside the test (getfixturevalue).
    params = getattr(getattr(item, "callspec", None), "params", {})
    if (
        rel.parts[:2] == ("tests", "docker")
        or "docker_engine" in getattr(item, "fixturenames", ())
        or "docker" in params.values()
    ):
        return "docker"
    for group, files in _GROUPS.items():
        if rel.as_posix() in files:
            return group
    if _builds_per_module(item):
        return f"module:{rel.as_posix()}"
    return None


def _builds_per_module(item: pytest.Item) -> bool:
    """Does the test use a module- or class-scoped fixture written in its own module (a trained
    bundle, a built exam)? Its module's tests then share a worker, which builds it once: spread
    over the workers, each of them would build it again."""
    info = getattr(item, "_fixtureinfo", None)
    module = _resolved(str(item.path))
    for defs in getattr(info, "name2fixturedefs", {}).values():
        for fixturedef in defs:
            code = getattr(getattr(fixturedef, "func", None), "__code__", None)
            here = code is not None and _resolved(code.co_filename) == module
            if here and fixturedef.scope in ("module", "class"):
                return True
    return False


# The `slow` marker (`make test-quick` runs `-m "not slow"`) comes from measured seconds, not
# from a hand: tests/slow.json names the test files a recorded run measured, and in them every
# test that took at least its threshold (`scripts/suite-slow.py` writes it from a CPU log;
# testing.md, "The quick lane"). A test in a file it does not name (a new file) counts as slow
# until the file is measured, so the quick lane never grows by a test nobody has timed.
SLOW_FILE = Path(__file__).resolve().parent / "slow.json"
GROUP_SUFFIX = re.compile(r"@(docker|ray|cgroup-kernel|host-scratch|module:[^@\[\]]+)$")


@dataclass(frozen=True)
class Measured:
    files: frozenset[str]  # the test files the recorded run measured whole
    slow: frozenset[str]  # the tests in them that reached the threshold

    def is_slow(self, nodeid: str) -> bool:
        test = _base_id(nodeid)
        return test in self.slow or test.split("::", 1)[0] not in self.files


def _measured() -> Measured | None:
    if not SLOW_FILE.is_file():
        return None  # no measurement at all: nothing is marked
    data = json.loads(SLOW_FILE.read_text(encoding="utf-8"))
    return Measured(frozenset(data["files"]), frozenset(data["tests"]))


def _base_id(nodeid: str) -> str:
    """A test's id without the xdist group that xdist or `_name_groups` appends ("...@docker")."""
    return GROUP_SUFFIX.sub("", nodeid)


_ORDER = os.environ.get("ARI_TEST_ORDER", "")  # "reverse": run the tests last to first


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test's xdist group; under xdist, spread each file's tests over the run; with
    ARI_TEST_ORDER=reverse, reverse the order.

    A test that passes only after some other test ran (it reads state they share: the
    worker's operator log, its ARI_HOME) passes in the usual order and fails reversed: a
    maintainer's check, one suite run (testing.md, "Order")."""
    if _ORDER not in ("", "reverse"):
        raise pytest.UsageError(f"ARI_TEST_ORDER={_ORDER!r}: the one order offered is 'reverse'")
    if config.getoption("loadgroup", False):  # on a worker of `--dist loadgroup`
        items[:] = _spread(items)
    if _ORDER == "reverse":
        items.reverse()
    measured = _measured()
    for item in items:
        if measured is not None and measured.is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if config.getoption("loadgroup", False):  # set on a worker of `--dist loadgroup`
        _name_groups(items)


def _spread(items: list[pytest.Item]) -> list[pytest.Item]:
    """Each test file's tests spread evenly over the whole run, in their own order.

    The workers take the tests about in collection order, so in file order the three of them
    were in one folder at a time: all in tests/agents, whose relays and providers mostly wait
    (a minute of idle cores on 2), then all in tests/grading, which wants more than 2 cores.
    Spread out, each stretch of the run mixes the folders. File F's test i sits at
    (i + u_F) / n_F, where n_F is F's count and u_F in [0, 1) a fixed hash of F's name: the
    order is the same on every worker (xdist requires it) and from run to run. Groups are not
    affected: xdist sends each group whole, first, in its own order. Only under xdist: a
    single process would set up a module's fixtures again each time it came back to it."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    placed: list[tuple[float, pytest.Item]] = []
    for name, tests in files.items():
        offset = zlib.crc32(name.encode()) / 2**32
        placed += [((i + offset) / len(tests), t) for i, t in enumerate(tests)]
    return [item for _, item in sorted(placed, key=lambda p: p[0])]  # stable: ties keep order


def _name_groups(items: list[pytest.Item]) -> None:
    """Put each test's group at the end of its node id ("...@docker"), where xdist's scheduler
    looks for it. xdist 3.8 writes it to `item._nodeid`, which pytest 9.2 no longer reads (the
    id is `item._id`): the groups were then silently ignored and, say, two workers each started
    a dockerd. Done here only where the id came out without its group (pytest 9's ids)."""
    try:
        from _pytest.nodeid import NodeId  # pytest 9.2's ids; older ones: xdist's rename works
    except ImportError:
        return
    for item in items:
        marks = item.iter_markers("xdist_group")
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
        )
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]


_CPU_LOG = os.environ.get("ARI_TEST_CPU_LOG")  # a file: each test's wall and CPU seconds


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ARI_TEST_CPU_LOG=FILE, one JSON line per test: its wall time, and the CPU time of
    its worker and of the processes it waited for (docker containers are not counted). On two
    cores the wall times of a loaded suite say little of what each test costs; the CPU does
    (`scripts/suite-cpu.py FILE`)."""
    if not _CPU_LOG:
        yield
        return

    def cpu(who: int) -> float:
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    started = time.monotonic(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    yield
    entry = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "end": time.time(),
        "wall_s": round(time.monotonic() - started[0], 3),
        "cpu_s": round(cpu(resource.RUSAGE_SELF) - started[1], 3),
        "children_cpu_s": round(cpu(resource.RUSAGE_CHILDREN) - started[2], 3),
    }
    with open(_CPU_LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
