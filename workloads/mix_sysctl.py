"""The kernel knobs a mix runs under: the load-balancing policy and NUMA
balancing, written through /proc/sys (no shell) and read back.

Its own module because the run record must say what was in force, not only
what was asked for. Stdlib only, Python >= 3.6 (see mixrunner.py).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
from typing import Any, Dict, List, Optional

from mix_metrics import read_text

POLICY_SYSCTL = "kernel/sched_numa_lb_policy"
NUMAB_SYSCTL = "kernel/numa_balancing"
# /proc/schedstat counts only while this is 1 (CONFIG_SCHEDSTATS is a static
# key, off by default); on for every run, every policy alike
SCHEDSTATS_SYSCTL = "kernel/sched_schedstats"


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
# ... and the global one: a task that ran within it is cache-hot (task_hot())
GLOBAL_KNOBS = ("migration_cost_ns",)


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
    glob_knobs = [k for k in GLOBAL_KNOBS if k in settings]
    if glob_knobs:
        targets.append((os.path.join(sys_root, SCHED_DEBUG), glob_knobs))
    before = {}  # type: Dict[str, Dict[str, str]]
    errors = []  # type: List[str]
    for d, knobs in targets:
        before[d] = {}
        for knob in knobs:
            path = os.path.join(d, knob)
            old = read_text(path)
            if old is None:
                errors.append(f"{path}: absent")
                continue
            before[d][knob] = old.strip()
            try:
                with open(path, "w") as f:
                    f.write(f"{settings[knob]}\n")
            except OSError as e:
                errors.append(f"{path}: {e}")
    rec["before"] = before
    after = {}  # type: Dict[str, List[str]]
    for d in before:
        for knob in before[d]:
            val = (read_text(os.path.join(d, knob)) or "").strip()
            after.setdefault(knob, [])
            if val not in after[knob]:
                after[knob].append(val)
    rec["in_force"] = after
    want = {k: [str(v)] for k, v in settings.items() if k in DOMAIN_KNOBS + GLOBAL_KNOBS}
    if errors:
        rec["status"], rec["errors"] = "error", errors
    elif after != want:
        rec["status"] = "mismatch"
    else:
        rec["status"] = "set"
    return rec


def restore_sched_domain(rec: Dict[str, Any]) -> str:
    """Write back what set_sched_domain found; the status of the restore."""
    if rec.get("status") not in ("set", "mismatch", "error"):
        return "untouched"
    for d, knobs in rec.get("before", {}).items():
        for knob, val in knobs.items():
            try:
                with open(os.path.join(d, knob), "w") as f:
                    f.write(val + "\n")
            except OSError:
                return "error"
    return "restored"


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
        path = os.path.join(d, knob)
        old = read_text(path)
        if old is None:
            errors.append(f"{path}: absent")
            continue
        before[knob] = old.strip()
        try:
            with open(path, "w") as f:
                f.write(f"{settings[knob]}\n")
        except OSError as e:
            errors.append(f"{path}: {e}")
    rec["before"] = before
    rec["in_force"] = {k: (read_text(os.path.join(d, k)) or "").strip() for k in before}
    if errors:
        rec["status"], rec["errors"] = "error", errors
    elif rec["in_force"] != {k: str(v) for k, v in settings.items()}:
        rec["status"] = "mismatch"
    else:
        rec["status"] = "set"
    return rec


def restore_numa_scan(rec: Dict[str, Any]) -> str:
    """Write back what set_numa_scan found; the status of the restore."""
    if rec.get("status") not in ("set", "mismatch", "error"):
        return "untouched"
    for knob, val in rec.get("before", {}).items():
        try:
            with open(os.path.join(rec["dir"], knob), "w") as f:
                f.write(val + "\n")
        except OSError:
            return "error"
    return "restored"
