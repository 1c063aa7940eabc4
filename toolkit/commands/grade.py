"""`toolkit grade`: grade one bundle on an exam and print the report.

Exit status 0 when the bundle was graded, even at score 0; 3 when it failed as a whole (too
large, `load()` raised, a crash or a hang: a script must not take it for a grading), unless
`--graded-ok` says a failed bundle is a result too. A missing exam, an unknown backend, a GPU
this host cannot use or an unwritable `--json` path are usage errors (status 2).

An exam is hidden unless it is known to be public (a demo track's exam, or a track's public
validation set, by SHA-256) or the operator says `--public`: a hidden grading prints and writes
failure categories only, never what the bundle said (that goes to the operator log).
"""

from __future__ import annotations

from pathlib import Path

import click

from exam_builder.exam_file import ExamFileError, sha256_file
from toolkit.commands.console import make_console
from toolkit.commands.images import images_option, use_docker_images
from toolkit.commands.options import (
    Refused,
    cpus_option,
    device_option,
    find_registry,
    refuse_device,
    registry_option,
    results_dir_option,
)
from toolkit.grading import SIZE_LIMIT_BYTES, grade_bundle
from toolkit.grading.inputs import grade_inputs_problem
from toolkit.grading.questions import grade_questions, public_marking_problem, questions_table
from toolkit.grading.summary import print_report
from toolkit.host.grading_lock import alone_on_host
from toolkit.results.model import write_json_atomic
from toolkit.sandbox import BACKENDS
from toolkit.tracks.model import GradingParams, RegistryError, Track, get_track, load_tracks


def public_exam(registry: Path, exam_file: Path) -> str | None:
    """Why this exam is public (a demo track's exam or a track's public set), or None."""
    sha = sha256_file(exam_file)
    try:
        tracks = list(load_tracks(registry).values())
    except RegistryError:
        return None
    for track in tracks:
        if track.demo and track.matches_exam(sha):
            return f"the exam of the demo track '{track.id}'"
        if track.public_set_sha256 and sha.startswith(track.public_set_sha256):
            return f"the public validation set of track '{track.id}'"
    return None


def official_exam(results_dir: Path, registry: Path | None, exam: Path) -> str | None:
    """Why an exam may not be shown question by question although its manifest says public:
    it is the exam of an official (hidden) track of the registry."""
    exam_file = exam / "exam.jsonl" if exam.is_dir() else exam
    try:
        tracks = load_tracks(find_registry(results_dir, registry)).values()
    except RegistryError:
        return None
    sha = sha256_file(exam_file)
    hidden = next((t for t in tracks if not t.demo and t.matches_exam(sha)), None)
    if hidden is None:
        return None
    return f"{exam_file} is the hidden exam of track '{hidden.id}': question by question is refused"


def choose_track(registry: Path, track_id: str | None, exam_file: Path) -> tuple[Track | None, str]:
    """The track whose grading settings apply, and one line saying which and why.

    --track wins; else the track whose exam hash matches this exam (an official one first);
    else the official track (the first non-demo one in the registry); else none (defaults).
    """
    try:
        if track_id is not None:
            track = get_track(registry, track_id)
            sha = sha256_file(exam_file)
            match = "" if track.matches_exam(sha) else " (its exam hash is not this exam's)"
            return track, f"track '{track.id}' (--track){match}"
        tracks = list(load_tracks(registry).values())
    except RegistryError as exc:
        raise click.UsageError(str(exc)) from exc
    sha = sha256_file(exam_file)
    matching = sorted((t for t in tracks if t.matches_exam(sha)), key=lambda t: t.demo)
    if matching:
        return matching[0], f"track '{matching[0].id}' (its exam hash matches this exam)"
    official = [t for t in tracks if not t.demo]
    if official:
        return official[0], f"track '{official[0].id}' (the official track; no track has this exam)"
    return None, f"defaults (no track registry in {registry}; pass --registry or --track)"


@click.command("grade")
@click.argument("bundle", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--exam",
    "exam",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="The exam: an exam.jsonl file, or a folder holding one.",
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="local",
    show_default=True,
    help="Sandbox backend that runs the bundle's code.",
)
@images_option
@device_option("Device passed to the bundle's load().")
@cpus_option("each grading worker")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as JSON here.",
)
@click.option(
    "--size-limit",
    type=int,
    default=None,
    help=f"Largest packed bundle, in bytes (default: the track's, else {SIZE_LIMIT_BYTES:,}).",
)
@click.option(
    "--track",
    "track_id",
    default=None,
    help="Take this track's grading settings (default: the track whose exam hash matches the "
    "exam, else the official track).",
)
@results_dir_option("Results folder holding the track registry (tracks.json)")
@registry_option()
@click.option(
    "--phase",
    "phases",
    type=click.Choice(["generate", "bpb"]),
    multiple=True,
    help="Run only these phases (repeatable; default both).",
)
@click.option(
    "--public",
    "public",
    is_flag=True,
    help="The exam is public: report what the bundle said (its errors, its wrong outputs). "
    "Default: only for a demo track's exam or a public validation set; any other exam is "
    "hidden and only failure categories are shown.",
)
@click.option(
    "--questions",
    "per_question",
    is_flag=True,
    help="Also show each question: family, tier, the prompt's end, the answer, what the bundle "
    "wrote, pass (and in --json). Only for an exam its manifest marks public (the public "
    "validation set, a demo exam); a hidden exam is refused, whatever else is given.",
)
@click.option(
    "--keep",
    "keep_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the archive and each phase's sandbox folder here, with what the bundle wrote "
    "there (to inspect a bundle; those folders are then capped per file only).",
)
@click.option(
    "--graded-ok",
    is_flag=True,
    help="Exit 0 even when the bundle fails as a whole (size, load, crash, hang): the failure "
    "is a graded result (score 0). Default: exit status 3 then.",
)
@click.option(
    "--fail-on-error", is_flag=True, hidden=True, help="The default now; kept for scripts."
)
@click.option(
    "--ablation/--no-ablation",
    default=None,
    help="Also run phase 1 with the bundle's weights replaced by noise (the model-free "
    "diagnostic). Default: on for a hidden exam, off for a public set or a demo track's exam.",
)
def grade_command(
    bundle: Path,
    exam: Path,
    backend: str,
    device: str,
    cpus: float | None,
    json_out: Path | None,
    size_limit: int | None,
    track_id: str | None,
    results_dir: Path,
    registry: Path | None,
    phases: tuple[str, ...],
    keep_dir: Path | None,
    images_file: Path | None,
    ablation: bool | None,
    public: bool,
    per_question: bool,
    graded_ok: bool,
    fail_on_error: bool,
) -> None:
    """Grade a bundle (a folder or .tar.gz) on an exam, in a sandbox.

    The grader packs the bundle itself and checks its size, then runs the bundle's
    inference.py in a fresh sandbox: phase 1 generates every answer greedily (exact match is
    the score), phase 2 measures bits per byte in another fresh worker. A bundle that fails is
    graded (score 0 and a reason, printed first) and the exit status is 3 (0 with
    --graded-ok).

    \b
    The grading settings (time limits, memory cap, batch size, context) are a track's: the
    one given with --track, else the one whose exam hash matches the exam, else the official
    one; a memory cap above this host's memory is lowered to it (and said so).

    On a hidden exam (any exam that is not a track's public set or a demo track's exam) the
    weights ablation runs too: phase 1 again, in a fresh sandbox, with every file of the
    bundle but its Python source replaced by noise. A score that survives it is flagged as a
    model-free suspect (--no-ablation skips it; --ablation forces it).

    \b
    The exam is hidden unless it is a demo track's exam or a track's public validation set
    (by SHA-256), or --public is given: then the report says what went wrong in categories
    only, with no number in them ("load(): the bundle raised an error"), bits per byte is
    published 0 to 8 in steps of 0.25, the weights-ablation count rounded down to 1/10 of the
    exam, and what the bundle said is appended to $ARI_HOME/operator/grading.log (mode 0600)
    for the operator. Its timings stay exact here (they are the operator's); a run publishes
    its grading's time only as under a minute, one to ten minutes, or longer.

    \b
    With --questions (an exam its manifest marks public only) it also prints each question:
    its family and tier, the end of its prompt, the answer and what the bundle wrote.

    \b
    Example:
      toolkit grade bundles/b1 --exam /tmp/exam/exam.jsonl --json report.json
      toolkit grade bundles/b1 --exam /tmp/demo-exam --questions
    """
    refuse_device(device, backend)  # a GPU this host cannot use: refused before any work
    if bundle.is_dir() and not (bundle / "inference.py").is_file():  # a wrong path, likely
        what = "an empty folder" if not any(bundle.iterdir()) else "no inference.py there"
        raise Refused(
            f"{bundle}: {what}: a bundle is a folder (or its .tar.gz) with inference.py, which "
            "defines load(bundle_dir, device), and its weight files"
        )
    problem = grade_inputs_problem(bundle, exam)
    if problem is None and per_question:  # the exam's own marking decides, nothing else
        problem = public_marking_problem(exam) or official_exam(results_dir, registry, exam)
    if problem is not None:
        raise Refused(problem)
    console = make_console()
    if backend == "docker":
        use_docker_images(images_file)  # no engine or a wrong image: one line, before work
    elif images_file is not None:
        raise click.UsageError("--images pins Docker images: use it with --backend docker")
    if keep_dir is not None and keep_dir.exists() and any(keep_dir.iterdir()):
        raise click.UsageError(f"--keep {keep_dir}: the folder is not empty; pick a new one")
    exam_file = exam / "exam.jsonl" if exam.is_dir() else exam
    if not exam_file.is_file():
        raise click.UsageError(f"{exam}: no exam.jsonl there (pass --exam with a built exam)")
    registry_file = find_registry(results_dir, registry, track_id)
    track, why = choose_track(registry_file, track_id, exam_file)
    console.print(f"grading settings: {why}")
    console.print(f"device {device} (backend {backend})")
    known = None if public else public_exam(registry_file, exam_file)
    if per_question:
        known = known or "its manifest marks it public"
    if public or known:
        console.print(f"public exam ({'--public' if public else known}): the bundle's errors shown")
    else:
        console.print("hidden exam: failure categories only (the details: the operator log)")
    params = track.grading if track else GradingParams()
    if ablation is None:
        ablation = not (public or known)
    ablation = ablation and "generate" in (phases or ("generate",))
    hidden = not (public or known)
    grade = grade_questions if per_question else grade_bundle
    official = hidden and (track is None or not track.demo)
    limit = size_limit or (track.size_limit_bytes if track else SIZE_LIMIT_BYTES)
    try:
        with alone_on_host(official, waiting=console.print):
            report = grade(
                bundle,
                exam,
                params=params,
                size_limit_bytes=limit,
                backend=backend,
                device=device,
                phases=phases or ("generate", "bpb"),
                progress=True,
                workdir=keep_dir,
                cpus=cpus,
                ablation=ablation,
                hidden=hidden,
            )
    except ExamFileError as exc:
        raise click.UsageError(f"{exc} (pass --exam with a built exam.jsonl)") from exc
    except FileExistsError as exc:
        raise click.UsageError(
            f"--keep {keep_dir}: already holds a grading; pick a new folder"
        ) from exc
    for note in report.notes:
        console.print(f"[yellow]note: {note}[/yellow]")
    print_report(report, console)
    if report.questions is not None:
        console.print(questions_table(report.questions))
    if json_out is not None:
        try:
            write_json_atomic(json_out, report.model_dump_json(indent=2) + "\n")
        except OSError as exc:
            raise click.UsageError(f"cannot write --json {json_out}: {exc}") from exc
        console.print(f"report written to {json_out}")
    if not report.ok and not graded_ok:
        make_console(stderr=True).print(
            f"error: the bundle failed as a whole ({report.reason}); exit status 3 "
            "(--graded-ok to exit 0 for a failed bundle)"
        )
        raise SystemExit(3)
