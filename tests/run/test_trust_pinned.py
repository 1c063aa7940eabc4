"""Attack: a folder cannot vouch for its own files (issue 27, item 3).

A third party edits a result (model and seed), signs it with a key of their own and lists that
key in the folder's signing_keys.json (`toolkit keys trust` does exactly that): `runs validate`,
`runs verify` and the site must report it as untrusted. Only keys the maintainers pin count:
the toolkit's pinned_keys.json, $ARI_TRUSTED_KEYS, --keys FILE, this machine's own key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.signed_results import sign_run
from toolkit.cli import cli
from toolkit.results import signing
from toolkit.stats import load_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stats"))
from results_factory import run_dict, track_dict, write_registry


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(signing.TRUSTED_KEYS_ENV, raising=False)
    return tmp_path / "home"


def _third_party() -> tuple[Ed25519PrivateKey, signing.TrustedKey]:
    key = Ed25519PrivateKey.generate()
    raw = signing.raw_public(key)
    listed = signing.TrustedKey(
        id=signing.key_id(raw), public_key=base64.b64encode(raw).decode(), holder="third party"
    )
    return key, listed


def _forged_folder(tmp_path: Path) -> tuple[Path, Path, signing.TrustedKey]:
    """A folder with one honest run (this machine's key), then edited and re-signed by a third
    party who lists their own key in the folder."""
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    path = results / "v1-test" / "r0.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(sign_run(results, run_dict("r0")), indent=2))
    data: dict[str, Any] = json.loads(path.read_text())
    data.update(model="forged-model", seed=99)
    key, listed = _third_party()
    value = base64.b64encode(key.sign(signing.canonical(data))).decode()
    data["signature"] = {"algorithm": "ed25519", "key_id": listed.id, "value": value}
    path.write_text(json.dumps(data, indent=2))
    signing.trust(results, listed)  # what `toolkit keys trust` does on the forger's machine
    return results, path, listed


def test_a_key_the_folder_lists_for_itself_fails_validation(tmp_path: Path) -> None:
    results, path, listed = _forged_folder(tmp_path)
    done = CliRunner().invoke(cli, ["runs", "validate", str(results)])
    assert done.exit_code == 1, done.output
    assert f"{path}: signature: signed with key {listed.id}" in done.output
    assert "lists but no maintainer pinned: untrusted" in done.output
    # The way out named is for this key: `keys pin` pins this machine's own (issue 39).
    assert "copy its entry into a key list of yours" in done.output
    done = CliRunner().invoke(cli, ["runs", "validate", str(path)])  # one file: the same
    assert done.exit_code == 1 and "untrusted" in done.output, done.output


def test_verify_reports_the_folders_own_key_as_untrusted(tmp_path: Path) -> None:
    _, path, _ = _forged_folder(tmp_path)
    exam = tmp_path / "exam.jsonl"
    exam.write_text('{"answer":"a","family":"f","id":"q1","prompt":"p"}\n')
    done = CliRunner().invoke(cli, ["runs", "verify", str(path), "--exam", str(exam)])
    assert done.exit_code == 1, done.output
    assert "mismatch: signature: signed with key" in done.output and "untrusted" in done.output


def test_the_site_does_not_rank_a_run_signed_by_an_unpinned_key(tmp_path: Path) -> None:
    results, _, _ = _forged_folder(tmp_path)
    loaded = load_results(results)
    assert [r.unverified for r in loaded.runs] == [loaded.runs[0].unverified]
    assert loaded.runs[0].unverified and "untrusted" in loaded.runs[0].unverified


def test_a_key_pinned_by_the_maintainer_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same file passes once a maintainer pins the key: by --keys, or $ARI_TRUSTED_KEYS."""
    results, _, listed = _forged_folder(tmp_path)
    pins = tmp_path / "pinned.json"
    assert signing.trust_file(pins, listed)
    done = CliRunner().invoke(cli, ["runs", "validate", str(results), "--keys", str(pins)])
    assert done.exit_code == 0, done.output
    monkeypatch.setenv(signing.TRUSTED_KEYS_ENV, str(pins))
    done = CliRunner().invoke(cli, ["runs", "validate", str(results)])
    assert done.exit_code == 0, done.output
    assert load_results(results).runs[0].unverified is None


def test_a_missing_pinned_list_is_an_error_not_fewer_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, _, _ = _forged_folder(tmp_path)
    monkeypatch.setenv(signing.TRUSTED_KEYS_ENV, str(tmp_path / "nowhere.json"))
    done = CliRunner().invoke(cli, ["runs", "validate", str(results)])
    assert done.exit_code != 0 and "no such key list" in done.output, done.output


def test_keys_pin_writes_a_pinned_list(tmp_path: Path) -> None:
    pins = tmp_path / "pins.json"
    done = CliRunner().invoke(cli, ["keys", "pin", "--file", str(pins), "--holder", "ops"])
    assert done.exit_code == 0 and "pinned" in done.output, done.output
    assert [k.holder for k in signing.load_keyring(pins).keys] == ["ops"]


def test_the_shipped_pinned_list_loads() -> None:
    """The toolkit's own list parses (a broken one would make every check fail)."""
    signing.load_keyring(signing.PINNED_FILE)


def test_a_forged_file_the_folder_lists_as_unsigned_fails_validation(tmp_path: Path) -> None:
    """The other way round a folder could vouch for itself: strip the signature and list the
    forged file as 'written before signing' in its own signing_keys.json."""
    results, path, _ = _forged_folder(tmp_path)
    data = json.loads(path.read_text())
    del data["signature"]
    path.write_text(json.dumps(data, indent=2))
    keyring = signing.load_keyring(results / signing.KEYRING_FILE)
    keyring.unsigned.append(
        signing.UnsignedResult(
            track="v1-test", run_id="r0", sha256=hashlib.sha256(path.read_bytes()).hexdigest()
        )
    )
    (results / signing.KEYRING_FILE).write_text(keyring.model_dump_json())
    done = CliRunner().invoke(cli, ["runs", "validate", str(results)])
    assert done.exit_code == 1, done.output
    assert "no pinned list does: untrusted" in done.output


def test_the_committed_demo_run_is_pinned_as_unsigned() -> None:
    """The repository's own results validate: their one pre-signing file is in the toolkit's
    pinned list (its bytes, by SHA-256), not only in the folder's."""
    repo = Path(__file__).resolve().parents[2]
    pinned = signing.load_keyring(signing.PINNED_FILE)
    for entry in pinned.unsigned:
        raw = (repo / "results" / entry.track / f"{entry.run_id}.json").read_bytes()
        assert hashlib.sha256(raw).hexdigest() == entry.sha256
    done = CliRunner().invoke(cli, ["runs", "validate", str(repo / "results")])
    assert done.exit_code == 0, done.output
