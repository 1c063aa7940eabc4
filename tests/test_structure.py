"""The library's classes are objects made of parts, not stacked layers of one object
(`scripts/check-structure.py`, run by `make check`): no class on a chain of more than two
classes of the package's own, none declaring more than 25 attributes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "check-structure.py"


def _check(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(folder)], capture_output=True, text=True, timeout=120
    )


def test_the_toolkit_keeps_its_classes_shallow_and_small() -> None:
    done = _check(REPO / "toolkit")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("structure ok: toolkit"), done.stdout


def test_the_check_fails_on_a_deep_chain_and_a_crowded_class(tmp_path: Path) -> None:
    package = tmp_path / "badpkg"
    (package / "layers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers" / "__init__.py").write_text("")
    # Four of the package's own classes in a line, across modules and import styles.
    (package / "layers" / "bottom.py").write_text("class Bottom:\n    pass\n")
    (package / "layers" / "middle.py").write_text(
        "from badpkg.layers.bottom import Bottom\n\n\nclass Middle(Bottom):\n    pass\n"
    )
    (package / "layers" / "upper.py").write_text(
        "from . import middle\n\n\nclass Upper(middle.Middle):\n    pass\n"
    )
    fields = "".join(f"        self.f{i} = {i}\n" for i in range(26))
    (package / "top.py").write_text(
        "from threading import Thread\n\n"
        "from badpkg.layers.upper import Upper\n\n\n"
        "class Top(Upper, Thread):\n    pass\n\n\n"
        f"class Crowded:\n    def __init__(self) -> None:\n{fields}"
    )
    # Aside: a pydantic model (any number of fields) and an exception of the package's own.
    records = "".join(f"    f{i}: int = 0\n" for i in range(30))
    (package / "records.py").write_text(
        "from pydantic import BaseModel\n\n\n"
        f"class Record(BaseModel):\n{records}\n\n"
        "class Fine(Record):\n    pass\n\n\n"
        "class Finer(Fine):\n    pass\n\n\n"
        "class Finest(Finer):\n    pass\n"
    )
    done = _check(package)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout
    chain, crowded = sorted(lines, key=lambda line: "attributes" in line)
    assert "badpkg.top.Top stands on a chain of 3 classes" in chain
    assert "Upper < badpkg.layers.middle.Middle < badpkg.layers.bottom.Bottom" in chain
    assert "badpkg.top.Crowded declares 26 attributes (at most 25)" in crowded


def test_three_in_a_line_and_25_attributes_pass(tmp_path: Path) -> None:
    package = tmp_path / "okpkg"
    package.mkdir()
    fields = "".join(f"    f{i}: int\n" for i in range(25))
    (package / "mod.py").write_text(
        "class A:\n    pass\n\n\nclass B(A):\n    pass\n\n\nclass C(B):\n    pass\n\n\n"
        f"class Full:\n{fields}"
    )
    done = _check(package)
    assert done.returncode == 0, done.stdout
    assert done.stdout.startswith("structure ok: okpkg"), done.stdout  # make check says ok
