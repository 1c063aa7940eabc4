"""Fixtures for the opencode tests: the real binary, a providers file for a fake provider, and
runs on the demo track with scaled-down times.

The binary is the one `make test` installs (scripts/test-setup.sh). Missing, it fails the tests
under CI=true and skips them elsewhere, with the command that installs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.agents.fake_provider import FakeProvider
from tests.agents.relay_calls import RelayFactory, relay_factory
from tests.exams import few_per_family
from toolkit.agents.opencode import OpencodeAgent, _ripgrep
from toolkit.agents.providers import get_provider
from toolkit.agents.scaffold import ScaffoldError, require
from toolkit.run.inputs import DEMO_BANK, built_exam, prepare_data, public_set
from toolkit.run.spec import RunSpec
from toolkit.tracks.model import Track, get_track

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-ari-test-0123456789abcdef"  # the fake provider's "credential"


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must have it: scripts/test-setup.sh installs it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def opencode_binary() -> tuple[Path, str]:
    try:
        binary, version = require()
        _ripgrep()
    except (ScaffoldError, RuntimeError) as e:
        _missing(str(e))
    return binary, version


@pytest.fixture
def relays(tmp_path: Path) -> Iterator[RelayFactory]:
    """`relays(provider, kind=..., **options)`: real relays in front of a fake provider, closed
    at the end; their log is `tmp_path / provider.jsonl`."""
    with relay_factory(tmp_path) as make:
        yield make


@pytest.fixture(autouse=True)
def ari_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("ARI_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def prepared_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small training data, prepared once for every run of the session."""
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "while",
        "seven",
        "wizards",
        "quietly",
        "box",
    ]
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(12)) for i in range(3000)]
    base = tmp_path_factory.mktemp("agent-data")
    text = base / "text.txt"
    text.write_text("\n".join(lines))
    return prepare_data(text, base / "data")


def providers_file(tmp_path: Path, provider: FakeProvider, **extra: object) -> Path:
    """A providers.toml with one entry, `fake`, for `provider` (key in $FAKE_PROVIDER_KEY)."""
    lines = [
        "[fake]",
        'kind = "openai-compatible"',
        f'base_url = "{provider.base_url}"',
        'key_env = "FAKE_PROVIDER_KEY"',
    ]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    path = tmp_path / "providers.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


AgentFactory = Callable[..., OpencodeAgent]


@pytest.fixture
def make_agent(
    opencode_binary: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AgentFactory:
    """An opencode adapter for the fake provider, as `toolkit run` would build it."""
    monkeypatch.setenv("FAKE_PROVIDER_KEY", KEY)

    def make(provider: FakeProvider, *, effort: str | None = "high", **kw: object) -> OpencodeAgent:
        path = providers_file(tmp_path, provider)
        agent = OpencodeAgent.for_run(
            provider="fake", model="fake-model", effort=effort, providers_path=path
        )
        for name, value in kw.items():
            setattr(agent, name, value)
        assert get_provider("fake", path).base_url == provider.base_url
        return agent

    return make


SpecFactory = Callable[..., RunSpec]


@pytest.fixture
def demo_track() -> Track:
    return get_track(REPO / "results", "demo-cpu-3")


@pytest.fixture(scope="session")
def few_questions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three questions of each family of the demo exam: these runs test the scaffold, the relay
    and the harness around a grading, not the exam's size (tests/run grades the whole of it)."""
    folder = tmp_path_factory.mktemp("few-questions")
    return few_per_family(built_exam(DEMO_BANK, "demo"), 3, folder / "exam.jsonl")


@pytest.fixture
def make_spec(
    tmp_path: Path, demo_track: Track, prepared_data: Path, few_questions: Path
) -> SpecFactory:
    def make(agent: OpencodeAgent, *, budget: float, per_call: float, reserved: float) -> RunSpec:
        return RunSpec(
            track=demo_track,
            model=agent.model,
            effort=agent.effort,
            seed=0,
            agent=agent,
            exam=few_questions,
            public_set=public_set(),
            data_dir=prepared_data,
            results_dir=tmp_path / "results",
            budget_s=budget,
            per_call_limit_s=per_call,
            reserved_s=reserved,
            secrets=[KEY],
        )

    return make
