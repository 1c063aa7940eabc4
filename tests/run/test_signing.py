"""Result signatures: the key, the single signing point, and forgeries `runs validate` refuses.

Each attack edits a signed results folder the way someone without the harness's private key
would: strip the signature, take another result's, sign with a key of their own, make a file
that reads one way to the checker and another way to the loader, or edit a legacy file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.signed_results import sign_run
from toolkit.campaign.collect import pack_run, unpack_run
from toolkit.cli import cli
from toolkit.protected import protected_paths
from toolkit.results import signing
from toolkit.results.model import RunResult, load_run, save_run
from toolkit.run.recovery import Marker, recover_runs, runs_root, write_marker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stats"))
from results_factory import run_dict, track_dict, write_registry

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _results(tmp_path: Path, *runs: dict[str, Any]) -> Path:
    """A results folder with the test track and `runs`, each signed by this machine's key."""
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    for run in runs:
        path = results / run["track"] / f"{run['run_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sign_run(results, run), indent=2))
    return results


def _file(results: Path, run_id: str) -> Path:
    return results / "v1-test" / f"{run_id}.json"


def _validate(*args: Path | str) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["runs", "validate", *map(str, args)])
    return done.exit_code, done.output


def _rewrite(path: Path, **change: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    data.update(change)
    path.write_text(json.dumps(data, indent=2))
    return data


# -- the key ------------------------------------------------------------------------------------


def test_the_key_is_made_once_private_and_outside_results(home: Path, tmp_path: Path) -> None:
    first = signing.local_public()
    path = home / "keys" / signing.KEY_FILE
    assert signing.key_path() == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert signing.local_public().id == first.id  # made once, then read
    done = CliRunner().invoke(cli, ["keys", "show"])
    assert done.exit_code == 0 and first.id in done.output and str(path) in done.output
    save_run(RunResult.model_validate(run_dict("r0")), tmp_path / "results")
    # Nothing private lands in the results folder: only public keys and signatures.
    pem = path.read_bytes()
    for file in (tmp_path / "results").rglob("*"):
        if file.is_file():
            assert b"PRIVATE" not in file.read_bytes() and pem not in file.read_bytes()


def test_every_sandbox_hides_the_key() -> None:
    """The key lives under a path that every role's sandbox and every grading hides."""
    hidden = protected_paths()
    assert any(signing.key_path().resolve().is_relative_to(p) for p in hidden), hidden


def test_a_key_that_others_can_read_is_refused(home: Path) -> None:
    signing.local_key()
    os.chmod(signing.key_path(), 0o640)
    with pytest.raises(signing.SigningError, match="readable by others"):
        signing.local_key()
    done = CliRunner().invoke(cli, ["keys", "show"])
    assert done.exit_code == 1 and "chmod 600" in done.output


def test_a_symlinked_key_is_refused(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "planted"
    signing.key_path().parent.mkdir(parents=True)
    elsewhere.write_bytes(b"")
    signing.key_path().symlink_to(elsewhere)
    with pytest.raises(signing.SigningError, match="cannot read"):
        signing.local_key()


# -- one signing point --------------------------------------------------------------------------


def test_save_run_signs_and_a_new_folder_lists_the_key(tmp_path: Path) -> None:
    results = tmp_path / "results"
    result = RunResult.model_validate(run_dict("r0"))
    path = save_run(result, results)
    assert result.signature is not None and load_run(path) == result
    keyring = signing.load_keyring(results / signing.KEYRING_FILE)
    assert [k.id for k in keyring.keys] == [signing.local_public().id]
    assert signing.check(path.read_bytes(), keyring).verified


def test_a_folder_with_a_key_list_only_changes_through_keys_trust(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    other = Ed25519PrivateKey.generate()
    raw = signing.raw_public(other)
    listed = signing.TrustedKey(
        id=signing.key_id(raw), public_key=base64.b64encode(raw).decode(), holder="official"
    )
    signing.trust(results, listed)
    save_run(RunResult.model_validate(run_dict("r0")), results)
    keyring = signing.load_keyring(results / signing.KEYRING_FILE)
    assert [k.id for k in keyring.keys] == [listed.id]  # the run added nothing
    # The folder's list trusts nothing: this machine's own key (pinned here) is what holds.
    assert _validate(results)[0] == 0, _validate(results)[1]
    done = CliRunner().invoke(cli, ["keys", "trust", "--results", str(results)])
    assert done.exit_code == 0 and "added" in done.output
    assert _validate(results)[0] == 0


def test_a_recovered_run_is_signed(tmp_path: Path) -> None:
    """`runs recover` writes the result of a run whose harness died: through save_run too."""
    results = tmp_path / "results"
    artifacts = results / "v1-test" / "r0"
    artifacts.mkdir(parents=True)
    harness = runs_root() / "r0" / "harness"
    skeleton = RunResult.model_validate(
        run_dict("r0", status="invalid", promoted=None, candidates=[])
    )
    marker = Marker(
        pid=2**22 + 7,  # no such process: the harness is dead
        pid_start=None,
        results_dir=str(results),
        artifacts=str(artifacts),
        skeleton=skeleton,
    )
    write_marker(harness, marker)
    (path,) = recover_runs()
    result = load_run(path)
    assert result.status == "invalid" and result.signature is not None
    keyring = signing.load_keyring(results / signing.KEYRING_FILE)
    assert signing.check(path.read_bytes(), keyring).verified


def test_the_campaign_driver_signs_what_it_collects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's result (another machine's key) is written by the driver, signed by its key."""
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "worker-home"))
    worker = tmp_path / "worker-results"
    save_run(RunResult.model_validate(run_dict("r0")), worker)
    worker_key = signing.local_public().id
    blob = pack_run(worker, "v1-test", "r0")
    monkeypatch.setenv("ARI_HOME", str(tmp_path / "driver-home"))
    driver = tmp_path / "results"
    path, result, new = unpack_run(blob, driver)
    assert new and result.signature is not None
    assert result.signature.key_id == signing.local_public().id != worker_key
    keyring = signing.load_keyring(driver / signing.KEYRING_FILE)
    assert signing.check(path.read_bytes(), keyring).verified


# -- forgeries ----------------------------------------------------------------------------------


def test_an_untouched_signed_folder_validates(tmp_path: Path) -> None:
    results = _results(tmp_path, run_dict("r0"), run_dict("r1", seed=1))
    code, output = _validate(results)
    assert code == 0 and output.count("ok:") == 2, output


def test_a_removed_signature_is_refused(tmp_path: Path) -> None:
    results = _results(tmp_path, run_dict("r0"))
    data = json.loads(_file(results, "r0").read_text())
    del data["signature"]
    _file(results, "r0").write_text(json.dumps(data))
    code, output = _validate(results)
    assert code == 1 and f"{_file(results, 'r0')}: signature: unsigned" in output, output
    _rewrite(_file(results, "r0"), signature=None)  # null is no better than absent
    assert _validate(_file(results, "r0"))[0] == 1


def test_another_results_signature_is_refused(tmp_path: Path) -> None:
    results = _results(tmp_path, run_dict("r0", passed=10), run_dict("r1", seed=1, passed=90))
    better = json.loads(_file(results, "r1").read_text())
    # r0 takes r1's score and r1's signature: each is genuine, just not together.
    _rewrite(
        _file(results, "r0"),
        score=better["score"],
        families=better["families"],
        signature=better["signature"],
    )
    code, output = _validate(results)
    assert code == 1 and "does not match the content" in output, output


def test_a_key_not_in_the_list_is_refused(tmp_path: Path) -> None:
    results = _results(tmp_path, run_dict("r0"))
    data = _rewrite(_file(results, "r0"), model="forged-model")
    mine = Ed25519PrivateKey.generate()
    value = base64.b64encode(mine.sign(signing.canonical(data))).decode()
    forged = {"key_id": signing.key_id(signing.raw_public(mine)), "value": value}
    _rewrite(_file(results, "r0"), signature=forged)
    code, output = _validate(results)
    assert code == 1 and "which no pinned key list holds: untrusted" in output, output
    # ... nor under the id of a listed key.
    _rewrite(_file(results, "r0"), signature={**forged, "key_id": signing.local_public().id})
    code, output = _validate(results)
    assert code == 1 and "does not match the content" in output, output


def test_a_file_that_reads_two_ways_is_refused(tmp_path: Path) -> None:
    """The same key twice: a checker keeping the first and a loader keeping the last would
    disagree about what was signed. Such a file is not checked at all."""
    results = _results(tmp_path, run_dict("r0"))
    text = _file(results, "r0").read_text()
    forged = text.replace('"model": "model-a",', '"model": "model-a",\n  "model": "model-z",', 1)
    assert forged != text
    _file(results, "r0").write_text(forged)
    code, output = _validate(results)
    assert code == 1 and "appears twice" in output, output


def test_a_key_list_entry_that_lies_about_its_id_is_refused(tmp_path: Path) -> None:
    results = _results(tmp_path, run_dict("r0"))
    path = results / signing.KEYRING_FILE
    data = json.loads(path.read_text())
    mine = signing.raw_public(Ed25519PrivateKey.generate())
    data["keys"][0]["public_key"] = base64.b64encode(mine).decode()  # same id, another key
    path.write_text(json.dumps(data))
    code, output = _validate(results)
    assert code == 1 and str(path) in output and "does not match its public key" in output


# -- files from before signing ------------------------------------------------------------------


def test_a_listed_unsigned_file_passes_as_unverified_until_edited(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_registry(results, [track_dict()])
    path = _file(results, "old")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(run_dict("old")))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    entry = {"track": "v1-test", "run_id": "old", "sha256": sha, "note": "before signing"}
    listing = json.dumps({"keys": [], "unsigned": [entry]})
    (results / signing.KEYRING_FILE).write_text(listing)
    # The folder's own word is not enough: anyone can list a file there.
    code, output = _validate(results)
    assert code == 1 and "no pinned list does: untrusted" in output, output
    pins = tmp_path / "pins.json"
    pins.write_text(listing)
    code, output = _validate(results, "--keys", str(pins))
    assert code == 0 and "ok (unverified: unsigned): " in output
    assert "written before results were signed" in output
    _rewrite(path, seed=5)
    code, output = _validate(results, "--keys", str(pins))
    assert code == 1 and "changed since it was listed as written before signing" in output


def test_the_committed_results_validate_and_are_unverified() -> None:
    code, output = _validate(REPO / "results")
    assert code == 0, output
    assert "ok (unverified: unsigned): " in output
    assert "written before results were signed" in output
    strict = CliRunner().invoke(cli, ["runs", "validate", "--strict", str(REPO / "results")])
    assert strict.exit_code == 1 and "--strict fails them" in strict.output, strict.output
