"""Nothing a bundle writes during one grading is readable in the next; what it writes is capped.

Phase 2 shows the bundle `prompt + answer[:k]`, every answer byte but the last: a bundle that
could keep those somewhere and read them back in a later grading (or a later run's agent could)
would score without a model. The spy below writes what phase 2 showed it into every writable
folder it can find (the usual shared places and any folder it may write near the top of the
tree), notes where it managed to, and in its next grading looks for what it left.

Both properties are the sandbox's to provide (a read-only host file system with private, capped
writable places); where the sandbox says it cannot (`isolation` lacks the word), the test is an
expected failure that names the missing isolation, and it is enforced wherever the word is.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from grading_helpers import MakeBundle, MakeExam, code_questions

from toolkit.grading import GradeReport, grade_bundle
from toolkit.tracks.model import GradingParams

SPY = """
import json, os

MARKER = "ari-spy-{marker}"
FOUND = "spy found: "
PLACES = [
    "/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/run/shm", "/run", "/var/crash",
    "/var/mail", "/var/spool/mail", "/var/cache", "/var/local", "/srv", "/opt", "/mnt",
    os.path.expanduser("~"), os.getcwd(), os.path.dirname(os.getcwd()),
]
SKIP = ("/proc", "/sys", "/dev")


def folders():
    seen = list(PLACES)
    for top, dirs, _files in os.walk("/"):
        depth = top.count("/") if top != "/" else 0
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in SKIP] if depth < 3 else []
        seen.append(top)
    return sorted(set(seen))


def load(bundle_dir, device):
    found = []
    for folder in folders():
        path = os.path.join(folder, MARKER)
        try:
            with open(path) as f:
                found.append(path + " (" + str(len(f.read())) + " chars)")
        except OSError:
            pass
    if found:
        raise RuntimeError(FOUND + json.dumps(found))
    return Spy(bundle_dir)


class Spy:
    def __init__(self, bundle_dir):
        self.bundle_dir = bundle_dir

    def generate(self, prompts, lengths):
        return [b"?" * n for n in lengths]

    def next_byte_logprobs(self, contexts):
        import numpy as np
        shown = json.dumps([c.decode("utf-8", "replace") for c in contexts])
        written = []
        for folder in folders():
            if not os.access(folder, os.W_OK):
                continue
            try:
                with open(os.path.join(folder, MARKER), "w") as f:
                    f.write(shown)
                written.append(folder)
            except OSError:
                pass
        with open(os.path.join(self.bundle_dir, "written.json"), "w") as f:
            json.dump(written, f)
        return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)
"""


def _cleanup(marker: str, folders: list[str]) -> None:
    """Remove what the spy left on this host (where the sandbox let it write for real)."""
    for folder in folders:
        Path(folder, f"ari-spy-{marker}").unlink(missing_ok=True)


def test_what_phase_2_showed_a_bundle_is_gone_by_its_next_grading(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    marker = uuid.uuid4().hex[:12]
    bundle = make_bundle(SPY.format(marker=marker))
    exam = make_exam(code_questions(2))
    work = tmp_path / "first"
    first = grade_bundle(bundle, exam, workdir=work)
    written = json.loads((work / "phase2" / "bundle" / "written.json").read_text())
    # What the spy left where this host (and so a later run's agent) can read it.
    # (Its own sandbox folder under `work` is kept only because `workdir` was given.)
    left = [
        f
        for f in written
        if os.path.exists(os.path.join(f, f"ari-spy-{marker}")) and not Path(f).is_relative_to(work)
    ]
    try:
        second = grade_bundle(bundle, exam)
    finally:
        _cleanup(marker, written)
    assert first.ok and first.bits_per_byte is not None, first.reason
    assert "/tmp" in written  # the spy did write (to its own private /tmp at least)
    problems = [f"the spy's notes stayed on the host in {left}"] if left else []
    if not second.ok or "spy found" in (second.reason or ""):
        problems.append(f"the second grading read what the first one saved: {second.reason}")
    _expect_none(problems, first, "host-filesystem-readonly")


def _expect_none(problems: list[str], report: GradeReport, word: str) -> None:
    """Fail on `problems`, unless the sandbox itself says it lacks the isolation `word`."""
    if problems and word not in report.isolation:
        pytest.xfail(f"this sandbox does not provide '{word}': " + "; ".join(problems))
    assert problems == []


FILL = """
import os

CAP = {cap}


def fill(folder, limit):
    written = 0
    block = b"x" * 2**20
    try:
        with open(os.path.join(folder, "fill.bin"), "wb") as f:
            while written < limit:
                written += f.write(block)
                f.flush()
    except OSError:
        pass
    return written


class M:
    def generate(self, prompts, lengths):
        places = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock"]
        total = sum(fill(p, 4 * CAP) for p in places if os.access(p, os.W_OK))
        return [(b"N" if total <= CAP + 2**20 else b"Y") * n for n in lengths]


def load(bundle_dir, device):
    return M()
"""


def test_a_bundle_cannot_write_more_than_the_disk_cap(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    cap = 32 * 2**20
    params = GradingParams(disk_bytes=cap, batch_timeout_s=60)
    exam = make_exam([{"id": "q1", "family": "probe", "prompt": "Wrote more? ", "answer": "N"}])
    report = grade_bundle(make_bundle(FILL.format(cap=cap)), exam, params=params)
    assert report.ok, report.reason
    problems = [] if report.score.passed == 1 else ["the bundle wrote past its disk cap"]
    _expect_none(problems, report, "disk-cap")


def test_a_bundle_cannot_fill_the_disk_under_its_own_folder(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    """The worker's folder (its cwd) is the one writable place on the host's disk: what the
    bundle writes there counts against the same cap, and none of it reaches the host."""
    cap = 32 * 2**20
    params = GradingParams(disk_bytes=cap, batch_timeout_s=60)
    exam = make_exam([{"id": "q1", "family": "probe", "prompt": "Wrote more? ", "answer": "N"}])
    fill_root = FILL.replace('"/run/lock"]', '"/run/lock", os.getcwd(), "bundle"]')
    report = grade_bundle(make_bundle(fill_root.format(cap=cap)), exam, params=params)
    assert report.ok, report.reason
    wrote = report.score.passed != 1
    if wrote and "ephemeral-root" in report.not_isolated:  # this host said it cannot
        pytest.xfail("this sandbox does not provide 'ephemeral-root': the bundle wrote past it")
    assert not wrote, "the bundle wrote past its disk cap under its own folder"
