"""Busy cycles of O3 cores, which have no exec_context stats (issue 14: the O3
control's busy-cycle IPC was empty). tests/fixtures/gem5-o3-stats is a cut
of a real O3 run's dump (its README)."""

from __future__ import annotations

from pathlib import Path

from analysis.results.gem5stats import core_counters, o3_cycles, parse_stats_file

STATS = Path(__file__).resolve().parents[1] / "fixtures" / "gem5-o3-stats" / "stats.txt"


def values() -> dict[str, float]:
    return parse_stats_file(STATS)[0].values


def test_o3_busy_cycles_are_its_non_halted_cycles_stalls_included() -> None:
    """O3 sleeps through a miss and adds the slept cycles to numCycles (and
    idleCycles) at wake-up; a halt goes to quiesceCycles only. Busy = numCycles
    (not numCycles - idleCycles, which would drop the stalls and inflate IPC);
    cycles, halted included = numCycles + quiesceCycles."""
    v = values()
    c = core_counters(v)
    sw = "board.processor.switch6.core."
    assert c["busy_cycles"][6] == v[sw + "numCycles"] == 8444659
    assert v[sw + "idleCycles"] > 0  # stalls it slept through: busy, not idle
    assert c["cycles"][6] == v[sw + "numCycles"] + v[sw + "quiesceCycles"]
    # the switched-out timing cores count 0
    assert v["board.processor.start6.core.exec_context.thread_0.numBusyCycles"] == 0
    for cpu, cyc in c["cycles"].items():
        assert 0 <= c["busy_cycles"][cpu] <= cyc
    ipc = {cpu: c["insts"][cpu] / c["busy_cycles"][cpu] for cpu in c["insts"]}
    assert all(0.1 < x < 4 for x in ipc.values()), ipc


def test_an_o3_core_that_never_halted_has_no_quiesce_line() -> None:
    # gem5 prints quiesceCycles only when it is non-zero (prereq)
    v = {k: x for k, x in values().items() if not k.endswith("switch7.core.quiesceCycles")}
    cyc = v["board.processor.switch7.core.numCycles"]
    assert o3_cycles(v)[7] == (cyc, 0.0)


def test_simple_cpus_are_left_to_num_busy_cycles() -> None:
    v = {k: x for k, x in values().items() if ".start" in k or not k.startswith("board")}
    assert o3_cycles(v) == {}
