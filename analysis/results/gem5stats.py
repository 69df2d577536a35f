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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    configs/numa_run.py resets the statistics at the guest's workbegin, dumps
    them at its workend and records that dump's position in m5out/roi.json
    (``roi.stats_dump_index``; pass it as ``index``). gem5 dumps once more when
    it exits, so without an index the last complete dump is taken, which then
    also covers the hand back after the ROI.
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


def roi_dump_index(m5out: Path) -> int | None:
    """``roi.stats_dump_index`` from the run script's m5out/roi.json, if recorded."""
    try:
        roi = json.loads((m5out / "roi.json").read_text()).get("roi") or {}
    except (OSError, ValueError):
        return None
    idx = roi.get("stats_dump_index")
    return idx if isinstance(idx, int) else None


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
    out: dict[int, float] = {}
    for k, v in values.items():
        if k.endswith(suffix):
            m = rx.search(k)
            if m and not math.isnan(v):
                i = int(m.group(1))
                out[i] = out.get(i, 0.0) + v  # switchable CPUs: the inactive one counts 0
    return out


def core_counters(values: dict[str, float]) -> dict[str, dict[int, float]]:
    """Per-CPU committed instructions, cycles and LLC (= private L2) demand misses."""
    insts = _per_index(values, ".commitStats0.numInsts", _CPU_IDX)
    if not insts:
        insts = _per_index(values, ".numInsts", _CPU_IDX)
    cycles = _per_index(values, ".core.numCycles", _CPU_IDX)
    l2_miss = _per_index(values, ".L2cache.m_demand_misses", _CACHE_IDX)
    return {"insts": insts, "cycles": cycles, "l2_demand_misses": l2_miss}


def remote_requests(
    values: dict[str, float], cfg: dict[str, Any] | None, request_vnet: int = 2
) -> dict[str, Any] | None:
    """Remote/local memory requests per socket (MOESI_hammer, fully connected).

    docs/DESIGN.md: with a direct link between every socket pair, the request virtual
    network (vnet 2 in MOESI_hammer: requestFromCache -> requestToDir) on link
    s->d carries the requests of socket s's caches homed at d. Requests reaching
    directory d = its requestToDir buffer's message count; local = that minus the
    inbound remote ones. Throttles are named per router in out-port order:
    external (controller) links first, then internal links by destination router
    (gem5's Topology::createLinks walks its (src, dst) map in order).

    The request vnet carries the caches' GETS/GETX (``Request_Control``) and
    their writebacks (PUT, ``Writeback_Control``): both are accesses to the home
    memory, and both are counted. Checked on a real run whose answer is known
    (tests/gem5/test_numa_boot.py: one thread on socket 0 chasing pointers in
    node 1's memory puts its misses on link 0->1, and nothing comparable on the
    links to a socket it does not touch). Returns None when the names it needs
    are absent.
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
    ext = find_objects(cfg, "SimpleExtLink")
    ext_out: dict[int, int] = {}
    for _, e in ext:
        r = ridx.get(e.get("int_node", ""), _last_int(e.get("int_node", "")))
        ext_out[r] = ext_out.get(r, 0) + 1
    remote: dict[tuple[int, int], float] = {}
    for s in sorted(set(ridx.values())):
        dsts = sorted(ridx[lk["dst_node"]] for _, lk in links if ridx.get(lk.get("src_node")) == s)
        for j, d in enumerate(dsts):
            t = f"throttle{ext_out.get(s, 0) + j:02d}"
            total = 0.0
            found = False
            for k, v in values.items():
                if f"routers{s}.{t}.msg_count." in k and k.endswith(f"::{request_vnet}"):
                    total += v
                    found = True
            if not found:
                return None
            remote[(s, d)] = total
    dir_req: dict[int, float] = {}
    for k, v in values.items():
        if k.endswith(".requestToDir.m_msg_count"):
            m = re.search(r"(?:directories|dir_cntrl|Directory_Controller)(\d+)\.", k)
            if m:
                dir_req[int(m.group(1))] = v
    if not dir_req:
        return None
    inbound = {d: sum(v for (s, dd), v in remote.items() if dd == d) for d in dir_req}
    outbound = {s: sum(v for (ss, _), v in remote.items() if ss == s) for s in dir_req}
    local = {d: dir_req[d] - inbound[d] for d in dir_req}
    tot_remote = sum(remote.values())
    tot = sum(dir_req.values())
    ok = all(v >= 0 for v in local.values())
    return {
        "remote_by_link": {f"{s}->{d}": v for (s, d), v in remote.items()},
        "local_by_socket": local,
        "remote_out_by_socket": outbound,
        "dir_requests": dir_req,
        "remote_total": tot_remote,
        "local_total": tot - tot_remote,
        "remote_ratio": tot_remote / tot if tot > 0 else math.nan,
        "consistent": ok,
    }


def _last_int(s: str) -> int:
    m = re.findall(r"(\d+)", s or "")
    return int(m[-1]) if m else -1
