"""Moved to `toolkit.clock` (below both `toolkit.run` and `toolkit.runner`); this name stays
only so that code written against the old path keeps importing. New code imports `toolkit.clock`.
"""

from toolkit.clock import Clock, format_duration

__all__ = ["Clock", "format_duration"]
