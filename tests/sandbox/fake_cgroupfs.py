"""A cgroup-v2 filesystem stand-in over a temporary folder, for the layout tests.

This host is cgroup v1 (and a fresh cgroup2 mount has no memory, pids or cpu here), so the
layouts are checked against a folder laid out like /sys/fs/cgroup whose `mkdir`, `rmdir` and
writes follow the kernel's rules where the code depends on them:

- mkdir makes a cgroup's interface files; its `cgroup.controllers` is what its parent enabled;
  its limit files (`memory.max`, `pids.max`, `cpu.max`) exist only for those controllers;
- `cgroup.subtree_control` takes `+name`/`-name` words, adds only what `cgroup.controllers`
  offers, and refuses (EBUSY) in a cgroup that holds processes, the root excepted;
- `cgroup.procs` moves a pid (0: the writer) out of every other cgroup; a cgroup with
  controllers enabled for children refuses processes (EBUSY), the root excepted;
- rmdir refuses (EBUSY) while the cgroup has a child cgroup or a process;
- a cgroup listed in `readonly` refuses mkdir under it and writes to its files (EACCES), as
  for a user without delegation.

Every write is logged (`writes`: (path, text)), so a test can tell exactly what was touched.
"""

from __future__ import annotations

import errno
import os
import pathlib
from pathlib import Path

import pytest

LIMIT_FILES = {
    "memory": ("memory.max", "memory.swap.max"),
    "pids": ("pids.max",),
    "cpu": ("cpu.max",),
}
ORDER = ("cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc")


class FakeCgroupfs:
    """The tree at `root` (made here), with the root offering `controllers`."""

    def __init__(self, root: Path, controllers: str, enabled: str = "") -> None:
        self.root = root
        self.writes: list[tuple[Path, str]] = []
        self.readonly: set[Path] = set()
        self._mkdir, self._rmdir = pathlib.Path.mkdir, pathlib.Path.rmdir
        self._write = pathlib.Path.write_text
        self._mkdir(root)
        self._write(root / "cgroup.controllers", controllers + "\n")
        self._write(root / "cgroup.subtree_control", enabled + "\n")
        self._write(root / "cgroup.procs", "")

    # -- set-up (no log, no rules) -----------------------------------------------------------

    def cgroup(self, rel: str, procs: tuple[int, ...] = (), enabled: str = "") -> Path:
        """Make cgroup `rel` (and its parents) as the host had it, holding `procs`."""
        here = self.root
        for part in Path(rel).parts:
            here = here / part
            if not here.is_dir():
                self._make_files(here)
        self._write(here / "cgroup.subtree_control", enabled + "\n")
        self._write(here / "cgroup.procs", "".join(f"{p}\n" for p in procs))
        return here

    def _make_files(self, here: Path) -> None:
        self._mkdir(here)
        self._write(here / "cgroup.subtree_control", "\n")
        self._write(here / "cgroup.procs", "")
        self._write(here / "cgroup.events", "populated 0\nfrozen 0\n")
        self._offer(here, self._words(here.parent / "cgroup.subtree_control"))

    def _offer(self, here: Path, offered: set[str]) -> None:
        """`here` gets the controllers `offered` by its parent: listed, with their files."""
        self._write(here / "cgroup.controllers", " ".join(self._ordered(offered)) + "\n")
        for controller, names in LIMIT_FILES.items():
            for name in names:
                if controller not in offered:
                    (here / name).unlink(missing_ok=True)
                elif not (here / name).exists():
                    self._write(here / name, "max\n")

    @staticmethod
    def _words(file: Path) -> set[str]:
        return set(file.read_text().split()) if file.exists() else set()

    @staticmethod
    def _ordered(words: set[str]) -> list[str]:
        return sorted(words, key=lambda w: ORDER.index(w) if w in ORDER else len(ORDER))

    def procs(self, here: Path) -> list[str]:
        return (here / "cgroup.procs").read_text().split()

    def _inside(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def _refuse_readonly(self, cgroup: Path) -> None:
        if cgroup in self.readonly:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(cgroup))

    # -- the kernel's side -------------------------------------------------------------------

    def mkdir(
        self, path: Path, mode: int = 0o777, parents: bool = False, exist_ok: bool = False
    ) -> None:
        if not self._inside(path.parent):
            return self._mkdir(path, mode, parents, exist_ok)
        if path.is_dir():
            if exist_ok:
                return None
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        if not path.parent.is_dir():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        self._refuse_readonly(path.parent)
        self.writes.append((path, "mkdir"))
        self._make_files(path)
        return None

    def rmdir(self, path: Path) -> None:
        if not self._inside(path.parent):
            return self._rmdir(path)
        if not path.is_dir():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        self._refuse_readonly(path.parent)
        if any(p.is_dir() for p in path.iterdir()) or self.procs(path):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
        self.writes.append((path, "rmdir"))
        for child in path.iterdir():
            child.unlink()
        return self._rmdir(path)

    def write_text(self, path: Path, text: str, *args: object, **kwargs: object) -> int:
        cgroup = path.parent
        if not self._inside(cgroup) or not (cgroup / "cgroup.controllers").exists():
            return self._write(path, text, *args, **kwargs)  # type: ignore[arg-type]
        self._refuse_readonly(cgroup)
        self.writes.append((path, text))
        is_root = cgroup == self.root
        if path.name == "cgroup.subtree_control":
            now = self._words(path)
            offered = self._words(cgroup / "cgroup.controllers")
            for word in text.split():
                name = word[1:]
                if word[0] == "+" and name not in offered:
                    raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
                if word[0] == "+" and not is_root and self.procs(cgroup):
                    raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
                now = now | {name} if word[0] == "+" else now - {name}
            for child in (c for c in cgroup.iterdir() if c.is_dir()):  # what children see
                self._offer(child, now)
            return self._write(path, " ".join(self._ordered(now)) + "\n")
        if path.name == "cgroup.procs":
            pid = text.strip()
            pid = str(os.getpid()) if pid == "0" else pid
            if not is_root and self._words(cgroup / "cgroup.subtree_control"):
                raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(path))
            for procs in self.root.rglob("cgroup.procs"):
                kept = [p for p in procs.read_text().split() if p != pid]
                self._write(procs, "".join(f"{p}\n" for p in kept))
            return self._write(path, path.read_text() + pid + "\n")
        if not path.exists() and path.name not in ("cgroup.kill",):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return self._write(path, text)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeCgroupfs:
        fake = self
        monkeypatch.setattr(pathlib.Path, "mkdir", lambda p, *a, **k: fake.mkdir(p, *a, **k))
        monkeypatch.setattr(pathlib.Path, "rmdir", lambda p: fake.rmdir(p))
        monkeypatch.setattr(
            pathlib.Path, "write_text", lambda p, t, *a, **k: fake.write_text(p, t, *a, **k)
        )
        return self

    def touched(self) -> list[Path]:
        """The cgroups written to (a file in it, or it made or removed), in order, once each."""
        seen: list[Path] = []
        for path, what in self.writes:
            cgroup = path if what in ("mkdir", "rmdir") else path.parent
            if cgroup not in seen:
                seen.append(cgroup)
        return seen
