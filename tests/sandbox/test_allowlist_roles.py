"""Every role of a run, on the local backend, against a bank kept beside the exam (issue 17.5).

The operator keeps the run's exam in /opt/ari-secret-*/exams/e and the bank it came from beside
it in /opt/ari-secret-*/banks/b (more copies under /srv and /var/lib), and names neither folder
to the run (the CLI never passed `bank_dirs`). The agent then tries everything: its controller
lists and reads those folders, a `runner` call does the same, a bundle reports what it sees
during public scoring (its load() error comes back to the agent), and the promoted bundle
answers the final exam from any copy it can read. Nothing may come out, and the final score
must be what a bundle that knows nothing gets.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.conftest import (  # noqa: F401  (fixtures, used by name)
    ShellAgent,
    SpecFactory,
    demo_track,
    make_spec,
    small_text,
    starter,
)
from toolkit.run.inputs import DEMO_BANK, built_exam
from toolkit.run.orchestrate import execute_run
from toolkit.run.recovery import runs_root

DOCKER_BACKEND = True  # its docker case runs too (tests/sandbox/conftest.py)

# A bundle that answers from every bank or exam it can read (exact prompts), else blanks.
ANSWERER = """
import json, os

CANDIDATES = __CANDIDATES__


def _known():
    known = {}
    for path in CANDIDATES:
        try:
            with open(path) as f:
                for line in f:
                    item = json.loads(line)
                    known[item["prompt"]] = item["answer"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return known


class Model:
    def __init__(self):
        self.known = _known()

    def generate(self, prompts, lengths):
        out = []
        for prompt, n in zip(prompts, lengths):
            text = prompt.decode() if isinstance(prompt, bytes) else prompt
            answer = self.known.get(text)
            out.append(answer.encode()[:n] if answer is not None else b" " * n)
        return out


def load(bundle_dir, device):
    return Model()
"""

# A bundle whose load() fails with what it saw: the one text of public scoring the agent reads.
PROBE = """
import os

FOLDERS = __FOLDERS__
FILES = __FILES__


def load(bundle_dir, device):
    seen = []
    for folder in FOLDERS:
        try:
            seen += os.listdir(folder)
        except OSError:
            pass
    for path in FILES:
        try:
            with open(path) as f:
                seen.append(f.read(200))
        except OSError:
            pass
    raise RuntimeError("PROBE-SAW[" + "|".join(seen) + "]")
"""


@pytest.fixture
def hoard() -> Iterator[tuple[Path, list[Path], list[Path]]]:
    """(the run's exam, the folders around it, the bank copies): under /opt, /srv, /var/lib,
    world-readable, none of them named to the run. Removed afterwards."""
    tag = f"ari-secret-{uuid.uuid4().hex[:10]}"
    tops = [Path(base) / tag for base in ("/opt", "/srv", "/var/lib")]
    source = built_exam(DEMO_BANK, "demo")
    banks: list[Path] = []
    try:
        for top in tops:
            top.parent.mkdir(exist_ok=True)
            bank = top / "banks" / "b" / "bank.jsonl"
            bank.parent.mkdir(parents=True)
            shutil.copy(source, bank)  # the bank holds every question of the exam
            banks.append(bank)
        exam = tops[0] / "exams" / "e" / "exam.jsonl"
        exam.parent.mkdir(parents=True)
        shutil.copy(source, exam)
        for top in tops:
            for path in [top, *top.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)
        folders = [*tops, *(b.parent for b in banks), *(b.parent.parent for b in banks)]
        yield exam, folders, banks
    finally:
        for top in tops:
            shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_no_role_reads_a_bank_kept_beside_the_exam(
    backend: str,
    make_spec: SpecFactory,  # noqa: F811  (the fixture imported above)
    hoard: tuple[Path, list[Path], list[Path]],
    request: pytest.FixtureRequest,
) -> None:
    if backend == "docker":
        request.getfixturevalue("docker_engine")  # a real engine, or skip (fail in CI)
    exam, folders, banks = hoard
    files = [*banks, exam]
    snoop = " ".join(
        [f"ls -la {f} 2>/dev/null;" for f in folders] + [f"cat {f} 2>/dev/null;" for f in files]
    )
    probe = PROBE.replace("__FOLDERS__", repr([str(f) for f in folders]))
    probe = probe.replace("__FILES__", repr([str(f) for f in files]))
    answerer = ANSWERER.replace("__CANDIDATES__", repr([str(f) for f in files]))
    script = f"""mkdir -p bundles/probe bundles/ans loot
cat > bundles/probe/inference.py <<'PYEOF'
{probe}
PYEOF
cat > bundles/ans/inference.py <<'PYEOF'
{answerer}
PYEOF
( {snoop} ) > loot/controller.txt 2>&1
runner sh -c '{snoop}' > loot/runner.txt 2>&1
runner submit bundles/probe > loot/submit.txt 2>&1
runner submit bundles/ans > loot/ans.txt 2>&1
id=$(grep -o 'c[0-9][0-9]*' loot/ans.txt | head -1)
runner promote "$id" > loot/promote.txt 2>&1
"""
    spec = make_spec(
        ShellAgent(script), budget=120, per_call=60, reserved=20, exam=exam, backend=backend
    )
    # The loot is read after the run: no size cap, whose filesystem (and files) go with it.
    spec.track = spec.track.model_copy(update={"workspace_disk_bytes": None})
    result = execute_run(spec)
    loot = runs_root() / result.run_id / "workspace" / "loot"
    texts = {p.name: p.read_text(errors="replace") for p in loot.iterdir()}
    assert "PROBE-SAW[]" in texts["submit.txt"], texts["submit.txt"][-2000:]
    marks = [line[-60:] for line in exam.read_text().splitlines()[:5]]
    for name, text in texts.items():
        assert all(m not in text for m in marks), f"{name} holds the exam: {text[-1000:]}"
        assert "bank.jsonl" not in text and "exams" not in text, f"{name}: {text[-1000:]}"
    assert result.status == "valid", (result.status_reason, texts)
    # The final grading: the promoted bundle found no copy of the exam to answer from.
    assert result.score.total == 100 and result.score.passed == 0
