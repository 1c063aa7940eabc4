"""A real Docker engine for the tests: the caller's, or a private dockerd started for the session.

Order: `ARI_TEST_DOCKER_HOST` or `DOCKER_HOST` if set (an engine the user runs, with the images
built or buildable), else the default socket if it answers, else, as root with Debian's
`docker.io` installed (`scripts/test-setup.sh` installs it), a private `dockerd`: its own
socket, data root, exec root and pid file under /var/tmp, `--iptables=false --ip6tables=false
--bridge=none` (it leaves the host's network alone), stopped by its pid at the end.

Images: built once per engine when missing: a Debian base from `debootstrap` (no registry
needed), then the project's images on it. A saved copy (`docker save`) keyed by the image
sources is kept in /var/tmp/ari-docker-cache, so the next session on this machine loads them in
seconds instead of building for minutes.

Outside CI, a missing engine skips the docker tests with the reason; with CI=true it fails them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolkit.images import IMAGES_DIR, ROLES, current
from toolkit.sandbox import docker_engine

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
        start_new_session=True,
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


def stop_private(pid: int, work: Path) -> None:
    """Stop our dockerd by its pid (SIGTERM, then SIGKILL), and remove its state."""
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
    shutil.rmtree(work, ignore_errors=True)


def images_key() -> str:
    """What the images are made of: their sources and the Python packages they install."""
    from toolkit.images.build import torch_requirements

    digest = hashlib.sha256()
    for path in sorted(IMAGES_DIR.iterdir()):
        if path.suffix in (".c", ".py", ".Dockerfile") and path.name != "__init__.py":
            digest.update(path.name.encode() + path.read_bytes())
    digest.update(repr(torch_requirements("cpu")).encode())
    return digest.hexdigest()[:16]


def ensure_images() -> str:
    """Make sure the current images exist on the engine (load the cache or build)."""
    from toolkit.images.build import build_debootstrap_base, build_images

    client = docker_engine.connect()
    wanted = [current().ref(role) for role in ROLES]
    have = {tag for image in client.api.images() for tag in image.get("RepoTags") or []}
    if all(ref in have for ref in wanted):
        return "present"
    cache = CACHE_DIR / f"images-{images_key()}.tar"
    host = os.environ["DOCKER_HOST"]
    if cache.is_file():
        subprocess.run(["docker", "-H", host, "load", "-q", "-i", str(cache)], capture_output=True)
        have = {tag for image in client.api.images() for tag in image.get("RepoTags") or []}
        if all(ref in have for ref in wanted):
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
        how = "private dockerd"
    os.environ["DOCKER_HOST"] = host
    try:
        how += ", images " + ensure_images()
    except BaseException:
        if pid is not None:  # ours: stop it, whatever went wrong
            stop_private(pid, private_dir())
        raise
    return Engine(host=host, pid=pid, setup_s=time.monotonic() - started, how=how)


def private_dir() -> Path:
    return Path(f"/var/tmp/ari-test-dockerd-{os.getpid()}")
