"""Each test grades one bundle that misbehaves in one way; each must end as a graded result.

The bundles report what they managed to do through their own answers where possible ("N" when
an attack failed), so the test reads the outcome from the report itself.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest
from grading_helpers import ORACLE, MakeBundle, MakeExam, code_questions

from tests.host_scratch import scratch_base
from toolkit.grading import grade_bundle
from toolkit.tracks.model import GradingParams

# Every hostile bundle is graded on each backend, docker included (conftest).
pytestmark = pytest.mark.usefixtures("grading_backend")


def test_oracle_bundle_scores_100_and_uniform_bpb_is_8(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    questions = code_questions(6) + code_questions(3, family="records")
    report = grade_bundle(make_bundle(ORACLE), make_exam(questions), params=fast_params)
    assert report.ok and report.reason is None
    assert report.score.percent == 100.0 and report.score.total == 9
    assert report.families["records"].passed == 3
    assert report.bits_per_byte is not None and abs(report.bits_per_byte - 8.0) < 1e-5
    assert report.packed_bytes and report.sha256 and len(report.sha256) == 64
    assert report.timings.total >= report.timings.phase1 > 0


def test_phases_and_progress_callback(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    calls: list[tuple[str, int, int]] = []
    report = grade_bundle(
        make_bundle(ORACLE),
        make_exam(code_questions(6)),
        params=fast_params,
        phases=("generate",),
        progress=lambda name, done, total: calls.append((name, done, total)),
    )
    assert report.score.passed == 6 and report.bits_per_byte is None
    assert report.bpb_reason == "not measured: phase 2 was not requested"
    # The load is a step of its own (minutes on a busy CPU: never silent), then the questions.
    assert calls[:2] == [("phase 1: load the bundle", 0, 1), ("phase 1: load the bundle", 1, 1)]
    assert calls[2] == ("phase 1: generate", 0, 6) and calls[-1] == ("phase 1: generate", 6, 6)


def test_no_inference_py(make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path) -> None:
    bundle = make_bundle(ORACLE)
    (bundle / "inference.py").rename(bundle / "model.py")
    report = grade_bundle(bundle, make_exam(code_questions(2)), hidden=False)
    assert not report.ok and report.score.passed == 0
    assert "no inference.py" in (report.reason or "")


def test_import_error(make_bundle: MakeBundle, make_exam: MakeExam) -> None:
    report = grade_bundle(
        make_bundle("import no_such_module_xyz\n"), make_exam(code_questions(2)), hidden=False
    )
    assert not report.ok and report.score.passed == 0
    assert "load(): the bundle raised an error" in (report.reason or "")
    assert "no_such_module_xyz" in (report.reason or "")


def test_load_raises(make_bundle: MakeBundle, make_exam: MakeExam) -> None:
    source = "def load(bundle_dir, device):\n    raise RuntimeError('weights missing')\n"
    report = grade_bundle(make_bundle(source), make_exam(code_questions(2)), hidden=False)
    assert not report.ok and "RuntimeError: weights missing" in (report.reason or "")


def test_load_hang_is_killed_at_its_limit(make_bundle: MakeBundle, make_exam: MakeExam) -> None:
    source = "import time\ndef load(bundle_dir, device):\n    time.sleep(600)\n"
    params = GradingParams(load_timeout_s=2)
    started = time.monotonic()
    report = grade_bundle(
        make_bundle(source), make_exam(code_questions(2)), params=params, hidden=False
    )
    assert not report.ok and "load(): did not finish within 2 s" in (report.reason or "")
    assert time.monotonic() - started < 60


def test_crash_mid_generation_keeps_earlier_passes(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    source = ORACLE.replace(
        "        def generate(self, prompts, lengths):\n",
        "        calls = 0\n"
        "        def generate(self, prompts, lengths):\n"
        "            import os\n"
        "            Oracle.calls += 1\n"
        "            if Oracle.calls == 2:\n"
        "                os._exit(3)\n",
    )
    params = fast_params.model_copy(update={"batch_size": 2})
    report = grade_bundle(
        make_bundle(source), make_exam(code_questions(5)), params=params, hidden=False
    )
    assert not report.ok and "exited with status 3" in (report.reason or "")
    assert report.score.passed == 2  # the first batch, graded before the crash
    assert report.bits_per_byte is None and report.bpb_reason


def test_generation_hang_is_killed_at_the_batch_limit(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    source = """
        import os, time
        class M:
            def generate(self, prompts, lengths):
                if os.fork() == 0:  # a child that ignores SIGTERM must die too
                    import signal
                    signal.signal(signal.SIGTERM, signal.SIG_IGN)
                    os.setsid()
                time.sleep(600)
        def load(bundle_dir, device):
            return M()
    """
    params = GradingParams(batch_timeout_s=2)
    started = time.monotonic()
    work = tmp_path / "work"
    bundle, exam = make_bundle(source), make_exam(code_questions(2))
    report = grade_bundle(bundle, exam, params=params, workdir=work, hidden=False)
    assert not report.ok and "limit per batch" in (report.reason or "")
    assert time.monotonic() - started < 60
    assert _leftover_processes(work) == []


def test_wrong_length_and_type_fail_those_questions(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    source = """
        import re
        class M:
            def generate(self, prompts, lengths):
                out = []
                for i, (p, n) in enumerate(zip(prompts, lengths)):
                    answer = re.findall(rb"code is (\\w+)", p)[0]
                    out.append([answer.ljust(n), answer, answer.decode(), 7][i % 4])
                return out
        def load(bundle_dir, device):
            return M()
    """
    report = grade_bundle(
        make_bundle(source), make_exam(code_questions(4)), params=fast_params, hidden=False
    )
    assert report.ok and report.score.passed == 1
    assert any("expected" in p and "got" in p for p in report.problems)
    assert any("returned str" in p for p in report.problems)
    assert any("returned int" in p for p in report.problems)
    assert "3 outputs of the wrong length or type" in (report.reason or "")


def test_generate_returning_wrong_count_is_a_graded_failure(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    source = """
        class M:
            def generate(self, prompts, lengths):
                return b"not a list"
        def load(bundle_dir, device):
            return M()
    """
    report = grade_bundle(
        make_bundle(source), make_exam(code_questions(2)), params=fast_params, hidden=False
    )
    assert not report.ok and "generate() returned bytes" in (report.reason or "")


def test_garbage_on_stdout_and_stderr_does_not_corrupt_grading(
    make_bundle: MakeBundle, make_exam: MakeExam, fast_params: GradingParams
) -> None:
    noisy = ORACLE.replace(
        "        def generate(self, prompts, lengths):\n",
        "        def generate(self, prompts, lengths):\n"
        "            import os, subprocess, sys\n"
        "            print('ARIG' * 1000)\n"
        "            sys.stdout.write('\\x00garbage' * 10000)\n"
        "            sys.stdout.flush()\n"
        "            os.write(1, b'ARIG\\x00\\x00\\x00\\x10{}' * 1000)\n"
        "            os.write(2, b'\\xff' * 200000)\n"
        "            subprocess.run(['echo', 'from a child'])\n",
    )
    report = grade_bundle(make_bundle(noisy), make_exam(code_questions(6)), params=fast_params)
    assert report.ok and report.reason is None
    assert report.score.percent == 100.0
    assert report.bits_per_byte is not None


def _answers_n_if(*checks: str) -> str:
    """A bundle answering 'N' to every question unless one of `checks` (Python expressions,
    each tried on its own) succeeds with a true value."""
    return f"""
        import os, socket
        def attempt(check):
            try:
                return bool(eval(check))
            except Exception:
                return False
        class M:
            def generate(self, prompts, lengths):
                flag = b"Y" if any(attempt(c) for c in {list(checks)!r}) else b"N"
                return [flag * n for n in lengths]
        def load(bundle_dir, device):
            return M()
    """


def _flag_exam(make_exam: MakeExam) -> Path:
    return make_exam([{"id": "q1", "family": "probe", "prompt": "Did it work? ", "answer": "N"}])


def test_network_connection_fails_and_isolation_is_recorded(
    make_bundle: MakeBundle, make_exam: MakeExam
) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    checks = (
        f"socket.create_connection(('127.0.0.1', {port}), timeout=3)",
        "socket.create_connection(('1.1.1.1', 53), timeout=3)",
    )
    try:
        report = grade_bundle(make_bundle(_answers_n_if(*checks)), _flag_exam(make_exam))
    finally:
        server.close()
    assert "netns" in report.isolation, report.not_isolated
    assert report.score.passed == 1, "the bundle reached the network"


def test_exam_and_host_files_are_not_readable(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    exam = _flag_exam(make_exam)
    secret = tmp_path / "host-secret.txt"
    secret.write_text("token")
    secret.chmod(0o600)
    home_secret = Path.home() / ".ari-grading-test-secret"
    # World-readable and outside /tmp (which the sandbox replaces anyway): hidden only because
    # it is passed in `hide`. `.ari/` is the repository's git-ignored state folder.
    bank = Path(tempfile.mkdtemp(prefix="hide-test-", dir=_visible_scratch()))
    bank.chmod(0o755)
    (bank / "seed.txt").write_text("42")
    (bank / "seed.txt").chmod(0o644)
    checks = (
        f"open({str(exam)!r}).read()",
        f"os.listdir({str(exam.parent)!r})",
        f"open({str(secret)!r}).read()",
        f"open({str(home_secret)!r}).read()",
        f"open({str(bank / 'seed.txt')!r}).read()",
    )
    home_secret.write_text("token")
    try:
        report = grade_bundle(make_bundle(_answers_n_if(*checks)), exam, hide=[bank])
    finally:
        home_secret.unlink()
        shutil.rmtree(bank)
    assert "hidden-paths" in report.isolation
    assert report.score.passed == 1, "the bundle could read the exam or a host file"


def _visible_scratch() -> Path:
    scratch = scratch_base() / "test-scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch


def _leftover_processes(root: Path) -> list[int]:
    """Host pids whose working directory is inside `root`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")).is_relative_to(root):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_fork_bomb_is_contained(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    source = """
        import os, time
        class M:
            def generate(self, prompts, lengths):
                made = 0
                for _ in range(1500):  # bounded, so a host without limits survives the test
                    try:
                        if os.fork() == 0:
                            time.sleep(120)
                            os._exit(0)
                        made += 1
                    except OSError:
                        break
                return [(b"N" if made < 1500 else b"Y") * n for n in lengths]
        def load(bundle_dir, device):
            return M()
    """
    work = tmp_path / "work"
    params = GradingParams(batch_timeout_s=60)
    report = grade_bundle(make_bundle(source), _flag_exam(make_exam), params=params, workdir=work)
    assert _leftover_processes(work) == []
    if "cgroup-pids" not in report.isolation and "uid:own" not in report.isolation:
        pytest.skip(
            "this host cannot cap the process count (no pids cgroup, no uid drop): the forks "
            "were only killed at the end, which the line above checked"
        )
    assert report.score.passed == 1, "the bundle forked 1500 processes"


def test_memory_hog_is_contained(make_bundle: MakeBundle, make_exam: MakeExam) -> None:
    source = """
        class M:
            def generate(self, prompts, lengths):
                hog = []
                for _ in range(64):  # 4 GiB, far above the limit
                    hog.append(bytearray(64 * 2**20))
                return [b"Y" * n for n in lengths]
        def load(bundle_dir, device):
            return M()
    """
    params = GradingParams(memory_bytes=512 * 2**20, batch_timeout_s=60)
    report = grade_bundle(make_bundle(source), _flag_exam(make_exam), params=params, hidden=False)
    assert not report.ok and report.score.passed == 0
    assert "MemoryError" in (report.reason or "") or "memory" in (report.reason or "")
