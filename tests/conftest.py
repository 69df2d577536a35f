"""Shared test setup: the tools in kernel-patches/ are scripts, not a package."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("kernel-patches", ""):
    p = str(ROOT / sub) if sub else str(ROOT)
    if p not in sys.path:
        sys.path.insert(0, p)
