"""The local sandbox's filesystem plan (`local_layout`): which path is covered, bound or hidden."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.host_scratch import scratch_base
from toolkit.sandbox.local import layout as local_layout
from toolkit.sandbox.local.layout import Places, layout, private_places, runtime_paths

NO_PLACES = Places([], [])


def test_private_places_resolve_links_and_nest(tmp_path: Path) -> None:
    for folder in ("tmp", "run/lock", "var"):
        (tmp_path / folder).mkdir(parents=True)
    os.chmod(tmp_path / "tmp", 0o1777)
    os.chmod(tmp_path / "run" / "lock", 0o1777)
    (tmp_path / "var" / "lock").symlink_to(tmp_path / "run" / "lock")
    names = ("tmp", "run", "run/lock", "var/lock", "missing")
    places = private_places([str(tmp_path / n) for n in names])
    assert places.top == [(tmp_path / "run", 0o755), (tmp_path / "tmp", 0o1777)]
    assert places.inner == [(0, "lock", 0o1777)]  # /var/lock is /run/lock: made once
    assert places.holds(tmp_path / "tmp" / "x") and not places.holds(tmp_path / "var")


def test_runtime_shown_where_hidden_unless_hidden_itself(tmp_path: Path) -> None:
    checkout, home = tmp_path / "checkout", tmp_path / "home"
    venv, base = checkout / ".venv", home / ".pyenv" / "3.11"
    for prefix in (venv, base):
        prefix.mkdir(parents=True)
    found = runtime_paths([venv, base], hide=[checkout], readonly=[], unseen=[home], uid=None)
    assert found == [venv, base]  # inside a hidden folder, under the covered home
    # A caller that hides the interpreter itself (the controller) gets no Python at all.
    assert runtime_paths([venv, base], hide=[venv], readonly=[], unseen=[home], uid=None) == []
    # Visible anyway (or already exposed): nothing to add.
    assert runtime_paths([venv], hide=[], readonly=[], unseen=[], uid=None) == []
    assert runtime_paths([venv], hide=[checkout], readonly=[checkout], unseen=[], uid=None) == []


def test_hidden_folder_holding_the_root_is_a_cover_mounted_first(tmp_path: Path) -> None:
    state = tmp_path / "state"
    root = state / "runs" / "r" / "ws"
    data = state / "data"
    secret = root / ".runner"
    exam = tmp_path / "exam.jsonl"
    for folder in (secret, data):
        folder.mkdir(parents=True)
    exam.write_text("x")
    plan = layout(
        root, readonly=[data], hide=[state, secret, exam], places=NO_PLACES, home=None, uid=None
    )
    assert plan.steps == [("cover", state), ("bind-ro", data), ("bind", root)]
    hidden = {path: (dev, ino) for path, dev, ino in plan.hide}
    assert set(hidden) == {secret, exam}  # the state folder is the cover, not hidden again
    assert hidden[exam] == (-1, -1)  # the sandbox cannot move it: not pinned
    st = secret.stat()
    assert hidden[secret] == (st.st_dev, st.st_ino)  # in the writable root: pinned


def test_what_a_place_or_cover_already_hides_is_not_hidden_again(tmp_path: Path) -> None:
    tmp, home = tmp_path / "tmp", tmp_path / "home"
    root = tmp / "work" / "root"
    for folder in (root / "results", home / "cache", tmp / "exam"):
        folder.mkdir(parents=True)
    places = Places([(tmp, 0o1777)], [])
    hide = [tmp / "exam", root / "results", home / "cache"]
    plan = layout(root, readonly=[], hide=hide, places=places, home=home, uid=None)
    assert [p for p, _, _ in plan.hide] == [root / "results"]  # inside the root: visible
    assert ("cover", home) in plan.steps and plan.covers_home
    # The root inside the home: shown on top of the home's cover.
    inside = layout(home / "cache", readonly=[], hide=[], places=places, home=home, uid=None)
    assert inside.steps == [("cover", home), ("place", tmp), ("bind", home / "cache")]
    # The home inside the root: the caller gave that folder, so it is not covered.
    around = layout(tmp_path, readonly=[], hide=[], places=places, home=home, uid=None)
    assert not around.covers_home


def test_untraversable_ancestor_is_covered_for_the_sandbox_user() -> None:
    base = scratch_base() / f"test-layout-{os.getpid()}"
    private = base / "private"  # like /root: only its owner may enter
    prefix = private / "pyenv"
    root = base / "root"
    for folder in (prefix, root):
        folder.mkdir(parents=True, exist_ok=True)
    os.chmod(private, 0o700)
    other = os.getuid() + 12345  # not the owner: cannot traverse it
    try:
        assert local_layout.untraversable_ancestor(prefix, other) == private
        assert local_layout.untraversable_ancestor(prefix, os.getuid()) is None
        plan = layout(root, readonly=[prefix], hide=[], places=NO_PLACES, home=None, uid=other)
        assert plan.steps == [("cover", private), ("bind", root), ("bind-ro", prefix)]
        mine = layout(root, readonly=[prefix], hide=[], places=NO_PLACES, home=None, uid=None)
        assert ("cover", private) not in mine.steps
    finally:
        shutil.rmtree(base)
