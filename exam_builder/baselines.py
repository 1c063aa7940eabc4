"""The two comparison solvers of the quality report: a context-free byte model and copying.

- `NgramModel`: an order-k byte model of ordinary English text with back-off, predicting
  greedily from only the last few bytes. It knows English but not the prompt's definitions, so
  its score says how much of the exam common-text statistics already answer (must be ~0).
- `copy_continue`: continue the longest earlier match of the text's suffix. Its score says how
  much of a family is plain copying from the context.

Both generate exactly as many bytes as the answer has, like the grader asks a bundle to.
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]


class NgramModel:
    """Greedy byte n-gram model: the longest seen context (up to `order` bytes) picks the next byte.

    Counts are kept as sorted (context, next byte) codes per context length, so training is a
    few vectorised sorts and a prediction is a binary search. Ties go to the smallest byte.
    """

    def __init__(self, text: bytes, order: int = 6) -> None:
        if not 1 <= order <= 7:
            raise ValueError("order must be 1..7 (context + next byte packed in 64 bits)")
        self.order = order
        self.training_bytes = len(text)
        self.training_sha256 = hashlib.sha256(text).hexdigest()
        a = np.frombuffer(text, dtype=np.uint8).astype(np.uint64)
        counts = np.bincount(np.frombuffer(text, dtype=np.uint8), minlength=256)
        self._fallback = int(np.argmax(counts)) if len(text) else 32
        self._tables: list[tuple[U64, npt.NDArray[np.int64]]] = []
        for k in range(1, order + 1):
            n = len(a) - k
            if n <= 0:
                self._tables.append((np.zeros(0, np.uint64), np.zeros(0, np.int64)))
                continue
            codes = a[:n].copy()
            for j in range(1, k + 1):
                codes = (codes << np.uint64(8)) | a[j : n + j]
            uniq, cnt = np.unique(codes, return_counts=True)
            self._tables.append((uniq, cnt.astype(np.int64)))

    def next_byte(self, context: bytes) -> int:
        for k in range(min(self.order, len(context)), 0, -1):
            uniq, cnt = self._tables[k - 1]
            key = int.from_bytes(context[-k:], "big") << 8
            # uint64 keys: a Python int list would make numpy compare in float64 (inexact).
            lo, hi = np.searchsorted(uniq, np.array([key, key + 256], dtype=np.uint64))
            if hi > lo:
                best = int(lo) + int(np.argmax(cnt[lo:hi]))
                return int(uniq[best]) & 0xFF
        return self._fallback

    def generate(self, context: bytes, length: int) -> bytes:
        out = bytearray(context[-self.order :])
        for _ in range(length):
            out.append(self.next_byte(bytes(out[-self.order :])))
        return bytes(out[len(out) - length :]) if length else b""


_CACHE: dict[tuple[str, int], NgramModel] = {}


def trained_ngram(text: bytes, order: int = 6) -> NgramModel:
    """An `NgramModel` of `text`, reused while the same text is passed (training takes ~1 s)."""
    key = (hashlib.sha256(text).hexdigest(), order)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = NgramModel(text, order)
    return _CACHE[key]


def copy_continue(context: bytes, length: int, longest: int = 64) -> bytes:
    """Continue the longest (up to `longest` bytes) earlier match of the text's suffix."""
    buf = bytearray(context)
    for _ in range(length):
        follow = ord(" ")
        size = 1
        while size <= min(longest, len(buf) - 1):
            pos = buf.rfind(buf[-size:], 0, len(buf) - 1)
            if pos < 0:
                break
            follow = buf[pos + size]
            size += 1
        buf.append(follow)
    return bytes(buf[len(buf) - length :]) if length else b""
