"""The daemons' counter library: one call, ``Counters.sample()``, two sources.

- ``gem5``: the counter bridge. x86 gem5 gives the guest no PMU, so the guest
  asks the simulator: an m5 work-begin op with work id 3 stops the
  simulation, the run script's exit-event handler
  (configs/numa_lb/counter_bridge.py) reads per-core counters from gem5's live
  statistics, writes them as JSON to the file gem5 serves to m5 readfile, and
  resumes; the guest reads the reply with m5 readfile (gem5 v24 re-opens that
  file on every readfile call).
- ``perf``: perf_event_open per CPU on real hardware (instructions, unhalted
  cycles, LLC misses, node-loads / node-load-misses where the PMU has them).

Both give cumulative per-CPU counters in one schema (``SCHEMA``); ``delta``
turns two samples into one interval per CPU, with the memory requests split
by destination node where the source can tell (gem5: per socket, split
between the socket's cores by their LLC misses; perf: local/remote only).
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
from typing import Any, Dict, List, NamedTuple, Optional

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
# Perf event indices (nlbctr.c enum nlb_perf_event).
EV_INSTRUCTIONS, EV_CYCLES, EV_LLC, EV_NODE_LOADS, EV_NODE_MISSES = range(5)


class CounterError(Exception):
    """No counters here, or a reply that is not a sample: one clear message."""


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
    lib.nlb_perf_open.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    lib.nlb_perf_read.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint64)]
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
    """perf_event_open per CPU (pid -1): every task that ran on the CPU."""

    name = "perf"

    def __init__(self, lib: Any, cpus: List[int]) -> None:
        self.lib = lib
        self.cpus = list(cpus)
        self.fds = {}  # type: Dict[int, Any]
        for cpu in self.cpus:
            fds = (ctypes.c_int * lib.nlb_event_count())()
            rc = lib.nlb_perf_open(cpu, fds)
            if rc < 0:
                self.close()
                raise CounterError(perf_error(-rc, cpu))
            self.fds[cpu] = fds

    def _read(self, fd: int) -> Optional[int]:
        if fd < 0:
            return None
        v = ctypes.c_uint64()
        rc = self.lib.nlb_perf_read(fd, ctypes.byref(v))
        if rc < 0:
            raise CounterError(f"perf read failed: {os.strerror(-rc)}")
        return v.value

    def read(self) -> Dict[str, Any]:
        rows = {c: [self._read(fd) for fd in self.fds[c]] for c in self.cpus}

        def col(i: int) -> Optional[List[int]]:
            vals = [rows[c][i] for c in self.cpus]
            return None if any(v is None for v in vals) else vals  # type: ignore[return-value]

        loads, misses = col(EV_NODE_LOADS), col(EV_NODE_MISSES)
        out = {
            "schema": SCHEMA,
            "source": "perf",
            "cpus": list(self.cpus),
            "insts": col(EV_INSTRUCTIONS),
            "busy_cycles": col(EV_CYCLES),
            "llc_misses": col(EV_LLC),
            "mem_local": None,
            "mem_remote": None,
        }  # type: Dict[str, Any]
        if loads is not None and misses is not None:
            out["mem_local"] = [max(a - b, 0) for a, b in zip(loads, misses)]  # noqa: B905
            out["mem_remote"] = misses
        return out

    def close(self) -> None:
        for fds in self.fds.values():
            self.lib.nlb_perf_close(fds)
        self.fds = {}


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
    if d.get("insts") is None or d.get("busy_cycles") is None:
        raise CounterError("sample without instructions or busy cycles")


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
    """
    if prev.get("source") != cur.get("source") or prev.get("cpus") != cur.get("cpus"):
        raise CounterError("samples of different sources or CPU sets")
    cpus = cur["cpus"]

    def d(key: str, i: int) -> Optional[float]:
        a, b = prev.get(key), cur.get(key)
        if a is None or b is None:
            return None
        return float(b[i]) - float(a[i])

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
    a, b = prev.get("mem_requests"), cur.get("mem_requests")
    sockets = cur.get("sockets")
    if a is None or b is None or not sockets:
        return {}
    nodes = cur.get("node_of_socket") or list(range(len(sockets)))
    cpus = cur["cpus"]
    llc = {}  # type: Dict[int, float]
    for i, cpu in enumerate(cpus):
        if cur.get("llc_misses") is not None and prev.get("llc_misses") is not None:
            llc[cpu] = max(float(cur["llc_misses"][i]) - float(prev["llc_misses"][i]), 0.0)
    out = {}  # type: Dict[int, Dict[int, float]]
    for s, members in enumerate(sockets):
        reqs = {nodes[dd]: max(float(b[s][dd]) - float(a[s][dd]), 0.0) for dd in range(len(b[s]))}
        weights = [llc.get(c, 0.0) for c in members]
        total = sum(weights)
        for c, w in zip(members, weights):  # noqa: B905
            share = w / total if total > 0 else 1.0 / len(members)
            out[c] = {n: v * share for n, v in reqs.items()}
    return out


# -------------------------------------------------------------- the one API


class Counters:
    """``sample()``: the current cumulative counters of every CPU, with
    ``time_ns`` (CLOCK_MONOTONIC at the reply; simulated under gem5) and
    ``cost_ns`` (how long the call took, in the same clock)."""

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
