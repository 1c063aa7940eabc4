"""Checking a published run after the fact: its logs, its promoted archive, its score re-graded.

This is how a maintainer checks a submitted result (`toolkit runs verify RESULT --exam FILE`):

1. the audit log and the submission history still end where the result says they ended
   (`RunResult.logs`), and the history lists the result's candidates and promotion; every
   file of the run folder is as the result hashed it (`RunResult.files`);
2. the exam given is the one the run was graded on (its SHA-256 is the config's);
3. the promoted candidate's stored archive (`<run>/candidates/<id>.tar.gz`) is the one the
   history recorded (SHA-256);
4. that archive, graded again on the exam with the run's grading parameters, gives the
   result's status, score, per-family counts and bits per byte (within `BPB_TOLERANCE`).

Every result that names a promoted candidate is re-graded, whatever its status says: a file
that calls itself `invalid` or `failed` is checked like a valid one, and a status the re-grade
contradicts is a mismatch. An `invalid` result must carry its evidence (`RunResult.evidence`:
the check that failed, signed); one that blames the grading (`grading-reference`) while its
archive fails the re-grade has the harness's reference bundle graded here too: if that grades,
the failure was the bundle's, and `invalid` is a mismatch. Other contradictions: an archive
that grades fine under a result that says the run failed grading, or was lost to an
infrastructure failure; a valid result whose archive fails. The
file's signature (`toolkit.results.signing`) is checked by the command, beside these.

Every check that fails is one line; none stops the others. The re-grade runs on the device the
run was graded on unless told otherwise: greedy generation on other hardware may differ. The
re-grade is hidden (the exam is the run's): a mismatch line quotes failure categories, never
what the bundle said.
"""

from __future__ import annotations

from pathlib import Path

from exam_builder.exam_file import sha256_file
from toolkit.grading import grade_bundle
from toolkit.grading.publish import BPB_STEP
from toolkit.grading.report import GradeReport
from toolkit.host.grading_lock import alone_on_host
from toolkit.results.chain import ChainError, chain_head, read_chain
from toolkit.results.model import RunResult
from toolkit.run.artifacts import CANDIDATES_DIR, check_files
from toolkit.run.history import check_against
from toolkit.run.reference import grading_reference
from toolkit.run.submissions import Grader
from toolkit.tracks.model import GradingParams, RegistryError, get_track

BPB_TOLERANCE = BPB_STEP
"""Largest difference in bits per byte between the result and the re-grade: both are published
in steps of `publish.BPB_STEP`, and float rounding can put a value on either side of a step's
edge, so one step."""


def run_folder(result_file: Path, result: RunResult) -> Path:
    """Where a result's artifacts are: `<results>/<track>/<run_id>/`."""
    return result_file.parent / result.run_id


def check_logs(result_file: Path, result: RunResult) -> list[str]:
    """Problems with the run's chained logs: broken chains, and heads that moved since."""
    problems: list[str] = []
    folder = result_file.parent
    missing: set[str] = set()
    for key, rel in sorted(result.artifacts.items()):
        if key not in ("audit", "history"):
            continue
        path = folder / rel
        if not path.is_file():  # said as it is, not as a log cut to its entry 0
            missing.add(key)
            recorded = result.logs.get(key)
            had = f" (the result recorded {recorded.entries} entries)" if recorded else ""
            problems.append(f"{key} log {path}: missing: deleted or moved after the run{had}")
            continue
        try:
            read_chain(path)
            if key == "history" and path.is_file():
                check_against(path, result)
        except ChainError as exc:
            problems.append(f"{key} log: {exc}")
    for key, head in sorted(result.logs.items()):
        if key in missing:
            continue
        path = folder / result.artifacts.get(key, f"{result.run_id}/{key}")
        try:
            entries, sha = chain_head(path)
        except ChainError:
            continue  # reported above
        if (entries, sha) != (head.entries, head.sha256):
            problems.append(
                f"{key} log {path}: ends at entry {entries} (hash {sha[:12]}), but the result "
                f"recorded entry {head.entries} (hash {head.sha256[:12]}): the log was "
                "rewritten or cut after the run"
            )
    return problems


def _params(result: RunResult) -> tuple[GradingParams, int, str]:
    """The run's grading parameters, size limit and device, from its effective config."""
    grading = result.config.grading
    fields = {k: v for k, v in grading.items() if k in GradingParams.model_fields}
    params = GradingParams.model_validate(fields)
    size = int(grading.get("size_limit_bytes", 16_000_000))
    return params, size, str(grading.get("device", "cpu"))


def _official(result_file: Path, result: RunResult) -> bool:
    """Whether the run's track is official (a re-grade of its hidden exam then runs alone on
    its host: `grading_lock`): not a demo track in the registry beside its results, or a
    track that registry does not name."""
    try:
        return not get_track(result_file.parent.parent, result.track).demo
    except RegistryError:
        return True


def compare(result: RunResult, report: GradeReport) -> list[str]:
    """Where a re-grade disagrees with the published result (its status included)."""
    graded = f"{report.score.passed}/{report.score.total} ({report.score.percent:.1f}%)"
    if result.status != "valid":
        if report.ok:
            return [
                f"status: the result says {result.status}, but its promoted archive grades as "
                f"a valid run: {graded}"
            ]
        return []  # a failed grading, as the result says (or an invalid run's, which scores 0)
    problems: list[str] = []
    if not report.ok:
        problems.append(f"status: the result is valid, but the re-grade fails: {report.reason}")
    s, r = result.score, report.score
    if (s.passed, s.total) != (r.passed, r.total):
        problems.append(
            f"score: the result says {s.passed}/{s.total} ({s.percent:.1f}%), the re-grade "
            f"gives {r.passed}/{r.total} ({r.percent:.1f}%)"
        )
    for name in sorted(set(result.families) | set(report.families)):
        mine, again = result.families.get(name), report.families.get(name)
        pair = (mine.passed, mine.total) if mine else None
        pair2 = (again.passed, again.total) if again else None
        if pair != pair2:
            said = f"{pair[0]}/{pair[1]}" if pair else "nothing"
            gives = f"{pair2[0]}/{pair2[1]}" if pair2 else "nothing"
            problems.append(f"family {name}: the result says {said}, the re-grade gives {gives}")
    bpb, bpb2 = result.bits_per_byte, report.bits_per_byte
    if (bpb is None) != (bpb2 is None) or (
        bpb is not None and bpb2 is not None and abs(bpb - bpb2) > BPB_TOLERANCE + 1e-9
    ):
        problems.append(
            f"bits per byte: the result says {bpb}, the re-grade gives {bpb2}"
            + (f" ({report.bpb_reason})" if bpb2 is None else "")
        )
    return problems


def verify_run(
    result_file: Path,
    result: RunResult,
    exam: Path,
    *,
    backend: str = "local",
    device: str | None = None,
    progress: bool = False,
) -> tuple[list[str], GradeReport | None]:
    """Every mismatch between a published run and its artifacts and exam (empty: all match),
    and the re-grade's report when there was something to re-grade."""
    problems = check_logs(result_file, result)
    problems += check_files(result_file, result)[0]
    if result.status == "invalid" and result.evidence is None:
        problems.append(
            "status: the result says invalid but carries no evidence (the check that failed, "
            "signed by the harness): an invalid status without it is not the harness's"
        )
    exam_file = exam / "exam.jsonl" if exam.is_dir() else exam
    exam_sha = sha256_file(exam_file)
    if exam_sha != result.config.exam_sha256:
        problems.append(
            f"exam: {exam_file} has sha256 {exam_sha[:12]}, the run was graded on "
            f"{result.config.exam_sha256[:12]}: pass the run's exam"
        )
        return problems, None
    promoted = result.promoted
    if promoted is None:
        if result.status == "valid":
            problems.append(
                f"status: the result says valid with {result.score.passed}/"
                f"{result.score.total}, but it promoted no candidate: nothing could be graded"
            )
        return problems, None  # no promoted candidate: nothing to re-grade
    archive = run_folder(result_file, result) / CANDIDATES_DIR / f"{promoted.id}.tar.gz"
    if not archive.is_file():
        return [*problems, f"archive: {archive} is missing"], None
    archive_sha = sha256_file(archive)
    if archive_sha != promoted.sha256:
        return [
            *problems,
            f"archive: {archive} has sha256 {archive_sha[:12]}, the run promoted "
            f"{promoted.sha256[:12]}: the stored archive was swapped",
        ], None
    params, size_limit, recorded_device = _params(result)
    with alone_on_host(_official(result_file, result)):
        report = grade_bundle(
            archive,
            exam_file,
            params=params,
            size_limit_bytes=size_limit,
            backend=backend,
            device=device or recorded_device,
            progress=progress,
            hidden=True,
        )
    problems += compare(result, report)
    evidence = result.evidence
    blames_grading = evidence is not None and evidence.check == "grading-reference"
    if result.status == "invalid" and blames_grading and not report.ok:
        # The run says the harness's own reference bundle failed too: repeat that here.
        grader = Grader(params, size_limit, backend, device or recorded_device)
        if grading_reference(grader, exam_file) is None:
            problems.append(
                "status: the result says invalid (the reference bundle failed grading), "
                "but here the reference bundle grades and the promoted archive fails: "
                f"the failure is the bundle's ({report.reason}): failed, not invalid"
            )
    return problems, report
