"""The mix runner's job format: a job (JSON) validated and normalised.

Split out of mixrunner.py so the host (analysis/sweep, disk-image/qemu_boot)
and the guest share one validator; it only checks and fills in defaults, it
runs nothing. Stdlib only, Python >= 3.6 (see mixrunner.py).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
import re
from typing import Any, Dict, Optional, Tuple  # noqa: F401 (Tuple: type comments)

import parsec_catalog

SCHEMA = 1
PINNINGS = ("free", "direct", "interleave", "crossed")
SYNTHETIC = tuple(parsec_catalog.SYNTHETIC)
_NAME_OK = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
_POLICY_OK = re.compile(r"^[a-z0-9_]{1,32}$")
# The user-level, counter-driven policies: the guest init runs the named one's
# daemon (daemons/numa_lb_daemon.py) on the stock balancer, i.e. the patched
# kernel's default selection; daemon_params override the daemon's defaults.
DAEMON_POLICIES = ("imar", "imar2", "devil", "plb")
# a warm-up is a few ticks of the guest clock, never a second ROI
MAX_WARMUP_S = 1.0


class JobError(Exception):
    """The job file is malformed: nothing was run."""


def _get(d: Dict[str, Any], key: str, types: Any, default: Any = None) -> Any:
    v = d.get(key, default)
    if v is not None and not isinstance(v, types):
        raise JobError(f"{key!r} has the wrong type: {v!r}")
    if isinstance(v, bool) and types in (int, float, (int, float)):
        raise JobError(f"{key!r} must be a number, not a boolean")
    return v


def load_job(job: Dict[str, Any]) -> Dict[str, Any]:
    """Validate a job and return it normalised (defaults filled in)."""
    if not isinstance(job, dict):
        raise JobError("a job is a JSON object")
    known = {
        "schema", "run_id", "policy", "numa_balancing", "strict_policy", "pinning",
        "pin_threads", "sample_interval_s", "read_sched", "timeout_s", "parsec",
        "bin_dir", "programs", "restore_sysctls", "seed", "sched_domain", "daemon_params",
        "warmup_s", "numa_balancing_scan", "switch_marks",
    }  # fmt: skip
    unknown = sorted(set(job) - known)
    if unknown:
        raise JobError(f"unknown job keys: {unknown}")
    if _get(job, "schema", int, SCHEMA) != SCHEMA:
        raise JobError(f"job schema {job.get('schema')} not supported (want {SCHEMA})")
    out = {
        "schema": SCHEMA,
        "run_id": _get(job, "run_id", str, ""),
        "policy": _get(job, "policy", str),
        "numa_balancing": _get(job, "numa_balancing", int),
        "strict_policy": _get(job, "strict_policy", bool, False),
        "pinning": _get(job, "pinning", str, "free"),
        "pin_threads": _get(job, "pin_threads", bool, True),
        "sample_interval_s": float(_get(job, "sample_interval_s", (int, float), 0.1)),
        "read_sched": _get(job, "read_sched", bool, True),
        "timeout_s": _get(job, "timeout_s", (int, float)),
        # simulated seconds on the ROI CPU before the ROI (mix_run.py: warm-up)
        "warmup_s": float(_get(job, "warmup_s", (int, float), 0.0)),
        "bin_dir": _get(job, "bin_dir", str),
        "restore_sysctls": _get(job, "restore_sysctls", bool, True),
        # context-switch marks for gem5's per-task counts (kernel patch 0024)
        "switch_marks": _get(job, "switch_marks", bool, False),
        # The repeat's seed: varies start timing and workload data (mix_run.py),
        # the same for every policy of one repeat so that runs pair.
        "seed": _get(job, "seed", int),
    }  # type: Dict[str, Any]
    pol = out["policy"]
    if pol is not None and not _POLICY_OK.match(pol):
        raise JobError(f"bad policy name {pol!r}")
    if pol == "autonuma":
        # the study's vocabulary: autonuma = stock selection + NUMA balancing
        if out["numa_balancing"] == 0:
            raise JobError("policy 'autonuma' contradicts numa_balancing=0")
        out["policy"], out["numa_balancing"] = "default", 1
    elif pol == "stock":
        # the unmodified kernel: there is no policy sysctl to write, and
        # mix_run.py fails the run if there is one (the wrong kernel booted)
        out["policy"] = None
    elif pol in DAEMON_POLICIES:
        out["policy"] = "default"
    out["policy_requested"] = pol
    out["daemon_params"] = _get(job, "daemon_params", dict)
    if out["daemon_params"] is not None and pol not in DAEMON_POLICIES:
        raise JobError(f"daemon_params given, but policy {pol!r} has no daemon {DAEMON_POLICIES}")
    out["sched_domain"] = sched_domain_settings(_get(job, "sched_domain", dict, None))
    out["numa_balancing_scan"] = numa_scan_settings(_get(job, "numa_balancing_scan", dict, None))
    if out["seed"] is not None and not 0 <= out["seed"] < 2**32:
        raise JobError("seed must be an integer in 0..2**32-1")
    if out["numa_balancing"] not in (None, 0, 1):
        raise JobError("numa_balancing must be 0, 1 or null")
    if out["pinning"] not in PINNINGS:
        raise JobError(f"pinning must be one of {PINNINGS}")
    if not out["sample_interval_s"] > 0:
        raise JobError("sample_interval_s must be > 0")
    if out["timeout_s"] is not None and not out["timeout_s"] > 0:
        raise JobError("timeout_s must be > 0")
    if not 0 <= out["warmup_s"] <= MAX_WARMUP_S:
        raise JobError(f"warmup_s must be in 0..{MAX_WARMUP_S}")
    parsec = _get(job, "parsec", dict, {})
    launcher = _get(parsec, "launcher", str, "parsecmgmt")
    if launcher not in parsec_catalog.LAUNCHERS:
        raise JobError(f"parsec.launcher must be one of {parsec_catalog.LAUNCHERS}")
    ours = launcher == "numa-lb"  # our build installed in our image (parsec.json)
    out["parsec"] = {
        "root": _get(
            parsec, "root", str,
            parsec_catalog.NUMA_LB_PARSEC_ROOT if ours else parsec_catalog.GEM5_PARSEC_ROOT,
        ),
        "config": _get(
            parsec, "config", str,
            parsec_catalog.NUMA_LB_PARSEC_CONFIG if ours else parsec_catalog.GEM5_PARSEC_CONFIG,
        ),
        "launcher": launcher,
    }  # fmt: skip
    progs = _get(job, "programs", list)
    if not progs:
        raise JobError("a job needs a non-empty 'programs' list")
    out["programs"] = []
    names = set()
    for i, p in enumerate(progs):
        q = _load_program(i, p)
        if q["name"] in names:
            raise JobError(f"duplicate program name {q['name']!r}")
        names.add(q["name"])
        out["programs"].append(q)
    if all(q["background"] for q in out["programs"]):
        raise JobError("every program is a background one: nothing would end the mix")
    return out


# CFS's time-slice knobs (debugfs sched/, kernel/sched/debug.c; 6.1's
# defaults on 8 CPUs, scaled by 1 + ilog2(8) = 4: 24 ms, 3 ms, 4 ms). The
# bounds are those of the pre-5.13 sysctls (0.1 ms..1 s; wakeup 0..1 s).
SLICE_KNOBS = {
    "latency_ns": (100000, 1000000000),
    "min_granularity_ns": (100000, 1000000000),
    "wakeup_granularity_ns": (0, 1000000000),
}  # type: Dict[str, Tuple[int, int]]
# kernel/sched/fair.c sched_nr_latency: 6.1 recomputes it from latency_ns /
# min_granularity_ns only when tunable_scaling is written, so the two are
# given together at this ratio (the period then stretches as the kernel's)
SCHED_NR_LATENCY = 8


def sched_domain_settings(d: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """{"level": "NUMA", "busy_factor": 1, "min_interval": 4, ...}: knobs of
    the named sched-domain level (debugfs), positive integers, and the global
    knobs of the scheduler's time scale (debugfs sched/): migration_cost_ns
    (a task that ran within it is cache-hot and stays), 0..500000000, and
    CFS's slice, latency_ns and min_granularity_ns (together, at the ratio
    SCHED_NR_LATENCY) and wakeup_granularity_ns (SLICE_KNOBS), and hrtick
    (true/false: the HRTICK scheduler feature, which ends a slice shorter than
    the 4 ms tick on time); None: untouched."""
    if d is None:
        return None
    knobs = ("busy_factor", "min_interval", "max_interval", "imbalance_pct")
    glob = ("migration_cost_ns",) + tuple(SLICE_KNOBS) + ("hrtick",)
    unknown = set(d) - set(knobs) - {"level"} - set(glob)
    if unknown:
        raise JobError(
            f"sched_domain: unknown keys {sorted(unknown)} "
            f"(allowed: level, {', '.join(knobs + glob)})"
        )
    level = d.get("level", "NUMA")
    if not isinstance(level, str) or not re.match(r"^[A-Z]{2,8}$", level):
        raise JobError(f"sched_domain.level must be a domain name such as NUMA, got {level!r}")
    out = {"level": level}  # type: Dict[str, Any]
    for k in knobs:
        if k in d:
            v = d[k]
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 100000:
                raise JobError(f"sched_domain.{k} must be an integer in 1..100000, got {v!r}")
            out[k] = v
    if "migration_cost_ns" in d:
        v = d["migration_cost_ns"]
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 500000000:
            raise JobError(
                f"sched_domain.migration_cost_ns must be an integer in 0..500000000, got {v!r}"
            )
        out["migration_cost_ns"] = v
    for k, (lo, hi) in SLICE_KNOBS.items():
        if k in d:
            v = d[k]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise JobError(f"sched_domain.{k} must be an integer in {lo}..{hi}, got {v!r}")
            out[k] = v
    if "hrtick" in d:
        if not isinstance(d["hrtick"], bool):
            raise JobError(f"sched_domain.hrtick must be true or false, got {d['hrtick']!r}")
        out["hrtick"] = d["hrtick"]
    if ("latency_ns" in out) != ("min_granularity_ns" in out):
        raise JobError("sched_domain: give latency_ns and min_granularity_ns together")
    if "latency_ns" in out:
        lat, gran = out["latency_ns"], out["min_granularity_ns"]
        if -(-lat // gran) != SCHED_NR_LATENCY:
            raise JobError(
                f"sched_domain: latency_ns / min_granularity_ns must round up to "
                f"{SCHED_NR_LATENCY} (got {lat} / {gran}): 6.1 keeps sched_nr_latency at "
                f"{SCHED_NR_LATENCY} unless tunable_scaling is written"
            )
    if len(out) == 1:
        raise JobError("sched_domain names no knob")
    if out.get("min_interval", 1) > out.get("max_interval", 100000):
        raise JobError("sched_domain.min_interval is above max_interval")
    return out


# NUMA balancing's time constants (kernel/sched/fair.c; in 6.1 the debugfs
# files /sys/kernel/debug/sched/numa_balancing/<key>, kernel/sched/debug.c):
# key -> the most accepted (6.1's defaults: 1000, 1000, 60000 ms, 256 MB).
# The kernel takes any u32 there (debugfs_create_u32, no bounds), but
# scan_size_mb 0 divides by zero in task_scan_min() (the pre-5.13 sysctl had
# a minimum of 1); the upper bounds are ours: 1000 s is far beyond any ROI
# and keeps the period's doubling (numa_scan_period << 1) from overflowing.
NUMA_SCAN_KNOBS = {
    "scan_delay_ms": 1000000,
    "scan_period_min_ms": 1000000,
    "scan_period_max_ms": 1000000,
    "scan_size_mb": 65536,
}  # type: Dict[str, int]


def numa_scan_problem(key: str, value: Any) -> Optional[str]:
    """Why @value cannot be NUMA balancing's @key (None: it can)."""
    if key not in NUMA_SCAN_KNOBS:
        return f"unknown key (allowed: {', '.join(NUMA_SCAN_KNOBS)})"
    most = NUMA_SCAN_KNOBS[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        return f"must be an integer in 1..{most}, got {value!r}"
    return None


def numa_scan_settings(d: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """{"scan_delay_ms": 10, "scan_period_min_ms": 10, ...}: NUMA balancing's
    scan delay, periods and scan size, written to debugfs for the run (the
    keys given; the others keep the kernel's values); None: untouched."""
    if d is None:
        return None
    if not d:
        raise JobError("numa_balancing_scan names no knob")
    out = {}  # type: Dict[str, Any]
    for k in sorted(d):
        problem = numa_scan_problem(k, d[k])
        if problem:
            raise JobError(f"numa_balancing_scan.{k}: {problem}")
        out[k] = d[k]
    if out.get("scan_period_min_ms", 0) > out.get("scan_period_max_ms", 1000000):
        raise JobError("numa_balancing_scan.scan_period_min_ms is above scan_period_max_ms")
    return out


def _load_program(i: int, p: Any) -> Dict[str, Any]:
    if not isinstance(p, dict):
        raise JobError(f"program {i} is not an object")
    kinds = [k for k in ("workload", "parsec", "cmd") if k in p]
    if len(kinds) != 1:
        raise JobError(f"program {i}: give exactly one of workload, parsec, cmd")
    known = {
        "name", "workload", "parsec", "cmd", "threads", "args", "input", "node", "env",
        "background",
    }  # fmt: skip
    unknown = sorted(set(p) - known)
    if unknown:
        raise JobError(f"program {i}: unknown keys {unknown}")
    kind = kinds[0]
    q = {"index": i, "kind": kind}  # type: Dict[str, Any]
    q["threads"] = _get(p, "threads", int, 1)
    if q["threads"] < 1:
        raise JobError(f"program {i}: threads must be >= 1")
    q["args"] = _get(p, "args", list, [])
    if not all(isinstance(a, str) for a in q["args"]):
        raise JobError(f"program {i}: args must be strings")
    q["node"] = _get(p, "node", int)
    # background: load for the others (e.g. streaming while ptrchase measures);
    # stopped (SIGTERM) once every other program has ended, never timed
    q["background"] = _get(p, "background", bool, False)
    env = _get(p, "env", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise JobError(f"program {i}: env must map strings to strings")
    q["env"] = env
    if kind == "workload":
        q["workload"] = _get(p, "workload", str)
        if q["workload"] not in SYNTHETIC:
            raise JobError(f"program {i}: unknown workload {q['workload']!r} ({SYNTHETIC})")
        default = q["workload"]
    elif kind == "parsec":
        try:
            prog = parsec_catalog.lookup(_get(p, "parsec", str))
        except KeyError as e:
            raise JobError(f"program {i}: {e.args[0]}") from None
        q["parsec"] = prog.package
        q["input"] = _get(p, "input", str, "simsmall")
        if q["input"] not in parsec_catalog.INPUTS:
            raise JobError(f"program {i}: input must be one of {parsec_catalog.INPUTS}")
        if q["args"]:
            raise JobError(f"program {i}: PARSEC programs take no args")
        default = prog.package
    else:
        cmd = _get(p, "cmd", list)
        if not cmd or not all(isinstance(a, str) for a in cmd):
            raise JobError(f"program {i}: cmd must be a non-empty list of strings")
        q["cmd"] = cmd
        default = os.path.basename(cmd[0])
    q["name"] = _get(p, "name", str, f"{i}-{default}")
    if not _NAME_OK.match(q["name"]):
        raise JobError(f"program {i}: name {q['name']!r} must match {_NAME_OK.pattern}")
    return q
