"""Moved to `toolkit.chain` (below both `toolkit.run` and `toolkit.runner`; the log heads a
result keeps are in `toolkit.run.artifacts`); this name stays only so that code written against
the old path keeps importing. New code imports `toolkit.chain`.
"""

from toolkit.chain import GENESIS, ChainedLog, ChainError, chain_head, line_hash, read_chain
from toolkit.run.artifacts import CHAINED_ARTIFACTS, log_heads

__all__ = [
    "CHAINED_ARTIFACTS",
    "GENESIS",
    "ChainError",
    "ChainedLog",
    "chain_head",
    "line_hash",
    "log_heads",
    "read_chain",
]
