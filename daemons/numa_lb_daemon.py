#!/usr/bin/env python3
"""numa-lb-daemon: one user-level, counter-driven policy of the study.

    numa_lb_daemon.py POLICY --log FILE (--parent PID | --parent-from-stdin)
                      [--params JSON] [--seed N] [--backend gem5|qemu|host]
                      [--source auto|gem5|perf] [--m5-addr ADDR]

POLICY is one of imar, imar2 [Lorenzo18], devil [HongYoo], plb [Revilla24]
(daemons/README.md). The daemon manages every thread of every process below
PARENT (the mix runner: its children are the mix's programs), samples the
per-CPU counters every interval (counters.py: the gem5 counter bridge, or
perf_event_open on real hardware), lets the policy decide, and pins threads
with sched_setaffinity, on top of the stock kernel balancer. It writes one
JSON line per event to FILE: "start", "interval", "decision", "error" and
a closing "summary" with the counts (samples, migrations, rollbacks ...).

With --parent-from-stdin (how the guest init starts it) the daemon opens its
counters first, prints "numa-lb-daemon: ready POLICY SOURCE" and then reads
the parent's pid from stdin: a policy that cannot run here (no counters:
QEMU) refuses before the mix starts. SIGTERM ends it (the summary is
written). Exit: 0 done, 2 bad arguments or parameters, 3 no counters here,
1 anything else. Stdlib only, Python >= 3.6.
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045, E402

import argparse
import json
import os
import random
import select
import signal
import sys
import time
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import counters as ctr
import daemon_proc as dp
import policy_devil as dv
import policy_imar as im
import policy_plb as plb

POLICIES = ("imar", "imar2", "devil", "plb")
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NO_COUNTERS = 0, 1, 2, 3
LINE_BYTES = 64  # a cache line: instB's bytes of DRAM traffic per LLC miss

# Ours, for every policy: a thread takes part in an interval only if it ran
# for at least this fraction of it (a thread asleep in a join has no counts,
# so IMAR would pick it as the worst every time).
COMMON_DEFAULTS = {"active_fraction": 0.1}  # type: Dict[str, Any]
DEFAULTS = {
    "imar": dict(im.IMAR_DEFAULTS, latency="auto", **COMMON_DEFAULTS),
    "imar2": dict(im.IMAR2_DEFAULTS, latency="auto", **COMMON_DEFAULTS),
    "devil": dict(dv.DEVIL_DEFAULTS, pattern="auto", **COMMON_DEFAULTS),
    "plb": dict(plb.PLB_DEFAULTS, **COMMON_DEFAULTS),
}  # type: Dict[str, Dict[str, Any]]
# latency (imar, imar2): "measured" weighs each thread's requests by home node
# with the machine's calibrated load latencies (the bridge reply's
# load_latency), "slit" with the SLIT distances (the named fallback), "auto"
# the first when the reply carries them (each interval names the one used).
CHOICES = {"pattern": ("auto", "counters", "pages"), "domain": plb.DOMAINS,
           "latency": ("auto", "measured", "slit")}  # fmt: skip

# What each policy decides from and how exactly our counters give it
# (daemons/README.md "Signals"): written into the log's start record.
SIGNALS = {
    "imar": {
        "GIPS, instB": "per_task: exact (the thread's own instructions and LLC misses, "
        "for the time it ran, on every CPU); per_cpu_last_thread: proxy (its last CPU's "
        "counts shared by run time)",
        "latency": "approximate: the thread's requests by home node (its share of each "
        "socket's, by its LLC misses there) x the calibrated idle load latency per hop; "
        "[Lorenzo18] measures each load's latency (PEBS), gem5 has none per core",
    },
    "devil": {
        "MPKI": "per_task: exact (the thread's LLC misses / its instructions); "
        "per_cpu_last_thread: proxy (its last CPU's MPKI)",
        "reference shares": "approximate: node split: " + "socket matrix shared by "
        "attributed misses (approximate); exact when a program's sockets run only its "
        "threads (node_split_purity 1)",
    },
    "plb": {
        "IPC": "exact: per core, instructions / busy cycles of everything that ran there "
        "(the paper's per-core PMU counts); per_task does not change it",
        "thread moved": "the managed thread that ran most (schedstat) with this core as "
        "its last CPU",
    },
}  # type: Dict[str, Dict[str, str]]
SIGNALS["imar2"] = SIGNALS["imar"]

# Periods on gem5's time scale (daemons/README.md "Periods", docs/DESIGN.md
# "Time scale"). The defaults above are the papers' periods (seconds, real
# hardware). A gem5 ROI lasts ~0.1 s; the NUMA-level balancing intervals are
# compressed for it from the stock busy interval on 4 x 2 (8-16 ms x
# busy_factor 16 = 128-256 ms, 256 ms once balanced) to one 4 ms jiffy: 1/64.
# On gem5 every daemon period is divided by the same factor, and like the
# balancing intervals (HZ 250) none goes below one jiffy.
GEM5_TIME_SCALE = 64
JIFFY_S = 0.004
PERIOD_KEYS = ("interval_s", "interval_min_s", "interval_max_s")


def gem5_periods(policy: str) -> Dict[str, float]:
    """The policy's default periods on gem5's time scale."""
    return {k: max(float(v) / GEM5_TIME_SCALE, JIFFY_S)
            for k, v in DEFAULTS[policy].items() if k in PERIOD_KEYS}  # fmt: skip


POSITIVE = ("interval_s", "interval_min_s", "interval_max_s", "rho", "share", "devil_mpki")
NON_NEGATIVE = ("alpha", "beta", "gamma", "active_fraction", "tickets_worse",
                "tickets_nodata", "tickets_better", "tickets_free")  # fmt: skip


class ParamError(ValueError):
    pass


def check_params(policy: str, given: Optional[Dict[str, Any]],
                 backend: Optional[str] = None) -> Dict[str, Any]:  # fmt: skip
    """The policy's defaults (on gem5: its periods on gem5's time scale,
    ``gem5_periods``) overridden by GIVEN; unknown keys, wrong types and
    out-of-range values raise ParamError naming the key."""
    if policy not in DEFAULTS:
        raise ParamError(f"unknown policy {policy!r} (one of {POLICIES})")
    given = given or {}
    if not isinstance(given, dict):
        raise ParamError("params must be a JSON object")
    out = dict(DEFAULTS[policy])
    if backend == "gem5":
        out.update(gem5_periods(policy))
    for k, v in given.items():
        if k not in out:
            raise ParamError(f"{policy}: unknown parameter {k!r} (known: {sorted(out)})")
        if k in CHOICES:
            if v not in CHOICES[k]:
                raise ParamError(f"{policy}: {k} must be one of {CHOICES[k]}, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ParamError(f"{policy}: {k} must be a number, got {v!r}")
        out[k] = v
    for k in POSITIVE:
        if k in out and not out[k] > 0:
            raise ParamError(f"{policy}: {k} must be > 0, got {out[k]!r}")
    for k in NON_NEGATIVE:
        if k in out and not out[k] >= 0:
            raise ParamError(f"{policy}: {k} must be >= 0, got {out[k]!r}")
    if "rho" in out and out["rho"] > 1:
        raise ParamError(f"{policy}: rho must be <= 1, got {out['rho']!r}")
    if "share" in out and out["share"] > 1:
        raise ParamError(f"{policy}: share must be <= 1, got {out['share']!r}")
    if policy == "imar2" and out["interval_min_s"] > out["interval_max_s"]:
        raise ParamError("imar2: interval_min_s must be <= interval_max_s")
    if policy.startswith("imar") and out["tickets_worse"] + out["tickets_nodata"] \
            + out["tickets_better"] + out["tickets_free"] <= 0:  # fmt: skip
        raise ParamError(f"{policy}: every ticket count is 0")
    return out


# ------------------------------------------------------ counters -> threads


class ThreadView(NamedTuple):
    """One active managed thread over one interval, from the per-CPU counters."""

    tid: int
    pid: int
    cpu: int
    node: int
    ran_ns: float
    share: float  # of its CPU's counts attributed to it
    insts: float
    llc_misses: Optional[float]
    to_node: Optional[Dict[int, float]]
    local: Optional[float]
    remote: Optional[float]
    # its requests by the socket they left from and their home node (socket ->
    # node -> requests); per_task: from every socket it missed on
    by_socket: Optional[Dict[int, Dict[int, float]]] = None
    busy_cycles: Optional[float] = None  # per_task: the ledger's, on every CPU it ran on
    llc_by_socket: Optional[List[float]] = None  # per_task: its LLC misses per socket


# How a thread's counts were found (the log's "attribution"): the bridge's
# per-task counts (the guest's switch marks on: each CPU's counts charged to
# the task that ran, for the time it ran) or the per-CPU counts shared among
# the threads whose last CPU it was, by run time (marks off, older runs, perf).
PER_TASK = "per_task"
PER_CPU = "per_cpu_last_thread"
NODE_SPLIT_TASKS = "socket matrix shared by attributed misses (approximate)"
NODE_SPLIT_CPUS = (
    "socket matrix split over its cores by LLC misses, then over the threads last on "
    "each core by run time (approximate)"
)
LATENCY_CHOICES = ("auto", "measured", "slit")


def _ran(tasks: Dict[int, dp.Task], prev: Dict[int, dp.Task]) -> Dict[int, float]:
    return {tid: float(max(t.run_ns - prev[tid].run_ns, 0))
            for tid, t in tasks.items() if tid in prev}  # fmt: skip


def attribute_tasks(
    tdelta: Dict[int, ctr.TaskInterval],
    treq: Optional[Dict[int, Dict[int, Dict[int, float]]]],
    tasks: Dict[int, dp.Task],
    prev: Dict[int, dp.Task],
    cpu_node: Dict[int, int],
    dt_ns: float,
    active_fraction: float,
) -> Tuple[Dict[int, ThreadView], List[int]]:
    """Per-thread counts from the bridge's per-task counts (``per_task``):
    each thread's instructions, LLC misses and busy cycles are its own, for
    the time it ran, on whatever CPU; its requests by home node are its
    share of each socket's (``counters.task_requests``, TREQ; None: the
    reply has no request matrix). The same threads take part as with
    ``attribute``: those that ran at least active_fraction of the interval
    (schedstat) and are not new. Returns the views and the active threads
    the ledger has no counts for (listed in the log, not guessed)."""
    out = {}  # type: Dict[int, ThreadView]
    missing = []  # type: List[int]
    for tid, r in sorted(_ran(tasks, prev).items()):
        t = tasks[tid]
        if r < active_fraction * dt_ns:
            continue
        c = tdelta.get(tid)
        if c is None:
            missing.append(tid)
            continue
        node = cpu_node.get(t.cpu, 0)
        by = None if treq is None or c.llc_by_socket is None else treq.get(tid, {})
        to_node = local = remote = None  # type: Any
        if by is not None:
            to_node = {}
            for reqs in by.values():
                for n, v in reqs.items():
                    to_node[n] = to_node.get(n, 0.0) + v
            local = to_node.get(node, 0.0)
            remote = sum(v for n, v in to_node.items() if n != node)
        out[tid] = ThreadView(
            tid, t.pid, t.cpu, node, r, 1.0, c.insts, c.llc_misses, to_node, local, remote,
            by, c.busy_cycles, c.llc_by_socket,
        )  # fmt: skip
    return out, missing


def attribute(
    iv: Dict[int, ctr.CpuInterval],
    tasks: Dict[int, dp.Task],
    prev: Dict[int, dp.Task],
    busy_ns: Dict[int, float],
    cpu_node: Dict[int, int],
    dt_ns: float,
    active_fraction: float,
) -> Dict[int, ThreadView]:
    """Per-thread counts: each CPU's counts split between the managed threads
    that ran on it in proportion to their run time, over the larger of the
    CPU's busy time and their summed run time (so what other tasks did on
    that CPU is not charged to them). A thread is placed on the CPU it last
    ran on; threads that ran less than active_fraction of the interval, or
    that are new since the last sample, are left out."""
    ran = _ran(tasks, prev)
    on_cpu = {}  # type: Dict[int, float]
    for tid, r in ran.items():
        on_cpu[tasks[tid].cpu] = on_cpu.get(tasks[tid].cpu, 0.0) + r
    out = {}  # type: Dict[int, ThreadView]
    for tid, r in sorted(ran.items()):
        t = tasks[tid]
        if r < active_fraction * dt_ns or t.cpu not in iv:
            continue
        denom = max(busy_ns.get(t.cpu, 0.0), on_cpu.get(t.cpu, 0.0))
        share = min(r / denom, 1.0) if denom > 0 else 0.0
        c = iv[t.cpu]

        def part(v: Optional[float], share: float = share) -> Optional[float]:
            return None if v is None else v * share

        node = cpu_node.get(t.cpu, 0)
        to_node = None if c.to_node is None else {n: v * share for n, v in c.to_node.items()}
        out[tid] = ThreadView(
            tid, t.pid, t.cpu, node, r, share, c.insts * share,
            part(c.llc_misses), to_node, part(c.local), part(c.remote),
            None if to_node is None else {node: to_node},  # its core's socket = its node
        )  # fmt: skip
    return out


def measured_latency(v: ThreadView, rel: List[List[float]]) -> Optional[float]:
    """IMAR's latency term from the machine's load latencies: the mean over the
    thread's requests, by the socket each left from and its home node, of
    the calibrated load-to-use latency relative to a local one (the reply's
    ``load_latency``: 1.0 = all local). gem5 has no per-core (or per-task)
    miss latency, so this stands for [Lorenzo18]'s PEBS-measured latency:
    the idle calibrated latency per hop, without queueing. A common scale
    cancels in eq. 2 and the tickets (both compare P of the same process or
    thread), so relative latencies decide as absolute ones would. None
    without request counts."""
    if not v.by_socket:
        return None
    tot = acc = 0.0
    for s, reqs in v.by_socket.items():
        for n, c in reqs.items():
            tot += c
            acc += c * float(rel[s][n])
    return acc / tot if tot > 0 else None


def relative_latency(v: ThreadView, dist: Dict[int, List[int]]) -> float:
    """The named fallback of IMAR's latency term (``latency = "slit"``, or
    ``auto`` on a reply without ``load_latency``: perf, older runs): the mean
    SLIT distance of the thread's memory requests over the local distance
    (1.0 = all local); without request counts it is 1.0."""
    row = dist.get(v.node) or []
    local = float(row[v.node]) if len(row) > v.node else 10.0
    if v.to_node:
        tot = sum(v.to_node.values())
        if tot > 0:
            return sum(c * float(row[n] if n < len(row) else local)
                       for n, c in v.to_node.items()) / (tot * local)  # fmt: skip
    if v.local is not None and v.remote is not None and v.local + v.remote > 0:
        far = [float(x) for i, x in enumerate(row) if i != v.node] or [local]
        f = sum(far) / len(far) / local
        return (v.local + v.remote * f) / (v.local + v.remote)
    return 1.0


def imar_perf(v: ThreadView, dt_s: float, dist: Dict[int, List[int]], params: Dict[str, Any],
              rel: Optional[List[List[float]]] = None
              ) -> Tuple[float, Dict[str, float]]:  # fmt: skip
    """Eq. 1 for one thread, and its terms (for the log). REL: the machine's
    relative load latencies (``measured_latency``); None: the SLIT fallback."""
    gips = v.insts / dt_s / 1e9 if dt_s > 0 else 0.0
    nbytes = (v.llc_misses or 0.0) * LINE_BYTES
    instb = v.insts / max(nbytes, float(LINE_BYTES))  # no miss: as if one line
    if rel is not None:
        m = measured_latency(v, rel)
        lat = 1.0 if m is None else m
    else:
        lat = relative_latency(v, dist)
    p = im.performance(gips, instb, lat, params["alpha"], params["beta"], params["gamma"])
    return p, {"gips": round(gips, 6), "instB": round(instb, 4), "lat": round(lat, 4),
               "P": round(p, 6)}  # fmt: skip


def node_split_purity(vs: List[ThreadView], sock_llc: Dict[int, float]) -> Optional[float]:
    """How much of a program's share of the socket matrices is its own: the
    mean, weighted by its LLC misses on each socket, of its share of that
    socket's misses (1.0: no other task missed on the sockets it ran on, and
    the split of the matrix over tasks is exact for the program as a whole).
    None without per-task misses per socket."""
    mine = {}  # type: Dict[int, float]
    for v in vs:
        if v.llc_by_socket is None:
            return None
        for sk, m in enumerate(v.llc_by_socket):
            mine[sk] = mine.get(sk, 0.0) + m
    tot = sum(mine.values())
    if tot <= 0:
        return None
    return sum(m * (m / sock_llc[sk]) for sk, m in mine.items()
               if m > 0 and sock_llc.get(sk, 0.0) > 0) / tot  # fmt: skip


# ------------------------------------------------------------------ the log


class Log:
    """JSON lines, flushed per record (a run that dies still leaves them)."""

    def __init__(self, path: str) -> None:
        self.f = open(path, "w")
        self.t0 = time.monotonic()

    def write(self, rec: Dict[str, Any]) -> None:
        rec = dict(rec, t_s=round(time.monotonic() - self.t0, 6))
        self.f.write(json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


# --------------------------------------------------------------- the daemon


class Daemon:
    def __init__(self, policy: str, params: Dict[str, Any], counters: ctr.Counters, log: Log,
                 seed: Optional[int] = None, sys_root: str = "/sys",
                 proc: str = "/proc", switch_marks: bool = False) -> None:  # fmt: skip
        self.policy, self.p, self.counters, self.log = policy, params, counters, log
        # the job turned the guest's switch marks on: per-task counts expected,
        # an interval without them decides nothing (no proxy in their place)
        self.switch_marks = switch_marks
        self.attributions = {}  # type: Dict[str, int]
        self.latency_sources = {}  # type: Dict[str, int]
        self.rel = None  # type: Optional[List[List[float]]]
        self.sock_llc = {}  # type: Dict[int, float]
        self.proc = proc
        self.node_cpus = {n: c for n, c in dp.node_cpus(sys_root).items() if c}
        self.cpu_node = {c: n for n, cs in self.node_cpus.items() for c in cs}
        self.dist = dp.node_distances(sys_root)
        self.rng = random.Random(seed)
        self.stop = False
        self.parent = None  # type: Optional[int]
        self.counts = {
            "samples": 0, "intervals": 0, "decisions": 0, "thread_moves": 0,
            "interchanges": 0, "rollbacks": 0, "coschedules": 0, "affinity_errors": 0,
            "threads_gone": 0, "samples_refused": 0,
        }  # fmt: skip
        self.refused = {}  # type: Dict[str, int]  # RefusedSample.reason -> samples
        self.actions = {}  # type: Dict[str, int]
        self.cost_ns = []  # type: List[int]
        self.host_ms = []  # type: List[float]
        # policy state
        self.record = im.PerfRecord()
        self.imar2 = None  # type: Optional[im.Imar2Control]
        if policy == "imar2":
            self.imar2 = im.Imar2Control(
                params["interval_min_s"], params["interval_max_s"], params["rho"],
                params["interval_s"],
            )  # fmt: skip
        self.last = None  # type: Optional[im.Interchange]
        self.tids_prev = None  # type: Optional[frozenset]
        self.thresholds = plb.Thresholds()
        self.cosched = {}  # type: Dict[int, int]  # pid -> node (devil)

    # ---------------------------------------------------------------- loop

    def interval_s(self) -> float:
        return self.imar2.interval if self.imar2 is not None else float(self.p["interval_s"])

    def run(self) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        os.set_blocking(wake_r, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        prev = None  # type: Optional[Dict[str, Any]]
        prev_tasks = {}  # type: Dict[int, dp.Task]
        self.t_start = time.monotonic()
        try:
            while not self.stop:
                try:
                    select.select([wake_r], [], [], self.interval_s())
                except InterruptedError:
                    pass
                if self.stop:
                    break
                tasks = dp.managed_tasks(self.parent, [os.getpid()], self.proc) \
                    if self.parent else {}  # fmt: skip
                if (
                    not tasks
                    and self.parent
                    and not os.path.exists(os.path.join(self.proc, str(self.parent)))
                ):
                    break  # the mix runner is gone
                try:
                    s = self.counters.sample()
                except ctr.RefusedSample as e:
                    self.took(e.sample or {})
                    self.refuse(e)
                    continue  # the previous sample starts the next interval
                self.took(s)
                if prev is not None and tasks:
                    try:
                        self.interval(prev, s, prev_tasks, tasks)
                    except ctr.RefusedSample as e:
                        self.refuse(e)
                        continue
                prev, prev_tasks = s, tasks
        finally:
            signal.set_wakeup_fd(-1)
            os.close(wake_r)
            os.close(wake_w)

    def _on_term(self, signum: int, frame: Any) -> None:
        self.stop = True

    def took(self, s: Dict[str, Any]) -> None:
        """Count a sample taken (refused ones too: they cost the same)."""
        self.counts["samples"] += 1
        if s.get("cost_ns") is not None:
            self.cost_ns.append(s["cost_ns"])
        if s.get("host_ms") is not None:
            self.host_ms.append(float(s["host_ms"]))

    def refuse(self, e: "ctr.RefusedSample") -> None:
        """Drop a sample whose counts are not trusted: counted by reason and
        logged, never clipped into the next decision."""
        self.counts["samples_refused"] += 1
        self.refused[e.reason] = self.refused.get(e.reason, 0) + 1
        seq = (e.sample or {}).get("seq")
        self.log.write({"type": "refused", "reason": e.reason, "detail": e.detail, "seq": seq,
                        "source": self.counters.name})  # fmt: skip

    def busy_ns(self, prev: Dict[str, Any], cur: Dict[str, Any],
                iv: Dict[int, ctr.CpuInterval]) -> Dict[int, float]:  # fmt: skip
        hz = cur.get("cpu_hz")
        if hz:
            return {c: v.busy_cycles / float(hz) * 1e9 for c, v in iv.items()}
        return {}  # perf: only the managed threads' run time is the denominator

    def interval(self, prev: Dict[str, Any], cur: Dict[str, Any],
                 prev_tasks: Dict[int, dp.Task], tasks: Dict[int, dp.Task]) -> None:  # fmt: skip
        iv = ctr.delta(prev, cur, self.cpu_node)
        dt_ns, dt_source = ctr.interval_ns(prev, cur)
        frac = float(self.p["active_fraction"])
        tdelta = ctr.task_delta(prev, cur)
        missing = []  # type: List[int]
        self.sock_llc = {}
        if tdelta is not None:
            attribution = PER_TASK
            sreq = ctr.socket_requests(prev, cur)
            treq = None
            if sreq is not None and cur.get("task_llc_by_socket") is not None:
                self.sock_llc = ctr.socket_llc(iv, cur["sockets"])
                treq = ctr.task_requests(tdelta, sreq, self.sock_llc)
            views, missing = attribute_tasks(tdelta, treq, tasks, prev_tasks, self.cpu_node,
                                             dt_ns, frac)  # fmt: skip
            split = NODE_SPLIT_TASKS if treq is not None else None
        else:
            attribution = PER_CPU
            views = attribute(iv, tasks, prev_tasks, self.busy_ns(prev, cur, iv),
                              self.cpu_node, dt_ns, frac)  # fmt: skip
            split = NODE_SPLIT_CPUS if any(c.to_node is not None for c in iv.values()) \
                else None  # fmt: skip
        if split is None:
            why = cur.get("mem_reason") or "the source counts none by node"
            split = f"none: no request matrix ({why})"
        self.attributions[attribution] = self.attributions.get(attribution, 0) + 1
        self.counts["intervals"] += 1
        ipc = {c: plb.truncated_ipc(v.insts, v.busy_cycles) for c, v in iv.items()}
        base = {
            "type": "interval", "k": self.counts["intervals"], "seq": cur.get("seq"),
            "source": self.counters.name, "dt_s": round(dt_ns / 1e9, 9), "dt_source": dt_source,
            "sample_cost_us": round(cur["cost_ns"] / 1e3, 3), "host_ms": cur.get("host_ms"),
            "threads": len(tasks), "active": len(views),
            "ipc": {str(c): v for c, v in sorted(ipc.items())},
            "interval_s": self.interval_s(), "attribution": attribution,
        }  # fmt: skip
        if missing:
            base["no_task_counts"] = missing  # ran (schedstat) but not in the ledger
        if cur.get("perf_scaled_cpus"):
            base["perf_scaled_cpus"] = cur["perf_scaled_cpus"]  # multiplexed, scaled
        ctx = {"seq": cur.get("seq"), "source": self.counters.name, "attribution": attribution}
        if self.policy != "plb":
            base["node_split"] = ctx["node_split"] = split
        if self.policy.startswith("imar"):
            base["latency_source"] = ctx["latency_source"] = self.latency_for(cur)
        if self.switch_marks and attribution != PER_TASK:
            self.decide("skip", dict(ctx, why="switch marks are on but the bridge's replies "
                                     "carry no per-task counts for this interval: no "
                                     "decision from per-CPU proxies"))  # fmt: skip
        else:
            getattr(self, "step_" + self.policy)(iv, views, tasks, dt_ns / 1e9, base, ctx)
        self.log.write(base)

    def latency_for(self, cur: Dict[str, Any]) -> str:
        """IMAR's latency term for this interval (sets ``self.rel``) and how it
        is found, for the log."""
        lat = cur.get("load_latency")
        mode = self.p.get("latency", "auto")
        self.rel = None
        if mode == "slit" or (mode == "auto" and lat is None):
            why = "asked for" if mode == "slit" else "fallback: the reply carries no load_latency"
            src = f"slit: SLIT distance of the thread's requests by home node ({why})"
        elif lat is None:
            raise ctr.CounterError(
                "latency = measured, but the counter source gives no load_latency "
                "(the machine's calibrated load latencies: a gem5 run script's bridge)"
            )
        else:
            self.rel = lat["relative"]
            src = (
                f"measured: calibrated load latency per hop (one-hop factor "
                f"{lat.get('one_hop_factor')}, {lat.get('source')}) x the thread's requests "
                "by home node"
            )
        self.latency_sources[src] = self.latency_sources.get(src, 0) + 1
        return src

    # -------------------------------------------------------------- actions

    def decide(self, action: str, rec: Dict[str, Any]) -> None:
        self.counts["decisions"] += 1
        self.actions[action] = self.actions.get(action, 0) + 1
        self.log.write(dict(rec, type="decision", action=action, policy=self.policy))

    def pin(self, tid: int, cpus: List[int]) -> bool:
        err = dp.set_affinity(tid, cpus)
        if err is None:
            self.counts["thread_moves"] += 1
            return True
        if err == "gone":
            self.counts["threads_gone"] += 1
        else:
            self.counts["affinity_errors"] += 1
            self.log.write({"type": "error", "what": f"affinity of {tid} to {cpus}: {err}"})
        return False

    def swap(self, ch: im.Interchange) -> Tuple[bool, bool]:
        ok_m = self.pin(ch.tm, [ch.tm_to])
        ok_s = self.pin(ch.ts, [ch.tm_from]) if ch.ts is not None else True
        return ok_m, ok_s

    # ------------------------------------------------------------- policies

    def _imar_threads(self, views: Dict[int, ThreadView], dt_s: float
                      ) -> Tuple[List[im.ThreadPerf], Dict[int, Dict[str, float]]]:  # fmt: skip
        threads, terms = [], {}
        for v in views.values():
            p, t = imar_perf(v, dt_s, self.dist, self.p, self.rel)
            threads.append(im.ThreadPerf(v.tid, v.pid, v.cpu, v.node, p))
            terms[v.tid] = t
        return threads, terms

    def step_imar(self, iv: Dict[int, ctr.CpuInterval], views: Dict[int, ThreadView],
                  tasks: Dict[int, dp.Task], dt_s: float, base: Dict[str, Any],
                  ctx: Dict[str, Any]) -> None:  # fmt: skip
        threads, terms = self._imar_threads(views, dt_s)
        base["Q"] = round(sum(t.perf for t in threads), 6)
        base["terms"] = {str(tid): t for tid, t in sorted(terms.items())}  # each thread's eq. 1
        self._imar_migrate(threads, terms, ctx)

    def _imar_migrate(self, threads: List[im.ThreadPerf], terms: Dict[int, Dict[str, float]],
                      ctx: Dict[str, Any]) -> None:  # fmt: skip
        usable = {c: n for c, n in self.cpu_node.items()}
        ch, info = im.imar_step(threads, self.record, usable, self.rng, self.p)
        if ch is None:
            self.decide("none", dict(ctx, why="no candidate" if info.get("tm") is None
                                     else "no destination", tm=info.get("tm")))  # fmt: skip
            return
        ok_m, ok_s = self.swap(ch)
        self.counts["interchanges"] += 1
        if self.imar2 is not None:
            self.imar2.migrated()
        self.last = ch
        self.decide("interchange", dict(
            ctx, tm=ch.tm, tm_from=ch.tm_from, tm_to=ch.tm_to, ts=ch.ts,
            tickets=ch.tickets, total_tickets=ch.total_tickets, why=ch.why,
            tm_terms=terms.get(ch.tm), ts_terms=terms.get(ch.ts) if ch.ts else None,
            norm=info["norm"].get(ch.tm), applied=[ok_m, ok_s],
        ))  # fmt: skip

    def step_imar2(self, iv: Dict[int, ctr.CpuInterval], views: Dict[int, ThreadView],
                   tasks: Dict[int, dp.Task], dt_s: float, base: Dict[str, Any],
                   ctx: Dict[str, Any]) -> None:  # fmt: skip
        assert self.imar2 is not None
        threads, terms = self._imar_threads(views, dt_s)
        q = sum(t.perf for t in threads)
        base["terms"] = {str(tid): t for tid, t in sorted(terms.items())}
        tids = frozenset(tasks)
        if self.tids_prev is not None and tids != self.tids_prev:
            self.imar2.reset()  # threads came or went: Q is not comparable
            self.last = None
            self.imar2.rolled_back()
        self.tids_prev = tids
        q_prev = self.imar2.q_prev
        action, t_next = self.imar2.decide(q)
        base.update(Q=round(q, 6), Q_prev=None if q_prev is None else round(q_prev, 6),
                    imar2=action, interval_next_s=t_next)  # fmt: skip
        ctx = dict(ctx, Q=round(q, 6), Q_prev=None if q_prev is None else round(q_prev, 6),
                   interval_next_s=t_next)  # fmt: skip
        if action == "migrate":
            self._imar_migrate(threads, terms, ctx)
        elif action == "rollback" and self.last is not None:
            ch = self.last
            back = im.Interchange(ch.tm, ch.tm_to, ch.tm_from, ch.ts, 0, 0, "rollback")
            for t in threads:
                self.record.update(t.tid, t.node, t.perf)
            ok_m, ok_s = self.swap(back)
            self.counts["rollbacks"] += 1
            self.imar2.rolled_back()
            self.last = None
            self.decide("rollback", dict(ctx, tm=ch.tm, tm_to=ch.tm_from, ts=ch.ts,
                                         ts_to=ch.tm_to, applied=[ok_m, ok_s]))  # fmt: skip
        else:
            for t in threads:
                self.record.update(t.tid, t.node, t.perf)
            self.decide("hold", ctx)

    def step_devil(self, iv: Dict[int, ctr.CpuInterval], views: Dict[int, ThreadView],
                   tasks: Dict[int, dp.Task], dt_s: float, base: Dict[str, Any],
                   ctx: Dict[str, Any]) -> None:  # fmt: skip
        groups = {}  # type: Dict[int, List[ThreadView]]
        for v in views.values():
            groups.setdefault(v.pid, []).append(v)
        mode = self.p["pattern"]
        for pid, vs in sorted(groups.items()):
            mpkis = [dv.mpki(v.llc_misses or 0.0, v.insts) if v.llc_misses is not None else None
                     for v in vs]  # fmt: skip
            use_counters = mode == "counters" or (
                mode == "auto" and all(v.to_node is not None for v in vs)
            )
            purity = None  # type: Optional[float]
            if use_counters:
                refs = [v.to_node or {} for v in vs]
                src = "counters: " + ctx["node_split"] if self.counters.name == "gem5" \
                    else "counters"  # fmt: skip
                purity = node_split_purity(vs, self.sock_llc)
            else:
                pages = dp.pages_by_node(pid, self.proc) or {}
                refs = [{n: float(c) for n, c in pages.items()}]
                src = "pages: resident pages per node (numa_rss / numa_maps)"
            d = dv.decide_group(pid, mpkis, refs, self.node_cpus, self.cosched.get(pid), self.p)
            rec = dict(ctx, pid=pid, threads=[v.tid for v in vs],
                       mpki=None if d.mpki is None else round(d.mpki, 4), devil=d.devil,
                       shares={str(n): round(r, 4) for n, r in d.shares.items()},
                       target=d.target, pattern_source=src)  # fmt: skip
            if purity is not None:
                rec["node_split_purity"] = round(purity, 4)
            if d.action in ("coschedule", "keep"):
                cpus = self.node_cpus[d.target]  # type: ignore[index]
                moved = [t for t in sorted(tid for tid, tk in tasks.items() if tk.pid == pid)
                         if dp.get_affinity(t) != cpus and self.pin(t, cpus)]  # fmt: skip
                if d.action == "coschedule":
                    self.cosched[pid] = d.target  # type: ignore[assignment]
                    self.counts["coschedules"] += 1
                    self.decide("coschedule", dict(rec, node=d.target, moved=moved))
                elif moved:  # new threads of a co-scheduled group
                    self.decide("coschedule_new_threads", dict(rec, node=d.target, moved=moved))
                else:
                    self.decide("keep", rec)
            else:
                self.decide(d.action if d.action == "none" else "skip", dict(rec, why=d.action))

    def step_plb(self, iv: Dict[int, ctr.CpuInterval], views: Dict[int, ThreadView],
                 tasks: Dict[int, dp.Task], dt_s: float, base: Dict[str, Any],
                 ctx: Dict[str, Any]) -> None:  # fmt: skip
        load = {}  # type: Dict[int, int]
        for v in views.values():
            load[v.cpu] = load.get(v.cpu, 0) + 1
        th = {}
        for cpu in sorted(iv):
            c = iv[cpu]
            ipc = plb.truncated_ipc(c.insts, c.busy_cycles)
            verdict = self.thresholds.update(cpu, ipc)
            th[str(cpu)] = verdict.threshold_after
            if not verdict.migrate:
                continue
            rec = dict(ctx, cpu=cpu, ipc=ipc, threshold=verdict.threshold_before,
                       insts=c.insts, busy_cycles=c.busy_cycles)  # fmt: skip
            tid = plb.thread_to_move({v.tid: v.ran_ns for v in views.values() if v.cpu == cpu})
            if tid is None:
                self.decide("skip", dict(rec, why="no managed thread ran there"))
                continue
            dest = plb.destination(cpu, self.cpu_node, load, self.p["domain"])
            if dest is None:
                self.decide("skip", dict(rec, why="no other core"))
                continue
            ok = self.pin(tid, [dest])
            if ok:
                load[cpu] = load.get(cpu, 1) - 1
                load[dest] = load.get(dest, 0) + 1
            self.decide("migrate", dict(rec, tid=tid, to_cpu=dest, applied=ok))
        base["thresholds"] = th

    # -------------------------------------------------------------- summary

    def summary(self) -> Dict[str, Any]:
        def stats(xs: List[float]) -> Optional[Dict[str, float]]:
            if not xs:
                return None
            return {"n": len(xs), "mean": round(sum(xs) / len(xs), 3),
                    "max": round(max(xs), 3), "total": round(sum(xs), 3)}  # fmt: skip

        return dict(
            self.counts, type="summary", policy=self.policy, source=self.counters.name,
            actions=dict(sorted(self.actions.items())),
            refused=dict(sorted(self.refused.items())),
            attribution=dict(sorted(self.attributions.items())),
            latency_sources=dict(sorted(self.latency_sources.items())),
            sample_cost_us=stats([c / 1e3 for c in self.cost_ns]),
            bridge_host_ms=stats(self.host_ms),
            daemon_cpu_s=round(dp.self_cpu_s(), 6),
            elapsed_s=round(time.monotonic() - getattr(self, "t_start", time.monotonic()), 6),
            params=self.p,
        )  # fmt: skip


# --------------------------------------------------------------------- main


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("policy", choices=POLICIES)
    ap.add_argument("--log", required=True, help="JSON-lines log file")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--parent", type=int, help="manage the threads of processes below PID")
    g.add_argument(
        "--parent-from-stdin",
        action="store_true",
        help="print 'ready' once the counters are open, then read PID from stdin",
    )
    ap.add_argument("--params", default="{}", help="JSON object overriding the defaults")
    ap.add_argument("--seed", type=int, help="seeds IMAR's lottery")
    ap.add_argument(
        "--backend",
        choices=["gem5", "qemu", "host"],
        default="host",
        help="where the guest runs (the init knows): qemu refuses",
    )
    ap.add_argument("--source", choices=ctr.SOURCES, default="auto")
    ap.add_argument(
        "--switch-marks",
        action="store_true",
        help="the job turned the guest's context-switch marks on: decide from per-task counts",
    )
    ap.add_argument(
        "--m5-addr", type=lambda s: int(s, 0), help="m5 address transport base (gem5's KVM CPU)"
    )
    ap.add_argument("--lib", help="path of libnlbctr.so")
    ap.add_argument("--sys-root", default="/sys")
    ap.add_argument("--proc", default="/proc")
    return ap.parse_args(argv)  # fmt: skip


def main(argv: Optional[List[str]] = None) -> int:
    a = parse_args(argv)
    err = sys.stderr
    try:
        params = check_params(a.policy, json.loads(a.params), a.backend)
    except (ValueError, ParamError) as e:
        print(f"numa-lb-daemon: bad parameters: {e}", file=err)
        return EXIT_USAGE
    try:
        log = Log(a.log)
    except OSError as e:
        print(f"numa-lb-daemon: cannot write the log: {e}", file=err)
        return EXIT_USAGE
    start = {"type": "start", "policy": a.policy, "params": params, "pid": os.getpid(),
             "backend": a.backend, "seed": a.seed,
             "periods": f"gem5: papers' / {GEM5_TIME_SCALE}, >= {JIFFY_S} s"
             if a.backend == "gem5" else "papers' (s)",
             "switch_marks": a.switch_marks,
             "attribution": PER_TASK if a.switch_marks else PER_CPU,
             "attribution_rule": f"{PER_TASK} when both samples of an interval carry the "
             f"bridge's per-task counts, else {PER_CPU}; each interval and decision names "
             "the one used" + ("; with switch marks on, an interval without per-task "
                               "counts decides nothing" if a.switch_marks else ""),
             "signals": SIGNALS[a.policy]}  # fmt: skip
    try:
        counters = ctr.open_source(
            a.source, None if a.backend == "host" else a.backend,
            m5_addr=a.m5_addr, lib_path=a.lib,
        )  # fmt: skip
    except ctr.CounterError as e:
        msg = f"policy {a.policy} cannot run here: {e}"
        log.write(dict(start, type="error", fatal=True, what=msg))
        log.close()
        print(f"numa-lb-daemon: {msg}", file=err, flush=True)
        return EXIT_NO_COUNTERS
    d = Daemon(a.policy, params, counters, log, a.seed, a.sys_root, a.proc, a.switch_marks)
    log.write(dict(start, source=counters.name, nodes={str(n): c for n, c in d.node_cpus.items()},
                   distances={str(n): r for n, r in d.dist.items()},
                   missing_events=getattr(counters.source, "missing", None) or {}))  # fmt: skip
    rc = EXIT_OK
    try:
        if a.parent_from_stdin:
            print(f"numa-lb-daemon: ready {a.policy} {counters.name}", flush=True)
            line = sys.stdin.readline().strip()
            if not line.isdigit():
                raise ValueError(f"expected the parent's pid on stdin, got {line!r}")
            d.parent = int(line)
        else:
            d.parent = a.parent
        log.write({"type": "parent", "pid": d.parent})
        d.run()
    except (ctr.CounterError, ValueError, OSError) as e:
        log.write({"type": "error", "fatal": True, "what": f"{type(e).__name__}: {e}"})
        print(f"numa-lb-daemon: {e}", file=err, flush=True)
        rc = EXIT_ERROR
    finally:
        log.write(d.summary())
        log.close()
        counters.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
