"""The weights ablation's file handling (no sandbox): what is replaced, how, and what never runs.

Every file here stands for something a bundle may hold; the bundle is hostile, so malformed and
booby-trapped files must end as random bytes, never as an exception or code run on the host.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from toolkit.grading.ablation import (
    MAX_HEADER_BYTES,
    SUSPECT_FLOOR_PERCENT,
    ablate_file,
    ablate_folder,
    is_suspect,
)
from toolkit.results.model import Score


def _rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def _safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    header: dict[str, object] = {"__metadata__": metadata}
    blobs, offset = [], 0
    codes = {"float32": "F32", "float16": "F16", "int8": "I8", "int64": "I64"}
    for name, array in tensors.items():
        data = array.tobytes()
        header[name] = {
            "dtype": codes[str(array.dtype)],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def _read_safetensors(path: Path) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = {"F32": "<f4", "F16": "<f2", "I8": "i1", "I64": "<i8"}[entry["dtype"]]
        data = raw[8 + length + begin : 8 + length + end]
        out[name] = np.frombuffer(data, dtype=dtype).reshape(entry["shape"])
    return header, out


def test_torch_file_keeps_structure_and_gets_noise_of_each_dtype(tmp_path: Path) -> None:
    """Like the starter's weights.pt: int8 rows, float16 scales, plus bfloat16/float32."""
    gen = torch.Generator().manual_seed(0)
    saved = {
        "format": "int8-per-row-v1",
        "tensors": {
            "w": {
                "q": torch.randint(-127, 127, (64, 32), dtype=torch.int8, generator=gen),
                "scale": torch.rand(64, generator=gen).half(),
            },
            "emb": torch.randn(100, 16, generator=gen).bfloat16(),
            "ln": torch.randn(16, generator=gen) * 0.1 + 1.0,
        },
    }
    path = tmp_path / "weights.pt"
    torch.save(saved, path)
    size = path.stat().st_size
    assert ablate_file(path, _rng()) == 4
    assert path.stat().st_size == size
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None  # CRCs fixed: any zip reader accepts the file
    got = torch.load(path, weights_only=True)
    assert got["format"] == "int8-per-row-v1"
    for old, new in [
        (saved["tensors"]["w"]["q"], got["tensors"]["w"]["q"]),  # type: ignore[index]
        (saved["tensors"]["w"]["scale"], got["tensors"]["w"]["scale"]),  # type: ignore[index]
        (saved["tensors"]["emb"], got["tensors"]["emb"]),  # type: ignore[index]
        (saved["tensors"]["ln"], got["tensors"]["ln"]),  # type: ignore[index]
    ]:
        assert new.shape == old.shape and new.dtype == old.dtype
        assert torch.isfinite(new.float()).all()
        assert (new != old).float().mean() > 0.5  # replaced, not kept
        # drawn like the original: same scale (loose bounds, it is noise)
        spread_old, spread_new = old.float().std().item(), new.float().std().item()
        assert 0.5 * spread_old < spread_new < 2.0 * spread_old
        assert abs(new.float().mean().item() - old.float().mean().item()) < spread_old


def test_numpy_and_safetensors_get_same_shaped_noise(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    array = (rng.normal(size=(50, 20)) * 3.0 + 2.0).astype(np.float32)
    np.save(tmp_path / "a.npy", array)
    np.savez_compressed(tmp_path / "b.npz", x=array, n=np.arange(40, dtype=np.int64))
    _safetensors(
        tmp_path / "c.safetensors",
        {"x": array, "h": array.astype(np.float16), "q": (array * 10).astype(np.int8)},
        {"note": "kept"},
    )
    assert ablate_file(tmp_path / "a.npy", _rng()) == 1
    got = np.load(tmp_path / "a.npy")
    assert got.shape == array.shape and got.dtype == array.dtype
    assert not np.isin(got, array).any() and 1.5 < got.std() < 6.0
    assert ablate_file(tmp_path / "b.npz", _rng()) == 2
    with np.load(tmp_path / "b.npz") as npz:
        assert npz["x"].shape == array.shape and (npz["x"] != array).all()
        assert npz["n"].dtype == np.int64 and (npz["n"] != np.arange(40)).any()
    assert ablate_file(tmp_path / "c.safetensors", _rng()) == 3
    header, tensors = _read_safetensors(tmp_path / "c.safetensors")
    assert header["__metadata__"] == {"note": "kept"}
    assert tensors["x"].shape == array.shape and np.isfinite(tensors["x"]).all()
    assert (tensors["x"] != array).mean() > 0.99
    assert np.isfinite(tensors["h"]).all() and (tensors["h"] != array.astype(np.float16)).any()


def test_python_source_is_kept_and_everything_else_replaced(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "sub").mkdir(parents=True)
    source = b"RULES = {'a': 'b'}\n"
    (bundle / "inference.py").write_bytes(source)
    (bundle / "sub" / "helper.py").write_bytes(source)
    table = json.dumps({"key": "value " * 200}).encode()
    (bundle / "rules.json").write_bytes(table)
    (bundle / "sub" / "cache.pyc").write_bytes(b"\x00" * 300)
    (bundle / "config.txt").write_bytes(b"")
    np.save(bundle / "sub" / "w.npy", np.ones((8, 8), dtype=np.float32) * 3)
    counts = ablate_folder(bundle, _rng())
    assert (counts.python_kept, counts.tensor_files, counts.random_files) == (2, 1, 3)
    assert (bundle / "inference.py").read_bytes() == source
    assert (bundle / "sub" / "helper.py").read_bytes() == source
    replaced = (bundle / "rules.json").read_bytes()
    assert len(replaced) == len(table) and replaced != table
    assert (bundle / "sub" / "cache.pyc").read_bytes() != b"\x00" * 300
    assert (bundle / "config.txt").read_bytes() == b""
    assert sorted(p.name for p in bundle.rglob("*")) == sorted(
        ["inference.py", "sub", "helper.py", "rules.json", "cache.pyc", "config.txt", "w.npy"]
    )


class _Payload:
    """Unpickling this runs a shell command: the host must never do it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_booby_trapped_torch_pickle_is_parsed_never_run(tmp_path: Path) -> None:
    """Attack: a 'torch' file whose data.pkl runs a command when unpickled."""
    marker = tmp_path / "pwned"
    path = tmp_path / "weights.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"w": _Payload(marker)}, protocol=2))
        z.writestr("archive/data/0", b"\x01" * 64)
    assert ablate_file(path, _rng()) == 1  # the storage is noised, as random bytes (no dtype)
    assert not marker.exists()
    with zipfile.ZipFile(path) as z:
        assert z.read("archive/data/0") != b"\x01" * 64


@pytest.mark.parametrize(
    "content",
    [
        # safetensors headers: offsets past the end, a header longer than the file, not JSON,
        # a header claiming the parser's limit, a list instead of a dict
        struct.pack("<Q", 60)
        + b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,4096]}}  '
        + b"\0" * 16,
        struct.pack("<Q", 10**12) + b"{" + b"\0" * 40,
        struct.pack("<Q", 8) + b"{nonsens" + b"\0" * 40,
        struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{" + b"\0" * 40,
        struct.pack("<Q", 2) + b"[]" + b"\0" * 40,
        # npy: object arrays (pickled), a header that is not a literal, a truncated header
        b"\x93NUMPY\x01\x00"
        + struct.pack("<H", 70)
        + b"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }".ljust(70)
        + b"\0" * 16,
        b"\x93NUMPY\x01\x00" + struct.pack("<H", 40) + b"__import__('os').system('id')".ljust(40),
        b"\x93NUMPY\x01\x00\xff\xff{",
        # zips: a torch file whose pickle is garbage, an npz member that is not .npy data
        b"zip-torch-garbage",
        b"zip-npz-garbage",
    ],
)
def test_malformed_tensor_files_become_random_bytes(tmp_path: Path, content: bytes) -> None:
    """Attack: files crafted to break the parsers; the ablation must neither fail nor keep them."""
    path = tmp_path / "weights.bin"
    if content == b"zip-torch-garbage":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("archive/data.pkl", b"\x80\x02not a pickle at all")
            z.writestr("archive/data/0", b"\x07" * 32)
        content = buf.getvalue()
    elif content == b"zip-npz-garbage":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("x.npy", b"\x93NUMPY\x09\x00garbage" * 10)
        content = buf.getvalue()
    path.write_bytes(content)
    tensors = ablate_file(path, _rng())
    after = path.read_bytes()
    assert len(after) == len(content) and after != content
    assert [p.name for p in tmp_path.iterdir()] == ["weights.bin"]  # no leftovers
    if content.startswith(b"\x93NUMPY") or content[8:9] == b"{":
        assert tensors is None


def test_suspect_thresholds() -> None:
    def score(passed: int) -> Score:
        return Score(percent=float(passed), passed=passed, total=100)

    assert is_suspect(score(98), score(98))
    assert is_suspect(score(98), score(49))
    assert not is_suspect(score(98), score(48))  # lost more than half: the weights matter
    floor = int(SUSPECT_FLOOR_PERCENT)
    assert not is_suspect(score(floor - 1), score(floor - 1))  # too few to say anything
    assert is_suspect(score(floor), score(floor))
    assert not is_suspect(score(40), score(0))


def test_compressed_members_are_bounded_before_they_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: an .npz (or a torch data.pkl) that deflates to far more than it holds: the host
    would read and rewrite it whole. Past the bound the file just gets random bytes."""
    from toolkit.grading import ablation

    monkeypatch.setattr(ablation, "MAX_NPZ_BYTES", 2**16)
    monkeypatch.setattr(ablation, "MAX_PICKLE_BYTES", 2**16)
    npz = tmp_path / "bomb.npz"
    with zipfile.ZipFile(npz, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.npy", _npy_bytes(np.zeros(2**15, dtype=np.float32)))  # 128 KiB of zeros
    torch_file = tmp_path / "bomb.pt"
    with zipfile.ZipFile(torch_file, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", b"\x80\x02N." + b"\x00" * 2**17)
        z.writestr("archive/data/0", b"\x01" * 64, compress_type=zipfile.ZIP_STORED)
    for path in (npz, torch_file):
        before = path.read_bytes()
        assert ablate_file(path, _rng()) is None
        after = path.read_bytes()
        assert len(after) == len(before) and after != before
        assert len(before) < 2**14  # small on disk: only the bound kept the host from reading more


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()
