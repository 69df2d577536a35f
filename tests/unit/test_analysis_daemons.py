"""analysis/results/daemons.py: the policy daemons' logs and the counter
bridge's record in the analysis. The logs parsed here are written by the
daemon itself (daemons/numa_lb_daemon.py, run as a process); tables are
built from tidy rows as the frames hold them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "daemons"))

import counters  # noqa: E402

from analysis.results import daemons as rd  # noqa: E402


def daemon_log(tmp: Path, *args: str) -> Path:
    log = tmp / "guest" / "daemon-imar.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(ROOT / "daemons" / "numa_lb_daemon.py"), "imar",
                    "--log", str(log), *args], capture_output=True, timeout=60)  # fmt: skip
    return log


def test_a_refusing_daemons_log_is_an_input_problem(tmp_path: Path) -> None:
    log = daemon_log(tmp_path, "--parent", "1", "--backend", "qemu")
    d = rd.parse_daemon_text(log.read_text(), log.name)
    assert d.summary is None and d.problems == [
        f"{log.name}: policy imar cannot run here: {counters.QEMU_REFUSAL}"
    ]
    errors: list[tuple[str, str]] = []
    rows = rd.daemon_rows(tmp_path, "m", errors)
    assert errors == [(f"guest/{log.name}", d.problems[0])]
    # counted from the records: nothing was sampled or decided
    assert ("mix", "m", "daemon_samples", 0.0) in rows
    assert ("mix", "m", "daemon_decisions", 0.0) in rows


def test_a_cut_log_keeps_what_came_before(tmp_path: Path) -> None:
    lines = [
        {"type": "start", "policy": "plb", "source": "gem5"},
        {"type": "interval", "k": 1, "sample_cost_us": 40.0},
        {"type": "decision", "action": "migrate", "seq": 2},
        {"type": "interval", "k": 2, "sample_cost_us": 60.0},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + '\n{"type": "deci'
    d = rd.parse_daemon_text(text, "daemon-plb.jsonl")
    assert d.problems == ["daemon-plb.jsonl line 5: not JSON; 4 line(s) before it kept"]
    c = d.counts()
    assert (c["samples"], c["decisions"], c["sample_cost_us"]) == (3, 1, 50.0)
    assert rd.decision_summary(d).startswith(
        "plb: 3 samples (gem5; 0 refused), 1 decisions (migrate 1)"
    )


def test_refused_samples_are_counted_by_reason(tmp_path: Path) -> None:
    """The daemon's 'refused' records and its summary's counts reach the rows
    and the per-run line (daemons/numa_lb_daemon.py Daemon.refuse)."""
    lines = [
        {"type": "start", "policy": "imar", "source": "gem5"},
        {"type": "refused", "reason": "mem_inconsistent", "seq": 2},
        {"type": "interval", "k": 1, "sample_cost_us": 40.0},
        {"type": "refused", "reason": "negative_delta", "seq": 4},
        {"type": "refused", "reason": "mem_inconsistent", "seq": 5},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    d = rd.parse_daemon_text(text, "daemon-imar.jsonl")  # no summary: counted from records
    c = d.counts()
    assert (c["samples"], c["samples_refused"]) == (5, 3)
    assert c["refused"] == {"mem_inconsistent": 2, "negative_delta": 1}
    assert "(gem5; 3 refused (mem_inconsistent 2, negative_delta 1))" in rd.decision_summary(d)
    summary = {"type": "summary", "policy": "imar", "source": "gem5", "samples": 5,
               "decisions": 0, "thread_moves": 0, "interchanges": 0, "rollbacks": 0,
               "coschedules": 0, "samples_refused": 3, "actions": {},
               "refused": {"mem_inconsistent": 2, "negative_delta": 1}}  # fmt: skip
    log = tmp_path / "guest" / "daemon-imar.jsonl"
    log.parent.mkdir()
    log.write_text(text + json.dumps(summary) + "\n")
    errors: list[tuple[str, str]] = []
    rows = rd.daemon_rows(tmp_path, "m", errors)
    assert errors == [] and ("mix", "m", "daemon_samples_refused", 3.0) in rows
    d = rd.parse_daemon_text(log.read_text(), log.name)
    assert "3 refused (mem_inconsistent 2, negative_delta 1)" in rd.decision_summary(d)
    head, _ = rd.policy_table(pd.DataFrame([
        {"run_id": "r", "policy": "imar", "entity_type": "mix", "metric": m, "value": v}
        for _, _, m, v in rows]))  # fmt: skip
    assert "samples refused" in head


def test_policy_table_sets_daemons_beside_kernel_policies() -> None:
    rows = []
    for pol, rid, el, moves in (("default", "a", 2.0, None), ("excl", "b", 1.8, None),
                                ("imar", "c", 1.9, 6.0), ("imar", "d", 2.1, 8.0)):  # fmt: skip
        rows.append({"run_id": rid, "policy": pol, "entity_type": "mix", "metric": "elapsed_s",
                     "value": el})  # fmt: skip
        rows.append({"run_id": rid, "policy": pol, "entity_type": "mix",
                     "metric": "task_migrations", "value": 10.0})  # fmt: skip
        if moves is not None:
            rows.append({"run_id": rid, "policy": pol, "entity_type": "mix",
                         "metric": "daemon_thread_moves", "value": moves})  # fmt: skip
    head, table = rd.policy_table(pd.DataFrame(rows))
    assert head[:3] == ["policy", "kind", "runs"]
    by = {r[0]: dict(zip(head, r, strict=True)) for r in table}
    assert [r[0] for r in table] == ["default", "excl", "imar"]  # kernel ones first
    assert by["imar"]["kind"] == "daemon" and by["imar"]["runs"] == 2
    assert by["imar"]["daemon thread moves"] == 7.0 and by["imar"]["elapsed (s)"] == 2.0
    assert by["excl"]["daemon thread moves"] == "-" and by["excl"]["kind"] == "kernel"
    assert rd.daemon_section(pd.DataFrame(rows).query("policy != 'imar'")) is None
    s = rd.daemon_section(pd.DataFrame(rows))
    assert s is not None and s.items[0].rows == table


def test_bridge_record_rows(tmp_path: Path) -> None:
    (tmp_path / "m5out").mkdir()
    (tmp_path / "m5out" / rd.BRIDGE_RECORD).write_text(
        json.dumps({"host_ms_mean": 12.5, "samples_in_roi": 9, "host_s_in_roi": 0.11})
    )
    errors: list[tuple[str, str]] = []
    rows = rd.daemon_rows(tmp_path, "m", errors)
    assert rows == [
        ("mix", "m", "bridge_host_ms", 12.5),
        ("mix", "m", "bridge_samples_in_roi", 9.0),
    ]
    assert rd.bridge_host_s_in_roi(tmp_path / "m5out") == 0.11
    assert rd.bridge_host_s_in_roi(tmp_path / "nowhere") == 0.0
    (tmp_path / "m5out" / rd.BRIDGE_RECORD).write_text("{")
    rd.daemon_rows(tmp_path, "m", errors)
    assert errors and errors[0][0] == "m5out/counter_bridge.json"


def test_sim_speed_leaves_the_bridge_out() -> None:
    """On a real run's ROI dump: the bridge's host seconds in the ROI are not
    simulation time."""
    from analysis.results import gem5stats, metrics  # noqa: PLC0415

    run = ROOT / "tests" / "fixtures" / "gem5-run"
    import lzma  # noqa: PLC0415

    dumps = gem5stats.parse_stats_text(lzma.open(run / "m5out" / "stats.txt.xz", "rt").read())
    roi = gem5stats.roi_dump(dumps, gem5stats.roi_dump_index(run / "m5out")).values

    def speed(b: float) -> float:
        rows = metrics.gem5_metrics(roi, None, "m", 1, b)
        return next(v for e, _, m, v in rows if e == "mix" and m == "sim_speed_ips")

    host = roi["hostSeconds"]
    assert speed(0.0) * host == pytest.approx(speed(host / 4) * host * 3 / 4)
    assert all(m in metrics.METRICS for m in ("daemon_thread_moves", "bridge_host_ms"))
