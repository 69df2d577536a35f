"""kMLB's fault cost: the fault_bench line and the ratios to stock."""

from __future__ import annotations

from analysis.results import faultbench


def test_the_line_fault_bench_prints_parses() -> None:
    # printed by kernel-patches/guest/fault_bench.c (host run, 2 threads, 0.2 s)
    m = faultbench.LINE.search("FAULTBENCH threads=2 rep=0 pages=24593 ns=203860944\n")
    assert m is not None and m.groups() == ("2", "0", "24593", "203860944")


def test_time_ratio_is_per_thread_count_against_stock() -> None:
    rows = [
        {"kernel": "stock", "threads": 8, "pages_per_s": 1000.0},
        {"kernel": "release", "threads": 8, "pages_per_s": 900.0},
        {"kernel": "release", "threads": 1, "pages_per_s": 500.0},  # no stock at 1
    ]
    got = {(r["kernel"], r["threads"]): r["time_ratio_to_stock"] for r in faultbench.ratios(rows)}
    assert got[("stock", 8)] == 1.0
    assert abs(got[("release", 8)] - 1000 / 900) < 1e-12  # slower: > 1
    assert got[("release", 1)] is None
