"""Busy cycles of O3 cores, which have no exec_context stats (issue 14: the O3
control's busy-cycle IPC was empty). tests/fixtures/gem5-o3-stats is a cut
of a real O3 run's dump (its README)."""

from __future__ import annotations

from pathlib import Path

from analysis.results.gem5stats import core_counters, o3_busy_cycles, parse_stats_file

STATS = Path(__file__).resolve().parents[1] / "fixtures" / "gem5-o3-stats" / "stats.txt"


def values() -> dict[str, float]:
    return parse_stats_file(STATS)[0].values


def test_o3_busy_cycles_are_the_cycles_it_ticked() -> None:
    v = values()
    c = core_counters(v)
    sw = "board.processor.switch6.core."
    assert c["busy_cycles"][6] == v[sw + "numCycles"] - v[sw + "idleCycles"] == 7390971
    # the switched-out timing cores count 0; halted time (quiesceCycles) is in
    # neither numCycles nor busy
    assert v["board.processor.start6.core.exec_context.thread_0.numBusyCycles"] == 0
    assert v[sw + "quiesceCycles"] > v[sw + "numCycles"]
    for cpu, cyc in c["cycles"].items():
        assert 0 <= c["busy_cycles"][cpu] <= cyc
    ipc = {cpu: c["insts"][cpu] / c["busy_cycles"][cpu] for cpu in c["insts"]}
    assert all(0.1 < x < 4 for x in ipc.values()), ipc


def test_an_o3_core_that_never_idled_has_no_idle_line_and_is_all_busy() -> None:
    # gem5 prints idleCycles only when it is non-zero (prereq)
    v = {k: x for k, x in values().items() if not k.endswith("switch7.core.idleCycles")}
    assert o3_busy_cycles(v)[7] == v["board.processor.switch7.core.numCycles"]


def test_simple_cpus_are_left_to_num_busy_cycles() -> None:
    v = {k: x for k, x in values().items() if ".start" in k or not k.startswith("board")}
    assert o3_busy_cycles(v) == {}
