"""workloads/mix_interrupts.py on this machine's own /proc/interrupts (real
kernel output, read twice around a sleep), and the refusals of texts that are
not /proc/interrupts."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workloads"))
import mix_interrupts as mi  # noqa: E402

PROC = Path("/proc/interrupts")
pytestmark = pytest.mark.skipif(not PROC.is_file(), reason="no /proc/interrupts here")


def test_parse_reads_every_cpu_column_of_the_kernels_text() -> None:
    text = PROC.read_text()
    rows = mi.parse(text)
    ncpu = len(text.splitlines()[0].split())
    assert len(rows["LOC"]) == ncpu  # the local timer: one count per CPU
    assert all(isinstance(c, int) and c >= 0 for c in rows["LOC"])
    assert len(rows["ERR"]) == 1  # a total, not per CPU


def test_the_local_timer_moves_across_a_sleep_and_the_record_keeps_both_texts() -> None:
    before = mi.snapshot()
    time.sleep(0.05)
    first = mi.snapshot()
    time.sleep(0.05)
    after = mi.snapshot()
    rec = mi.record(before, first, after)
    assert rec["roi"]["status"] == "present" and rec["all_running"]["status"] == "present"
    assert sum(rec["roi"]["delta"]["LOC"]) > 0  # ticks happened in 0.1 s
    assert all(any(v) for v in rec["roi"]["delta"].values())  # rows that did not move left out
    assert rec["begin_raw"] == before and rec["end_raw"] == after


def test_refusals_lose_nothing() -> None:
    with pytest.raises(mi.InterruptsError, match="no CPU header"):
        mi.parse("hello\n")
    with pytest.raises(mi.InterruptsError, match="no interrupt rows"):
        mi.parse("           CPU0       CPU1\n")
    assert mi.snapshot("/nonexistent/interrupts") is None
    assert mi.record(None, None, None)["roi"] == {"status": "absent"}
    bad = mi.record("garbage", None, "garbage")
    assert bad["roi"]["status"] == "error" and bad["begin_raw"] == "garbage"
