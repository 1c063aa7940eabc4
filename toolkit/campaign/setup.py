"""Turning a campaign file and the command line into a campaign, its inputs and an engine."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from exam_builder.exam_file import ExamFileError
from toolkit.campaign.config import (
    CampaignError,
    check_against_track,
    load_campaign_file,
)
from toolkit.campaign.driver import Campaign
from toolkit.campaign.job import check_training_data
from toolkit.campaign.local_engine import LocalEngine, Slot, cpu_slots, gpu_slots
from toolkit.host import grading_lock
from toolkit.paths import state_dir
from toolkit.run.inputs import InputError, check_public_set, prepare_data, public_set, resolve_exam
from toolkit.sandbox.local.gpus import host_gpu_ids, host_gpus
from toolkit.text.data import DataError
from toolkit.tracks.model import TRACKS_FILE, RegistryError, Track, get_track, load_tracks

if TYPE_CHECKING:
    from toolkit.campaign.ray_engine import RayEngine

CHECKOUT_RESULTS = Path(__file__).resolve().parents[2] / "results"


def open_campaign(path: Path, budget_s: float | None = None) -> Campaign:
    """Load the file, find its track (`find_registry`), apply a command-line budget override.
    Raises CampaignError (one line)."""
    file = load_campaign_file(path)
    if budget_s is not None:
        file = file.model_copy(update={"budget_s": budget_s})
    registry = find_registry(path, file.registry, file.results, file.track)
    try:
        track = get_track(registry, file.track)
    except RegistryError as exc:
        raise CampaignError(f"{path}: field 'track': {exc}") from None
    check_against_track(path, file, track)
    return Campaign(file=file, track=track, registry=registry)


def find_registry(path: Path, named: Path | None, results: Path, track_id: str) -> Path:
    """The folder whose tracks.json the campaign takes its track from: the `registry` the file
    names (that one only: a folder of the cwd must never stand in for it), else the first of
    the file's results folder, the checkout's results/ and ./results that registers the track
    (a results folder that so far holds other tracks must not hide it), else the first that has
    a tracks.json. Paths in the file are relative to it, so ./results comes last."""
    if named is not None:
        if named.name == TRACKS_FILE and named.is_file():  # the file itself, not its folder
            return named.parent
        if not (named / TRACKS_FILE).is_file():
            raise CampaignError(f"{path}: field 'registry': {named} holds no {TRACKS_FILE}")
        return named
    held = [c for c in (results, CHECKOUT_RESULTS, Path("results")) if (c / TRACKS_FILE).is_file()]
    for folder in held:
        try:
            if track_id in load_tracks(folder):
                return folder
        except RegistryError:
            return folder  # a broken registry is reported, with its name, by get_track
    return next(iter(held), results)


def exam_of(campaign: Campaign) -> Path:
    """The track's exam on this machine (demo tracks build theirs), hash checked."""
    try:
        return resolve_exam(campaign.track, campaign.file.exam)
    except (InputError, ExamFileError) as exc:
        raise CampaignError(f"field 'exam': {exc}") from None


def local_inputs(campaign: Campaign) -> tuple[dict[str, str], Path]:
    """Exam and training data prepared once for every run of this box: (job settings, the
    prepared data folder to remove at the end)."""
    exam = exam_of(campaign)
    data = Path(tempfile.mkdtemp(prefix="prepared-data-", dir=state_dir()))
    try:
        check_public_set(campaign.track, public_set())
        prepare_data(campaign.file.train_data, data)
        source = None if campaign.file.train_data is None else str(campaign.file.train_data)
        check_training_data(campaign.track, data, source)
    except (InputError, DataError, CampaignError) as exc:
        shutil.rmtree(data, ignore_errors=True)
        raise CampaignError(str(exc)) from None
    return {"exam": str(exam), "data_dir": str(data)}, data


def local_slots(gpus: str | None, slots: int | None, backend: str = "local") -> list[Slot]:
    """`--gpus 0,1` (GPU slots), `--slots N` (CPU slots), or every GPU of the box, else one
    CPU slot. GPU ids this host cannot use are refused (`gpu_ids_problem`), as `toolkit run
    --device cuda` is: a run given one would train on the CPU and record the GPU."""
    if gpus is not None and slots is not None:
        raise CampaignError("give --gpus or --slots, not both")
    if gpus is not None:
        ids = [g.strip() for g in gpus.split(",") if g.strip()]
        if not ids or len(set(ids)) != len(ids):
            raise CampaignError(f"--gpus {gpus!r}: give distinct GPU ids, e.g. --gpus 0,1")
        problem = gpu_ids_problem(ids, backend)
        if problem is not None:
            raise CampaignError(f"--gpus {gpus}: {problem}")
        return gpu_slots(ids)
    if slots is not None:
        return cpu_slots(slots)
    found = host_gpu_ids()
    return gpu_slots(found) if found else cpu_slots(1)


def accept_host_channel(track: Track, slots: list[Slot], accepted: str | None) -> None:
    """Refuse (CampaignError) runs side by side on one host for an official track, unless the
    operator named the measured rate of what the host still shares between them
    (`--accept-host-channel`); when named, its runs' hidden gradings go beside other runs
    (`grading_lock.ACCEPT_ENV`, set here for the campaign's child runs)."""
    rate = grading_lock.accepted_rate()
    if accepted is not None and accepted.replace(" ", "") != rate:
        raise CampaignError(
            f"--accept-host-channel {accepted}: name the measured rate, {rate} "
            "(security/channels.md#runs-on-one-host)"
        )
    if len(slots) <= 1 or track.demo:
        return
    if accepted is None:
        raise CampaignError(
            f"track '{track.id}' is official and {len(slots)} runs would share this host: "
            f"what a host still shares between sandboxes carries {rate} (a file lock, free "
            "memory, the task count, CPU time: security/channels.md#runs-on-one-host), enough "
            "for one run's agent to read another's hidden grading. Run one at a time "
            f"(--slots 1 or --gpus with one id), or accept it: --accept-host-channel {rate}"
        )
    os.environ[grading_lock.ACCEPT_ENV] = rate


def gpu_ids_problem(ids: list[str], backend: str) -> str | None:
    """Why this host cannot give runs the GPUs `ids` (indexes or UUIDs), in one line with the
    fix; None when it can. The docker backend's torch is its image's, so only the host's GPUs
    are checked there; the local backend's runs use this interpreter's torch, which must see
    a GPU (as `options.device_problem` checks for `toolkit run --device cuda`)."""
    fix = "leave --gpus out (CPU slots: --slots N) on a box without a usable GPU"
    known = host_gpu_ids()
    known_ids = set(known) | {g.uuid for g in host_gpus() if g.uuid}
    missing = [i for i in ids if i not in known_ids]
    if missing:
        have = ", ".join(known) if known else "none"
        return f"this host has no GPU {', '.join(missing)} (its GPUs: {have}); {fix}"
    if backend == "docker":
        return None
    import torch

    if not torch.cuda.is_available():
        return (
            f"this host's torch {torch.__version__} cannot use a GPU (CPU-only build or driver "
            f"mismatch); install a CUDA build of torch, or {fix}"
        )
    return None


def local_engine(campaign: Campaign, slots: list[Slot]) -> LocalEngine:
    return LocalEngine(slots, campaign.results_dir)


def ray_engine(
    campaign: Campaign, address: str | None, resource: str | None
) -> tuple[RayEngine, list[str]]:
    """The Ray engine of `campaign` on the cluster at `address` (each run asks for a GPU, or one
    unit of `resource`), and a note for each host with more slots than cores."""
    from toolkit.campaign.ray_engine import RayEngine

    engine = RayEngine(
        address=address,
        results_dir=campaign.results_dir,
        exam=exam_of(campaign).read_bytes(),
        resource=resource,
    )
    return engine, engine.host_problems()
