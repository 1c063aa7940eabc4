"""One whole run: set up, let the agent work until it stops or the clock runs out, grade, publish.

Order of events (DESIGN §5):
1. inputs: the exam (hash checked against the track), the public set, the training data (its
   hashes recorded; refused when the track pins other data); the grading parameters in force
   (the track's, with a memory cap above this host's memory lowered to it: noted in
   `agent.log`, and recorded as in force in the effective config);
2. the harness's reserve on the results volume (`toolkit.run.storage`: a preallocated file
   beside the run folder; a volume without room for it refuses the run), held until the
   session is over, so the result and the last log lines are always written;
   the workspace (on a filesystem of its own capped at the track's `workspace_disk_bytes`,
   where the host can: released when the run ends), checked for leaks (no exam text, no
   secret value anywhere in it);
3. the run folder `results/<track>/<run_id>/` (audit log, history, candidates) and a `RUNNING`
   marker in the harness folder, so a crash of this process is recorded later, not lost;
4. the runner sandbox + runner service, then the agent in the controller sandbox (both hide
   `roles.run_hidden`: the protected paths, the exam and its folder, results, banks; the
   controller gets the egress allow-list its adapter asks for: a model provider, nothing
   else); the clock starts when the agent does (`--backend docker`: each is a container of an
   image the CLI checked against the pins, and every container and network carries the run id
   as a label); with `spec.gpu` (a campaign's pin) the runner, and later the grading
   sandboxes, see that one GPU only, and the result records it (`placement`); the agent's
   console goes to the run folder as it comes (secrets redacted,
   each file capped: `toolkit.run.transcript`);
5. the agent exits, the deadline comes, or its adapter reports an infrastructure problem (a
   provider down or stalling the run, judged outside the controller: opencode's provider
   relay): everything is killed (whatever it does with signals),
   the service stops (every call still open is closed and audited); before the controller
   goes, the adapter may run a last command in it (export its session) and the egress log is
   saved; the reserve is released and the audit log's counts written; a results volume that
   filled during the session ends the run here (`failed` when the run's own files filled it,
   else `invalid` with the evidence); the history and the audit log are checked against what
   the harness wrote;
6. the adapter's last word on the provider (`final_problem`: checked once the controller is
   gone), then its host-side helpers are closed (`close`); the last promoted candidate is
   graded on the exam from the stored archive; no promotion => `failed` with 0; a harness,
   sandbox or provider failure => `invalid` with its reason; from the moment the hidden
   grading starts, nothing published tells how long it took but a coarse bucket
   (`grading.publish`): `agent.log` stamps every later line with that moment, the result's
   `finished_at` is that moment, `timings.grading_s` is the bucket (the exact time goes to
   the operator log);
7. the result is written atomically, with the final head of the audit log and of the history
   (so that a log rewritten afterwards is caught) and the SHA-256 of every file of the run
   folder (agent.log's last line is the result's: nothing is written to it afterwards), and
   the marker removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from exam_builder.exam_file import load_exam, sha256_file
from toolkit import __version__
from toolkit.agents import Agent, AgentContext
from toolkit.clock import Clock
from toolkit.grading import secret_log
from toolkit.grading.grade import GradingError, failure_name, fit_to_host
from toolkit.grading.publish import coarse_seconds
from toolkit.host import floor
from toolkit.results.chain import ChainedLog, ChainError
from toolkit.results.model import (
    EffectiveConfig,
    FamilyScore,
    InvalidCheck,
    InvalidEvidence,
    Placement,
    RunResult,
    Score,
    Timings,
    save_run,
)
from toolkit.run import recovery, reference, roles
from toolkit.run.artifacts import (
    AGENT_LOG,
    AUDIT_FILE,
    CANDIDATES_DIR,
    TRANSCRIPT_FILE,
    file_hashes,
    list_artifacts,
    log_heads,
    write_promoted_code,
)
from toolkit.run.history import HISTORY_FILE, SubmissionHistory
from toolkit.run.inputs import PUBLIC_BANKS
from toolkit.run.interrupt import interrupted_by
from toolkit.run.journal import STOP_FILE
from toolkit.run.live import LiveFile
from toolkit.run.storage import Volume
from toolkit.run.submissions import Grader, Submissions
from toolkit.run.transcript import TRANSCRIPT_CAP_BYTES, Transcript
from toolkit.run.workspace import STARTER_DIR, Workspace, WorkspaceError, assemble, find_leaks
from toolkit.runner.channel import make_channel
from toolkit.runner.client import install_client
from toolkit.runner.service import CallRefused, RunnerService
from toolkit.sandbox import (
    Sandbox,
    SandboxError,
    SandboxProcess,
    SandboxRootAltered,
    SandboxTeardownTimeout,
    capped,
)
from toolkit.text.data import load_prepared
from toolkit.tracks.model import Track

EGRESS_LOG = "egress.jsonl"
AGENT_HOME = "agent"  # in the channel folder: seen by the controller only
KILL_GRACE_S = 1.0  # after the deadline, how long teardown may take before we call it a bug
# Harness text may quote the agent (an argument, a path, a provider's error): what one line of
# `agent.log` or a result's `status_reason` keeps of it is bounded (a traceback fits whole).
LOG_LINE_CHARS = 16_000
STATUS_REASON_CHARS = 2_000


def _backdate(paths: list[Path], when: float) -> None:
    """Give files published after a hidden grading began that beginning as their times: a web
    server shows a file's time, and a bundle that slept through its grading would otherwise
    publish how long it slept."""
    for path in paths:
        # A file gone meanwhile, or not ours to touch, publishes nothing through its time.
        with contextlib.suppress(OSError):
            os.utime(path, (when, when), follow_symlinks=False)


@dataclass
class RunSpec:
    """Everything that defines a run (the CLI fills it from its options and the track)."""

    track: Track
    model: str
    seed: int
    agent: Agent
    exam: Path
    public_set: Path
    data_dir: Path
    results_dir: Path
    backend: str = "local"
    device: str = "cpu"
    effort: str | None = None
    budget_s: float | None = None  # None: the track's
    per_call_limit_s: float | None = None
    reserved_s: float | None = None
    run_id: str | None = None
    secrets: list[str] = field(default_factory=list)  # values that must never reach the agent
    bank_dirs: list[Path] = field(default_factory=list)  # banks to hide (public ones always)
    starter: Path = STARTER_DIR  # the starter folder handed to the agent (with its TASK.md)
    gpu: str | None = None  # pin the runner and grading to this GPU id; None: backend default
    cpus: float | None = None  # CPU quota (cores) of the runner and grading; None: the host's
    node: str | None = None  # where the run runs, for `placement` (default: the host name)
    image_digests: dict[str, str] | None = None  # docker: the digest of each role's image

    @property
    def budget(self) -> tuple[float, float, float]:
        t = self.track
        return (
            self.budget_s if self.budget_s is not None else t.budget_s,
            self.per_call_limit_s if self.per_call_limit_s is not None else t.per_call_limit_s,
            self.reserved_s if self.reserved_s is not None else t.reserved_s,
        )


def new_run_id(model: str, seed: int) -> str:
    slug = "".join(c if c.isalnum() or c in "._-" else "-" for c in model)[:40] or "model"
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{slug}-s{seed}-{secrets.token_hex(2)}"


def git_commit() -> str | None:
    repo = Path(__file__).resolve().parent.parent.parent
    if not (repo / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def bounded(text: str, limit: int) -> str:
    """`text`, or its head and tail with a note of how much was cut from the middle."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40) // 2
    return f"{text[:keep]} [... {len(text) - 2 * keep:,} characters cut ...] {text[-keep:]}"


class AgentLog:
    """The harness's own notes about the run (`agent.log`): what happened when, and why."""

    def __init__(self, path: Path, clock: Callable[[], float], echo: Callable[[str], None]):
        self.path = path
        self._clock = clock
        self._echo = echo
        self._lock = threading.Lock()
        self._held: float | None = None
        self._sealed = False
        self.lost = 0  # lines the disk could not take (a full results volume)

    def hold(self) -> None:
        """Stamp this line and every later one with the time now: from a hidden grading's
        start on, a stamp would tell how long the bundle took (a channel it can steer)."""
        self._held = self._clock()

    def seal(self) -> None:
        """The file is about to be hashed into the result: later lines are only echoed."""
        with self._lock:
            self._sealed = True

    def __call__(self, message: str, shown: str | None = None) -> None:
        """Write `message`; echo it to the operator, or `shown` instead ("": nothing), for a
        line whose text the command prints anyway (the result's reason: printed once). A line
        the disk cannot take is counted (`lost`), never an error that would end the run."""
        stamp = f"[{self._clock() if self._held is None else self._held:8.1f}s]"
        line = f"{stamp} {bounded(message, LOG_LINE_CHARS)}"
        with self._lock:
            if not self._sealed:
                try:
                    with self.path.open("a", encoding="utf-8") as f:
                        f.write(line + "\n")
                except OSError:
                    self.lost += 1
        if shown is None:
            self._echo(line)
        elif shown:
            self._echo(f"{stamp} {shown}")


def _quiet(_: str) -> None:
    pass


class Run:
    """One run in progress. `execute()` returns the published result."""

    def __init__(
        self,
        spec: RunSpec,
        *,
        echo: Callable[[str], None] = _quiet,
        tick: Callable[[float, float], None] | None = None,
    ) -> None:
        self.spec = spec
        self.echo = echo
        self.tick = tick
        self.run_id = spec.run_id or new_run_id(spec.model, spec.seed)
        self.work = recovery.runs_root() / self.run_id
        self.harness = self.work / "harness"
        self.artifacts = spec.results_dir / spec.track.id / self.run_id
        budget, per_call, reserved = spec.budget
        self.clock = Clock(budget_s=budget, reserved_s=reserved, per_call_limit_s=per_call)
        self.started_at = datetime.now(UTC)
        born = time.monotonic()  # agent.log times count from the harness's start
        self.log = AgentLog(self.artifacts / AGENT_LOG, lambda: time.monotonic() - born, echo)
        # The grading parameters in force: the track's, with a memory cap above this host's
        # memory lowered to it (as `toolkit grade` does); the effective config records these.
        grading, self.grading_notes = fit_to_host(spec.track.grading)
        self.grader = Grader(
            params=grading,
            size_limit_bytes=spec.track.size_limit_bytes,
            backend=spec.backend,
            # A pinned run grades on its own GPU: "cuda:N" pins the grading sandbox to GPU N.
            device=f"cuda:{spec.gpu}"
            if spec.gpu is not None and spec.device == "cuda"
            else spec.device,
            cpus=spec.cpus,
        )
        self.boxes: list[Sandbox] = []
        self.controller: Sandbox | None = None
        self.runner_box: Sandbox | None = None
        self.service: RunnerService | None = None
        self.live: LiveFile | None = None
        self.submissions: Submissions | None = None
        self.transcripts: list[Transcript] = []
        self.agent_process: SandboxProcess | None = None
        self.agent_problem: str | None = None
        self.step = "set-up"  # what the run is doing, for an interruption's reason
        self.published = False  # the result is written: an interruption changes nothing
        self.agent_exited = False  # by itself (not killed at the deadline or for a problem)
        self.history: SubmissionHistory | None = None
        self.workspace: Workspace | None = None
        self.workspace_cap: capped.CappedFolder | None = None
        self.volume: Volume | None = None  # the results volume: the harness's reserve on it
        self.runner_hidden: list[Path] = []  # what the runner sandbox hides, and reads only
        self.runner_readonly: list[Path] = []
        self.isolation: list[str] = []
        self.runner_s = 0.0
        self.used_s: float | None = None
        self.grading_from: datetime | None = None  # the hidden grading's start: `finished_at`
        meta = spec.data_dir / "meta.json"
        self.train_data = load_prepared(spec.data_dir).record() if meta.is_file() else None

    # -- result skeleton ----------------------------------------------------------------------

    def skeleton(self, status_reason: str) -> RunResult:
        spec, track = self.spec, self.spec.track
        budget, per_call, reserved = spec.budget
        ws = self.workspace
        exam_questions = len(load_exam(spec.exam))
        return RunResult(
            run_id=self.run_id,
            track=track.id,
            model=spec.model,
            provider=spec.agent.provider,
            effort=spec.effort,
            agent=spec.agent.name,
            agent_version=spec.agent.version,
            seed=spec.seed,
            started_at=self.started_at,
            status="invalid",
            status_reason=status_reason,
            score=Score(percent=0.0, passed=0, total=exam_questions),
            timings=Timings(budget_s=budget, used_s=0.0, runner_s=0.0),
            config=EffectiveConfig(
                toolkit_version=__version__,
                git_commit=git_commit(),
                image_digests=dict(spec.image_digests)
                if spec.image_digests
                else {"controller": None, "runner": None, "grader": None},
                task_brief_sha256=ws.task_brief_sha256 if ws else "0" * 64,
                scaffold_version=spec.agent.version,
                scaffold_config_sha256=spec.agent.config_sha256(),
                exam_sha256=sha256_file(spec.exam),
                public_set_sha256=sha256_file(spec.public_set),
                grading={
                    **self.grader.params.model_dump(),
                    "size_limit_bytes": track.size_limit_bytes,
                    "device": spec.device,
                },
                budget={
                    "budget_s": budget,
                    "per_call_limit_s": per_call,
                    "reserved_s": reserved,
                    "track_budget_s": track.budget_s,
                    "overridden": int(
                        (budget, per_call, reserved)
                        != (track.budget_s, track.per_call_limit_s, track.reserved_s)
                    ),
                },
                backend="docker" if spec.backend == "docker" else "local",
                isolation=self.isolation,
                protocol_revision=track.protocol_revision,
                train_data=self.train_data,
            ),
            # Only what exists: an agent that never called `runner` leaves no audit log.
            artifacts=list_artifacts(self.artifacts, self.run_id),
            placement=Placement(
                node=spec.node or socket.gethostname(), gpu=spec.gpu, cpus=spec.cpus
            ),
        )

    # -- the run ------------------------------------------------------------------------------

    def execute(self) -> RunResult:
        try:
            if self.spec.backend != "docker":
                return self._execute()
            from toolkit.sandbox.docker.engine import owner_run

            with owner_run(self.run_id):  # every container and network is labelled with the run
                return self._execute()
        finally:
            self._release_workspace()
            self._release_reserve()

    def _release_reserve(self) -> None:
        """The harness's reserve on the results volume goes back (what is left to write is
        the harness's own: the last log lines, the audit log's counts, the result)."""
        if self.volume is not None:
            self.volume.release_reserve()

    def _on_full(self, what: str) -> None:
        """A write the full results volume refused: noted, judged when the session ends."""
        assert self.volume is not None
        first = self.volume.refused == 0
        self.volume.note_full(what)
        if first:
            self.log(f"the results volume is full: {what} could not be written")

    def _charge_storage(self) -> RunResult | None:
        """If the results volume filled during the run: `failed` when the run's own files
        filled it, `invalid` (evidence: storage) when something else did; else None."""
        blame = self.volume.blame() if self.volume is not None else None
        if blame is None:
            return None
        whose, reason = blame
        self.log(reason)
        if whose == "harness":
            return self._finish_invalid(reason, "storage")
        result = self.skeleton(reason)
        result.status = "failed"
        return self._publish(result)

    def _release_workspace(self) -> None:
        """The workspace's size cap is gone with the run (its files with it)."""
        if self.workspace_cap is not None:
            self.workspace_cap.release()
            self.workspace_cap = None

    def _execute(self) -> RunResult:
        try:
            return self._execute_run()
        finally:
            self._close_agent()

    def _close_agent(self) -> None:
        """The adapter's host-side helpers (a provider relay) go; never loses the run."""
        try:
            self.spec.agent.close()
        except Exception:
            self.log(f"the agent adapter could not close: {traceback.format_exc()}")

    def _execute_run(self) -> RunResult:
        recovery.recover_runs()  # runs whose harness died are recorded before a new one starts
        self.artifacts.mkdir(parents=True, exist_ok=False)
        try:
            self._setup()
        except BaseException:
            # Nothing ran yet: leave no half-made run folder in the results.
            self._teardown(judge=False)
            self._release_workspace()
            self._release_reserve()
            shutil.rmtree(self.artifacts, ignore_errors=True)
            shutil.rmtree(self.work, ignore_errors=True)
            raise
        self.step = "the agent's session"
        try:
            stop_reason = self._supervise()
        except BaseException as exc:
            operator = not isinstance(exc, Exception)  # Ctrl-C or SIGTERM: record, then go
            if not operator:
                self.log(f"harness error: {traceback.format_exc()}")
            problem = self._teardown()
            if operator:
                self._finish_interrupted(exc, problem)
                raise
            # The agent's code can break its own sandbox (a tree too slow to die): that ends
            # its run, and the run is graded, unless the reference check fails too.
            if (
                isinstance(exc, SandboxError)
                and problem is None
                and self._runner_reference() is None
            ):
                self.used_s = self.used_s if self.used_s is not None else self.clock.elapsed()
                self.log("the agent's sandbox broke, the reference check passed: grading")
                why = f"the agent's sandbox broke ({type(exc).__name__})"
                return self._guarded(lambda: self._conclude(why, None))
            charged = self._charge_storage()  # a write the run's own files made impossible
            if charged is not None:
                return charged
            reason = f"harness error during the run: {exc}"
            check: InvalidCheck = "harness-error"
            if isinstance(exc, SandboxError) and problem is None:
                check = "runner-reference"  # the reference check above failed too
            elif problem is not None:
                check = "runner-reference"  # the teardown's reference check failed
            return self._finish_invalid(reason + (f"; {problem}" if problem else ""), check)
        return self._guarded(lambda: self._after_session(stop_reason))

    def _guarded(self, finish: Callable[[], RunResult]) -> RunResult:
        """`finish()`; stopped meanwhile (grading, publishing), the run is recorded at once,
        with what was happening, not left for a later `runs recover`."""
        try:
            return finish()
        except BaseException as exc:
            if not isinstance(exc, Exception) and not self.published:
                self._finish_interrupted(exc, None)
            raise

    def _after_session(self, stop_reason: str) -> RunResult:
        self.step = "the end of the session"
        return self._conclude(stop_reason, self._teardown())

    def _conclude(self, stop_reason: str, problem: str | None) -> RunResult:
        """After the teardown (`problem`: what it found wrong): the adapter's last word on
        the provider, then the grading."""
        if problem:
            return self._finish_invalid(problem, "runner-reference")
        agent_problem = self.agent_problem or self.spec.agent.final_problem(self.agent_exited)
        self._close_agent()
        if agent_problem:  # infrastructure (the provider), not the model: rerun, never a 0
            if not self.agent_problem:  # found now (else logged when the agent was stopped)
                self.log(f"agent infrastructure problem: {agent_problem}", shown="")
            return self._finish_invalid(agent_problem, "provider")
        return self._grade_and_publish(stop_reason)

    def _finish_interrupted(self, exc: BaseException, problem: str | None) -> None:
        """Record a run stopped from outside as `invalid`, `interrupted`, saying by what and
        during which step (a campaign reruns it without counting an attempt)."""
        try:  # `toolkit runs kill` says why before it signals
            what = (self.harness / STOP_FILE).read_text(encoding="utf-8").strip()[:200]
        except OSError:
            what = interrupted_by(exc)
        reason = f"the run was interrupted during {self.step} ({what})"
        result = self.skeleton(reason + (f"; {problem}" if problem else ""))
        result.interrupted = True
        result.evidence = InvalidEvidence(check="interrupted", detail=bounded(reason, 2000))
        self._publish(result)

    def _setup(self) -> None:
        spec = self.spec
        data = self.train_data
        mismatch = spec.track.train_data_mismatch(
            data.train_sha256 if data else None, data.val_sha256 if data else None
        )
        if mismatch:
            raise WorkspaceError(f"{spec.data_dir}: not the track's training data ({mismatch})")
        self.harness.mkdir(parents=True)
        # Before anything else takes room: the harness's reserve on the results volume.
        self.volume = Volume(self.artifacts)
        self.volume.take_reserve()
        room, allowed = self.volume.room_at_start, spec.track.max_candidate_bytes
        self.log(
            f"results volume: {self.volume.reserve_bytes:,} bytes kept for the harness, "
            f"{room:,} free for the run (its candidates may take {allowed:,})"
            + ("; a run that fills it fails" if room < allowed else "")
        )
        cap = spec.track.workspace_disk_bytes  # a hard cap where the host can (else root-disk)
        self.workspace_cap = capped.cap_folder(self.work / "workspace", cap) if cap else None
        if cap and self.workspace_cap is not None and self.workspace_cap.size_bytes < cap:
            self.log(
                f"workspace capped at {self.workspace_cap.size_bytes:,} bytes, below the track's "
                f"{cap:,}: half of the host's free disk not promised to other capped folders"
            )
        self.workspace = assemble(
            self.work / "workspace",
            data_dir=spec.data_dir,
            public_set=spec.public_set,
            starter=spec.starter,
        )
        ws = self.workspace.root
        leaks = find_leaks(ws, exam=spec.exam, secrets=[*spec.secrets, *spec.agent.secrets()])
        if leaks:
            raise RuntimeError(
                f"the workspace would contain the exam or a secret: {', '.join(leaks)} in {ws}; "
                "check --train-data and the environment"
            )
        make_channel(self.workspace.channel)
        bin_dir = roles.controller_bin(self.workspace.channel / "bin")
        install_client(bin_dir, self.workspace.channel)
        budget, per_call, reserved = spec.budget
        spec.agent.prepare(
            ws,
            AgentContext(
                model=spec.model,
                effort=spec.effort,
                seed=spec.seed,
                budget_s=budget,
                reserved_s=reserved,
                per_call_limit_s=per_call,
                bin_dir=bin_dir,
                home_dir=self._agent_home(),
                artifacts=self.artifacts,
                backend=spec.backend,
                log=self.log,
            ),
        )
        self.history = SubmissionHistory(self.artifacts / HISTORY_FILE)
        try:
            hidden = roles.run_hidden(
                exam=spec.exam,
                results_dir=spec.results_dir,
                extra=[self.artifacts, self.harness, PUBLIC_BANKS, *spec.bank_dirs],
            )
        except ValueError as exc:
            raise WorkspaceError(str(exc)) from exc
        self.grader.hide = tuple(hidden)  # public scoring and the final grading hide the same
        readonly = [self.workspace.data]
        self.runner_hidden = [*hidden, self.workspace.channel]
        self.runner_readonly = readonly
        runner_box = roles.make_runner(
            spec.backend,
            ws,
            hide=self.runner_hidden,
            readonly=readonly,
            gpu=spec.gpu,
            cpus=spec.cpus,
        )
        self.boxes.append(runner_box)
        controller = roles.make_controller(
            spec.backend,
            ws,
            bin_dir=bin_dir,
            hide=hidden,
            network=spec.agent.needs_network(),
            env=spec.agent.env(),
            readonly=readonly,
            egress=spec.agent.egress(),
        )
        self.boxes.append(controller)
        # The sandbox's own protections, plus what the harness adds on top for the controller.
        extra = {"controller:path-restricted", *spec.agent.isolation()}
        if "egress-allowlist" in controller.isolation:
            extra.add("controller:provider-only")
        if spec.backend == "docker":  # the controller image has no Python and gets no GPU
            extra |= {"controller:no-python-image", "controller:no-gpu"}
        elif "hidden-paths" in controller.isolation:
            extra.add("controller:python-hidden")
            extra |= {"controller:gpu-hidden"} if roles.gpu_device_paths() else set()
        self.isolation = sorted(
            {f"controller:{i}" for i in controller.isolation}
            | {f"runner:{i}" for i in runner_box.isolation}
            | extra
        )
        self._check_floor({"controller": controller.isolation, "runner": runner_box.isolation})
        self.log(f"workspace {ws}; results {self.artifacts}")
        self.log(f"controller isolation: {', '.join(controller.isolation)}")
        self.log(f"controller NOT isolated: {', '.join(controller.not_isolated)}")
        self.log(f"runner isolation: {', '.join(runner_box.isolation)}")
        self.log(f"runner NOT isolated: {', '.join(runner_box.not_isolated)}")
        for note in self.grading_notes:  # recorded as in force: off the track's rules
            self.log(f"grading: {note}; the effective config records the lowered value")
        self.controller = controller
        self.runner_box = runner_box
        # Before any process starts: from here on, a crash of this harness is recoverable.
        recovery.write_marker(
            self.harness,
            recovery.Marker(
                pid=os.getpid(),
                pid_start=recovery.process_start(os.getpid()),
                results_dir=str(spec.results_dir.resolve()),
                artifacts=str(self.artifacts.resolve()),
                skeleton=self.skeleton("the harness died before the run finished"),
            ),
        )

    def _check_floor(self, isolation: dict[str, list[str]]) -> None:
        """The track's isolation floor, against what the sandboxes really have: a run that
        cannot have it does not start (the grader's sandbox is made the same way as the
        runner's, on the same backend)."""
        spec = self.spec
        gpu = spec.gpu is not None or spec.device.startswith("cuda")
        lacking = floor.missing(spec.track.isolation_floor, isolation, gpu=gpu)
        if lacking:
            other = "docker" if spec.backend == "local" else "local"
            raise WorkspaceError(
                f"track '{spec.track.id}' needs isolation this run cannot have on the "
                f"{spec.backend} backend: {', '.join(lacking)}; try --backend {other}, and see "
                f"`toolkit doctor --track {spec.track.id}`"
            )

    def _agent_home(self) -> Path:
        assert self.workspace is not None
        home = self.workspace.channel / AGENT_HOME
        home.mkdir()
        return home

    def _start_runner_process(self, argv: list[str]) -> SandboxProcess:
        assert self.runner_box is not None
        try:
            process = self.runner_box.start(argv, stdin=False)
        except SandboxRootAltered as exc:  # e.g. `.runner` moved or replaced by the agent
            raise CallRefused(
                f"the runner cannot start: {exc}; put it back as it was (the harness keeps it)"
            ) from None
        recovery.record_pid(self.harness, process.pid)
        return process

    def _runner_reference(self) -> str | None:
        """The runner's reference check: a trivial command, and one started and killed, in a
        fresh runner sandbox (same backend and settings, a new empty root of the harness's);
        None if the sandboxes work (see `reference`)."""
        spec = self.spec

        def make(root: Path) -> Sandbox:
            return roles.make_runner(
                spec.backend,
                root,
                hide=self.runner_hidden,
                readonly=self.runner_readonly,
                gpu=spec.gpu,
                cpus=spec.cpus,
            )

        root = self.work / f"reference-{secrets.token_hex(4)}"
        started = time.monotonic()
        problem = reference.runner_reference(make, root)
        took = time.monotonic() - started
        self.log(
            f"reference check in a fresh runner sandbox ({took:.1f}s): "
            + ("the sandboxes work" if problem is None else f"FAILED: {problem}")
        )
        return problem

    def _supervise(self) -> str:
        """Run the agent until it exits or the deadline; return why it stopped."""
        assert self.workspace is not None and self.history is not None
        assert self.controller is not None
        spec = self.spec
        budget, per_call, reserved = spec.budget
        self.clock = Clock(budget_s=budget, reserved_s=reserved, per_call_limit_s=per_call)
        self.started_at = self.clock.started_at
        submissions = Submissions(
            workspace=self.workspace.root,
            store=self.artifacts / CANDIDATES_DIR,
            history=self.history,
            clock=self.clock,
            grader=self.grader,
            public_set=spec.public_set,
            log=self.log,
            max_candidates=spec.track.max_candidates,
            max_candidate_bytes=spec.track.max_candidate_bytes,
            on_full=self._on_full,
        )
        self.submissions = submissions
        self.service = RunnerService(
            channel=self.workspace.channel,
            clock=self.clock,
            audit=ChainedLog(self.artifacts / AUDIT_FILE),
            start_process=self._start_runner_process,
            handlers=submissions.handlers(),
            reference=self._runner_reference,
            on_full=self._on_full,
        )
        self.service.start()
        self.live = LiveFile(self.harness, spec.agent.console())
        agent = self.controller.start(spec.agent.command(), stdin=False)
        self.agent_process = agent
        recovery.record_pid(self.harness, agent.pid)
        self.log(f"agent '{spec.agent.name}' started: {' '.join(spec.agent.command())}")
        self._follow_console(agent)
        while True:
            left = self.clock.time_left()
            if self.tick:
                self.tick(self.clock.elapsed(), self.clock.budget_s)
            self._show_live()
            code = agent.wait(timeout=min(0.5, left) if left > 0 else 0)
            if code is not None:
                self.agent_exited = True
                self.used_s = self.clock.elapsed()
                self.log(f"agent exited with status {code}")
                return f"the agent exited with status {code}"
            if self.clock.expired():
                self.used_s = self.clock.budget_s
                self.log("deadline reached: stopping the agent and every call in flight")
                return "deadline"
            problem = spec.agent.problem()
            if problem:
                self.used_s = self.clock.elapsed()
                self.agent_problem = problem
                self.log(
                    f"stopping the agent: {problem}",
                    shown="stopping the agent: an infrastructure problem (the reason follows "
                    "with the result)",
                )
                return problem

    def _show_live(self) -> None:
        """What the run does now, for `toolkit view` (`toolkit.run.live`)."""
        if self.live is not None:
            calls = self.service.calls_in_flight() if self.service is not None else []
            self.live.update(self.step, calls)

    def _follow_console(self, agent: SandboxProcess) -> None:
        """The agent's stdout and stderr into the files its adapter names (one file when both
        name the same), each line shown to the adapter, and echoed as it says."""
        spec = self.spec
        redact = [*spec.secrets, *spec.agent.secrets()]
        files: dict[str, Transcript] = {}
        for stream, pipe, name in zip(
            ("stdout", "stderr"), (agent.stdout, agent.stderr), spec.agent.console(), strict=True
        ):
            if name not in files:
                files[name] = Transcript(self.artifacts / name, None, redact, log=self.log)
                self.transcripts.append(files[name])
            files[name].follow(pipe, self._observer(stream))

    def _observer(self, stream: str) -> Callable[[str], None]:
        def observe(line: str) -> None:
            shown = self.spec.agent.observe(stream, line)
            if shown is not None:
                self.echo(shown)

        return observe

    def _teardown(self, judge: bool = True) -> str | None:
        """Kill everything the run started (fast: a PID namespace dies with its first process).

        Returns what went wrong, if anything: an exception would lose the result. A tree that
        outlives its kill may be the agent's own doing (thousands of mappings take long to
        die), so with `judge` it is an infrastructure failure (the run invalid) only when the
        reference check in a fresh sandbox fails too; otherwise it is logged, and the run goes
        on to be graded."""
        started = time.monotonic()
        errors: list[str] = []

        def clean(box: Sandbox) -> None:
            try:
                box.cleanup()
            except Exception as exc:
                errors.append(str(exc))

        # Calls in flight are killed first (so the log says why), then the agent, so that no
        # call can come after the service has stopped: every call the agent made is on record.
        if self.service is not None:
            self.service.close()
        if self.agent_process is not None:
            try:
                self.agent_process.kill()
            except Exception as exc:
                errors.append(str(exc))
        # The agent is gone: what is left to write is the harness's (egress log, the last
        # audit entries and counts, the result), out of the reserve it kept for that.
        self._release_reserve()
        self._finish_agent()  # the agent is gone: its adapter's last word, in the controller
        if self.controller is not None and self.controller in self.boxes:
            clean(self.controller)
        if self.submissions is not None:
            self.submissions.close()
        if self.service is not None:
            self.service.stop()
            self.runner_s = self.service.runner_seconds
        for box in self.boxes:
            if box is not self.controller:
                clean(box)
        self.boxes = []
        took = time.monotonic() - started
        for transcript in self.transcripts:
            transcript.close()
        self.transcripts = []
        if self.service is not None and self.service.gate is not None:
            try:
                self.service.gate.flush()  # the audit log's counts of what it does not list
            except OSError as exc:
                errors.append(f"the audit log's counts could not be written: {exc}")
        self.log(f"stopped everything in {took:.2f}s")
        if not errors:
            return None
        self.log("teardown failed: " + "; ".join(errors))
        if judge and self._runner_reference() is None:
            self.log("the agent's processes were slow to die or left behind: charged to the agent")
            return None
        return "teardown failed: " + "; ".join(errors)

    def _finish_agent(self) -> None:
        """The adapter's last word in the controller (its session export), then the controller's
        egress log into the run folder. Neither may lose the run."""
        controller = self.controller
        if controller is None or self.agent_process is None:
            return
        try:
            self.spec.agent.finish(controller, self.artifacts)
        except Exception:
            self.log(f"the agent adapter could not finish: {traceback.format_exc()}")
        entries = controller.egress_log
        if entries:
            (self.artifacts / EGRESS_LOG).write_text(
                "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries), encoding="utf-8"
            )
            refused = sum(1 for e in entries if not e["allowed"])
            self.log(f"egress: {len(entries) - refused} connections made, {refused} refused")

    # -- grading and the result ---------------------------------------------------------------

    def _finish_invalid(self, reason: str, check: InvalidCheck) -> RunResult:
        """Publish the run as `invalid`, with the check that showed it (signed)."""
        result = self.skeleton(reason)
        result.evidence = InvalidEvidence(check=check, detail=bounded(reason, 2000))
        return self._publish(result)

    def _publish(self, result: RunResult) -> RunResult:
        if self.history is not None:
            result.candidates = self.history.candidates()
            result.promoted = result.promoted or self.history.promoted()
        result.finished_at = self.grading_from or datetime.now(UTC)
        result.started_at = self.started_at
        used = self.used_s if self.used_s is not None else self.clock.elapsed()
        result.timings.used_s = round(min(used, self.clock.budget_s), 3)
        result.timings.runner_s = round(self.runner_s, 3)
        result.config.isolation = self.isolation
        if result.status_reason is not None:  # it may quote the agent: bounded
            result.status_reason = bounded(result.status_reason, STATUS_REASON_CHARS)
        transcript = self.artifacts / TRANSCRIPT_FILE
        text = _read_head(transcript, TRANSCRIPT_CAP_BYTES + 4096)  # capped as it was written
        outcome = self.spec.agent.collect(self.work / "workspace", text)
        result.usage = outcome.usage
        if outcome.transcript is not None and outcome.transcript != text:
            transcript.write_text(outcome.transcript, encoding="utf-8")
        reason = f" ({result.status_reason})" if result.status_reason else ""
        # Not echoed: the command prints the result, its reason once. The last line of
        # agent.log: what comes after is not published (the file is hashed next).
        self.log(f"result: {result.status} {result.score.percent:.1f}%{reason}", shown="")
        self.log.seal()
        result.artifacts = list_artifacts(self.artifacts, self.run_id)  # all there is, now
        # Where the chained logs end now: a log rewritten later, even with fresh hashes, won't.
        result.logs = log_heads(self.artifacts.parent, result.artifacts)
        result.files = file_hashes(self.artifacts, self.run_id)  # every byte, signed
        # Fields were set one by one: validate the whole before it is published.
        result = RunResult.model_validate(result.model_dump())
        saved = save_run(result, self.spec.results_dir)
        self.published = True
        recovery.clear_marker(self.harness)
        if self.grading_from is not None:  # the last write to the run's files is done
            _backdate([saved, *self.artifacts.rglob("*")], self.grading_from.timestamp())
        return result

    def _grade_and_publish(self, stop_reason: str) -> RunResult:
        assert self.history is not None
        charged = self._charge_storage()
        if charged is not None:
            return charged
        try:
            self.history.verify()
            if self.service is not None:
                self.service.audit.verify()
        except ChainError as exc:
            return self._finish_invalid(f"a run log was altered during the run: {exc}", "run-log")
        if self.service is not None and self.service.infra_errors:
            errors = "; ".join(self.service.infra_errors[:3])
            return self._finish_invalid(
                f"infrastructure error during the run: {errors}", "harness-error"
            )
        promoted = self.history.promoted()
        result = self.skeleton("grading did not finish")
        result.candidates = self.history.candidates()
        if promoted is None:
            result.status = "failed"
            result.status_reason = f"no candidate was promoted ({stop_reason}): scores 0"
            return self._publish(result)
        result.promoted = promoted
        assert self.submissions is not None
        archive = self.submissions.archive(promoted.id)
        if not archive.is_file() or sha256_file(archive) != promoted.sha256:
            return self._finish_invalid(
                f"the stored archive of {promoted.id} is missing or changed", "archive"
            )
        self.step = f"the final grading of {promoted.id}"
        self.log.hold()  # no published time tells how long the hidden grading took
        self.grading_from = datetime.now(UTC)
        self._show_live()
        self.log(f"grading {promoted.id} on the exam ({self.spec.exam.name})")
        started = time.monotonic()
        try:
            report = self.grader.grade(
                archive, self.spec.exam, ("generate", "bpb"), ablation=True, hidden=True
            )
        except Exception as exc:
            # A hidden grading: neither the text nor the traceback of a failure is published
            # (either may quote the bundle); the operator log has them, agent.log the type.
            # The bundle's code can break its own grading (a tree too slow to die): invalid
            # only if the harness's reference bundle fails too, in fresh sandboxes.
            kind = failure_name(exc)
            secret_log.record(f"final grading of {self.run_id}", traceback.format_exc())
            self.log(
                f"grading of {promoted.id} raised {kind} (details: the operator log); grading "
                "the reference bundle in fresh sandboxes to tell whose failure it is"
            )
            problem = reference.grading_reference(self.grader, self.spec.exam)
            if problem is not None:
                self.log(f"the reference bundle failed too: {problem}")
                return self._finish_invalid(
                    f"grading failed (infrastructure): {kind}; the harness's reference bundle "
                    f"failed too: {problem}",
                    "grading-reference",
                )
            self.log("the reference bundle graded fine: the failure is the bundle's")
            result.timings.grading_s = self._grading_time(started)
            result.status = "failed"
            result.status_reason = grading_charged_reason(promoted.id, exc)
            return self._publish(result)
        result.timings.grading_s = self._grading_time(started)
        try:  # what scored, for a reviewer to read (listed with the artifacts)
            write_promoted_code(archive, self.artifacts, promoted.id)
        except (OSError, tarfile.TarError) as exc:
            self.log(f"could not list the promoted bundle's code: {type(exc).__name__}")
        result.score = report.score
        result.families = {
            k: FamilyScore(passed=v.passed, total=v.total) for k, v in report.families.items()
        }
        result.bits_per_byte = report.bits_per_byte
        if report.ok:
            result.status = "valid"
            result.status_reason = None
            result.weights_ablation = report.weights_ablation
            result.model_free_suspect = report.model_free_suspect
            ablated = report.weights_ablation
            if ablated is not None:  # the published (coarse) score only: not how it went
                self.log(
                    f"weights ablation: {ablated.passed}/{ablated.total} (published coarsely), "
                    f"suspect {report.model_free_suspect}"
                )
        else:
            result.status = "failed"
            result.status_reason = (
                f"the promoted candidate {promoted.id} failed grading: {report.reason}"
            )
            result.score = Score(percent=0.0, passed=0, total=report.score.total)
            result.families = {}
        return self._publish(result)

    def _grading_time(self, started: float) -> float:
        """The final grading's duration as published (a coarse bucket); exact: operator log."""
        took = time.monotonic() - started
        secret_log.record(f"final grading of {self.run_id}: seconds (exact)", f"{took:.3f}")
        return coarse_seconds(took)


def grading_charged_reason(candidate: str, exc: Exception) -> str:
    """Why a promoted candidate whose grading broke (while the reference bundle graded fine)
    failed: a fixed text per kind of failure, never the exception's own (it may quote the
    bundle)."""
    kind = exc.kind if isinstance(exc, GradingError) else type(exc)
    if issubclass(kind, SandboxTeardownTimeout):
        what = "the bundle's sandbox could not be torn down in time"
    elif issubclass(kind, SandboxError):
        what = "the bundle's sandbox broke"
    else:
        what = "the harness could not grade the bundle"
    return (
        f"grading failed: {what} (candidate {candidate}; the harness's reference bundle "
        "graded fine in fresh sandboxes, so the failure is charged to the bundle)"
    )


def _read_head(path: Path, limit: int) -> str:
    """The text of `path`, at most `limit` bytes of it ("" if there is no such file)."""
    try:
        with path.open("rb") as f:
            return f.read(limit).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def execute_run(
    spec: RunSpec,
    *,
    echo: Callable[[str], None] = _quiet,
    tick: Callable[[float, float], None] | None = None,
) -> RunResult:
    """Run one agent under `spec` and return the published result."""
    return Run(spec, echo=echo, tick=tick).execute()
