"""The post-ROI CPU (numa_run.py ``--cpu-post-roi atomic``): the guest's
hand-back after the ROI runs on the boot CPU again instead of the timing CPU.

After the ROI nothing is measured, yet the hand-back (counters, result files,
``m5 writefile``) took about 72 ms of guest time in every run so far, 195-391
host seconds on the timing CPU under Ruby. gem5's own ``m5.switchCpus()``
would give the atomic CPU its memory mode "atomic", which Ruby refuses; Ruby
needs "atomic_noncaching", whose CPU reads and writes memory past the caches.
So every dirty line is written back first: ``memWriteback`` makes the
RubySystem flush its caches through the protocol (MOESI_hammer implements the
flush; the same path gem5 takes before a checkpoint). Imported inside gem5 only.
"""

from __future__ import annotations

from typing import Any

import m5
from m5 import params


def back_to_boot_cpu(board: Any, processor: Any) -> None:
    """Hand the cores from the ROI CPU back to the (atomic) boot CPU."""
    if getattr(processor, "_current_is_start", True):
        raise RuntimeError("post-ROI switch: the boot CPU is still the one running")
    old = [c.get_simobject() for c in processor._switchable_cores[processor._switch_key]]
    new = [c.get_simobject() for c in processor._switchable_cores[processor._start_key]]
    m5.drain()
    for cpu in old:
        cpu.switchOut()
    m5.memWriteback(board)
    m5.memInvalidate(board)
    board.setMemoryMode(params.allEnums["MemoryMode"]("atomic_noncaching").getValue())
    for o, n in zip(old, new, strict=True):
        n.takeOverFrom(o)
    # the processor's own bookkeeping, as its switch() would leave it
    processor._current_cores = processor._switchable_cores[processor._start_key]
    processor._current_is_start = True
