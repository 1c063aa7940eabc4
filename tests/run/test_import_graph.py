"""Imports flow one way: run -> runner -> (clock, results.chain); the sandbox layer knows no runs.

Parsed with `ast` (every `import` anywhere in a module, function-level ones included), so a lazy
import cannot slip a cycle back in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TOOLKIT = Path(__file__).resolve().parents[2] / "toolkit"

# (modules checked, relative to toolkit/) -> module prefixes they must never import.
RULES: dict[str, tuple[str, ...]] = {
    # The runner service and client sit below the run: the run hands them handlers.
    "runner": ("toolkit.run", "toolkit.grading", "toolkit.agents", "toolkit.commands"),
    # The sandbox layer knows nothing of runs, exams or grading (callers say what to hide).
    "sandbox": (
        "toolkit.run",
        "toolkit.runner",
        "toolkit.grading",
        "toolkit.agents",
        "toolkit.campaign",
        "toolkit.stats",
        "toolkit.results.model",
        "toolkit.tracks.model",
        "toolkit.commands",
        "exam_builder",
    ),
    # The clock and the chained log are leaves that both `run` and `runner` stand on.
    "clock.py": ("toolkit", "exam_builder"),
    "results/chain.py": ("toolkit", "exam_builder"),
    "results/bounded_json.py": ("toolkit", "exam_builder"),
}
# Leaves a leaf may stand on: each is itself in RULES with nothing of the project below it
# (`toolkit.results` is a package whose __init__ imports nothing).
LEAVES = ("toolkit.results", "toolkit.results.bounded_json")
# Nothing imports the CLI but the CLI itself.
CLI = ("toolkit.cli", "toolkit.commands")


def _module_name(path: Path) -> str:
    rel = path.relative_to(TOOLKIT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, module: str | None = None) -> set[str]:
    """Every module `path` imports (relative imports resolved, `from x import y` as x and x.y).

    `module`: the file's dotted name, when it does not live under `toolkit/`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = (module or _module_name(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _files(target: str) -> list[Path]:
    path = TOOLKIT / target
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


@pytest.mark.parametrize("target", sorted(RULES))
def test_layer_never_imports_what_sits_above_it(target: str) -> None:
    files = _files(target)
    assert files, f"toolkit/{target} has no modules: update RULES"
    bad = [
        f"{f.relative_to(TOOLKIT.parent)} imports {m}"
        for f in files
        for m in sorted(imports_of(f))
        if m not in LEAVES and any(_matches(m, p) for p in RULES[target])
    ]
    assert bad == []


def test_the_leaves_import_nothing_of_the_project() -> None:
    """What LEAVES lets a leaf import is itself a leaf: the package's __init__ imports nothing."""
    init = TOOLKIT / "results" / "__init__.py"
    assert not [m for m in imports_of(init) if m.startswith(("toolkit", "exam_builder"))]
    assert all(
        m == "toolkit.results" or m.removeprefix("toolkit.").replace(".", "/") + ".py" in RULES
        for m in LEAVES
    )


def test_nothing_imports_the_cli() -> None:
    bad = [
        f"{f.relative_to(TOOLKIT.parent)} imports {m}"
        for f in sorted(TOOLKIT.rglob("*.py"))
        if f.name != "cli.py" and "commands" not in f.relative_to(TOOLKIT).parts
        for m in sorted(imports_of(f))
        if any(_matches(m, p) for p in CLI)
    ]
    assert bad == []


def test_the_checker_sees_a_lazy_import(tmp_path: Path) -> None:
    """The parser finds imports inside functions and resolves relative ones (else the rules
    above could pass on code that breaks them)."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..run import artifacts\n    import toolkit.run.history\n")
    found = imports_of(probe, "toolkit.runner.probe")
    assert {"toolkit.run", "toolkit.run.artifacts", "toolkit.run.history"} <= found
