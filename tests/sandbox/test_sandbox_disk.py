"""Filling the host's disk through a sandbox's root, the one writable place that is a host folder.

A hostile bundle in the grader, or a hostile agent through `runner`, writes file after file
under its root (each under the per-file cap) until the host's disk is full. Two answers, one
per kind of root: an ephemeral root (one-shot sandboxes: the grader), whose writes land in the
command's capped private places and vanish; and a capped folder (a run's workspace, which
must keep files between commands), a filesystem of its own of fixed size. Each test is skipped
only where the host says it cannot (the sandbox's words, or `capped.unavailable`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.host_scratch import host_scratch
from toolkit.sandbox import Limits, Sandbox, capped, create_sandbox

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20
SLACK = 256 * MiB  # others write to this host's disk at the same time

# Many files of 4 MiB (the per-file cap does not stop this), until refused or `sys.argv[1]`
# bytes are written; then what happened. The same hog for both kinds of root.
HOG = """
import errno, json, os, sys
limit, total, error, index = int(sys.argv[1]), 0, None, 0
try:
    while total < limit:
        with open(f"hog-{index}.bin", "wb") as f:
            for _ in range(4):
                f.write(b"x" * (1 << 20))
                f.flush()
                total += 1 << 20
        index += 1
except OSError as e:
    error = errno.errorcode[e.errno]
print(json.dumps({"written": total, "error": error, "files": index}))
"""


def needs(box: Sandbox, prop: str) -> None:
    if prop not in box.isolation:
        pytest.skip(f"this host cannot provide {prop!r} (not_isolated: {box.not_isolated})")


def needs_cap(kind: str) -> None:
    reason = capped.unavailable(kind)
    if reason is not None:
        pytest.skip(f"this host cannot make a capped folder ({kind}): {reason}")


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _snapshot(folder: Path) -> dict[str, str]:
    """Every entry under `folder`: a file's hash, or what else it is."""
    found = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink() or not path.is_file():
            found[key] = "dir" if path.is_dir() else "other"
        else:
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _loops_backed_by(image: Path, wait_s: float = 5.0) -> list[str]:
    """Loop devices backed by `image`, after waiting up to `wait_s` for none (the kernel may
    detach an auto-clearing one a moment after the unmount)."""
    deadline = time.monotonic() + wait_s
    while (found := _loops_now(image)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _loops_now(image: Path) -> list[str]:
    found = []
    for name in os.listdir("/sys/block"):
        try:
            backing = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
        except OSError:
            continue
        if backing.removesuffix(" (deleted)") == os.path.realpath(image):
            found.append(name)
    return found


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A folder on the host's own disk (not under /tmp, which sandboxes see as their own)."""
    path = host_scratch("test-disk")
    try:
        yield path
    finally:
        for mounted in sorted(path.rglob("*"), reverse=True):  # a failed test's cap, if any
            if mounted.is_dir() and os.path.ismount(mounted):
                capped.release(mounted)
        shutil.rmtree(path, ignore_errors=True)


# -- ephemeral roots (the grader) ------------------------------------------------------------


def test_ephemeral_root_caps_writes_under_it_and_the_host_folder_is_unchanged(
    host_dir: Path,
) -> None:
    """A bundle writing 4 MiB files under its root until refused: ENOSPC at `disk_bytes` (its
    private places and its root together), the host folder byte for byte as it was, during
    the command and after, and no disk space taken."""
    cap = 16 * MiB
    root = host_dir / "grading"
    (root / "bundle").mkdir(parents=True)
    (root / "bundle" / "weights.bin").write_bytes(os.urandom(MiB))
    (root / "worker.py").write_text("print('worker')\n")
    free = _free(host_dir)
    limits = Limits(disk_bytes=cap, file_size_bytes=8 * MiB)
    script = (
        "echo changed >> worker.py && rm bundle/weights.bin && mkdir made && "
        f'{PY} -c "$HOG" {256 * MiB}'
    )
    with create_sandbox("local", root=root, ephemeral_root=True, limits=limits) as box:
        needs(box, "ephemeral-root")
        assert "root-disk" not in box.not_isolated
        before = _snapshot(root)  # as the host handed it over (with its TMPDIR, .tmp)
        hog = box.exec(["sh", "-c", script], env={"HOG": HOG}, timeout=120)
        assert hog.ok, hog.stderr
        report = json.loads(hog.stdout.splitlines()[0])
        assert report["error"] == "ENOSPC" and report["written"] <= cap, report
        assert _snapshot(root) == before, "the host folder changed while the sandbox lived"
        again = box.exec(["sh", "-c", "ls; cat worker.py; ls bundle"])
        assert again.ok, again.stderr
        assert "hog-0.bin" not in again.stdout.decode(), "a command saw an earlier one's writes"
        assert b"changed" not in again.stdout and b"weights.bin" in again.stdout
        assert box.read_file("worker.py") == b"print('worker')\n"
    assert _snapshot(root) == before
    assert _free(host_dir) > free - SLACK


def test_ephemeral_root_says_whether_it_is_in_force(host_dir: Path) -> None:
    """A command that cannot overlay its root must not start with the host folder writable
    unsaid: either `ephemeral-root` is in force, or the sandbox says it is not."""
    root = host_dir / "grading"
    root.mkdir()
    with create_sandbox("local", root=root, ephemeral_root=True) as box:
        in_force = "ephemeral-root" in box.isolation
        assert in_force != ("ephemeral-root" in box.not_isolated)
        assert in_force != ("root-disk" in box.not_isolated)


# -- capped folders (a run's workspace) ------------------------------------------------------


@pytest.mark.parametrize("kind", ["ext4", "tmpfs"])
def test_capped_folder_refuses_writes_past_the_cap_and_keeps_files(
    host_dir: Path, kind: str
) -> None:
    """An agent's hog in a capped workspace stops at the cap; files stay between commands;
    deleting frees room; after release the folder is a plain empty folder again, its image and
    loop device gone, and the host's disk as it was."""
    needs_cap(kind)
    cap = 32 * MiB
    workspace = host_dir / "workspace"
    free = _free(host_dir)
    folder = capped.cap_folder(workspace, cap, kind=kind)
    assert folder is not None and folder.kind == kind
    image = capped.image_of(workspace)
    try:
        assert os.path.ismount(workspace) and list(workspace.iterdir()) == []
        assert capped.capped_size(workspace) == capped.capped_size(workspace / "deeper")
        assert 0 < (capped.capped_size(workspace) or 0) <= cap
        (workspace / "TASK.md").write_text("task")  # the host assembles the workspace
        with create_sandbox("local", root=workspace) as box:
            needs(box, "root-disk-cap")
            assert "root-disk" not in box.not_isolated
            hog = box.exec([PY, "-c", HOG, str(512 * MiB)], timeout=120)
            assert hog.ok, hog.stderr
            report = json.loads(hog.stdout)
            assert report["error"] == "ENOSPC" and report["written"] <= cap, report
            if kind == "ext4":  # what the image takes on the host's disk
                assert os.stat(image).st_blocks * 512 <= cap
            kept = box.exec(["sh", "-c", "cat TASK.md; ls hog-0.bin"])
            assert kept.ok and kept.stdout.startswith(b"task"), kept.stderr
            room = box.exec(["sh", "-c", "rm hog-*.bin && head -c 1048576 /dev/zero > fits"])
            assert room.ok, room.stderr
    finally:
        done = folder.release()
    assert done and not os.path.ismount(workspace)
    assert list(workspace.iterdir()) == [] and not image.exists()
    assert _loops_backed_by(image) == []
    assert capped.release(workspace) == []  # idempotent
    assert _free(host_dir) > free - SLACK


def test_caps_on_one_disk_leave_room_for_each_other(
    host_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Images are sparse: a second run's workspace must not count the space the first one's may
    still fill as free, or two caps together could promise more than the disk has."""
    needs_cap("ext4")
    free = 1024 * MiB  # what the disk has free, as far as the caps can tell (fixed: no flake)
    monkeypatch.setattr(capped, "_free_bytes", lambda _where: free)
    # Only this test's images count: other runs' caps on this disk (another test worker's, a
    # run going on) come and go while it runs, and the fixed `free` above cannot cover them.
    every_image = capped.live_images
    monkeypatch.setattr(
        capped, "live_images", lambda: [i for i in every_image() if host_dir in i.parents]
    )
    before = capped.promised_bytes(host_dir)
    folders: list[capped.CappedFolder] = []
    try:
        first = capped.cap_folder(host_dir / "a" / "workspace", 400 * MiB, kind="ext4")
        assert first is not None
        folders.append(first)
        assert first.size_bytes == min(400 * MiB, int((free - before) * capped.FREE_SHARE))
        promised = capped.promised_bytes(host_dir) - before
        assert first.size_bytes - 32 * MiB < promised <= first.size_bytes  # less ext4's own
        second = capped.cap_folder(host_dir / "b" / "workspace", 400 * MiB, kind="ext4")
        assert second is not None
        folders.append(second)
        assert second.size_bytes <= int((free - before - promised) * capped.FREE_SHARE)
        assert first.size_bytes + second.size_bytes <= free - before
    finally:
        for folder in folders:
            folder.release()
    assert capped.promised_bytes(host_dir) == before


LEFTOVER = """
import os, signal, sys
from pathlib import Path
from toolkit.sandbox import capped
folder = capped.cap_folder(Path(sys.argv[1]), 16 << 20)
assert folder is not None
(folder.path / "checkpoint.bin").write_bytes(b"x" * (4 << 20))
os.kill(os.getpid(), signal.SIGKILL)  # a harness that dies with its workspace mounted
"""


def _crashed_with_a_cap(workspace: Path) -> None:
    done = subprocess.run(
        [PY, "-c", LEFTOVER, str(workspace)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert os.path.ismount(workspace), "the crash left no mount: nothing to recover"


def test_crash_leftover_is_found_and_released_from_the_path_alone(host_dir: Path) -> None:
    """A process that dies with its capped folder mounted leaves the mount, the loop device
    and the image; `release(folder)`, knowing nothing else, removes all three."""
    needs_cap("ext4")
    workspace = host_dir / "runs" / "r1" / "workspace"
    _crashed_with_a_cap(workspace)
    image = capped.image_of(workspace)
    assert image.exists() and _loops_now(image)
    done = capped.release(workspace.parent)  # from the run's folder: what recovery knows
    assert any("unmounted" in line for line in done), done
    assert not os.path.ismount(workspace) and not image.exists()
    assert _loops_backed_by(image) == []


def test_a_live_sandbox_neither_sees_nor_pins_another_roots_capped_folder(host_dir: Path) -> None:
    """A long-lived command (an agent) started while another run's capped workspace was
    mounted: it cannot read that workspace, and once that run releases it, its disk is free at
    once (the command's own copy of the mount would otherwise keep the image alive)."""
    needs_cap("ext4")
    other = host_dir / "other" / "workspace"
    _crashed_with_a_cap(other)
    image = capped.image_of(other)
    mine = host_dir / "mine"
    mine.mkdir()
    box = create_sandbox("local", root=mine)
    try:
        needs(box, "mountns")
        peek = box.exec(["ls", "-A", str(other)])
        # Not there at all (outside the allow-list of the host), or an empty folder: no files.
        assert peek.stdout == b"", peek.stdout
        assert peek.ok or b"No such file" in peek.stderr, peek.stderr
        agent = box.start(["sleep", "600"], stdin=False, stdout=False, stderr=False)
        time.sleep(0.2)
        capped.release(other)
        assert _loops_backed_by(image) == [] and not image.exists()
        assert agent.poll() is None
    finally:
        box.cleanup()


def test_a_cap_released_while_a_tree_starts_does_not_fail_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another run's capped workspace, in the mount table a starting tree reads, is released and
    its folder removed before the tree detaches it (runs start and end side by side): gone
    already, not an error (one suite run failed "cannot detach .../workspace: No such file or
    directory")."""
    from toolkit.sandbox.local import mounts

    gone = str(tmp_path / "other-run" / "workspace")  # never made: released and removed
    table = [("/", "ext4", "/dev/root"), (gone, "tmpfs", capped.TMPFS_SOURCE)]
    monkeypatch.setattr(mounts, "mountinfo", lambda: table)
    caps = {"tmpfs_source": capped.TMPFS_SOURCE, "image_suffix": capped.IMAGE_SUFFIX}
    mounts.detach_foreign_caps(caps, exposed=[str(tmp_path / "mine")])
