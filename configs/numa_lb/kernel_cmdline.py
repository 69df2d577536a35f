"""Kernel command line pieces for the NUMA guest.

Nothing NUMA-related is passed on the command line on purpose: the guest learns
CPUs, nodes and distances from our ACPI tables and memory from gem5's E820 table,
both generated from the same ``Topology``. The command line only carries what
makes a gem5 boot practical (lpj) and correct (idle=halt).
"""

from __future__ import annotations

DEBIAN_HZ = 250  # CONFIG_HZ of Debian's 6.1 kernel config


def loops_per_jiffy(clock_hz: int, kernel_hz: int = DEBIAN_HZ) -> int:
    """lpj for a TSC-based delay loop: TSC ticks per jiffy.

    Passing it skips the delay-loop calibration, which costs simulated seconds.
    """
    return clock_hz // kernel_hz


def kernel_args(clock_hz: int, kernel_hz: int = DEBIAN_HZ, console: str = "ttyS0") -> list[str]:
    """Arguments in gem5 stdlib form: ``{root_value}`` is filled in by the board."""
    return [
        f"earlyprintk={console}",
        f"console={console}",
        f"lpj={loops_per_jiffy(clock_hz, kernel_hz)}",
        # MWAIT idle wakes on a write to the monitored line; gem5's atomic_noncaching
        # boot bypasses Ruby, so no such write is ever seen and a remote wake-up
        # (the scheduler skips the IPI for a CPU in mwait) waits for the next
        # tick, which NO_HZ idle has stopped. HLT idle is woken by an IPI.
        "idle=halt",
        # gem5's TSCs all count the one simulated clock, but Linux assumes a
        # multi-socket non-Intel machine without CONSTANT_TSC is unsynchronized,
        # marks the TSC unstable and falls back to jiffies: 4 ms clock_gettime
        # resolution, useless for the guest-timed workloads.
        "tsc=reliable",
        "root={root_value}",
    ]
