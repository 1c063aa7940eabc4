"""The runner service: the harness end of the agent's `runner` command.

It answers calls arriving on the FIFO channel (`toolkit.runner.channel`). Compute calls run in
the runner sandbox at the workspace root, stream their output back as it comes, and are killed
at the per-call limit (or the deadline). In the reserved window new compute is refused while
`submit`, `promote`, `history` and `time_left` keep working. Every call, whatever its kind or
outcome, becomes one entry of the append-only audit log.

Commands other than compute (`submit`, `promote`, `history`) are handlers supplied by the run,
so this module knows nothing of bundles or grading.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Protocol

from toolkit.chain import ChainedLog
from toolkit.clock import Clock, format_duration
from toolkit.runner.channel import BadRequest, Call, ClientGone, RequestLoop

# Exit codes of the runner's own verdicts (the command's own code passes through otherwise).
REFUSED = 75  # compute asked for in the reserved window, or after the run ended
KILLED = 124  # past the per-call limit, at the deadline, or cancelled (like timeout(1))
INTERNAL = 70  # the harness failed (EX_SOFTWARE): the run will be marked invalid


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
deadline or cancelled)."""


@dataclass
class _InFlight:
    call: Call
    process: Process | None = None
    reason: str | None = None  # why the harness killed it, if it did


@dataclass
class RunnerService:
    """Serves `runner` calls for one run until `stop()`."""

    channel: Path
    clock: Clock
    audit: ChainedLog
    start_process: StartProcess
    handlers: dict[str, Handler] = field(default_factory=dict)
    runner_seconds: float = 0.0
    infra_errors: list[str] = field(default_factory=list)  # our failures, not the agent's
    _loop: RequestLoop | None = None
    _inflight: dict[str, _InFlight] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False
    _done: deque[tuple[float, Path]] = field(default_factory=deque)

    def start(self) -> None:
        self._loop = RequestLoop(self.channel, self._serve, self._cancel)
        self._loop.start()

    def stop(self, reason: str = "the run's deadline was reached") -> None:
        """Refuse new calls and kill every call in flight (the caller then tears down)."""
        with self._lock:
            self._closed = True
            inflight = list(self._inflight.values())
        for item in inflight:
            self._kill(item, reason)
        if self._loop is not None:
            self._loop.stop()
            self._loop = None
        self._sweep(keep_s=0)

    def _sweep(self, keep_s: float = 10.0) -> None:
        """Remove call folders of calls that ended more than `keep_s` ago (the client reads its
        exit code right after the streams close, so a few seconds is plenty)."""
        now = time.monotonic()
        with self._lock:
            old = []
            while self._done and now - self._done[0][0] >= keep_s:
                old.append(self._done.popleft()[1])
        for folder in old:
            shutil.rmtree(folder, ignore_errors=True)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._inflight)

    # -- one call ---------------------------------------------------------------------------

    def _serve(self, folder: Path) -> None:
        self._sweep()
        try:
            call = Call(folder)
        except BadRequest:
            return
        start_s = self.clock.elapsed()
        started_at = datetime.now(UTC)
        item = _InFlight(call)
        code: int = KILLED
        with self._lock:
            self._inflight[call.name] = item
            closed = self._closed
        try:
            call.open(self.clock.header())
            if closed:
                call.say("[runner] refused: the run is over")
                code = REFUSED
            else:
                code = self._dispatch(item)
        except (ClientGone, BadRequest) as exc:
            item.reason = item.reason or f"client gone: {exc}"
        except Exception as exc:  # a bug of ours: tell the agent and keep the log honest
            item.reason = f"runner error: {type(exc).__name__}: {exc}"
            with self._lock:
                self.infra_errors.append(f"{' '.join(call.argv[:2])}: {item.reason}")
            with contextlib.suppress(ClientGone):
                call.say(f"[runner] internal error: {exc}")
            code = INTERNAL
        finally:
            with self._lock:
                self._inflight.pop(call.name, None)
            # Audited before the client sees its exit code: whatever the agent saw is on record.
            self._record(item, code, started_at, start_s)
            call.finish(code)
            with self._lock:
                self._done.append((time.monotonic(), folder))

    def _dispatch(self, item: _InFlight) -> int:
        call = item.call
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
        )

    def _compute(self, item: _InFlight) -> int:
        call = item.call
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
        process = self.start_process(call.argv)
        with self._lock:
            item.process = process
            if self._closed:
                item.reason = item.reason or "the run is over"
        if item.reason:
            process.kill()
        pumps = [
            threading.Thread(target=self._pump, args=(item, s, p), daemon=True)
            for s, p in (("stdout", process.stdout), ("stderr", process.stderr))
            if p is not None
        ]
        for t in pumps:
            t.start()
        code = process.wait(timeout=limit)
        if code is None:
            per_call = limit >= self.clock.per_call_limit_s - 1e-6
            self._kill(
                item,
                f"killed: the call ran past the per-call limit of "
                f"{format_duration(self.clock.per_call_limit_s)}"
                if per_call
                else "killed: the run's deadline was reached",
            )
            code = process.wait(timeout=10)
        for t in pumps:
            t.join(timeout=10)
        with self._lock:
            self.runner_seconds += self.clock.elapsed() - started
        if item.reason and not item.reason.startswith("client gone"):
            with contextlib.suppress(ClientGone):
                call.say(f"[runner] {item.reason}")
            return KILLED
        return code if code is not None else KILLED

    def _pump(self, item: _InFlight, stream: str, pipe: IO[bytes]) -> None:
        """Forward one output pipe to the client as it comes; kill the call if it left."""
        read = getattr(pipe, "read1", pipe.read)
        while True:
            try:
                chunk = read(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            if item.call.gone:
                continue  # drain so the process is never blocked on a full pipe
            try:
                item.call.write(stream, chunk)
            except ClientGone:
                self._kill(item, "client gone: the runner client was interrupted")

    def _kill(self, item: _InFlight, reason: str) -> None:
        with self._lock:
            if item.reason is None:
                item.reason = reason
            process = item.process
        if process is not None:
            process.kill()

    def _cancel(self, name: str) -> None:
        with self._lock:
            item = self._inflight.get(name)
        if item is not None:
            self._kill(item, "client gone: cancelled by the agent (interrupt)")

    def _record(self, item: _InFlight, code: int, started_at: datetime, start_s: float) -> None:
        call = item.call
        self.audit.append(
            {
                "argv": call.argv,
                "start": started_at.isoformat(),
                "end": datetime.now(UTC).isoformat(),
                "start_s": round(start_s, 3),
                "end_s": round(self.clock.elapsed(), 3),
                "exit_code": code,
                "stdout_bytes": call.bytes["stdout"],
                "stdout_sha256": call.digest("stdout"),
                "stderr_bytes": call.bytes["stderr"],
                "stderr_sha256": call.digest("stderr"),
                "output_bytes": call.bytes["stdout"] + call.bytes["stderr"],
                "note": item.reason,
            }
        )
