"""Training text for a run: any common text source -> a byte-level train/validation split.

The starter model reads raw bytes (vocabulary 256), so preparation is only: stream the text out
of its container, join documents with a newline, and write two flat `uint8` files that
`numpy.memmap` opens without parsing. The last `val_fraction` of the bytes is held out as
validation; taking the tail (not random documents) keeps preparation a single streaming pass.

Sources (`--train-data PATH`): a `.txt` file (one document), a `.jsonl` file with a `text`
field per line, a `.parquet` file with a `text` column (read a row group at a time), or a folder
of any of those (found recursively, read in sorted path order, e.g. FineWeb parquet shards).
`None` means the default corpus (`toolkit.text.corpus`). Large inputs are streamed: memory stays at
one block or row group, never the whole corpus.

Every run must get the same training text, so the preparation is pinned by hash: of the source
(what was read), of the prepared training bytes and of the validation bytes (`meta.json`, and
the run's effective config). And text it must be: a source whose bytes are mostly not text
(invalid UTF-8 or control characters, e.g. a binary file named `.txt`) is refused, because a
byte model trained on noise is a run that measures nothing.

A track may name its training text by a recipe (`Track.train_data`: a public dataset, which
shards in which order, how many bytes, how documents are cleaned); `prepare_recipe` makes the
prepared files from the downloaded shards, and `toolkit data prepare --track` checks them
against the track's pin. A folder that already holds prepared files (`train.bin`, `val.bin`,
`meta.json`) is used as it is: its bytes are re-hashed, never taken from `meta.json`.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from toolkit.results.model import TrainData
from toolkit.text import corpus
from toolkit.tracks.model import TrainDataRecipe

TRAIN_FILE = "train.bin"
VAL_FILE = "val.bin"
META_FILE = "meta.json"
_BLOCK = 1 << 20
# Above this share of bytes that are not text (invalid UTF-8, or control characters other than
# tab, newline, carriage return and form feed) a source is refused: it is mostly not text.
# Measured: random bytes 54%, gzip 50%, an ELF binary 65%, UTF-16 text 52%, Russian in cp1251
# 78% (refused too: training text is UTF-8); ordinary UTF-8 text in any script 0%, Latin-1
# prose 2-5% (14% for a sentence dense with accents). Between WARN and MAX it is used, and the
# share is recorded with the run's training data and shown by `toolkit run`.
MAX_NOT_TEXT_SHARE = 0.25
WARN_NOT_TEXT_SHARE = 0.01
# Control bytes that text does not contain (tab, LF, FF and CR are text).
_CONTROL = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F])


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
    source_sha256: str = Field(description="SHA-256 of the source (see `source_sha256`).")
    not_text_share: float = Field(
        description="Share of the prepared bytes that are not text (invalid UTF-8, control)."
    )

    def record(self) -> TrainData:
        """The part of this that a run's effective config records."""
        return TrainData(
            source=self.source,
            source_sha256=self.source_sha256,
            train_sha256=self.train_sha256,
            val_sha256=self.val_sha256,
            train_bytes=self.train_bytes,
            val_bytes=self.val_bytes,
            not_text_share=self.not_text_share,
        )


def load_prepared(out_dir: Path) -> PreparedData:
    """The `meta.json` that `prepare_train_data` wrote into `out_dir`."""
    return PreparedData.model_validate_json((out_dir / META_FILE).read_bytes())


class _TextMeter:
    """Counts the bytes of a stream that are not text: invalid UTF-8 and control characters.

    Fed block by block; a multi-byte character cut by a block boundary is decoded whole."""

    def __init__(self) -> None:
        self.total = 0
        self.not_text = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")

    def feed(self, block: bytes, final: bool = False) -> None:
        self.total += len(block)
        self.not_text += len(block) - len(block.translate(None, _CONTROL))
        if block.isascii() and not self._decoder.getstate()[0]:
            return  # the common case: plain ASCII has no invalid sequence
        text = self._decoder.decode(block, final)
        # surrogateescape turns each invalid byte into one lone surrogate, which 'ignore'
        # then drops on the way back: the difference is the count of invalid bytes.
        self.not_text += len(text.encode("utf-8", "surrogateescape")) - len(
            text.encode("utf-8", "ignore")
        )

    def finish(self) -> None:
        self.feed(b"", final=True)

    @property
    def share(self) -> float:
        return self.not_text / self.total if self.total else 0.0


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
                record = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"{path}:{n}: not UTF-8 text (byte {line[exc.start]:#04x} at column "
                    f"{exc.start + 1}); .jsonl training text must be UTF-8 JSON, one object a line"
                ) from exc
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


def _source_files(source: Path) -> list[Path]:
    """The files a source is read from, in reading order."""
    if not source.exists():
        raise DataError(f"{source}: training text not found; check --train-data")
    if source.is_dir():
        files = sorted(p for p in source.rglob("*") if p.suffix.lower() in _READERS)
        if not files:
            raise DataError(
                f"{source}: no .txt, .jsonl or .parquet files in this folder; add some or "
                "pass one file"
            )
        return files
    if source.suffix.lower() not in _READERS:
        raise DataError(
            f"{source}: unsupported training text "
            f"({repr(source.suffix) if source.suffix else 'no file extension'}); use .txt, "
            ".jsonl (field 'text'), .parquet (column 'text'), or a folder of those"
        )
    return [source]


def check_source(source: Path) -> None:
    """DataError when `source` cannot be training text (missing, no readable files, a type we
    do not read): cheap, so a command can refuse it before it writes anything."""
    _source_files(source)


def _documents(files: list[Path]) -> Iterator[Iterator[bytes]]:
    return (doc for f in files for doc in _READERS[f.suffix.lower()](f))


def _blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        yield from iter(lambda: f.read(_BLOCK), b"")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    for block in _blocks(path):
        digest.update(block)
    return digest.hexdigest()


def source_sha256(source: Path, files: Iterable[Path]) -> str:
    """SHA-256 of a source: a file's own SHA-256 (what `sha256sum` prints); for a folder, the
    SHA-256 over every file read, in reading order, each as its path relative to the folder
    (UTF-8), a NUL byte, its length as 8 big-endian bytes, and its bytes."""
    if not source.is_dir():
        return _sha256(source)
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(source).as_posix().encode() + b"\0")
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        for block in _blocks(path):
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
    """Write `train.bin`, `val.bin` (raw uint8 bytes) and `meta.json` into `out_dir`.

    `source`: a text source (see the module docstring), a folder of prepared files (copied and
    re-hashed), or None for the default corpus."""
    if source is not None and is_prepared(source):
        return use_prepared(source, out_dir)
    if source is None:
        text = corpus.default_corpus()
        return _write(
            iter([iter([text])]),
            out_dir,
            name="default corpus",
            licence=corpus.LICENSE,
            source_digest=lambda: hashlib.sha256(text).hexdigest(),
            val_fraction=val_fraction,
            where="the default corpus",
        )
    files = _source_files(source)
    return _write(
        _documents(files),
        out_dir,
        name=str(source),
        licence="as supplied by the operator (unknown to the toolkit)",
        source_digest=lambda: source_sha256(source, files),
        val_fraction=val_fraction,
        where=str(source),
    )


def _write(
    docs: Iterator[Iterator[bytes]],
    out_dir: Path,
    *,
    name: str,
    licence: str,
    source_digest: Callable[[], str],
    val_fraction: float,
    where: str,
) -> PreparedData:
    """Join `docs` with newlines into train.bin + val.bin (the tail) and write meta.json.

    `source_digest` is called after the documents were read (a recipe knows only then which
    shards it read)."""
    if not 0 < val_fraction < 1:
        raise DataError(f"val_fraction must be between 0 and 1, got {val_fraction}")
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out_dir / f".all.{os.getpid()}.tmp"
    total = documents = 0
    meter = _TextMeter()
    try:
        with partial.open("wb") as out:
            for doc in docs:
                if documents:
                    out.write(b"\n")  # a document boundary the model can learn
                    meter.feed(b"\n")
                    total += 1
                documents += 1
                for block in doc:
                    out.write(block)
                    meter.feed(block)
                    total += len(block)
        meter.finish()
        val_bytes = max(1, int(total * val_fraction))
        if total - val_bytes < 1024:
            raise DataError(
                f"{where}: only {total} bytes of text; need at least 1 KiB of training text"
            )
        if meter.share > MAX_NOT_TEXT_SHARE:
            raise DataError(
                f"{where}: {100 * meter.share:.0f}% of its bytes are not text (invalid UTF-8 or "
                f"control characters; at most {100 * MAX_NOT_TEXT_SHARE:.0f}% allowed): is it a "
                "binary file, or another encoding? pass UTF-8 text"
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
        source_sha256=source_digest(),
        not_text_share=round(meter.share, 6),
    )
    (out_dir / META_FILE).write_text(prepared.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return prepared


# ----------------------------------------------------------------------------------------------
# A folder prepared earlier (by `toolkit data prepare`): used as it is, its bytes re-hashed.


def is_prepared(path: Path) -> bool:
    """Whether `path` is a folder of prepared files (train.bin, val.bin and meta.json)."""
    return path.is_dir() and all((path / n).is_file() for n in (TRAIN_FILE, VAL_FILE, META_FILE))


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)  # same file system: no second copy of gigabytes
    except OSError:
        with src.open("rb") as fin, dst.open("wb") as fout:
            for block in iter(lambda: fin.read(_BLOCK), b""):
                fout.write(block)


def use_prepared(prepared_dir: Path, out_dir: Path) -> PreparedData:
    """Bring a prepared folder's files into `out_dir` and describe them from their own bytes.

    Only the source's name, licence, document count and source hash come from its `meta.json`;
    sizes, hashes and the share of non-text bytes are measured here, and a folder whose bytes
    no longer match its `meta.json` is refused."""
    try:
        claimed = load_prepared(prepared_dir)
    except (ValueError, OSError) as exc:
        raise DataError(f"{prepared_dir / META_FILE}: not a meta.json of prepared data") from exc
    if prepared_dir.resolve() == out_dir.resolve():
        raise DataError(f"{prepared_dir}: already the output folder; pass another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    measured: dict[str, tuple[int, str]] = {}
    meter = _TextMeter()
    for name in (TRAIN_FILE, VAL_FILE):
        _link_or_copy(prepared_dir / name, out_dir / name)
        digest = hashlib.sha256()
        size = 0
        for block in _blocks(out_dir / name):
            digest.update(block)
            meter.feed(block)
            size += len(block)
        measured[name] = (size, digest.hexdigest())
    meter.finish()
    (train_bytes, train_sha), (val_bytes, val_sha) = measured[TRAIN_FILE], measured[VAL_FILE]
    if (train_sha, val_sha) != (claimed.train_sha256, claimed.val_sha256):
        raise DataError(
            f"{prepared_dir}: train.bin/val.bin changed since meta.json was written "
            f"(sha256 {train_sha[:12]}.../{val_sha[:12]}...); prepare the folder again"
        )
    if train_bytes < 1024 or meter.share > MAX_NOT_TEXT_SHARE:
        raise DataError(f"{prepared_dir}: not enough training text, or mostly not text")
    prepared = claimed.model_copy(
        update={
            "train_bytes": train_bytes,
            "val_bytes": val_bytes,
            "not_text_share": round(meter.share, 6),
        }
    )
    (out_dir / META_FILE).write_text(prepared.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return prepared


# ----------------------------------------------------------------------------------------------
# A track's recipe: named shards of a public dataset, read in order up to a byte count.

# utf8-v1 removes these: control characters other than tab and LF (CR is turned into LF first).
_DROP_CONTROL = dict.fromkeys([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])


def clean_utf8_v1(text: str) -> str:
    """The 'utf8-v1' cleaning of one document: CRLF and CR to LF, control characters other than
    tab and LF removed, leading and trailing whitespace stripped."""
    return text.replace("\r\n", "\n").replace("\r", "\n").translate(_DROP_CONTROL).strip()


def _recipe_documents(
    recipe: TrainDataRecipe, source_dir: Path, read: list[Path]
) -> Iterator[Iterator[bytes]]:
    """The recipe's cleaned documents, stopping before the first that would pass `max_bytes`;
    appends each shard to `read` as it is opened."""
    total = 0
    for shard in recipe.shards:
        if Path(shard).is_absolute() or ".." in Path(shard).parts:
            raise DataError(f"shard '{shard}': must be a path inside the download folder")
        path = source_dir / shard
        if not path.is_file():
            raise DataError(
                f"{path}: shard '{shard}' of {recipe.dataset} not found under {source_dir}; "
                f"download it first: {recipe.download}"
            )
        read.append(path)
        for doc in _parquet_docs(path):
            text = clean_utf8_v1(b"".join(doc).decode("utf-8", "replace"))
            if not text:
                continue
            data = text.encode("utf-8", "replace")
            total += len(data) + (1 if total else 0)
            if total > recipe.max_bytes:
                return
            yield iter([data])
    raise DataError(
        f"{source_dir}: the {len(recipe.shards)} shards of the recipe hold fewer than "
        f"{recipe.max_bytes:,} bytes of text; is the download complete and of the right dataset?"
    )


def prepare_recipe(recipe: TrainDataRecipe, source_dir: Path, out_dir: Path) -> PreparedData:
    """Prepare a track's training text from its downloaded shards (`source_dir`)."""
    if not source_dir.is_dir():
        raise DataError(
            f"{source_dir}: not a folder; pass the folder the shards were downloaded into "
            f"({recipe.download})"
        )
    read: list[Path] = []
    return _write(
        _recipe_documents(recipe, source_dir, read),
        out_dir,
        name=f"{recipe.dataset} (recipe {recipe.cleaning}, {recipe.max_bytes:,} bytes)",
        licence=recipe.licence,
        source_digest=lambda: source_sha256(source_dir, read),
        val_fraction=recipe.val_fraction,
        where=f"{recipe.dataset} in {source_dir}",
    )
