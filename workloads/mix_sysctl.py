"""The kernel knobs a mix runs under: the load-balancing policy and NUMA
balancing, written through /proc/sys (no shell) and read back.

Its own module because the run record must say what was in force, not only
what was asked for. Stdlib only, Python >= 3.6 (see mixrunner.py).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
from typing import Any, Dict, List, Optional, Tuple

from mix_metrics import read_text

POLICY_SYSCTL = "kernel/sched_numa_lb_policy"
NUMAB_SYSCTL = "kernel/numa_balancing"
# /proc/schedstat counts only while this is 1 (CONFIG_SCHEDSTATS is a static
# key, off by default); on for every run, every policy alike
SCHEDSTATS_SYSCTL = "kernel/sched_schedstats"
# kernel patch 0024: an m5 op per context switch for the gem5 counter bridge
# (configs/numa_lb/task_ledger.py); 1 only on a kernel booted with numa_lb_m5=1
M5_SWITCH_SYSCTL = "kernel/numa_lb_m5_switch"


def read_sysctl(root: str, name: str) -> Optional[str]:
    txt = read_text(os.path.join(root, name))
    return None if txt is None else txt.strip()


def set_sysctl(root: str, name: str, value: Optional[str]) -> Dict[str, Any]:
    """Write one sysctl through /proc/sys (no shell) and read back what is in force."""
    path = os.path.join(root, name)
    rec = {"name": name.replace("/", "."), "requested": value}  # type: Dict[str, Any]
    before = read_sysctl(root, name)
    rec["before"] = before
    if before is None and not os.path.exists(path):
        rec["status"] = "absent"
        rec["in_force"] = None
        return rec
    if value is None:
        rec["status"] = "untouched"
    else:
        try:
            with open(path, "w") as f:
                f.write(value + "\n")
            rec["status"] = "set"
        except OSError as e:
            rec["status"] = "error"
            rec["error"] = f"{type(e).__name__}: {e}"
    rec["in_force"] = read_sysctl(root, name)
    if value is not None and rec["status"] == "set" and rec["in_force"] != value:
        # e.g. a policy file that shows a list with the active one marked
        rec["status"] = "mismatch"
    return rec


# Scheduler-domain knobs (debugfs, CONFIG_SCHED_DEBUG): the balancing
# intervals a study may scale with its ROI (docs/DESIGN.md, "Time scale").
SCHED_DEBUG = "kernel/debug/sched"
SCHED_DOMAINS = SCHED_DEBUG + "/domains"
DOMAIN_KNOBS = ("busy_factor", "min_interval", "max_interval", "imbalance_pct")
# ... and the global ones (debugfs sched/): migration_cost_ns, a task that ran
# within it is cache-hot (task_hot()); CFS's time slice, latency_ns (the
# period), min_granularity_ns (a task's least slice) and wakeup_granularity_ns
# (a waking task preempts when this much ahead)
GLOBAL_KNOBS = (
    "migration_cost_ns",
    "latency_ns",
    "min_granularity_ns",
    "wakeup_granularity_ns",
)
# ... and one scheduler feature (debugfs sched/features, "HRTICK" or
# "NO_HRTICK"): CFS ends a slice with an hrtimer instead of at the next tick
# (4 ms at HZ 250), so a scaled slice shorter than a tick is kept
FEATURES = "features"
HRTICK = "HRTICK"


def feature_state(path: str, name: str) -> Optional[str]:
    """NAME or NO_NAME as the features file lists it; None: no such file or feature."""
    toks = (read_text(path) or "").split()
    for tok in (name, "NO_" + name):
        if tok in toks:
            return tok
    return None


def domain_names(sys_root: str) -> Dict[str, str]:
    """{"cpuN/domainM": level name (MC, NUMA, ...)} from debugfs; empty when it
    is not mounted. The one walk of the domain tree (knobs and schedstat)."""
    base = os.path.join(sys_root, SCHED_DOMAINS)
    out = {}  # type: Dict[str, str]
    try:
        cpus = sorted(os.listdir(base))
    except OSError:
        return out
    for cpu in cpus:
        try:
            doms = sorted(os.listdir(os.path.join(base, cpu)))
        except OSError:
            continue
        for dom in doms:
            name = read_text(os.path.join(base, cpu, dom, "name"))
            if name is not None:
                out[f"{cpu}/{dom}"] = name.strip()
    return out


def domain_dirs(sys_root: str, level: str) -> List[str]:
    """cpuN/domainM directories whose sched domain is named @level (e.g. NUMA)."""
    base = os.path.join(sys_root, SCHED_DOMAINS)
    return [os.path.join(base, d) for d, name in domain_names(sys_root).items() if name == level]


def set_sched_domain(sys_root: str, settings: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Write @settings' knobs into every domain of its level (and the global
    ones into debugfs' sched directory), read them back.

    The record keeps each file's previous value (to restore it) and the
    distinct values in force after the write."""
    rec = {"requested": settings}  # type: Dict[str, Any]
    if not settings:
        rec["status"] = "untouched"
        return rec
    targets = []  # type: List[Any]
    dom_knobs = [k for k in DOMAIN_KNOBS if k in settings]
    if dom_knobs:
        dirs = domain_dirs(sys_root, settings["level"])
        rec["domains"] = len(dirs)
        if not dirs:
            rec["status"] = "absent"
            return rec
        targets += [(d, dom_knobs) for d in dirs]
    sched_dir = os.path.join(sys_root, SCHED_DEBUG)
    glob_knobs = [k for k in GLOBAL_KNOBS if k in settings]
    if glob_knobs:
        targets.append((sched_dir, glob_knobs))
    before = {}  # type: Dict[str, Dict[str, str]]
    errors = []  # type: List[str]
    for d, knobs in targets:
        before[d] = {}
        for knob in knobs:
            old = _swap(os.path.join(d, knob), settings[knob], errors)
            if old is not None:
                before[d][knob] = old
    want = {k: [str(v)] for k, v in settings.items() if k in DOMAIN_KNOBS + GLOBAL_KNOBS}
    if "hrtick" in settings:
        feat = os.path.join(sched_dir, FEATURES)
        old = feature_state(feat, HRTICK)
        if old is None:
            errors.append(f"{feat}: absent or without {HRTICK}")
        else:
            before.setdefault(sched_dir, {})[FEATURES] = old
            tok = HRTICK if settings["hrtick"] else "NO_" + HRTICK
            try:
                with open(feat, "w") as f:
                    f.write(tok + "\n")
            except OSError as e:
                errors.append(f"{feat}: {e}")
            want[FEATURES] = [tok]
    rec["before"] = before
    after = {}  # type: Dict[str, List[str]]
    for d in before:
        for knob in before[d]:
            path = os.path.join(d, knob)
            if knob == FEATURES:
                val = feature_state(path, HRTICK) or ""
            else:
                val = (read_text(path) or "").strip()
            after.setdefault(knob, [])
            if val not in after[knob]:
                after[knob].append(val)
    rec["in_force"] = after
    return _settle(rec, errors, after == want)


def _swap(path: str, value: Any, errors: List[str]) -> Optional[str]:
    """Write value to path; what was there (stripped), None when the file is
    absent (said in errors). A failed write is said in errors too, and the
    old value is still returned: it is what a restore writes back."""
    old = read_text(path)
    if old is None:
        errors.append(f"{path}: absent")
        return None
    try:
        with open(path, "w") as f:
            f.write(f"{value}\n")
    except OSError as e:
        errors.append(f"{path}: {e}")
    return old.strip()


def _settle(rec: Dict[str, Any], errors: List[str], as_asked: bool) -> Dict[str, Any]:
    """rec with its status: error (what failed), mismatch (written, but not in
    force as asked) or set."""
    if errors:
        rec["status"], rec["errors"] = "error", errors
    else:
        rec["status"] = "set" if as_asked else "mismatch"
    return rec


def _write_back(rec: Dict[str, Any], values: List[Tuple[str, str]]) -> str:
    """Write each (path, value) a set_* call found back; the restore's status."""
    if rec.get("status") not in ("set", "mismatch", "error"):
        return "untouched"
    for path, val in values:
        try:
            with open(path, "w") as f:
                f.write(val + "\n")
        except OSError:
            return "error"
    return "restored"


def restore_sched_domain(rec: Dict[str, Any]) -> str:
    """Write back what set_sched_domain found; the status of the restore."""
    before = rec.get("before", {})
    return _write_back(
        rec, [(os.path.join(d, k), v) for d, knobs in before.items() for k, v in knobs.items()]
    )


# NUMA balancing's time constants (debugfs, CONFIG_NUMA_BALANCING and
# CONFIG_SCHED_DEBUG; 6.1 kernel/sched/debug.c): the scan delay and periods a
# study may scale with its ROI like the balancing intervals (docs/DESIGN.md,
# "Time scale"). Global, read when a process's mm is set up (the delay) and
# at each scan, so they are written before the programs start.
NUMA_SCAN_DIR = SCHED_DEBUG + "/numa_balancing"


def set_numa_scan(sys_root: str, settings: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Write @settings (mix_job.numa_scan_settings) into debugfs' numa_balancing
    directory and read them back.

    The record keeps each file's previous value ("before": to restore it and
    to show what the kernel had) and the values in force after the write."""
    rec = {"requested": settings}  # type: Dict[str, Any]
    if not settings:
        rec["status"] = "untouched"
        return rec
    d = os.path.join(sys_root, NUMA_SCAN_DIR)
    rec["dir"] = d
    if not os.path.isdir(d):  # debugfs not mounted, or no CONFIG_NUMA_BALANCING
        rec["status"] = "absent"
        return rec
    before = {}  # type: Dict[str, str]
    errors = []  # type: List[str]
    for knob in sorted(settings):
        old = _swap(os.path.join(d, knob), settings[knob], errors)
        if old is not None:
            before[knob] = old
    rec["before"] = before
    rec["in_force"] = {k: (read_text(os.path.join(d, k)) or "").strip() for k in before}
    return _settle(rec, errors, rec["in_force"] == {k: str(v) for k, v in settings.items()})


def restore_numa_scan(rec: Dict[str, Any]) -> str:
    """Write back what set_numa_scan found; the status of the restore."""
    before = rec.get("before", {})
    return _write_back(rec, [(os.path.join(rec.get("dir", ""), k), v) for k, v in before.items()])
