"""Exit statuses no sandboxed process can forge; nothing it writes lands on the host uncapped
(issue 17.4).

Found by an attacker: each container had a host status folder bind-mounted, owned by the
sandbox user, with no size cap. A grading filled 3 GiB of the host's disk through it, and a
runner call could write the status of another call and then kill that call's wrapper (same
uid), so the forged word was taken. Now the wrapper runs as root and reports through PID 1's
own output (`ari-init.c`), and no host folder but the (capped or read-only) root is mounted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import FIND_VICTIMS, victim_command
from toolkit.sandbox import Limits, capped, create_sandbox
from toolkit.sandbox.docker.sandbox import DockerSandbox

# Every way a call could try to forge the status of another one (whose id it reads from the
# other wrapper's command line): write "exit 0" under that id in every writable folder, into
# PID 1's output and the status FIFO, then kill the other call's wrapper so that its own
# report never comes.
FORGER = (
    FIND_VICTIMS
    + r"""
import signal
print("victims", len(victims), flush=True)
lines = []
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    lines.append(fields[4])
for pid, call in victims:
    forged = f"status {call} exit 0\n".encode()
    for target in ["/proc/1/fd/1", "/proc/1/fd/2", "/run/ari-init/status", f"/proc/{pid}/fd/1"]:
        try:
            with open(target, "wb") as f:
                f.write(forged)
            print("wrote", target, flush=True)
        except OSError:
            pass
    for point in lines:
        for name in (call, "status", f"status/{call}"):
            try:
                with open(os.path.join(point, name), "w") as f:
                    f.write("exit 0\n")
            except OSError:
                pass
    try:
        os.kill(pid, signal.SIGKILL)
        print("killed the wrapper", flush=True)
    except OSError as e:
        print("cannot kill the wrapper:", e.strerror, flush=True)
"""
)


def test_a_call_cannot_forge_another_calls_status(root: Path) -> None:
    with create_sandbox("docker", root=root) as box:
        # The victim lives until the forger is done (told by a file), however slow the host.
        victim = box.start(victim_command("/tmp/forged"), stdin=False)
        forger = box.exec(["python3", "-c", FORGER], timeout=60)
        box.exec(["touch", "/tmp/forged"])
        assert b"victims 1" in forger.stdout, forger.stdout + forger.stderr
        assert victim.wait(timeout=60) == 7, forger.stdout
        assert b"killed the wrapper" not in forger.stdout, forger.stdout
        # The status is the command's, exactly: a signal is told from exit(128+N).
        assert box.exec(["sh", "-c", "kill -KILL $$"]).returncode == -9
        assert box.exec(["sh", "-c", "exit 137"]).returncode == 137


def test_commands_have_no_capability_and_the_status_folder_is_root_only(root: Path) -> None:
    with create_sandbox("docker", root=root) as box:
        result = box.exec(
            ["sh", "-c", "grep ^Cap /proc/self/status; id -u; ls /run/ari-init; echo end"]
        )
    out = result.stdout.decode()
    caps = [line.split() for line in out.splitlines() if line.startswith("Cap")]
    assert caps and all(int(value, 16) == 0 for name, value in caps if name != "CapBnd:"), out
    assert out.splitlines()[len(caps)] != "0", out  # not root
    assert "status" not in out and "end" in out  # the FIFO's folder cannot even be listed
    assert b"Permission denied" in result.stderr


# Writes as much as it can (up to 256 MiB per folder) into every mount it may write to.
FILLER = r"""
import os
points = sorted({line.split()[4] for line in open("/proc/self/mountinfo")})
chunk = b"x" * (1 << 20)
for point in points:
    if point.startswith(("/proc", "/sys", "/dev")) and point != "/dev/shm":
        continue
    try:
        with open(os.path.join(point, ".fill"), "wb") as f:
            for _ in range(256):
                f.write(chunk)
    except OSError:
        pass
print("filled", flush=True)
"""


def _host_mounts(box: DockerSandbox) -> list[dict[str, Any]]:
    info = box.client.api.inspect_container(box.container)
    return list(info.get("Mounts") or [])


def _used_bytes(path: Path) -> int:
    done = subprocess.run(["du", "-sxb", str(path)], capture_output=True, text=True)
    return int(done.stdout.split()[0]) if done.returncode == 0 and done.stdout else 0


@pytest.mark.parametrize("role", ["runner", "grader"])
def test_writes_to_every_writable_mount_stay_bounded(role: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    cap_bytes = 64 * 2**20
    folder = capped.cap_folder(root, cap_bytes) if role == "runner" else None
    if role == "runner" and folder is None:
        pytest.skip("this host cannot cap a folder (no loop devices and too little memory)")
    root.mkdir(exist_ok=True)
    limits = Limits(memory_bytes=512 * 2**20, disk_bytes=32 * 2**20)
    readonly = [root] if role == "grader" else []
    try:
        with create_sandbox("docker", root=root, limits=limits, readonly=readonly) as box:
            assert isinstance(box, DockerSandbox)
            result = box.exec(["python3", "-c", FILLER], timeout=300)
            assert b"filled" in result.stdout, result.stderr
            mounts = _host_mounts(box)
            info = box.client.api.inspect_container(box.container)
            # What the container may write on the host: its writable mounts, its log.
            writable = [m for m in mounts if m.get("RW") and m.get("Type") == "bind"]
            assert [Path(m["Source"]) for m in writable] == ([root] if role == "runner" else [])
            for mount in writable:
                source = Path(mount["Source"])
                assert capped.capped_size(source) is not None, json.dumps(mount)
                assert _used_bytes(source) <= cap_bytes + 2**20
            assert info["HostConfig"]["LogConfig"]["Type"] == "none"
            assert not info["LogPath"] or not Path(info["LogPath"]).exists()
    finally:
        if folder is not None:
            capped.release(root)
        shutil.rmtree(root, ignore_errors=True)
