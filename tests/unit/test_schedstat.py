"""workloads/mix_schedstat.py and its metrics, on /proc/schedstat captured from
a QEMU guest of the release kernel (tests/fixtures/schedstat/README.md)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from analysis.results.metrics import interrupt_counts, sched_regime, schedstat_numa

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "schedstat"
sys.path.insert(0, str(REPO / "workloads"))
import mix_schedstat as ss  # noqa: E402
from mix_sysctl import domain_names  # noqa: E402


def names() -> dict[str, str]:
    return json.loads((FIX / "domain_names.json").read_text())


def test_levels_are_named_and_summed_over_cpus() -> None:
    text = (FIX / "after.txt").read_text()
    got = ss.parse(text, names())
    assert set(got) == {"MC", "NUMA"}
    # the NUMA level's pass count is the sum of its 8 CPUs' domain1 lines
    by_hand = 0
    for ln in text.splitlines():
        t = ln.split()
        if t and t[0] == "domain1":
            by_hand += sum(int(t[2 + 8 * i]) for i in range(3))  # lb_count per idle type
    assert by_hand > 0
    assert sum(got["NUMA"][f"lb_count_{t}"] for t in ss.IDLE_TYPES) == by_hand
    # without debugfs names the levels keep the kernel's domain index
    assert set(ss.parse(text)) == {"domain0", "domain1"}


def test_the_record_is_the_delta_the_guest_wrote() -> None:
    before, after = (FIX / "before.txt").read_text(), (FIX / "after.txt").read_text()
    rec = ss.record(before, after, names())
    assert rec["status"] == "present"
    assert rec["delta"] == json.loads((FIX / "delta.json").read_text())
    m = schedstat_numa(rec)
    d = rec["delta"]["NUMA"]
    assert m["schedstat_numa_passes"] == sum(d[f"lb_count_{t}"] for t in ss.IDLE_TYPES)
    assert m["schedstat_numa_passes_newidle"] == d["lb_count_newidle"]
    assert m["schedstat_numa_balanced"] == sum(d[f"lb_balanced_{t}"] for t in ss.IDLE_TYPES)
    assert m["schedstat_numa_gained"] == sum(d[f"lb_gained_{t}"] for t in ss.IDLE_TYPES)
    assert 0 < m["schedstat_numa_balanced"] <= m["schedstat_numa_passes"]


@pytest.mark.parametrize(
    "mangle,what",
    [
        (lambda t: t.replace("version 15", "version 14", 1), "version 15"),
        (lambda t: t.replace("domain1 ff", "domain1 ff 7", 1), "bad domain line"),
        (lambda t: t.replace("domain0 03 ", "domain0 03 x", 1), "bad domain line"),
        (lambda t: "", "version 15"),
    ],
)
def test_other_formats_are_errors_and_the_record_keeps_the_raw_text(mangle, what) -> None:  # type: ignore[no-untyped-def]
    before, after = (FIX / "before.txt").read_text(), (FIX / "after.txt").read_text()
    with pytest.raises(ss.SchedstatError, match=what):
        ss.parse(mangle(after), names())
    rec = ss.record(before, mangle(after), names())
    assert rec["status"] == "error" and what in rec["error"]
    assert rec["after_raw"] == mangle(after)
    assert schedstat_numa(rec) == {}


def test_no_schedstat_is_absent_not_zero(tmp_path: Path) -> None:
    assert ss.snapshot(str(tmp_path / "nope")) is None
    rec = ss.record(None, None, {})
    assert rec["status"] == "absent" and schedstat_numa(rec) == {}
    assert domain_names(str(tmp_path)) == {}


def test_domain_names_read_the_debugfs_tree(tmp_path: Path) -> None:
    for cpu in (0, 1):
        for dom, name in enumerate(("MC", "NUMA")):
            d = tmp_path / "kernel/debug/sched/domains" / f"cpu{cpu}" / f"domain{dom}"
            d.mkdir(parents=True)
            (d / "name").write_text(name + "\n")
    (tmp_path / "kernel/debug/sched/domains/cpu1/domain2").mkdir()  # no name: left out
    assert domain_names(str(tmp_path)) == {
        "cpu0/domain0": "MC",
        "cpu0/domain1": "NUMA",
        "cpu1/domain0": "MC",
        "cpu1/domain1": "NUMA",
    }


# ------------------------------------------------ per-CPU lines: the regime

GEM5 = REPO / "tests" / "fixtures" / "finding-b192"


def gem5_run_end(policy: str) -> dict:
    """run_end of a real gem5 run (tests/fixtures/finding-b192/README.md)."""
    for ln in (GEM5 / policy / "results.jsonl").read_text().splitlines():
        rec = json.loads(ln)
        if rec["type"] == "run_end":
            return rec
    raise AssertionError("no run_end")


def test_cpu_lines_are_the_nine_counters_of_show_schedstat() -> None:
    text = (FIX / "after.txt").read_text()
    got = ss.parse_cpus(text)
    assert list(got) == [f"cpu{i}" for i in range(8)]
    for ln in text.splitlines():
        t = ln.split()
        if t and t[0].startswith("cpu"):
            assert [got[t[0]][k] for k in ss.CPU_FIELDS] == [int(v) for v in t[1:]]
            assert got[t[0]]["legacy_zero"] == 0  # printed as a literal 0 by the kernel
    # the domain parser still reads the same text
    assert set(ss.parse(text, names())) == {"MC", "NUMA"}


def test_cpu_deltas_of_the_qemu_capture() -> None:
    before, after = (FIX / "before.txt").read_text(), (FIX / "after.txt").read_text()
    d = ss.cpu_delta(before, after)
    # cpu1 by hand from the two files: 12902085231 - 8525683357 ns on the CPU
    assert d["cpu1"]["rq_cpu_time"] == 12902085231 - 8525683357
    assert d["cpu1"]["run_delay"] == 1162115221 - 813337590
    assert all(c["rq_cpu_time"] >= 0 and c["run_delay"] >= 0 for c in d.values())
    w = ss.cpu_window((10.0, before), (12.5, after))
    assert w["status"] == "present" and w["cpus"] == 8 and w["window_s"] == 2.5
    assert w["delta"] == d


def test_busy_fraction_from_schedstat_agrees_with_gem5s_busy_cycles() -> None:
    """Two independent measures of one real gem5 run (default, lb3-block192,
    run 848620de1df9e0fc): the guest's run-queue time over the mix's elapsed
    time, and gem5's busy-cycle fraction from the kept frame of
    findings/2026-11-26-finding-b192 (busy_fraction 0.296339). That runner read
    /proc/schedstat around the whole run (warm-up included), hence the margin."""
    end = gem5_run_end("default")
    s = end["schedstat"]
    cpu = {"roi": ss.cpu_window((0.0, s["before_raw"]), (end["elapsed_s"], s["after_raw"]))}
    m = sched_regime({"cpu": cpu})
    assert m["sched_busy_fraction"] == pytest.approx(0.296339, abs=0.01)
    # runnable >= busy; in that sleeping mix well under one task per CPU
    assert m["sched_busy_fraction"] < m["sched_runnable_per_cpu"] < 0.5
    d = cpu["roi"]["delta"]
    by_hand = sum(c["rq_cpu_time"] + c["run_delay"] for c in d.values())
    assert m["sched_runnable_per_cpu"] == pytest.approx(by_hand / (end["elapsed_s"] * 1e9 * 8))
    assert "sched_busy_fraction_all_running" not in m


def test_the_all_running_window_gives_its_own_metrics() -> None:
    before, after = (FIX / "before.txt").read_text(), (FIX / "after.txt").read_text()
    mid = ss.cpu_window((0.0, before), (2.0, after))
    m = sched_regime({"cpu": {"roi": mid, "all_running": mid}})
    assert m["sched_all_running_s"] == 2.0
    assert m["sched_busy_fraction_all_running"] == m["sched_busy_fraction"]
    busy = sum(c["rq_cpu_time"] for c in mid["delta"].values())
    assert m["sched_busy_fraction"] == pytest.approx(busy / (2.0e9 * 8))


@pytest.mark.parametrize(
    "mangle,what",
    [
        (lambda t: t.replace("version 15", "version 14", 1), "version 15"),
        (lambda t: t.replace("cpu3 0 0 ", "cpu3 0 ", 1), "bad cpu line"),
        (lambda t: t.replace("cpu3 0 0 ", "cpu3 0 x ", 1), "bad cpu line"),
        (lambda t: t.replace("cpu3 ", "cpuX ", 1), "bad cpu line"),
        (lambda t: "\n".join(ln for ln in t.splitlines() if not ln.startswith("cpu")), "no cpu"),
        (lambda t: t.replace("cpu7 ", "cpu8 ", 1), "CPU set changed"),
    ],
)
def test_bad_cpu_lines_are_errors_not_metrics(mangle, what) -> None:  # type: ignore[no-untyped-def]
    before, after = (FIX / "before.txt").read_text(), (FIX / "after.txt").read_text()
    with pytest.raises(ss.SchedstatError, match=what):
        ss.cpu_delta(before, mangle(after))
    w = ss.cpu_window((0.0, before), (1.0, mangle(after)))
    assert w["status"] == "error" and what in w["error"]
    assert sched_regime({"cpu": {"roi": w, "all_running": w}}) == {}


def test_no_window_is_no_metric() -> None:
    before = (FIX / "before.txt").read_text()
    assert ss.cpu_window(None, (1.0, before)) == {"status": "absent"}
    assert sched_regime({}) == {}  # a runner before the cpu windows
    assert sched_regime({"cpu": {"roi": {"status": "absent"}}}) == {}
    # an empty window (both reads at one instant) is not a 0 or an infinity
    assert sched_regime({"cpu": {"roi": ss.cpu_window((1.0, before), (1.0, before))}}) == {}


def test_task_schedstat_lines() -> None:
    from mix_metrics import parse_task_schedstat

    own = Path("/proc/self/schedstat")
    if own.exists():  # this host's kernel (CONFIG_SCHED_INFO)
        assert parse_task_schedstat(own.read_text()) is not None
    assert parse_task_schedstat("142100 23063283 2\n") == (142100, 23063283, 2)
    for bad in (None, "", "1 2", "1 2 3 4", "1 -2 3", "a b c"):
        assert parse_task_schedstat(bad) is None


def _a4(policy: str) -> dict:
    return json.loads((FIX / f"gem5-a4-{policy}-cpu-windows.json").read_text())["cpu"]


def test_a_cpu_halted_with_tasks_queued_is_counted_stalled() -> None:
    # stage A4's excl run under gem5: CPU 0 scheduled 0 times in the
    # all-running window while 127 ms of wait built up on its run queue
    excl = _a4("excl")
    assert excl["all_running"]["delta"]["cpu0"]["sched_count"] == 0
    m = sched_regime({"cpu": excl})
    assert m["sched_stalled_cpus_all_running"] == 1
    assert m["sched_stalled_cpus"] == 0  # over the whole ROI CPU 0 did schedule (72 times)
    # the same mix under default: every CPU scheduled 158-201 times
    assert sched_regime({"cpu": _a4("default")})["sched_stalled_cpus_all_running"] == 0


def test_an_idle_cpu_with_nothing_queued_is_not_stalled() -> None:
    w = copy.deepcopy(_a4("default")["all_running"])
    w["delta"]["cpu3"].update(sched_count=0, run_delay=0, rq_cpu_time=0)
    assert sched_regime({"cpu": {"all_running": w}})["sched_stalled_cpus_all_running"] == 0
    w["delta"]["cpu3"]["run_delay"] = 1
    assert sched_regime({"cpu": {"all_running": w}})["sched_stalled_cpus_all_running"] == 1


def test_interrupt_counts_of_a_real_gem5_run() -> None:
    rec = json.loads(
        (REPO / "tests/fixtures/interrupts/gem5-verdict-h-excl-d4f5bea0.json").read_text()
    )
    m = interrupt_counts(rec)
    roi = rec["roi"]["delta"]
    assert m["resched_ipis"] == sum(roi["RES"]) == 21
    assert m["call_ipis"] == sum(roi["CAL"]) and m["local_timer_irqs"] == sum(roi["LOC"])
    assert "idle_hlt_steps" not in m  # kernel 0001-0024: no HLT row
    # with patch 0025's row in the kernel but no step in the ROI: 0, not absent
    with_row = dict(rec, end_raw=rec["end_raw"] + " HLT:  0 0 0 0 0 0 0 0   Idle HLTs\n")
    assert interrupt_counts(with_row)["idle_hlt_steps"] == 0.0
    stepped = copy.deepcopy(with_row)
    stepped["roi"]["delta"]["HLT"] = [3, 0, 1, 0, 0, 0, 0, 2]
    assert interrupt_counts(stepped)["idle_hlt_steps"] == 6
    assert interrupt_counts({}) == {} and interrupt_counts({"roi": {"status": "absent"}}) == {}
