"""The runner service: the harness end of the agent's `runner` command.

It answers calls arriving on the FIFO channel (`toolkit.runner.channel`). Compute calls run in
the runner sandbox at the workspace root, stream their output back as it comes, and are killed
at the per-call limit (or the deadline). In the reserved window new compute is refused while
`submit`, `promote`, `history` and `time_left` keep working.

Every call, whatever its kind or outcome, is on the append-only audit log
(`toolkit.runner.audit`), one entry each within the log's bounds and counted past them
(`toolkit.runner.audit_gate`: a flood of malformed requests, calls past the most a run may
make, entries a full results volume refused): a malformed call is refused with a reply and
logged; a call that the harness cannot finish serving within the per-call limit plus `grace_s`
(a handler stuck, a client that stopped reading) is closed with an error and logged, so no
client waits longer than that; a failure of the log itself is an infrastructure error of the
run (`infra_errors`), except a full results volume, which the run judges (`on_full`). A compute
call whose sandbox breaks (its tree too slow to die, say: the agent's code can do that) is one
only when the run's `reference` check in a fresh sandbox fails too; otherwise it is charged to
the call, which ends as killed.

Commands other than compute (`submit`, `promote`, `history`) are handlers supplied by the run,
so this module knows nothing of bundles or grading.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Protocol

from toolkit.clock import Clock, format_duration
from toolkit.results.chain import ChainedLog, disk_full
from toolkit.runner.audit import Outcome, clean_text
from toolkit.runner.audit_gate import AuditGate
from toolkit.runner.channel import BadRequest, Call, CallsFolder, ClientGone, RequestLoop
from toolkit.runner.client import CALLS
from toolkit.sandbox import SandboxTeardownTimeout, teardown_wait_s

# Exit codes of the runner's own verdicts (the command's own code passes through otherwise).
REFUSED = 75  # compute asked for in the reserved window, or after the run ended
KILLED = 124  # past the per-call limit, at the deadline, or cancelled (like timeout(1))
INTERNAL = 70  # the harness failed (EX_SOFTWARE): the run will be marked invalid
MALFORMED = 64  # the call itself was malformed (EX_USAGE): no argument list, or one too long
GRACE_S = 10.0  # beyond the per-call limit, how long a call may take to be wound up
STOP_WAIT_S = 3.0  # at the end of the run, how long calls get to end before they are closed
POLL_S = 0.05  # how quickly a running call notices that it is to be killed
CANCEL_WAIT_S = 2.0  # a client that vanished: how long its `cancel` line may take to come
CANCELLED = "client gone: cancelled by the agent (interrupt)"
NO_REFERENCE = "no reference check"


def _charged_reason(exc: Exception) -> str:
    """What a call whose sandbox broke, while the reference check worked, is told (a fixed text
    per kind of failure: the exception may quote the call's own output)."""
    if isinstance(exc, SandboxTeardownTimeout):
        return (
            "killed: the call's processes were still being torn down "
            f"{teardown_wait_s():g} s after SIGKILL (charged to the call; the harness's "
            "own reference command ran fine in a fresh sandbox)"
        )
    return (
        f"killed: the call's sandbox failed ({type(exc).__name__}; charged to the call: the "
        "harness's own reference command ran fine in a fresh sandbox)"
    )


class CallRefused(Exception):
    """`start_process` cannot start the command for a reason of the agent's own making (it
    altered what the harness keeps in its workspace): the call is refused with this text, and
    the run goes on; it is not the harness's failure."""


class Process(Protocol):
    """What the service needs of a started sandbox process."""

    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    def wait(self, timeout: float | None = None) -> int | None: ...

    def kill(self) -> None: ...


StartProcess = Callable[[list[str]], Process]
Handler = Callable[[Call], int]

HELP = """\
runner: the only way to compute in this run. Every reply starts with the time left.
  runner CMD [ARGS...]   run CMD at the workspace root in the runner (no network);
                         at most {per_call} per call; refused in the last {reserved}
                         (use `runner sh -c '...'` for pipes, cd or redirects on the runner side)
  runner time_left       seconds left in the run (also: until the reserved window)
  runner submit DIR      pack DIR as a bundle, size-check it, score it on the public
                         validation set (feedback only) and print its candidate id
  runner promote ID      choose the candidate graded on the hidden exam (the last promoted wins)
  runner history         every candidate so far, with its public score
Exit codes: the command's own; {refused} = refused (reserved window); {killed} = killed (limit,
deadline or cancelled); {malformed} = malformed call (arguments over 1 MiB in all, or past the
run's budget of argument bytes: pass long input in a file)."""


@dataclass
class _InFlight:
    name: str
    started_at: datetime
    start_s: float
    call: Call | None = None
    reason: str | None = None  # why the harness refused, killed or closed it, if it did
    finished: bool = False
    # Set to have the call's process killed. Only the thread serving the call touches the
    # process, so that its end is seen and recorded in one place.
    stop: threading.Event = field(default_factory=threading.Event)
    cancelled: threading.Event = field(default_factory=threading.Event)  # `cancel NAME` came
    sandboxed: bool = False  # a compute call: the agent's code runs in the runner sandbox
    over_cap: bool = False  # refused because the audit log holds its most calls: counted
    unread: bool = False  # still in the requests FIFO when the run ended


@dataclass
class RunnerService:
    """Serves `runner` calls for one run until `stop()`."""

    channel: Path
    clock: Clock
    audit: ChainedLog
    start_process: StartProcess
    handlers: dict[str, Handler] = field(default_factory=dict)
    grace_s: float = GRACE_S
    runner_seconds: float = 0.0
    infra_errors: list[str] = field(default_factory=list)  # our failures, not the agent's
    reference: Callable[[], str | None] | None = None
    """Checks the sandboxes with code of the harness's own in a fresh one: None if they work,
    else why not. A call that raises is an infrastructure error only when this fails too (or
    when there is no check); otherwise it is charged to the call (see `_failed`)."""
    on_full: Callable[[str], None] | None = None
    """Told of an audit entry the full results volume refused (the run judges whose doing
    that was when it ends); without it, such a failure is an infrastructure error."""
    gate: AuditGate | None = None
    """The audit log's bounds (`toolkit.runner.audit_gate`); made from `audit` if not given."""
    _reference_lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: RequestLoop | None = None
    _calls: CallsFolder | None = None
    _inflight: dict[str, _InFlight] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False
    _done: deque[tuple[float, str]] = field(default_factory=deque)
    _ended: threading.Condition = field(default_factory=threading.Condition)
    _serving: set[threading.Thread] = field(default_factory=set)  # threads serving a call

    def __post_init__(self) -> None:
        if self.gate is None:
            self.gate = AuditGate(self.audit)

    def start(self) -> None:
        self._calls = CallsFolder(self.channel / CALLS)
        self._loop = RequestLoop(self.channel, self._serve, self._cancel)
        self._loop.start()

    def close(self, reason: str = "the run's deadline was reached") -> None:
        """Refuse new calls (with a reply) and kill every call in flight; keep listening."""
        with self._lock:
            self._closed = True
            inflight = list(self._inflight.values())
        for item in inflight:
            self._kill(item, f"killed: {reason}")

    def stop(self, reason: str = "the run's deadline was reached") -> None:
        """`close`, stop listening, and close (and log) what is left.

        When this returns, every call ever requested has its audit entry, those still waiting
        in the requests FIFO included."""
        self.close(reason)
        if self._loop is not None:
            for name in self._loop.stop():
                item = _InFlight(name, datetime.now(UTC), self.clock.elapsed())
                item.reason = f"refused: the run ended before this call was read ({reason})"
                item.unread = True
                self._log(item, REFUSED)
            self._loop = None
        waited_until = time.monotonic() + STOP_WAIT_S
        with self._ended:
            self._ended.wait_for(lambda: self.in_flight() == 0, timeout=STOP_WAIT_S)
        with self._lock:
            left = list(self._inflight.values())
        for item in left:
            self._finish(item, KILLED, f"closed by the harness: {reason}")
        # Every call is closed and logged; let the threads that served them end too, so that
        # none is still using the runner's sandbox when the run cleans it up.
        with self._lock:
            threads = list(self._serving)
        for thread in threads:
            thread.join(timeout=max(0.0, waited_until - time.monotonic()) + POLL_S * 4)
        self._sweep(keep_s=0)
        if self._calls is not None:
            self._calls.close()
            self._calls = None

    def _sweep(self, keep_s: float = 10.0) -> None:
        """Remove call folders of calls that ended more than `keep_s` ago (the client reads its
        exit code right after the streams close, so a few seconds is plenty)."""
        now = time.monotonic()
        with self._lock:
            old = []
            while self._done and now - self._done[0][0] >= keep_s:
                old.append(self._done.popleft()[1])
            calls = self._calls
        for name in old:
            if calls is not None:
                calls.remove(name)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._inflight)

    def calls_in_flight(self) -> list[tuple[float, list[str]]]:
        """(start second on the run's clock, arguments) of each call being served, oldest
        first: what a live view draws before the call's audit entry exists."""
        with self._lock:
            items = [i for i in self._inflight.values() if not i.finished]
        return sorted((i.start_s, i.call.argv if i.call is not None else []) for i in items)

    def serve_limit(self) -> float:
        """The longest any call may take, from its request to its exit code."""
        return self.clock.per_call_limit_s + self.grace_s

    # -- one call ---------------------------------------------------------------------------

    def _serve(self, name: str) -> None:
        """Serve one request; whatever happens, the call ends with one audit entry."""
        thread = threading.current_thread()
        with self._lock:
            self._serving.add(thread)
        try:
            self._serve_call(name)
        finally:
            with self._lock:
                self._serving.discard(thread)

    def _serve_call(self, name: str) -> None:
        self._sweep()
        item = _InFlight(name, datetime.now(UTC), self.clock.elapsed())
        deadline = time.monotonic() + self.serve_limit()
        with self._lock:
            duplicate = name in self._inflight
            closed = self._closed
            if not duplicate:
                self._inflight[name] = item
        if duplicate:  # the same folder twice: the first request owns it
            item.reason = f"bad request: call {name} is already being served"
            self._log(item, MALFORMED)
            return
        watchdog = threading.Timer(self.serve_limit(), self._expire, (item,))
        watchdog.daemon = True
        watchdog.start()
        code = KILLED
        try:
            calls = self._calls
            if calls is None:
                raise BadRequest("the service has stopped")
            call = Call(name, calls.open_call(name), deadline, calls.budget)
            with self._lock:
                item.call = call
                late = item.finished  # closed (watchdog, stop) before it was even opened
                if call.problem is not None:
                    item.reason = f"bad request: {call.problem}"
                    code = MALFORMED
            if late:
                call.finish(KILLED)
                raise ClientGone("the call was closed before it was served")
            call.open_stderr(self.clock.header())
            call.open_stdout()
            if call.problem is not None:
                call.say(f"[runner] refused: {call.problem}")
            elif closed:
                call.say("[runner] refused: the run is over")
                code = REFUSED
            elif self.gate is not None and self.gate.full():
                item.over_cap = True
                call.say(
                    f"[runner] refused: this run has made {self.gate.max_entries:,} calls, the "
                    "most its audit log lists; no more calls are served"
                )
                code = REFUSED
            else:
                code = self._dispatch(item)
        except BadRequest as exc:
            with self._lock:
                item.reason = item.reason or f"bad request: {exc}"
            code = MALFORMED
        except ClientGone as exc:
            with self._lock:
                item.reason = item.reason or f"client gone: {exc}"
        except Exception as exc:  # the call's sandbox broke, or a bug of ours
            code = self._failed(item, exc)
        finally:
            watchdog.cancel()
            self._await_cancel(item)
            self._finish(item, code)
            if item.call is not None:
                item.call.release()

    def _failed(self, item: _InFlight, exc: Exception) -> int:
        """A call that raised. A compute call is charged to the call (KILLED) when the reference
        check shows the sandboxes work (the call's own code can break its sandbox: a tree too
        slow to die), an infrastructure error (INTERNAL: the run is invalid) only when that
        check fails; any other call that raised is an infrastructure error."""
        with self._lock:
            # A call the harness already closed and logged at the end of the run may fail
            # as the run tears down (its sandbox is gone): nothing the agent saw changes.
            teardown = self._closed and item.finished
        # Only a compute call runs the agent's code; a handler (submit, promote, history) that
        # raises is a bug of the harness's, whatever input it was given.
        judged = not teardown and item.sandboxed
        problem = self._check_reference() if judged else NO_REFERENCE
        with self._lock:
            if problem is None:  # after why it was killed, if it was (a cancel, the limit)
                item.reason = "; ".join(filter(None, [item.reason, _charged_reason(exc)]))
            else:
                item.reason = f"runner error: {type(exc).__name__}: {exc}"
                argv = item.call.argv[:2] if item.call else []
                if not teardown:
                    error = f"{' '.join(argv)}: {item.reason}"
                    if problem != NO_REFERENCE:
                        error += f" (and the reference check failed: {problem})"
                    self.infra_errors.append(clean_text(error))
        if item.call is not None:
            with contextlib.suppress(ClientGone):
                if problem is None:
                    item.call.say(f"[runner] {item.reason}")
                else:
                    item.call.say(f"[runner] internal error: {exc}")
        return KILLED if problem is None else INTERNAL

    def _check_reference(self) -> str | None:
        """The reference check's verdict (one at a time); NO_REFERENCE if there is none."""
        if self.reference is None:
            return NO_REFERENCE
        with self._reference_lock:
            try:
                return self.reference()
            except Exception as exc:
                return f"the reference check raised {type(exc).__name__}: {exc}"

    @staticmethod
    def _await_cancel(item: _InFlight) -> None:
        """A client that vanished was most likely interrupted: its `cancel` line may come a
        moment after its readers died (a signal to its whole process group kills them first),
        so wait a little for it rather than record an interrupt as a crash."""
        gone = item.reason is not None and item.reason.startswith("client gone")
        if gone and not item.finished:  # finished: logged already, the run is ending
            item.cancelled.wait(CANCEL_WAIT_S)

    def _expire(self, item: _InFlight) -> None:
        """The watchdog: the call outlived the per-call limit plus the grace; close it now."""
        reason = (
            "closed by the harness: the call was still not done "
            f"{format_duration(self.serve_limit())} after it was made (per-call limit "
            f"{format_duration(self.clock.per_call_limit_s)})"
        )
        self._kill(item, reason)
        self._finish(item, KILLED, reason)

    def _finish(self, item: _InFlight, code: int, reason: str | None = None) -> None:
        """Log the call, then give the client its exit code; only the first caller does."""
        with self._lock:
            if item.finished:
                return
            item.finished = True
            if reason is not None and item.reason is None:
                item.reason = reason
            call = item.call
        if call is not None and reason is not None:
            call.deadline = 0.0  # a last word, but no waiting on a client that does not read
            with contextlib.suppress(ClientGone):
                call.say(f"[runner] {reason}")
        # Logged before the client sees its exit code: whatever the agent saw is on record.
        self._log(item, code)
        if call is not None:
            call.finish(code)
        with self._lock:
            if self._inflight.get(item.name) is item:
                del self._inflight[item.name]
            self._done.append((time.monotonic(), item.name))
        with self._ended:
            self._ended.notify_all()

    def _dispatch(self, item: _InFlight) -> int:
        call = item.call
        assert call is not None
        name = call.argv[0] if call.argv else "help"
        if name in ("help", "--help", "-h"):
            call.write("stdout", (self._help() + "\n").encode())
            return 0
        if name == "time_left":
            left = self.clock.time_left()
            compute = self.clock.compute_left()
            call.write("stdout", f"{left:.0f}\n".encode())
            call.say(f"[runner] compute allowed for {compute:.0f} s more (then reserved window)")
            return 0
        if name in self.handlers:
            return self.handlers[name](call)
        return self._compute(item)

    def _help(self) -> str:
        return HELP.format(
            per_call=format_duration(self.clock.per_call_limit_s),
            reserved=format_duration(self.clock.reserved_s),
            refused=REFUSED,
            killed=KILLED,
            malformed=MALFORMED,
        )

    def _compute(self, item: _InFlight) -> int:
        call = item.call
        assert call is not None
        item.sandboxed = True
        if self.clock.in_reserved_window():
            call.say(
                "[runner] refused: the run is in its reserved window "
                f"(last {format_duration(self.clock.reserved_s)}); no new compute. "
                "`runner submit DIR` and `runner promote ID` still work."
            )
            item.reason = "refused: reserved window"
            return REFUSED
        limit = self.clock.call_limit()
        started = self.clock.elapsed()
        if item.stop.is_set():  # cancelled or closed already: start nothing
            return KILLED
        try:
            process = self.start_process(call.argv)
        except CallRefused as exc:
            call.say(f"[runner] refused: {exc}")
            item.reason = clean_text(f"refused: {exc}")[:500]
            return REFUSED
        with self._lock:
            if self._closed or item.finished:
                item.reason = item.reason or "killed: the run is over"
                item.stop.set()
        pumps = [
            threading.Thread(target=self._pump, args=(item, s, p), daemon=True)
            for s, p in (("stdout", process.stdout), ("stderr", process.stderr))
            if p is not None
        ]
        for t in pumps:
            t.start()
        code = self._wait(item, process, time.monotonic() + limit)
        if code is None:
            if not item.stop.is_set():
                per_call = limit >= self.clock.per_call_limit_s - 1e-6
                self._kill(
                    item,
                    f"killed: the call ran past the per-call limit of "
                    f"{format_duration(self.clock.per_call_limit_s)}"
                    if per_call
                    else "killed: the run's deadline was reached",
                )
            process.kill()
            code = process.wait(timeout=5)
            took = float(getattr(process, "teardown_s", 0.0))
            if took >= 1.0:  # the call's own doing (its processes), and its time
                with contextlib.suppress(ClientGone):
                    call.say(f"[runner] its processes took {took:.1f} s to die after SIGKILL")
        for t in pumps:  # the rest of the output; a client that stopped reading is not waited on
            t.join(timeout=2)
        with self._lock:
            self.runner_seconds += self.clock.elapsed() - started
        if item.reason and not item.reason.startswith("client gone"):
            with contextlib.suppress(ClientGone):
                call.say(f"[runner] {item.reason}")
            return KILLED
        if code is None or (item.stop.is_set() and code < 0):
            return KILLED  # killed at our asking (a cancel, a client gone): like timeout(1)
        return code

    @staticmethod
    def _wait(item: _InFlight, process: Process, deadline: float) -> int | None:
        """The exit code, or None once `deadline` passes or a kill is asked for."""
        while not item.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            code = process.wait(timeout=min(POLL_S, left))
            if code is not None:
                return code
        return None

    def _pump(self, item: _InFlight, stream: str, pipe: IO[bytes]) -> None:
        """Forward one output pipe to the client as it comes; kill the call if it left."""
        assert item.call is not None
        read = getattr(pipe, "read1", pipe.read)
        while True:
            try:
                chunk = read(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            if item.call.gone or item.finished:
                continue  # drain so the process is never blocked on a full pipe
            try:
                item.call.write(stream, chunk)
            except ClientGone:
                self._kill(item, "client gone: the runner client was interrupted")

    def _kill(self, item: _InFlight, reason: str) -> None:
        """Ask for the call's process to be killed (its own thread does it within POLL_S)."""
        with self._lock:
            if item.reason is None:
                item.reason = reason
        item.stop.set()

    def _cancel(self, name: str) -> None:
        """The client was interrupted: kill its call, and say so even where its end was seen
        first (its readers died before it could send this line)."""
        with self._lock:
            item = self._inflight.get(name)
            if item is None:
                return
            if item.reason is None or item.reason.startswith("client gone"):
                item.reason = CANCELLED
            item.cancelled.set()
        item.stop.set()

    def _log(self, item: _InFlight, code: int) -> None:
        """Append the call's audit entry. Never raises: if the log cannot take it, that is
        recorded as an infrastructure error (the run becomes invalid), not lost."""
        call = item.call
        outcome = Outcome(
            call=item.name,
            started_at=item.started_at,
            ended_at=datetime.now(UTC),
            start_s=item.start_s,
            end_s=self.clock.elapsed(),
            exit_code=code,
            note=item.reason or (call.note if call is not None else None),
        )
        if call is not None:
            outcome.argv = call.argv_bytes
            outcome.request, outcome.request_bytes = call.request, call.request_bytes
            outcome.stdout_bytes, outcome.stderr_bytes = call.bytes["stdout"], call.bytes["stderr"]
            outcome.stdout_sha256 = call.digest("stdout")
            outcome.stderr_sha256 = call.digest("stderr")
        assert self.gate is not None
        try:
            self.gate.record(
                outcome.entry(),
                malformed=code == MALFORMED,
                over_cap=item.over_cap,
                at_s=outcome.end_s,
                unread=item.unread,
            )
        except Exception as exc:
            if disk_full(exc) and self.on_full is not None:
                # The chained append was cut back: the log is intact, this entry counted.
                self.on_full(f"the audit entry of call {clean_text(item.name)}")
                self.gate.lost(outcome.end_s)
                return
            error = clean_text(f"the audit log could not record call {item.name}: {exc!r}")
            with self._lock:
                self.infra_errors.append(error)
            with contextlib.suppress(Exception):
                self.audit.append({"call": clean_text(item.name), "audit_error": error})
