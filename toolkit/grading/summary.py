"""What `toolkit grade` prints of a grade report: the score, the per-family table, bits per
byte, timings, the bundle's and exam's identity, isolation, the ablation and the reason.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from toolkit.grading.report import GradeReport


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
    if not report.ok:  # what went wrong first: the table below is all zeros
        console.print(f"[bold red]the bundle failed: {report.reason}[/bold red]")
    if report.score_measured:
        console.print(f"[bold]Score: {s.percent:.1f}%[/bold] ({s.passed}/{s.total} exact)")
        console.print(report_table(report))
    else:
        console.print(
            f"[bold]Score: not measured[/bold] (phase 1 did not run: --phase bpb; "
            f"{s.total} questions)"
        )
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
    if report.ablation is not None:
        ablated = report.weights_ablation
        score = f"{ablated.passed}/{ablated.total}" if ablated else "—"
        suspect = " · MODEL-FREE SUSPECT" if report.model_free_suspect else ""
        console.print(f"weights ablation: {score} ({report.ablation.note}){suspect}")
    if report.reason and report.ok:
        console.print(f"[{colour}]reason: {report.reason}[/{colour}]")
