"""The sandbox package's layout holds: its imports run one way, and a backend is one folder.

`toolkit/sandbox/` keeps the contract and the helpers every backend may use at its top, and one
package per backend below it (`local/`, `docker/`). The arrows must point down only: a top-level
module importing a backend would tie every backend to it (and load it where it is not wanted),
and one backend importing another would make the two one. Imports are read with `ast`, not
by running anything: `import`, `from ... import`, relative imports, imports under
`TYPE_CHECKING` (still an arrow), the bare sibling imports of the modules that run as scripts
(`python -I -S launcher.py`), and `importlib.import_module` / `__import__` of a constant name.
The checker is tried on small made-up trees first, so that each rule is seen to catch what it
is for.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import toolkit.sandbox
from toolkit.sandbox import BACKEND_PACKAGES, create_sandbox

SANDBOX = Path(toolkit.sandbox.__file__).resolve().parent
PACKAGE = "toolkit.sandbox"


def backends(folder: Path) -> list[str]:
    """The backend packages of a sandbox folder: its subfolders that are Python packages."""
    return sorted(p.name for p in folder.iterdir() if (p / "__init__.py").is_file())


def module_name(folder: Path, path: Path) -> str:
    """The dotted name of `path`, a module under the sandbox folder `folder`."""
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _constant_import(node: ast.Call) -> str | None:
    """The module named by `importlib.import_module("...")` or `__import__("...")`."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def imported(folder: Path, path: Path) -> set[str]:
    """Every module `path` imports (for `from X import y`: both X and X.y, since y may be a
    module), as dotted names; bare names of files beside it, or in the sandbox folder, are
    taken as those files (how the modules run as scripts reach their siblings)."""
    here = module_name(folder, path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    beside = {p.stem for p in path.parent.glob("*.py")}
    top = {p.stem for p in folder.glob("*.py")}

    def absolute(name: str) -> str:
        first = name.split(".")[0]
        if first in beside:
            return f"{package}.{name}"
        if first in top:
            return f"{PACKAGE}.{name}"
        return name

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(absolute(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = absolute(node.module or "")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and (name := _constant_import(node)):
            found.add(name)
    return {name for name in found if name == PACKAGE or name.startswith(PACKAGE + ".")}


def violations(folder: Path) -> list[str]:
    """Each module that breaks the layout, once per backend it wrongly imports: a top-level
    module importing a backend, or a backend importing another backend."""
    names = backends(folder)
    found: list[str] = []
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder)
        own = rel.parts[0] if len(rel.parts) > 1 else None
        if own is not None and own not in names:
            continue  # a plain data folder, not a backend
        wrong: dict[str, str] = {}
        for target in sorted(imported(folder, path)):
            parts = target.split(".")
            if len(parts) >= 3 and parts[2] in names and parts[2] != own:
                wrong.setdefault(parts[2], target)
        who = "the top level" if own is None else f"backend {own!r}"
        found += [f"{rel}: {who} imports backend {b!r} ({t})" for b, t in sorted(wrong.items())]
    return found


def _tree(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


BASE = {
    "__init__.py": "",
    "base.py": "",
    "shared.py": "",
    "alpha/__init__.py": "",
    "alpha/box.py": "from toolkit.sandbox.base import x\n",
    "beta/__init__.py": "",
    "beta/box.py": "from toolkit.sandbox import shared\n",
}


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("shared.py", "from toolkit.sandbox.alpha import box\n", "top level"),
        ("shared.py", "from toolkit.sandbox import alpha\n", "top level"),
        ("shared.py", "import toolkit.sandbox.beta.box\n", "top level"),
        ("shared.py", "from .alpha.box import thing\n", "top level"),
        (
            "shared.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from toolkit.sandbox.alpha.box import B\n",
            "top level",
        ),
        (
            "shared.py",
            "import importlib\nimportlib.import_module('toolkit.sandbox.beta')\n",
            "top level",
        ),
        ("alpha/box.py", "from toolkit.sandbox.beta.box import thing\n", "backend 'alpha'"),
        ("alpha/box.py", "from ..beta import box\n", "backend 'alpha'"),
        ("beta/box.py", "def f():\n    from toolkit.sandbox import alpha\n", "backend 'beta'"),
    ],
)
def test_the_checker_catches_each_wrong_arrow(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    folder = _tree(tmp_path, BASE)
    assert violations(folder) == []  # the made-up tree is clean before the wrong arrow
    (folder / name).write_text(text)
    found = violations(folder)
    assert len(found) == 1 and expected in found[0], found


def test_the_checker_follows_a_script_s_bare_sibling_imports(tmp_path: Path) -> None:
    """A module run as a script imports its siblings by bare name: `import box` beside it is
    its own backend's, `import shared` the top level's. A bare name that is neither (`beta.box`,
    `docker.types`) is another distribution's (the Docker SDK), not judged; a backend reached
    through the package's own name still is."""
    folder = _tree(tmp_path, BASE)
    (folder / "alpha" / "run.py").write_text("import box\nimport shared\n")
    assert violations(folder) == []
    (folder / "alpha" / "run.py").write_text("import beta.box\n")
    assert violations(folder) == []  # a name outside both folders: not ours to judge
    (folder / "shared.py").write_text("import alpha.box\n")
    assert violations(folder) == []  # nor a bare package name at the top (no such module)
    (folder / "alpha" / "run.py").write_text("from toolkit.sandbox.beta import box\n")
    assert violations(folder) == [
        "alpha/run.py: backend 'alpha' imports backend 'beta' (toolkit.sandbox.beta)"
    ]


def test_the_sandbox_package_keeps_its_imports_one_way() -> None:
    assert violations(SANDBOX) == []


def test_every_backend_folder_is_registered_and_every_registered_backend_is_a_folder() -> None:
    """A new backend is one folder plus one line of `BACKEND_PACKAGES`: a folder that is not
    registered is dead code, a registered name without its folder fails at the first run."""
    assert sorted(BACKEND_PACKAGES) == backends(SANDBOX)
    for name, package in BACKEND_PACKAGES.items():
        assert package == f"{PACKAGE}.{name}"


@pytest.mark.parametrize("name", sorted(BACKEND_PACKAGES))
def test_each_backend_s_create_takes_exactly_create_sandbox_s_arguments(name: str) -> None:
    """`create_sandbox` hands every argument to the backend's `create` by keyword: a backend
    that lacks one, or wants one more, fails here rather than on the first sandbox made."""
    import importlib

    create = importlib.import_module(BACKEND_PACKAGES[name]).create
    wanted = dict(inspect.signature(create_sandbox).parameters)
    del wanted["backend"]
    got = inspect.signature(create).parameters
    assert list(got) == list(wanted)
    for param, spec in wanted.items():
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if param == "root" else spec.kind
        assert got[param].kind in (kind, inspect.Parameter.KEYWORD_ONLY), param
        assert got[param].annotation == spec.annotation, param
