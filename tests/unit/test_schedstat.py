"""workloads/mix_schedstat.py and its metrics, on /proc/schedstat captured from
a QEMU guest of the release kernel (tests/fixtures/schedstat/README.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from analysis.results.metrics import schedstat_numa

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
