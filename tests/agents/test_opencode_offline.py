"""The scaffold stays offline but for its provider: checked by what the egress gate sees.

The real binary runs in a sandbox whose only allowed destination is the fake provider, with the
adapter's configuration and switches. With them it attempts nothing else; without the two that
matter in headless runs (the pre-made dependency folder, the model-catalogue switch) the gate
sees it reach for the npm registry and models.dev: so the check can fail, and would catch a new
version of the scaffold that phones home.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.agents.fake_provider import FakeProvider, Reply, bash, steps
from toolkit.agents.opencode import (
    SWITCHES,
    _prevent_dependency_install,
    scaffold_config,
)
from toolkit.agents.providers import Provider
from toolkit.sandbox import Egress, create_sandbox

pytestmark = pytest.mark.slow

SCRIPT = steps(
    Reply(calls=[("write", {"filePath": "notes.py", "content": "print( 1 )\n"})]),
    Reply(calls=[("grep", {"pattern": "print"})]),
    Reply(calls=[bash("ls")]),
    Reply(text="done"),
)


def _attempts(
    binary: Path, root: Path, *, drop: tuple[str, ...] = (), deps: bool = True
) -> tuple[bytes, list[dict[str, object]]]:
    """Run the scaffold once in an egress sandbox; its output and the gate's log."""
    bin_dir, home = root / ".bin", root / ".agent"
    bin_dir.mkdir(parents=True)
    shutil.copyfile(binary, bin_dir / "opencode")
    (bin_dir / "opencode").chmod(0o755)
    for tool in ("sh", "bash", "ls", "rg", "cat"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    folders = {
        f"XDG_{part.upper()}_HOME": home / part for part in ("config", "data", "cache", "state")
    }
    folders["HOME"] = home / "home"
    for folder in folders.values():
        folder.mkdir(parents=True)
    config_dir = folders["XDG_CONFIG_HOME"] / "opencode"
    config_dir.mkdir()
    if deps:
        _prevent_dependency_install(config_dir)
    env = {name: str(path) for name, path in folders.items()}
    env.update({k: v for k, v in SWITCHES.items() if k not in drop})
    env.update({"PATH": str(bin_dir), "SHELL": "/bin/bash"})
    with FakeProvider(SCRIPT) as provider:
        entry = Provider("fake", "openai-compatible", provider.base_url, "UNUSED")
        config = scaffold_config(entry, "m", {})
        (config_dir / "opencode.json").write_text(json.dumps(config))
        rules = [Egress("127.0.0.1", provider.port)]
        with create_sandbox("local", root=root, egress=rules, env=env) as box:
            argv = ["opencode", "run", "--format", "json", "--title", "t", "--model", "fake/m"]
            done = box.exec([*argv, "go"], timeout=300)
            return done.stdout, box.egress_log


def test_with_the_adapters_switches_it_reaches_nothing_but_the_provider(
    opencode_binary: tuple[Path, str], tmp_path: Path
) -> None:
    out, log = _attempts(opencode_binary[0], tmp_path / "root")
    assert b'"reason":"stop"' in out  # the whole script ran: write, grep, shell, stop
    assert log and all(e["allowed"] for e in log), log


@pytest.mark.parametrize(
    ("drop", "deps", "reached"),
    [
        ((), False, "registry.npmjs.org"),  # the start-up install of its plug-in package
        (("OPENCODE_DISABLE_MODELS_FETCH",), True, "models.opencode.ai"),  # the catalogue
    ],
    ids=["dependency-folder-not-made", "catalogue-fetch-on"],
)
def test_without_a_switch_the_gate_sees_it_reach_out(
    opencode_binary: tuple[Path, str],
    tmp_path: Path,
    drop: tuple[str, ...],
    deps: bool,
    reached: str,
) -> None:
    out, log = _attempts(opencode_binary[0], tmp_path / "root", drop=drop, deps=deps)
    assert b'"reason":"stop"' in out  # it still works: the attempt was refused, not fatal
    refused = {e["host"] for e in log if not e["allowed"]}
    assert reached in refused, log
