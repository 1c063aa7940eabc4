"""Every runtime dependency declared in pyproject.toml is used by the library (no dead weight)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Distribution name -> the module it provides, where the two differ.
MODULES = {"mkdocs-material": "material", "pyyaml": "yaml"}
# Dependencies used other than by an import, and how.
NOT_IMPORTED = {
    "mkdocs-material": "the site's theme (mkdocs.yml: theme.name material)",
    "docker": "the Docker backend's SDK (toolkit/sandbox/docker*.py)",
}


def _imported() -> set[str]:
    names: set[str] = set()
    for folder in ("toolkit", "exam_builder", "site"):
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names.add(node.value)  # importlib.util.find_spec("gensim") and the like
    return names


def test_every_declared_dependency_is_used() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    imported = _imported()
    unused = []
    for spec in project["dependencies"]:
        dist = re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower()
        if dist in NOT_IMPORTED:
            continue
        if MODULES.get(dist, dist.replace("-", "_")) not in imported:
            unused.append(dist)
    assert unused == [], f"declared in pyproject.toml but never imported: {unused}"
