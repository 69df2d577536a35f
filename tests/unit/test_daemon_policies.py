"""The seed papers' worked rules as unit vectors for the daemons' policy code
(daemons/policy_*.py: the same modules the guest daemons import).

[Lorenzo18] Tables 2-4: the IMAR example (6 cores, 3 nodes, 3 processes of 2
threads) must give t_m = 300 and the ticket counts 6, 4, 5, 6 of Table 4.
[HongYoo] Section 3 and 4: MPKI > 1 makes a devil; a group is co-scheduled on
the node holding >= 80 % of its references (streamcluster yes, fluidanimate no).
[Revilla24] Section 6.2: the runtime-updated per-core IPC thresholds.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "daemons"))
import policy_devil as dv  # noqa: E402
import policy_imar as im  # noqa: E402
import policy_plb as plb  # noqa: E402

# ------------------------------------------------------------------ IMAR

# Table 2: TID -> (process, core, {node: P}); nodes 0,1,2 hold cores 0-1, 2-3, 4-5.
TABLE2 = {
    100: (100, 2, {0: 2.5, 1: 1.9, 2: 2.9}),
    101: (100, 4, {0: 2.7, 1: 1.8, 2: 3.1}),
    200: (200, 0, {0: 0.9, 1: 1.4}),
    201: (200, 5, {1: 1.6, 2: 2.1}),
    300: (300, 1, {0: 3.3, 2: 6.3}),
    301: (300, 3, {1: 8.1, 2: 5.7}),
}
CPU_NODE = {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2}


def table2_state() -> tuple[list[im.ThreadPerf], im.PerfRecord]:
    rec = im.PerfRecord()
    threads = []
    for tid, (pid, core, perf) in TABLE2.items():
        for node, p in perf.items():
            rec.update(tid, node, p)
        node = CPU_NODE[core]
        threads.append(im.ThreadPerf(tid, pid, core, node, perf[node]))
    return threads, rec


def test_table3_normalised_performance() -> None:
    threads, _ = table2_state()
    norm = im.normalised(threads)
    # Table 3, to the two decimals the paper prints
    want = {100: 0.76, 101: 1.24, 200: 0.6, 201: 1.4, 300: 0.58, 301: 1.42}
    assert {t: round(v, 2) for t, v in norm.items()} == want
    assert im.worst_thread(threads) == 300


def test_table4_tickets() -> None:
    threads, rec = table2_state()
    occupants = {t.cpu: [t.tid] for t in threads}
    dests = im.tickets(300, 0, rec, CPU_NODE, occupants, {t.tid: t.node for t in threads})
    got = {d.cpu: (d.swap_tid, d.tickets) for d in dests}
    # Table 4: core 2 (thread 100) 2+4, core 3 (301) 2+2, core 4 (101) 4+1,
    # core 5 (201) 4+2; cores 0 and 1 (t_m's node) get none; 21 in all.
    assert got == {2: (100, 6), 3: (301, 4), 4: (101, 5), 5: (201, 6)}
    assert sum(d.tickets for d in dests) == 21
    why = {d.cpu: d.why for d in dests}
    assert why == {
        2: "tm:nodata+ts:better",
        3: "tm:nodata+ts:nodata",
        4: "tm:better+ts:worse",
        5: "tm:better+ts:nodata",
    }


def test_ticket_extremes_and_free_core() -> None:
    # "an interchange that would increase the performance of both threads would
    # get eight tickets ... worsen both ... two"
    rec = im.PerfRecord()
    rec.update(1, 0, 1.0)
    rec.update(1, 1, 2.0)  # t_m better on node 1
    rec.update(2, 1, 1.0)
    rec.update(2, 0, 3.0)  # t_s better on node 0
    cpu_node = {0: 0, 1: 1, 2: 1}
    occ = {0: [1], 1: [2]}
    d = im.tickets(1, 0, rec, cpu_node, occ, {1: 0, 2: 1})
    assert [(x.cpu, x.swap_tid, x.tickets) for x in d] == [(1, 2, 8), (2, None, 4 + im.T_FREE)]
    rec.update(1, 1, 0.5)
    rec.update(2, 0, 0.2)
    d = im.tickets(1, 0, rec, cpu_node, occ, {1: 0, 2: 1}, free=3)
    assert [(x.cpu, x.tickets) for x in d] == [(1, 2), (2, 1 + 3)]


class Draws:
    """A random source that returns the given draws in order."""

    def __init__(self, draws: list[int]) -> None:
        self.draws = list(draws)

    def randrange(self, n: int) -> int:
        v = self.draws.pop(0)
        assert 0 <= v < n
        return v


def test_lottery_is_weighted_by_tickets() -> None:
    threads, rec = table2_state()
    occupants = {t.cpu: [t.tid] for t in threads}
    dests = im.tickets(300, 0, rec, CPU_NODE, occupants, {t.tid: t.node for t in threads})
    wins: dict[int, int] = {}
    rng = Draws(list(range(21)))
    for _ in range(21):  # every ticket drawn once: each core wins its tickets' count
        w = im.lottery(dests, rng)  # type: ignore[arg-type]
        wins[w.cpu] = wins.get(w.cpu, 0) + 1
    assert wins == {2: 6, 3: 4, 4: 5, 5: 6}
    assert im.lottery([], random.Random(0)) is None


def test_imar_step_swaps_worst_thread() -> None:
    threads, rec = table2_state()
    ch, info = im.imar_step(threads, rec, CPU_NODE, Draws([20]), dict(im.IMAR_DEFAULTS))
    assert info["tm"] == 300
    # draw 20 is the last ticket: core 5, thread 201
    assert ch == im.Interchange(300, 1, 5, 201, 6, 21, "tm:better+ts:nodata")


def test_single_thread_processes_are_never_chosen() -> None:
    threads = [im.ThreadPerf(1, 1, 0, 0, 0.1), im.ThreadPerf(2, 2, 1, 1, 5.0)]
    assert im.worst_thread(threads) is None
    ch, _ = im.imar_step(threads, im.PerfRecord(), {0: 0, 1: 1}, random.Random(1),
                         dict(im.IMAR_DEFAULTS))  # fmt: skip
    assert ch is None


def test_performance_eq1() -> None:
    assert im.performance(2.0, 3.0, 1.5, 1, 1, 1) == pytest.approx(4.0)
    assert im.performance(2.0, 3.0, 1.5, 2, 0, 1) == pytest.approx(4.0 / 1.5)
    assert im.performance(0.0, 3.0, 1.0, 1, 1, 1) == 0.0
    with pytest.raises(ValueError, match="latency"):
        im.performance(1.0, 1.0, 0.0, 1, 1, 1)


def test_imar2_interval_and_rollback() -> None:
    c = im.Imar2Control(1.0, 4.0, 0.97, t0=2.0)
    assert c.decide(10.0) == ("migrate", 2.0)  # first interval: nothing to compare
    c.migrated()
    assert c.decide(11.0) == ("migrate", 1.0)  # improved: halve
    c.migrated()
    assert c.decide(11.0) == ("migrate", 1.0)  # equal counts as improved; floor T_min
    assert c.decide(10.8) == ("migrate", 1.0)  # within rho: keep T, migrate
    assert c.decide(10.0) == ("rollback", 2.0)  # 10.0 < 0.97 * 10.8: double, undo
    c.rolled_back()
    assert c.decide(5.0) == ("hold", 4.0)  # fell again, nothing left to undo
    assert c.decide(1.0) == ("hold", 4.0)  # capped at T_max
    c.reset()
    assert c.decide(0.5) == ("migrate", 4.0)  # threads changed: no comparison
    with pytest.raises(ValueError, match="rho"):
        im.Imar2Control(1.0, 4.0, 1.5)
    with pytest.raises(ValueError, match="interval_min_s"):
        im.Imar2Control(4.0, 1.0, 0.9)


# ----------------------------------------------------------------- devil


def test_devil_threshold() -> None:
    assert dv.mpki(15, 1000) == 15.0
    assert dv.mpki(1, 0) is None
    assert not dv.is_devil(1.0)  # "more than one"
    assert dv.is_devil(1.0001)
    assert not dv.is_devil(None)
    # Section 4's table: the classification by average MPKI
    table = {
        "blackscholes": (0.1545, False), "bodytrack": (0.2237, False),
        "canneal": (22.6062, True), "facesim": (1.1320, True),
        "fluidanimate": (0.9352, False), "streamcluster": (16.2745, True),
        "swaptions": (0.0032, False), "x264": (1.7703, True),
    }  # fmt: skip
    assert {k: dv.is_devil(m) for k, (m, _) in table.items()} == {
        k: d for k, (_, d) in table.items()
    }
    assert dv.group_mpki([15, 16, 14, 15]) == 15.0
    assert dv.group_mpki([None, 2.0]) == 2.0


def pct(*rows: tuple[float, ...]) -> list[dict[int, float]]:
    return [dict(enumerate(r)) for r in rows]


def test_coschedule_80_percent_rule() -> None:
    # Section 3's example: four devil threads, 95/90/93/85 % to node 0 -> node 0
    ex = pct((95, 5), (90, 10), (93, 7), (85, 15))
    assert dv.target_node(ex) == 0
    # Section 4: streamcluster (master/clients) -> node 1; fluidanimate -> none
    sc = pct((0.1, 99.2, 0.7, 0), (0, 99.3, 0.6, 0.1), (0.5, 97.8, 1.5, 0.2), (0.3, 98.6, 1.1, 0))
    assert dv.target_node(sc) == 1
    fl = pct((2.1, 92.2, 1.2, 4.5), (0, 53.8, 1.4, 44.8), (7.1, 47.2, 45.5, 0.2),
             (46.7, 47.2, 5.9, 0.2))  # fmt: skip
    assert dv.target_node(fl) is None
    assert dv.target_node([{0: 80, 1: 20}]) == 0  # at least 80 %
    assert dv.target_node([{0: 79.99, 1: 20.01}]) is None
    assert dv.target_node([{}]) is None


def test_decide_group() -> None:
    nodes = {0: [0, 1], 1: [2, 3]}
    p = dict(dv.DEVIL_DEFAULTS)
    d = dv.decide_group(7, [15, 16], pct((95, 5), (90, 10)), nodes, None, p)
    assert (d.devil, d.target, d.action) == (True, 0, "coschedule")
    assert dv.decide_group(7, [15, 16], pct((95, 5), (90, 10)), nodes, 0, p).action == "keep"
    d = dv.decide_group(7, [0.5, 0.9], pct((95, 5), (90, 10)), nodes, None, p)
    assert (d.devil, d.action) == (False, "none")
    d = dv.decide_group(7, [15, 16, 14], pct((95, 5), (90, 10), (93, 7)), nodes, None, p)
    assert d.action == "skip:3 threads > 2 cpus of node 0" and d.target is None
    d = dv.decide_group(7, [15, 16, 14], pct((95, 5), (90, 10), (93, 7)), nodes, None,
                        dict(p, allow_oversubscribe=1))  # fmt: skip
    assert d.action == "coschedule"
    d = dv.decide_group(7, [15, 16], pct((60, 40), (50, 50)), nodes, None, p)
    assert d.action == "skip:no node holds the share"


# ------------------------------------------------------------------- PLB


def test_plb_ipc_truncation() -> None:
    assert plb.truncated_ipc(1239, 1000) == 1.23
    assert plb.truncated_ipc(29, 100) == 0.29  # not 0.28 from float rounding
    assert plb.truncated_ipc(5, 0) is None


def test_plb_threshold_update() -> None:
    # first pass sets; higher raises; lower keeps the threshold and migrates
    got = plb.passes([{0: 1.20, 1: 0.80}, {0: 1.25, 1: 0.70}, {0: 1.10, 1: 0.90},
                      {0: 1.25, 1: None}])  # fmt: skip
    rows = [[(v.cpu, v.threshold_after, v.migrate) for v in p] for p in got]
    assert rows == [
        [(0, 1.20, False), (1, 0.80, False)],
        [(0, 1.25, False), (1, 0.80, True)],
        [(0, 1.25, True), (1, 0.90, False)],
        [(0, 1.25, False), (1, 0.90, False)],  # an idle core is not judged
    ]


def test_plb_destination() -> None:
    cpu_node = {0: 0, 1: 0, 2: 1, 3: 1}
    assert plb.destination(0, cpu_node, {}) == 1  # the other core of its node
    assert plb.destination(2, cpu_node, {3: 2, 0: 0}) == 3
    assert plb.destination(2, cpu_node, {3: 2}, "machine") == 0
    assert plb.destination(0, {0: 0, 1: 1}, {}) == 1  # one core per node: anywhere
    assert plb.destination(0, {0: 0}, {}) is None
    with pytest.raises(ValueError, match="domain"):
        plb.destination(0, cpu_node, {}, "socket")
    assert plb.thread_to_move({10: 0.2, 11: 0.5, 12: 0.5}) == 11
    assert plb.thread_to_move({10: 0.0}) is None
