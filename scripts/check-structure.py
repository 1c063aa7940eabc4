"""The shape of the library's classes: objects made of parts, not stacked layers of one object.

Two rules over every class defined under a package folder (default: `toolkit/`), read with
`ast` (nothing is imported):

- no class stands on a chain of more than two classes of the package's own: at most class ->
  own base -> own base. A class that is a pydantic model, an exception, an enum, a Protocol, a
  TypedDict or a NamedTuple is aside (those bases say what a thing *is*); so are bases from the
  standard library or a third party (`ThreadingHTTPServer`, `BaseHTTPRequestHandler`), which
  count for nothing in a chain;
- no class declares more than 25 attributes: names annotated or assigned in its body, and
  `self.NAME` assigned in its methods (pydantic models aside: a record of a file format has
  the fields the format has).

Usage: `python scripts/check-structure.py [PACKAGE_DIR]`; prints one line per breach and exits
1, or prints nothing and exits 0. `make check` runs it on `toolkit/`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

MAX_CHAIN = 3
"""Classes of the package's own in a chain, the class itself included."""

MAX_ATTRIBUTES = 25

ASIDE = frozenset(
    {
        "BaseModel",
        "RootModel",
        "BaseException",
        "Exception",
        "Enum",
        "IntEnum",
        "StrEnum",
        "Flag",
        "IntFlag",
        "Protocol",
        "TypedDict",
        "NamedTuple",
    }
)
"""Bases that make a class a kind of its own (a record, an error, a set of names, an
interface): such a class, and every class below it, is aside from the chain rule."""

PYDANTIC = frozenset({"BaseModel", "RootModel"})


@dataclass
class ClassInfo:
    name: str
    """`module.Class`."""
    where: str
    """`path:line`, for the report."""
    bases: list[str] = field(default_factory=list)
    """Each base, resolved through the module's imports to a dotted name (`module.Class` for
    the package's own; an outside base counts by its last name: `BaseModel`)."""
    attributes: set[str] = field(default_factory=set)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Local name -> the dotted name it stands for (`from a.b import C` gives C -> a.b.C)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                names[alias.asname or alias.name] = f"{source}.{alias.name}"
    return names


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Subscript):  # Generic[T], Base[int]
        return _dotted(node.value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _targets(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return [t for e in node.elts for t in _targets(e)]
    return [node]


def _attributes(cls: ast.ClassDef) -> set[str]:
    """What a class declares: names annotated or assigned in its body, `self.X` in methods."""
    found: set[str] = set()
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            found.add(stmt.target.id)
        elif isinstance(stmt, ast.Assign):
            found.update(t.id for t in stmt.targets for t in _targets(t) if isinstance(t, ast.Name))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = stmt.args.posonlyargs + stmt.args.args
            static = any(_dotted(d) == "staticmethod" for d in stmt.decorator_list)
            if not args or static:
                continue
            me = args[0].arg
            for node in ast.walk(stmt):
                targets: list[ast.expr] = []
                if isinstance(node, ast.Assign):
                    targets = [t for target in node.targets for t in _targets(target)]
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                    targets = [node.target]
                for t in targets:
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id == me
                    ):
                        found.add(t.attr)
    return found


def collect(root: Path) -> dict[str, ClassInfo]:
    """Every class under `root`, by `module.Class` (nested classes as `module.Outer.Inner`)."""
    classes: dict[str, ClassInfo] = {}
    for path in sorted(root.rglob("*.py")):
        module = module_name(root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names = _imports(tree, module, path.name == "__init__.py")
        for node in tree.body:  # a module's own classes, by their names in it
            if isinstance(node, ast.ClassDef):
                names[node.name] = f"{module}.{node.name}"
        _visit(tree.body, module, path, names, classes)
    return classes


def _resolve(written: str, names: dict[str, str]) -> str:
    """A base as written, as the dotted name it stands for (itself if nothing says)."""
    head, _, rest = written.partition(".")
    if head in names:
        return names[head] + (f".{rest}" if rest else "")
    return written


def _visit(
    body: list[ast.stmt],
    prefix: str,
    path: Path,
    names: dict[str, str],
    classes: dict[str, ClassInfo],
) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            name = f"{prefix}.{node.name}"
            info = ClassInfo(name, f"{path}:{node.lineno}")
            for base in node.bases:
                written = _dotted(base)
                if written is not None:
                    info.bases.append(_resolve(written, names))
            info.attributes = _attributes(node)
            classes[name] = info
            _visit(node.body, name, path, names, classes)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _visit(node.body, f"{prefix}.{node.name}", path, names, classes)


def _kinds(
    name: str, classes: dict[str, ClassInfo], seen: frozenset[str] = frozenset()
) -> set[str]:
    """The outside bases (last names) a class stands on, through its own bases."""
    info = classes.get(name)
    if info is None or name in seen:
        return {name.rsplit(".", 1)[-1]}
    found: set[str] = set()
    for base in info.bases:
        found |= _kinds(base, classes, seen | {name})
    return found


def _chain(
    name: str, classes: dict[str, ClassInfo], seen: frozenset[str] = frozenset()
) -> list[str]:
    """The longest line of the package's own classes from `name` up (`name` first)."""
    info = classes.get(name)
    if info is None or name in seen:
        return []
    longest: list[str] = []
    for base in info.bases:
        up = _chain(base, classes, seen | {name})
        if len(up) > len(longest):
            longest = up
    return [name, *longest]


def problems(root: Path) -> list[str]:
    """Every breach of the two rules under `root`, one line each."""
    classes = collect(root)
    found: list[str] = []
    for name, info in sorted(classes.items()):
        kinds = _kinds(name, classes)
        if not kinds & ASIDE:
            chain = _chain(name, classes)
            if len(chain) > MAX_CHAIN:
                found.append(
                    f"{info.where}: {name} stands on a chain of {len(chain) - 1} classes of "
                    f"the package's own (at most {MAX_CHAIN - 1}): {' < '.join(chain)}"
                )
        if not kinds & PYDANTIC and len(info.attributes) > MAX_ATTRIBUTES:
            found.append(
                f"{info.where}: {name} declares {len(info.attributes)} attributes (at most "
                f"{MAX_ATTRIBUTES}): {', '.join(sorted(info.attributes))}"
            )
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[1] / "toolkit")
    if not root.is_dir():
        print(f"{root}: no such package folder", file=sys.stderr)
        return 2
    found = problems(root.resolve())
    for line in found:
        print(line)
    if not found:  # the last step of `make check`: say it passed
        print(
            f"structure ok: {root.name} (chains of at most {MAX_CHAIN - 1} base classes, "
            f"at most {MAX_ATTRIBUTES} attributes a class)"
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
