"""PLB, proactive load balancing [Revilla24]: the pure decision rules, no I/O.

Section 6 (Algorithms 3 and 4): per core, IPC = instructions retired /
unhalted core cycles, truncated to its hundredths. The first pass sets each
core's IPC threshold to its IPC. Later passes: an IPC above the threshold
raises the threshold to it (runtime-updated thresholds); an IPC below it
keeps the threshold and migrates the thread running on that core to another
core ("a thread cannot be migrated to the same core where it is currently
running"), preferably one of the same scheduling domain (Stage 2: cores that
share resources).

Extension to more than the paper's two cores (ours, in daemons/README.md):
the domain is the core's NUMA node; the destination is the domain's other
core with the fewest managed threads (ties: lowest cpu), the whole machine
when the node has one core; the thread moved is the one that ran most on the
core in the interval. Stdlib only, Python >= 3.6 (runs in the guest).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import math
from typing import Dict, List, NamedTuple, Optional

# The paper samples "at constant time intervals" without a figure; ours:
# 0.1 s on real hardware; on gem5 numa_lb_daemon.gem5_periods() maps it to
# 4 ms (0.1 s / 64 is below one 250 Hz jiffy, the floor the scaled balancing
# intervals stop at too; daemons/README.md "Periods").
PLB_DEFAULTS = {"interval_s": 0.1, "domain": "node"}
DOMAINS = ("node", "machine")


def truncated_ipc(instructions: float, cycles: float) -> Optional[float]:
    """IPC truncated to its hundredth part (Section 6.2); None on an idle core."""
    if cycles <= 0:
        return None
    # a tiny epsilon keeps 0.29 (stored as 0.28999...) at 0.29
    return math.floor(instructions / cycles * 100.0 + 1e-9) / 100.0


class CoreVerdict(NamedTuple):
    cpu: int
    ipc: Optional[float]
    threshold_before: Optional[float]
    threshold_after: Optional[float]
    migrate: bool


class Thresholds:
    """The per-core runtime-updated IPC thresholds."""

    def __init__(self) -> None:
        self.ref = {}  # type: Dict[int, float]

    def update(self, cpu: int, ipc: Optional[float]) -> CoreVerdict:
        """One core, one pass: lines 39-62 of Algorithm 4."""
        before = self.ref.get(cpu)
        if ipc is None:  # idle core: nothing to compare (ours)
            return CoreVerdict(cpu, None, before, before, False)
        if before is None or ipc >= before:
            self.ref[cpu] = ipc
            return CoreVerdict(cpu, ipc, before, ipc, False)
        return CoreVerdict(cpu, ipc, before, before, True)


def destination(
    cpu: int,
    cpu_node: Dict[int, int],
    load: Dict[int, int],
    domain: str = "node",
) -> Optional[int]:
    """Where the thread leaving ``cpu`` goes: another core of its domain with
    the fewest managed threads (ties: lowest cpu); None if there is none."""
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")
    others = [c for c in sorted(cpu_node) if c != cpu]
    if domain == "node":
        same = [c for c in others if cpu_node[c] == cpu_node.get(cpu)]
        others = same or others
    if not others:
        return None
    return min(others, key=lambda c: (load.get(c, 0), c))


def thread_to_move(runtime_on_cpu: Dict[int, float]) -> Optional[int]:
    """The thread that ran most on the core in the interval (ties: lowest tid)."""
    ran = [(-v, tid) for tid, v in runtime_on_cpu.items() if v > 0]
    return min(ran)[1] if ran else None


def check_domain(value: str) -> str:
    if value not in DOMAINS:
        raise ValueError(f"plb domain must be one of {DOMAINS}, got {value!r}")
    return value


def passes(ipcs: List[Dict[int, Optional[float]]]) -> List[List[CoreVerdict]]:
    """Run the threshold rule over successive passes (for tests and replays)."""
    th = Thresholds()
    return [[th.update(c, v) for c, v in sorted(p.items())] for p in ipcs]
