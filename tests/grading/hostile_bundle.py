"""A hostile bundle that tries to get the exam it is shown out through a grading's report.

Each `MODE` tries one channel: the reply's keys, the bundle's error text, stderr, the exit
status, the type name of an output, a reply too large or not JSON, a load() failure quoting
what it found, and the same in phase 2 (whose contexts hold the answers). Everything it says
starts with a canary (built at run time, so the bundle's source, which an agent's transcript
may show, does not hold it) followed by the prompts and contexts it has seen.
"""

from __future__ import annotations

import secrets
import textwrap

CANARY = "CANARY-" + secrets.token_hex(8)
"""What every message of the hostile bundle starts with (a secret of the leak scans)."""

PHASE1_MODES = [
    "extra_key",
    "raise_generate",
    "stderr_exit",
    "type_name",
    "huge_reply",
    "not_json",
    "load_fail",
    "load_stderr_exit",
]
"""Modes that fail phase 1 (the grading fails as a whole)."""
PHASE2_MODES = ["raise_logprobs", "extra_key_logprobs", "logprobs_stderr_exit", "bad_logprobs"]
"""Modes that pass phase 1 and fail phase 2 (bits per byte is missing)."""
MODES = PHASE1_MODES + PHASE2_MODES

SOURCE = """
    import base64, json, os, struct, sys
    import __main__

    MODE = {mode!r}
    CANARY = "".join(reversed({reversed_canary!r}))
    LOOK_AT = {look_at!r}
    seen = []

    def said():
        # The canary at both ends: what keeps a head or a tail of the message still holds it.
        return CANARY + " " + " | ".join(seen)[-3000:] + " " + CANARY

    def add_key():
        send = __main__.Channel.send
        def patched(self, message):
            if message.get("ok"):
                message = {{**message, said()[:400]: 1}}
            send(self, message)
        __main__.Channel.send = patched

    def raw_frame(body):
        def patched(self, message):
            data = __main__.MAGIC + self.nonce + struct.pack(">I", len(body)) + body
            while data:
                data = data[os.write(self.fd_out, data):]
        __main__.Channel.send = patched

    def die():
        sys.stderr.write(said() + "\\n")
        sys.stderr.flush()
        os._exit(3)

    class Model:
        def generate(self, prompts, lengths):
            seen.extend(p.decode("utf-8", "replace") for p in prompts)
            if MODE == "extra_key":
                add_key()
            elif MODE == "raise_generate":
                raise RuntimeError(said())
            elif MODE == "stderr_exit":
                die()
            elif MODE == "type_name":
                return [type(p.decode("utf-8", "replace")[-40:], (), {{}})() for p in prompts]
            elif MODE == "huge_reply":
                raw_frame(json.dumps({{"ok": True, "x": said() * 2000}}).encode())
            elif MODE == "not_json":
                raw_frame(said().encode())
            return [b" " * n for n in lengths]

        def next_byte_logprobs(self, contexts):
            import numpy as np
            seen.extend(c.decode("utf-8", "replace") for c in contexts)
            if MODE == "raise_logprobs":
                raise ValueError(said())
            if MODE == "extra_key_logprobs":
                add_key()
            if MODE == "logprobs_stderr_exit":
                die()
            rows = np.full((len(contexts), 256), -np.log(256.0), dtype=np.float32)
            if MODE == "bad_logprobs":
                rows[0, : min(256, len(contexts[0]))] = list(contexts[0][:256])
            return rows

    def load(bundle_dir, device):
        if MODE in ("load_fail", "load_stderr_exit"):
            found = []
            for path in LOOK_AT:
                try:
                    found.append(open(path, errors="replace").read(2000))
                except OSError as exc:
                    found.append(repr(exc))
            seen.extend(found)
            if MODE == "load_stderr_exit":
                die()
            raise FileNotFoundError("found: " + said())
        return Model()
"""


def hostile_source(mode: str, look_at: list[str] | None = None) -> str:
    """inference.py of the hostile bundle in `mode`; `look_at`: files load() tries to read."""
    assert mode in MODES, mode
    return textwrap.dedent(
        SOURCE.format(mode=mode, reversed_canary=CANARY[::-1], look_at=look_at or [])
    )


def secret_questions(count: int = 3) -> list[dict[str, str]]:
    """Questions with long, unique prompts and answers (nothing else holds them)."""
    out = []
    for i in range(count):
        phrase = f"vault-{secrets.token_hex(6)}-{secrets.token_hex(6)}"
        out.append(
            {
                "id": f"secret-{i}",
                "family": "secret",
                "prompt": f"Ledger {i} {secrets.token_hex(12)}. The phrase is {phrase}. "
                "Asked again, the phrase is ",
                "answer": phrase,
            }
        )
    return out
