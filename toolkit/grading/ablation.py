"""The weights ablation: a model-free diagnostic run at the final grading (issue 18.3).

A trained model's score lives in its weights; a bundle of hand-written rules keyed on the exam
families' wording keeps its score without them. So the final grading runs phase 1 a second
time, in a fresh sandbox under the same protocol, on a copy of the bundle whose files are all
replaced by noise except its Python source (`*.py`):

- tensor files of a known format keep their structure and get same-shaped, same-dtype noise:
  safetensors (JSON header + raw tensors), numpy `.npy` and `.npz`, and torch's zip format
  (`torch.save`). Each numeric tensor is redrawn from a normal distribution with the mean and
  standard deviation of its own finite values (integers rounded and clipped to their type,
  booleans as fair coin flips), so that a loaded model computes on plausible numbers instead of
  failing on NaN. The format is recognised by its bytes, never by its file name;
- in a torch zip file the tensor storages (`<archive>/data/<key>` entries, stored uncompressed)
  are overwritten in place and their CRCs fixed; the dtype of each storage is read from the
  pickle's opcodes (`pickletools.genops`), which parses without executing: the host never
  unpickles a bundle's file. A storage of a type not listed here gets random bytes;
- every other file, and any tensor file that does not parse, gets random bytes of its size.

What stays is the Python source and the tensor files' structure (names, shapes, dtypes, the
pickle's other values, safetensors metadata): rules kept there survive the ablation and are
flagged, which is the point. A bundle whose ablated score keeps most of its real score
(`SUSPECT_SHARE`) and is not negligible (`SUSPECT_FLOOR_PERCENT`) is a *model-free suspect*: a
diagnostic for a reviewer, never a change of score.

It is a filter for naive bundles, not a detector of model-free ones. Limits (also in the
maintainers' docs and the methodology page): rules kept in a non-Python file (a text file that
`inference.py` executes, a JSON table, a compiled `.pyc`, a native library) are destroyed with
the weights, so such a bundle collapses like a model and is not flagged; a bundle that checks
its own files (the hash of a dummy weights file) can tell that it is being ablated and fail on
purpose; weights written into a `.py` file survive, so such a model would be flagged (a false
alarm for a reviewer to clear). The run publishes the promoted bundle's code
(`toolkit.run.artifacts.write_promoted_code`) so that a reviewer can read what scored.

Nothing the bundle says in the ablated pass is kept: a crash, a hang or a malformed reply there
is expected (noise) and scores 0 with a fixed note; only the pass count is published, and in a
hidden grading only rounded down to a tenth of the exam, the flag computed from that
(`publish.coarse_ablation`: the ablated pass sees the hidden prompts too).
"""

from __future__ import annotations

import json
import math
import os
import pickletools
import struct
import tarfile
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from toolkit.grading.pack import BundleError, extract_bundle
from toolkit.grading.phases import Outcome, Progress
from toolkit.grading.report import Ablation, AblationCounts
from toolkit.grading.session import WorkerFailure
from toolkit.results.model import Score

SUSPECT_SHARE = 0.5
"""A bundle is a suspect when its ablated score is at least this share of its real score..."""
SUSPECT_FLOOR_PERCENT = 5.0
"""...and at least this many percent of the exam (a model that guesses a few survives noise)."""

CHUNK_ELEMENTS = 1 << 22  # noise is drawn and written in chunks: bounded host memory
MAX_HEADER_BYTES = 100 * 2**20  # a safetensors header larger than this is not parsed
MAX_NPZ_BYTES = 2**30  # an .npz unpacking to more than this (members' sizes) is not parsed
MAX_PICKLE_BYTES = 64 * 2**20  # a torch file's data.pkl larger than this is not parsed

NOTE_DONE = "ablated phase 1 completed"
NOTE_FAILED = "the bundle failed on the ablated files (expected for a model): ablated score 0"
NOTE_SKIPPED = "not run: phase 1 did not complete"


def is_suspect(real: Score, ablated: Score) -> bool:
    """Whether an ablated score keeps most of the real one and is above the floor."""
    if ablated.percent < SUSPECT_FLOOR_PERCENT:
        return False
    return ablated.passed >= SUSPECT_SHARE * real.passed


# -- noise -----------------------------------------------------------------------------------

_SAFETENSORS_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "bf16",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U64": "<u8",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "bool",
}
_TORCH_STORAGES = {
    "DoubleStorage": "<f8",
    "FloatStorage": "<f4",
    "HalfStorage": "<f2",
    "BFloat16Storage": "bf16",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "bool",
}


def _values(raw: np.ndarray, kind: str) -> np.ndarray:
    """Raw bytes (uint8) of one chunk as numbers (bfloat16 widened to float32)."""
    if kind == "bf16":
        return (raw.view("<u2").astype("<u4") << 16).view("<f4")
    return raw.view(np.dtype(kind))


def _encode(values: np.ndarray, kind: str) -> np.ndarray:
    """Numbers back to the raw bytes of `kind` (uint8)."""
    if kind == "bf16":
        return (values.astype("<f4").view("<u4") >> 16).astype("<u2").view(np.uint8)
    dtype = np.dtype(kind)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = np.clip(np.rint(values), info.min, info.max)
    elif dtype.itemsize < values.dtype.itemsize:  # a wide spread must not overflow to inf
        top = float(np.finfo(dtype).max)
        values = np.clip(values, -top, top)
    return values.astype(dtype).view(np.uint8)


def _noise_region(buf: np.ndarray, kind: str, rng: np.random.Generator) -> None:
    """Overwrite `buf` (uint8, writable) with noise of `kind`, drawn like its own values."""
    size = 2 if kind == "bf16" else np.dtype(kind).itemsize
    usable = len(buf) - len(buf) % size
    step = CHUNK_ELEMENTS * size
    if kind == "bool":
        for start in range(0, len(buf), step):
            part = buf[start : start + step]
            part[:] = rng.integers(0, 2, size=len(part), dtype=np.uint8)
        return
    count, total, squares = 0, 0.0, 0.0
    for start in range(0, usable, step):
        values = _values(buf[start : min(start + step, usable)], kind).astype(np.float64)
        if not np.isfinite(values).all():
            values = values[np.isfinite(values)]
        count += len(values)
        total += float(values.sum())
        squares += float(np.dot(values, values))
    mean = total / count if count else 0.0
    var = squares / count - mean * mean if count else 1.0
    std = math.sqrt(var) if math.isfinite(var) and var > 0 else 0.0
    if not math.isfinite(mean):
        mean, std = 0.0, 1.0
    wide = kind not in ("bf16", "bool") and np.dtype(kind).itemsize == 8
    draw = np.float64 if wide else np.float32  # float32 noise is enough for narrower types
    for start in range(0, usable, step):
        part = buf[start : min(start + step, usable)]
        noise = rng.standard_normal(len(part) // size, dtype=draw)
        noise *= std
        noise += mean
        part[:] = _encode(noise, kind)
    if usable < len(buf):
        buf[usable:] = np.frombuffer(rng.bytes(len(buf) - usable), dtype=np.uint8)


def _random_file(path: Path, rng: np.random.Generator) -> None:
    """Replace the file's bytes with random bytes of the same size."""
    size = path.stat().st_size
    with path.open("r+b") as f:
        for start in range(0, size, CHUNK_ELEMENTS):
            f.write(rng.bytes(min(CHUNK_ELEMENTS, size - start)))


# -- formats ---------------------------------------------------------------------------------


def _safetensors(path: Path, rng: np.random.Generator) -> int | None:
    """Noise for each tensor of a safetensors file; the count, or None if it is not one."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(9)
        if len(head) < 9 or head[8:9] != b"{":
            return None
        (length,) = struct.unpack("<Q", head[:8])
        if length > min(size - 8, MAX_HEADER_BYTES):
            return None
        f.seek(8)
        header = json.loads(f.read(length))
    if not isinstance(header, dict):
        return None
    start = 8 + length
    regions: list[tuple[int, int, str]] = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        if not 0 <= begin <= end <= size - start:
            return None
        regions.append((start + begin, start + end, _SAFETENSORS_DTYPES.get(entry["dtype"], "")))
    buf = np.memmap(path, dtype=np.uint8, mode="r+")
    try:
        for begin, end, kind in regions:
            part = buf[begin:end]
            if kind:
                _noise_region(part, kind, rng)
            else:  # e.g. float8: no dtype here, and random bytes are harmless numbers there
                part[:] = np.frombuffer(rng.bytes(end - begin), dtype=np.uint8)
        buf.flush()
    finally:
        del buf
    return len(regions)


def _npy_header(data: bytes | np.ndarray) -> tuple[int, str] | None:
    """(offset of the array's bytes, dtype) of an .npy file's bytes; None if not plain numbers."""
    raw = bytes(data[:16])
    if not raw.startswith(b"\x93NUMPY") or len(raw) < 10:
        return None
    major = raw[6]
    if major == 1:
        (length,) = struct.unpack("<H", raw[8:10])
        offset = 10 + length
    elif major in (2, 3):
        (length,) = struct.unpack("<I", raw[8:12])
        offset = 12 + length
    else:
        return None
    if length > 2**16:
        return None
    header = bytes(data[offset - length : offset]).decode("latin1")
    # The header is a Python literal: parsed with numpy's own safe reader (ast.literal_eval).
    descr = np.dtype(_literal(header)["descr"])  # type: ignore[call-overload]
    if descr.hasobject or descr.fields is not None or descr.subdtype is not None:
        return None
    kind = descr.str if descr.kind in "fiub" else ""
    if descr.kind == "b":
        kind = "bool"
    if not kind or (descr.byteorder == ">" and descr.itemsize > 1):
        return None
    return offset, kind


def _literal(text: str) -> dict[str, object]:
    import ast

    value = ast.literal_eval(text)
    if not isinstance(value, dict):
        raise ValueError("not a header dictionary")
    return value


def _npy(path: Path, rng: np.random.Generator) -> int | None:
    buf = np.memmap(path, dtype=np.uint8, mode="r+")
    try:
        found = _npy_header(buf)
        if found is None:
            return None
        offset, kind = found
        _noise_region(buf[offset:], kind, rng)
        buf.flush()
    finally:
        del buf
    return 1


def _npz(path: Path, rng: np.random.Generator) -> int | None:
    """An .npz: a zip of .npy members, rewritten member by member (they may be deflated)."""
    with zipfile.ZipFile(path) as zin:
        infos = zin.infolist()
        if not infos or not all(i.filename.endswith(".npy") for i in infos):
            return None
        if sum(i.file_size for i in infos) > MAX_NPZ_BYTES:  # e.g. a deflated bomb of zeros
            return None
        out = path.with_name(path.name + ".ablated")
        count = 0
        try:
            with zipfile.ZipFile(out, "w") as zout:
                for info in infos:
                    data = np.frombuffer(bytearray(zin.read(info)), dtype=np.uint8)
                    found = _npy_header(data)
                    if found is None:  # not plain numbers: the whole file gets random bytes
                        return None
                    _noise_region(data[found[0] :], found[1], rng)
                    count += 1
                    zout.writestr(info, data.tobytes(), compress_type=info.compress_type)
            os.replace(out, path)
        finally:
            out.unlink(missing_ok=True)  # gone already when it replaced the file
    return count


def _torch_storage_types(pickle_bytes: bytes) -> dict[str, str]:
    """Storage key -> dtype kind, read from the opcodes of a torch pickle (never executed).

    torch.save writes each storage as the persistent id ('storage', torch.<Type>Storage, key,
    location, numel): the key is the first string after the storage type (which may be a memo
    reference to an earlier one)."""
    memo: dict[int, object] = {}
    recent: list[object] = []
    pending: str | None = None
    found: dict[str, str] = {}
    for op, arg, _pos in pickletools.genops(pickle_bytes):
        value: object = None
        if op.name in ("GLOBAL", "INST"):
            value = ("global", str(arg))
        elif op.name == "STACK_GLOBAL" and len(recent) >= 2:
            value = ("global", f"{recent[-2]} {recent[-1]}")
        elif isinstance(arg, str) and ("UNICODE" in op.name or op.name.endswith("STRING")):
            value = str(arg)
        elif op.name in ("BINPUT", "LONG_BINPUT", "PUT") and recent and isinstance(arg, int):
            memo[arg] = recent[-1]
            continue
        elif op.name == "MEMOIZE" and recent:
            memo[len(memo)] = recent[-1]
            continue
        elif op.name in ("BINGET", "LONG_BINGET", "GET") and isinstance(arg, int):
            value = memo.get(arg)
        recent = [*recent[-1:], value]
        if isinstance(value, tuple):
            module, _, name = value[1].partition(" ")
            pending = _TORCH_STORAGES.get(name) if module == "torch" else None
        elif isinstance(value, str) and pending is not None:
            found[value], pending = pending, None
    return found


def _torch_zip(path: Path, rng: np.random.Generator) -> int | None:
    """Noise into each `data/<key>` storage of a torch zip file, in place, CRCs fixed."""
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        pickles = [i for i in infos if i.filename.endswith("/data.pkl")]
        if len(pickles) != 1 or pickles[0].file_size > MAX_PICKLE_BYTES:
            return None
        prefix = pickles[0].filename[: -len("data.pkl")] + "data/"
        types = _torch_storage_types(z.read(pickles[0]))
        start_dir: int = z.start_dir
    storages = [i for i in infos if i.filename.startswith(prefix)]
    if any(i.compress_type != zipfile.ZIP_STORED for i in storages):
        return None
    buf = np.memmap(path, dtype=np.uint8, mode="r+")
    try:
        crcs: dict[str, int] = {}
        for info in storages:
            at = info.header_offset
            if bytes(buf[at : at + 4]) != b"PK\x03\x04":
                return None
            name_len, extra_len = struct.unpack("<HH", bytes(buf[at + 26 : at + 30]))
            begin = at + 30 + name_len + extra_len
            part = buf[begin : begin + info.file_size]
            if len(part) != info.file_size:
                return None
            kind = types.get(info.filename[len(prefix) :], "")
            if kind:
                _noise_region(part, kind, rng)
            else:
                part[:] = np.frombuffer(rng.bytes(len(part)), dtype=np.uint8)
            crc = zlib.crc32(part.data)
            crcs[info.filename] = crc
            _fix_local_crc(buf, info, begin, crc)
        _fix_central_crcs(buf, start_dir, crcs)
        buf.flush()
    finally:
        del buf
    return len(storages)


def _fix_local_crc(buf: np.ndarray, info: zipfile.ZipInfo, begin: int, crc: int) -> None:
    """The CRC in the local header, or in the data descriptor after the data (flag bit 3)."""
    at = info.header_offset + 14
    if info.flag_bits & 0x08:
        at = begin + info.compress_size
        if bytes(buf[at : at + 4]) == b"PK\x07\x08":
            at += 4
    buf[at : at + 4] = np.frombuffer(struct.pack("<I", crc), dtype=np.uint8)


def _fix_central_crcs(buf: np.ndarray, at: int, crcs: dict[str, int]) -> None:
    while bytes(buf[at : at + 4]) == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack("<HHH", bytes(buf[at + 28 : at + 34]))
        name = bytes(buf[at + 46 : at + 46 + name_len]).decode("utf-8", errors="replace")
        if name in crcs:
            buf[at + 16 : at + 20] = np.frombuffer(struct.pack("<I", crcs[name]), dtype=np.uint8)
        at += 46 + name_len + extra_len + comment_len


def _by_content(path: Path, rng: np.random.Generator) -> int | None:
    """Noise in a tensor file of a known format (by its first bytes); None: not one."""
    with path.open("rb") as f:
        magic = f.read(9)
    if magic.startswith(b"\x93NUMPY"):
        return _npy(path, rng)
    if magic.startswith(b"PK\x03\x04"):
        with zipfile.ZipFile(path) as z:
            torch = any(n.endswith("/data.pkl") for n in z.namelist())
        return _torch_zip(path, rng) if torch else _npz(path, rng)
    if len(magic) == 9 and magic[8:9] == b"{":
        return _safetensors(path, rng)
    return None


def ablate_file(path: Path, rng: np.random.Generator) -> int | None:
    """Replace one non-Python file by noise; the tensors noised, or None for random bytes.

    Any failure to parse the file (it is the bundle's, hence hostile) falls back to random
    bytes of its size: a malformed file can never make the ablation itself fail."""
    try:
        tensors = _by_content(path, rng)
    except Exception:  # whatever a hostile file makes a parser raise
        tensors = None
    if tensors is None:
        _random_file(path, rng)
    return tensors


def ablate_folder(root: Path, rng: np.random.Generator | None = None) -> AblationCounts:
    """Ablate, in place, a bundle extracted by the grader (regular files and folders only)."""
    rng = rng or np.random.default_rng()
    counts = AblationCounts()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        if path.suffix == ".py":
            counts.python_kept += 1
            continue
        tensors = ablate_file(path, rng)
        if tensors is None:
            counts.random_files += 1
        else:
            counts.tensor_files += 1
            counts.tensors += tensors
    return counts


def ablated_archive(archive: Path, work: Path) -> tuple[Path, AblationCounts]:
    """An uncompressed tar of the bundle in `archive` with its files ablated, in `work`.

    Plain tar: random bytes do not compress, and the sandbox's extraction reads it as is."""
    folder = work / "ablated"
    extract_bundle(archive, folder)
    counts = ablate_folder(folder)
    out = work / "ablated.tar"
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return out, counts


PhaseOne = Callable[[Path, "Outcome"], None]
"""Runs phase 1 on an archive in a fresh sandbox, filling the outcome (see `grade.py`)."""


def run(archive: Path | None, work: Path, real: Score, phase1: PhaseOne) -> Ablation:
    """Ablate the bundle in `archive` and run phase 1 on it with `phase1`.

    `archive` None: phase 1 did not complete, nothing to compare. The bundle's failures in the
    ablated pass score 0 and never raise; their text is dropped (it is the bundle's)."""
    if archive is None:
        return Ablation(note=NOTE_SKIPPED)
    started = time.monotonic()
    folder = work / "ablation"
    folder.mkdir()
    ablated, counts = ablated_archive(archive, folder)
    from toolkit.grading.phases import Outcome

    out = Outcome()
    try:
        phase1(ablated, out)
        passed, note = len(out.passed), NOTE_DONE
    except (BundleError, WorkerFailure):
        passed, note = 0, NOTE_FAILED
    score = Score(percent=100.0 * passed / real.total, passed=passed, total=real.total)
    return Ablation(
        score=score,
        model_free_suspect=is_suspect(real, score),
        note=note,
        counts=counts,
        seconds=time.monotonic() - started,
    )


def progress(report: Progress) -> Progress:
    """The progress callback of the ablated pass: its own bar, not phase 1's."""
    return lambda _name, done, total: report("ablation: generate", done, total)
