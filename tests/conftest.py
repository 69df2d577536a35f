"""Shared test setup: kernel-patches/ tools are scripts; configs/numa_lb describes the machine."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for sub in ("kernel-patches", "configs", ""):
    p = str(ROOT / sub) if sub else str(ROOT)
    if p not in sys.path:
        sys.path.insert(0, p)
