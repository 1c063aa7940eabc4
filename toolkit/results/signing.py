"""Result signatures: a result file is bound to the harness that wrote it (ed25519).

The harness signs every result file it writes (`toolkit.results.model.save_run`, the one place that
writes them) with a private key kept on the operator's machine, outside the results folder:
`$ARI_HOME/keys/result-signing.ed25519` (a folder of mode 0700, a file of mode 0600, made on
first use; every sandbox hides `$ARI_HOME`). What is signed is the canonical JSON of the whole
file less its `signature` field: identity, status and reason, score, families, bits per byte,
hashes, log heads, everything.

Whose signatures count is the maintainers' decision, never the folder's: a signature holds only
under a *pinned* key (`pinned_keys`): the toolkit's own list (`toolkit/results/pinned_keys.json`,
shipped with it, changed by `toolkit keys pin` and reviewed like code), the key lists named in
`$ARI_TRUSTED_KEYS` (paths separated by `:`), those given to a command (`--keys FILE`), and
this machine's own key when it has one (what its harness signed). A results folder's
`signing_keys.json` is a hint: it names the keys its writers used (a harness writing into a
folder without one starts it with its own key; `toolkit keys trust` adds one) and the files
written before results were signed (by track, run id and the SHA-256 of their bytes). Such a
file passes as unverified (never ranked) only where a pinned list names it too (the toolkit's
list names the demo run committed before signing). A key, or a pre-signing file, that the
folder lists and nobody pinned is reported as untrusted, and fails validation: anyone can
make a key and list it. Checking
(`check`) never needs a private key.

What a good signature says: the file is as a harness holding a pinned key wrote it. It says
nothing about a key holder who forges, a key that was stolen, or the agent's honesty.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import getpass
import hashlib
import json
import os
import socket
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolkit.paths import state_dir
from toolkit.results import bounded_json
from toolkit.results.published import NotPublishedError, UnsafePathError, one_line, read_published

KEYS_DIR = "keys"
KEY_FILE = "result-signing.ed25519"
KEYRING_FILE = "signing_keys.json"
PINNED_FILE = Path(__file__).with_name("pinned_keys.json")
"""The maintainers' pinned keys, shipped with the toolkit."""
TRUSTED_KEYS_ENV = "ARI_TRUSTED_KEYS"
"""More pinned key lists (files in the format of `signing_keys.json`), separated by ':'."""
# Signed bytes start with this: a signature of a result is never valid for anything else.
DOMAIN = b"ari-bench result v1\n"
_B64_KEY = r"^[A-Za-z0-9+/]{43}=$"  # 32 bytes
_B64_SIG = r"^[A-Za-z0-9+/]{86}==$"  # 64 bytes
_KEY_ID = r"^ed25519:[0-9a-f]{16}$"
_PRINTABLE = r"^[^\x00-\x1f\x7f]+$"  # one line, no control characters


class SigningError(ValueError):
    """A key or key list that cannot be used; one line naming the file."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Signature(_Model):
    """The harness's signature of a result file."""

    algorithm: Literal["ed25519"] = Field(default="ed25519", description="Signature scheme.")
    key_id: str = Field(
        pattern=_KEY_ID,
        description="Id of the signing key: 'ed25519:' and the first 16 hex digits of the "
        "SHA-256 of its raw public key; `signing_keys.json` maps it to the key.",
    )
    value: str = Field(
        pattern=_B64_SIG,
        description="Base64 of the 64-byte signature of 'ari-bench result v1\\n' followed by "
        "the canonical JSON (sorted keys, no spaces, ASCII) of the file less this field.",
    )


class TrustedKey(_Model):
    """A public key whose signatures a results folder accepts."""

    id: str = Field(pattern=_KEY_ID, description="Key id (see `Signature.key_id`).")
    public_key: str = Field(pattern=_B64_KEY, description="Base64 of the raw 32-byte key.")
    holder: str = Field(
        pattern=_PRINTABLE, description="Who holds the private half (a person, a machine)."
    )
    added: dt.date | None = Field(default=None, description="When the key was listed.")

    @model_validator(mode="after")
    def _id_matches(self) -> TrustedKey:
        expected = key_id(base64.b64decode(self.public_key))
        if self.id != expected:
            raise ValueError(f"id {self.id} does not match its public key ({expected})")
        return self


class UnsignedResult(_Model):
    """A result file written before results were signed, accepted as unverified, as it is."""

    track: str = Field(description="Its track.")
    run_id: str = Field(description="Its run id.")
    sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the file's bytes: an edit unlists it."
    )
    note: str = Field(default="", pattern=r"^[^\x00-\x1f\x7f]*$", description="Why unsigned.")


class Keyring(_Model):
    """`signing_keys.json`: what a results folder accepts."""

    keys: list[TrustedKey] = Field(default_factory=list, description="Accepted public keys.")
    unsigned: list[UnsignedResult] = Field(
        default_factory=list,
        description="Files from before signing: shown as unverified (never ranked), not errors.",
    )

    @field_validator("keys")
    @classmethod
    def _unique(cls, keys: list[TrustedKey]) -> list[TrustedKey]:
        ids = [k.id for k in keys]
        if len(ids) != len(set(ids)):
            raise ValueError("a key is listed twice")
        return keys

    def public_key(self, kid: str) -> Ed25519PublicKey | None:
        for key in self.keys:
            if key.id == kid:
                return Ed25519PublicKey.from_public_bytes(base64.b64decode(key.public_key))
        return None

    def listed_unsigned(self, track: str, run_id: str) -> UnsignedResult | None:
        return next((u for u in self.unsigned if (u.track, u.run_id) == (track, run_id)), None)


# -- the operator's key ------------------------------------------------------------------------


def key_id(raw_public: bytes) -> str:
    """'ed25519:' and the first 16 hex digits of the SHA-256 of a raw public key."""
    return "ed25519:" + hashlib.sha256(raw_public).hexdigest()[:16]


def raw_public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_path() -> Path:
    """Where this machine's private key is: `$ARI_HOME/keys/result-signing.ed25519`."""
    return state_dir() / KEYS_DIR / KEY_FILE


def _read_private(path: Path) -> Ed25519PrivateKey:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise SigningError(f"{path}: cannot read the signing key: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise SigningError(f"{path}: the signing key must be a file owned by this user")
        if info.st_mode & 0o077:
            raise SigningError(
                f"{path}: the signing key is readable by others (mode "
                f"{stat.S_IMODE(info.st_mode):o}): chmod 600 it, and replace it if others read it"
            )
        data = f.read()
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"{path}: not a PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{path}: not an ed25519 key")
    return key


def local_key() -> Ed25519PrivateKey:
    """This machine's signing key, made on first use (mode 0600 in a folder of mode 0700).

    Two processes making it at once agree: the file appears whole, once (a hard link of a
    finished temporary file), and the one that loses reads the winner's."""
    path = key_path()
    if not path.exists() and not path.is_symlink():
        path.parent.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path.parent, 0o700)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".new-key-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    return _read_private(path)


def holder_name() -> str:
    """'user@host' of this machine, for the key list."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.geteuid())
    return f"{user}@{socket.gethostname()}"


def local_public() -> TrustedKey:
    """This machine's public key, as `signing_keys.json` lists it."""
    raw = raw_public(local_key())
    return TrustedKey(
        id=key_id(raw),
        public_key=base64.b64encode(raw).decode(),
        holder=holder_name(),
        added=dt.datetime.now(dt.UTC).date(),
    )


# -- canonical bytes, signing and checking ------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SigningError(f"the key '{key}' appears twice in one object")
        out[key] = value
    return out


def canonical(data: dict[str, Any]) -> bytes:
    """The bytes signed for a result (its JSON object less `signature`)."""
    body = {k: v for k, v in data.items() if k != "signature"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return DOMAIN + text.encode("ascii")


def sign(data: dict[str, Any]) -> Signature:
    """Sign a result's JSON object (its `signature`, if any, left out) with this machine's key."""
    key = local_key()
    value = key.sign(canonical(data))
    return Signature(key_id=key_id(raw_public(key)), value=base64.b64encode(value).decode())


@dataclass(frozen=True)
class Verdict:
    """Whether a result file is as a listed key signed it; `reason` says why not."""

    verified: bool
    reason: str | None = None
    listed_unsigned: bool = False  # written before signing, as `signing_keys.json` lists it


def check(raw: bytes, keyring: Keyring, hint: Keyring | None = None) -> Verdict:
    """Check a result file's bytes against the trusted keys in `keyring` (`trusted_keyring`:
    the pinned keys, and the folder's list of files from before signing); `hint`, the folder's
    own key list, only names a key it lists that nobody pinned."""
    try:
        data = bounded_json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError) as exc:
        return Verdict(False, f"not signable JSON: {exc}")
    if not isinstance(data, dict):
        return Verdict(False, "not a JSON object")
    if data.get("signature") is None:
        track, run_id = str(data.get("track")), str(data.get("run_id"))
        listed = keyring.listed_unsigned(track, run_id)
        if listed is None and hint is not None and hint.listed_unsigned(track, run_id):
            return Verdict(
                False,
                f"unsigned: the folder's {KEYRING_FILE} lists it as written before signing, but "
                "no pinned list does: untrusted (a folder cannot vouch for its own files)",
            )
        if listed is None:
            return Verdict(
                False,
                "unsigned: the file carries no signature, and no pinned list names it as "
                "written before signing",
            )
        sha = hashlib.sha256(raw).hexdigest()
        if sha != listed.sha256:
            return Verdict(
                False,
                f"unsigned, and changed since it was listed as written before signing: sha256 "
                f"{sha[:12]}, "
                f"listed {listed.sha256[:12]}",
            )
        return Verdict(False, "unsigned: written before results were signed", True)
    try:
        signature = Signature.model_validate(data["signature"])
    except ValidationError as exc:
        return Verdict(False, f"a malformed signature: {exc.errors()[0]['msg']}")
    public = keyring.public_key(signature.key_id)
    if public is None:
        if hint is not None and hint.public_key(signature.key_id) is not None:
            return Verdict(
                False,
                f"signed with key {signature.key_id}, which the folder's {KEYRING_FILE} lists "
                "but no maintainer pinned: untrusted (a folder cannot vouch for its own files; "
                "once you trust its holder, copy its entry into a key list of yours and pass "
                f"that with --keys FILE or ${TRUSTED_KEYS_ENV}: `toolkit keys pin` pins this "
                "machine's key, not this one)",
            )
        return Verdict(
            False,
            f"signed with key {signature.key_id}, which no pinned key list holds: untrusted",
        )
    try:
        public.verify(base64.b64decode(signature.value), canonical(data))
    except (InvalidSignature, binascii.Error):
        return Verdict(
            False,
            f"the signature (key {signature.key_id}) does not match the content: changed after "
            "signing, or another result's signature",
        )
    return Verdict(True)


# -- the key list of a results folder -----------------------------------------------------------


def keyring_path(results_dir: Path) -> Path:
    return results_dir / KEYRING_FILE


def load_keyring(path: Path) -> Keyring:
    """A key list file (an absent file: no keys). Raises `SigningError` naming file and field.

    Whoever named the file may follow a link to it (a pinned list is the maintainer's own),
    but it must be a plain file of at most `KEYRING_LIMIT` bytes: a FIFO or a device there
    (`/dev/zero`) is refused, never waited on or read without end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Keyring()
    except OSError as exc:
        raise SigningError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SigningError(f"{path}: not a plain file, refused")
        raw = f.read(KEYRING_LIMIT + 1)
    if len(raw) > KEYRING_LIMIT:
        raise SigningError(f"{path}: more than {KEYRING_LIMIT:,} bytes, refused")
    return _parse_keyring(path, raw)


def _parse_keyring(path: Path, raw: bytes) -> Keyring:
    """A key list's bytes, checked (nesting bounded, then the model)."""
    try:
        bounded_json.check_depth(raw)
        return Keyring.model_validate_json(raw)
    except json.JSONDecodeError as exc:
        raise SigningError(f"{path}: invalid JSON: {exc.msg}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise SigningError(f"{path}: field '{field}': {err['msg']}") from None


KEYRING_LIMIT = 1024 * 1024
"""The largest `signing_keys.json` read (a list of keys: a few kilobytes)."""


def load_folder_keyring(results_dir: Path) -> Keyring:
    """A results folder's own `signing_keys.json` (absent: no keys), read as every published
    file is (`toolkit.results.published`: no link followed, no FIFO or device waited on or
    read, at most `KEYRING_LIMIT` bytes, nesting bounded). Raises `SigningError` naming the
    file and what is wrong."""
    path = keyring_path(results_dir)
    try:
        raw = read_published(results_dir, KEYRING_FILE, limit=KEYRING_LIMIT)
    except NotPublishedError:
        return Keyring()
    except UnsafePathError as exc:
        raise SigningError(one_line(str(exc))) from None
    except OSError as exc:
        raise SigningError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _parse_keyring(path, raw)


def _text(keyring: Keyring) -> str:
    return keyring.model_dump_json(indent=2, exclude_none=True) + "\n"


def start_keyring(results_dir: Path) -> bool:
    """A results folder without a key list gets one listing this machine's key (True); one
    that has a list is left as it is (False): only `trust` adds keys to it."""
    path = keyring_path(results_dir)
    if path.exists() or path.is_symlink():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_text(Keyring(keys=[local_public()])))
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, path)  # never over a list another writer made meanwhile
        except FileExistsError:
            return False
    finally:
        os.unlink(tmp)
    return True


def trust(results_dir: Path, key: TrustedKey) -> bool:
    """List `key` in a results folder's key list (made if absent); False if it was there.
    The list is a hint for readers: validation trusts only pinned keys (`pin`)."""
    return trust_file(keyring_path(results_dir), key)


def trust_file(path: Path, key: TrustedKey) -> bool:
    """Add `key` to the key list file `path` (made if absent); False if it was there."""
    keyring = load_keyring(path)
    if keyring.public_key(key.id) is not None:
        return False
    keyring.keys.append(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_text(keyring))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


# -- the keys the maintainers pin ---------------------------------------------------------------


def _own_key() -> TrustedKey | None:
    """This machine's public key, if it has a signing key (never made here: checking makes
    no key)."""
    path = key_path()
    if not path.exists():
        return None
    raw = raw_public(_read_private(path))
    encoded = base64.b64encode(raw).decode()
    return TrustedKey(id=key_id(raw), public_key=encoded, holder="this machine")


def pinned_files(extra: tuple[Path, ...] = ()) -> list[Path]:
    """The pinned key lists in force: the toolkit's, `$ARI_TRUSTED_KEYS`'s, then `extra`."""
    env = [Path(p) for p in os.environ.get(TRUSTED_KEYS_ENV, "").split(os.pathsep) if p]
    return [PINNED_FILE, *env, *extra]


def pinned_keyring(extra: tuple[Path, ...] = ()) -> Keyring:
    """Every pinned key and every pinned pre-signing file (see the module docstring), each once.
    A named list that is missing or malformed raises `SigningError`: a check must not quietly
    trust fewer keys, or more."""
    keys: dict[str, TrustedKey] = {}
    unsigned: dict[tuple[str, str], UnsignedResult] = {}
    for path in pinned_files(extra):
        if path != PINNED_FILE and not path.is_file():
            raise SigningError(f"{path}: no such key list (named by --keys or ${TRUSTED_KEYS_ENV})")
        listed = load_keyring(path)
        for key in listed.keys:
            keys.setdefault(key.id, key)
        for entry in listed.unsigned:
            unsigned.setdefault((entry.track, entry.run_id), entry)
    own = _own_key()
    if own is not None:
        keys.setdefault(own.id, own)
    return Keyring(keys=list(keys.values()), unsigned=list(unsigned.values()))


def trusted_list_of(key: str, extra: tuple[Path, ...] = ()) -> str:
    """Which trusted list holds a key, in words (for the run page: the folder's own
    `signing_keys.json` is never one)."""
    for path in pinned_files(extra):
        with contextlib.suppress(SigningError):
            if any(k.id == key for k in load_keyring(path).keys):
                if path == PINNED_FILE:
                    return "the toolkit's pinned keys (toolkit/results/pinned_keys.json)"
                return f"the pinned key list {path.name} (${TRUSTED_KEYS_ENV} or --keys)"
    own = _own_key()
    if own is not None and own.id == key:
        return "this machine's own key (the harness that built this site signed it)"
    return "no pinned list (not trusted)"


def pinned_keys(extra: tuple[Path, ...] = ()) -> list[TrustedKey]:
    """Every pinned key (`pinned_keyring`)."""
    return pinned_keyring(extra).keys


def trusted_keyring(extra: tuple[Path, ...] = ()) -> Keyring:
    """What a folder's files are checked against: the pinned keys and pre-signing files,
    never the folder's own list (pass that to `check` as its `hint`)."""
    return pinned_keyring(extra)


def pin(key: TrustedKey, path: Path = PINNED_FILE) -> bool:
    """Add `key` to a pinned key list (the toolkit's by default); False if it was there."""
    return trust_file(path, key)
