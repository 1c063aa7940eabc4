"""Moved to `toolkit.chain` (below both `toolkit.run` and `toolkit.runner`); this name stays
only so that code written against the old path keeps importing. New code imports `toolkit.chain`.
"""

from toolkit.chain import GENESIS, ChainedLog, ChainError, line_hash, read_chain

__all__ = ["GENESIS", "ChainError", "ChainedLog", "line_hash", "read_chain"]
