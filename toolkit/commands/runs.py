"""`toolkit runs recover / validate / verify / clean / schema`: look after run results (the
group that `toolkit.commands.runs_live` adds list/show/tail/kill to).

Exit status: 0 when everything checked is good; 1 when a file is bad or a re-grade differs;
2 for usage errors.
"""

from __future__ import annotations

from pathlib import Path

import click

from exam_builder.exam_file import ExamFileError
from toolkit import state
from toolkit.commands.console import decimal_size
from toolkit.commands.options import keys_option, refuse_device
from toolkit.paths import state_dir
from toolkit.results.chain import ChainError, read_chain
from toolkit.results.model import (
    ResultsError,
    json_schema,
    load_run,
    read_result_file,
)
from toolkit.results.published import one_line, run_folder_problems
from toolkit.results.signing import (
    Keyring,
    SigningError,
    Verdict,
    check,
    keyring_path,
    load_folder_keyring,
    trusted_keyring,
)
from toolkit.run.artifacts import AUDIT_FILE, check_files
from toolkit.run.history import HISTORY_FILE, check_against
from toolkit.run.recovery import recover_runs
from toolkit.run.verify import check_logs, verify_run
from toolkit.sandbox import BACKENDS
from toolkit.stats import results_problems
from toolkit.stats.loading import signature_problem


class _Keyrings:
    """What each result file is checked against: the pinned keys (`toolkit.results.signing`; with
    --keys, that list too), and its folder's signing_keys.json as a hint only."""

    def __init__(self, keys_file: Path | None) -> None:
        self.extra = (keys_file,) if keys_file else ()
        self.loaded: dict[Path, tuple[Keyring, Keyring]] = {}
        self.problems: list[str] = []
        """Folders' own key lists that could not be read (each said once; a hint only)."""

    def of(self, result_file: Path) -> tuple[Keyring, Keyring]:
        """(trusted, the folder's own list) for `result_file`; a folder list that cannot be
        read is a problem of its own, and no hint."""
        folder_dir = result_file.parent.parent
        path = keyring_path(folder_dir)
        if path not in self.loaded:
            try:
                folder = load_folder_keyring(folder_dir)
            except SigningError as exc:
                self.problems.append(one_line(str(exc)))
                folder = Keyring()
            self.loaded[path] = (trusted_keyring(self.extra), folder)
        return self.loaded[path]

    def check(self, result_file: Path) -> Verdict:
        trusted, folder = self.of(result_file)
        return check(read_result_file(result_file), trusted, folder)


def _echo(line: str, err: bool = False) -> None:
    """One line about files someone else wrote: their names and fields are printed with every
    character that is not printable written as an escape (`one_line`), so a terminal escape
    in a model name or a file name is shown, never obeyed."""
    click.echo(one_line(line), err=err)


@click.group("runs")
def runs_group() -> None:
    """Look after run results: recover interrupted runs, validate or verify results, schema.

    \b
    Example:
      toolkit runs validate results/
    """


@runs_group.command("recover")
def recover_command() -> None:
    """Record every run whose harness died (e.g. kill -9) as invalid, with its reason.

    `toolkit run` does this too before it starts. Docker containers and networks left by a
    harness that is gone are removed. The audit log and the submission history of
    such a run are kept as they were; leftover agent processes are killed.

    \b
    Example:
      toolkit runs recover
    """
    written = recover_runs()
    for path in written:
        click.echo(f"recorded as invalid: {path}")
        listed = load_run(path).artifacts
        click.echo(f"  artifacts kept: {', '.join(sorted(listed)) or 'none'}")
    if not written:
        click.echo("no interrupted runs")
    from toolkit.sandbox.docker.engine import remove_leftovers

    removed = remove_leftovers()  # containers of any harness that is gone (none: no engine)
    if removed:
        click.echo(f"removed {len(removed)} leftover Docker containers and networks")


def _result_files(paths: tuple[Path, ...]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.glob("*/*.json") if p.is_file())
        else:
            files.append(path)
    return files


@runs_group.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@keys_option()
@click.option(
    "--strict",
    is_flag=True,
    help="Exit non-zero when a file passes only as unverified (unsigned, written before "
    "signing): every file must be signed by a pinned key.",
)
def validate_command(paths: tuple[Path, ...], keys_file: Path | None, strict: bool) -> None:
    """Check result files against the run model, their histories and their signatures.

    PATHS are result files or results folders (every <track>/<run_id>.json inside). Errors name
    the file and the field; the exit status is 1 if any file is bad. A file whose signature does
    not verify under a pinned key (the toolkit's pinned_keys.json, $ARI_TRUSTED_KEYS, --keys,
    this machine's key; never the folder's own signing_keys.json) is bad: unsigned, signed by
    a key nobody pinned, or changed since it was signed. A file that the
    pinned list names as written before signing, unchanged, passes as unverified: its verdict
    says `ok (unverified: unsigned)`, and --strict fails it.

    \b
    Example:
      toolkit runs validate results/
    """
    bad = unverified = 0
    reported: set[str] = set()  # each problem once, however many checks find it
    bad_files: set[str] = set()
    files = _result_files(paths)
    keyrings = _Keyrings(keys_file)
    for file in files:
        try:
            result = load_run(file)  # a link on the way to the file is refused, and named
            links = run_folder_problems(file, result.run_id)
            if links:
                for problem in links[1:]:
                    _echo(f"error: {problem}", err=True)
                    reported.add(problem)
                raise ResultsError(links[0])
            history = file.parent / result.run_id / HISTORY_FILE
            if history.is_file():
                check_against(history, result)
            audit = file.parent / result.run_id / AUDIT_FILE
            read_chain(audit)  # an absent audit log reads as empty
            # The logs still end where the result recorded (a rewrite with fresh hashes).
            for problem in check_logs(file, result):
                raise ChainError(f"{file}: {problem}")
            # Every file of the run folder as the signed result hashed it.
            changed, notes = check_files(file, result)
            for problem in changed:
                raise ResultsError(f"{file}: {problem}")
            verdict = keyrings.check(file)
            if not verdict.verified and not verdict.listed_unsigned:
                raise ResultsError(signature_problem(file, verdict.reason or ""))
        except (ResultsError, ChainError, SigningError, OSError) as exc:
            _echo(f"error: {exc}", err=True)
            reported.add(str(exc))
            bad_files.add(str(file))
            bad += 1
            continue
        word, flag = "ok", ""
        if not verdict.verified:  # passes, but nothing vouches for it: said in the verdict
            kind, _, why = (verdict.reason or "unsigned").partition(": ")
            word, flag = f"ok (unverified: {kind})", f"; {why}" if why else ""
            unverified += 1
        flag += "".join(f"; {note}" for note in notes)
        _echo(f"{word}: {file} ({result.status}, {result.score.percent:.1f}%{flag})")
    for problem in keyrings.problems:  # a folder's own key list that could not be read
        _echo(f"error: {problem}", err=True)
        reported.add(problem)
        bad += 1
    # A results folder with its registry is also checked the way the site reads it (tracks,
    # protocol fixes, totals, artifacts, duplicates, signatures): what passes here builds.
    for folder in (p for p in paths if p.is_dir() and (p / "tracks.json").is_file()):
        try:
            keyring = trusted_keyring((keys_file,) if keys_file else ())
            problems = results_problems(folder, keyring)
        except SigningError as exc:
            problems = [str(exc)]
        for problem in problems:
            # A file already reported bad is not reported again in the loader's words.
            if problem not in reported and problem.split(": ", 1)[0] not in bad_files:
                _echo(f"error: {problem}", err=True)
                reported.add(problem)
                bad += 1
    if not files:
        click.echo("no result files found", err=True)
    if bad or not files:
        raise SystemExit(1)
    if strict and unverified:
        click.echo(f"{unverified} unverified file(s): --strict fails them", err=True)
        raise SystemExit(1)


@runs_group.command("verify")
@click.argument("result_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--exam",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="The exam the run was graded on (exam.jsonl or its folder).",
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="local",
    show_default=True,
    help="Sandbox backend of the re-grade.",
)
@click.option("--device", default=None, help="Device of the re-grade (default: the run's).")
@keys_option()
def verify_command(
    result_file: Path, exam: Path, backend: str, device: str | None, keys_file: Path | None
) -> None:
    """Check a published result against its signature and artifacts: re-grade its archive.

    Checks that the file is signed by a pinned key (as `runs validate`: never one the folder
    lists for itself), that the audit log and the history end where the result recorded, that
    EXAM is the run's exam (SHA-256), that the stored archive of the promoted candidate
    (<results>/<track>/<run_id>/candidates/<id>.tar.gz) is the one promoted, and that grading
    it again gives the result's status, score, per-family counts and bits per byte. Every
    result with a promoted candidate is re-graded, whatever its status says. Exit status 0
    when everything matches, 1 with one line per mismatch. This is how a maintainer checks a
    submitted result.

    \b
    Example:
      toolkit runs verify results/v1-h100-1h/RUN_ID.json --exam ~/secure/exams/v1/exam.jsonl
    """
    if device is not None:
        refuse_device(device, backend)  # a GPU this host cannot use: refused before the re-grade
    try:
        result = load_run(result_file)
        verdict = _Keyrings(keys_file).check(result_file)
    except (ResultsError, SigningError) as exc:
        raise click.UsageError(str(exc)) from exc
    links = run_folder_problems(result_file, result.run_id)
    if links:  # nothing is re-graded or read through a link out of the results folder
        for problem in links:
            _echo(f"mismatch: {problem}")
        raise SystemExit(1)
    bad_signature = not verdict.verified and not verdict.listed_unsigned
    if bad_signature:  # known now: said before the re-grade, which takes minutes
        _echo(f"mismatch: signature: {verdict.reason}")
    try:
        problems, report = verify_run(
            result_file, result, exam, backend=backend, device=device, progress=True
        )
    except ExamFileError as exc:
        raise click.UsageError(f"{exc} (pass --exam with the run's exam.jsonl)") from exc
    for problem in problems:
        _echo(f"mismatch: {problem}")
    if problems or bad_signature:
        raise SystemExit(1)
    what = (
        f"re-graded {result.promoted.id if result.promoted else ''}: "
        f"{report.score.passed}/{report.score.total}"
        if report is not None
        else f"nothing to re-grade ({result.status}, no promoted candidate)"
    )
    signed = "signature holds" if verdict.verified else f"unverified: {verdict.reason}"
    _echo(f"ok: {result_file} ({result.status}; {what}; {signed}; logs and hashes match)")


@runs_group.command("clean")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option(
    "--caches",
    is_flag=True,
    help="Also remove the caches (built public exams, extracted corpus); never while a run runs.",
)
def clean_command(dry_run: bool, caches: bool) -> None:
    """Remove what finished runs left in the state folder ($ARI_HOME).

    A finished run's workspace and harness folder, and prepared training data whose command is
    gone (a start that failed, a killed `toolkit run`), are removed; a run in progress, or one
    whose harness died and is not yet recovered (`toolkit runs recover`), is never touched.
    Results live in the results folder and are never touched either.

    \b
    Example:
      toolkit runs clean --dry-run
    """
    found = state.clean(caches=caches, dry_run=dry_run)
    freed = 0
    for item in found:
        if item.removable:
            freed += item.size
            verb = "would remove" if dry_run else "removed"
        else:
            verb = "kept"
        click.echo(f"{verb}: {item.path} ({item.what}, {decimal_size(item.size)}; {item.reason})")
    total = sum(1 for i in found if i.removable)
    done = "would free" if dry_run else "freed"
    click.echo(f"{total} item(s), {done} {decimal_size(freed)} in {state_dir()}")


@runs_group.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a result file (also in toolkit/schemas/run.schema.json).

    \b
    Example:
      toolkit runs schema > run.schema.json
    """
    click.echo(json_schema(), nl=False)
