"""Tracks and protocol fixes: the registry kept in a results folder.

- `model`: the `Track` and `ProtocolFix` models and the registry's files (`tracks.json`,
  `protocol_fixes.json`);
- `registry`: a results folder carries the registry entries its runs need.
"""
