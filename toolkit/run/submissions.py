"""`runner submit`, `runner promote`, `runner history`: the harness side of candidate handling.

`submit DIR` packs the folder the way the grader does (so the size the agent is told is the size
that counts), refuses it over the size limit or past the run's caps (the track's
`max_candidates`, and `max_candidate_bytes` of archives in all: what a run stores on the
results volume is bounded), stores the archive out of the agent's reach, scores
that stored copy on the public validation set (feedback only: never used to choose), and records
a candidate in the history. Scoring the stored archive, not the folder, means the agent cannot
change the files between the check and the grade. Every refusal is told to the agent and
noted in the call's audit entry. A results volume that fills mid-submission refuses it too,
and is reported (`on_full`): the run judges whose doing that was when it ends.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from toolkit.clock import Clock
from toolkit.grading import BundleError, grade_bundle, pack_bundle
from toolkit.grading.grade import CANCELLED
from toolkit.grading.phases import Progress
from toolkit.grading.questions import grade_questions, public_marking_problem
from toolkit.grading.report import GradeReport
from toolkit.results.chain import disk_full
from toolkit.results.model import Candidate, write_json_atomic
from toolkit.run.history import SubmissionHistory
from toolkit.runner.audit import clean_text, to_bytes
from toolkit.runner.channel import Call
from toolkit.runner.service import Handler
from toolkit.tracks.model import GradingParams

USAGE = 64
REJECTED = 1


@dataclass(frozen=True)
class Grader:
    """How bundles are graded in this run (the public set during the run, the exam after)."""

    params: GradingParams
    size_limit_bytes: int
    backend: str
    device: str
    # What the grader's sandboxes hide besides what grading hides itself: the run's own list
    # (the exam wherever the operator keeps it, its folder, the results, the banks), so that
    # public scoring, whose feedback reaches the agent, sees no more than the runner does.
    hide: tuple[Path, ...] = ()
    cpus: float | None = None  # the run's CPU quota, shared with its runner's

    def grade(
        self,
        archive: Path,
        exam: Path,
        phases: tuple[str, ...],
        cancelled: Callable[[], bool] | None = None,
        *,
        ablation: bool = False,
        hidden: bool = True,
        progress: Progress | None = None,
        per_question: bool = False,
    ) -> GradeReport:
        """Grade a stored archive (the grader unpacks it where the agent cannot reach);
        `cancelled`, `ablation`, `hidden`, `progress`: see `grade_bundle` (public scoring
        alone passes hidden=False; only the final grading reports progress, to the operator's
        terminal). `per_question`: each question's row too, where the exam's own manifest
        marks it public (`questions.py`); elsewhere the plain grading."""
        public = per_question and not hidden and public_marking_problem(exam) is None
        return (grade_questions if public else grade_bundle)(
            archive,
            exam,
            params=self.params,
            size_limit_bytes=self.size_limit_bytes,
            backend=self.backend,
            device=self.device,
            phases=phases,
            hide=self.hide,
            cpus=self.cpus,
            cancelled=cancelled,
            ablation=ablation,
            hidden=hidden,
            progress=progress or False,
        )


SOURCE_CHARS = 4096  # a submitted path as recorded (a longer one cannot be opened anyway)
WAIT_POLL_S = 0.1  # how often a submit waiting for its turn checks that its call still runs
QUESTIONS_SUFFIX = ".questions.json"
"""Beside a candidate's archive: its public scoring, question by question."""
CLOSE_WAIT_S = 10.0
"""How long the end of a run waits for killed public scorings to be gone."""


class Submissions:
    """Handlers for the runner's candidate commands, sharing one history and store."""

    def __init__(
        self,
        *,
        workspace: Path,
        store: Path,
        history: SubmissionHistory,
        clock: Clock,
        grader: Grader,
        public_set: Path,
        log: Callable[[str], None] | None = None,
        max_candidates: int | None = None,
        max_candidate_bytes: int | None = None,
        on_full: Callable[[str], None] | None = None,
    ) -> None:
        self.workspace = workspace.resolve()
        self.max_candidates = max_candidates
        self.max_candidate_bytes = max_candidate_bytes
        self.on_full = on_full
        self.log = log or (lambda _: None)
        self.store = store
        self.history = history
        self.clock = clock
        self.grader = grader
        self.public_set = public_set
        self._lock = threading.Lock()  # one submission at a time: ids and history stay ordered
        self._over = threading.Event()  # the run is over: public scorings stop
        self._scoring = 0  # public scorings in flight
        self._scored = threading.Condition()
        self._one_at_a_time = threading.Lock()  # public scorings, one after another
        store.mkdir(parents=True, exist_ok=True)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """The run is over: public scorings still running are killed (their bundle code is the
        agent's), waited for up to `wait_s`, and nothing more is recorded."""
        self._over.set()
        with self._scored:
            if not self._scored.wait_for(lambda: self._scoring == 0, timeout=wait_s):
                self.log(f"{self._scoring} public scorings still stopping after {wait_s:g} s")
        with self._lock:
            self.history.close()

    def handlers(self) -> dict[str, Handler]:
        return {"submit": self.submit, "promote": self.promote, "history": self.show_history}

    def archive(self, candidate_id: str) -> Path:
        return self.store / f"{candidate_id}.tar.gz"

    def _resolve(self, arg: str) -> Path | None:
        path = (self.workspace / arg).resolve()
        return path if path.is_relative_to(self.workspace) else None

    @staticmethod
    def _refuse(call: Call, why: str) -> int:
        """Tell the agent, and note it for the call's audit entry."""
        call.note = f"submit refused: {why}"
        call.say(f"[runner] submit refused: {why}")
        return REJECTED

    def _full(self, call: Call, what: str, exc: OSError) -> int:
        """The results volume is full: refused, and reported for the run to judge."""
        if self.on_full is not None:
            self.on_full(what)
        return self._refuse(call, f"the results volume is full ({exc.strerror}): nothing stored")

    def _over_caps(self, packed_bytes: int | None) -> str | None:
        """Why one more candidate (of `packed_bytes`, None: not packed yet) passes the run's
        caps, or None."""
        candidates = self.history.candidates()
        if self.max_candidates is not None and len(candidates) >= self.max_candidates:
            return (
                f"this run has submitted {len(candidates)} candidates, the most the track allows "
                f"(max_candidates {self.max_candidates}); promote one of them"
            )
        stored = sum(c.packed_bytes for c in candidates)
        cap = self.max_candidate_bytes
        if cap is not None and packed_bytes is not None and stored + packed_bytes > cap:
            return (
                f"its {packed_bytes:,} bytes would take the run's candidates to "
                f"{stored + packed_bytes:,} bytes, past the track's max_candidate_bytes of "
                f"{cap:,}; promote a candidate you have"
            )
        return None

    def submit(self, call: Call) -> int:
        if len(call.argv) != 2:
            call.say("usage: runner submit DIR   (DIR: a bundle folder in the workspace)")
            return USAGE
        folder: Path | None = None
        try:
            folder = self._resolve(call.argv[1])
            is_folder = folder is not None and folder.is_dir()
        except (OSError, ValueError):  # a name the host cannot stat (too long): the agent's
            is_folder = False  # doing, refused; never a harness failure that voids the run
        if folder is None or not is_folder:
            call.note = "submit refused: not a folder inside the workspace"
            call.say(f"[runner] submit: {call.argv[1]} is not a folder inside the workspace")
            return REJECTED
        with self._lock:
            over = self._over_caps(None)
            if over is not None:
                return self._refuse(call, over)
            candidate_id = self.history.next_id()
            archive = self.archive(candidate_id)
            limit = self.grader.size_limit_bytes
            try:
                # Stop as soon as the archive is over the limit: a folder of gigabytes (the
                # whole workspace, say) is refused in seconds, not after minutes under the lock.
                packed = pack_bundle(folder, archive, give_up_bytes=limit)
            except (BundleError, OSError, ValueError) as exc:
                # The folder is the agent's: whatever it holds that cannot be packed (odd
                # names, files vanishing mid-pack) is a refused submission, never a harness
                # failure that would void the run and hand the agent a rerun.
                archive.unlink(missing_ok=True)
                full = next((e for e in (exc, exc.__cause__) if e and disk_full(e)), None)
                if isinstance(full, OSError):  # the archive's writes: on the results volume
                    return self._full(call, f"the archive of {candidate_id}", full)
                return self._refuse(call, clean_text(str(exc))[:500])
            if packed.packed_bytes > limit:
                archive.unlink(missing_ok=True)
                return self._refuse(
                    call,
                    f"the packed bundle is {packed.packed_bytes:,} bytes, over the limit of "
                    f"{limit:,} (.tar.gz, gzip -9, as the grader packs it)",
                )
            over = self._over_caps(packed.packed_bytes)
            if over is not None:
                archive.unlink(missing_ok=True)
                return self._refuse(call, over)
            candidate = Candidate(
                id=candidate_id,
                submitted_at=datetime.now(UTC),
                elapsed_s=round(self.clock.elapsed(), 3),
                sha256=packed.sha256,
                packed_bytes=packed.packed_bytes,
            )
            try:
                added = self.history.add_candidate(
                    candidate, source=clean_text(call.argv[1])[:SOURCE_CHARS]
                )
            except OSError as exc:
                if not disk_full(exc):
                    raise
                archive.unlink(missing_ok=True)  # not recorded: not kept (the entry was cut)
                return self._full(call, f"the history entry of {candidate_id}", exc)
            if not added:
                archive.unlink(missing_ok=True)
                return self._refuse(call, "the run is over")
        # Recorded (and promotable) before it is scored: public scoring is feedback only, and
        # the candidate must not be lost if the deadline comes while it is being scored.
        call.say(
            f"[runner] {candidate_id} recorded ({packed.packed_bytes:,} bytes packed, sha256 "
            f"{packed.sha256[:12]}); scoring it on the public validation set (feedback only)..."
        )
        percent, error, line = self._score_public(candidate_id, archive, call)
        with self._lock:
            try:
                self.history.record_public(candidate_id, percent, error)
            except OSError as exc:
                if not disk_full(exc):
                    raise
                if self.on_full is not None:  # the candidate stands; its feedback is not kept
                    self.on_full(f"the public score of {candidate_id}")
        call.write(
            "stdout",
            to_bytes(
                f"candidate {candidate_id}: {packed.packed_bytes:,} bytes packed, "
                f"sha256 {packed.sha256[:12]}, {line}\n"
                f"promote it with: runner promote {candidate_id}\n"
            ),
        )
        return 0

    def _score_public(
        self, candidate_id: str, archive: Path, call: Call
    ) -> tuple[float | None, str | None, str]:
        """(percent, None, line) or (None, why it failed, line): for the history and the agent.

        The bundle's code runs only while its call does: it is killed when the call is closed
        (its per-call limit, the deadline) or the run is over. One scoring at a time per run:
        concurrent submits wait their turn (each grading may take the track's whole memory
        cap, and the GPU)."""

        def cancelled() -> bool:
            return self._over.is_set() or call.closed

        with self._scored:
            self._scoring += 1
        try:
            if not self._one_at_a_time.acquire(blocking=False):
                call.say("[runner] waiting for the scoring of an earlier submission to end...")
                while not self._one_at_a_time.acquire(timeout=WAIT_POLL_S):
                    if cancelled():
                        return None, CANCELLED, f"public scoring failed: {CANCELLED}"
            try:
                # Public: the agent reads its own bundle's errors on the public set.
                report = self.grader.grade(
                    archive,
                    self.public_set,
                    ("generate",),
                    cancelled=cancelled,
                    hidden=False,
                    per_question=True,
                )
            finally:
                self._one_at_a_time.release()
        except Exception as exc:
            # Feedback only: a failure here must not void the run (a rerun for free); it is
            # on record in the history and in the harness's log.
            self.log(f"public scoring of {candidate_id} failed in the harness: {exc!r}")
            error = clean_text(f"the harness could not score it ({exc!r})")
            return None, error, f"public scoring failed: {error}"
        finally:
            with self._scored:
                self._scoring -= 1
                self._scored.notify_all()
        self._keep_questions(candidate_id, report)
        if not report.ok:
            # The reason may quote the bundle's own error text: whatever it holds must be
            # storable (a lone surrogate in it must not break the history or this call).
            error = clean_text(report.reason or "public scoring failed")
            return None, error, f"public scoring failed: {error}"
        s = report.score
        return s.percent, None, f"public score {s.percent:.1f}% ({s.passed}/{s.total})"

    def _keep_questions(self, candidate_id: str, report: GradeReport) -> None:
        """The public scoring question by question, beside the candidate's archive, for the
        operator's view (`toolkit view`); feedback only: a failure to write it is logged."""
        if report.questions is None:
            return
        rows = [row.model_dump() for row in report.questions]
        try:
            write_json_atomic(self.store / f"{candidate_id}{QUESTIONS_SUFFIX}", json.dumps(rows))
        except OSError as exc:
            self.log(f"the questions of {candidate_id} were not kept: {exc!r}")

    def promote(self, call: Call) -> int:
        if len(call.argv) != 2:
            call.say("usage: runner promote ID   (ID as printed by `runner submit`, e.g. c001)")
            return USAGE
        with self._lock:
            try:
                promoted = self.history.promote(
                    call.argv[1], datetime.now(UTC), self.clock.elapsed()
                )
            except KeyError:
                known = ", ".join(c.id for c in self.history.candidates()) or "none yet"
                call.note = "promote refused: no such candidate"
                call.say(f"[runner] promote: no candidate '{call.argv[1]}' (candidates: {known})")
                return REJECTED
            except OSError as exc:
                if not disk_full(exc):
                    raise
                if self.on_full is not None:
                    self.on_full(f"the promotion of {clean_text(call.argv[1])[:40]}")
                call.note = "promote refused: the results volume is full"
                call.say(f"[runner] promote refused: the results volume is full ({exc.strerror})")
                return REJECTED
        call.write(
            "stdout",
            (
                f"promoted {promoted.id} (sha256 {promoted.sha256[:12]}): the hidden exam grades "
                "the candidate promoted last\n"
            ).encode(),
        )
        return 0

    def show_history(self, call: Call) -> int:
        with self._lock:
            text = self.history.render()
        call.write("stdout", (text + "\n").encode())
        return 0
