"""Calibration arithmetic: measured points -> table CSV -> link latency, and the +-5 % check.

The measurements come from real gem5 runs (`./run_all.py run --preset
calibration`); here only what is done with them is checked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.results import calibration as cal
from analysis.results.calibration import Measurement

ROOT = Path(__file__).resolve().parents[2]


COND = {"sockets": "4", "cores_per_socket": "2", "cpu_clock_hz": "2800000000",
        "memory_type": "DDR3_1600_8x8", "probe_filter": "1", "inter_socket": "full",
        "link_bandwidth_factor": "46"}  # fmt: skip


def m(
    cycles: int, factor: float, requested: float | None = None, cond: dict | None = None
) -> Measurement:
    return Measurement("r", cycles, requested, factor, 100.0, 100.0 * factor, [[0.0]],
                       cond or COND)  # fmt: skip


def test_repeats_average_and_the_csv_round_trips(tmp_path: Path) -> None:
    table = cal.table([m(10, 1.2), m(10, 1.3), m(100, 2.0), m(50, 1.6)])
    assert table.points == ((10, 1.25), (50, 1.6), (100, 2.0))
    path = tmp_path / "c.csv"
    cal.write_csv(table, path, "note line 1\nnote line 2")
    assert path.read_text().startswith("# note line 1\n# note line 2\n# conditions: cores_per")
    back = cal.CalibrationTable.from_csv(path)
    assert back.points == table.points and dict(back.conditions) == COND
    assert back.mismatch(COND) is None
    assert "cores_per_socket=2" in (back.mismatch(dict(COND, cores_per_socket="4")) or "")
    assert back.link_cycles(1.8) == 75  # interpolated between (50, 1.6) and (100, 2.0)
    assert cal.table_name(COND) == "4x2-2800MHz-pf1-bw46-DDR3_1600_8x8-full"


def test_runs_on_different_machines_make_no_table() -> None:
    with pytest.raises(ValueError, match="2 different machines"):
        cal.table([m(10, 1.2), m(20, 1.3, cond=dict(COND, probe_filter="0"))])


def test_a_factor_that_falls_with_latency_is_refused() -> None:
    with pytest.raises(ValueError, match="increase strictly"):
        cal.table([m(10, 1.5), m(20, 1.4)])


def test_check_applies_the_five_percent_band() -> None:
    rows = cal.check([m(40, 1.66, 1.6), m(80, 2.12, 2.0), m(5, 1.1)])
    assert [(r["requested"], r["within_tolerance"]) for r in rows] == [(1.6, True), (2.0, False)]
    assert rows[1]["error_pct"] == 6.0


def test_collect_skips_what_is_not_a_finished_calibration_run(tmp_path: Path) -> None:
    (tmp_path / "runs" / "abc").mkdir(parents=True)
    (tmp_path / "runs" / "abc" / "spec.json").write_text("{}")
    found, skipped = cal.collect(tmp_path)
    assert found == [] and skipped == ["abc: state None"]
    assert cal.main(tmp_path, do_check=False, write=tmp_path / "x.csv") == 1
    assert not (tmp_path / "x.csv").exists()


FIXTURE = ROOT / "tests" / "fixtures" / "calibration-run"


def test_a_real_pairs_run_gives_its_local_and_remote_latency() -> None:
    found, skipped = cal.collect(FIXTURE)
    assert skipped == [] and len(found) == 1
    (m,) = found
    assert m.link_latency_cycles == 10 and m.numa_factor_requested is None
    assert m.local_ns == pytest.approx(70.9932) and m.remote_ns == pytest.approx(79.2507)
    assert m.numa_factor_measured == pytest.approx(79.2507 / 70.9932, rel=1e-6)
    assert [row[:2] for row in m.matrix_ns] == [[0, 0], [1, 2]]
    # recorded before link bandwidth was a parameter: gem5's 16 B/cycle links
    assert m.conditions["link_bandwidth_factor"] == "160"
    assert m.conditions["cores_per_socket"] == "1" and m.conditions["probe_filter"] == "1"


def test_a_context_switch_in_a_timed_window_leaves_the_run_out(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "cal")
    (results,) = (tmp_path / "cal").glob("runs/*/guest/results.jsonl")
    lines = []
    for line in results.read_text().splitlines():
        rec = json.loads(line)
        if isinstance(rec.get("result"), dict) and rec["result"].get("mode") == "pairs":
            rec["result"]["pairs"][1][4] = 3  # three switches while timing 1 -> 2
        lines.append(json.dumps(rec))
    results.write_text("\n".join(lines) + "\n")
    found, skipped = cal.collect(tmp_path / "cal")
    assert found == []
    assert (
        len(skipped) == 1 and "context switches in the timed window of pairs [[1, 2]]" in skipped[0]
    )


def test_loaded_runs_compare_with_idle_ones_per_link_latency() -> None:
    idle = [m(10, 1.2), m(60, 1.6)]
    loaded = [
        Measurement("l", 10, None, 1.5, 120.0, 180.0, [[0.0]], COND, {"load0": 1}),
        Measurement("l", 20, None, 1.5, 120.0, 180.0, [[0.0]], COND, {"load0": 1}),
    ]
    rows = cal.compare_load(loaded, idle)
    assert [r["link_latency_cycles"] for r in rows] == [10]  # 20 has no idle partner
    r = rows[0]
    assert (r["idle_factor"], r["loaded_factor"]) == (1.2, 1.5)
    assert (r["local_ratio"], r["remote_ratio"]) == (1.2, 1.5)
    # another machine is no partner
    other = [m(10, 1.2, cond=dict(COND, cores_per_socket="4"))]
    assert cal.compare_load(loaded, other) == []


def test_a_loaded_calibration_writes_no_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded = Measurement("l", 10, None, 1.5, 120.0, 180.0, [[0.0]], COND, {"load0": 1})
    monkeypatch.setattr(cal, "collect", lambda out: ([loaded], []))
    target = tmp_path / "t.csv"
    assert cal.main(tmp_path, do_check=False, write=target) == 0
    assert not target.exists()
    assert "no table written" in capsys.readouterr().out
