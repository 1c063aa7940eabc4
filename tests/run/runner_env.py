"""A runner service in a temporary workspace, for tests that talk to it as the agent would.

Real parts throughout: the shell client, the FIFO channel, the service, the local runner
sandbox, and (when asked) the submission handlers with real grading on the public set.
`RawClient` speaks the channel protocol by hand, so tests can send what the shell client never
would (bad argument files, one FIFO, a link in place of a folder).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.clock import Clock
from toolkit.results.chain import ChainedLog, read_chain
from toolkit.run.history import SubmissionHistory
from toolkit.run.inputs import public_set
from toolkit.run.submissions import Grader, Submissions
from toolkit.runner.channel import make_channel
from toolkit.runner.client import CALLS, REQUESTS, install_client
from toolkit.runner.service import Handler, RunnerService
from toolkit.sandbox import Sandbox, create_sandbox
from toolkit.tracks.model import GradingParams


@dataclass
class Env:
    workspace: Path
    channel: Path
    client: Path
    service: RunnerService
    audit: Path
    box: Sandbox  # the runner sandbox the calls run in

    def call(self, *argv: str | bytes, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.client), *argv],
            cwd=self.workspace,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=timeout,
        )

    def call_bytes(
        self, *argv: str | bytes, timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(self.client), *argv], cwd=self.workspace, capture_output=True, timeout=timeout
        )

    def entries(self) -> list[dict[str, Any]]:
        return read_chain(self.audit)

    def wait_entries(self, count: int, timeout: float = 20) -> list[dict[str, Any]]:
        """The audit entries, once there are at least `count` (fails after `timeout` s)."""
        deadline = time.monotonic() + timeout
        while True:
            entries = self.entries()
            if len(entries) >= count or time.monotonic() > deadline:
                assert len(entries) >= count, f"{len(entries)} audit entries, expected {count}"
                return entries
            time.sleep(0.05)

    def raw(self, name: str) -> RawClient:
        return RawClient(self.channel, name)


def make_env(
    tmp_path: Path,
    clock: Clock,
    *,
    handlers: dict[str, Handler] | None = None,
    submissions: bool = True,
    grace_s: float | None = None,
) -> Iterator[Env]:
    ws = tmp_path / "ws"
    (ws / "bundles").mkdir(parents=True)
    channel = ws / ".runner"
    make_channel(channel)
    client = install_client(channel / "bin", channel)
    box = create_sandbox("local", root=ws, hide=[channel], env={"PYTHONUNBUFFERED": "1"})
    all_handlers: dict[str, Handler] = {}
    if submissions:
        all_handlers |= Submissions(
            workspace=ws,
            store=tmp_path / "candidates",
            history=SubmissionHistory(tmp_path / "history.jsonl"),
            clock=clock,
            grader=Grader(
                params=GradingParams(load_timeout_s=60, batch_timeout_s=60, total_timeout_s=120),
                size_limit_bytes=16_000_000,
                backend="local",
                device="cpu",
            ),
            public_set=public_set(),
        ).handlers()
    all_handlers |= handlers or {}
    service = RunnerService(
        channel=channel,
        clock=clock,
        audit=ChainedLog(tmp_path / "audit.jsonl"),
        start_process=lambda argv: box.start(argv, stdin=False),
        handlers=all_handlers,
    )
    if grace_s is not None:
        service.grace_s = grace_s
    service.start()
    try:
        yield Env(ws, channel, client, service, tmp_path / "audit.jsonl", box)
    finally:
        service.stop()
        box.cleanup()


def _read_to_eof(path: Path, timeout: float, out: dict[str, bytes | None]) -> threading.Thread:
    def work() -> None:
        try:
            with open(path, "rb") as f:  # blocks until the harness opens its end
                out[path.name] = f.read()
        except OSError:
            out[path.name] = None

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


class RawClient:
    """One call made by hand: the folder, its files, the request line, the replies."""

    def __init__(self, channel: Path, name: str) -> None:
        self.channel = channel
        self.name = name
        self.folder = channel / CALLS / name

    def make(self, argv: bytes | None, fifos: tuple[str, ...] = ("out", "err")) -> RawClient:
        self.folder.mkdir()
        if argv is not None:
            (self.folder / "argv").write_bytes(argv)
        for fifo in fifos:
            os.mkfifo(self.folder / fifo)
        return self

    def send(self, line: bytes | None = None) -> None:
        """Write the request line (the call's name unless given) into the requests FIFO."""
        fd = os.open(self.channel / REQUESTS, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, (line if line is not None else self.name.encode()) + b"\n")
        finally:
            os.close(fd)

    def replies(
        self, streams: tuple[str, ...] = ("err", "out"), timeout: float = 20
    ) -> dict[str, bytes | None]:
        """Read the given FIFOs to their end, concurrently, as the shell client does; a stream
        still open after `timeout` s reads as None (the client would have hung)."""
        got: dict[str, bytes | None] = {}
        threads = [_read_to_eof(self.folder / s, timeout, got) for s in streams]
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for stream, thread in zip(streams, threads, strict=True):
            if thread.is_alive():  # release the blocked open or read, and report a hang
                got[stream] = None
                with contextlib.suppress(OSError):
                    os.close(os.open(self.folder / stream, os.O_WRONLY | os.O_NONBLOCK))
        return got

    def rc(self) -> int | None:
        try:
            return int((self.folder / "rc").read_text())
        except (OSError, ValueError):
            return None
