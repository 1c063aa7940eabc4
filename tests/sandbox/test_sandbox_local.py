"""Local-backend specifics: the launcher (fork server), concurrency, output caps, host probe."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.sandbox.conftest import leftover
from toolkit.sandbox import Limits, SandboxError, create_sandbox
from toolkit.sandbox.local import LocalSandbox, process

PY = sys.executable


def test_concurrent_commands_from_threads(root: Path) -> None:
    results: dict[int, bytes] = {}
    with create_sandbox("local", root=root) as box:

        def run(i: int) -> None:
            results[i] = box.exec(["sh", "-c", f"echo {i}"], timeout=60).stdout

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == {i: f"{i}\n".encode() for i in range(8)}


def test_launcher_restarts_after_it_died(root: Path) -> None:
    with create_sandbox("local", root=root) as box:
        assert isinstance(box, LocalSandbox)
        assert box.exec(["true"]).ok
        server = box._server._popen
        assert server is not None
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
        assert box.exec(["echo", "again"]).stdout == b"again\n"


def test_output_flood_is_capped(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "MAX_OUTPUT_BYTES", 1000)
    with create_sandbox("local", root=root) as box:
        result = box.exec(["sh", "-c", "head -c 5000000 /dev/zero; echo end >&2"], timeout=60)
    assert result.ok and len(result.stdout) == 1000 and result.stderr == b"end\n"


def test_large_input_to_a_command_that_does_not_read(root: Path) -> None:
    with create_sandbox("local", root=root) as box:
        result = box.exec(["true"], input=b"x" * 10_000_000, timeout=60)
    assert result.ok


def test_setup_failure_is_a_sandbox_error_naming_the_cause(root: Path) -> None:
    with create_sandbox("local", root=root) as box, pytest.raises(SandboxError, match="missing"):
        box.exec(["true"], cwd=str(root / "missing"))


def test_readonly_path_must_exist(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        create_sandbox("local", root=root, readonly=[tmp_path / "nope"])


def test_limits_recorded_in_isolation(root: Path) -> None:
    limits = Limits(memory_bytes=1 << 30, max_processes=100, cpu_seconds=10)
    with create_sandbox("local", root=root, limits=limits) as box:
        assert "rlimits" in box.isolation
        assert {"cgroup-pids", "cgroup-memory"} <= set(box.isolation) or {"memory-per-tree"} <= set(
            box.not_isolated
        )


def test_no_cgroups_left_behind(root: Path) -> None:
    limits = Limits(memory_bytes=1 << 30, max_processes=100)
    with create_sandbox("local", root=root, limits=limits) as box:
        assert isinstance(box, LocalSandbox)
        if not (box.support.pids_parent and box.support.memory_parent):
            pytest.skip("this host has no writable cgroups")
        finished = box.start(["true"])
        running = box.start(["sleep", "60"])
        assert isinstance(finished, process.LocalProcess)
        assert isinstance(running, process.LocalProcess)
        dirs = [*finished._cgroups.dirs, *running._cgroups.dirs]
        assert len(dirs) == 4 and all(d.is_dir() for d in dirs)
        assert finished.wait(timeout=30) == 0
        box.cleanup()
        assert running.poll() == -signal.SIGKILL
    assert not any(d.exists() for d in dirs)


UNPRIVILEGED = """
import json, os, sys
from pathlib import Path
from toolkit.sandbox import Limits, create_sandbox
base, marker, owned = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
(base / "root" / "secret").mkdir(parents=True)
(base / "root" / "secret" / "exam.jsonl").write_text("answer")
(base / "data").mkdir()
(base / "data" / "text.txt").write_text("train")
(base / "private.txt").write_text("the caller's own file")
hide, readonly = [base / "root" / "secret"], [base / "data"]
with create_sandbox("local", root=base / "root", hide=hide, readonly=readonly) as box:
    out = {"isolation": box.isolation}
    for name, argv in {
        "id": ["id", "-u"],
        "secret": ["cat", "secret/exam.jsonl"],
        "umount": ["umount", "-l", "secret"],
        "write": ["sh", "-c", f"echo x > {base}/data/text.txt"],
        "read": ["cat", f"{base}/data/text.txt"],
        "net": ["cat", "/proc/net/dev"],
        "launcher": ["readlink", "/proc/1/fd/0"],
        "lock": ["sh", "-c", f"echo x > /run/lock/{marker} && cat /run/lock/{marker}"],
        "planted": ["sh", "-c", f"echo x > {owned}/planted"],
        "home": ["cat", f"{base}/private.txt"],
    }.items():
        result = box.exec(argv, timeout=60)
        out[name] = [result.returncode, result.stdout.decode()]
    sleeper = f"(setsid python3 -c 'import time; time.sleep(600)' {marker} &); sleep 600"
    box.start(["sh", "-c", sleeper])
    out["timed_out"] = box.exec(["sh", "-c", sleeper], timeout=1).timed_out
(owned / "given.txt").write_text("given")
capped = Limits(disk_bytes=4 << 20)
with create_sandbox("local", root=owned, ephemeral_root=True, limits=capped) as box:
    hog = box.exec(["sh", "-c", "echo y >> given.txt; cat given.txt; head -c 8M /dev/zero > big"])
    out["ephemeral"] = ["ephemeral-root" in box.isolation, hog.returncode, hog.stdout.decode()]
out["ephemeral_on_host"] = [(owned / "given.txt").read_text(), os.path.exists(owned / "big")]
out["lock_on_host"] = os.path.exists(f"/run/lock/{marker}")
out["planted_on_host"] = os.path.exists(f"{owned}/planted")
def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:  # gone meanwhile
        return b""
out["left"] = [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid())
               and marker.encode() in cmdline(p)]
print(json.dumps(out))
"""


def test_unprivileged_user_gets_user_namespaces(marker: str) -> None:
    """What a newcomer's non-root `make test` gets: namespaces through a user namespace."""
    setpriv, python = shutil.which("setpriv"), "/usr/bin/python3"
    if os.geteuid() != 0 or not setpriv or not os.path.exists(python):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to act as an unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="ari-unprivileged-"))
    repo = Path(__file__).resolve().parents[2]
    owned = repo / ".ari" / f"test-unprivileged-{marker}"  # on the host's disk, the user's own
    owned.mkdir(parents=True)
    try:
        os.chown(base, 65534, 65534)
        os.chown(owned, 65534, 65534)
        done = subprocess.run(
            [
                setpriv,
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                python,
                "-c",
                UNPRIVILEGED,
                str(base),
                marker,
                str(owned),
            ],
            capture_output=True,
            timeout=300,
            env={"PATH": os.environ["PATH"], "HOME": str(base), "PYTHONPATH": str(repo)},
        )
        assert done.returncode == 0, done.stderr.decode()
        out = json.loads(done.stdout)
        if "userns" not in out["isolation"]:
            pytest.skip("this host allows no unprivileged user namespaces")
        assert out["id"] == [0, "65534\n"]
        assert out["secret"][0] != 0 and "answer" not in out["secret"][1]
        assert out["umount"][0] != 0
        assert out["write"][0] != 0 and out["read"] == [0, "train"]
        interfaces = [line.split(":")[0].strip() for line in out["net"][1].splitlines()[2:]]
        assert interfaces == ["lo"]
        assert out["timed_out"] and out["left"] == []
        assert out["launcher"][0] != 0  # the namespace's init is out of the command's reach
        # The host is read-only, even where the caller may write; /run/lock is private.
        assert out["lock"] == [0, "x\n"] and not out["lock_on_host"]
        assert out["planted"][0] != 0 and not out["planted_on_host"]
        assert out["home"][0] != 0 and "own file" not in out["home"][1]  # HOME is covered
        # An ephemeral root works in a user namespace too: capped, and the host folder intact.
        assert out["ephemeral"] == [True, 1, "giveny\n"]
        assert out["ephemeral_on_host"] == ["given", False]
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(owned, ignore_errors=True)


def test_cleanup_racing_with_starts_leaves_nothing(root: Path, marker: str) -> None:
    box = create_sandbox("local", root=root)
    errors: list[BaseException] = []

    def starter() -> None:
        for _ in range(20):
            try:
                box.start(["sleep", "600", marker], stdin=False, stdout=False, stderr=False)
            except SandboxError:
                return  # cleaned up: refusing is right
            except BaseException as e:
                errors.append(e)
                return

    threads = [threading.Thread(target=starter) for _ in range(3)]
    for thread in threads:
        thread.start()
    end = time.monotonic() + 60
    while not leftover(marker) and time.monotonic() < end:
        time.sleep(0.01)
    box.cleanup()
    for thread in threads:
        thread.join()
    assert errors == []
    assert leftover(marker) == []


def test_oversized_command_is_refused_clearly(root: Path) -> None:
    with create_sandbox("local", root=root) as box:
        with pytest.raises(ValueError, match="too large"):
            box.exec(["true"], env={"BIG": "x" * (2 << 20)})
        assert box.exec(["true"]).ok  # and the sandbox still works


def test_write_through_a_file_is_refused(root: Path) -> None:
    with create_sandbox("local", root=root) as box:
        box.write_file("plain", b"x")
        with pytest.raises(ValueError, match="not a plain directory"):
            box.write_file("plain/inner.txt", b"y")


def test_keyring_filter_is_in_force_where_the_machine_is_known() -> None:
    """A broken probe would quietly turn the keyring filter off (`keyrings` in not_isolated):
    on a machine whose system call numbers we know, it must be on."""
    import platform

    from toolkit.sandbox.local import host as local_host
    from toolkit.sandbox.local import seccomp

    if platform.machine() not in seccomp.KEYRING_CALLS:
        pytest.skip(
            f"no keyring filter for {platform.machine()} yet (see toolkit/sandbox/local/seccomp.py)"
        )
    assert local_host.probe().keyring_filter


SWAPPER = """
import os, sys, time
while True:  # sub/ is a folder for a few ms, then a link to a root-owned folder for a few ms
    time.sleep(0.004)
    os.rename("sub", "sub.d")
    os.symlink(sys.argv[1], "sub")
    time.sleep(0.004)
    os.unlink("sub")
    os.rename("sub.d", "sub")
"""


def test_handing_over_a_root_never_follows_a_swapped_link(tmp_path: Path) -> None:
    """Creating a sandbox chowns its root's files to the sandbox user, as root. A sandbox
    already working in that root swaps a folder for a link mid-walk: the link's target (here a
    root-owned file) must never be chowned. Fails within a second against a path-based walk."""
    root, victim = tmp_path / "root", tmp_path / "victim"
    (root / "sub").mkdir(parents=True)
    victim.mkdir()
    for i in range(2000):  # the same names in both: a path through sub/ resolves either way
        (root / "sub" / f"f{i}").write_bytes(b"")
        (victim / f"f{i}").write_bytes(b"root's own")
    with create_sandbox("local", root=root) as box:
        if not isinstance(box, LocalSandbox) or not box.drop_uid:
            pytest.skip("no user switch here: nothing is chowned")
        box.start([PY, "-c", SWAPPER, str(victim)], stdin=False, stdout=False)
        end = time.monotonic() + 5
        while time.monotonic() < end and (victim / "f0").stat().st_uid == 0:
            with contextlib.suppress(SandboxError):  # a root changing under the walk: refused
                create_sandbox("local", root=root).cleanup()
    assert {(victim / f"f{i}").stat().st_uid for i in range(2000)} == {0}
