"""Host cost of a sweep: per run, outside the ROI, per shared checkpoint boot."""

from __future__ import annotations

import pandas as pd

from analysis.results import run_cost


def _runs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "d"],
            "state": ["done", "done", "done", "failed"],
            "duration_s": [1000.0, 400.0, 500.0, 60.0],
            "gem5_host_s": [390.0, 380.0, 480.0, None],
            # a built the checkpoint (its wall time holds the boot); b reuses it
            "checkpoint_key": ["k1", "k1", "k2", None],
            "checkpoint_host_s": [600.0, 600.0, 700.0, None],
        }
    )


def _mx() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "a"],
            "metric": ["roi_host_s", "roi_host_s", "roi_host_s", "sim_speed_ips"],
            "value": [300.0, 280.0, 400.0, 250e3],
        }
    )


def test_the_summary_splits_a_run_and_counts_each_checkpoint_once() -> None:
    rows = {r.what: r for r in run_cost.summary(_runs(), _mx())}
    wall = rows["run wall time (worker)"]
    assert (wall.n, wall.median, wall.max, wall.total) == (3, 500.0, 1000.0, 1900.0)
    outside = rows["outside the ROI (restore, job, warm-up, hand back)"]
    assert (outside.n, outside.median, outside.total) == (3, 90.0, 270.0)
    boots = rows["boot checkpoint (shared, once per key)"]
    assert (boots.n, boots.total) == (2, 1300.0)  # k1 once, not twice
    assert run_cost.sim_speed(_mx()).median == 250e3
    assert run_cost.sweep_host_hours(_runs()) == (1000 + 400 + 500 + 60) / 3600


def test_nothing_known_is_no_table() -> None:
    assert run_cost.summary(pd.DataFrame(), pd.DataFrame()) == []
    bare = pd.DataFrame({"run_id": ["a"], "state": ["failed"], "duration_s": [float("nan")]})
    assert run_cost.summary(bare, pd.DataFrame(columns=["run_id", "metric", "value"])) == []


def test_cpu_time_rows_appear_where_runs_recorded_it() -> None:
    runs = _runs().assign(gem5_cpu_s=[200.0, 380.0, None, None],
                          checkpoint_cpu_s=[590.0, 590.0, None, None])  # fmt: skip
    rows = {r.what: r for r in run_cost.summary(runs, _mx())}
    cpu = rows["gem5 process CPU time (user + system)"]
    assert (cpu.n, cpu.total) == (2, 580.0)  # c predates the record: left out, not 0
    assert rows["boot checkpoint CPU time"].n == 1
    assert "gem5 process CPU time (user + system)" not in {
        r.what for r in run_cost.summary(_runs(), _mx())
    }
