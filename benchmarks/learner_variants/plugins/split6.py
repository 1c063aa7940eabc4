"""Look-up probe 'split6': 'glued6' with the register's letters dotted and the answers joined,
so that what follows the key is not the answer as written (../probe.py)."""

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "probe.py"
if "_ari_lookup_probe" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("_ari_lookup_probe", _PATH)
    sys.modules["_ari_lookup_probe"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["_ari_lookup_probe"])

FAMILY = sys.modules["_ari_lookup_probe"].glued_family("split6", pairs=6, split=True)
