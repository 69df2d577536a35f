"""Resetting Ruby's statistics completely.

gem5 24.0.0.1's ``Switch::resetStats()`` (src/mem/ruby/network/simple/Switch.cc)
clears its PerfectSwitch only and does not call the base ``Group::resetStats``,
so a ``m5.stats.reset()`` leaves every router's throttle statistics
(``routers*.throttle*.msg_count.*``) running on from the start of the process.
The study's remote/local request split reads exactly those counts, so after a
warm-up in Ruby they carried the warm-up's traffic into the ROI (found on
2026-11-24: directory 2 had received 95 230 requests and writebacks in the
ROI, its throttle said 193 729). ``reset_stats`` resets them explicitly.
"""

from __future__ import annotations

from typing import Any


def reset_throttles(root: Any) -> int:
    """Reset the throttle statistics groups of every Ruby ``Switch`` under
    ``root`` (a gem5 SimObject); returns how many were reset."""
    n = 0
    for obj in root.descendants():
        if type(obj).__name__ != "Switch":
            continue
        for name, group in obj.getStatGroups().items():
            if name.startswith("throttle"):
                group.resetStats()
                n += 1
    return n


def reset_stats(root: Any) -> None:
    """``m5.stats.reset()`` and the throttles it misses."""
    import m5  # noqa: PLC0415 - only inside gem5

    m5.stats.reset()
    reset_throttles(root)
