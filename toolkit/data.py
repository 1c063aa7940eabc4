"""Training text for a run: any common text source -> a byte-level train/validation split.

The starter model reads raw bytes (vocabulary 256), so preparation is only: stream the text out
of its container, join documents with a newline, and write two flat `uint8` files that
`numpy.memmap` opens without parsing. The last `val_fraction` of the bytes is held out as
validation; taking the tail (not random documents) keeps preparation a single streaming pass.

Sources (`--train-data PATH`): a `.txt` file (one document), a `.jsonl` file with a `text`
field per line, a `.parquet` file with a `text` column (read a row group at a time), or a folder
of any of those (found recursively, read in sorted path order, e.g. FineWeb parquet shards).
`None` means the default corpus (`toolkit.corpus`). Large inputs are streamed: memory stays at
one block or row group, never the whole corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from toolkit import corpus

TRAIN_FILE = "train.bin"
VAL_FILE = "val.bin"
META_FILE = "meta.json"
_BLOCK = 1 << 20


class DataError(ValueError):
    """Training text that cannot be prepared; the message names the file and what to do."""


class PreparedData(BaseModel):
    """What `prepare_train_data` wrote (also saved as `meta.json` beside the .bin files)."""

    source: str = Field(description="Where the text came from (a path, or 'default corpus').")
    licence: str = Field(description="Licence of the text as far as the toolkit knows it.")
    train_bytes: int = Field(description="Bytes in train.bin.")
    val_bytes: int = Field(description="Bytes in val.bin.")
    train_sha256: str = Field(description="SHA-256 of train.bin.")
    val_sha256: str = Field(description="SHA-256 of val.bin.")
    documents: int = Field(description="Documents (files, lines or rows) read.")
    dtype: str = Field(default="uint8", description="Element type of the .bin files.")


def _txt_docs(path: Path) -> Iterator[Iterator[bytes]]:
    """A .txt file is one document, read in blocks."""

    def blocks() -> Iterator[bytes]:
        with path.open("rb") as f:
            yield from iter(lambda: f.read(_BLOCK), b"")

    yield blocks()


def _jsonl_docs(path: Path) -> Iterator[Iterator[bytes]]:
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise DataError(f"{path}:{n}: each line needs a string field 'text'")
            yield iter([record["text"].encode("utf-8")])


def _parquet_docs(path: Path) -> Iterator[Iterator[bytes]]:
    import pyarrow.parquet as pq  # heavy import, only for parquet sources

    try:
        pfile = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise DataError(f"{path}: not a readable parquet file ({exc})") from exc
    if "text" not in pfile.schema_arrow.names:
        names = ", ".join(pfile.schema_arrow.names)
        raise DataError(f"{path}: no 'text' column (columns: {names}); rename it to 'text'")
    for i in range(pfile.num_row_groups):
        for value in pfile.read_row_group(i, columns=["text"]).column("text").to_pylist():
            if value:
                yield iter([str(value).encode("utf-8")])


_READERS: dict[str, Callable[[Path], Iterator[Iterator[bytes]]]] = {
    ".txt": _txt_docs,
    ".jsonl": _jsonl_docs,
    ".parquet": _parquet_docs,
}


def _documents(source: Path) -> Iterator[Iterator[bytes]]:
    if not source.exists():
        raise DataError(f"{source}: training text not found; check --train-data")
    if source.is_dir():
        files = sorted(p for p in source.rglob("*") if p.suffix.lower() in _READERS)
        if not files:
            raise DataError(
                f"{source}: no .txt, .jsonl or .parquet files in this folder; add some or "
                "pass one file"
            )
        return (doc for f in files for doc in _READERS[f.suffix.lower()](f))
    reader = _READERS.get(source.suffix.lower())
    if reader is None:
        raise DataError(
            f"{source}: unsupported training text '{source.suffix}'; use .txt, .jsonl (field "
            "'text'), .parquet (column 'text'), or a folder of those"
        )
    return reader(source)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _split_tail(all_path: Path, train: Path, val: Path, val_bytes: int) -> None:
    """Move the last `val_bytes` of `all_path` into `val`; the rest becomes `train`."""
    size = all_path.stat().st_size
    with all_path.open("rb") as src, val.open("wb") as dst:
        src.seek(size - val_bytes)
        for block in iter(lambda: src.read(_BLOCK), b""):
            dst.write(block)
    with all_path.open("r+b") as f:
        f.truncate(size - val_bytes)
    all_path.replace(train)


def prepare_train_data(
    source: Path | None, out_dir: Path, *, val_fraction: float = 0.01
) -> PreparedData:
    """Write `train.bin`, `val.bin` (raw uint8 bytes) and `meta.json` into `out_dir`."""
    if not 0 < val_fraction < 1:
        raise DataError(f"val_fraction must be between 0 and 1, got {val_fraction}")
    if source is None:
        docs: Iterator[Iterator[bytes]] = iter([iter([corpus.default_corpus()])])
        name, licence = "default corpus", corpus.LICENSE
    else:
        docs = _documents(source)
        name, licence = str(source), "as supplied by the operator (unknown to the toolkit)"
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out_dir / f".all.{os.getpid()}.tmp"
    total = documents = 0
    try:
        with partial.open("wb") as out:
            for doc in docs:
                if documents:
                    out.write(b"\n")  # a document boundary the model can learn
                    total += 1
                documents += 1
                for block in doc:
                    out.write(block)
                    total += len(block)
        val_bytes = max(1, int(total * val_fraction))
        if total - val_bytes < 1024:
            where = source if source is not None else "the default corpus"
            raise DataError(
                f"{where}: only {total} bytes of text; need at least 1 KiB of training text"
            )
        _split_tail(partial, out_dir / TRAIN_FILE, out_dir / VAL_FILE, val_bytes)
    finally:
        partial.unlink(missing_ok=True)
    prepared = PreparedData(
        source=name,
        licence=licence,
        train_bytes=total - val_bytes,
        val_bytes=val_bytes,
        train_sha256=_sha256(out_dir / TRAIN_FILE),
        val_sha256=_sha256(out_dir / VAL_FILE),
        documents=documents,
    )
    (out_dir / META_FILE).write_text(prepared.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return prepared
