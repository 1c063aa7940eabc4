"""A track's training text: the recipe (shards, order, bytes, cleaning), its pin, and
`toolkit data prepare`, on small parquet shards made here (nothing can be downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.text.data import (
    DataError,
    clean_utf8_v1,
    load_prepared,
    prepare_recipe,
    prepare_train_data,
)
from toolkit.tracks.model import Track, TrainDataRecipe, load_tracks

SHARDS = ["sample/b_shard.parquet", "sample/a_shard.parquet", "sample/c_shard.parquet"]


def _docs(tag: str, n: int = 40) -> list[str]:
    return [f"{tag} document {i}: " + "plain words of ordinary text, " * 8 for i in range(n)]


def _download(root: Path, shards: list[str] = SHARDS[:2]) -> Path:
    """What an operator's download folder would hold: parquet shards with a 'text' column."""
    for shard in shards:
        path = root / shard
        path.parent.mkdir(parents=True, exist_ok=True)
        tag = path.stem.split("_")[0]
        docs = _docs(tag)
        pq.write_table(pa.table({"text": docs, "id": list(range(len(docs)))}), path, 7)
    return root


def _recipe(**changes: object) -> TrainDataRecipe:
    fields: dict[str, object] = {
        "dataset": "example/dataset",
        "url": "https://example.org/dataset",
        "download": "fetch-example --into DIR",
        "licence": "ODC-By 1.0",
        "shards": SHARDS,
        "max_bytes": 20_000,
        "val_fraction": 0.1,
    }
    fields.update(changes)
    return TrainDataRecipe.model_validate(fields)


def _registry(root: Path, recipe: TrainDataRecipe, **pins: str) -> Path:
    track = Track(
        id="pinned",
        title="A track with a recipe",
        benchmark_version="1.0",
        exam_sha256="0" * 64,
        exam_questions=100,
        budget_s=60,
        per_call_limit_s=30,
        reserved_s=5,
        size_limit_bytes=16_000_000,
        hardware="CPU",
        train_data=recipe,
        **pins,  # type: ignore[arg-type]
    )
    root.mkdir(parents=True, exist_ok=True)
    (root / "tracks.json").write_text(json.dumps([track.model_dump(mode="json")]))
    return root


def _text(out: Path) -> bytes:
    return (out / "train.bin").read_bytes() + (out / "val.bin").read_bytes()


def test_recipe_reads_shards_in_listed_order_up_to_max_bytes(tmp_path: Path) -> None:
    source = _download(tmp_path / "dl")
    prepared = prepare_recipe(_recipe(), source, tmp_path / "out")
    text = _text(tmp_path / "out")
    # b is listed first: its documents come first, whatever the sorted order of the names.
    b_docs = "\n".join(d.strip() for d in _docs("b")).encode()
    assert text.startswith(b_docs + b"\na document 0:")
    # Whole documents only, stopping before the one that would pass max_bytes.
    a_doc = len(_docs("a")[0].strip().encode())
    assert 20_000 - a_doc - 1 < len(text) <= 20_000
    assert text.endswith(b"text,")
    assert prepared.train_bytes + prepared.val_bytes == len(text)
    assert prepared.val_bytes == int(len(text) * 0.1)
    # The third shard is not needed, so it need not have been downloaded.
    assert not (source / SHARDS[2]).exists()


def test_the_same_download_gives_the_same_bytes(tmp_path: Path) -> None:
    source = _download(tmp_path / "dl")
    one = prepare_recipe(_recipe(), source, tmp_path / "one")
    two = prepare_recipe(_recipe(), source, tmp_path / "two")
    assert (one.train_sha256, one.val_sha256, one.source_sha256) == (
        two.train_sha256,
        two.val_sha256,
        two.source_sha256,
    )
    assert load_prepared(tmp_path / "one").licence == "ODC-By 1.0"


def test_utf8_v1_cleaning() -> None:
    assert clean_utf8_v1("  a\r\nb\rc\x00d\x1be\tf\x7f\x0cg \n") == "a\nb\ncde\tfg"
    assert clean_utf8_v1(" \r\n\x00 ") == ""


def test_cleaning_is_applied_and_empty_documents_dropped(tmp_path: Path) -> None:
    docs = ["", "  \x00 ", "first\r\nline\x07 " * 100, "second\rdoc\x1b" * 100, "third " * 50]
    (tmp_path / "dl").mkdir()
    pq.write_table(pa.table({"text": docs}), tmp_path / "dl" / "s.parquet")
    recipe = _recipe(shards=["s.parquet"], max_bytes=10**6)
    with pytest.raises(DataError, match="fewer than 1,000,000 bytes"):
        prepare_recipe(recipe, tmp_path / "dl", tmp_path / "out")
    recipe = _recipe(shards=["s.parquet"], max_bytes=len(docs[2]) + len(docs[3]) - 60)
    prepared = prepare_recipe(recipe, tmp_path / "dl", tmp_path / "out")
    text = _text(tmp_path / "out")
    assert text.startswith(b"first\nline first\nline")
    assert b"\r" not in text and b"\x00" not in text and b"\x07" not in text
    assert prepared.documents == 2


def test_a_missing_shard_says_how_to_download(tmp_path: Path) -> None:
    source = _download(tmp_path / "dl", SHARDS[:1])
    with pytest.raises(DataError, match=r"a_shard\.parquet.*fetch-example --into DIR"):
        prepare_recipe(_recipe(), source, tmp_path / "out")


@pytest.mark.parametrize("shard", ["../outside.parquet", "/etc/outside.parquet"])
def test_a_shard_outside_the_download_folder_is_refused(tmp_path: Path, shard: str) -> None:
    source = _download(tmp_path / "dl")
    with pytest.raises(DataError, match="inside the download folder"):
        prepare_recipe(_recipe(shards=[shard]), source, tmp_path / "out")


def test_too_little_text_in_the_shards_is_refused(tmp_path: Path) -> None:
    source = _download(tmp_path / "dl", SHARDS)
    with pytest.raises(DataError, match="fewer than 500,000 bytes"):
        prepare_recipe(_recipe(max_bytes=500_000), source, tmp_path / "out")


def test_a_prepared_folder_is_used_as_it_is_and_rehashed(tmp_path: Path) -> None:
    source = _download(tmp_path / "dl")
    made = prepare_recipe(_recipe(), source, tmp_path / "prepared")
    used = prepare_train_data(tmp_path / "prepared", tmp_path / "run-data")
    assert (used.train_sha256, used.val_sha256) == (made.train_sha256, made.val_sha256)
    assert _text(tmp_path / "run-data") == _text(tmp_path / "prepared")


def test_a_prepared_folder_whose_bytes_changed_is_refused(tmp_path: Path) -> None:
    """Attack: other bytes behind a meta.json that still carries the pinned hashes."""
    source = _download(tmp_path / "dl")
    prepare_recipe(_recipe(), source, tmp_path / "prepared")
    train = tmp_path / "prepared" / "train.bin"
    train.write_bytes(b"Q: 2+2? A: 4\n" * 2000)
    with pytest.raises(DataError, match=r"changed since meta\.json"):
        prepare_train_data(tmp_path / "prepared", tmp_path / "run-data")


def test_a_prepared_folder_with_a_broken_meta_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "prepared"
    folder.mkdir()
    for name in ("train.bin", "val.bin"):
        (folder / name).write_bytes(b"text " * 1000)
    (folder / "meta.json").write_text('{"source": "x"}')
    with pytest.raises(DataError, match=r"not a meta\.json"):
        prepare_train_data(folder, tmp_path / "run-data")


def _prepare(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["data", "prepare", *args])
    return result.exit_code, result.output


def test_cli_without_track_or_source_prepares_the_default_corpus(tmp_path: Path) -> None:
    code, output = _prepare("--out", str(tmp_path / "out"))
    assert code == 0, output
    assert load_prepared(tmp_path / "out").source == "default corpus"


def test_cli_refuses_a_recipe_without_a_pin_then_records_it(tmp_path: Path) -> None:
    source = _download(tmp_path / "dl")
    registry = _registry(tmp_path / "reg", _recipe())
    base = ["--track", "pinned", "--registry", str(registry), "--source", str(source)]
    code, output = _prepare(*base, "--out", str(tmp_path / "out"))
    assert code != 0 and "--record-pin" in output
    assert not (tmp_path / "out").exists()  # refused before reading gigabytes

    code, output = _prepare(*base, "--out", str(tmp_path / "out"), "--record-pin")
    assert code == 0, output
    pin = json.loads(output[output.index("{") :])
    meta = load_prepared(tmp_path / "out")
    assert pin["train_data_sha256"] == meta.train_sha256
    assert pin["val_data_sha256"] == meta.val_sha256
    assert pin["train_data"] == {"source_sha256": meta.source_sha256}

    # The maintainer puts the pin into tracks.json: the same download now matches it.
    recipe = _recipe(source_sha256=meta.source_sha256)
    _registry(
        registry, recipe, train_data_sha256=meta.train_sha256, val_data_sha256=meta.val_sha256
    )
    code, output = _prepare(*base, "--out", str(tmp_path / "again"))
    assert code == 0 and "matches the pin" in output, output
    # A folder prepared earlier is checked again the same way.
    code, output = _prepare(
        "--track", "pinned", "--registry", str(registry), "--source", str(tmp_path / "again"),
        "--out", str(tmp_path / "checked"),
    )  # fmt: skip
    assert code == 0 and "matches the pin" in output, output


def test_cli_refuses_other_shards_than_the_pinned_ones(tmp_path: Path) -> None:
    """Attack: a download of other text (a different revision, or text written to suit the
    exam) under the recipe's shard names."""
    source = _download(tmp_path / "dl")
    meta = prepare_recipe(_recipe(), source, tmp_path / "ref")
    registry = _registry(
        tmp_path / "reg",
        _recipe(source_sha256=meta.source_sha256),
        train_data_sha256=meta.train_sha256,
        val_data_sha256=meta.val_sha256,
    )
    other = [doc.replace("ordinary", "question") for doc in _docs("b")]
    pq.write_table(pa.table({"text": other}), source / SHARDS[0])
    base = ["--track", "pinned", "--registry", str(registry), "--source", str(source)]
    code, output = _prepare(*base, "--out", str(tmp_path / "out"))
    assert code != 0 and "not the training text of track 'pinned'" in output
    # Any text at all, without the recipe, does not pass for the track's either.
    code, output = _prepare(
        "--track", "pinned", "--registry", str(registry), "--out", str(tmp_path / "o2")
    )
    assert code != 0 and "download it first" in output


def test_cli_refuses_a_source_digest_mismatch_alone(tmp_path: Path) -> None:
    source = _download(tmp_path / "dl")
    meta = prepare_recipe(_recipe(), source, tmp_path / "ref")
    registry = _registry(
        tmp_path / "reg",
        _recipe(source_sha256="f" * 64),
        train_data_sha256=meta.train_sha256,
        val_data_sha256=meta.val_sha256,
    )
    base = ["--track", "pinned", "--registry", str(registry), "--source", str(source)]
    code, output = _prepare(*base, "--out", str(tmp_path / "out"))
    assert code != 0 and "shards read" in output


def test_the_official_track_names_its_training_text(repo_root: Path) -> None:
    official = load_tracks(repo_root / "results")["v1-h100-1h"]
    recipe = official.train_data
    assert recipe is not None and recipe.shards and recipe.licence
    # Sized to what an hour on an H100 reads at a good MFU (3-9 GB by the starter's estimate).
    assert recipe.max_bytes >= 9_000_000_000


def test_a_run_takes_the_prepared_folder_only_with_the_pinned_bytes(tmp_path: Path) -> None:
    """What `toolkit run --train-data PREPARED` does: prepare_data, then the track's pin."""
    from toolkit.run.inputs import prepare_data

    source = _download(tmp_path / "dl")
    meta = prepare_recipe(_recipe(), source, tmp_path / "official")
    registry = _registry(
        tmp_path / "reg",
        _recipe(source_sha256=meta.source_sha256),
        train_data_sha256=meta.train_sha256,
        val_data_sha256=meta.val_sha256,
    )
    track = load_tracks(registry)["pinned"]
    got = load_prepared(prepare_data(tmp_path / "official", tmp_path / "run1"))
    assert track.train_data_mismatch(got.train_sha256, got.val_sha256) is None
    # Attack: a consistently prepared folder of other text (its own meta.json agrees with it).
    other = tmp_path / "other.txt"
    other.write_text("Q: what is 2+2? A: 4\n" * 500)
    prepare_train_data(other, tmp_path / "other")
    got = load_prepared(prepare_data(tmp_path / "other", tmp_path / "run2"))
    assert track.train_data_mismatch(got.train_sha256, got.val_sha256) is not None


def test_cli_record_pin_needs_a_track_and_the_shards(tmp_path: Path) -> None:
    code, output = _prepare("--out", str(tmp_path / "out"), "--record-pin")
    assert code != 0 and "pass --track" in output
    source = _download(tmp_path / "dl")
    registry = _registry(tmp_path / "reg", _recipe())
    prepare_recipe(_recipe(), source, tmp_path / "prepared")
    code, output = _prepare(
        "--track", "pinned", "--registry", str(registry), "--source", str(tmp_path / "prepared"),
        "--out", str(tmp_path / "out"), "--record-pin",
    )  # fmt: skip
    assert code != 0 and "not a prepared folder" in output
