"""The opencode binary: the pinned version, where it is installed, and how to install it.

The npm package `opencode-ai` ships a standalone binary per platform (an optional dependency,
e.g. `opencode-linux-x64`): no Node and no Python are needed to run it, only to install it.
It goes into a folder the project owns (`.tools/opencode` in a checkout, else
`$ARI_HOME/tools/opencode`), never a global install:

    make opencode        # or: python -m toolkit.agents.install

`ARI_OPENCODE_BIN` points at another binary (it must report the pinned version, or the run
is told explicitly to accept another one).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from toolkit.paths import state_dir
from toolkit.protected import checkout_root

OPENCODE_VERSION = "1.18.33"
PACKAGE = "opencode-ai"
INSTALL_TIMEOUT_S = 600


class ScaffoldError(RuntimeError):
    """The scaffold is missing, or not the pinned version; the message says what to do."""


def install_dir() -> Path:
    root = checkout_root()
    return (root / ".tools" if root else state_dir() / "tools") / "opencode"


def _platform_packages() -> list[str]:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    base = f"opencode-linux-{arch}"
    return [base, f"{base}-baseline", f"{base}-musl", f"{base}-baseline-musl"]


def _is_executable_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF" and os.access(path, os.X_OK)
    except OSError:
        return False


def find_binary() -> Path | None:
    """The opencode binary in force: $ARI_OPENCODE_BIN, else the project's npm install."""
    explicit = os.environ.get("ARI_OPENCODE_BIN")
    if explicit:
        return Path(explicit)
    modules = install_dir() / "node_modules"
    # The platform package's binary; the wrapper's copy only when its install script ran.
    candidates = [modules / p / "bin" / "opencode" for p in _platform_packages()]
    candidates.append(modules / PACKAGE / "bin" / "opencode.exe")
    return next((c for c in candidates if _is_executable_elf(c)), None)


def isolated_env(base: Path) -> dict[str, str]:
    """A scratch HOME and XDG folders under `base`, so that running the binary on the host
    writes nothing into the operator's own home."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(base / "home")}
    for name in ("CONFIG", "DATA", "CACHE", "STATE"):
        env[f"XDG_{name}_HOME"] = str(base / name.lower())
    env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
    env["OPENCODE_DISABLE_AUTOUPDATE"] = "1"
    for value in env.values():
        if value.startswith(str(base)):
            Path(value).mkdir(parents=True, exist_ok=True)
    return env


_VERSIONS: dict[tuple[str, int, int, int, int], str] = {}
"""`binary_version`'s answers in this process, by the binary's path, device, inode, size and
mtime: the binary (a JavaScript runtime with the whole scaffold inside) takes about a CPU
second to say its version, and a process that starts several runs asked it for each. A file
replaced or rewritten at that path has another key, so it is asked again."""


def binary_version(binary: Path) -> str:
    """What `opencode --version` says; `ScaffoldError` when it does not run."""
    try:
        st = binary.stat()
    except OSError as e:
        raise ScaffoldError(f"{binary}: cannot run the opencode binary: {e}") from e
    key = (str(binary), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _VERSIONS:
        _VERSIONS[key] = _ask_version(binary)
    return _VERSIONS[key]


def _ask_version(binary: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="ari-opencode-") as scratch:
        try:
            done = subprocess.run(
                [str(binary), "--version"],
                capture_output=True,
                text=True,
                timeout=120,
                env=isolated_env(Path(scratch)),
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ScaffoldError(f"{binary}: cannot run the opencode binary: {e}") from e
    version = done.stdout.strip()
    if done.returncode != 0 or not version:
        raise ScaffoldError(f"{binary}: `opencode --version` failed: {done.stderr.strip()[:200]}")
    return version


def require(any_version: bool = False) -> tuple[Path, str]:
    """The binary and its version, or `ScaffoldError` with the one command that fixes it."""
    binary = find_binary()
    if binary is None or not binary.exists():
        where = binary or install_dir()
        raise ScaffoldError(
            f"opencode {OPENCODE_VERSION} is not installed (looked in {where}); "
            "install it with `make opencode` (or `python -m toolkit.agents.install`)"
        )
    version = binary_version(binary)
    if version != OPENCODE_VERSION and not any_version:
        raise ScaffoldError(
            f"{binary} is opencode {version}, but runs are pinned to {OPENCODE_VERSION}: "
            "reinstall it with `make opencode`, or pass --any-scaffold-version to run with it "
            "(the run records the version it used)"
        )
    return binary, version


def install(dest: Path | None = None, quiet: bool = False) -> Path:
    """`npm install` the pinned package into `dest` (the project's folder by default)."""
    dest = dest or install_dir()
    npm = shutil.which("npm")
    if npm is None:
        raise ScaffoldError(
            "npm is needed once, to install opencode: install Node.js and npm "
            "(Debian: apt-get install nodejs npm), then run this again"
        )
    dest.mkdir(parents=True, exist_ok=True)
    argv = [npm, "install", "--prefix", str(dest), "--no-audit", "--no-fund"]
    argv += ["--loglevel", "error", f"{PACKAGE}@{OPENCODE_VERSION}"]
    try:
        done = subprocess.run(argv, capture_output=quiet, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise ScaffoldError(f"npm install of {PACKAGE} took over {INSTALL_TIMEOUT_S}s") from e
    if done.returncode != 0:
        detail = (done.stderr or "").strip()[-300:]
        raise ScaffoldError(f"npm install of {PACKAGE}@{OPENCODE_VERSION} failed: {detail}")
    binary = find_binary()
    if binary is None:
        raise ScaffoldError(f"npm installed {PACKAGE} into {dest} but no binary for this platform")
    version = binary_version(binary)
    if version != OPENCODE_VERSION:
        raise ScaffoldError(f"{binary} reports {version}, expected {OPENCODE_VERSION}")
    return binary


def main() -> None:
    """Install the pinned opencode unless it is there already; print where it is."""
    quiet = "--quiet" in sys.argv[1:]
    binary = find_binary()
    try:
        if binary is None or binary_version(binary) != OPENCODE_VERSION:
            binary = install(quiet=quiet)
    except ScaffoldError as e:
        sys.exit(f"error: {e}")
    print(f"opencode {OPENCODE_VERSION}: {binary}")


if __name__ == "__main__":
    main()
