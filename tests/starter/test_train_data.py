"""Training text preparation: every supported source, the split, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolkit.data import DataError, prepare_train_data

DOCS = [f"Document {i}: " + "some ordinary words, " * 20 for i in range(20)]
JOINED = "\n".join(DOCS).encode()


def _check(out: Path, expected: bytes, documents: int) -> None:
    train = np.memmap(out / "train.bin", dtype=np.uint8, mode="r")
    val = np.memmap(out / "val.bin", dtype=np.uint8, mode="r")
    assert bytes(train) + bytes(val) == expected
    meta = json.loads((out / "meta.json").read_text())
    assert meta["train_bytes"] == len(train) and meta["val_bytes"] == len(val)
    assert meta["documents"] == documents and len(meta["train_sha256"]) == 64
    assert 0 < len(val) < len(train)


def test_txt_file(tmp_path: Path) -> None:
    source = tmp_path / "corpus.txt"
    source.write_bytes(JOINED)
    prepared = prepare_train_data(source, tmp_path / "out", val_fraction=0.1)
    _check(tmp_path / "out", JOINED, 1)
    assert prepared.val_bytes == int(len(JOINED) * 0.1)


def test_folder_of_files_is_read_in_sorted_order(tmp_path: Path) -> None:
    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    for i, doc in enumerate(DOCS):
        where = folder / "sub" if i % 2 else folder
        (where / f"{i:03d}.txt").write_text(doc)
    (folder / "ignored.md").write_text("not text")
    pq.write_table(pa.table({"text": ["from parquet", "second row"]}), folder / "zz.parquet")
    prepare_train_data(folder, tmp_path / "out")
    files = sorted(p for p in folder.rglob("*.txt"))
    texts = [p.read_bytes() for p in files] + [b"from parquet", b"second row"]
    _check(tmp_path / "out", b"\n".join(texts), len(DOCS) + 2)


def test_jsonl_text_field(tmp_path: Path) -> None:
    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(DOCS)))
    prepare_train_data(source, tmp_path / "out")
    _check(tmp_path / "out", JOINED, len(DOCS))


def test_parquet_text_column_streams_row_groups(tmp_path: Path) -> None:
    source = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"text": DOCS, "n": list(range(len(DOCS)))}), source, row_group_size=3)
    prepare_train_data(source, tmp_path / "out")
    _check(tmp_path / "out", JOINED, len(DOCS))


def test_default_corpus(tmp_path: Path) -> None:
    prepared = prepare_train_data(None, tmp_path / "out")
    assert prepared.source == "default corpus" and "CC BY-SA" in prepared.licence
    assert prepared.train_bytes > 1_000_000


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.txt", None, "not found"),
        ("bad.jsonl", '{"body": "x"}\n', "field 'text'"),
        ("broken.jsonl", "{not json\n", "not valid JSON"),
        ("tiny.txt", "too short", "need at least 1 KiB"),
        ("empty.jsonl", "", "only 0 bytes"),
        ("data.csv", "text\nhello\n", "unsupported"),
        ("bad.parquet", "not parquet", "not a readable parquet"),
    ],
)
def test_bad_inputs_have_clear_errors(
    tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    source = tmp_path / name
    if content is not None:
        source.write_text(content)
    with pytest.raises(DataError, match=message) as info:
        prepare_train_data(source, tmp_path / "out")
    assert str(source) in str(info.value)
    assert not (tmp_path / "out" / "train.bin").exists()


def test_parquet_without_text_column(tmp_path: Path) -> None:
    source = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"content": DOCS}), source)
    with pytest.raises(DataError, match=r"no 'text' column .*content"):
        prepare_train_data(source, tmp_path / "out")


def test_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \.txt, \.jsonl or \.parquet files"):
        prepare_train_data(tmp_path / "empty", tmp_path / "out")
