"""Devil co-scheduling [HongYoo]: the pure decision rules, no I/O.

Section 3 of the paper: a thread is a *devil* when it makes more than one
last-level-cache miss per 1000 instructions (MPKI > 1); an application is
classified by the average MPKI of its threads (Section 4). For devils the
memory-reference pattern (which node serves each thread's misses) decides:
when the application's references go to one node for at least 80 % (the
migration threshold of Section 3), its threads are co-scheduled on that node
(the master/clients pattern of streamcluster); a pattern spread over nodes
(fluidanimate) would need memory migration first and is left alone.

Decisions where the paper is silent are marked "ours" and listed in
daemons/README.md. Stdlib only, Python >= 3.6 (runs in the guest).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

from typing import Dict, List, NamedTuple, Optional

DEVIL_MPKI = 1.0  # "more than one last-level cache miss per 1000 instructions"
COSCHEDULE_SHARE = 0.80  # "the threshold value for migration is determined to be 80%"

# The paper gives no sampling period (its PEBS address sampling is "periodically
# enabled"); ours: 1 s on real hardware, as IMAR's T; on gem5
# numa_lb_daemon.gem5_periods() maps it to 15.625 ms (daemons/README.md
# "Periods"). allow_oversubscribe: the paper notes that "a
# node cannot accommodate threads that are greater than its size"; ours: such
# a group is not co-scheduled unless this is set.
DEVIL_DEFAULTS = {
    "interval_s": 1.0,
    "devil_mpki": DEVIL_MPKI,
    "share": COSCHEDULE_SHARE,
    "allow_oversubscribe": 0,
}


def mpki(llc_misses: float, instructions: float) -> Optional[float]:
    """LLC misses per 1000 instructions; None without instructions."""
    if instructions <= 0:
        return None
    return 1000.0 * llc_misses / instructions


def is_devil(mpki_value: Optional[float], threshold: float = DEVIL_MPKI) -> bool:
    """Strictly more than the threshold (paper: "more than one")."""
    return mpki_value is not None and mpki_value > threshold


def group_mpki(thread_mpki: List[Optional[float]]) -> Optional[float]:
    """The application's MPKI: the average over its threads that ran (Section 4)."""
    vals = [m for m in thread_mpki if m is not None]
    return sum(vals) / len(vals) if vals else None


def reference_shares(refs_by_node: Dict[int, float]) -> Dict[int, float]:
    """Counts of references per node -> ratios (empty when there are none)."""
    total = sum(refs_by_node.values())
    if total <= 0:
        return {}
    return {n: v / total for n, v in sorted(refs_by_node.items())}


def target_node(
    threads_refs: List[Dict[int, float]], share: float = COSCHEDULE_SHARE
) -> Optional[int]:
    """The node holding at least ``share`` of the group's references (summed
    over its threads), or None. The ratio is the group's aggregate (ours: the
    paper's example has every thread above 80 % for the same node; summing the
    counts weighs each thread by how much it references)."""
    total = {}  # type: Dict[int, float]
    for refs in threads_refs:
        for n, v in refs.items():
            total[n] = total.get(n, 0.0) + v
    ratios = reference_shares(total)
    best = [n for n, r in ratios.items() if r >= share]
    return best[0] if best else None


class GroupDecision(NamedTuple):
    pid: int
    mpki: Optional[float]
    devil: bool
    shares: Dict[int, float]
    target: Optional[int]  # node to co-schedule on, None: leave to the OS
    action: str  # "coschedule", "keep" (already there), "none", "skip:<why>"


def decide_group(
    pid: int,
    thread_mpki: List[Optional[float]],
    threads_refs: List[Dict[int, float]],
    node_cpus: Dict[int, List[int]],
    current_node: Optional[int],
    params: Dict[str, float],
) -> GroupDecision:
    """Classify one application and decide where its threads go.

    ``current_node``: the node the daemon has already co-scheduled the group
    on (None: not co-scheduled). Non-devils are left to the OS."""
    m = group_mpki(thread_mpki)
    total = {}  # type: Dict[int, float]
    for refs in threads_refs:
        for n, v in refs.items():
            total[n] = total.get(n, 0.0) + v
    shares = reference_shares(total)
    if not is_devil(m, float(params["devil_mpki"])):
        return GroupDecision(pid, m, False, shares, None, "none")
    tgt = target_node(threads_refs, float(params["share"]))
    if tgt is None:
        return GroupDecision(pid, m, True, shares, None, "skip:no node holds the share")
    if tgt == current_node:
        return GroupDecision(pid, m, True, shares, tgt, "keep")
    nthreads = len(thread_mpki)
    ncpu = len(node_cpus.get(tgt, []))
    if nthreads > ncpu and not params.get("allow_oversubscribe"):
        return GroupDecision(
            pid, m, True, shares, None, f"skip:{nthreads} threads > {ncpu} cpus of node {tgt}"
        )
    return GroupDecision(pid, m, True, shares, tgt, "coschedule")
