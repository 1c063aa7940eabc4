"""Banks: the directory an exam is built from, its validation, plug-ins and hash.

A bank is a directory holding `bank.toml` and, optionally, `plugins/*.py`:

    id = "demo"                      # names the bank in the manifest
    public = true                    # only for public banks (see exam_builder.quality)
    chance_limit = 1.0               # optional: a stricter chance floor (at most 2, the default)
    seed = "a long secret string"    # everything random derives from it
    syllables = ["ka", "vo", ...]    # invented words are made of these

    [[families]]
    family = "records"               # a built-in family or one from plugins/
    count = 13                       # questions of this family
    [families.params]                # optional: the family's knobs (see its module)
    rows = 6

A bank may also hold `solvers/*.py`: its private solver pool (see `exam_builder.pool`), which
the quality gate runs and which the bank hash leaves out (growing the pool never changes the
bank an exam came from).

A plug-in is a Python file `plugins/<name>.py` defining `FAMILY = Family(...)` (see
`exam_builder.families.base`); its family can then be listed like a built-in one.

The bank hash is the SHA-256 of every file of the bank (except `__pycache__/`, `*.pyc`,
`.git/` and the top-level `solvers/` pool), in the byte order of their relative POSIX paths,
each fed as: the path in UTF-8, a NUL byte, the content length as 8 big-endian bytes, the
content. It pins the exact bank an exam came
from without revealing it.

Every error a bank author can cause is a `BankError` whose message is one line naming the file
and the field, e.g. `banks/x/bank.toml: families[2].count: Input should be a valid integer`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from exam_builder.chance import CHANCE_LIMIT
from exam_builder.families import BUILTIN, AnyFamily, Family, Params

BANK_FILE = "bank.toml"
PLUGIN_DIR = "plugins"
POOL_DIR = "solvers"
_SKIP_DIRS = {"__pycache__", ".git"}
SEED_MIN_CHARS = 32
"""Fewest characters a seed of a bank that is not public should have (the maintainers' page
asks for 64 random hex digits): a short seed can be guessed, and every question with it."""


class BankError(ValueError):
    """A bank that cannot be used; the message is one line naming the file and the field."""


class FamilyEntry(BaseModel):
    """One `[[families]]` table of `bank.toml`."""

    model_config = ConfigDict(extra="forbid")

    family: str = Field(min_length=1, description="Family name (built-in or plug-in).")
    count: int = Field(ge=1, le=1_000_000, description="Questions of this family.")
    params: dict[str, Any] = Field(default_factory=dict, description="The family's knobs.")


class BankFile(BaseModel):
    """The contents of `bank.toml`."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Bank id, e.g. 'demo'.")
    public: bool = Field(
        default=False,
        description="A public bank (demo, validation): the public-engine gate does not apply.",
    )
    chance_limit: float = Field(
        default=CHANCE_LIMIT,
        gt=0,
        le=CHANCE_LIMIT,
        description="Highest chance floor (percent) of a family; a bank may only lower it.",
    )
    seed: str = Field(min_length=1, description="The secret every question derives from.")
    syllables: list[str] = Field(min_length=12, description="Material of invented words.")
    families: list[FamilyEntry] = Field(min_length=1, description="Families and counts.")

    @field_validator("syllables")
    @classmethod
    def _syllables(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if not re.fullmatch(r"[a-z]{2,4}", s)]
        if bad:
            raise ValueError(f"syllables must be 2-4 lowercase ASCII letters, not {bad[:3]}")
        if len(set(v)) != len(v):
            raise ValueError("syllables must be distinct")
        return v


@dataclass(frozen=True)
class BankFamily:
    """A family as this bank uses it: validated params, count, and where it came from."""

    family: AnyFamily
    params: Params
    count: int
    index: int  # position in bank.toml's [[families]], for error messages
    source: str  # "built-in" or the plug-in file, relative to the bank


@dataclass(frozen=True)
class Bank:
    """A loaded, validated bank."""

    path: Path
    id: str
    seed: str
    syllables: list[str]
    families: list[BankFamily]
    hash: str
    public: bool = False
    chance_limit: float = CHANCE_LIMIT

    def where(self, entry: BankFamily) -> str:
        """`file: field (family)` prefix for an error about one family entry."""
        origin = "" if entry.source == "built-in" else f", plug-in {entry.source}"
        return f"{self.path / BANK_FILE}: families[{entry.index}] ({entry.family.name}{origin})"


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _first_error(exc: ValidationError, prefix: tuple[int | str, ...] = ()) -> str:
    err = exc.errors()[0]
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    got = ""
    if err["type"] not in ("missing", "extra_forbidden", "value_error") and "input" in err:
        got = f", got {err['input']!r}"[:80]
    msg = err["msg"].replace("Value error, ", "")
    return f"{_field(prefix + tuple(err['loc']))}: {msg}{got}{more}"


def bank_hash(bank_dir: Path) -> str:
    """SHA-256 of the bank's files in canonical order (see the module docstring)."""
    files = []
    for path in bank_dir.rglob("*"):
        rel = path.relative_to(bank_dir)
        if rel.parts[0] == POOL_DIR:
            continue  # the private solver pool checks the exam; it is not part of the bank
        if path.is_file() and not _SKIP_DIRS.intersection(rel.parts) and path.suffix != ".pyc":
            files.append((rel.as_posix().encode("utf-8"), path))
    digest = hashlib.sha256()
    for rel_bytes, path in sorted(files):
        data = path.read_bytes()
        digest.update(rel_bytes + b"\0" + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def load_file_module(path: Path, prefix: str, what: str) -> ModuleType:
    """Run the Python file `path` as a module of its own (a bank's plug-in, a pool's solver);
    `BankError` in one line, naming `what` it is, when it cannot load or raises."""
    # A name unique to this file, so two banks' files of the same name never collide.
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    module_name = f"{prefix}{key}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise BankError(f"{path}: cannot load as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise BankError(f"{path}: {what} raised {type(exc).__name__}: {exc}") from exc
    return module


def _load_plugin(path: Path, bank_dir: Path) -> AnyFamily:
    rel = path.relative_to(bank_dir).as_posix()
    module = load_file_module(path, "_ari_bank_plugin_", f"plug-in {rel}")
    family = getattr(module, "FAMILY", None)
    if not isinstance(family, Family):
        raise BankError(f"{path}: FAMILY: must be an exam_builder.families.base.Family")
    if not (isinstance(family.params, type) and issubclass(family.params, Params)):
        raise BankError(f"{path}: FAMILY.params: must be a subclass of families.base.Params")
    if family.name in BUILTIN:
        raise BankError(f"{path}: FAMILY.name: {family.name!r} is a built-in family")
    return family


def weak_seed(bank: Bank) -> str | None:
    """Why the seed of a bank that is not public looks guessable, in one line (None: it does
    not, or the bank is public). A warning, not a refusal: tests and drafts use short seeds."""
    seed = bank.seed
    if bank.public or (len(seed) >= SEED_MIN_CHARS and len(set(seed)) >= 10):
        return None
    return (
        f"{bank.path / BANK_FILE}: seed has {len(seed)} characters ({len(set(seed))} distinct): "
        "a hidden bank is as secret as its seed; use a long random one, e.g. "
        '`python -c "import secrets; print(secrets.token_hex(32))"`'
    )


def load_bank(bank_dir: Path) -> Bank:
    """Read and validate a bank directory (raises `BankError` with a one-line message)."""
    toml_path = bank_dir / BANK_FILE
    if not toml_path.is_file():
        raise BankError(f"{toml_path}: not found; a bank is a directory with a {BANK_FILE}")
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BankError(f"{toml_path}: not valid TOML: {exc}") from exc
    try:
        spec = BankFile.model_validate(raw)
    except ValidationError as exc:
        raise BankError(f"{toml_path}: {_first_error(exc)}") from exc

    available: dict[str, tuple[AnyFamily, str]] = {n: (f, "built-in") for n, f in BUILTIN.items()}
    plugin_dir = bank_dir / PLUGIN_DIR
    plugins = sorted(plugin_dir.glob("*.py")) if plugin_dir.is_dir() else []
    for path in plugins:
        family = _load_plugin(path, bank_dir)
        if family.name in available:
            raise BankError(f"{path}: FAMILY.name: {family.name!r} is defined twice")
        available[family.name] = (family, path.relative_to(bank_dir).as_posix())

    families: list[BankFamily] = []
    seen: set[str] = set()
    for i, entry in enumerate(spec.families):
        where = f"{toml_path}: families[{i}]"
        if entry.family not in available:
            known = ", ".join(available)
            raise BankError(f"{where}.family: unknown family {entry.family!r}; known: {known}")
        if entry.family in seen:
            raise BankError(f"{where}.family: {entry.family!r} is listed twice")
        seen.add(entry.family)
        family, source = available[entry.family]
        try:
            params = family.params.model_validate(entry.params)
        except ValidationError as exc:
            raise BankError(f"{toml_path}: {_first_error(exc, ('families', i, 'params'))}") from exc
        undeclared = sorted(set(params.tiers) - set(family.tiers))
        if undeclared:
            raise BankError(
                f"{where}.params.tiers: the family {entry.family!r} makes tiers "
                f"{list(family.tiers)}, not {undeclared}"
            )
        families.append(BankFamily(family, params, entry.count, i, source))
    return Bank(
        path=bank_dir,
        id=spec.id,
        seed=spec.seed,
        syllables=spec.syllables,
        families=families,
        hash=bank_hash(bank_dir),
        public=spec.public,
        chance_limit=spec.chance_limit,
    )
