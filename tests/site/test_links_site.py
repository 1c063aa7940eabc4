"""A link in a results folder never publishes what it points to (mkdocs builds).

The three attacks of issue #38, each on a copy of the committed results folder: (a) the demo
run, its JSON unchanged, with its run folder linked to another run's folder; (b) an unsigned
result whose run folder links to `$ARI_HOME/operator` (the hidden gradings' log); (c) the same
linked to `$ARI_HOME/keys` (the result-signing key). By default the build refuses, naming every
link in one pass; with `ARI_SKIP_BAD_RESULTS=1` it publishes the rest, lists the refused files
on a page of their own, and no byte of what the links point to is anywhere in the site.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from site_fixture import REPO, build, run_dict

from toolkit.results import signing

SKIP = {"ARI_SKIP_BAD_RESULTS": "1"}


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    if not results.exists():
        shutil.copytree(REPO / "results", results)
    return results


def _home(tmp_path: Path) -> Path:
    """The `$ARI_HOME` of the build (`site_fixture.build`) and of this test (conftest)."""
    return tmp_path / "ari-home"


def _linked_demo_run(tmp_path: Path) -> tuple[Path, bytes]:
    """(a) The committed demo run's folder replaced by a link to another run's folder."""
    run_dir = next(p for p in (_results(tmp_path) / "demo-cpu").iterdir() if p.is_dir())
    other = tmp_path / "another-run"
    other.mkdir()
    secret = b"ANOTHER RUN, NOT PUBLISHED: its prompts and its agent's private notes\n"
    for name in ("audit.jsonl", "transcript.txt", "history.jsonl", "agent.log"):
        (other / name).write_bytes(secret)
    shutil.rmtree(run_dir)
    os.symlink(other, run_dir)
    return run_dir, secret


def _unsigned_run_linked_to(tmp_path: Path, run_id: str, target: Path, name: str) -> Path:
    """An unsigned result (shown "unverified") listing `name`, its run folder a link."""
    results = _results(tmp_path)
    run = run_dict(run_id, track="demo-cpu", model=f"model-{run_id}", seed=7)
    run["artifacts"] = {"stolen": f"{run_id}/{name}"}
    (results / "demo-cpu" / f"{run_id}.json").write_text(json.dumps(run), encoding="utf-8")
    link = results / "demo-cpu" / run_id
    os.symlink(target, link)
    return link


def _linked_operator_log(tmp_path: Path) -> tuple[Path, bytes]:
    """(b) The folder links to `$ARI_HOME/operator`, where the hidden gradings are logged."""
    operator = _home(tmp_path) / "operator"
    operator.mkdir(parents=True)
    secret = b'{"question": "q0017", "answer": "the hidden answer", "passed": false}\n'
    (operator / "grading.log").write_bytes(secret)
    return _unsigned_run_linked_to(tmp_path, "grading", operator, "grading.log"), secret


def _linked_signing_key(tmp_path: Path) -> tuple[Path, bytes]:
    """(c) The folder links to `$ARI_HOME/keys`: the result-signing key itself."""
    signing.local_public()  # this machine's key, made now if it was not there yet
    keys = _home(tmp_path) / signing.KEYS_DIR
    secret = (keys / signing.KEY_FILE).read_bytes()
    return _unsigned_run_linked_to(tmp_path, "key", keys, signing.KEY_FILE), secret


ATTACKS: dict[str, Callable[[Path], tuple[Path, bytes]]] = {
    "demo run linked to another run": _linked_demo_run,
    "unsigned run linked to the operator log": _linked_operator_log,
    "unsigned run linked to the signing key": _linked_signing_key,
}


def _leaks(site: Path, secret: bytes) -> list[Path]:
    """Every file of the built site holding the secret or any line of it."""
    lines = [line for line in secret.splitlines() if len(line) > 8]
    return [
        f
        for f in site.rglob("*")
        if f.is_file() and any(part in f.read_bytes() for part in [secret, *lines])
    ]


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_linked_run_folder_is_refused_and_nothing_it_points_to_is_published(
    tmp_path: Path, attack: str
) -> None:
    link, secret = ATTACKS[attack](tmp_path)
    site = tmp_path / "public"
    done = build(_results(tmp_path), site, extra_env=SKIP)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert _leaks(site, secret) == []
    refused = (site / "refused.html").read_text(encoding="utf-8")
    shown = link.relative_to(_results(tmp_path)).as_posix()
    assert f"{shown}: a symlink, refused" in refused, refused
    assert str(tmp_path) not in refused  # paths relative to the results folder
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "1 result file was refused" in home
    board = (site / "leaderboards" / "demo-cpu.html").read_text(encoding="utf-8")
    if "demo run" not in attack:
        assert "scripted" in board  # the demo row is still on its board


def test_the_build_refuses_by_default_naming_every_link_in_one_pass(tmp_path: Path) -> None:
    links = [make(tmp_path)[0] for make in ATTACKS.values()]
    done = build(_results(tmp_path), tmp_path / "public")
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    refusals = [line for line in output.splitlines() if "bad results: " in line]
    assert len(refusals) == 3, output
    for link in links:
        assert any(f"{link}: a symlink, refused" in line for line in refusals), output
    assert "3 result file(s) refused" in output and "ARI_SKIP_BAD_RESULTS=1" in output
    assert "Traceback" not in output
