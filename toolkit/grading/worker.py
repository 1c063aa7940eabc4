"""The grading worker: runs inside the sandbox, loads the bundle, answers the host's requests.

Usage (by the host only): `python worker.py BUNDLE_DIR DEVICE [wait] [cold] [bare]`, with the frame
nonce in the environment variable ARI_GRADER_NONCE. Before the bundle's code runs, the worker
warms up: it imports numpy and torch (when installed) and, on a GPU, starts CUDA: the start-up
nearly every bundle needs, done as the harness's own work. `cold`: numpy only, for a bundle whose
Python never names torch; `bare` too: nothing, for one that names neither (`toolkit/grading/
warm.py`). With `wait` it then waits for the host's
`{"op": "load"}` before it imports the bundle: the host starts both phases' workers as a
grading begins, before the bundle is even packed, lets phase 1's load once the bundle is
ready, and phase 2's only once phase 1's worker is gone. A `load` that carries `archive` (the
host's own gzip tar of the bundle, base64) brings the bundle with it: the worker unpacks it into
BUNDLE_DIR first (regular files and folders only), so its sandbox could start before the bundle
existed; `{"op": "bundle", "archive": ...}` before the go sends it ahead, to be unpacked while
the worker waits (phase 2's, while phase 1 runs: unpacking runs none of the bundle's code).
Standalone on purpose (standard library, plus numpy for log-probabilities): the same
file runs in a local sandbox or in a container.

Why the pipe cannot be corrupted by the bundle's prints: before the bundle is imported, the
worker keeps private duplicates of its stdin/stdout for the protocol and points fds 0 and 1 at
/dev/null and stderr, so `print`, C extensions and subprocesses write to stderr (which the host
only keeps a tail of). Frames are `MAGIC + nonce + 4-byte length + JSON`; the host rejects
anything else. Bytes travel base64-encoded.

What this does not do: protect itself from the bundle. The bundle runs in this process and could
rewrite the worker; that gains it nothing, because the worker never holds anything secret: in
phase 1 it receives prompts (already truncated by the host) and lengths, never answers.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import struct
import sys
import tarfile
import time
import traceback
from types import ModuleType
from typing import Any

MAGIC = b"ARIG"


class Channel:
    def __init__(self, fd_in: int, fd_out: int, nonce: bytes) -> None:
        self.fd_in, self.fd_out, self.nonce = fd_in, fd_out, nonce

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = os.read(self.fd_in, n)
            if not chunk:
                raise EOFError("host closed the pipe")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> dict[str, Any]:
        head = self._read_exact(len(MAGIC) + len(self.nonce) + 4)
        if head[: len(MAGIC) + len(self.nonce)] != MAGIC + self.nonce:
            raise EOFError("bad frame from host")
        (size,) = struct.unpack(">I", head[-4:])
        message: dict[str, Any] = json.loads(self._read_exact(size))
        return message

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        data = MAGIC + self.nonce + struct.pack(">I", len(body)) + body
        while data:
            data = data[os.write(self.fd_out, data) :]


def _error(exc: BaseException) -> dict[str, Any]:
    tail = "".join(traceback.format_exception(exc)[-3:])[-1500:]
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500], "traceback": tail}


def _import_inference(bundle_dir: str) -> ModuleType:
    path = os.path.join(bundle_dir, "inference.py")
    if not os.path.isfile(path):
        raise FileNotFoundError("the bundle has no inference.py")
    spec = importlib.util.spec_from_file_location("inference", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["inference"] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, "load", None)):
        raise AttributeError("inference.py defines no load(bundle_dir, device)")
    return module


def _warm_up(device: str, torch_too: bool, numpy_too: bool = True) -> None:
    """Import numpy (`numpy_too`) and (`torch_too`) torch, and on a GPU create the CUDA
    context; failures are left for the bundle's own load() to meet (and report)."""
    if not numpy_too and not torch_too:
        return
    try:
        import numpy  # noqa: F401

        if not torch_too:
            return
        import torch
    except BaseException:
        return
    if device.startswith("cuda"):
        try:
            torch.zeros(1, device=device)  # the context: most of a first CUDA call's time
        except BaseException:
            return


def _unpack(archive: bytes, bundle_dir: str) -> None:
    """Unpack the host's archive of the bundle into `bundle_dir`: regular files and folders
    with relative names only (the host packed it so; anything else is refused, not skipped)."""
    os.makedirs(bundle_dir, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            parts = member.name.split("/")
            regular = member.isfile() or member.isdir()
            if member.name.startswith("/") or ".." in parts or not regular:
                raise ValueError(f"unexpected archive member {member.name[:80]!r}")
            target = os.path.join(bundle_dir, *[p for p in parts if p not in ("", ".")])
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            with source, open(target, "wb") as out:
                while chunk := source.read(1 << 20):
                    out.write(chunk)


def _generate(model: Any, request: dict[str, Any]) -> dict[str, Any]:
    prompts = [base64.b64decode(p) for p in request["prompts"]]
    lengths = list(request["lengths"])
    result = model.generate(prompts, lengths)
    if not isinstance(result, list | tuple) or len(result) != len(prompts):
        kind = type(result).__name__
        size = len(result) if isinstance(result, list | tuple) else "?"
        return {
            "ok": False,
            "error": f"generate() returned {kind} of {size} items "
            f"for {len(prompts)} prompts (want a list of bytes)",
        }
    outputs: list[str | None] = []
    sizes: list[int] = []
    types: list[str] = []
    for item, length in zip(result, lengths, strict=True):
        if isinstance(item, bytes | bytearray):
            # One byte more than asked is enough to tell a wrong length; the size says how wrong.
            outputs.append(base64.b64encode(bytes(item[: length + 1])).decode())
            sizes.append(len(item))
            types.append("bytes")
        else:
            outputs.append(None)
            sizes.append(0)
            types.append(type(item).__name__[:40])
    return {"ok": True, "outputs": outputs, "sizes": sizes, "types": types}


def _logprobs(model: Any, request: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    contexts = [base64.b64decode(c) for c in request["contexts"]]
    if not callable(getattr(model, "next_byte_logprobs", None)):
        return {"ok": False, "error": "the model has no next_byte_logprobs(contexts)"}
    result = model.next_byte_logprobs(contexts)
    if hasattr(result, "detach"):  # a torch tensor
        result = result.detach().float().cpu().numpy()
    array = np.asarray(result, dtype=np.float32)
    if array.shape != (len(contexts), 256):
        return {
            "ok": False,
            "error": f"next_byte_logprobs() returned shape {array.shape}, "
            f"want ({len(contexts)}, 256)",
        }
    return {"ok": True, "logprobs": base64.b64encode(array.tobytes()).decode()}


def main() -> None:
    bundle_dir, device = os.path.abspath(sys.argv[1]), sys.argv[2]
    flags = sys.argv[3:]
    wait = "wait" in flags
    nonce = os.environ.pop("ARI_GRADER_NONCE", "").encode()
    # Private protocol fds (not inherited by the bundle's subprocesses), then silence 0 and 1.
    channel = Channel(os.dup(0), os.dup(1), nonce)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _warm_up(device, torch_too="cold" not in flags, numpy_too="bare" not in flags)
    archive: bytes | None = None
    early: BaseException | None = None  # what went wrong unpacking a bundle sent ahead
    if wait:
        request = channel.receive()
        if request.get("op") == "bundle":  # the bundle ahead of the go: unpack it meanwhile
            try:
                _unpack(base64.b64decode(request["archive"]), bundle_dir)
            except BaseException as exc:
                early = exc
            request = channel.receive()
        if request.get("op") != "load":
            return  # the host let this worker go unused
        if "archive" in request:
            archive = base64.b64decode(request["archive"])
    started = time.monotonic()
    try:
        if early is not None:
            raise early
        if archive is not None:
            _unpack(archive, bundle_dir)
            del archive
        model = _import_inference(bundle_dir).load(bundle_dir, device)
    except BaseException as exc:  # the bundle's failure is a result to report, SystemExit too
        channel.send({**_error(exc), "stage": "load"})
        return
    channel.send({"ok": True, "stage": "load", "load_s": time.monotonic() - started})
    handlers = {"generate": _generate, "logprobs": _logprobs}
    while True:
        request = channel.receive()
        if request.get("op") == "bye":
            return
        try:
            reply = handlers[request["op"]](model, request)
        except BaseException as exc:
            reply = _error(exc)
        channel.send(reply)


if __name__ == "__main__":
    main()
