"""The known-answer checks of issue 39 item 7 (tests/gem5/test_attribution_gem5.py)
as pure functions of a run's records: the counter bridge's end record
(``counter_bridge.json`` ``final``: configs/numa_lb/counter_bridge.py
``close``), the mix runner's program records (results.jsonl) and the
daemon's log. No gem5 here: tests/unit/test_attribution_checks.py feeds them
records made by the real TaskLedger / CounterBridge classes.

The node split uses the daemons' own arithmetic (daemons/counters.py
``task_delta``, ``task_requests``): the whole run is one interval from an
empty sample to the end record.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "daemons") not in sys.path:
    sys.path.insert(0, str(REPO / "daemons"))

import counters as ctr  # noqa: E402

COUNTERS = ("insts", "llc_misses", "busy_cycles")
ROUNDING = 0.0005  # the record rounds every count to 3 decimals


def program_tids(prog: dict[str, Any]) -> list[int]:
    """A program's tasks (kernel pids = thread ids): its process (the main
    thread, which ran the launch too: the runner's fork, sh, numactl, the
    exec) and the workers its JSON line lists (``thread_records``)."""
    tids = {int(prog["pid"])}
    for r in (prog.get("result") or {}).get("thread_records") or []:
        tids.add(int(r["tid"]))
    return sorted(tids)


def identity_gaps(final: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Per CPU that marked: its counts minus what the ledger charged of them
    (every task's + unattributed), per counter."""
    out: dict[int, dict[str, float]] = {}
    for cpu, rec in final["per_cpu"].items():
        if not rec["marked"]:
            continue
        out[int(cpu)] = {
            k: rec["totals"][k] - sum(t[k] for t in rec["tasks"].values()) - rec["unattributed"][k]
            for k in COUNTERS
        }
    return out


def identity_problems(final: dict[str, Any]) -> list[str]:
    """Where tasks + unattributed != the CPU's counts beyond the record's
    rounding (half a thousandth per figure summed; insts and misses are
    integers, so only busy cycles can show it)."""
    bad = []
    for cpu, gaps in identity_gaps(final).items():
        rec = final["per_cpu"][str(cpu)]
        tol = ROUNDING * (len(rec["tasks"]) + 2)
        for k, g in gaps.items():
            if abs(g) > tol + 1e-9 * abs(rec["totals"][k]):
                bad.append(f"cpu {cpu} {k}: totals {rec['totals'][k]} - charged = {g}")
    return bad


def attributed(final: dict[str, Any], tids: list[int], cpu: int | None = None) -> dict[str, float]:
    """The counts charged to TIDS over the run: on every CPU, or on CPU only."""
    tasks = final["tasks"] if cpu is None else final["per_cpu"][str(cpu)]["tasks"]
    return {k: sum(float(tasks.get(str(t), {}).get(k, 0.0)) for t in tids) for k in COUNTERS}


def relative_error(value: float, reference: float) -> float:
    return abs(value - reference) / reference


def mpki(counts: dict[str, float]) -> float:
    return 1000.0 * counts["llc_misses"] / counts["insts"]


def _whole_run(final: dict[str, Any]) -> tuple[dict[int, Any], dict[int, dict[int, float]]]:
    """The run as one interval (from nothing to the end record): per task its
    counts, and its requests per socket and home node (daemons' node split)."""
    n = len(final["sockets"])
    empty = {"tasks": {}, "task_llc_by_socket": {}, "mem_requests": [[0.0] * n] * n,
             "sockets": final["sockets"]}  # fmt: skip
    td = ctr.task_delta(empty, final)
    sreq = ctr.socket_requests(empty, final)
    if td is None or sreq is None:
        raise ValueError("the end record has no per-task counts or no socket matrix")
    sock_llc = {s: sum(float(final["llc_misses"][c]) for c in members)
                for s, members in enumerate(final["sockets"])}  # fmt: skip
    return td, {
        pid: {s: dict(v) for s, v in by.items()}
        for pid, by in ctr.task_requests(td, sreq, sock_llc).items()
    }  # type: ignore[return-value]


def requests_by_node(
    final: dict[str, Any], tids: list[int], socket: int | None = None
) -> dict[int, float]:
    """TIDS' demand requests by home node over the run (those from SOCKET
    only, when given): each socket's requests shared over the tasks that
    missed there by their misses."""
    _, treq = _whole_run(final)
    out: dict[int, float] = {}
    for t in tids:
        for s, reqs in treq.get(t, {}).items():
            if socket is not None and s != socket:
                continue
            for node, v in reqs.items():
                out[node] = out.get(node, 0.0) + v
    return out


def remote_share(by_node: dict[int, float], node: int) -> float | None:
    """The share of requests homed away from NODE (None without requests)."""
    tot = sum(by_node.values())
    return None if tot <= 0 else (tot - by_node.get(node, 0.0)) / tot


def purity(final: dict[str, Any], tids: list[int]) -> float | None:
    """TIDS' misses-weighted share of the misses of the sockets they missed
    on (1.0: nobody else missed there, the node split is exact for them;
    the daemons' ``node_split_purity`` over the whole run)."""
    mine: dict[int, float] = {}
    for t in tids:
        for s, m in enumerate(final["task_llc_by_socket"].get(str(t), [])):
            mine[s] = mine.get(s, 0.0) + float(m)
    tot = sum(mine.values())
    if tot <= 0:
        return None
    sock = {s: sum(float(final["llc_misses"][c]) for c in members)
            for s, members in enumerate(final["sockets"])}  # fmt: skip
    return sum(m * (m / sock[s]) for s, m in mine.items() if sock[s] > 0) / tot


def latency_terms(log: list[dict[str, Any]], tid: int) -> list[float]:
    """IMAR's latency term of TID in every interval it was active (the
    interval records' ``terms``)."""
    return [
        float(r["terms"][str(tid)]["lat"])
        for r in log
        if r.get("type") == "interval" and str(tid) in (r.get("terms") or {})
    ]


def median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2
