"""The host side of the counter bridge without gem5: which live statistics it
reads (checked on the names of a real run's stats.txt, tests/fixtures/gem5-run)
and how the ROI protocol routes a daemon's sample request (work id 3) to it.
Reading the live statistics themselves needs gem5: tests/gem5/test_counter_bridge.py.
"""

from __future__ import annotations

import json
import lzma
import sys
from enum import Enum
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "configs"))
sys.path.insert(0, str(ROOT / "daemons"))

import counters  # noqa: E402
from numa_lb import counter_bridge as cb  # noqa: E402
from numa_lb.roi import ROI_RECORD_NAME, SAMPLE_WORK_ID, RoiProtocol  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "gem5-run" / "m5out" / "stats.txt.xz"


class Events(Enum):
    CHECKPOINT = "checkpoint"
    WORKBEGIN = "workbegin"
    WORKEND = "workend"
    EXIT = "exit"
    MAX_TICK = "max tick"
    KERNEL_PANIC = "kernel panic"
    KERNEL_OOPS = "kernel oops"
    FAIL = "fail"


def test_the_bridge_and_the_reports_split_requests_with_one_function() -> None:
    """The daemons' requests by node and the reports' remote ratio are one
    derivation (numa_lb/ruby_requests.py); the analysis re-exports it."""
    from analysis.results import gem5stats  # noqa: PLC0415 - host side only

    assert cb.remote_requests is gem5stats.remote_requests
    assert cb.remote_requests.__module__ == "numa_lb.ruby_requests"


def test_the_statistics_it_reads_on_a_real_runs_names() -> None:
    names = set()
    with lzma.open(FIXTURE, "rt") as f:
        for line in f:
            tok = line.split()
            if tok and "::" not in tok[0] and not tok[0].startswith("-"):
                names.add(tok[0])
            elif tok and "::" in tok[0]:
                names.add(tok[0].split("::")[0])  # a vector's name, as the live tree has it
    got = sorted(n for n in names if cb.wanted(n))
    # 4 x 1 run: every CPU (boot + ROI) once, each L2 (not L1, not the probe filter)
    insts = [n for n in got if n.endswith(cb.INSTS)]
    assert len(insts) == 4 and all(".switch" in n for n in insts)  # start cores printed 0: nozero
    assert len([n for n in got if n.endswith(cb.NOT_IDLE)]) == 8
    llc = [n for n in got if n.endswith(cb.LLC_MISSES)]
    assert llc == [f"board.cache_hierarchy.ruby_system.core_caches{i}.L2cache.m_demand_misses"
                   for i in range(4)]  # fmt: skip
    assert len([n for n in got if n.endswith(cb.DIR_REQUESTS)]) == 4  # the directories, no DMA
    net = [n for n in got if "throttle" in n]
    assert net and all(n.endswith(("Request_Control", "Writeback_Control")) for n in net)
    assert not any("L1Dcache" in n or "probeFilter" in n for n in got)


def test_one_work_id_on_both_sides() -> None:
    assert cb.SAMPLE_WORK_ID == SAMPLE_WORK_ID == 3
    src = (ROOT / "daemons" / "nlbctr.c").read_text()
    assert "#define NLB_SAMPLE_WORK_ID 3" in src
    assert counters.SCHEMA == cb.REPLY_SCHEMA


def test_sample_requests_go_to_the_bridge_not_to_the_roi(tmp_path: Path) -> None:
    calls: list[str] = []
    now = [0]
    wid = [1]
    proto = RoiProtocol(
        outdir=tmp_path, tick=lambda: now[0],
        reset_stats=lambda: calls.append("reset"), dump_stats=lambda: calls.append("dump"),
        switch_cpus=lambda: calls.append("switch"), save_checkpoint=lambda p: None,
        take_checkpoint=None, work_id=lambda: wid[0],
        sample=lambda: calls.append("sample"), before_reset=lambda: calls.append("offsets"),
    )  # fmt: skip
    table = proto.handlers(Events)
    wid[0] = SAMPLE_WORK_ID
    assert next(table[Events.WORKBEGIN]) is False  # before the ROI: answered, nothing else
    assert calls == ["sample"] and proto.state.value == "booting"
    wid[0] = 1
    now[0] = 10
    next(table[Events.WORKBEGIN])
    # the bridge keeps the counts before the switch and the reset
    assert calls == ["sample", "offsets", "switch", "reset"]
    wid[0] = SAMPLE_WORK_ID
    for _ in range(3):
        next(table[Events.WORKBEGIN])
    assert calls.count("sample") == 4 and proto.samples == 4 and proto.state.value == "roi"
    next(table[Events.WORKEND])  # a workend with id 3 is foreign: recorded, no dump
    wid[0] = 1
    next(table[Events.WORKEND])
    assert calls[-1] == "dump" and calls.count("dump") == 1
    rec = json.loads((tmp_path / ROI_RECORD_NAME).read_text())
    events = [(e["event"], e.get("work_id")) for e in rec["events"]]
    assert events == [("workbegin", None), ("workend", 3), ("workend", None)]


def test_without_a_bridge_sample_ids_are_foreign(tmp_path: Path) -> None:
    proto = RoiProtocol(
        outdir=tmp_path, tick=lambda: 5, reset_stats=lambda: None, dump_stats=lambda: None,
        switch_cpus=None, save_checkpoint=lambda p: None, take_checkpoint=None,
        work_id=lambda: SAMPLE_WORK_ID,
    )  # fmt: skip
    next(proto.handlers(Events)[Events.WORKBEGIN])
    rec = json.loads((tmp_path / ROI_RECORD_NAME).read_text())
    assert rec["events"][0]["work_id"] == 3 and "ignored" in rec["events"][0]["action"]


class Stat:
    """A live gem5 statistic's Info, as the bridge uses it."""

    def __init__(self, name: str, value: float, result: float | None = None) -> None:
        self.name, self.value, self.result = name, value, result

    def prepare(self) -> None:
        pass


class Group:
    def __init__(self, stats: list[Stat], groups: dict[str, Group] | None = None) -> None:
        self.stats, self.groups = stats, groups or {}

    def getStats(self) -> list[Stat]:  # noqa: N802 - gem5's name
        return self.stats

    def getStatGroups(self) -> dict[str, Group]:  # noqa: N802 - gem5's name
        return self.groups


def bridge_over(cores: dict[str, Group], tmp: Path) -> cb.CounterBridge:
    root = Group([], {"board": Group([], {"processor": Group([], cores)})})
    return cb.CounterBridge(
        outdir=tmp, readfile=tmp / "r.bin", root=lambda: root, tick=lambda: 1_000_000,
        active_cores=lambda: [f"board.processor.{n}.core" for n in cores],
        sockets=[[0], [1]], cpu_clock_hz=1e12 / 500, reset_tick=0, config=tmp / "none.json",
    )  # fmt: skip


def test_busy_cycles_of_simple_and_o3_cores(tmp_path: Path) -> None:
    """A timing core: its not-idle fraction times the cycles since the reset. An
    O3 core has no exec_context stats (issue 14: the bridge raised KeyError and
    gem5 24 dropped the ROI start): its numCycles, the cycles it was not
    halted, stalls included (idleCycles, the stalls it slept through, stay in)."""
    timing = Group([Stat("numCycles", 1500)], {"exec_context": Group([], {
        "thread_0": Group([Stat("notIdleFraction", 0, result=0.25)])})})  # fmt: skip
    o3 = Group([Stat("numCycles", 1800), Stat("idleCycles", 300)])
    got = bridge_over({"switch0": Group([], {"core": timing}),
                       "switch1": Group([], {"core": o3})}, tmp_path).current()  # fmt: skip
    # 1e6 ticks at 500 ticks per cycle: 2000 cycles, a quarter of them busy
    assert abs(got["busy_cycles"][0] - 0.25 * 1_000_001 / 500) < 1e-9
    assert got["busy_cycles"][1] == 1800


def test_a_core_without_cycle_counters_is_an_error_gem5_does_not_swallow(tmp_path: Path) -> None:
    b = bridge_over({"switch0": Group([], {"core": Group([])}),
                     "switch1": Group([], {"core": Group([])})}, tmp_path)  # fmt: skip
    with pytest.raises(LookupError, match="switch0") as e:
        b.current()
    assert not isinstance(e.value, KeyError)  # gem5 24 reads a KeyError as "no handler"


def test_sixteen_cores_are_found_under_their_stats_names(tmp_path: Path) -> None:
    """gem5 pads vector indices in paths (switch00) but not in stats names
    (switch0) once a vector has more than 10 elements: 4 x 4 and 4 x 8 (the
    roi.json of 2026-11-25: "no notIdleFraction under board.processor.switch00.core")."""
    assert cb.stats_prefix("board.processor.switch00.core") == "board.processor.switch0.core"
    assert cb.stats_prefix("board.processor.switch15.core") == "board.processor.switch15.core"
    assert cb.stats_prefix("board.processor.switch.core") == "board.processor.switch.core"
    cores = {f"switch{i}": Group([], {"core": Group([Stat("numCycles", 100 + i)])})
             for i in range(16)}  # fmt: skip
    b = bridge_over(cores, tmp_path)
    b.active_cores = lambda: [f"board.processor.switch{i:02d}.core" for i in range(16)]
    b.sockets, b.ncpus = [list(range(s * 4, s * 4 + 4)) for s in range(4)], 16
    assert b.current()["busy_cycles"] == [100.0 + i for i in range(16)]


def test_counts_lost_at_a_reset_make_every_later_reply_an_error(tmp_path: Path) -> None:
    """A bridge that cannot read the counters at the ROI start (the stats are
    reset anyway) must not answer later samples with counts that silently
    miss what came before, nor with a stale reset tick."""
    b = bridge_over({"switch0": Group([], {"core": Group([])}),
                     "switch1": Group([], {"core": Group([])})}, tmp_path)  # fmt: skip
    with pytest.raises(LookupError):
        b.before_reset()
    assert b.resets == 1 and b.reset_tick == 1_000_000
    b.sample()
    rep = json.loads((tmp_path / "r.bin").read_text())
    assert "counts before stats reset 1 lost: LookupError" in rep["error"]
    assert b.errors == 1 and "busy_cycles" not in rep
