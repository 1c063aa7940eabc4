"""A real Docker engine for the tests: the caller's, or a private dockerd started for the session.

Order: `ARI_TEST_DOCKER_HOST` or `DOCKER_HOST` if set (an engine the user runs, with the images
built or buildable), else the default socket if it answers, else, as root with Debian's
`docker.io` installed (`scripts/test-setup.sh` installs it), a private `dockerd`: its own
socket, data root, exec root and pid file under /var/tmp, `--iptables=false --ip6tables=false
--bridge=none` (it leaves the host's network alone), stopped by its pid at the end.

The private engine keeps its data root in /var/tmp/ari-test-dockerd between sessions (one
session at a time holds it, by a lock; another gets a folder of its own, removed at the end),
so the images are built once per machine. Images: built when missing: a Debian base from
`debootstrap` (no registry needed), then the project's images on it. A saved copy (`docker
save`) keyed by the image sources is kept in /var/tmp/ari-docker-cache, so an engine without
them (a fresh folder) loads them in seconds instead of building for minutes.

Outside CI, a missing engine skips the docker tests with the reason; with CI=true it fails them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolkit.images import ROLES, current
from toolkit.sandbox.docker import engine as docker_engine

CACHE_DIR = Path("/var/tmp/ari-docker-cache")
BASE_TAG = "ari-bench/base:bookworm"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@dataclass
class Engine:
    host: str
    pid: int | None  # the private dockerd we started, else None
    setup_s: float
    how: str


def unavailable(reason: str) -> None:
    """Fail in CI, skip elsewhere: a docker test never silently passes without its engine."""
    if IN_CI:
        pytest.fail(f"docker engine needed in CI: {reason}", pytrace=False)
    pytest.skip(f"no Docker engine: {reason}")


def _answers(host: str) -> bool:
    import docker

    path = host.removeprefix("unix://")
    if not os.path.exists(path):
        return False
    try:
        docker.DockerClient(base_url=host, version=docker_engine.API_VERSION, timeout=10).ping()
    except Exception:
        return False
    return True


def _start_private(work: Path) -> tuple[str, int]:
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise RuntimeError("dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        raise RuntimeError("a private dockerd needs root")
    work.mkdir(parents=True, exist_ok=True)
    _stop_stale(work)
    sock = work / "docker.sock"
    pool = f"base=10.{100 + os.getpid() % 100}.0.0/16,size=24"
    log = (work / "dockerd.log").open("ab")
    process = subprocess.Popen(
        [
            dockerd, "--iptables=false", "--ip6tables=false", "--bridge=none",
            "--host", f"unix://{sock}", "--data-root", str(work / "data"),
            "--exec-root", str(work / "exec"), "--pidfile", str(work / "dockerd.pid"),
            "--default-address-pool", pool,
        ],
        stdout=log,
        stderr=log,
        start_new_session=True,  # Ctrl-C is the session's to handle, not the engine's
        # ...but a session that dies without its teardown (Ctrl-C on `make test` kills the
        # xdist workers) must not leave the engine running: it dies with this process.
        preexec_fn=die_with_parent(os.getpid()),
    )  # fmt: skip
    host = f"unix://{sock}"
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if process.poll() is not None:
            raise RuntimeError(f"dockerd exited at start; see {work / 'dockerd.log'}")
        if sock.exists() and _answers(host):
            return host, process.pid
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGTERM)
    raise RuntimeError(f"dockerd did not answer within 60 s; see {work / 'dockerd.log'}")


def die_with_parent(parent: int) -> Callable[[], None]:
    """A `preexec_fn` that makes the child get SIGTERM when `parent` (the process that
    starts it) dies, however it dies (Linux `PR_SET_PDEATHSIG`; kept across exec)."""

    def arm() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


PR_SET_PDEATHSIG = 1


def _stop_stale(work: Path) -> None:
    """A dockerd left running on this folder by a session that died (we hold the lock now)."""
    try:
        pid = int((work / "dockerd.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"dockerd" in cmdline and str(work).encode() in cmdline:
        stop_private(pid, work, keep_data=True)


def stop_private(pid: int, work: Path, *, keep_data: bool = False) -> None:
    """Stop our dockerd by its pid (SIGTERM, then SIGKILL); remove its state, or all but its
    data root (images) when `keep_data` (the shared folder: the next session starts at once)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # What the engine leaves mounted under its folders (its network namespace file, overlays).
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f if line.split()[1].startswith(f"{work}/")]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
    if keep_data:
        shutil.rmtree(work / "exec", ignore_errors=True)
        (work / "docker.sock").unlink(missing_ok=True)
    else:
        shutil.rmtree(work, ignore_errors=True)


def ensure_images() -> str:
    """Make sure the current images exist on the engine (load the cache or build)."""
    from toolkit.images.build import (
        SOURCES_LABEL,
        build_debootstrap_base,
        build_images,
        sources_digest,
    )

    client = docker_engine.connect()
    wanted = [current().ref(role) for role in ROLES]
    key = sources_digest()

    def up_to_date() -> bool:
        tags = {t: i for i in client.api.images() for t in i.get("RepoTags") or []}
        return all(
            ref in tags and (tags[ref].get("Labels") or {}).get(SOURCES_LABEL) == key
            for ref in wanted
        )

    if up_to_date():
        return "present"
    have = {tag for image in client.api.images() for tag in image.get("RepoTags") or []}
    cache = CACHE_DIR / f"images-{key}.tar"
    host = os.environ["DOCKER_HOST"]
    if cache.is_file():
        subprocess.run(["docker", "-H", host, "load", "-q", "-i", str(cache)], capture_output=True)
        if up_to_date():
            return "loaded from cache"
    if BASE_TAG not in have:
        build_debootstrap_base(client, BASE_TAG)
    build_images(client, base=BASE_TAG)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    for old in CACHE_DIR.glob("images-*"):
        old.unlink()
    part = cache.with_suffix(".part")
    saved = subprocess.run(
        ["docker", "-H", host, "save", "-o", str(part), *wanted], capture_output=True
    )
    if saved.returncode == 0:  # only a cache: the images are built either way
        part.rename(cache)
    return "built"


def start_engine() -> Engine:
    """Find or start an engine and make sure the images are there; set DOCKER_HOST."""
    started = time.monotonic()
    explicit = os.environ.get("ARI_TEST_DOCKER_HOST") or os.environ.get("DOCKER_HOST")
    pid = None
    if explicit:
        host, how = explicit, "given engine"
    elif _answers("unix:///var/run/docker.sock"):
        host, how = "unix:///var/run/docker.sock", "default engine"
    else:
        host, pid = _start_private(private_dir())
        how = f"private dockerd in {private_dir()}"
    os.environ["DOCKER_HOST"] = host
    try:
        how += ", images " + ensure_images()
    except BaseException:
        if pid is not None:  # ours: stop it, whatever went wrong
            stop_engine(Engine(host, pid, 0.0, how))
        raise
    return Engine(host=host, pid=pid, setup_s=time.monotonic() - started, how=how)


def stop_engine(engine: Engine) -> None:
    """Stop the private dockerd of this session (an engine we did not start is left alone)."""
    if engine.pid is not None:
        stop_private(engine.pid, private_dir(), keep_data=private_dir() == SHARED_DIR)


SHARED_DIR = Path("/var/tmp/ari-test-dockerd")
_lock: list[int] = []


def private_dir() -> Path:
    """The shared engine folder (its images survive the session) if no other session on this
    machine holds it; else a folder of this session's own, removed at the end."""
    import fcntl

    if not _lock:
        SHARED_DIR.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{SHARED_DIR}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _lock.append(fd)
        except OSError:
            os.close(fd)
            _lock.append(-1)
    return SHARED_DIR if _lock[0] >= 0 else Path(f"/var/tmp/ari-test-dockerd-{os.getpid()}")
