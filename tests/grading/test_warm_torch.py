"""A grading's workers import torch before the bundle loads only where the bundle's Python names
it (`toolkit/grading/warm.py`): about 2 CPU seconds a worker that a rule bundle never needs.

The scan reads hostile files: wherever it cannot be sure (a link, a FIFO, a file too large, a
compiled module, an archive that does not read, too many files) the workers warm up, as before;
it never hangs on a FIFO nor follows a link out of the bundle. And the flag reaches the worker:
a bundle that reports whether torch is loaded when its `generate` runs says "no" for a rule
bundle and "yes" once a file of it names torch.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from grading_helpers import MakeBundle, MakeExam

from toolkit.grading import warm
from toolkit.grading.grade import grade_bundle
from toolkit.tracks.model import GradingParams

RULE = "def load(bundle_dir, device):\n    return None\n"


def _folder(tmp_path: Path, files: dict[str, bytes]) -> Path:
    root = tmp_path / "bundle"
    for rel, data in {"inference.py": RULE.encode(), **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _archive(folder: Path) -> Path:
    out = folder.with_suffix(".tar.gz")
    with tarfile.open(out, "w:gz") as tar:
        tar.add(folder, arcname=".")
    return out


CASES: dict[str, tuple[dict[str, bytes], bool]] = {
    "a rule bundle": ({"table.json": b'{"torch": 1}'}, False),  # not Python: says nothing
    "numpy only": ({"model.py": b"import numpy as np\n"}, False),
    "import torch": ({"model.py": b"import torch\n"}, True),
    "from torch": ({"pkg/deep/net.py": b"from torch import nn\n"}, True),
    "named in a string": ({"model.py": b"NAME = 'torch'\n"}, True),
    "torchvision is not torch": ({"model.py": b"# torchvision_like\n"}, False),
    "a compiled module": ({"fast.so": b"\x7fELF"}, True),
    "byte code only": ({"model.pyc": b"\x00"}, True),
    "a file too large to read": ({"big.py": b"#" * (warm.MAX_SOURCE_BYTES + 1)}, True),
}


NUMPY_CASES: dict[str, tuple[dict[str, bytes], bool]] = {
    "a rule bundle": ({"table.json": b'{"numpy": 1}'}, False),
    "numpy": ({"model.py": b"import numpy as np\n"}, True),
    "torch (which imports numpy)": ({"model.py": b"import torch\n"}, True),
    "numpyro is not numpy": ({"model.py": b"# numpyro_like\n"}, False),
    "a compiled module": ({"fast.so": b"\x7fELF"}, True),
}


SCANS = [("torch", warm.names_torch, case) for case in sorted(CASES)] + [
    ("numpy", warm.names_numpy, case) for case in sorted(NUMPY_CASES)
]


@pytest.mark.parametrize(("what", "scan", "case"), SCANS)
def test_the_scan_reads_folders_and_archives_alike(
    tmp_path: Path, what: str, scan: Callable[[Path], bool], case: str
) -> None:
    files, expected = (CASES if what == "torch" else NUMPY_CASES)[case]
    folder = _folder(tmp_path, files)
    assert scan(folder) is expected
    assert scan(_archive(folder)) is expected


def test_anything_it_cannot_read_warms_up(tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("import torch\n")
    linked = _folder(tmp_path / "a", {})
    (linked / "model.py").symlink_to(outside)
    assert warm.names_torch(linked)  # a link is never followed, and never trusted

    fifo = _folder(tmp_path / "b", {})
    os.mkfifo(fifo / "model.py")
    assert warm.names_torch(fifo)  # no hang on a FIFO: not opened

    many = _folder(tmp_path / "c", {f"f{i}.txt": b"" for i in range(warm.MAX_ENTRIES + 1)})
    assert warm.names_torch(many)

    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"\x1f\x8b not really gzip")
    assert warm.names_torch(broken)
    assert warm.names_torch(tmp_path / "absent")
    assert warm.names_numpy(tmp_path / "absent")  # unreadable: warm


PROBE = """
import sys

class Probe:
    def generate(self, prompts, lengths):
        said = b"yes" if "tor" + "ch" in sys.modules else b"no"  # the scan must not see it
        said += b"yes" if "num" + "py" in sys.modules else b"no"
        return [said[:n].ljust(n, b"?") for n in lengths]

    def next_byte_logprobs(self, contexts):
        np = __import__("num" + "py")  # the scan must not see it here either
        return np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)

def load(bundle_dir, device):
    return Probe()
"""


def test_the_worker_warms_up_torch_and_numpy_only_for_a_bundle_that_names_them(
    make_bundle: MakeBundle, make_exam: MakeExam, tmp_path: Path
) -> None:
    pytest.importorskip("torch")  # the grader's interpreter has it in every supported set-up
    exam = make_exam([{"id": "q0", "family": "f", "prompt": "Say: ", "answer": "yesyes"}])
    params = GradingParams(load_timeout_s=60, batch_timeout_s=30, total_timeout_s=120)
    said: dict[str, str] = {}
    bundles = {
        "rule": {},
        "numpy": {"notes.py": b"# fitted with numpy\n"},
        "named": {"notes.py": b"# trained with torch\n"},
    }
    for name, files in bundles.items():
        written: dict[str, bytes] = {}
        grade_bundle(
            make_bundle(PROBE, name=name, files=files),
            exam,
            params=params,
            phases=("generate",),
            hidden=False,
            _written=written,
        )
        said[name] = written["q0"].decode().rstrip("?")
    assert said == {"rule": "nono", "numpy": "noyes", "named": "yesyes"}
