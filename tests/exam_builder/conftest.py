"""Fixtures for the exam engine's tests: the public banks, small banks made on the fly."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from exam_helpers import DEMO, MakeBank

from exam_builder.bank import Bank, load_bank
from exam_builder.generate import GeneratedDocument, generate_documents


@pytest.fixture(autouse=True, scope="session")
def _state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """ARI_HOME in a temporary folder, never a user's: tests/conftest.py sets one for the
    session (so the default corpus is extracted once); keep it only if it is a temporary one."""
    current = os.environ.get("ARI_HOME", "")
    if current and Path(current).resolve().is_relative_to(Path(tempfile.gettempdir()).resolve()):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARI_HOME", str(tmp_path_factory.mktemp("ari-home")))
        yield


@pytest.fixture
def make_bank(tmp_path: Path) -> MakeBank:
    """Write a bank directory: `make_bank(toml_text, plugins={"name.py": source})`."""

    def make(toml: str, plugins: dict[str, str] | None = None, name: str = "bank") -> Path:
        bank = tmp_path / name
        bank.mkdir()
        (bank / "bank.toml").write_text(textwrap.dedent(toml), encoding="utf-8")
        for file, source in (plugins or {}).items():
            (bank / "plugins").mkdir(exist_ok=True)
            (bank / "plugins" / file).write_text(textwrap.dedent(source), encoding="utf-8")
        return bank

    return make


@pytest.fixture
def demo_copy(tmp_path: Path) -> Path:
    """A writable copy of the public demo bank."""
    return Path(shutil.copytree(DEMO, tmp_path / "demo-bank"))


@pytest.fixture(scope="session")
def demo_bank() -> Bank:
    return load_bank(DEMO)


@pytest.fixture(scope="session")
def demo_documents(demo_bank: Bank) -> list[GeneratedDocument]:
    return generate_documents(demo_bank)


@pytest.fixture(scope="session")
def english() -> bytes:
    """The default corpus: the English text the context-free baseline learns from."""
    from toolkit.text.corpus import default_corpus

    return default_corpus()
