"""IMAR and IMAR2 [Lorenzo18]: the pure decision rules, no I/O.

IMAR (interchange migration algorithm with performance record), every
interval T:

1. each thread's performance P = GIPS^alpha * instB^beta / lat^gamma (eq. 1)
   is stored in its record for the node it ran on (a newer value replaces
   the older one);
2. each P is divided by the mean P of its process's threads (eq. 2); the
   thread with the lowest ratio is the one to migrate, t_m (a process with a
   single thread always has ratio 1 and is never chosen: only threads of
   processes with two or more threads are candidates);
3. every destination (a core of another node, and on it each thread there or
   nothing if it is free) gets tickets: by t_m's record on the destination's
   node against its current node (worse / no data / better), plus by the
   record of the thread t_s on that core for t_m's node against the node it is
   on now (worse / no data / better), or the free-core tickets;
4. a weighted lottery picks the destination; t_m and t_s swap cores.

IMAR2 adds the total performance Q = sum of every P: Q >= Q_prev halves the
interval (down to T_min) and migrates; Q < rho * Q_prev doubles it (up to
T_max) and rolls the last migration back, with no migration in that interval;
in between the interval stays and IMAR migrates.

Decisions where the paper's text is silent are marked "ours" and listed in
daemons/README.md. Stdlib only, Python >= 3.6 (runs in the guest).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import random
from typing import Dict, List, NamedTuple, Optional, Tuple

# Ticket counts (Section 3; the worked example of Table 4 fixes worse=1,
# nodata=2, better=4; "an interchange that would increase the performance of
# both threads would get eight tickets, the maximum ... worsen both ... two,
# the minimum").
T_WORSE = 1
T_NODATA = 2
T_BETTER = 4
# Free cores: the value is lost in the paper's text we have; ours: as many as
# "better" (4), so a free core on a better node reaches the maximum of 8 and
# load balance is encouraged as the paper says. Overridable (param tickets_free).
T_FREE = 4

# IMAR[T; alpha, beta, gamma] = IMAR[1; 1, 1, 1] and IMAR2[T_min, T_max;
# alpha, beta, gamma; rho] = IMAR2[1, 4; 1, 1, 1; 0.97] are the configurations
# of the paper's evaluation (Sections 4.3, 4.4). The unit of T is ambiguous:
# the text says "every T milliseconds", but T = 1 ms cannot be what ran: its
# per-thread traces average 50 measurements per 1.5 s (one per 30 ms, so a
# 1 ms interval would have no new measurement), and Figs. 3-6 show one
# thread's migrations and rollbacks tens of seconds apart in 200-1300 s runs.
# Ours: seconds (daemons/README.md "Periods"). These are the real-hardware
# defaults; on gem5 numa_lb_daemon.gem5_periods() maps them to the ROI's time
# scale (1/64, as the NUMA-level balancing intervals: T 15.625 ms, T_min
# 15.625 ms, T_max 62.5 ms).
IMAR_DEFAULTS = {
    "interval_s": 1.0,
    "alpha": 1.0,
    "beta": 1.0,
    "gamma": 1.0,
    "tickets_worse": T_WORSE,
    "tickets_nodata": T_NODATA,
    "tickets_better": T_BETTER,
    "tickets_free": T_FREE,
}
IMAR2_DEFAULTS = dict(
    IMAR_DEFAULTS, interval_min_s=1.0, interval_max_s=4.0, rho=0.97, interval_s=1.0
)


class ThreadPerf(NamedTuple):
    """One thread in one interval: who it is, where it ran, how it did."""

    tid: int
    pid: int  # its process (thread group)
    cpu: int
    node: int
    perf: float  # P of eq. 1 for this interval


def performance(
    gips: float, inst_per_byte: float, latency: float, alpha: float, beta: float, gamma: float
) -> float:
    """Eq. 1: P = GIPS^alpha * instB^beta * (1/latency)^gamma (larger is better).

    ``latency`` must be > 0; GIPS or instB of 0 give P = 0 (a thread that did
    nothing in the interval)."""
    if latency <= 0:
        raise ValueError(f"latency must be > 0, got {latency!r}")
    if gips < 0 or inst_per_byte < 0:
        raise ValueError("GIPS and instB must be >= 0")
    if gips == 0 or inst_per_byte == 0:
        return 0.0
    return (gips**alpha) * (inst_per_byte**beta) / (latency**gamma)


class PerfRecord:
    """P of every thread on every node it has run on: the latest value wins."""

    def __init__(self) -> None:
        self._r = {}  # type: Dict[int, Dict[int, float]]

    def update(self, tid: int, node: int, perf: float) -> None:
        self._r.setdefault(tid, {})[node] = perf

    def get(self, tid: int, node: int) -> Optional[float]:
        return self._r.get(tid, {}).get(node)

    def nodes(self, tid: int) -> Dict[int, float]:
        return dict(self._r.get(tid, {}))

    def forget(self, tid: int) -> None:
        self._r.pop(tid, None)

    def tids(self) -> List[int]:
        return sorted(self._r)


def normalised(threads: List[ThreadPerf]) -> Dict[int, float]:
    """Eq. 2: each thread's P over the mean P of its process's threads.

    A process whose threads all have P = 0 gives its threads ratio 1 (no
    information, nothing to prefer)."""
    by_pid = {}  # type: Dict[int, List[float]]
    for t in threads:
        by_pid.setdefault(t.pid, []).append(t.perf)
    out = {}  # type: Dict[int, float]
    for t in threads:
        vals = by_pid[t.pid]
        mean = sum(vals) / len(vals)
        out[t.tid] = t.perf / mean if mean > 0 else 1.0
    return out


def worst_thread(threads: List[ThreadPerf]) -> Optional[int]:
    """t_m: the lowest normalised P among threads of processes with >= 2 threads
    (ties: the lowest tid). None if there is no such thread."""
    sizes = {}  # type: Dict[int, int]
    for t in threads:
        sizes[t.pid] = sizes.get(t.pid, 0) + 1
    norm = normalised(threads)
    cands = [(norm[t.tid], t.tid) for t in threads if sizes[t.pid] >= 2]
    return min(cands)[1] if cands else None


def _compare(rec: Optional[float], cur: Optional[float], worse: int, nodata: int,
             better: int) -> Tuple[int, str]:  # fmt: skip
    """Tickets for a record value against the current one (ours: equal = no data)."""
    if rec is None or cur is None or rec == cur:
        return nodata, "nodata"
    return (better, "better") if rec > cur else (worse, "worse")


class Destination(NamedTuple):
    cpu: int
    node: int
    swap_tid: Optional[int]  # t_s, None for a free core
    tickets: int
    why: str  # e.g. "tm:nodata+ts:better"


def tickets(
    tm: int,
    tm_node: int,
    record: PerfRecord,
    cpu_node: Dict[int, int],
    occupants: Dict[int, List[int]],
    thread_node: Dict[int, int],
    worse: int = T_WORSE,
    nodata: int = T_NODATA,
    better: int = T_BETTER,
    free: int = T_FREE,
) -> List[Destination]:
    """Every destination of t_m with its tickets (Section 3, Table 4).

    ``cpu_node``: cpu -> node of every usable core; ``occupants``: cpu -> the
    managed threads on it now (t_m included on its own core); ``thread_node``:
    tid -> the node each managed thread is on now. Cores of t_m's own node get
    no destination (0 tickets). Ordered by cpu, then swap tid (None first)."""
    out = []  # type: List[Destination]
    tm_cur = record.get(tm, tm_node)
    for cpu in sorted(cpu_node):
        node = cpu_node[cpu]
        if node == tm_node:
            continue
        t1, why1 = _compare(record.get(tm, node), tm_cur, worse, nodata, better)
        others = [t for t in occupants.get(cpu, []) if t != tm]
        if not others:
            out.append(Destination(cpu, node, None, t1 + free, f"tm:{why1}+free"))
            continue
        for ts in sorted(others):
            ts_node = thread_node.get(ts, node)
            t2, why2 = _compare(
                record.get(ts, tm_node), record.get(ts, ts_node), worse, nodata, better
            )
            out.append(Destination(cpu, node, ts, t1 + t2, f"tm:{why1}+ts:{why2}"))
    return out


def lottery(dests: List[Destination], rng: random.Random) -> Optional[Destination]:
    """A weighted draw: each destination wins with tickets / total (None if none)."""
    total = sum(d.tickets for d in dests)
    if total <= 0:
        return None
    draw = rng.randrange(total)  # 0 .. total-1
    for d in dests:
        if draw < d.tickets:
            return d
        draw -= d.tickets
    raise AssertionError("unreachable: draw beyond the ticket total")


class Interchange(NamedTuple):
    """A decided migration: t_m to cpu_to, t_s (if any) to t_m's old cpu."""

    tm: int
    tm_from: int
    tm_to: int
    ts: Optional[int]
    tickets: int
    total_tickets: int
    why: str


def imar_step(
    threads: List[ThreadPerf],
    record: PerfRecord,
    cpu_node: Dict[int, int],
    rng: random.Random,
    params: Dict[str, float],
) -> Tuple[Optional[Interchange], Dict[str, object]]:
    """One IMAR interval: update the record with this interval's P, choose t_m,
    deal the tickets, draw. Returns the interchange (None: no candidate or no
    destination) and what the decision was based on (for the daemon's log)."""
    for t in threads:
        record.update(t.tid, t.node, t.perf)
    info = {"norm": {t.tid: round(v, 6) for t, v in _norm_items(threads)}}  # type: Dict
    tm = worst_thread(threads)
    info["tm"] = tm
    if tm is None:
        return None, info
    by_tid = {t.tid: t for t in threads}
    occupants = {}  # type: Dict[int, List[int]]
    for t in threads:
        occupants.setdefault(t.cpu, []).append(t.tid)
    dests = tickets(
        tm, by_tid[tm].node, record, cpu_node, occupants,
        {t.tid: t.node for t in threads},
        int(params["tickets_worse"]), int(params["tickets_nodata"]),
        int(params["tickets_better"]), int(params["tickets_free"]),
    )  # fmt: skip
    info["destinations"] = [[d.cpu, d.swap_tid, d.tickets] for d in dests]
    win = lottery(dests, rng)
    if win is None:
        return None, info
    total = sum(d.tickets for d in dests)
    return (
        Interchange(tm, by_tid[tm].cpu, win.cpu, win.swap_tid, win.tickets, total, win.why),
        info,
    )


def _norm_items(threads: List[ThreadPerf]) -> List[Tuple[ThreadPerf, float]]:
    norm = normalised(threads)
    return [(t, norm[t.tid]) for t in threads]


class Imar2Control:
    """IMAR2's interval and rollback rules around IMAR (Section 3).

    ``decide(q)`` takes this interval's total performance Q and returns
    ``(action, interval_s)`` with action "migrate" or "rollback" or "hold";
    "rollback" only when a migration is on record to undo (ours: with none,
    a decline holds: doubles the interval and migrates nothing, as the paper
    allows no migration in an interval whose performance fell)."""

    def __init__(self, t_min: float, t_max: float, rho: float, t0: Optional[float] = None):
        if not 0 < t_min <= t_max:
            raise ValueError(f"need 0 < interval_min_s <= interval_max_s ({t_min}, {t_max})")
        if not 0 < rho <= 1:
            raise ValueError(f"rho must be in (0, 1], got {rho}")
        self.t_min, self.t_max, self.rho = t_min, t_max, rho
        self.interval = min(max(t0 if t0 is not None else t_min, t_min), t_max)
        self.q_prev = None  # type: Optional[float]
        self.undoable = False  # a migration that has not been rolled back

    def reset(self) -> None:
        """The set of threads changed: Q is no longer comparable (ours)."""
        self.q_prev = None

    def decide(self, q: float) -> Tuple[str, float]:
        prev, self.q_prev = self.q_prev, q
        if prev is None:
            action = "migrate"
        elif q >= prev:
            self.interval = max(self.interval / 2.0, self.t_min)
            action = "migrate"
        elif q < self.rho * prev:
            self.interval = min(self.interval * 2.0, self.t_max)
            action = "rollback" if self.undoable else "hold"
        else:
            action = "migrate"
        return action, self.interval

    def migrated(self) -> None:
        self.undoable = True

    def rolled_back(self) -> None:
        self.undoable = False
