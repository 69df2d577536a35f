"""The daemons' counter library: one call, ``Counters.sample()``, two sources.

- ``gem5``: the counter bridge. x86 gem5 gives the guest no PMU, so the guest
  asks the simulator: an m5 work-begin op with work id 3 stops the
  simulation, the run script's exit-event handler
  (configs/numa_lb/counter_bridge.py) reads per-core counters from gem5's live
  statistics, writes them as JSON to the file gem5 serves to m5 readfile, and
  resumes; the guest reads the reply with m5 readfile (gem5 v24 re-opens that
  file on every readfile call).
- ``perf``: perf_event_open per CPU on real hardware (instructions, unhalted
  cycles, LLC misses, node-loads / node-load-misses where the PMU has them),
  one event group per CPU, read at once and scaled by time enabled / running
  where the group was multiplexed; the events a CPU lacks are named
  (``PerfCounters.missing``).

Both give cumulative per-CPU counters in one schema (``SCHEMA``); ``delta``
turns two samples into one interval per CPU, with the memory requests split
by destination node where the source can tell (gem5: per socket, split
between the socket's cores by their LLC misses; perf: local/remote only);
``interval_ns`` is the interval's length (gem5: from the replies' ticks).
A gem5 reply of a run with the guest's context-switch marks on also carries
per-task counts (the bridge's task ledger): ``task_delta`` gives each task's
counts over the interval, ``task_requests`` its share of each socket's
requests by home node (by its LLC misses on that socket: approximate, see
daemons/README.md "Signals").

Nothing is repaired silently: a sample whose counts cannot be trusted (the
bridge's request matrix inconsistent, a negative count, a counter lower than
in the previous sample, a perf group that never ran) raises
``RefusedSample`` with one of ``REFUSAL_REASONS``; the daemon drops it, counts
it by reason and keeps the previous sample as the start of the next interval.
The native half (m5 ops, perf_event_open) is libnlbctr.so (nlbctr.c).

Under QEMU there are no counters at all (TCG has no PMU and no bridge):
``open_source`` refuses with ``QEMU_REFUSAL``. Stdlib only, Python >= 3.6.
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import ctypes
import errno
import json
import os
import time
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

SCHEMA = 1
SOURCES = ("auto", "gem5", "perf")
# The bridge's reply is about 1.5 KiB for 8 CPUs; the buffer is touched and
# mlocked on every readfile (gem5 copies into it through the page tables), so
# it starts small and doubles only when a reply does not fit.
REPLY_START = 16 << 10
REPLY_MAX = 16 << 20
LIB_NAME = "libnlbctr.so"
QEMU_REFUSAL = (
    "the qemu backend has no hardware counters for a counter-driven policy: QEMU TCG "
    "gives the guest no PMU (perf_event_open finds no hardware events) and the counter "
    "bridge exists only under gem5; run imar, imar2, devil and plb on the gem5 backend "
    "(or on real hardware)"
)
# Perf event indices (nlbctr.c enum nlb_perf_event) and their names.
EV_INSTRUCTIONS, EV_CYCLES, EV_LLC, EV_NODE_LOADS, EV_NODE_MISSES = range(5)
PERF_EVENTS = ("instructions", "cycles", "llc_misses", "node_loads", "node_load_misses")
# nlbctr.c enum nlb_perf_state: what a group read says of each event.
ST_COUNTED, ST_SCALED, ST_NOT_COUNTED, ST_ABSENT = range(4)
# gem5's tick is 1 ps (the stdlib's default resolution; configs set no other):
# a reply's "tick" over this is simulated seconds.
TICKS_PER_S = 10**12
# Why a sample is refused (RefusedSample.reason); the daemon counts each.
REFUSAL_REASONS = (
    "mem_inconsistent",  # gem5: the request matrix's split failed its check
    "negative_count",  # a cumulative count below 0 (perf: node-loads < node-load-misses)
    "negative_delta",  # a count (or the tick) lower than in the previous sample
    "not_counted",  # perf: the CPU's group never ran on the PMU (time running 0)
)


class CounterError(Exception):
    """No counters here, or a reply that is not a sample: one clear message."""


class RefusedSample(CounterError):
    """A sample that arrived but whose counts are not trusted: dropped and
    counted by ``reason`` (one of ``REFUSAL_REASONS``), not fatal."""

    def __init__(self, reason: str, detail: str, sample: Optional[Dict[str, Any]] = None):
        super().__init__(f"sample refused ({reason}): {detail}")
        self.reason = reason
        self.detail = detail
        self.sample = sample


# ------------------------------------------------------------ native library


def find_lib(path: Optional[str] = None) -> str:
    """libnlbctr.so: PATH, $NUMA_LB_LIBNLBCTR, PREFIX/lib next to PREFIX/bin, ./build."""
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [path] if path else []
    if os.environ.get("NUMA_LB_LIBNLBCTR"):
        cands.append(os.environ["NUMA_LB_LIBNLBCTR"])
    cands += [os.path.join(here, "..", "lib", LIB_NAME), os.path.join(here, "build", LIB_NAME)]
    for c in cands:
        if c and os.path.isfile(c):
            return c
    raise CounterError(f"{LIB_NAME} not found (looked in {cands}); build it: make -C daemons")


def load_lib(path: Optional[str] = None) -> Any:
    lib = ctypes.CDLL(find_lib(path), use_errno=True)
    lib.nlb_m5_probe.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
    lib.nlb_m5_use_addr.argtypes = [ctypes.c_ulong]
    lib.nlb_gem5_sample.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint64]
    lib.nlb_gem5_sample.restype = ctypes.c_int64
    lib.nlb_read_reply.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
    lib.nlb_read_reply.restype = ctypes.c_int64
    u64p, intp = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_int)
    lib.nlb_perf_open.argtypes = [ctypes.c_int, intp, intp]
    lib.nlb_perf_id.argtypes = [ctypes.c_int, u64p]
    lib.nlb_perf_read_group.argtypes = [ctypes.c_int, u64p, u64p, intp, u64p]
    lib.nlb_perf_decode.argtypes = [ctypes.c_char_p, ctypes.c_uint64, u64p, u64p, intp, u64p]
    lib.nlb_perf_close.argtypes = [ctypes.POINTER(ctypes.c_int)]
    return lib


# ------------------------------------------------------------------- sources


class Gem5Bridge:
    """Samples from the run script's exit-event handler (see the module doc)."""

    name = "gem5"

    def __init__(self, lib: Any, m5_addr: Optional[int] = None) -> None:
        self.lib = lib
        if m5_addr is not None:
            rc = lib.nlb_m5_use_addr(m5_addr)
            if rc < 0:
                raise CounterError(f"m5 address transport at {m5_addr:#x}: {os.strerror(-rc)}")
        why = ctypes.create_string_buffer(256)
        r = lib.nlb_m5_probe(why, 256)
        if r != 1:
            raise CounterError(f"not under gem5, no counter bridge: {why.value.decode()}")
        self.seq = 0  # the bridge numbers the requests of the whole run; ours only grow
        self.size = REPLY_START
        self.buf = ctypes.create_string_buffer(self.size)
        self.work_id = lib.nlb_sample_work_id()

    def read(self) -> Dict[str, Any]:
        n = self.lib.nlb_gem5_sample(self.seq + 1, self.buf, self.size)
        while n == -errno.EMSGSIZE and self.size < REPLY_MAX:
            # the reply is still in the served file: read it again, whole
            self.size *= 2
            self.buf = ctypes.create_string_buffer(self.size)
            n = self.lib.nlb_read_reply(self.buf, self.size)
        if n < 0:
            raise CounterError(f"counter bridge: readfile failed: {os.strerror(-n)}")
        d = parse_reply(self.buf.raw[:n].decode("utf-8", "replace"), self.seq)
        self.seq = d["seq"]
        return d


class PerfCounters:
    """perf_event_open per CPU (pid -1): every task that ran on the CPU. The
    events of a CPU are one group (nlbctr.c): read together, scaled together
    when the group was multiplexed. ``missing`` names the events this machine
    lacks and why (the errno of their open), for the daemon's start record."""

    name = "perf"

    def __init__(self, lib: Any, cpus: List[int]) -> None:
        self.lib = lib
        self.cpus = list(cpus)
        self.n = lib.nlb_event_count()
        self.fds = {}  # type: Dict[int, Any]
        self.ids = {}  # type: Dict[int, Any]
        self.missing = {}  # type: Dict[str, str]
        for cpu in self.cpus:
            fds = (ctypes.c_int * self.n)()
            errs = (ctypes.c_int * self.n)()
            rc = lib.nlb_perf_open(cpu, fds, errs)
            if rc < 0:
                self.close()
                raise CounterError(perf_error(-rc, cpu))
            self.fds[cpu] = fds
            ids = (ctypes.c_uint64 * self.n)()
            for i in range(self.n):
                if fds[i] >= 0:
                    one = ctypes.c_uint64()
                    rc = lib.nlb_perf_id(fds[i], ctypes.byref(one))
                    if rc < 0:
                        self.close()
                        raise CounterError(f"perf ioctl(ID) on cpu {cpu}: {os.strerror(-rc)}")
                    ids[i] = one.value
                elif errs[i] and PERF_EVENTS[i] not in self.missing:
                    self.missing[PERF_EVENTS[i]] = f"cpu {cpu}: {missing_event(errs[i])}"
            self.ids[cpu] = ids

    def read(self) -> Dict[str, Any]:
        rows = {}  # type: Dict[int, List[Optional[int]]]
        scaled, not_counted = [], []  # type: List[int], List[int]
        for c in self.cpus:
            vals = (ctypes.c_uint64 * self.n)()
            state = (ctypes.c_int * self.n)()
            times = (ctypes.c_uint64 * 2)()
            rc = self.lib.nlb_perf_read_group(self.fds[c][EV_INSTRUCTIONS], self.ids[c], vals,
                                              state, times)  # fmt: skip
            if rc < 0:
                raise CounterError(f"perf read of cpu {c}'s group failed: {os.strerror(-rc)}")
            states = list(state)
            if ST_NOT_COUNTED in states:
                not_counted.append(c)
            elif ST_SCALED in states:
                scaled.append(c)
            rows[c] = [vals[i] if states[i] in (ST_COUNTED, ST_SCALED) else None
                       for i in range(self.n)]  # fmt: skip
        return perf_sample(self.cpus, rows, scaled, not_counted)

    def close(self) -> None:
        for fds in self.fds.values():
            self.lib.nlb_perf_close(fds)
        self.fds = {}


def perf_sample(cpus: List[int], rows: Dict[int, List[Optional[int]]], scaled: List[int],
                not_counted: List[int]) -> Dict[str, Any]:  # fmt: skip
    """A sample in SCHEMA from per-CPU event values (None: not available on
    that CPU; an event unavailable on any CPU is None for all). Local requests
    are node-loads minus node-load-misses, unclipped: a negative one refuses
    the sample (``refusal``)."""

    def col(i: int) -> Optional[List[int]]:
        vals = [rows[c][i] for c in cpus]
        return None if any(v is None for v in vals) else vals  # type: ignore[return-value]

    loads, misses = col(EV_NODE_LOADS), col(EV_NODE_MISSES)
    out = {
        "schema": SCHEMA,
        "source": "perf",
        "cpus": list(cpus),
        "insts": col(EV_INSTRUCTIONS),
        "busy_cycles": col(EV_CYCLES),
        "llc_misses": col(EV_LLC),
        "mem_local": None,
        "mem_remote": None,
        "perf_scaled_cpus": list(scaled),
        "perf_not_counted_cpus": list(not_counted),
    }  # type: Dict[str, Any]
    if loads is not None and misses is not None:
        out["mem_local"] = [a - b for a, b in zip(loads, misses)]  # noqa: B905
        out["mem_remote"] = misses
    return out


def missing_event(err: int) -> str:
    # EOPNOTSUPP is ENOTSUP on Linux: errorcode has the latter's name only
    name = "EOPNOTSUPP" if err == errno.EOPNOTSUPP else errno.errorcode.get(err, str(err))
    why = {
        errno.ENOENT: "the CPU has no such event",
        errno.EOPNOTSUPP: "the PMU does not support it",
        errno.ENODEV: "no PMU for it",
        errno.EINVAL: "it does not fit in one group beside the others",
        errno.ENOSPC: "no free counter for it in the group",
    }.get(err, os.strerror(err))
    return f"{name} ({why})"


def perf_error(err: int, cpu: int) -> str:
    name = errno.errorcode.get(err, str(err))
    base = f"perf_event_open(instructions) on cpu {cpu}: {name} ({os.strerror(err)})"
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return base + (
            ": this CPU exposes no hardware counters (QEMU TCG and x86 gem5 give a "
            "guest none; under gem5 the counter bridge is used instead)"
        )
    if err in (errno.EACCES, errno.EPERM):
        return base + ": per-CPU counters need root (CAP_PERFMON) or perf_event_paranoid <= 0"
    return base


# ------------------------------------------------------------------ samples


_NUM_LISTS = ("insts", "busy_cycles", "llc_misses")
# Per-task counts of a reply (the bridge's task ledger, issue 39: the guest
# marks its context switches, each CPU's counts since its last mark go to the
# task that ran): pid -> these.
TASK_KEYS = ("insts", "llc_misses", "busy_cycles")


def parse_reply(text: str, last_seq: Optional[int] = None) -> Dict[str, Any]:
    """The bridge's JSON reply, checked: a stale or foreign file is an error
    (the bridge numbers its replies; one not newer than LAST_SEQ is stale)."""
    try:
        d = json.loads(text)
    except ValueError as e:
        raise CounterError(f"counter bridge reply is not JSON ({e}): {text[:80]!r}") from None
    if not isinstance(d, dict) or d.get("schema") != SCHEMA or d.get("source") != "gem5":
        raise CounterError(f"counter bridge reply is not a schema-{SCHEMA} sample: {text[:80]!r}")
    if d.get("error"):
        raise CounterError(f"counter bridge: {d['error']}")
    s = d.get("seq")
    if not isinstance(s, int) or (last_seq is not None and s <= last_seq):
        raise CounterError(
            f"counter bridge reply {s!r} is not newer than {last_seq}: the run script did "
            "not answer (is this gem5 run started by configs/numa_run.py?)"
        )
    check_sample(d)
    return d


def check_sample(d: Dict[str, Any]) -> None:
    cpus = d.get("cpus")
    if not isinstance(cpus, list) or not cpus:
        raise CounterError("sample without cpus")
    for k in _NUM_LISTS:
        v = d.get(k)
        if v is not None and (not isinstance(v, list) or len(v) != len(cpus)):
            raise CounterError(f"sample field {k} does not have one value per cpu")
        if v is not None and not all(_number(x) for x in v):
            raise CounterError(f"sample field {k} holds a value that is not a number")
    mat = d.get("mem_requests")
    if mat is not None and not (
        isinstance(mat, list) and all(isinstance(r, list) and all(_number(x) for x in r)
                                      for r in mat)
    ):  # fmt: skip
        raise CounterError("sample field mem_requests is not a matrix of numbers")
    if d.get("insts") is None or d.get("busy_cycles") is None:
        raise CounterError("sample without instructions or busy cycles")
    tasks = d.get("tasks")
    if tasks is not None:
        if not isinstance(tasks, dict) or not all(
            str(k).isdigit() and isinstance(v, dict) and all(_number(v.get(c)) for c in TASK_KEYS)
            for k, v in tasks.items()
        ):
            raise CounterError(
                f"sample field tasks is not a map of pid -> numbers {list(TASK_KEYS)}"
            )
    by = d.get("task_llc_by_socket")
    if by is not None and not (
        isinstance(by, dict) and all(str(k).isdigit() and isinstance(v, list)
                                     and all(_number(x) for x in v) for k, v in by.items())
    ):  # fmt: skip
        raise CounterError("sample field task_llc_by_socket is not a map of pid -> numbers")
    lat = d.get("load_latency")
    if lat is not None:
        rel = lat.get("relative") if isinstance(lat, dict) else None
        if not (isinstance(rel, list) and all(isinstance(r, list) and all(
                _number(x) and x > 0 for x in r) for r in rel)):  # fmt: skip
            raise CounterError("sample field load_latency has no matrix of positive latencies")


_COUNT_LISTS = ("insts", "busy_cycles", "llc_misses", "mem_local", "mem_remote")


def refusal(d: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """(reason, detail) when a well-formed sample's counts are not to be
    trusted, else None. Nothing is clipped or ignored: the bridge's
    ``mem_consistent`` false (its split of requests by link failed the check
    of analysis/results/gem5stats.remote_requests), any negative count, or
    a perf group that never ran refuses the whole sample."""
    if d.get("mem_requests") is not None and d.get("mem_consistent") is not True:
        return "mem_inconsistent", (
            f"mem_consistent is {d.get('mem_consistent')!r}: the requests by home node "
            "do not add up to what the directories received"
        )
    for k in _COUNT_LISTS:
        for i, v in enumerate(d.get(k) or []):
            if v < 0:
                return "negative_count", f"{k} of cpu {d['cpus'][i]} is {v}"
    for s, row in enumerate(d.get("mem_requests") or []):
        for n, v in enumerate(row):
            if v < 0:
                return "negative_count", f"mem_requests[{s}][{n}] is {v}"
    if d.get("perf_not_counted_cpus"):
        return "not_counted", (
            f"the counter group of cpu(s) {d['perf_not_counted_cpus']} never ran on the PMU "
            "(time running 0): no value, not a zero"
        )
    return None


def interval_ns(prev: Dict[str, Any], cur: Dict[str, Any]) -> Tuple[float, str]:
    """The interval's length in ns and where it came from: ``tick`` (gem5's
    replies carry the tick the counts were read at: the interval between the
    two readings, TICKS_PER_S) or ``guest_clock`` (the guest's clock after
    each sample returned; perf)."""
    a, b = prev.get("tick"), cur.get("tick")
    if _number(a) and _number(b):
        if b <= a:
            raise RefusedSample("negative_delta", f"tick {b} is not after the previous {a}", cur)
        return (b - a) * 1e9 / TICKS_PER_S, "tick"
    return float(cur["time_ns"] - prev["time_ns"]), "guest_clock"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class CpuInterval(NamedTuple):
    insts: float
    busy_cycles: float
    llc_misses: Optional[float]
    to_node: Optional[Dict[int, float]]  # demand requests by home node (None: unknown)
    local: Optional[float]
    remote: Optional[float]


def delta(
    prev: Dict[str, Any], cur: Dict[str, Any], cpu_node: Dict[int, int]
) -> Dict[int, CpuInterval]:
    """Per-CPU counts between two samples of the same source.

    gem5 samples carry demand requests per socket and home node
    (``mem_requests[s][d]``): a socket's requests are split between its cores
    in proportion to their LLC demand misses in the interval (equally when
    none missed), since gem5 counts them per inter-socket link, not per core.
    A count lower than in PREV raises RefusedSample (negative_delta).
    """
    if prev.get("source") != cur.get("source") or prev.get("cpus") != cur.get("cpus"):
        raise CounterError("samples of different sources or CPU sets")
    cpus = cur["cpus"]

    def d(key: str, i: int) -> Optional[float]:
        a, b = prev.get(key), cur.get(key)
        if a is None or b is None:
            return None
        v = float(b[i]) - float(a[i])
        if v < 0:
            raise RefusedSample("negative_delta", f"{key} of cpu {cpus[i]}: {a[i]} -> {b[i]}", cur)
        return v

    out = {}  # type: Dict[int, CpuInterval]
    split = _split_requests(prev, cur) if cur.get("source") == "gem5" else {}
    for i, cpu in enumerate(cpus):
        to_node = split.get(cpu)
        local = remote = None  # type: Optional[float]
        if to_node is not None:
            home = cpu_node.get(cpu)
            local = to_node.get(home, 0.0) if home is not None else None
            remote = sum(v for n, v in to_node.items() if n != home)
        elif cur.get("mem_local") is not None and prev.get("mem_local") is not None:
            local, remote = d("mem_local", i), d("mem_remote", i)
        out[cpu] = CpuInterval(
            insts=d("insts", i) or 0.0,
            busy_cycles=d("busy_cycles", i) or 0.0,
            llc_misses=d("llc_misses", i),
            to_node=to_node,
            local=local,
            remote=remote,
        )
    return out


def _split_requests(prev: Dict[str, Any], cur: Dict[str, Any]) -> Dict[int, Dict[int, float]]:
    """gem5: each socket's requests by home node, split over its cores."""
    reqs_of = socket_requests(prev, cur)
    if reqs_of is None:
        return {}
    cpus = cur["cpus"]
    llc = {}  # type: Dict[int, float]
    for i, cpu in enumerate(cpus):
        if cur.get("llc_misses") is not None and prev.get("llc_misses") is not None:
            llc[cpu] = float(cur["llc_misses"][i]) - float(prev["llc_misses"][i])
    out = {}  # type: Dict[int, Dict[int, float]]
    for s, members in enumerate(cur["sockets"]):
        reqs = reqs_of[s]
        weights = [llc.get(c, 0.0) for c in members]
        total = sum(weights)
        for c, w in zip(members, weights):  # noqa: B905
            share = w / total if total > 0 else 1.0 / len(members)
            out[c] = {n: v * share for n, v in reqs.items()}
    return out


# ------------------------------------------------------------ per task


class TaskInterval(NamedTuple):
    """One task's counts over an interval, for the time it ran, on every CPU
    it ran on (the bridge's task ledger)."""

    insts: float
    llc_misses: float
    busy_cycles: float
    llc_by_socket: Optional[List[float]]  # its LLC misses on each socket (None: unknown)


def has_tasks(s: Dict[str, Any]) -> bool:
    """Does the sample carry per-task counts (the guest's switch marks on)?"""
    return isinstance(s.get("tasks"), dict)


def task_delta(prev: Dict[str, Any], cur: Dict[str, Any]) -> Optional[Dict[int, TaskInterval]]:
    """Per task (pid = the kernel's task pid: a thread id), its counts between
    two samples; None unless both carry per-task counts. A task not in PREV
    had counted nothing before (the ledger is cumulative over the run). A
    count lower than in PREV refuses the sample (negative_delta)."""
    if not (has_tasks(prev) and has_tasks(cur)):
        return None
    a, b = prev["tasks"], cur["tasks"]
    by_a, by_b = prev.get("task_llc_by_socket"), cur.get("task_llc_by_socket")
    out = {}  # type: Dict[int, TaskInterval]
    for key, now in b.items():
        was = a.get(key) or {}
        vals = []  # type: List[float]
        for k in TASK_KEYS:
            v = float(now[k]) - float(was.get(k, 0.0))
            if v < 0:
                raise RefusedSample(
                    "negative_delta", f"{k} of task {key}: {was.get(k)} -> {now[k]}", cur
                )
            vals.append(v)
        socks = None  # type: Optional[List[float]]
        if by_a is not None and by_b is not None and key in by_b:
            old = by_a.get(key) or [0.0] * len(by_b[key])
            socks = [float(x) - float(y) for x, y in zip(by_b[key], old)]  # noqa: B905
            if any(v < 0 for v in socks):
                raise RefusedSample(
                    "negative_delta", f"task_llc_by_socket of task {key}: {old} -> {by_b[key]}",
                    cur,
                )  # fmt: skip
        out[int(key)] = TaskInterval(vals[0], vals[1], vals[2], socks)
    return out


def socket_requests(
    prev: Dict[str, Any], cur: Dict[str, Any]
) -> Optional[Dict[int, Dict[int, float]]]:
    """gem5: each socket's demand requests by home node in the interval
    (``mem_requests`` rows); None without a matrix in both samples."""
    a, b = prev.get("mem_requests"), cur.get("mem_requests")
    sockets = cur.get("sockets")
    if a is None or b is None or not sockets:
        return None
    nodes = cur.get("node_of_socket") or list(range(len(sockets)))
    out = {}  # type: Dict[int, Dict[int, float]]
    for s in range(len(sockets)):
        reqs = {}  # type: Dict[int, float]
        for dd in range(len(b[s])):
            v = float(b[s][dd]) - float(a[s][dd])
            if v < 0:
                raise RefusedSample(
                    "negative_delta", f"mem_requests[{s}][{dd}]: {a[s][dd]} -> {b[s][dd]}", cur
                )
            reqs[nodes[dd]] = v
        out[s] = reqs
    return out


def socket_llc(iv: Dict[int, CpuInterval], sockets: List[List[int]]) -> Dict[int, float]:
    """Each socket's LLC misses in the interval (its CPUs', every task's)."""
    return {s: sum(iv[c].llc_misses or 0.0 for c in members if c in iv)
            for s, members in enumerate(sockets)}  # fmt: skip


def task_requests(
    tasks: Dict[int, TaskInterval],
    sock_req: Dict[int, Dict[int, float]],
    sock_llc: Dict[int, float],
) -> Dict[int, Dict[int, Dict[int, float]]]:
    """Per task: socket -> home node -> its requests, the socket's requests
    by home node (gem5 counts them per link, not per core or task) split over
    the tasks that missed on that socket in proportion to their LLC misses
    there. Exact only if the tasks of a socket share one home-node mix;
    tasks without misses per socket get nothing (not in the result)."""
    out = {}  # type: Dict[int, Dict[int, Dict[int, float]]]
    for pid, t in tasks.items():
        if t.llc_by_socket is None:
            continue
        mine = {}  # type: Dict[int, Dict[int, float]]
        for s, m in enumerate(t.llc_by_socket):
            tot = sock_llc.get(s, 0.0)
            if m <= 0 or tot <= 0 or s not in sock_req:
                continue
            share = m / tot  # not clipped: the ledger's misses are the CPUs' own
            mine[s] = {n: v * share for n, v in sock_req[s].items()}
        out[pid] = mine
    return out


# -------------------------------------------------------------- the one API


class Counters:
    """``sample()``: the current cumulative counters of every CPU, with
    ``time_ns`` (CLOCK_MONOTONIC at the reply; simulated under gem5) and
    ``cost_ns`` (how long the call took, in the same clock). A sample whose
    counts are not trusted (``refusal``) raises RefusedSample carrying it."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.name = source.name
        self.samples = 0
        self.cost_ns_total = 0

    def sample(self) -> Dict[str, Any]:
        t0 = _now_ns()
        s = self.source.read()
        t1 = _now_ns()
        s["time_ns"] = t1
        s["cost_ns"] = t1 - t0
        self.samples += 1
        self.cost_ns_total += t1 - t0
        why = refusal(s)
        if why is not None:
            raise RefusedSample(why[0], why[1], s)
        return s

    def close(self) -> None:
        close = getattr(self.source, "close", None)
        if close is not None:
            close()


def _now_ns() -> int:
    return int(time.monotonic() * 1e9)  # time.monotonic_ns is Python >= 3.7


def open_source(
    kind: str = "auto",
    backend: Optional[str] = None,
    cpus: Optional[List[int]] = None,
    m5_addr: Optional[int] = None,
    lib_path: Optional[str] = None,
) -> Counters:
    """The counters of this machine. ``backend`` is the init's word for where
    the guest runs ("gem5", "qemu", None on real hardware)."""
    if kind not in SOURCES:
        raise CounterError(f"counter source must be one of {SOURCES}, got {kind!r}")
    if backend == "qemu":
        raise CounterError(QEMU_REFUSAL)
    lib = load_lib(lib_path)
    if kind == "gem5" or (kind == "auto" and backend == "gem5"):
        return Counters(Gem5Bridge(lib, m5_addr))
    if kind == "auto":
        try:
            return Counters(Gem5Bridge(lib, m5_addr))
        except CounterError:
            pass  # not gem5: real hardware then
    return Counters(PerfCounters(lib, cpus if cpus is not None else online_cpus()))


def online_cpus(sys_root: str = "/sys") -> List[int]:
    try:
        with open(os.path.join(sys_root, "devices/system/cpu/online")) as f:
            text = f.read()
    except OSError:
        return list(range(os.cpu_count() or 1))
    out = []  # type: List[int]
    for part in text.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            out.extend(range(int(a), int(b or a) + 1))
    return out


_DEFAULT = None  # type: Optional[Counters]


def sample(kind: str = "auto", backend: Optional[str] = None) -> Dict[str, Any]:
    """The one call: this machine's per-CPU counters now (the source is opened
    on first use: the gem5 bridge under gem5, perf_event_open elsewhere)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = open_source(kind, backend)
    return _DEFAULT.sample()
