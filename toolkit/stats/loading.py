"""Load and cross-check everything under `results/`: the registry and every per-run file.

`toolkit.results.model.load_run` checks one file against the model. This module checks what only the
whole folder can tell: that a run's track is registered and matches the folder it sits in, that
run ids are unique, that its score counts the track's questions (`score.total` equals the
track's `exam_questions`), that its protocol revision exists, and that the artifacts it lists
are really there (and inside `results/`). Every problem is one `ResultsError` line naming the
file and the field, because `mkdocs build` shows exactly that line to whoever published the
bad file.

Nothing outside the results folder is read: each result file and artifact is opened part by
part from the root without following a link (`toolkit.results.published`), so a track folder,
run folder or artifact that is a symlink, or an artifact with a second name (a hard link), is
refused and named.

Each file's signature is checked against the pinned keys and pinned pre-signing files
(`toolkit.results.signing.trusted_keyring`); the folder's own `signing_keys.json` is only a hint.
A file that is unsigned, signed by a key nobody pinned, or changed since it was signed is not
an error here: the run is loaded and flagged `unverified` (with the reason), and the statistics
never count it. `results_problems` (what `toolkit runs validate` reports) does list it, except a
file a pinned list names as written before signing, unchanged.

A file whose signature holds must also hold its run folder as signed: every file there is
hashed (`toolkit.results.run_files`, the check `runs validate` makes) and a run whose files
differ is unverified too, naming the file. Every file is read with a size cap (an artifact over
`ARTIFACT_LIMIT` refuses its run by its size, unread) and JSON with its nesting bounded, so one
bad file costs its own line; the folder's own `signing_keys.json` is read the same way, and a
bad one is refused alone (it is a hint only).

A run graded on another exam than its track's is not malformed: it is a run that was not under
the track's rules, and the statistics list it apart (`toolkit.stats.rules`). Its total is then
that exam's, so the total is checked only against the track's own exam.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from toolkit.results.model import ResultsError, RunResult, parse_run
from toolkit.results.published import (
    WHAT_TO_DO,
    NotPublishedError,
    UnsafePathError,
    check_folder,
    check_published,
    one_line,
    read_published,
)
from toolkit.results.run_files import run_folder_check
from toolkit.results.signing import (
    Keyring,
    SigningError,
    check,
    load_folder_keyring,
    trusted_keyring,
)
from toolkit.tracks.model import ProtocolFix, RegistryError, Track, load_fixes, load_tracks

ARTIFACT_LIMIT = 1024 * 1024 * 1024
"""The largest artifact a run may publish (a transcript of an hour is megabytes): a larger one,
a sparse file of gigabytes say, refuses its run by its size, unread."""


@dataclass(frozen=True)
class LoadedRun:
    """One validated run and the file it came from."""

    path: Path
    result: RunResult
    unverified: str | None = None
    """Why the file is not as a listed key signed it; None when its signature holds."""
    listed_unsigned: bool = False
    """Written before results were signed, and named so (with its hash) by a pinned list."""

    @property
    def trusted(self) -> bool:
        """Whether the file is as the maintainers' keys or pinned lists vouch: only such a run
        sets anything of the site's totals (its date, its counts, its agent)."""
        return self.unverified is None or self.listed_unsigned

    def artifact_path(self, name: str) -> Path:
        """Absolute path of one of the run's artifacts (listed relative to its JSON file)."""
        rel = self.result.artifacts[name]
        return Path(os.path.normpath(os.path.join(os.path.abspath(self.path.parent), rel)))


@dataclass(frozen=True)
class ResultsSet:
    """Everything published in one `results/` folder, validated together."""

    results_dir: Path
    tracks: dict[str, Track]
    fixes: list[ProtocolFix]
    runs: list[LoadedRun] = field(default_factory=list)
    keyring: Keyring = field(default_factory=Keyring)
    refused: list[str] = field(default_factory=list)
    """One line per result file left out (bad JSON, a field, a link on its path), with
    `load_results(..., keep_going=True)`; otherwise the first such file raises."""

    @property
    def trusted_runs(self) -> list[LoadedRun]:
        """The runs whose files hold (`LoadedRun.trusted`)."""
        return [r for r in self.runs if r.trusted]

    def runs_of(self, track_id: str) -> list[LoadedRun]:
        """The runs of one track, in file order."""
        return [r for r in self.runs if r.result.track == track_id]

    @cached_property
    def _by_id(self) -> dict[str, LoadedRun]:
        return {r.result.run_id: r for r in self.runs}

    def run(self, run_id: str) -> LoadedRun:
        """One run by id (ids are unique across the whole folder)."""
        return self._by_id[run_id]


def _check_run(path: Path, run: RunResult, tracks: dict[str, Track], root: Path) -> None:
    folder = path.parent.name
    if run.track != folder:
        raise ResultsError(
            f"{path}: field 'track': '{run.track}' does not match its folder '{folder}'; "
            "move the file to results/<track>/"
        )
    if run.track not in tracks:
        known = ", ".join(sorted(tracks)) or "none registered"
        raise ResultsError(
            f"{path}: field 'track': unknown track '{run.track}' (known: {known}); "
            "register it in results/tracks.json"
        )
    if path.stem != run.run_id:
        raise ResultsError(
            f"{path}: field 'run_id': '{run.run_id}' does not match the file name '{path.name}'"
        )
    track = tracks[run.track]
    if track.matches_exam(run.config.exam_sha256) and run.score.total != track.exam_questions:
        raise ResultsError(
            f"{path}: field 'score.total': {run.score.total} questions, but the exam of track "
            f"'{track.id}' has {track.exam_questions}; a score counts every question of the exam"
        )
    if run.config.protocol_revision > track.protocol_revision:
        raise ResultsError(
            f"{path}: field 'config.protocol_revision': {run.config.protocol_revision} is newer "
            f"than track '{track.id}' revision {track.protocol_revision}"
        )
    # The run folder, and every artifact's path part by part from the root: a link anywhere on
    # the way, or a file with a second name, would publish what lies outside results/.
    try:
        check_folder(root, f"{folder}/{run.run_id}")
    except NotPublishedError:
        pass
    except UnsafePathError as exc:
        raise ResultsError(f"{path}: run folder: {exc}") from None
    for name, rel in run.artifacts.items():
        target = posixpath.normpath(posixpath.join(folder, rel))
        if target.startswith("../") or target in ("..", ".") or posixpath.isabs(rel):
            raise ResultsError(f"{path}: field 'artifacts.{name}': '{rel}' is outside results/")
        try:
            size = check_published(root, target)
        except NotPublishedError:
            raise ResultsError(f"{path}: field 'artifacts.{name}': no such file '{rel}'") from None
        except UnsafePathError as exc:
            raise ResultsError(f"{path}: field 'artifacts.{name}': {exc}") from None
        if size > ARTIFACT_LIMIT:
            raise ResultsError(
                f"{path}: field 'artifacts.{name}': '{rel}' holds {size:,} bytes, more than "
                f"{ARTIFACT_LIMIT:,}: refused unread"
            )


def _load(root: Path, path: Path) -> tuple[RunResult, bytes]:
    """Read the result file `path` (`root/<track>/<name>.json`) without following a link
    (`toolkit.results.published`) and validate it; pydantic parses the JSON bytes itself
    (about 1.5x faster), and on any failure `parse_run` words the error the one standard
    way. The bytes come back too: the signature is checked on them."""
    try:
        raw = read_published(root, f"{path.parent.name}/{path.name}")
    except UnsafePathError as exc:
        raise ResultsError(str(exc)) from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return RunResult.model_validate_json(raw), raw
    except ValidationError:
        return parse_run(path, raw), raw


def _result_files(root: Path, refuse: Callable[[str], None]) -> list[Path]:
    """Every `<track>/<name>.json` under `root`, found without following a link: a link where
    a track folder would be is refused (`refuse` gets its line); a result file that is a link
    is listed, and refused when it is read."""
    files: list[Path] = []
    with os.scandir(root) as entries:
        tops = sorted(entries, key=lambda e: e.name)
    for top in tops:
        if top.name.startswith("."):
            continue
        if top.is_symlink():
            if top.is_dir():  # a track folder that leads elsewhere
                refuse(f"{root / top.name}: a symlink, refused ({WHAT_TO_DO})")
            continue
        if not top.is_dir(follow_symlinks=False):
            continue
        with os.scandir(top.path) as entries:
            names = sorted(e.name for e in entries)
        files += [root / top.name / n for n in names if n.endswith(".json") and n[0] != "."]
    return files


def _relative(line: str, results_dir: Path) -> str:
    """A problem's line with the results folder's own path left out (it is shown on pages)."""
    for prefix in (os.path.abspath(results_dir), str(results_dir)):
        line = line.replace(f"{prefix}{os.sep}", "")
    return one_line(line)


def signature_problem(path: Path, reason: str) -> str:
    """The one wording of a file whose signature does not hold (`runs validate`, per file and
    per folder: the two checks report it once)."""
    return f"{path}: signature: {reason}"


def _scan(
    results_dir: Path, problems: list[str] | None, keyring: Keyring | None = None
) -> ResultsSet:
    """Load and check everything; raise on the first problem, or (given a list) note every
    problem in it, one per file, and carry on with the files that are good. Signatures are
    checked against `keyring`, by default the pinned keys and pre-signing files."""
    root = str(results_dir.resolve())
    if not os.path.isdir(root):
        what = "is not a folder" if os.path.exists(root) else "does not exist"
        raise ResultsError(
            f"{results_dir}: the results folder {what}; pass --results DIR (or set "
            "ARI_RESULTS_DIR) to a folder holding tracks.json and <track>/<run_id>.json files"
        )
    tracks = load_tracks(results_dir)
    fixes = load_fixes(results_dir, tracks)
    try:
        if keyring is None:
            keyring = trusted_keyring()
    except SigningError as exc:
        raise RegistryError(str(exc)) from None
    runs: list[LoadedRun] = []
    refused: list[str] = []
    seen: dict[str, Path] = {}

    def refuse(problem: str) -> None:
        problem = one_line(problem)  # names in the folder are someone else's
        if problems is None:
            raise ResultsError(problem)
        refused.append(problem)
        problems.append(problem)

    # The folder's own key list is a hint (it only words why a signature is not trusted): a
    # bad one is refused on its own, and every run is still checked against the pinned keys.
    try:
        folder_keys = load_folder_keyring(results_dir)
    except SigningError as exc:
        refuse(str(exc))
        folder_keys = Keyring()

    for path in _result_files(results_dir, refuse):
        try:
            run, raw = _load(results_dir, path)
            if run.run_id in seen:
                raise ResultsError(
                    f"{path}: field 'run_id': duplicate run id '{run.run_id}' "
                    f"(also in {seen[run.run_id]})"
                )
            _check_run(path, run, tracks, results_dir)
        except ResultsError as exc:
            refuse(str(exc))
            continue
        seen[run.run_id] = path
        verdict = check(raw, keyring, folder_keys)
        reason = verdict.reason
        if verdict.verified:  # the signature holds: and so must the files it hashed
            changed, _ = run_folder_check(path, run)
            if changed:
                reason = f"its files are not as signed: {_relative(changed[0], results_dir)}"
        if problems is not None and reason is not None and not verdict.listed_unsigned:
            problems.append(signature_problem(path, reason))
        runs.append(
            LoadedRun(
                path=path, result=run, unverified=reason, listed_unsigned=verdict.listed_unsigned
            )
        )
    return ResultsSet(
        results_dir=results_dir,
        tracks=tracks,
        fixes=fixes,
        runs=runs,
        keyring=keyring,
        refused=refused,
    )


def load_results(
    results_dir: Path, keyring: Keyring | None = None, *, keep_going: bool = False
) -> ResultsSet:
    """Load the registry and every `results/<track>/<run_id>.json`, checking them together.

    An empty folder is a benchmark with no results yet; a folder that does not exist is a
    mistake (a typo in --results would otherwise publish an empty leaderboard).
    Raises `ResultsError` (or `RegistryError`, a sibling) with one line naming file and field;
    with `keep_going`, a bad result file is left out instead and its line is in
    `ResultsSet.refused` (a bad registry still raises: no run can be checked without it).
    A run whose signature does not hold is loaded, flagged (`LoadedRun.unverified`).
    """
    return _scan(results_dir, [] if keep_going else None, keyring)


def results_problems(results_dir: Path, keyring: Keyring | None = None) -> list[str]:
    """Every problem of a results folder, one line per bad file (the registry's first problem
    stops the check: without the registry no run can be checked). [] when it all loads."""
    problems: list[str] = []
    try:
        _scan(results_dir, problems, keyring)
    except (ResultsError, RegistryError) as exc:
        problems.append(str(exc))
    return problems


__all__ = [
    "LoadedRun",
    "RegistryError",
    "ResultsError",
    "ResultsSet",
    "load_results",
    "results_problems",
    "signature_problem",
]
