"""The three roles of a run as sandboxes: controller, runner (grader: see `toolkit.grading`).

controller: the agent's shell, at the workspace root. Its PATH is one folder holding links to
    ordinary shell tools plus the `runner` client; the Python interpreters we know of and the
    GPU device nodes are hidden, so the agent has no Python and no GPU of its own. Network only
    if the scaffold needs a model API. The local backend cannot take away every interpreter a
    host may have (perl, awk): nothing the controller runs has the GPU or write access to the
    data anyway, and all compute that counts goes through `runner`, which is audited.
runner: runs the agent's `runner CMD` calls at the workspace root with Python, no network, the
    training data read-only, and the results, the exam, the banks and the harness's own files
    hidden.

Both hide `run_hidden(...)`: every protected path (`toolkit.protected`: the state folder, the
exam engine, the toolkit, the checkout with its git history) plus what only the run knows (the
exam file and its folder, the results folder, the banks, the harness's own folder).
"""

from __future__ import annotations

import glob
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from toolkit.protected import protected_paths
from toolkit.sandbox import Egress, Limits, Sandbox, create_sandbox

# The docker runner's caps (a container has no host limits to inherit): most of the memory,
# room for many data-loader workers and their threads.
DOCKER_RUNNER_MEMORY_SHARE = 0.8
DOCKER_RUNNER_PIDS = 8192

# The controller's caps: it runs the agent's scaffold and shell, never training.
CONTROLLER_MEMORY_SHARE = 0.1
CONTROLLER_MEMORY_MIN = 4 * 2**30
CONTROLLER_PIDS = 4096


def _ram_bytes() -> int:
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def runner_limits(cpus: float | None = None) -> Limits:
    """The runner's caps on either backend: most of the memory, room for many data-loader
    workers and their threads. A local runner gets them too: the official floor asks for a
    memory and a process cap on each role's tree, whatever the backend."""
    return Limits(
        memory_bytes=int(_ram_bytes() * DOCKER_RUNNER_MEMORY_SHARE),
        max_processes=DOCKER_RUNNER_PIDS,
        cpus=cpus,
    )


def controller_limits() -> Limits:
    """The controller's caps: a tenth of the memory (at least 4 GiB, at most half), and
    processes enough for a scaffold's shell work."""
    ram = _ram_bytes()
    memory = min(ram // 2, max(CONTROLLER_MEMORY_MIN, int(ram * CONTROLLER_MEMORY_SHARE)))
    return Limits(memory_bytes=memory, max_processes=CONTROLLER_PIDS)


def host_gpu_ids() -> list[str]:
    """The NVIDIA GPU ids of this host, from its device nodes (/dev/nvidia0, ...)."""
    found = [p.name.removeprefix("nvidia") for p in Path("/dev").glob("nvidia[0-9]*")]
    return sorted((g for g in found if g.isdigit()), key=int)


def detect_device() -> str:
    """ "cuda" when this host has an NVIDIA driver and torch's CUDA build sees a GPU, else "cpu".

    Without the driver's control node, torch (a slow import) is not even loaded."""
    if not Path("/dev/nvidiactl").exists():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_gpu(device: str) -> str | None:
    """The GPU a run on `device` pins its runner and grading to when none is named: N of
    "cuda:N", the host's first GPU for "cuda", none on a CPU (or a host without GPUs)."""
    if not device.startswith("cuda"):
        return None
    if ":" in device:
        return device.partition(":")[2]
    found = host_gpu_ids()
    return found[0] if found else None


def docker_runner_gpus(pinned: str | None = None) -> list[str]:
    """The docker runner's GPU: the pinned id, else the host's first GPU, else none (CPU)."""
    if pinned is not None:
        return [pinned]
    return host_gpu_ids()[:1]


def docker_image(backend: str, role: str) -> str | None:
    """The image of `role` for the docker backend (pinned or default); None for local."""
    if backend != "docker":
        return None
    from toolkit.images import current

    return current().ref(role)


# What an agent's shell needs; missing ones are skipped (the list is a courtesy, not a promise).
SHELL_TOOLS = (
    "sh", "bash", "dash", "cat", "ls", "cp", "mv", "rm", "mkdir", "rmdir", "ln", "touch",
    "chmod", "echo", "printf", "test", "[", "true", "false", "env", "pwd", "basename",
    "dirname", "head", "tail", "wc", "sort", "uniq", "cut", "tr", "tee", "grep", "egrep",
    "sed", "awk", "find", "xargs", "diff", "cmp", "date", "sleep", "du", "df", "stat",
    "mktemp", "mkfifo", "od", "sha256sum", "md5sum", "tar", "gzip", "gunzip", "zcat",
    "less", "more", "file", "seq", "expr", "id", "whoami", "uname", "nl", "fold", "paste",
    "comm", "split", "realpath", "readlink", "timeout", "kill", "ps", "git", "patch", "vi",
    "nano", "jq", "curl",
)  # fmt: skip


def controller_bin(bin_dir: Path) -> Path:
    """Fill `bin_dir` with links to the shell tools this host has (the `runner` goes there too)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in SHELL_TOOLS:
        found = shutil.which(tool, path="/usr/local/bin:/usr/bin:/bin")
        link = bin_dir / tool
        if found and not link.exists():
            link.symlink_to(found)
    return bin_dir


def tool_targets(bin_dir: Path) -> list[Path]:
    """Where the controller's tools live when that is outside the system folders (ripgrep
    installed under /opt or a home): shown read-only, since the local backend shows only an
    allow-list of the host (`host-allowlist`)."""
    from toolkit.sandbox.local.layout import SYSTEM_FOLDERS, is_within

    system = [Path(p) for p in SYSTEM_FOLDERS]
    found: set[Path] = set()
    for link in bin_dir.iterdir():
        if not link.is_symlink():
            continue
        target = link.resolve()
        if target.exists() and not any(is_within(target, s) for s in system):
            found.add(target)
    return sorted(found)


def python_paths() -> list[Path]:
    """Interpreters to hide from the controller: this toolkit's and the system's."""
    found = {Path(sys.prefix)}
    for pattern in ("/usr/bin/python*", "/usr/local/bin/python*", "/bin/python*"):
        found.update(Path(p) for p in glob.glob(pattern))
    return sorted(found)


def gpu_device_paths() -> list[Path]:
    """GPU device nodes, hidden from the controller (it has a shell, not the GPU).

    Covered with /dev/null by the sandbox like any hidden file. Untested on a GPU host in this
    repository's CI (none has one); the docker backend drops devices the usual way instead.
    """
    patterns = ("/dev/nvidia*", "/dev/dri/*", "/dev/kfd")
    return sorted(Path(p) for pattern in patterns for p in glob.glob(pattern))


def existing(paths: Sequence[Path]) -> list[Path]:
    """The paths that exist (a link counts), absolute, sorted, each once.

    A hidden folder that contains the sandbox's root or one of its read-only paths is kept: the
    sandbox layer hides everything else in it and keeps those visible (the workspace lives under
    `$ARI_HOME`, the interpreter may live in the checkout). Nothing is dropped here.
    """
    return sorted({Path(p).absolute() for p in paths if Path(p).exists() or Path(p).is_symlink()})


# Folders an exam may not sit in directly: hiding its folder would hide the system itself.
SYSTEM_FOLDERS = frozenset(
    Path(p) for p in ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run",
                      "/sbin", "/sys", "/usr", "/var")
)  # fmt: skip


def run_hidden(*, exam: Path, results_dir: Path, extra: Iterable[Path] = ()) -> list[Path]:
    """Everything the runner and the controller of a run must not see.

    Raises ValueError when the exam sits directly in a system folder: its folder is hidden along
    with it (an operator's exam folder often holds other exams or the bank), and hiding `/usr`
    or `/` would leave no system to run.
    """
    exam = exam.resolve()
    if exam.parent in SYSTEM_FOLDERS:
        raise ValueError(
            f"the exam {exam} lies directly in {exam.parent}; every sandbox hides the exam's "
            "folder, so keep the exam in a folder of its own (e.g. /srv/ari/exams/)"
        )
    return protected_paths([exam, exam.parent, results_dir.resolve(), *extra])


def make_controller(
    backend: str,
    workspace: Path,
    *,
    bin_dir: Path,
    hide: Sequence[Path],
    network: bool,
    env: dict[str, str],
    readonly: Sequence[Path],
    egress: Sequence[Egress] = (),
) -> Sandbox:
    hidden = existing([*hide, *python_paths(), *gpu_device_paths()])
    tools = [t for t in tool_targets(bin_dir) if t not in hidden and t not in readonly]
    return create_sandbox(
        backend,
        root=workspace,
        network=network,
        hide=hidden,
        limits=controller_limits(),
        env={"PATH": str(bin_dir), "HOME": str(workspace), **env},
        readonly=[*readonly, *(tools if backend == "local" else [])],
        egress=egress,
        image=docker_image(backend, "controller"),
    )


def make_runner(
    backend: str,
    workspace: Path,
    *,
    hide: Sequence[Path],
    readonly: Sequence[Path],
    limits: Limits | None = None,
    gpu: str | None = None,
    cpus: float | None = None,
) -> Sandbox:
    """The runner; with docker, one GPU by id (`gpu`, else the host's first; none: CPU).
    `cpus`: its CPU quota in cores (None: the host's), unless `limits` are given whole."""
    return create_sandbox(
        backend,
        root=workspace,
        network=False,
        hide=existing(hide),
        # Unbuffered Python, so that training logs stream back as they are printed.
        env={"PYTHONUNBUFFERED": "1", "HOME": str(workspace)},
        readonly=readonly,
        limits=limits or runner_limits(cpus),
        image=docker_image(backend, "runner"),
        # docker: the pinned GPU, else the host's first; local: the pinned GPU, else as is.
        gpus=docker_runner_gpus(gpu) if backend == "docker" else None if gpu is None else [gpu],
    )
