"""The starter is what an agent receives: plain scripts that import each other as siblings
(`from model import GPT`), run from the workspace as `python starter/train.py`. The tests put
its folder on sys.path the same way."""

from __future__ import annotations

import sys
from pathlib import Path

STARTER = Path(__file__).resolve().parents[2] / "toolkit" / "starter"
if str(STARTER) not in sys.path:
    sys.path.insert(0, str(STARTER))
