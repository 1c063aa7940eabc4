"""Every example of every `-h` runs as written (issue 51 item 1), so none can go stale.

The examples are read from the help texts themselves. Each one has an entry in `CHECKS`: a
new or changed example without one fails here. An entry runs the example in a scratch folder
(the repository's `exam_builder`, `campaigns` and a copy of its `results` beside it, `/tmp/`
moved into the folder, a state folder of its own) and checks its output against what the
help says it does. An example that is slow or needs what a test box lacks (a GPU, Docker, a
model's key, a hidden bank) has a *stand-in*: its command and every option it names are
checked to exist, and where a quick equivalent exists (a public bank for a hidden one, a
saved result for a whole run) that runs in its place.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.stats.results_factory import run_dict
from toolkit.cli import cli
from toolkit.results.model import RunResult, save_run
from toolkit.run import journal
from toolkit.run.spec import new_run_id
from toolkit.tracks.model import get_track
from toolkit.tracks.registry import carry_track

REPO = Path(__file__).resolve().parents[2]
RUN_ID = re.compile(r"\d{8}T\d{6}-[A-Za-z0-9._-]+-s\d+-[0-9a-f]{4}")


@dataclass(frozen=True)
class Check:
    """How one example is checked.

    `standin` says why it does not run as written (empty: it runs). `swap` replaces parts of
    the example for the run (a public bank for a hidden one). `expect`: lines of its output
    must hold each; `code`: its exit status; `json`: its output is JSON (one value or lines)."""

    expect: tuple[str, ...] = ()
    code: int = 0
    standin: str = ""
    swap: dict[str, str] = field(default_factory=dict)
    json: bool = False


RUN_EXAMPLE = "20261125T140102-scripted-baseline-s0-4712"
DEMO_BANK = {"~/secure/hidden-bank": "exam_builder/banks/public/demo"}
# In the order they run: the exam is built before it is verified, the run saved before it
# is shown on the board.
CHECKS: dict[str, Check] = {
    "toolkit build-exam --bank exam_builder/banks/public/demo --out /tmp/demo-exam": Check(
        expect=("wrote", "exam sha256", "tier")
    ),
    "toolkit verify-exam /tmp/demo-exam/exam.jsonl --sha256 c23cb953": Check(
        expect=("OK", "matches the 8-digit prefix")
    ),
    "toolkit build-exam --bank ~/secure/hidden-bank --check": Check(
        standin="a hidden bank is private: the public demo bank in its place",
        swap=DEMO_BANK,
        expect=("tier",),
    ),
    "toolkit run --agent scripted --track demo-cpu-3 --seed 0 --results /tmp/ari-results": Check(
        standin="a whole run takes minutes: a saved result of the track in its place"
    ),
    "toolkit run --agent scripted --backend local --track demo-cpu-3 --seed 0 "
    "--results /tmp/ari-results": Check(standin="a whole run takes minutes (as above)"),
    "OPENAI_API_KEY=... toolkit run --agent opencode --provider openai --model gpt-5 "
    "--effort high --track demo-cpu-3 --seed 0 --results /tmp/ari-results": Check(
        standin="needs a provider's key and the network"
    ),
    "toolkit leaderboard --track demo-cpu-3 --results /tmp/ari-results": Check(
        expect=("demo-cpu-3", "scripted-baseline")
    ),
    "toolkit leaderboard --track demo-cpu --results results --format table": Check(
        expect=("demo-cpu", "scripted-baseline")
    ),
    "toolkit tracks list --results /tmp/ari-results": Check(expect=("demo-cpu-3",)),
    "toolkit tracks list": Check(expect=("v1-h100-1h", "demo-cpu-3")),
    "toolkit tracks show v1-h100-1h": Check(expect=('"id": "v1-h100-1h"',), json=True),
    "toolkit tracks show v1-h100-1h | jq .grading": Check(expect=('"grading"',), json=True),
    "toolkit tracks new v2-h100-1h --from v1-h100-1h --exam /secure/exams/v2 "
    '--title "Official v2: one hour on one H100"': Check(standin="needs a hidden exam"),
    "toolkit tracks new v2-h100-1h --from v1-h100-1h --exam /secure/exams/v2 "
    '--title "Official v2: one hour on one H100" --publish-prefix 8': Check(
        standin="needs a hidden exam"
    ),
    "toolkit tracks schema --markdown": Check(expect=("| field |",)),
    "toolkit grade path/to/bundle --exam /tmp/demo-exam/exam.jsonl": Check(
        standin="a bundle is a trained model: grading is tested in tests/grading"
    ),
    "toolkit grade bundles/b1 --exam /tmp/exam/exam.jsonl --json report.json": Check(
        standin="a bundle is a trained model: grading is tested in tests/grading"
    ),
    "toolkit grade bundles/b1 --exam /tmp/demo-exam --questions": Check(
        standin="a bundle is a trained model: tests/grading/test_grade_questions.py"
    ),
    "toolkit keys show": Check(expect=("key",)),
    "toolkit keys list --results results": Check(expect=("pinned",)),
    'toolkit keys trust --results results --holder "ARI Bench operator, gpu-host-1"': Check(
        expect=("signing_keys.json",)
    ),
    'toolkit keys pin --holder "ARI Bench operator, gpu-host-1"': Check(
        standin="writes the installed toolkit's pinned keys: a maintainer's act"
    ),
    "toolkit runs validate results/": Check(expect=("demo-cpu",)),
    "toolkit runs list": Check(expect=(RUN_EXAMPLE,)),
    "toolkit runs list --all --json | jq 'select(.state == \"running\")'": Check(json=True),
    f"toolkit runs show {RUN_EXAMPLE}": Check(expect=(RUN_EXAMPLE,)),
    f"toolkit runs tail -f {RUN_EXAMPLE}": Check(
        standin="follows a live run; the run id has the shape of today's ids"
    ),
    f"toolkit runs kill {RUN_EXAMPLE}": Check(
        standin="stops a live run; the run id has the shape of today's ids"
    ),
    "toolkit runs recover": Check(),
    "toolkit runs clean --dry-run": Check(),
    "toolkit runs schema > run.schema.json": Check(expect=('"properties"',), json=True),
    "toolkit runs verify results/v1-h100-1h/RUN_ID.json --exam ~/secure/exams/v1/exam.jsonl": (
        Check(standin="needs a hidden exam and a run graded on it")
    ),
    "toolkit campaign plan campaign.toml": Check(
        standin="campaign.toml is the operator's: the shipped demo campaign in its place",
        swap={"campaign.toml": "campaigns/demo.toml"},
        expect=("demo-cpu",),
    ),
    "toolkit campaign plan campaign.toml --format json": Check(
        standin="the shipped demo campaign in its place",
        swap={"campaign.toml": "campaigns/demo.toml"},
        json=True,
    ),
    "toolkit campaign run campaign.toml --gpus 0,1,2,3": Check(standin="needs four GPUs"),
    "toolkit campaign run campaign.toml": Check(standin="needs GPUs"),
    "toolkit campaign run campaigns/demo.toml --slots 2": Check(
        standin="whole runs take minutes each"
    ),
    "toolkit campaign run campaign.toml --engine ray --address ray://head:10001": Check(
        standin="needs a Ray cluster"
    ),
    "toolkit data prepare --track v1-h100-1h --source /data/fineweb-edu --out /data/v1": Check(
        standin="needs the track's downloaded shards"
    ),
    "toolkit data prepare --out /data/demo": Check(
        standin="writes the default corpus: tested in tests/test_data_prepare.py"
    ),
    "toolkit doctor": Check(standin="probes the host for a minute: tests/test_doctor.py"),
    "toolkit doctor --track v1-h100-1h --backend docker": Check(standin="needs Docker"),
    "toolkit doctor --track v1-h100-1h --provider openai --model gpt-5": Check(
        standin="needs a provider's key"
    ),
    "toolkit doctor --provider mine --providers my-providers.toml --model m1": Check(
        standin="needs the operator's provider file"
    ),
    "toolkit images build --torch cuda --pins images.json": Check(standin="needs Docker"),
    "toolkit images build --debootstrap": Check(standin="needs Docker and a Debian mirror"),
    "toolkit images list": Check(standin="needs Docker"),
    "toolkit learn-exam --bank exam_builder/banks/public/demo --exam /tmp/demo-exam "
    "--json /tmp/demo-learn.json": Check(standin="trains models for minutes: tests/learn"),
    "toolkit learn-exam --bank ~/secure/hidden-bank --exam ~/secure/exams/hidden "
    "--families records,lists --steps 500": Check(standin="needs a hidden bank"),
    "toolkit learn-exam --randomize --bank exam_builder/banks/public/demo "
    "--exam ~/secure/exams/hidden": Check(standin="needs a hidden exam: tests/learn"),
    "toolkit learn-exam --bank exam_builder/banks/public/demo --exam /tmp/demo-exam "
    "--families symbolic --seed 1": Check(standin="trains models for minutes: tests/learn"),
    "toolkit learn-exam --bank exam_builder/banks/public/demo --exam /tmp/demo-exam "
    "--families symbolic --draws 2": Check(standin="trains models for minutes: tests/learn"),
    "toolkit view --results /tmp/ari-results": Check(standin="a web server: tests/site"),
    "toolkit view --results .ari/demo/results --port 0": Check(standin="a web server"),
}


def _commands(group: click.Group, path: list[str]) -> list[tuple[list[str], click.Command]]:
    found = [(path, group)]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found.extend(_commands(command, [*path, name]))
        else:
            found.append(([*path, name], command))
    return found


def help_examples(command: click.Command) -> list[str]:
    """The example lines of a help text: after `Example(s):`, `\\` continuations joined,
    trailing `# comments` dropped."""
    text = command.help or ""
    at = re.search(r"^\s*Examples?:\s*$", text, re.MULTILINE)
    if at is None:
        return []
    examples: list[str] = []
    pending = ""
    for raw in text[at.end() :].splitlines():
        line = raw.strip()
        if not line:
            continue
        line = re.sub(r"\s+#\s.*$", "", line)
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        examples.append(pending + line)
        pending = ""
    return examples


def all_examples() -> list[str]:
    seen: list[str] = []
    for _, command in _commands(cli, ["toolkit"]):
        seen.extend(e for e in help_examples(command) if e not in seen)
    return seen


def test_every_example_has_a_check_and_every_check_an_example() -> None:
    examples = set(all_examples())
    assert examples - set(CHECKS) == set(), "an example with no check: add it to CHECKS"
    assert set(CHECKS) - examples == set(), "a check whose example is gone: drop it"


def test_run_ids_in_examples_have_the_shape_of_new_ones() -> None:
    assert RUN_ID.fullmatch(new_run_id("scripted-baseline", 0))
    for example in all_examples():
        for word in example.split():
            if re.match(r"\d{8}T\d{6}", word):
                assert RUN_ID.fullmatch(word), f"{example}: {word} is no run id of today"


def _split(example: str) -> tuple[list[str], str]:
    """The example's arguments after `toolkit`, and a shell tail (`| jq ...`, `> FILE`)."""
    parts = re.split(r"\s(?=[|>]\s)", example, maxsplit=1)
    head, tail = parts[0], (parts[1] if len(parts) > 1 else "")
    argv = shlex.split(head)
    while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0]):  # an environment variable first
        argv.pop(0)
    assert argv[0] == "toolkit", head
    return argv[1:], tail


def _options_exist(argv: list[str]) -> None:
    """The stand-in's minimum: the command resolves and names only options it has."""
    group: click.Command = cli
    rest = list(argv)
    while isinstance(group, click.Group) and rest and not rest[0].startswith("-"):
        sub = group.commands.get(rest[0])
        assert sub is not None, f"no command {rest[0]!r} in {argv}"
        group, rest = sub, rest[1:]
    opts = {o for p in group.params for o in (*p.opts, *p.secondary_opts)}
    for word in rest:
        if word.startswith("-"):
            assert word.split("=")[0] in opts, f"{argv}: no option {word}"


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "exam_builder").symlink_to(REPO / "exam_builder")
    (tmp_path / "campaigns").symlink_to(REPO / "campaigns")
    shutil.copytree(REPO / "results", tmp_path / "results")
    (tmp_path / "tmp").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ARI_RESULTS_DIR", raising=False)
    return tmp_path


def _stand_in_run(scratch: Path) -> None:
    """What `toolkit run --track demo-cpu-3 --results /tmp/ari-results` leaves: a result of
    the track in that folder, and the run in this host's journal."""
    results = scratch / "tmp" / "ari-results"
    carry_track(results, REPO / "results", get_track(REPO / "results", "demo-cpu-3"))
    track = get_track(REPO / "results", "demo-cpu-3")
    over = {"exam_sha256": track.exam_sha256}
    data = run_dict(RUN_EXAMPLE, track="demo-cpu-3", model="scripted-baseline", passed=1)
    data["config"].update({k: v for k, v in over.items() if k in data["config"]})
    save_run(RunResult.model_validate(data), results)
    journal.append(
        journal.Entry(
            run_id=RUN_EXAMPLE,
            track="demo-cpu-3",
            model="scripted-baseline",
            effort=None,
            seed=0,
            agent="scripted",
            started_at=datetime.now(UTC),
            budget_s=300,
            harness=str(scratch / "home" / "runs" / RUN_EXAMPLE),
            artifacts=str(results / "demo-cpu-3" / RUN_EXAMPLE),
            results_dir=str(results),
        )
    )


def _check_output(example: str, check: Check, output: str, tail: str) -> list[str]:
    problems = [f"{example}: output lacks {want!r}" for want in check.expect if want not in output]
    if check.json:
        try:
            if output.strip():
                json.loads(output)
        except json.JSONDecodeError:
            try:
                [json.loads(line) for line in output.splitlines() if line.strip()]
            except json.JSONDecodeError:
                problems.append(f"{example}: output is no JSON{' for ' + tail if tail else ''}")
    return problems


def test_every_example_runs_as_its_help_says(scratch: Path) -> None:
    runner = CliRunner()
    problems: list[str] = []
    for example, check in CHECKS.items():
        argv, tail = _split(example)
        _options_exist(argv)
        if check.standin and not check.swap:
            first_run = not (scratch / "tmp" / "ari-results").exists()
            if argv[0] == "run" and "--results /tmp/ari-results" in example and first_run:
                _stand_in_run(scratch)
            continue
        argv = [w.replace("/tmp/", f"{scratch}/tmp/") for w in argv]
        argv = [check.swap.get(w, w) for w in argv]
        done = runner.invoke(cli, argv)
        if done.exit_code != check.code:
            problems.append(f"{example}: exit {done.exit_code}, not {check.code}: {done.output}")
            continue
        problems.extend(_check_output(example, check, done.output, tail))
    assert not problems, "\n".join(problems)
