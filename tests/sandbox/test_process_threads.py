"""A local sandbox process used from two threads at once, as a run uses it.

A `runner` call's thread waits on its process while the run's teardown cleans the sandbox
(killing that process from another thread). Both used to close the process's status pipe and
pidfd: the waiting thread then failed with EBADF ("runner error: Bad file descriptor" in the
audit log instead of the call's real outcome), and a descriptor closed twice closed whatever
file had taken its number meanwhile, in any thread: another call's FIFO, another process's
status pipe. A stress test: a few hundred rounds in a few seconds.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.bystander import Bystander
from toolkit.sandbox import SandboxProcess, create_sandbox
from toolkit.sandbox.local.process import LocalProcess

ROUNDS = 150


def test_a_process_waited_on_while_another_thread_kills_it(tmp_path: Path) -> None:
    bystander = Bystander()
    errors: list[str] = []
    codes: list[int | None] = []
    with create_sandbox("local", root=tmp_path) as box:
        for _ in range(ROUNDS):
            process = box.start(["sleep", "60"], stdin=False)
            assert isinstance(process, LocalProcess)

            def wait(process: SandboxProcess = process) -> None:
                try:
                    while (code := process.wait(0.001)) is None:
                        pass
                    process.kill()  # as a call's thread does once it is told to stop
                    codes.append(code)
                except Exception as exc:
                    errors.append(repr(exc))

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.002)
            try:
                process.release()  # what the sandbox's cleanup does to every process
            except Exception as exc:
                errors.append(f"release: {exc!r}")
            waiter.join(timeout=30)
            assert not waiter.is_alive(), "the waiting thread hung"
    assert errors == []
    assert bystander.stop() == 0  # no descriptor of another thread was closed under it
    assert len(codes) == ROUNDS and all(code is not None and code < 0 for code in codes)


def test_many_threads_wait_on_one_process(tmp_path: Path) -> None:
    """Every waiter sees the one exit status (the status pipe's chunks go to one reader)."""
    with create_sandbox("local", root=tmp_path) as box:
        for _ in range(20):
            process = box.start(["sh", "-c", "sleep 0.05; exit 7"], stdin=False)
            seen: list[int | None] = []
            threads = [
                threading.Thread(target=lambda p=process, s=seen: s.append(p.wait(30)))
                for _ in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=30)
            assert seen == [7, 7, 7, 7]
