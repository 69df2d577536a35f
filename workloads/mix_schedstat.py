"""The kernel's own load-balancing statistics per scheduling-domain level.

/proc/schedstat (CONFIG_SCHEDSTATS, format version 15 in Linux 6.1) holds,
for every CPU and every domain of it, how many load_balance() passes ran and
how they ended, per idle type (idle, busy, newly idle), plus active balancing
and wake-up placement counts. Summed over CPUs per level (MC, NUMA, named from
the debugfs domain directories, mix_sysctl.domain_names), the delta over a run says how often the
NUMA level looked, how often it found the nodes balanced or no busiest group,
and how many tasks it pulled: the stock kernel's view of what the patch's
counters see only inside a cross-node pass. Stdlib only, Python >= 3.6.
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

from typing import Dict, List, Optional

SCHEDSTAT = "/proc/schedstat"

# per idle type, in the kernel's order (enum cpu_idle_type: CPU_IDLE,
# CPU_NOT_IDLE, CPU_NEWLY_IDLE) -- show_schedstat() in kernel/sched/stats.c
IDLE_TYPES = ("idle", "busy", "newidle")
LB_FIELDS = (
    "lb_count",
    "lb_balanced",
    "lb_failed",
    "lb_imbalance",
    "lb_gained",
    "lb_hot_gained",
    "lb_nobusyq",
    "lb_nobusyg",
)
TAIL_FIELDS = (
    "alb_count",
    "alb_failed",
    "alb_pushed",
    "sbe_count",
    "sbe_balanced",
    "sbe_pushed",
    "sbf_count",
    "sbf_balanced",
    "sbf_pushed",
    "ttwu_wake_remote",
    "ttwu_move_affine",
    "ttwu_move_balance",
)
N_FIELDS = len(IDLE_TYPES) * len(LB_FIELDS) + len(TAIL_FIELDS)


class SchedstatError(ValueError):
    """Text that is not a version-15 /proc/schedstat."""


def field_names() -> List[str]:
    """The 36 counters of a domain line, named <field>_<idle type> then the tail."""
    return [f"{f}_{t}" for t in IDLE_TYPES for f in LB_FIELDS] + list(TAIL_FIELDS)


def parse(text: str, names: Optional[Dict[str, str]] = None) -> Dict[str, Dict[str, int]]:
    """{level: {counter: sum over CPUs}} of one /proc/schedstat snapshot.

    @names maps "cpuN/domainM" to the level's name (MC, NUMA, ...); a domain
    without one is called "domainM". SchedstatError on another version or a
    domain line that does not have the 36 counters."""
    lines = text.splitlines()
    if not lines or lines[0].split() != ["version", "15"]:
        raise SchedstatError(f"not /proc/schedstat version 15: {lines[:1]!r}")
    keys = field_names()
    out = {}  # type: Dict[str, Dict[str, int]]
    cpu = None  # type: Optional[str]
    for ln in lines[1:]:
        tok = ln.split()
        if not tok:
            continue
        if tok[0].startswith("cpu"):
            cpu = tok[0]
            continue
        if not tok[0].startswith("domain"):
            continue  # "timestamp N"
        vals = tok[2:]
        if cpu is None or len(vals) != N_FIELDS or not all(v.isdigit() for v in vals):
            raise SchedstatError(f"bad domain line for {cpu}: {ln[:120]!r}")
        level = (names or {}).get(f"{cpu}/{tok[0]}", tok[0])
        acc = out.setdefault(level, {k: 0 for k in keys})
        for i, k in enumerate(keys):  # no zip(strict=): Python 3.6
            acc[k] += int(vals[i])
    return out


def snapshot(path: str = SCHEDSTAT) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def record(before: Optional[str], after: Optional[str], names: Dict[str, str]) -> Dict:
    """The run record's "schedstat" entry: per-level deltas, or why there are none."""
    rec = {"path": SCHEDSTAT, "domain_names": names}  # type: Dict
    if before is None or after is None:
        rec["status"] = "absent"
        return rec
    try:
        b, a = parse(before, names), parse(after, names)
    except SchedstatError as e:
        rec.update(status="error", error=str(e), before_raw=before, after_raw=after)
        return rec
    rec.update(status="present", before_raw=before, after_raw=after)
    rec["delta"] = {
        lvl: {k: a[lvl][k] - b.get(lvl, {}).get(k, 0) for k in a[lvl]} for lvl in sorted(a)
    }
    return rec
