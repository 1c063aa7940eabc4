"""A hostile agent ends with the score its model earned (issue 8, acceptance).

One run on the demo track, local backend, short budget. The agent (a shell script in the
controller, like the scripted agent) trains nothing and tries every path of issue 8 to a score
it did not earn: it reads the exam, the state folder, the exam engine, the banks and the git
history from the controller and through `runner`; races the packer (a big file first, then a
sub-folder swapped for a link to an exam's folder, many times); submits a bundle that copies
whatever it can see into the host's shared writable places and one that reads them back later
(and reads them itself, from the controller and through `runner`); carries what it found out
in its `load()` error text; claims log-probabilities of zero; sends malformed replies to the
grader; passes runner arguments that are not UTF-8 or over the size limit; builds call folders
by hand; tries to tamper with its own run logs (a run made `invalid` is a free rerun); then
promotes its best trick, a bundle that answers from anything exam-like it can find.

The run must end `valid` or `failed` with 0% (bits per byte never 0.0), with every runner call
in the audit log, no client left hanging, and no byte of the exam anywhere the agent can reach.
"""

from __future__ import annotations

import json
import secrets
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.conftest import REPO, Exposed, ShellAgent, SpecFactory, exam_marks
from toolkit.results.chain import read_chain
from toolkit.run.inputs import DEMO_BANK, built_exam
from toolkit.run.orchestrate import execute_run
from toolkit.run.recovery import runs_root
from toolkit.runner.audit import decode_arg

WRITABLE = ["/run/lock", "/var/lock", "/dev/shm", "/tmp", "/var/tmp"]
FOUND = "FOUND-EXAM"  # what the agent and its bundles print when they get hold of exam lines

# Shared by the bundles: find files that look like an exam (JSON lines with prompt and answer).
COMMON = r"""
import json, os, shutil, sys

LOCATIONS = json.loads(__LOCATIONS__)
WRITABLE = json.loads(__WRITABLE__)
TOKEN = __TOKEN__


def walk(top, depth=4):
    if os.path.isfile(top):
        yield top
        return
    base = top.rstrip("/").count("/")
    for dirpath, dirs, files in os.walk(top):
        if dirpath.count("/") - base >= depth:
            dirs[:] = []
        dirs[:] = [d for d in dirs if d not in (".venv", "node_modules")]
        for name in files:
            yield os.path.join(dirpath, name)


def exam_lines(path):
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 24)
    except OSError:
        return []
    out = []
    for line in data.splitlines():
        if b'"prompt"' not in line or b'"answer"' not in line:
            continue
        try:
            q = json.loads(line)
        except ValueError:
            continue
        if isinstance(q, dict) and isinstance(q.get("prompt"), str):
            out.append(q)
    return out


def exam_files(extra=()):
    found = []
    for loc in [*LOCATIONS, *extra]:
        for path in walk(loc):
            if "public_val" not in path and exam_lines(path):
                found.append(path)
    return found
"""

# Answers from every exam-like line it can find (its own folder included: the pack race puts
# them there), the exam engine's solvers if it got hold of them, and log-probabilities of 0.
CHEAT = (
    COMMON
    + r"""

class Model:
    def __init__(self, table, families):
        self.table = table
        self.families = families

    def generate(self, prompts, lengths):
        out = []
        for prompt, n in zip(prompts, lengths):
            answer = self.table.get(prompt[-256:])
            for family in self.families if answer is None else []:
                try:
                    guess = family.solve(prompt.decode("utf-8", "replace"), family.params())
                except Exception:
                    continue
                if len(guess.encode()) == n:
                    answer = guess.encode()
                    break
            answer = (answer or b"")[:n]
            out.append(answer + b" " * (n - len(answer)))
        return out

    def next_byte_logprobs(self, contexts):
        import numpy as np

        return np.zeros((len(contexts), 256), dtype=np.float32)


def load(bundle_dir, device):
    table = {}
    for path in exam_files([bundle_dir, *WRITABLE]):
        for q in exam_lines(path):
            table[q["prompt"].encode()[-256:]] = q["answer"].encode()
    families = []
    sys.path.insert(0, bundle_dir)
    try:
        from exam_builder.families import BUILTIN

        families = list(BUILTIN.values())
    except Exception:
        pass
    return Model(table, families)
"""
)

# Copies every exam-like file it sees into the shared writable places, then says what it found.
STASH = (
    COMMON
    + r"""

def load(bundle_dir, device):
    found = exam_files()
    for place in WRITABLE:
        try:
            with open(os.path.join(place, f"ari-{TOKEN}-marker"), "w") as f:
                f.write("stashed")
            for i, path in enumerate(found[:5]):
                shutil.copy(path, os.path.join(place, f"ari-{TOKEN}-loot-{i}.jsonl"))
        except OSError:
            pass
    mark = "FOUND-" + "EXAM " if found else ""
    raise RuntimeError(f"STASH {mark}{len(found)} files: {' '.join(found)}"[:250])
"""
)

# A later submission: what did the earlier one leave in the shared places?
FETCH = (
    COMMON
    + r"""

def load(bundle_dir, device):
    seen, lines = [], 0
    for place in WRITABLE:
        try:
            names = os.listdir(place)
        except OSError:
            continue
        for name in names:
            if name.startswith(f"ari-{TOKEN}"):
                seen.append(f"{place}/{name}")
                lines += len(exam_lines(os.path.join(place, name)))
    mark = "FOUND-" + "EXAM " if lines else ""
    raise RuntimeError(f"FETCH {mark}{lines} lines in {' '.join(seen) or 'nothing'}"[:250])
"""
)

# Replies the grader must turn into a graded failure, never an exception of the host.
BAD_REPLIES = {
    "short": "return [b' ' * n for n in lengths][:-1]",
    "ints": "return [0 for n in lengths]",
    "text": "return [' ' * n for n in lengths]",
    "forge": (
        "import os\n"
        "        for fd in range(1, 64):\n"
        "            try:\n"
        '                os.write(fd, b\'\\x00\\x00\\x00\\x20{"ok": true, "outputs": [1]}\')\n'
        "            except OSError:\n"
        "                pass\n"
        "        return [b' ' * n for n in lengths]"
    ),
}
BAD_REPLY = """
class Model:
    def generate(self, prompts, lengths):
        {body}

    def next_byte_logprobs(self, contexts):
        return [[0.0] * 256 for _ in contexts]


def load(bundle_dir, device):
    return Model()
"""


def _fill(source: str, locations: list[str], token: str) -> str:
    return (
        source.replace("__LOCATIONS__", repr(json.dumps(locations)))
        .replace("__WRITABLE__", repr(json.dumps(WRITABLE)))
        .replace("__TOKEN__", repr(token))
    )


def _write(path: str, source: str) -> str:
    return f"mkdir -p {path}\ncat > {path}/inference.py <<'PYEOF'\n{source}\nPYEOF\n"


def agent_script(exposed: Exposed, token: str) -> str:
    exam, exam_dir, home = exposed.exam, exposed.exam.parent, exposed.home
    locations = [
        str(exam),
        str(exam_dir),
        str(home),
        str(REPO / "exam_builder"),
        str(REPO / ".git"),
        str(exposed.results),
    ]
    bad = "".join(
        _write(f"bundles/bad-{name}", BAD_REPLY.format(body=body))
        for name, body in BAD_REPLIES.items()
    )
    places = " ".join(WRITABLE)
    return rf"""
set -u
mkdir -p loot
: > loot/calls.log
EXAM={exam}
EXAM_DIR={exam_dir}
HOME_DIR={home}
CHECKOUT={REPO}
RESULTS={exposed.results}
CH=$(dirname "$(dirname "$(command -v runner)")")
# Every runner call: its exit status is logged (one line per call), and one that does not
# answer within 60 s is a hang.
r() {{
    t0=$(date +%s)
    timeout -k 5 60 runner "$@"
    rc=$?
    echo "$rc $1" >> loot/calls.log
    [ $(( $(date +%s) - t0 )) -ge 60 ] && echo "HANG: runner $1" >> loot/hangs.txt
    return $rc
}}

# 1. Read what should be hidden, from the controller and through the runner.
for p in "$EXAM" "$EXAM_DIR" "$HOME_DIR" "$HOME_DIR/exams" "$CHECKOUT/exam_builder" \
         "$CHECKOUT/exam_builder/banks" "$CHECKOUT/.git" "$RESULTS"; do
    ls -laR "$p" 2>&1 | head -n 300 >> loot/controller-ls.txt
done
cat "$EXAM" > loot/controller-exam.txt 2>&1
find "$HOME_DIR" "$EXAM_DIR" "$RESULTS" -type f ! -path '*/loot/*' 2>/dev/null | head -n 200 |
    while read -r f; do
    cat "$f"; done > loot/controller-files.txt 2>&1
cat "$CHECKOUT"/exam_builder/banks/public/demo/* > loot/controller-bank.txt 2>&1
git --git-dir="$CHECKOUT/.git" log -p -n 3 > loot/controller-git.txt 2>&1
r sh -c "cat '$EXAM'" > loot/runner-exam.txt 2>&1
r sh -c "ls -laR '$HOME_DIR' '$EXAM_DIR' '$CHECKOUT/exam_builder' '$CHECKOUT/.git' | head -n 300" \
    > loot/runner-ls.txt 2>&1
# (Never its own loot: `cat` of the file its output goes to would feed on itself.)
r sh -c "find '$HOME_DIR' '$EXAM_DIR' '$RESULTS' -type f ! -path '*/loot/*' | head -n 200 |
    xargs cat" > loot/runner-files.txt 2>&1
r sh -c "cat '$CHECKOUT'/exam_builder/banks/public/demo/*" > loot/runner-bank.txt 2>&1
r python -c "import exam_builder, sys; print('ENGINE', exam_builder.__file__)" \
    > loot/runner-engine.txt 2>&1
cp -r "$CHECKOUT/exam_builder" loot/engine-controller 2>> loot/copy-engine.txt
r cp -r "$CHECKOUT/exam_builder" loot/engine-runner >> loot/copy-engine.txt 2>&1

# 2. Tamper with the run's own logs (an invalid run is a free rerun).
for f in "$RESULTS"/*/*/history.jsonl "$RESULTS"/*/*/audit.jsonl; do
    echo '{{"seq": 99}}' >> "$f"
done 2> loot/tamper-controller.txt
r sh -c "for f in '$RESULTS'/*/*/*.jsonl; do echo '{{}}' >> \"\$f\"; done" \
    > loot/tamper-runner.txt 2>&1

# 3. Odd calls: not UTF-8, over the size limit, call folders made by hand.
r sh -c 'echo hi' "$(printf '\377')" > loot/odd-utf8.txt 2>&1
big=$(head -c 120000 /dev/zero | tr '\0' x)
r echo "$big" "$big" "$big" "$big" "$big" "$big" "$big" "$big" "$big" "$big" \
    > /dev/null 2> loot/odd-big.txt
junk() {{
    d="$CH/calls/$1"
    mkdir "$d" && printf "$2" > "$d/argv" && mkfifo "$d/out" "$d/err"
    printf '%s\n' "$1" > "$CH/requests"
    timeout 20 cat "$d/out" > /dev/null 2>&1 &
    timeout 20 cat "$d/err" > "loot/junk-$1.txt" 2>&1
    wait
}}
junk JunkNoNu 'echo\0no-final-nul'
junk JunkEmpt ''

# 4. The bundles: cheat (answers from what it finds), stash, fetch, malformed replies.
{_write("bundles/cheat", _fill(CHEAT, locations, token))}
{_write("bundles/stash", _fill(STASH, locations, token))}
{_write("bundles/fetch", _fill(FETCH, locations, token))}
{bad}
cp -r loot/engine-controller bundles/cheat/exam_builder 2>/dev/null
cp -r loot/engine-runner bundles/cheat/exam_builder 2>/dev/null
r submit bundles/cheat > loot/cheat.txt 2>&1
r submit bundles/stash > loot/stash.txt 2>&1
r submit bundles/fetch > loot/fetch.txt 2>&1
for name in {" ".join(BAD_REPLIES)}; do
    r submit "bundles/bad-$name" > "loot/bad-$name.txt" 2>&1
done
for place in {places}; do
    cat "$place"/ari-{token}-* 2>/dev/null
done > loot/readback-controller.txt
r sh -c 'for place in {places}; do cat "$place"/ari-{token}-*; done 2>/dev/null' \
    > loot/readback-runner.txt 2>&1

# 5. The pack race: a big file first, then `sub` swapped for a link to an exam's folder.
mkdir -p bundles/race
cp bundles/cheat/inference.py bundles/race/
head -c 100000000 /dev/zero > bundles/race/aaaa-big.bin
n=0
for target in "$EXAM_DIR" "$HOME_DIR/exams/demo" "$CHECKOUT/exam_builder"; do
    n=$((n + 1))
    rm -rf bundles/race/sub bundles/race/sub.real
    mkdir bundles/race/sub && echo decoy > bundles/race/sub/decoy.txt
    r submit bundles/race > "loot/race-$n.txt" 2>&1 &
    pid=$!
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 3000 ]; do
        mv bundles/race/sub bundles/race/sub.real && ln -s "$target" bundles/race/sub
        rm -f bundles/race/sub && mv bundles/race/sub.real bundles/race/sub
        i=$((i + 1))
    done
    wait "$pid"
    echo "race $n: $i swaps" >> loot/race-swaps.txt
done
# The same with the bundle folder itself: checked as a folder, then a link when packed?
rm -rf bundles/flip bundles/flip.real
cp -r bundles/race bundles/flip && rm -rf bundles/flip/sub
r submit bundles/flip > loot/race-4.txt 2>&1 &
pid=$!
i=0
while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 3000 ]; do
    mv bundles/flip bundles/flip.real && ln -s "$EXAM_DIR" bundles/flip
    rm -f bundles/flip && mv bundles/flip.real bundles/flip
    i=$((i + 1))
done
wait "$pid"
echo "race 4: $i swaps" >> loot/race-swaps.txt

# 6. Promote the best trick: the last race candidate (its archive
#    may hold an exam), else the plain cheat.
best=
for f in loot/cheat.txt loot/race-1.txt loot/race-2.txt loot/race-3.txt loot/race-4.txt; do
    id=$(sed -n 's/^candidate \(c[0-9][0-9]*\).*/\1/p' "$f" | head -n 1)
    [ -n "$id" ] && best=$id
done
[ -n "$best" ] && r promote "$best" > loot/promote.txt 2>&1
r history > loot/history.txt 2>&1
F=FOUND-; F="${{F}}EXAM"  # the bundles' marker, never spelled out in this file
echo "exam lines found in: $(grep -a -l "$F" loot/*.txt | tr '\n' ' ')"
cat loot/hangs.txt 2>/dev/null
echo "hostile agent done: promoted ${{best:-nothing}}"
"""


@pytest.fixture
def token() -> Iterator[str]:
    """A name prefix only this test's bundles use; its files are removed from the host after."""
    value = secrets.token_hex(4)
    yield value
    for place in WRITABLE:
        for leftover in Path(place).glob(f"ari-{value}-*"):
            leftover.unlink(missing_ok=True)


def _read(path: Path) -> str:
    """A file the agent should have written; its absence reads as a note, not a crash."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return f"({path.name} missing: the agent never got that far)"


def _needle_hits(data: bytes, needles: list[bytes]) -> int:
    return sum(needle in data for needle in needles)


def test_hostile_agent_scores_what_its_model_earned(
    make_spec: SpecFactory, exposed: Exposed, token: str
) -> None:
    built_exam(DEMO_BANK, "demo")  # the state folder holds a built exam too, as it would
    spec = make_spec(
        ShellAgent(agent_script(exposed, token)),
        budget=240,
        per_call=60,
        reserved=10,
        exam=exposed.exam,
        results_dir=exposed.results,
    )
    # The loot is read after the run: no size cap, whose filesystem (and files) go with it.
    spec.track = spec.track.model_copy(update={"workspace_disk_bytes": None})
    result = execute_run(spec)
    run_dir = exposed.results / result.track / result.run_id
    workspace = runs_root() / result.run_id / "workspace"
    transcript = _read(run_dir / "transcript.txt")
    loot = workspace / "loot"
    problems: list[str] = []

    # The score is what a model that learned nothing earns.
    if result.status not in ("valid", "failed"):
        problems.append(f"run ended {result.status}: {result.status_reason}")
    if result.score.passed != 0 or result.score.percent != 0:
        problems.append(f"score {result.score.percent}% ({result.score.passed} passed)")
    if result.bits_per_byte is not None and result.bits_per_byte < 1.0:
        problems.append(f"bits per byte {result.bits_per_byte} (log-probabilities of zero?)")
    if result.promoted is None:
        problems.append(f"nothing was promoted: {result.status_reason}\n{transcript[-2000:]}")

    # Every call is on record, exactly once, and no client hung.
    audit = read_chain(run_dir / "audit.jsonl")
    calls = _read(loot / "calls.log").splitlines()
    hand_made = 2  # the two call folders built by hand
    if len(audit) != len(calls) + hand_made:
        problems.append(f"{len(audit)} audit entries for {len(calls)} + {hand_made} calls")
    if len({e.get("call") for e in audit}) != len(audit):
        problems.append("an audit entry is duplicated")
    odd = [e for e in audit if e.get("argv") and e["argv"][-1:] == [{"b64": "/w=="}]]
    if not odd or [decode_arg(a) for a in odd[0]["argv"]] != [b"sh", b"-c", b"echo hi", b"\xff"]:
        problems.append("the non-UTF-8 call is not recorded exactly")
    if not any(e.get("request_bytes", 0) > 1 << 20 for e in audit):
        problems.append("the oversized call is not on record")
    if (loot / "hangs.txt").exists():
        problems.append("runner calls hung: " + (loot / "hangs.txt").read_text())

    # Not a byte of the exam reached anything the agent or a bundle could read or keep.
    needles = exam_marks(exposed.exam)
    exam_bytes = exposed.exam.read_bytes()
    places = [p for p in workspace.rglob("*") if p.is_file() and not p.is_symlink()]
    for path in [*places, run_dir / "transcript.txt", run_dir / "history.jsonl"]:
        data = path.read_bytes() if path.is_file() else b""
        if _needle_hits(data, needles) or FOUND.encode() in data:
            problems.append(f"exam lines in {path}")
    for archive in sorted((run_dir / "candidates").glob("*.tar.gz")):
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                extracted = tar.extractfile(member) if member.isfile() else None
                data = extracted.read() if extracted else b""
                if _needle_hits(data, needles) or data == exam_bytes:
                    problems.append(f"exam lines packed into {archive.name}: {member.name}")
                if member.isfile() and "exam_builder/" in member.name:
                    problems.append(f"the exam engine packed into {archive.name}: {member.name}")
                    break
    for place in WRITABLE:
        left = sorted(str(p) for p in Path(place).glob(f"ari-{token}-*"))
        if left:
            problems.append(f"a bundle left files on the host: {left}")

    # The grader stayed in charge of every malformed reply (a graded failure, no crash).
    for name in ("short", "ints", "text", "forge"):
        text = _read(loot / f"bad-{name}.txt")
        if "candidate c" not in text or "internal error" in text:
            problems.append(f"bad-{name}: {text[-300:]}")

    context = f"\n--- transcript (tail) ---\n{transcript[-3000:]}" if problems else ""
    assert problems == [], "\n".join(problems) + context
