"""gem5 ``stats.txt`` and ``config.json`` parsers.

stats.txt holds one or more dumps, each between ``Begin Simulation Statistics``
and ``End Simulation Statistics`` markers. Inside a dump every line is

    name   value [pct cum%]   # description (unit)

Scalars and formulas give one value; vectors and distributions spell their
elements as ``name::sub`` (``::0``, ``::total``, ``::samples``, ``::mean``,
``::0-3`` buckets, ``::underflows`` ...); Ruby histograms put all buckets on one
line between ``|`` separators (``name | 10 50.00% 50.00% | 10 50.00% 100.00%``),
which become ``name::b0``, ``name::b1`` ... Values may be ``nan``, ``inf`` or
``-nan``; they become float NaN/inf. A dump without its end marker (the file
was cut short, gem5 crashed mid-dump) is returned as ``complete=False`` and
the caller records an error for the run instead of using its numbers.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
if _CONFIGS not in sys.path:
    sys.path.insert(0, _CONFIGS)

from numa_lb.roi import RoiUnknown, roi_stats_dump_index  # noqa: E402 - the ROI record's reader

BEGIN = "---------- Begin Simulation Statistics ----------"
END = "---------- End Simulation Statistics   ----------"


class StatsError(ValueError):
    pass


@dataclass
class Dump:
    index: int
    values: dict[str, float] = field(default_factory=dict)
    complete: bool = False
    first_line: int = 0


def _num(tok: str) -> float | None:
    t = tok.rstrip("%")
    try:
        return float(t)
    except ValueError:
        if t.lower() in ("nan", "-nan", "+nan"):
            return math.nan
        return None


def parse_stats_text(text: str) -> list[Dump]:
    dumps: list[Dump] = []
    cur: Dump | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("----------"):
            if "Begin Simulation Statistics" in line:
                if cur is not None:  # begin without end: the previous one is cut
                    dumps.append(cur)
                cur = Dump(index=len(dumps), first_line=lineno)
            elif "End Simulation Statistics" in line and cur is not None:
                cur.complete = True
                dumps.append(cur)
                cur = None
            continue
        if cur is None:
            continue
        body = line.split("#", 1)[0]
        if "|" in body:  # Ruby histogram on one line
            name, _, rest = body.partition("|")
            name = name.strip()
            for i, cell in enumerate(c for c in rest.split("|") if c.strip()):
                toks = cell.split()
                v = _num(toks[0]) if toks else None
                if v is not None:
                    cur.values[f"{name}::b{i}"] = v
            continue
        toks = body.split()
        if len(toks) < 2:
            continue
        v = _num(toks[1])
        if v is not None:
            cur.values[toks[0]] = v
    if cur is not None:
        dumps.append(cur)
    return dumps


def parse_stats_file(path: Path) -> list[Dump]:
    with open(path, errors="replace") as f:
        return parse_stats_text(f.read())


def roi_dump(dumps: list[Dump], index: int | None = None) -> Dump:
    """The dump the metrics use: the ROI's.

    configs/numa_run.py resets the statistics at the guest's ROI workbegin, dumps
    them at its workend and records that dump's position in m5out/roi.json
    (``roi.stats_dump_index``; pass it as ``index``, from ``roi_dump_index``).
    ``index=None`` takes the last complete dump: only for ad-hoc looks, since
    gem5 dumps once more when it exits and that dump also covers the boot CPUs'
    instructions and the hand back after the ROI.
    """
    if not dumps:
        raise StatsError("no statistics dump in stats.txt")
    if index is not None:
        if index >= len(dumps):
            raise StatsError(
                f"stats.txt is truncated: it has {len(dumps)} dumps, the ROI is dump {index}"
            )
        if not dumps[index].complete:
            raise StatsError(f"stats.txt is truncated: ROI dump {index} has no end marker")
        return dumps[index]
    complete = [d for d in dumps if d.complete]
    if not complete:
        raise StatsError(f"stats.txt is truncated: dump {dumps[-1].index} has no end marker")
    return complete[-1]


def roi_dump_index(m5out: Path) -> int:
    """``roi.stats_dump_index`` from the run script's m5out/roi.json.

    Raises ``StatsError("ROI unknown: ...")`` when the file is missing, corrupt,
    or records no closed ROI: the metrics are then not computed at all, rather
    than silently taken from gem5's exit dump.
    """
    try:
        return roi_stats_dump_index(m5out)
    except RoiUnknown as e:
        raise StatsError(str(e)) from None


def nonfinite(values: dict[str, float], suffixes: tuple[str, ...]) -> list[str]:
    """Names of the statistics ending in one of ``suffixes`` whose value is nan/inf."""
    return sorted(k for k, v in values.items() if not math.isfinite(v) and k.endswith(suffixes))


# ----------------------------------------------------------------- config.json
def load_config(path: Path) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


def find_objects(cfg: Any, type_name: str, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(dotted path, object) of every SimObject of a given type in config.json."""
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(cfg, dict):
        if cfg.get("type") == type_name:
            out.append((cfg.get("path", path), cfg))
        for k, v in cfg.items():
            if isinstance(v, dict | list):
                out.extend(find_objects(v, type_name, f"{path}.{k}" if path else k))
    elif isinstance(cfg, list):
        for i, v in enumerate(cfg):
            out.extend(find_objects(v, type_name, f"{path}{i}"))
    return out


# --------------------------------------------------------------- derivations
_CPU_IDX = re.compile(r"(\d+)(?=\.core\.)")
_CACHE_IDX = re.compile(r"(?:core_caches|l1_cntrl|L1Cache_Controller)(\d+)\.")


def _per_index(values: dict[str, float], suffix: str, rx: re.Pattern[str]) -> dict[int, float]:
    """Per-index sums; an index with a nan/inf input is nan (its metrics stay empty)."""
    out: dict[int, float] = {}
    for k, v in values.items():
        if k.endswith(suffix):
            m = rx.search(k)
            if m:
                i = int(m.group(1))
                # switchable CPUs: the inactive one counts 0; nan propagates
                out[i] = out.get(i, 0.0) + (v if math.isfinite(v) else math.nan)
    return out


INSTS_STAT = ".commitStats0.numInsts"
CYCLES_STAT = ".core.numCycles"
# gem5's busy-cycle count: numCycles x the tick-weighted not-idle fraction of the
# thread (BaseSimpleCPU). numCycles alone counts halted time too, and
# TimingSimpleCPU folds a halt into numCycles only at its next activity.
BUSY_CYCLES_STAT = ".exec_context.thread_0.numBusyCycles"
# The O3 CPU has no exec_context stats. It stops ticking when its pipeline has
# nothing to do, a cache miss included, and adds the slept cycles to numCycles
# (and idleCycles) when it wakes (o3/cpu.cc tick, wakeCPU); a halt (suspend)
# goes to quiesceCycles only (activateContext). So its numCycles are the
# non-halted cycles, stalls included: the simple CPUs' busy cycles. Its cycles,
# halted ones included, are numCycles + quiesceCycles.
O3_HALTED_STAT = ".core.quiesceCycles"
LLC_MISS_STAT = ".L2cache.m_demand_misses"
CORE_STATS = (INSTS_STAT, ".numInsts", CYCLES_STAT, BUSY_CYCLES_STAT, O3_HALTED_STAT,
              LLC_MISS_STAT)  # fmt: skip


def core_counters(values: dict[str, float]) -> dict[str, dict[int, float]]:
    """Per-CPU committed instructions, all and busy cycles, LLC (= private L2) demand misses."""
    insts = _per_index(values, INSTS_STAT, _CPU_IDX)
    if not insts:
        insts = _per_index(values, ".numInsts", _CPU_IDX)
    cycles = _per_index(values, CYCLES_STAT, _CPU_IDX)
    busy = _per_index(values, BUSY_CYCLES_STAT, _CPU_IDX)
    for i, (b, halted) in o3_cycles(values).items():
        busy[i] = busy.get(i, 0.0) + b
        cycles[i] = cycles.get(i, 0.0) + halted
    l2_miss = _per_index(values, LLC_MISS_STAT, _CACHE_IDX)
    return {"insts": insts, "cycles": cycles, "busy_cycles": busy, "l2_demand_misses": l2_miss}


REQUEST_TYPE = "Request_Control"  # GETS/GETX from a cache to the home directory
WRITEBACK_TYPE = "Writeback_Control"  # PUT: a cache evicting a line (clean or dirty)


def remote_requests(
    values: dict[str, float], cfg: dict[str, Any] | None, request_vnet: int = 2
) -> dict[str, Any] | None:
    """Remote/local memory requests and writebacks per socket (MOESI_hammer).

    docs/DESIGN.md: with a direct link between every socket pair, the request virtual
    network (vnet 2 in MOESI_hammer: requestFromCache -> requestToDir) on link
    s->d carries the requests of socket s's caches homed at d. What reaches
    directory d is counted on its router's throttle towards it, split by message
    type: demand requests (GETS/GETX, ``Request_Control``) and writebacks (PUT,
    ``Writeback_Control``, clean evictions included). Local = arrivals at d minus
    the inbound remote ones, per type. Throttles are named per router in
    out-port order: external (controller) links first, in config order, then
    internal links by destination router (gem5's Topology::createLinks).

    gem5 prints a throttle's message count only when it is non-zero, so a link
    that exists in config.json but has no line carried 0 messages.

    Checked on a real run whose answer is known (tests/gem5/test_numa_boot.py:
    one thread on socket 0 chasing pointers in node 1's memory puts its misses
    on link 0->1, and nothing comparable on the links to a socket it does not
    touch). Returns None when config.json lacks the network; a dict with
    ``available=False`` and a ``reason`` when the topology cannot be split (a
    ring routes through intermediate sockets, and a throttle cannot tell
    transit from originated traffic, so every link count would double-count).
    """
    if cfg is None:
        return None
    links = find_objects(cfg, "SimpleIntLink")
    if not links:
        return None
    routers = sorted(
        {lk.get("src_node", "") for _, lk in links} | {lk.get("dst_node", "") for _, lk in links}
    )
    ridx = {r: _last_int(r) for r in routers}
    sockets = sorted(set(ridx.values()))
    pairs = {(ridx.get(lk.get("src_node")), ridx.get(lk.get("dst_node"))) for _, lk in links}
    missing = [(a, b) for a in sockets for b in sockets if a != b and (a, b) not in pairs]
    if missing:
        return {
            "available": False,
            "reason": (
                f"no direct link {missing[0][0]}->{missing[0][1]} (ring or partial topology): "
                "throttle counts cannot separate transit from originated requests"
            ),
            "consistent": False,
        }
    ext_ports: dict[int, list[str]] = {}
    for _, e in find_objects(cfg, "SimpleExtLink"):
        r = ridx.get(e.get("int_node", ""), _last_int(e.get("int_node", "")))
        ext_ports.setdefault(r, []).append(str(e.get("ext_node", "")))
    dir_rx = re.compile(r"(?:directories|dir_cntrl|Directory_Controller)(\d+)$")

    def counts(s: int, port: int) -> dict[str, float]:
        prefix = f"routers{s}.throttle{port:02d}.msg_count."
        out: dict[str, float] = {}
        for k, v in values.items():
            if prefix in k and k.endswith(f"::{request_vnet}"):
                kind = k.split(prefix, 1)[1].rsplit("::", 1)[0]
                out[kind] = out.get(kind, 0.0) + v
        return out

    by_link: dict[tuple[int, int], dict[str, float]] = {}
    arrivals: dict[int, dict[str, float]] = {}
    for s in sockets:
        ports = ext_ports.get(s, [])
        for j, node in enumerate(ports):
            m = dir_rx.search(node)
            if m:
                arrivals[int(m.group(1))] = counts(s, j)
        dsts = sorted(ridx[lk["dst_node"]] for _, lk in links if ridx.get(lk.get("src_node")) == s)
        for j, d in enumerate(dsts):
            by_link[(s, d)] = counts(s, len(ports) + j)
    if not arrivals:
        return None

    def kind_sum(c: dict[str, float], kind: str | None) -> float:
        return sum(v for k, v in c.items() if kind is None or k == kind)

    dir_req: dict[int, float] = {}
    for k, v in values.items():
        if k.endswith(".requestToDir.m_msg_count"):
            m = re.search(r"(?:directories|dir_cntrl|Directory_Controller)(\d+)\.", k)
            if m:
                dir_req[int(m.group(1))] = v
    out: dict[str, Any] = {"available": True, "reason": ""}
    for kind, name in ((REQUEST_TYPE, "requests"), (WRITEBACK_TYPE, "writebacks"), (None, "all")):
        remote = {sd: kind_sum(c, kind) for sd, c in by_link.items()}
        inbound = {d: sum(v for (_, dd), v in remote.items() if dd == d) for d in arrivals}
        local = {d: kind_sum(arrivals[d], kind) - inbound[d] for d in arrivals}
        out[name] = {
            "remote_by_link": {f"{s}->{d}": v for (s, d), v in remote.items()},
            "remote_out_by_socket": {
                s: sum(v for (ss, _), v in remote.items() if ss == s) for s in arrivals
            },
            "local_by_socket": local,
            "remote_total": sum(remote.values()),
            "local_total": sum(local.values()),
        }
        tot = out[name]["remote_total"] + out[name]["local_total"]
        out[name]["remote_ratio"] = out[name]["remote_total"] / tot if tot > 0 else math.nan
    arrived = {d: kind_sum(arrivals[d], None) for d in arrivals}
    everything = out["all"]
    # The split is trusted only when the directory throttles saw what the
    # directories received, up to the messages on an ext link at the reset and
    # dump instants (IN_FLIGHT), and no local count came out negative. Runs
    # whose throttles were not reset with the ROI (before configs/numa_lb/
    # ruby_stats.py; gem5's Switch::resetStats misses them) carry the warm-up
    # and fail this by thousands of messages.
    consistent = all(
        math.isfinite(v) and v >= 0
        for name in ("requests", "writebacks")
        for v in out[name]["local_by_socket"].values()
    ) and all(d not in dir_req or abs(dir_req[d] - arrived[d]) <= in_flight(dir_req[d])
              for d in arrived)  # fmt: skip
    out.update(
        {
            # The totals over both kinds, under the names earlier callers use.
            "remote_by_link": everything["remote_by_link"],
            "local_by_socket": everything["local_by_socket"],
            "remote_out_by_socket": everything["remote_out_by_socket"],
            "dir_requests": dir_req or arrived,
            "remote_total": everything["remote_total"],
            "local_total": everything["local_total"],
            "remote_ratio": everything["remote_ratio"],
            "consistent": consistent,
        }
    )
    return out


def in_flight(received: float) -> float:
    """Messages a directory's throttle count may differ from what it received:
    those on its ext link when statistics are reset and dumped (a few per
    controller; 0.1 % for long ROIs)."""
    return max(32.0, 0.001 * received)


def _last_int(s: str) -> int:
    m = re.findall(r"(\d+)", s or "")
    return int(m[-1]) if m else -1


def o3_cycles(values: dict[str, float]) -> dict[int, tuple[float, float]]:
    """Per CPU index, (busy, halted) cycles of the cores that have no
    exec_context stats (O3): numCycles and quiesceCycles (see O3_HALTED_STAT;
    gem5 prints quiesceCycles only when it is non-zero), summed per index like
    the other counters. Checked on O3 only; the study's other ROI CPUs
    (atomic, timing) have exec_context stats."""
    out: dict[int, tuple[float, float]] = {}
    for k, cyc in values.items():
        if not k.endswith(CYCLES_STAT):
            continue
        core = k[: -len(".numCycles")]
        m = _CPU_IDX.search(k)
        if m is None or core + BUSY_CYCLES_STAT in values:
            continue  # a simple CPU: numBusyCycles counts it
        halted = values.get(core + ".quiesceCycles", 0.0)
        b0, h0 = out.get(int(m.group(1)), (0.0, 0.0))
        out[int(m.group(1))] = (b0 + cyc, h0 + halted)
    return out
