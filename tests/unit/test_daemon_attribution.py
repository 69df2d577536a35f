"""Issue 39: the daemons decide from per-task counts (the bridge's task ledger,
charged at the guest's context-switch marks), IMAR's latency from the
machine's calibrated load latency per hop, devil's node split over the tasks
of a socket by their attributed misses.

The chain is driven end to end without gem5: a CounterBridge reads scripted
statistic values (the live-stat objects the bridge walks, advanced by hand:
a unit test of our arithmetic, not a gem5 output), the guest's switch marks
go to its ledger, its replies go through the daemon's counter library and the
daemon's interval. The request matrix of a socket (gem5: link throttles, not
read here) is given in the replies as numbers, as tests/unit/test_daemons.py
does. Every figure is checked to the exact value worked out in the comments.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "configs"))
sys.path.insert(0, str(ROOT / "daemons"))

import counters as ctr  # noqa: E402
import daemon_proc as dp  # noqa: E402
import numa_lb_daemon as nd  # noqa: E402
from numa_lb import counter_bridge as cb  # noqa: E402
from numa_lb import task_ledger as tl  # noqa: E402

from tests.unit.test_counter_bridge import Group, Stat  # noqa: E402

F = 1.6  # the one-hop factor of the replies' load_latency


class Machine:
    """4 CPUs on 2 sockets ([0, 1], [2, 3]), their statistics as the bridge
    walks them (an O3-style core: busy cycles = numCycles)."""

    def __init__(self, tmp: Path) -> None:
        self.insts = [Stat("numInsts", 0) for _ in range(4)]
        self.cycles = [Stat("numCycles", 0) for _ in range(4)]
        self.llc = [Stat("m_demand_misses", 0) for _ in range(4)]
        self.now = 10**9
        cores = {f"switch{i}": Group([], {"core": Group([self.cycles[i]], {
            "commitStats0": Group([self.insts[i]])})}) for i in range(4)}  # fmt: skip
        caches = {f"core_caches{i}": Group([], {"L2cache": Group([self.llc[i]])})
                  for i in range(4)}  # fmt: skip
        root = Group([], {"board": Group([], {"processor": Group([], cores),
                                              "cache_hierarchy": Group([], caches)})})  # fmt: skip
        self.bridge = cb.CounterBridge(
            outdir=tmp, readfile=tmp / "r.bin", root=lambda: root, tick=lambda: self.now,
            active_cores=lambda: [f"board.processor.switch{i}.core" for i in range(4)],
            sockets=[[0, 1], [2, 3]], cpu_clock_hz=2e9, reset_tick=0,
            config=tmp / "none.json",
            latency=cb.load_latency([[0, 1], [1, 0]], F, "calibration test.csv", 57),
        )  # fmt: skip

    def run(self, cpu: int, insts: float, misses: float, cycles: float) -> None:
        self.insts[cpu].value += insts
        self.llc[cpu].value += misses
        self.cycles[cpu].value += cycles

    def mark(self, cpu: int, pid: int) -> None:
        assert self.bridge.ledger.on_switch(tl.switch_id(cpu, pid))

    def reply(self, seq: int, tick: int, mem: list[list[float]]) -> dict[str, Any]:
        """The bridge's reply as the guest parses it, with the socket matrix."""
        self.now = tick
        rep = self.bridge.reply(seq)
        rep.update(mem_requests=mem, mem_consistent=True)
        rep.pop("mem_reason", None)
        d = ctr.parse_reply(json.dumps(rep), seq - 1)
        d["time_ns"], d["cost_ns"] = tick // 1000, 1000
        return d


def scripted(tmp: Path) -> tuple[Machine, dict, dict]:
    """Two samples 1 us apart. Program 100 has threads 101 and 102, program 200
    thread 201; 0 is the idle task.

    sample 1: marks cpu0 -> 101, cpu1 -> 102, cpu2 -> 201, cpu3 -> idle
    then      cpu0: 101 +1000 insts, +10 misses, +2000 cycles
              cpu1: 102  +400,       +30,        +1000
              cpu2: 201  +600,       +20,        +1500
    marks     cpu0 -> idle, cpu1 -> 101 (101 moves), cpu3 -> 102 (102 to socket 1)
    then      cpu1: 101  +500, +40, +1000
              cpu3: 102  +300, +60,  +900
              cpu2: 201  +200,  +0,  +500
    sample 2. Per task: 101 1500 insts, 50 misses (all on socket 0), 3000 cycles;
    102 700, 90 (30 on socket 0, 60 on socket 1), 1900; 201 800, 20 (socket 1),
    2000. Socket misses: 0: 10 + 30 + 40 = 80; 1: 20 + 60 = 80.
    """
    m = Machine(tmp)
    m.run(0, 7, 1, 9)  # before any mark: no known task
    for cpu, pid in ((0, 101), (1, 102), (2, 201), (3, 0)):
        m.mark(cpu, pid)
    a = m.reply(1, 10**9, [[0, 0], [0, 0]])
    m.run(0, 1000, 10, 2000)
    m.run(1, 400, 30, 1000)
    m.run(2, 600, 20, 1500)
    m.mark(0, 0)
    m.mark(1, 101)
    m.mark(3, 102)
    m.run(1, 500, 40, 1000)
    m.run(3, 300, 60, 900)
    m.run(2, 200, 0, 500)
    # socket 0 sent 60 requests homed at node 0, 20 at node 1; socket 1: 16 and 64
    b = m.reply(2, 10**9 + 10**6, [[60, 20], [16, 64]])
    return m, a, b


def test_replies_carry_each_tasks_counts_for_the_time_it_ran(tmp_path: Path) -> None:
    _, a, b = scripted(tmp_path)
    assert b["tasks"]["101"] == {"insts": 1500, "llc_misses": 50, "busy_cycles": 3000}
    assert b["tasks"]["102"] == {"insts": 700, "llc_misses": 90, "busy_cycles": 1900}
    assert b["tasks"]["201"] == {"insts": 800, "llc_misses": 20, "busy_cycles": 2000}
    assert b["task_llc_by_socket"] == {"0": [0, 0], "101": [50, 0], "102": [30, 60],
                                       "201": [0, 20]}  # fmt: skip
    assert b["unattributed"] == {"insts": 7, "llc_misses": 1, "busy_cycles": 9}
    assert b["load_latency"]["relative"] == [[1.0, 1.6], [1.6, 1.0]]
    # the tasks' misses on a socket are its CPUs' misses since the marks began
    iv = ctr.delta(a, b, {0: 0, 1: 0, 2: 1, 3: 1})
    assert ctr.socket_llc(iv, b["sockets"]) == {0: 80.0, 1: 80.0}
    td = ctr.task_delta(a, b)
    assert td is not None and td[102] == ctr.TaskInterval(700.0, 90.0, 1900.0, [30.0, 60.0])
    # a reply without per-task counts (marks off): no per-task interval
    no_tasks = {k: v for k, v in b.items() if k not in ("tasks", "task_llc_by_socket")}
    assert ctr.task_delta(a, no_tasks) is None
    # a task's count that fell: refused, not clipped
    low = json.loads(json.dumps(b))
    low["tasks"]["101"]["insts"] = -1
    with pytest.raises(ctr.RefusedSample, match="insts of task 101") as e:
        ctr.task_delta(b, dict(low, tasks=dict(low["tasks"], **{"101": {
            "insts": 1499, "llc_misses": 50, "busy_cycles": 3000}})))  # fmt: skip
    assert e.value.reason == "negative_delta"
    with pytest.raises(ctr.CounterError, match="tasks is not a map"):
        ctr.check_sample(dict(b, tasks={"101": {"insts": 1}}))


def test_a_sockets_requests_are_split_over_its_tasks_by_their_misses(tmp_path: Path) -> None:
    _, a, b = scripted(tmp_path)
    iv = ctr.delta(a, b, {0: 0, 1: 0, 2: 1, 3: 1})
    sreq = ctr.socket_requests(a, b)
    assert sreq == {0: {0: 60.0, 1: 20.0}, 1: {0: 16.0, 1: 64.0}}
    treq = ctr.task_requests(ctr.task_delta(a, b), sreq, ctr.socket_llc(iv, b["sockets"]))
    # 101: 50 of socket 0's 80 misses; 102: 30 of socket 0's, 60 of socket 1's 80
    assert treq[101] == {0: {0: 37.5, 1: 12.5}}
    assert treq[102] == {0: {0: 22.5, 1: 7.5}, 1: {0: 12.0, 1: 48.0}}
    assert treq[201] == {1: {0: 4.0, 1: 16.0}}
    assert treq[0] == {}  # the idle task missed nowhere


def views_of(tmp: Path) -> tuple[dict, dict, dict]:
    _, a, b = scripted(tmp)
    iv = ctr.delta(a, b, {0: 0, 1: 0, 2: 1, 3: 1})
    td = ctr.task_delta(a, b)
    treq = ctr.task_requests(td, ctr.socket_requests(a, b), ctr.socket_llc(iv, b["sockets"]))
    prev = {101: dp.Task(101, 100, 0, 0, "R"), 102: dp.Task(102, 100, 1, 0, "R"),
            201: dp.Task(201, 200, 2, 0, "R")}  # fmt: skip
    cur = {101: dp.Task(101, 100, 1, 800, "R"), 102: dp.Task(102, 100, 3, 700, "R"),
           201: dp.Task(201, 200, 2, 1000, "R")}  # fmt: skip
    views, missing = nd.attribute_tasks(td, treq, cur, prev, {0: 0, 1: 0, 2: 1, 3: 1},
                                        1000.0, 0.1)  # fmt: skip
    assert missing == []
    return views, prev, cur


def test_each_thread_gets_its_own_mpki_ipc_and_requests(tmp_path: Path) -> None:
    views, _, _ = views_of(tmp_path)
    v1, v2, v3 = views[101], views[102], views[201]
    assert (v1.insts, v1.llc_misses, v1.busy_cycles) == (1500.0, 50.0, 3000.0)
    assert (v1.cpu, v1.node, v2.cpu, v2.node) == (1, 0, 3, 1)  # where each ran last
    assert ctr_mpki(v1) == pytest.approx(1000 * 50 / 1500)
    assert ctr_mpki(v2) == pytest.approx(1000 * 90 / 700)
    assert v1.insts / v1.busy_cycles == 0.5  # per-thread IPC
    # 102 ran on both sockets: its requests by home node summed, local to node 1
    assert v2.to_node == {0: 34.5, 1: 55.5} and (v2.local, v2.remote) == (55.5, 34.5)
    assert v3.to_node == {0: 4.0, 1: 16.0}


def ctr_mpki(v: nd.ThreadView) -> float:
    return 1000.0 * (v.llc_misses or 0.0) / v.insts


def test_imars_latency_is_the_calibrated_latency_of_each_request(tmp_path: Path) -> None:
    views, _, _ = views_of(tmp_path)
    rel = [[1.0, F], [F, 1.0]]
    # 101: (37.5 local + 12.5 x 1.6) / 50
    assert nd.measured_latency(views[101], rel) == pytest.approx(1.15)
    # 102: from socket 0: 22.5 local, 7.5 remote; from socket 1: 12 remote, 48 local
    assert nd.measured_latency(views[102], rel) == pytest.approx(101.7 / 90)
    assert nd.measured_latency(views[201], rel) == pytest.approx(22.4 / 20)
    p, terms = nd.imar_perf(views[101], 1e-6, {0: [10, 16], 1: [16, 10]}, nd.DEFAULTS["imar"],
                            rel)  # fmt: skip
    # GIPS 1500 / 1 us = 1.5; instB 1500 / (50 x 64 B)
    assert terms["gips"] == pytest.approx(1.5) and terms["instB"] == pytest.approx(0.4688)
    assert p == pytest.approx(1.5 * (1500 / 3200) / 1.15) and terms["lat"] == 1.15
    # the named fallback: SLIT 16 for a hop, 102's requests seen from its node 1
    assert nd.relative_latency(views[102], {0: [10, 16], 1: [16, 10]}) == pytest.approx(
        (55.5 * 10 + 34.5 * 16) / (90 * 10)
    )
    # no requests at all: 1.0 (all local), as before
    assert nd.measured_latency(views[101]._replace(by_socket={}), rel) is None


def test_devils_node_split_says_how_much_of_it_is_shared(tmp_path: Path) -> None:
    views, _, _ = views_of(tmp_path)
    sock = {0: 80.0, 1: 80.0}
    # program 100: 80 of socket 0's 80 misses, 60 of socket 1's 80:
    # (80 x 80/80 + 60 x 60/80) / 140
    assert nd.node_split_purity([views[101], views[102]], sock) == pytest.approx(125 / 140)
    assert nd.node_split_purity([views[201]], sock) == pytest.approx(0.25)
    assert nd.node_split_purity([views[201]._replace(llc_by_socket=None)], sock) is None


def daemon(tmp: Path, policy: str, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> nd.Daemon:
    base = tmp / "sys" / "devices/system/node"
    for n, cpus, dist in ((0, "0-1", "10 16"), (1, "2-3", "16 10")):
        (base / f"node{n}").mkdir(parents=True)
        (base / f"node{n}" / "cpulist").write_text(cpus + "\n")
        (base / f"node{n}" / "distance").write_text(dist + "\n")
    (base / "online").write_text("0-1\n")
    pinned: list = []
    monkeypatch.setattr(dp, "set_affinity", lambda tid, cpus: pinned.append((tid, cpus)))
    monkeypatch.setattr(dp, "get_affinity", lambda tid: [0, 1, 2, 3])
    params = nd.check_params(policy, kw.pop("params", {}), "gem5")
    src = type("Src", (), {"name": "gem5", "read": lambda self: {}})()
    return nd.Daemon(policy, params, ctr.Counters(src), nd.Log(str(tmp / "d.jsonl")), 1,
                     str(tmp / "sys"), **kw)  # fmt: skip


def records(tmp: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp / "d.jsonl").read_text().splitlines()]


def test_the_devil_daemon_decides_from_per_task_counts_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, a, b = scripted(tmp_path)
    _, prev, cur = views_of(tmp_path / "v")
    d = daemon(tmp_path, "devil", monkeypatch)
    d.interval(a, b, prev, cur)
    d.log.close()
    recs = records(tmp_path)
    dec = {r["pid"]: r for r in recs if r["type"] == "decision"}
    iv = [r for r in recs if r["type"] == "interval"][0]
    assert iv["attribution"] == "per_task" and iv["node_split"] == nd.NODE_SPLIT_TASKS
    assert nd.NODE_SPLIT_TASKS == "socket matrix shared by attributed misses (approximate)"
    # program 100: MPKI (33.33 + 128.57) / 2; node 0 holds 72 of 140 requests
    assert dec[100]["mpki"] == pytest.approx((1000 * 50 / 1500 + 1000 * 90 / 700) / 2, abs=1e-4)
    assert dec[100]["shares"] == {"0": round(72 / 140, 4), "1": round(68 / 140, 4)}
    assert dec[100]["action"] == "skip" and dec[100]["node_split_purity"] == round(125 / 140, 4)
    # program 200: 16 of its 20 requests at node 1 (80 %): co-scheduled there
    assert dec[200]["action"] == "coschedule" and dec[200]["node"] == 1
    assert dec[200]["attribution"] == "per_task" and dec[200]["node_split_purity"] == 0.25
    assert dec[200]["pattern_source"] == "counters: " + nd.NODE_SPLIT_TASKS
    assert d.summary()["attribution"] == {"per_task": 1}


def test_imar_uses_the_replies_load_latency_and_names_the_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, a, b = scripted(tmp_path)
    _, prev, cur = views_of(tmp_path / "v")
    d = daemon(tmp_path, "imar", monkeypatch)
    d.interval(a, b, prev, cur)
    no_lat = {k: v for k, v in b.items() if k != "load_latency"}
    d.interval(a, no_lat, prev, cur)
    d.log.close()
    ivs = [r for r in records(tmp_path) if r["type"] == "interval"]
    assert ivs[0]["latency_source"].startswith(
        "measured: calibrated load latency per hop (one-hop factor 1.6, calibration test.csv)"
    )
    assert ivs[1]["latency_source"].startswith("slit:") and "fallback" in ivs[1]["latency_source"]
    (dec,) = [r for r in records(tmp_path) if r["type"] == "decision"][:1]
    assert dec["attribution"] == "per_task" and dec["latency_source"] == ivs[0]["latency_source"]
    # t_m is 102: P = GIPS x instB / lat, normalised in program 100
    p101 = 1.5 * (1500 / 3200) / 1.15
    p102 = 0.7 * (700 / 5760) / (101.7 / 90)
    assert dec["tm"] == 102 and dec["tm_terms"]["P"] == pytest.approx(p102, abs=1e-6)
    assert dec["norm"] == pytest.approx(p102 / ((p101 + p102) / 2), abs=1e-6)
    # latency = measured on a source without load latencies: an error, not the SLIT
    d2 = daemon(tmp_path / "m", "imar", monkeypatch, params={"latency": "measured"})
    with pytest.raises(ctr.CounterError, match="no load_latency"):
        d2.interval(a, no_lat, prev, cur)


def test_with_switch_marks_on_no_decision_comes_from_per_cpu_proxies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, a, b = scripted(tmp_path)
    _, prev, cur = views_of(tmp_path / "v")
    strip = ("tasks", "task_llc_by_socket", "unattributed", "switch_marks")
    a0, b0 = ({k: v for k, v in s.items() if k not in strip} for s in (a, b))
    d = daemon(tmp_path, "plb", monkeypatch, switch_marks=True)
    d.interval(a0, b0, prev, cur)
    d.interval(a, b, prev, cur)
    d.log.close()
    recs = records(tmp_path)
    ivs = [r for r in recs if r["type"] == "interval"]
    assert [r["attribution"] for r in ivs] == ["per_cpu_last_thread", "per_task"]
    (skip,) = [r for r in recs if r["type"] == "decision"]  # PLB's first pass sets thresholds
    assert skip["action"] == "skip" and "no per-task counts" in skip["why"]
    assert d.summary()["attribution"] == {"per_cpu_last_thread": 1, "per_task": 1}
    # marks off: the same per-CPU interval decides, and says how it attributed
    d2 = daemon(tmp_path / "off", "devil", monkeypatch)
    d2.interval(a0, b0, prev, cur)
    d2.log.close()
    decs = [r for r in records(tmp_path / "off") if r["type"] == "decision"]
    assert decs and all(r["attribution"] == "per_cpu_last_thread" for r in decs)
    assert all(r["node_split"] == nd.NODE_SPLIT_CPUS for r in decs)


def test_the_bridges_latency_comes_from_the_runs_calibration() -> None:
    import argparse

    from numa_lb.options import add_topology_args, topology_from_args

    ap = argparse.ArgumentParser()
    add_topology_args(ap)
    t = topology_from_args(ap.parse_args(["--cores-per-socket", "2", "--numa-factor", "1.6"]))
    lat = cb.bridge_latency(t)
    link = t.link_latency()
    assert lat["source"] == "calibration 4x2-2800MHz-pf1-bw46-DDR3_1600_8x8-full.csv"
    assert lat["one_hop_factor"] == round(link.predicted_numa_factor, 6)
    # 57 cycles: between the table's 20 (1.2173) and 60 (1.6306)
    assert link.cycles == 57 and lat["one_hop_factor"] == pytest.approx(
        1.2173 + (57 - 20) / 40 * (1.6306 - 1.2173), abs=1e-6
    )
    f = lat["one_hop_factor"]
    assert lat["relative"] == [[1.0 if s == d else f for d in range(4)] for s in range(4)]
    ring = cb.load_latency([[0, 1, 2, 1], [1, 0, 1, 2], [2, 1, 0, 1], [1, 2, 1, 0]], 1.5, "x", 9)
    assert ring["relative"][0] == [1.0, 1.5, 2.0, 1.5]  # 1 + h (f - 1)
    with pytest.raises(ValueError, match="below 1"):
        cb.load_latency([[0]], 0.9, "x", 1)


def test_the_report_names_attribution_node_split_and_latency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from analysis.results.daemons import decision_summary, parse_daemon_text

    _, a, b = scripted(tmp_path)
    _, prev, cur = views_of(tmp_path / "v")
    d = daemon(tmp_path, "devil", monkeypatch)
    d.interval(a, b, prev, cur)
    d.log.write(d.summary())
    d.log.close()
    line = decision_summary(parse_daemon_text((tmp_path / "d.jsonl").read_text()))
    assert (
        "; attribution per_task 1; node split: socket matrix shared by attributed "
        "misses (approximate), purity mean 0.571" in line
    )  # (125/140 + 0.25) / 2
    d = daemon(tmp_path / "i", "imar", monkeypatch)
    d.interval(a, b, prev, cur)
    d.log.write(d.summary())
    d.log.close()
    line = decision_summary(parse_daemon_text((tmp_path / "i" / "d.jsonl").read_text()))
    assert "; latency: measured: calibrated load latency per hop (one-hop factor 1.6" in line
