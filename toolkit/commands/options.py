"""Options that several commands share, as decorators (one definition, one behaviour)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from toolkit.agents.scripted import BASELINE_MODEL
from toolkit.campaign.claims import Claims, holder
from toolkit.campaign.plan import RunKey

if TYPE_CHECKING:
    from toolkit.tracks.model import Track

F = TypeVar("F", bound=Callable[..., Any])


def results_dir_option(help: str) -> Callable[[F], F]:
    """`--results DIR`: the results folder (registry + per-run files), env `ARI_RESULTS_DIR`."""
    return click.option(
        "--results",
        "results_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("results"),
        show_default=True,
        envvar="ARI_RESULTS_DIR",
        help=f"{help} (env ARI_RESULTS_DIR).",
    )


def registry_option() -> Callable[[F], F]:
    """`--registry DIR`: the folder holding tracks.json, when it is not the results folder."""
    return click.option(
        "--registry",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        default=None,
        help="Folder with tracks.json if not the results folder "
        "(default: --results, then ./results, then the checkout's).",
    )


def find_registry(results_dir: Path, registry: Path | None, track_id: str | None = None) -> Path:
    """Where tracks.json is: --registry, else the results folder if it has one, else
    ./results, else the registry of the checkout this toolkit runs from (the results folder
    when none has one).

    With `track_id`, the first of those that registers that track: a results folder that so
    far holds only the demo track must not hide the official one that `tracks list` shows
    (the run then carries the entry into the results folder)."""
    if registry is not None:
        return registry
    candidates = [results_dir, Path("results"), Path(__file__).resolve().parents[2] / "results"]
    held = [c for c in candidates if (c / "tracks.json").is_file()]
    if track_id is not None:
        from toolkit.tracks.model import RegistryError, load_tracks

        for folder in held:
            try:
                if track_id in load_tracks(folder):
                    return folder
            except RegistryError:
                break  # a broken registry is reported by whoever reads it next
    return next(iter(held), results_dir)


def known_track(results_dir: Path, registry: Path | None, track_id: str) -> Track:
    """The registered track `track_id`, or one line and exit status 2 (`Refused`) naming the
    registry read and the tracks it knows: the same for every command that takes a track."""
    from toolkit.tracks.model import RegistryError, get_track

    try:
        return get_track(find_registry(results_dir, registry, track_id), track_id)
    except RegistryError as exc:
        raise Refused(str(exc)) from None


def _host_cpus(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    cores = os.cpu_count() or 1
    if value is not None and value > cores:
        raise click.BadParameter(f"{value:g} cores asked, this host has {cores}")
    return value


def cpus_option(what: str) -> Callable[[F], F]:
    """`--cpus N`: a CPU quota, in cores, for the sandboxes that run model code."""
    return click.option(
        "--cpus",
        type=click.FloatRange(min=0.01),
        default=None,
        callback=_host_cpus,
        help=f"CPU quota of {what}, in cores (e.g. 8 or 2.5; enforced by the kernel, recorded); "
        "default: none, the host's cores are shared.",
    )


def keys_option() -> Callable[[F], F]:
    """`--keys FILE`: a key list to pin, beside the toolkit's pinned keys."""
    return click.option(
        "--keys",
        "keys_file",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        default=None,
        help="A key list (signing_keys.json format) whose keys you pin, beside the toolkit's "
        "pinned_keys.json, $ARI_TRUSTED_KEYS and this machine's key. The results folder's own "
        "signing_keys.json is never trusted: a key only it lists is reported as untrusted.",
    )


def _device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if value == "auto":
        from toolkit.run.roles import detect_device  # the run package: only when asked

        return detect_device()
    head, colon, index = value.partition(":")
    if not (value == "cpu" or (head == "cuda" and (not colon or index.isdigit()))):
        raise click.BadParameter(f"{value!r}: want auto, cpu, cuda or cuda:N")
    return value


class Refused(click.ClickException):
    """A usage error said in one line (no usage banner): exit status 2, like click's."""

    exit_code = 2


def refuse_device(device: str, backend: str) -> None:
    """Raise `Refused` when this host cannot use `device` (see `device_problem`)."""
    problem = device_problem(device, backend)
    if problem is not None:
        raise Refused(problem)


def device_problem(device: str, backend: str = "local") -> str | None:
    """Why this host cannot grade or train on `device`, in one line with the fix; None if it can.

    Checked before any work: a run on a GPU this host lacks would otherwise spend its whole
    budget and record a counted 0% seed. The docker backend's torch is the image's, so there
    only the host's GPU device nodes are checked; the local backend runs this interpreter's
    torch, which must see the GPU (a CPU-only build, or a driver it cannot use, is refused)."""
    head, _, index = device.partition(":")
    if head != "cuda":
        return None
    fix = "use --device cpu (or auto: the GPU when there is one)"
    if not Path("/dev/nvidiactl").exists():
        return f"--device {device}: this host has no NVIDIA GPU driver (/dev/nvidiactl); {fix}"
    if backend == "docker":
        from toolkit.run.roles import host_gpu_ids

        ids = host_gpu_ids()
        if (index or "0") not in ids:
            return f"--device {device}: this host's GPUs are {ids or 'none'}; {fix}"
        return None
    import torch

    if not torch.cuda.is_available():
        return (
            f"--device {device}: this host's torch {torch.__version__} cannot use a GPU "
            f"(CPU-only build or driver mismatch); install a CUDA build of torch, or {fix}"
        )
    count = torch.cuda.device_count()
    if index and int(index) >= count:
        return f"--device {device}: torch sees {count} GPU(s) here (cuda:0..{count - 1}); {fix}"
    return None


def device_option(help: str) -> Callable[[F], F]:
    """`--device auto|cpu|cuda|cuda:N`, resolved: auto is the GPU when CUDA can use one."""
    return click.option(
        "--device",
        default="auto",
        show_default=True,
        callback=_device,
        help=f"{help} auto: cuda when this host's torch can use a GPU, else cpu; cuda:N pins "
        "GPU N.",
    )


def refuse_stray_results(results_dir: Path) -> None:
    """`--results` left out (and no ARI_RESULTS_DIR) where ./results does not exist: a run
    would silently make a results folder in whatever folder the operator stands in."""
    source = click.get_current_context().get_parameter_source("results_dir")
    if source == click.core.ParameterSource.DEFAULT and not results_dir.is_dir():
        raise Refused(
            f"no results folder here ({Path.cwd() / results_dir} does not exist): pass "
            "--results DIR (a scratch folder for a try-out: --results /tmp/ari-results), or "
            "run from the checkout"
        )


def results_write_problem(results_dir: Path, track_id: str) -> str | None:
    """Why a run could not write its result under `results_dir/track_id`, in one line with the
    fix; None when it can. Probed by making and removing a file in the nearest folder that
    exists (mode bits, a read-only mount, a full quota: whatever the kernel says), so nothing is
    left behind by a run refused later."""
    folder = results_dir / track_id
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"results folder {results_dir}: {folder} is not a folder; pass --results DIR"
    try:
        fd, probe = tempfile.mkstemp(prefix=".ari-write-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return (
            f"results folder {results_dir}: cannot write in {folder} ({exc.strerror}); "
            "make it writable, or pass --results DIR (e.g. --results /tmp/ari-results)"
        )
    return None


def model_for(agent: str, model: str | None) -> str:
    """The row's model name: the scripted agent's is fixed (it uses no model)."""
    if agent == "scripted":
        if model not in (None, BASELINE_MODEL):
            raise click.UsageError(
                f"--agent scripted uses no model, so its runs are recorded as "
                f"'{BASELINE_MODEL}': leave --model out (got '{model}')"
            )
        return BASELINE_MODEL
    if not model:
        raise click.UsageError(f"--agent {agent} needs --model (the model under test)")
    return model


def claim_run_key(results_dir: Path, key: RunKey) -> None:
    """Hold `key`'s claim until the command ends, or refuse: a run of it is going on."""
    claims = Claims(results_dir)
    # Let go however the command ends (a test's CliRunner runs many in one process, and a
    # claim left open would refuse the next run of the key).
    click.get_current_context().call_on_close(claims.release_all)
    if not claims.claim(key):
        who = holder(results_dir, key) or "another process"
        raise click.ClickException(
            f"a run of {key.label()} on track '{key.track}' is already going on in "
            f"{results_dir} (held by {who}); wait for it to end, or use another seed"
        )
