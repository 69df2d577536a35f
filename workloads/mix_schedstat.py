"""The kernel's own load-balancing statistics per scheduling-domain level.

/proc/schedstat (CONFIG_SCHEDSTATS, format version 15 in Linux 6.1) holds,
for every CPU and every domain of it, how many load_balance() passes ran and
how they ended, per idle type (idle, busy, newly idle), plus active balancing
and wake-up placement counts. Summed over CPUs per level (MC, NUMA, named from
the debugfs domain directories, mix_sysctl.domain_names), the delta over a run says how often the
NUMA level looked, how often it found the nodes balanced or no busiest group,
and how many tasks it pulled: the stock kernel's view of what the patch's
counters see only inside a cross-node pass.

The per-CPU lines (run queue) give the regime: rq_cpu_time is the time
non-idle tasks ran on that CPU and run_delay the time tasks waited on its
queue, both in ns and added when a task leaves the CPU / gets it (the
kernel's sched_info_depart/arrive), so a task running or waiting at a
snapshot is counted only later. cpu_window() takes them around the ROI
(mix_run.run_programs), where nothing of the mix runs yet or any more.
Stdlib only, Python >= 3.6.
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import time
from typing import Dict, List, Optional, Tuple

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
# a "cpuN" line, version 15 (show_schedstat: "cpu%d %u 0 %u %u %u %u %llu
# %llu %lu"): the second field is the O(1) scheduler's expired count, always
# printed as 0; rq_cpu_time and run_delay in ns, pcount = timeslices run
CPU_FIELDS = (
    "yld_count",
    "legacy_zero",
    "sched_count",
    "sched_goidle",
    "ttwu_count",
    "ttwu_local",
    "rq_cpu_time",
    "run_delay",
    "pcount",
)


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


def parse_cpus(text: str) -> Dict[str, Dict[str, int]]:
    """{"cpuN": {field: value}} of one /proc/schedstat snapshot's per-CPU lines.

    SchedstatError on another version, a cpu line without the 9 counters, or
    a snapshot without any cpu line."""
    lines = text.splitlines()
    if not lines or lines[0].split() != ["version", "15"]:
        raise SchedstatError(f"not /proc/schedstat version 15: {lines[:1]!r}")
    out = {}  # type: Dict[str, Dict[str, int]]
    for ln in lines[1:]:
        tok = ln.split()
        if not tok or not tok[0].startswith("cpu"):
            continue
        vals = tok[1:]
        if (
            not tok[0][3:].isdigit()
            or len(vals) != len(CPU_FIELDS)
            or not all(v.isdigit() for v in vals)
        ):
            raise SchedstatError(f"bad cpu line: {ln[:120]!r}")
        out[tok[0]] = {k: int(vals[i]) for i, k in enumerate(CPU_FIELDS)}
    if not out:
        raise SchedstatError("no cpu line")
    return out


def cpu_delta(before: str, after: str) -> Dict[str, Dict[str, int]]:
    """Per-CPU deltas of two snapshots; SchedstatError when the CPU sets differ
    (a CPU went on- or offline: the sums would not be over the same CPUs)."""
    b, a = parse_cpus(before), parse_cpus(after)
    if set(a) != set(b):
        raise SchedstatError(f"CPU set changed: {sorted(b)} -> {sorted(a)}")
    return {c: {k: a[c][k] - b[c][k] for k in CPU_FIELDS} for c in sorted(a, key=_cpu_no)}


def _cpu_no(name: str) -> int:
    return int(name[3:])


def stamp(path: str = SCHEDSTAT) -> Optional[Tuple[float, str]]:
    """(CLOCK_MONOTONIC s, text) of one read, None without the file. The
    clock is read after the text: the read itself is short (8 CPUs: well
    under a millisecond) next to a 0.1 s window."""
    text = snapshot(path)
    if text is None:
        return None
    return time.monotonic(), text


def cpu_window(begin: Optional[Tuple[float, str]], end: Optional[Tuple[float, str]]) -> Dict:
    """One window's per-CPU record: {"status", "window_s", "cpus", "delta"}.

    The window is the guest's monotonic time between the two reads, i.e. the
    interval the deltas cover (simulated time under gem5)."""
    if begin is None or end is None:
        return {"status": "absent"}
    try:
        d = cpu_delta(begin[1], end[1])
    except SchedstatError as e:
        return {"status": "error", "error": str(e)}
    return {
        "status": "present",
        "window_s": round(end[0] - begin[0], 9),
        "cpus": len(d),
        "delta": d,
    }


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
