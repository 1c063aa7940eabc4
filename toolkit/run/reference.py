"""Known-good references: is it the harness that broke, or the code it was running?

Sandboxed code can make its own sandbox fail: a bundle or a runner call that leaves hundreds of
children with tens of thousands of memory mappings each takes longer to tear down than any
bound, and a bundle that knows its own score (phase 2 shows each answer byte after its
prediction) would gladly turn a low one into a rerun. So a failure seen while such code ran is
never, by itself, an infrastructure failure: the harness repeats the same work with code of its
own, which nothing in the run can touch, in a fresh sandbox with the same backend and settings.

- `grading_reference`: grades `REFERENCE_INFERENCE` (a tiny built-in bundle: spaces for every
  answer, a uniform distribution for every byte; no torch) with the run's grader on the same
  exam, both phases;
- `runner_reference`: in a fresh runner sandbox (a new, empty root of the harness's), runs a
  trivial command and starts and kills another.

Each returns None when the reference went through (the failure was the run's own doing), else
why it did not (the harness is broken: the run is `invalid`).
"""

from __future__ import annotations

import shutil
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from toolkit.grading import secret_log
from toolkit.grading.grade import failure_name
from toolkit.run.submissions import Grader
from toolkit.sandbox import Sandbox

REFERENCE_INFERENCE = '''\
"""The harness's reference bundle: known to grade, whatever the exam."""


class Reference:
    def generate(self, prompts, lengths):
        return [b" " * n for n in lengths]

    def next_byte_logprobs(self, contexts):
        return [[-5.545177444479562] * 256 for _ in contexts]  # log(1/256)


def load(bundle_dir, device):
    return Reference()
'''
REFERENCE_COMMAND = ["sh", "-c", "echo reference-ok"]
REFERENCE_OUTPUT = b"reference-ok\n"
REFERENCE_TIMEOUT_S = 120.0


def write_reference_bundle(folder: Path) -> Path:
    """The reference bundle, written into `folder` (created); returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "inference.py").write_text(REFERENCE_INFERENCE, encoding="utf-8")
    return folder


def grading_reference(grader: Grader, exam: Path) -> str | None:
    """Grade the reference bundle as `grader` grades (backend, device, limits, hidden paths) on
    `exam`, in fresh sandboxes; None if it graded, else what went wrong."""
    with tempfile.TemporaryDirectory(prefix="ari-reference-") as tmp:
        bundle = write_reference_bundle(Path(tmp) / "bundle")
        try:
            report = grader.grade(bundle, exam, ("generate", "bpb"))
        except Exception as exc:  # a hidden grading: the type only, the traceback kept apart
            secret_log.record("the reference bundle's grading", traceback.format_exc())
            return f"the reference bundle's grading raised {failure_name(exc)}"
    if not report.ok:
        return f"the reference bundle failed grading: {report.reason}"
    if report.bits_per_byte is None:
        return f"the reference bundle got no bits per byte: {report.bpb_reason}"
    return None


def runner_reference(make_sandbox: Callable[[Path], Sandbox], root: Path) -> str | None:
    """In a fresh sandbox made by `make_sandbox(root)` (`root`: a new folder of the harness's,
    created here and removed after), run `REFERENCE_COMMAND`, then start a command, kill it
    and clean the sandbox up: None if all of it worked, else what went wrong."""
    root.mkdir(parents=True, exist_ok=False)
    try:
        box = make_sandbox(root)
        try:
            problem = _exercise(box)
        finally:
            box.cleanup()
        return problem
    except Exception:
        return "the reference check in a fresh sandbox raised: " + _last_lines(
            traceback.format_exc()
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _exercise(box: Sandbox) -> str | None:
    result = box.exec(REFERENCE_COMMAND, timeout=REFERENCE_TIMEOUT_S)
    if not result.ok or result.stdout != REFERENCE_OUTPUT:
        return (
            f"the reference command failed in a fresh sandbox: exit {result.returncode}, "
            f"timed out {result.timed_out}, output {result.stdout[:200]!r}"
        )
    process = box.start(["sleep", "600"], stdin=False, stdout=False, stderr=False)
    process.kill()
    if process.wait(timeout=REFERENCE_TIMEOUT_S) is None:
        return "a reference command could not be killed in a fresh sandbox"
    return None


def _last_lines(text: str, count: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-count:])
