"""The packer runs as root on a folder the agent controls: it must never follow a link into it.

A hostile process swaps parts of the bundle while it is being packed (a large first file keeps
the packer busy); a root-only folder holding a secret must never land in the archive, whatever
the timing. Links, FIFOs and hard links that are there from the start are refused too.
"""

from __future__ import annotations

import gzip
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from grading_helpers import ORACLE, MakeBundle

from toolkit.grading import BundleError, pack_bundle

SECRET = b"ZQX-EXAM-SECRET-" + os.urandom(8).hex().encode()
BIG = 4 * 2**20  # random bytes: gzip -9 takes a while on them, which is the attacker's window


def _vault(tmp_path: Path) -> Path:
    """A root-only folder shaped like the bundle's sub-folder, holding the secret."""
    vault = tmp_path / "vault"
    vault.mkdir(mode=0o700)
    (vault / "weights.bin").write_bytes(SECRET * 64)
    (vault / "weights.bin").chmod(0o600)
    return vault


def _bundle(make_bundle: MakeBundle, name: str = "bundle") -> Path:
    # "a_big.bin" sorts first, "z_sub/" last: the sub-folder is packed after the big file.
    files = {"a_big.bin": os.urandom(BIG), "z_sub/weights.bin": b"honest weights"}
    return make_bundle(ORACLE, name=name, files=files)


def _archive_text(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.exists() else b""


def _swap_when_packing_starts(
    target: Path, vault: Path, out: Path, delay_s: float, stop: threading.Event
) -> None:
    """Once the archive exists (listing is over), replace `target` with a link to `vault`."""
    aside = target.with_name(target.name + ".real")
    while not stop.is_set() and not (out.exists() and out.stat().st_size > 0):
        time.sleep(0.0005)
    time.sleep(delay_s)
    if stop.is_set():
        return
    target.rename(aside)
    target.symlink_to(vault, target_is_directory=True)
    stop.wait(30)
    target.unlink()
    aside.rename(target)


def _pack_under_attack(bundle: Path, target: Path, vault: Path, out: Path, delay_s: float) -> bool:
    """Pack while `target` is swapped; True if the packer refused the bundle."""
    stop = threading.Event()
    swapper = threading.Thread(
        target=_swap_when_packing_starts, args=(target, vault, out, delay_s, stop)
    )
    swapper.start()
    try:
        pack_bundle(bundle, out)
        refused = False
    except BundleError:
        refused = True
    finally:
        stop.set()
        swapper.join()
    return refused


@pytest.mark.parametrize("delay_s", [0.0, 0.005, 0.02])
def test_sub_folder_swapped_for_a_link_mid_pack_never_packs_the_target(
    make_bundle: MakeBundle, tmp_path: Path, delay_s: float
) -> None:
    vault, bundle = _vault(tmp_path), _bundle(make_bundle)
    refused = 0
    for attempt in range(4):
        out = tmp_path / f"out-{attempt}.tar.gz"
        refused += _pack_under_attack(bundle, bundle / "z_sub", vault, out, delay_s)
        assert SECRET not in _archive_text(out), "the archive holds the root-only secret"
    # The swap came while the big file was being compressed: the packer saw it and refused.
    assert refused >= 1


def test_a_free_running_swapper_never_gets_the_target_packed(
    make_bundle: MakeBundle, tmp_path: Path
) -> None:
    """No timing assumption: the sub-folder flips between itself and the link all the time."""
    vault, bundle = _vault(tmp_path), _bundle(make_bundle)
    (bundle / "a_big.bin").write_bytes(os.urandom(BIG // 8))
    stop = threading.Event()
    sub, aside = bundle / "z_sub", bundle / "z_sub.real"

    def flip() -> None:
        while not stop.is_set():
            sub.rename(aside)
            sub.symlink_to(vault, target_is_directory=True)
            time.sleep(0.0002)
            sub.unlink()
            aside.rename(sub)
            time.sleep(0.0002)

    flipper = threading.Thread(target=flip)
    flipper.start()
    outcomes = []
    try:
        for attempt in range(30):
            out = tmp_path / f"flip-{attempt}.tar.gz"
            try:
                pack_bundle(bundle, out)
                outcomes.append("packed")
            except BundleError:
                outcomes.append("refused")
            assert SECRET not in _archive_text(out)
    finally:
        stop.set()
        flipper.join()
    assert "refused" in outcomes  # the attack did reach the packer


def test_the_bundle_folder_itself_swapped_for_a_link(
    make_bundle: MakeBundle, tmp_path: Path
) -> None:
    vault, bundle = _vault(tmp_path), _bundle(make_bundle)
    (vault / "z_sub").mkdir()
    (vault / "z_sub" / "weights.bin").write_bytes(SECRET)
    # Swapped mid-pack: the packer keeps reading the folder it opened, never the link's target.
    out = tmp_path / "mid.tar.gz"
    _pack_under_attack(bundle, bundle, vault, out, 0.0)
    assert SECRET not in _archive_text(out)
    # A link from the start (the folder, or any folder on its path) is refused outright.
    link = tmp_path / "link-bundle"
    link.symlink_to(vault, target_is_directory=True)
    with pytest.raises(BundleError, match="symbolic link"):
        pack_bundle(link, tmp_path / "link.tar.gz")
    parent_link = tmp_path / "parent-link"
    parent_link.symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(BundleError, match="symbolic link"):
        pack_bundle(parent_link / "vault", tmp_path / "parent.tar.gz")


def test_hard_link_to_an_unreadable_file_is_refused(
    make_bundle: MakeBundle, tmp_path: Path
) -> None:
    vault, bundle = _vault(tmp_path), make_bundle(ORACLE)
    os.link(vault / "weights.bin", bundle / "weights.bin")
    with pytest.raises(BundleError, match="hard links are not allowed"):
        pack_bundle(bundle, tmp_path / "out.tar.gz")
    assert SECRET not in _archive_text(tmp_path / "out.tar.gz")


def test_hard_link_swapped_in_mid_pack_is_refused(make_bundle: MakeBundle, tmp_path: Path) -> None:
    vault, bundle = _vault(tmp_path), _bundle(make_bundle)
    out = tmp_path / "out.tar.gz"
    stop = threading.Event()

    def swap() -> None:
        while not (out.exists() and out.stat().st_size > 0):
            time.sleep(0.0005)
        target = bundle / "z_sub" / "weights.bin"
        target.unlink()
        os.link(vault / "weights.bin", target)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        with pytest.raises(BundleError, match=r"replaced while being packed|hard links"):
            pack_bundle(bundle, out)
    finally:
        stop.set()
        swapper.join()
    assert SECRET not in _archive_text(out)


def test_fifo_is_refused_and_one_swapped_in_does_not_hang(
    make_bundle: MakeBundle, tmp_path: Path
) -> None:
    bundle = make_bundle(ORACLE)
    os.mkfifo(bundle / "pipe")
    with pytest.raises(BundleError, match="only regular files and folders"):
        pack_bundle(bundle, tmp_path / "fifo.tar.gz")
    os.unlink(bundle / "pipe")

    bundle = _bundle(make_bundle, "bundle2")
    out = tmp_path / "swapped.tar.gz"

    def swap() -> None:
        while not (out.exists() and out.stat().st_size > 0):
            time.sleep(0.0005)
        target = bundle / "z_sub" / "weights.bin"
        target.unlink()
        os.mkfifo(target)  # nobody ever writes to it: opening it for reading would block

    swapper = threading.Thread(target=swap)
    swapper.start()
    started = time.monotonic()
    try:
        with pytest.raises(BundleError, match="replaced while being packed"):
            pack_bundle(bundle, out)
    finally:
        swapper.join()
    assert time.monotonic() - started < 60


def test_a_file_that_grows_or_shrinks_while_packed_is_refused(
    make_bundle: MakeBundle, tmp_path: Path
) -> None:
    for change, word in (("grow", "grew"), ("shrink", "shrank")):
        bundle = tmp_path / change
        shutil.rmtree(bundle, ignore_errors=True)
        bundle.mkdir()
        (bundle / "a_big.bin").write_bytes(os.urandom(BIG))
        (bundle / "z.bin").write_bytes(b"x" * 1000)
        out = tmp_path / f"{change}.tar.gz"

        def edit(bundle: Path = bundle, out: Path = out, change: str = change) -> None:
            while not (out.exists() and out.stat().st_size > 0):
                time.sleep(0.0005)
            with (bundle / "z.bin").open("r+b") as f:
                if change == "grow":
                    f.seek(0, os.SEEK_END)
                    f.write(b"more")
                else:
                    f.truncate(10)

        editor = threading.Thread(target=edit)
        editor.start()
        try:
            with pytest.raises(BundleError, match=f"the file {word}"):
                pack_bundle(bundle, out)
        finally:
            editor.join()


def test_names_that_are_not_text_are_refused(make_bundle: MakeBundle, tmp_path: Path) -> None:
    bundle = make_bundle(ORACLE)
    (bundle / "bad\nname").write_bytes(b"x")
    with pytest.raises(BundleError, match="control character"):
        pack_bundle(bundle, tmp_path / "out.tar.gz")
    os.unlink(bundle / "bad\nname")
    with open(os.path.join(os.fsencode(bundle), b"\xff.bin"), "wb") as f:
        f.write(b"x")
    with pytest.raises(BundleError, match="not valid UTF-8"):
        pack_bundle(bundle, tmp_path / "out2.tar.gz")
