"""Constants shared by the exam engine's tests (a plain module: tests/ is not a package)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PUBLIC = REPO / "exam_builder" / "banks" / "public"
DEMO = PUBLIC / "demo"
VALIDATION = PUBLIC / "validation"

SYLLABLES = '["ka", "vo", "rel", "tam", "zu", "ish", "orn", "bex", "qua", "lim", "dro", "fen"]'

MakeBank = Callable[..., Path]
"""`make_bank(toml_text, plugins={"name.py": source})` -> the bank directory."""
