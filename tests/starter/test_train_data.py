"""Training text preparation: every supported source, the split, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolkit.text.data import MAX_NOT_TEXT_SHARE, DataError, load_prepared, prepare_train_data

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


# --- item 9: sources that are not text ----------------------------------------------------------

TEXT = ("An ordinary sentence of training text, nothing special about it. " * 400).encode()


def _noisy(share: float, noise: bytes) -> bytes:
    """TEXT with `share` of its bytes replaced by `noise` bytes, spread evenly (test data)."""
    data = bytearray(TEXT)
    count = round(len(data) * share)
    step = len(data) / count
    for k in range(count):
        data[int(k * step)] = noise[k % len(noise)]
    return bytes(data)


def test_binary_jsonl_is_one_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "corpus.jsonl"
    source.write_bytes(b'{"text": "fine"}\n' + bytes(range(128, 256)) * 8 + b"\n")
    with pytest.raises(DataError) as info:
        prepare_train_data(source, tmp_path / "out")
    message = str(info.value)
    assert message.startswith(f"{source}:2: not UTF-8 text") and "\n" not in message


def test_random_bytes_named_txt_are_refused(tmp_path: Path) -> None:
    source = tmp_path / "noise.txt"
    source.write_bytes(np.random.default_rng(0).integers(0, 256, 200_000, np.uint8).tobytes())
    with pytest.raises(DataError, match=r"% of its bytes are not text") as info:
        prepare_train_data(source, tmp_path / "out")
    assert str(source) in str(info.value)
    assert not (tmp_path / "out" / "train.bin").exists()


@pytest.mark.parametrize(
    ("noise", "name"),
    [(b"\x00\x01\x1b\x7f", "control"), (b"\xff\xfe\xc0\x80", "invalid-utf8")],
)
def test_the_not_text_threshold_both_sides(tmp_path: Path, noise: bytes, name: str) -> None:
    below = tmp_path / "below.txt"
    below.write_bytes(_noisy(MAX_NOT_TEXT_SHARE - 0.01, noise))
    prepared = prepare_train_data(below, tmp_path / "ok")
    assert prepared.not_text_share == pytest.approx(MAX_NOT_TEXT_SHARE - 0.01, abs=0.002)
    above = tmp_path / "above.txt"
    above.write_bytes(_noisy(MAX_NOT_TEXT_SHARE + 0.01, noise))
    with pytest.raises(DataError, match="not text"):
        prepare_train_data(above, tmp_path / "refused")


def test_text_in_any_script_and_latin1_prose_pass(tmp_path: Path) -> None:
    utf8 = tmp_path / "many.txt"
    utf8.write_text("Ελληνικά, 日本語のテキスト, русский текст, emoji 🙂\tand tabs\r\n" * 300)
    assert prepare_train_data(utf8, tmp_path / "a").not_text_share == 0.0
    latin1 = tmp_path / "latin1.txt"  # a legacy encoding: accented letters are invalid UTF-8
    latin1.write_bytes(
        ("Le garçon a mangé une crème brûlée près du café. " * 300).encode("latin-1")
    )
    assert 0 < prepare_train_data(latin1, tmp_path / "b").not_text_share < MAX_NOT_TEXT_SHARE


def test_a_character_cut_by_a_block_boundary_is_text(tmp_path: Path, monkeypatch) -> None:
    import toolkit.text.data as data

    monkeypatch.setattr(data, "_BLOCK", 7)  # blocks end inside multi-byte characters
    source = tmp_path / "cut.txt"
    source.write_text("ééé ünïcödé 日本 " * 200)
    assert prepare_train_data(source, tmp_path / "out").not_text_share == 0.0


# --- item 7: what was read, pinned by hash --------------------------------------------------------


def test_hashes_of_source_train_and_validation(tmp_path: Path) -> None:
    import hashlib

    source = tmp_path / "corpus.txt"
    source.write_bytes(JOINED)
    prepared = prepare_train_data(source, tmp_path / "out", val_fraction=0.1)
    assert prepared.source_sha256 == hashlib.sha256(JOINED).hexdigest()  # `sha256sum` agrees
    train = (tmp_path / "out" / "train.bin").read_bytes()
    assert prepared.train_sha256 == hashlib.sha256(train).hexdigest()
    record = load_prepared(tmp_path / "out").record()
    assert record.train_sha256 == prepared.train_sha256 and record.val_bytes == prepared.val_bytes

    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"x" * 2000)
    (folder / "b.txt").write_bytes(b"y" * 2000)
    first = prepare_train_data(folder, tmp_path / "f1").source_sha256
    (folder / "b.txt").rename(folder / "c.txt")  # same bytes, another name: another source
    second = prepare_train_data(folder, tmp_path / "f2")
    assert second.source_sha256 != first
    assert second.train_sha256 == prepare_train_data(folder, tmp_path / "f3").train_sha256
