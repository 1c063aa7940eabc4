"""A sandbox sees an allow-list of the host, not everything minus a deny-list (issue 17.5).

An operator keeps a hidden bank beside its exam wherever the machine has room: /opt, /srv,
/var/lib, a second disk under /mnt, a file at the top of `/`. No caller names those places (the
CLI never did), so nothing but the allow-list keeps them out of a sandbox. Each test puts
world-readable secrets there, then reads from inside a sandbox of every backend: no content, no
entry of those folders may come out, while the sandbox's own root, its read-only paths and the
system folders keep working.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolkit.protected import protected_paths
from toolkit.sandbox import Sandbox, create_sandbox

DOCKER_BACKEND = True  # the docker backend runs these too (tests/sandbox/conftest.py)


def needs(box: Sandbox, prop: str) -> None:
    if prop not in box.isolation:
        pytest.skip(f"this host cannot provide {prop!r} (not_isolated: {box.not_isolated})")


@dataclass(frozen=True)
class Hoard:
    """Secrets kept where no sandbox is told about them."""

    tag: str
    mark: str
    folders: list[Path]
    files: list[Path]
    top_file: Path
    disk: Path | None  # a mount point of its own (a "second disk"), if this host could make one


def _place(folder: Path, mark: str) -> list[Path]:
    files = []
    for inner in ("banks/b/bank.jsonl", "exams/e/exam.jsonl"):
        path = folder / inner
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'{{"prompt": "q", "answer": "{mark}"}}\n')
        path.chmod(0o644)
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
        else:
            files.append(path)
    return files


@pytest.fixture
def hoard() -> Iterator[Hoard]:
    """World-readable banks and exams in /opt, /srv, /var/lib, /mnt (on a tmpfs of its own
    where this host lets us mount one) and a file at the top of `/`; all removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("placing files in /opt, /srv, /var/lib and / needs root")
    tag = f"ari-secret-{uuid.uuid4().hex[:10]}"
    mark = f"MARK-{uuid.uuid4().hex}"
    folders = [Path(base) / tag for base in ("/opt", "/srv", "/var/lib", "/mnt")]
    disk: Path | None = folders[-1] / "disk"
    top_file = Path("/") / f"{tag}.jsonl"
    files: list[Path] = []
    try:
        for folder in folders:
            folder.parent.mkdir(exist_ok=True)
            folder.mkdir()
        assert disk is not None
        disk.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)])
        disk = disk if mounted.returncode == 0 else None
        for folder in folders:
            files += _place(folder, mark)
        top_file.write_text(f'{{"prompt": "q", "answer": "{mark}"}}\n')
        top_file.chmod(0o644)
        yield Hoard(tag, mark, folders, files, top_file, disk)
    finally:
        if disk is not None:
            subprocess.run(["umount", "-l", str(disk)], check=False)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            top_file.unlink()


def _snoop(hoard: Hoard) -> str:
    """Shell that lists and reads everything of the hoard, and the folders holding it."""
    parents = " ".join(sorted({str(f.parent) for f in hoard.folders}))
    lines = [f"ls -la {parents} 2>/dev/null"]
    for folder in hoard.folders:
        lines.append(f"ls -laR {folder} 2>/dev/null")
    for path in [*hoard.files, hoard.top_file]:
        lines.append(f"cat {path} 2>/dev/null")
        lines.append(f"head -c 200 {path} 2>/dev/null")
    lines.append(f"grep -rs {hoard.mark} /opt /srv /var /mnt /home /root 2>/dev/null | head -5")
    lines.append("cat /proc/self/mountinfo /proc/mounts 2>/dev/null")  # names of mount points
    return "\n".join(lines) + "\necho SNOOP-DONE\n"


def test_secrets_outside_the_allowlist_are_invisible(
    backend: str, root: Path, hoard: Hoard
) -> None:
    assert hoard.mark in hoard.files[0].read_text()  # readable by anyone on the host itself
    with create_sandbox(backend, root=root) as box:
        needs(box, "host-allowlist")
        result = box.exec(["sh", "-c", _snoop(hoard)], timeout=120)
    out = result.stdout.decode(errors="replace")
    assert "SNOOP-DONE" in out, out[-2000:]
    assert hoard.mark not in out  # no content
    # No entry of any folder, nor the name of a mount point in one (a file at the top of `/`
    # keeps its name, as the top folders do: its content is /dev/null).
    assert hoard.tag not in out.replace(str(hoard.top_file), "")


def test_allowlist_even_when_the_sandbox_is_given_a_neighbour(
    backend: str, root: Path, hoard: Hoard
) -> None:
    """A read-only path beside the secrets (training data in /srv) shows that path alone."""
    data = hoard.folders[1] / "data"
    data.mkdir()
    (data / "train.txt").write_text("training text\n")
    data.chmod(0o755)
    with create_sandbox(backend, root=root, readonly=[data]) as box:
        needs(box, "host-allowlist")
        script = f"cat {data}/train.txt; ls -a {hoard.folders[1]} {data}; " + _snoop(hoard)
        result = box.exec(["sh", "-c", script], timeout=120)
    out = result.stdout.decode(errors="replace")
    assert "training text" in out and "SNOOP-DONE" in out, out[-2000:]
    assert hoard.mark not in out
    assert "train.txt" in out  # its own entries are listed...
    assert "banks" not in out and "exams" not in out  # ...the neighbours of the data are not


def test_system_folders_and_own_paths_still_work(backend: str, root: Path) -> None:
    """The allow-list keeps what programs need: the shell, its libraries, /etc, /dev, /proc,
    the private places, and the root."""
    with create_sandbox(backend, root=root) as box:
        needs(box, "host-allowlist")
        script = (
            "ls /usr/bin >/dev/null && cat /etc/passwd >/dev/null && echo hi > /dev/null && "
            "test -r /proc/self/status && echo t > /tmp/t && cat /tmp/t && "
            "echo own > own.txt && cat own.txt"
        )
        result = box.exec(["sh", "-c", script], timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split() == ["t", "own"]


def test_interpreter_outside_the_allowlist_is_shown(root: Path) -> None:
    """The local backend has no image: the host's Python (a venv in a checkout, pyenv under
    /root, conda under /opt) is bound read-only where the allow-list would cover it; its
    packages import (torch, as the starter does in the runner), with the runner's hidden
    paths (the checkout holding the venv among them)."""
    import sys

    from toolkit.run.roles import make_runner

    with make_runner("local", root, hide=protected_paths(), readonly=[]) as box:
        needs(box, "host-allowlist")
        code = "import sys, torch; print(sys.prefix); print(torch.ones(2).sum().item())"
        result = box.exec([sys.executable, "-c", code], timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split() == [sys.prefix, "2.0"]
