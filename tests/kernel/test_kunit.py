"""KUnit suites of the patch series, run under UML with the kernel's kunit tool."""

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def kunit_output() -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "kernel-patches/kbuild.py"), "kunit"],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    print(proc.stdout[-5000:], proc.stderr[-3000:])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


def test_numa_lb_suite_passes(kunit_output: str) -> None:
    assert re.search(r"\[PASSED\] sched_numa_lb\b", kunit_output), kunit_output[-3000:]


@pytest.mark.parametrize(
    "case",
    [
        "numa_lb_table1_first_fit",
        "numa_lb_table1_tm",
        "numa_lb_table1_mb",
        "numa_lb_table1_bce",
        "numa_lb_bce_zero_src",
        "numa_lb_table3a_excl",
        "numa_lb_table3b_excl_base",
        "numa_lb_table3b_leader_rules",
        "numa_lb_table3b_first_member",
        "numa_lb_single_threaded",
        "numa_lb_equal_metrics",
        "numa_lb_exiting_leader",
        "numa_lb_excl_uncounted",
        "numa_lb_seen_overflow",
        "numa_lb_bce_small_loss",
        "numa_lb_excl_close_ratios",
        "numa_lb_bce_huge_counts",
        "numa_lb_score_order",
        "numa_lb_no_candidate",
        "numa_lb_null_is_first_fit",
        "numa_lb_ff_fallback",
        "numa_lb_ff_rules_first",
    ],
)
def test_case_ran_and_passed(kunit_output: str, case: str) -> None:
    assert re.search(rf"\[PASSED\] {case}\b", kunit_output), f"{case} did not pass"


def test_no_failures(kunit_output: str) -> None:
    m = re.search(r"Testing complete\. Ran (\d+) tests: passed: (\d+)", kunit_output)
    assert m, kunit_output[-2000:]
    assert m.group(1) == m.group(2)
    assert "failed:" not in kunit_output.split("Testing complete.")[-1]
