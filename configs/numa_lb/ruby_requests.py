"""Memory requests by (socket, home node) from Ruby's network counts (MOESI_hammer).

``remote_requests`` splits the request virtual network's throttle counts of a
gem5 dump (``config.json`` for the links and ports, the stats values for the
counts) into remote requests per link and local requests per socket, with a
consistency check against what the directories received. One derivation,
two users: the analysis (``analysis/results/gem5stats`` re-exports it for
frames and metrics) and the counter bridge (``counter_bridge.py``, gem5's live
statistics, the policy daemons' requests by node). It lives here, not in
analysis/, because configs/ runs inside gem5's Python and must not import the
host-side analysis package. Pure Python: imports nothing from gem5.
"""

from __future__ import annotations

import math
import re
from typing import Any

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
