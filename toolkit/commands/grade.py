"""`toolkit grade`: grade one bundle on an exam and print the report.

Exit status 0 whenever the bundle was graded, even at score 0: a bad bundle is a result. A
missing exam, an unknown backend or an unwritable `--json` path are usage errors (status 2).
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from exam_builder.exam_file import ExamFileError
from toolkit.commands.console import make_console
from toolkit.grading import SIZE_LIMIT_BYTES, GradeReport, grade_bundle
from toolkit.results import write_json_atomic
from toolkit.sandbox import BACKENDS
from toolkit.tracks import GradingParams


def report_table(report: GradeReport) -> Table:
    """Per-family pass counts as a rich table."""
    table = Table(title="Per family", title_justify="left")
    for name in ("family", "passed", "total", "percent"):
        table.add_column(name, justify="left" if name == "family" else "right")
    for name, fam in report.families.items():
        pct = 100.0 * fam.passed / fam.total if fam.total else 0.0
        table.add_row(name, str(fam.passed), str(fam.total), f"{pct:.1f}")
    table.add_section()
    s = report.score
    table.add_row("all", str(s.passed), str(s.total), f"{s.percent:.1f}")
    return table


def print_report(report: GradeReport, console: Console) -> None:
    """The summary `toolkit grade` prints: score, families, bpb, timings, identity, reason."""
    s = report.score
    colour = "green" if report.ok and not report.reason else "yellow" if report.ok else "red"
    console.print(f"[bold]Score: {s.percent:.1f}%[/bold] ({s.passed}/{s.total} exact)")
    console.print(report_table(report))
    bpb = (
        f"{report.bits_per_byte:.4f}"
        if report.bits_per_byte is not None
        else f"— ({report.bpb_reason})"
    )
    console.print(f"bits per byte on the answer spans: {bpb}")
    t = report.timings
    console.print(
        f"timings (s): pack {t.pack:.2f} · load {t.load:.2f} · phase 1 {t.phase1:.2f} · "
        f"phase 2 {t.phase2:.2f} · total {t.total:.2f}"
    )
    size = f"{report.packed_bytes:,}" if report.packed_bytes is not None else "—"
    console.print(
        f"bundle sha256 {report.sha256 or '—'} · packed {size} bytes "
        f"(limit {report.size_limit_bytes:,})"
    )
    console.print(f"exam sha256 {report.exam_sha256} · backend {report.backend} · {report.device}")
    console.print(f"isolation: {', '.join(report.isolation) or '—'}")
    if report.reason:
        console.print(f"[{colour}]reason: {report.reason}[/{colour}]")


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
@click.option("--device", default="cpu", show_default=True, help="Device passed to load().")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as JSON here.",
)
@click.option(
    "--size-limit",
    type=int,
    default=SIZE_LIMIT_BYTES,
    show_default=True,
    help="Largest packed bundle, in bytes.",
)
@click.option(
    "--phase",
    "phases",
    type=click.Choice(["generate", "bpb"]),
    multiple=True,
    help="Run only these phases (repeatable; default both).",
)
@click.option(
    "--keep",
    "keep_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the archive and each phase's sandbox folder here (to inspect a bundle).",
)
def grade_command(
    bundle: Path,
    exam: Path,
    backend: str,
    device: str,
    json_out: Path | None,
    size_limit: int,
    phases: tuple[str, ...],
    keep_dir: Path | None,
) -> None:
    """Grade a bundle (a folder or .tar.gz) on an exam, in a sandbox.

    The grader packs the bundle itself and checks its size, then runs the bundle's
    inference.py in a fresh sandbox: phase 1 generates every answer greedily (exact match is
    the score), phase 2 measures bits per byte in another fresh worker. A bundle that fails is
    graded (score 0 and a reason), and the exit status is still 0.

    \b
    Example:
      toolkit grade bundles/b1 --exam /tmp/exam/exam.jsonl --json report.json
    """
    console = make_console()
    if keep_dir is not None and keep_dir.exists() and any(keep_dir.iterdir()):
        raise click.UsageError(f"--keep {keep_dir}: the folder is not empty; pick a new one")
    try:
        report = grade_bundle(
            bundle,
            exam,
            params=GradingParams(),
            size_limit_bytes=size_limit,
            backend=backend,
            device=device,
            phases=phases or ("generate", "bpb"),
            progress=True,
            workdir=keep_dir,
        )
    except ExamFileError as exc:
        raise click.UsageError(f"{exc} (pass --exam with a built exam.jsonl)") from exc
    except FileExistsError as exc:
        raise click.UsageError(
            f"--keep {keep_dir}: already holds a grading; pick a new folder"
        ) from exc
    print_report(report, console)
    if json_out is not None:
        try:
            write_json_atomic(json_out, report.model_dump_json(indent=2) + "\n")
        except OSError as exc:
            raise click.UsageError(f"cannot write --json {json_out}: {exc}") from exc
        console.print(f"report written to {json_out}")
