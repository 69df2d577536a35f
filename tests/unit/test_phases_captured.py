"""The phase reader on a phases.json captured from a real gem5 run
(tests/fixtures/gem5-phases/README.md)."""

import math
from pathlib import Path

from analysis.results.run_phases import phase_columns

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures/gem5-phases/restored"


def test_captured_phases_give_every_column_of_a_complete_run() -> None:
    errors: list[tuple[str, str]] = []
    cols = phase_columns(FIXTURE, float("nan"), float("nan"), errors)
    assert errors == []
    # the run reached its end mark: every phase it had is closed
    for name in ("restore", "startup", "roi", "handback", "exit"):
        assert cols[f"phase_{name}_host_s"] is not None and cols[f"phase_{name}_host_s"] >= 0
    assert cols["phase_warmup_host_s"] is None  # that job has no warm-up
    # ROI 28.475 host s over 42.475 simulated ms
    assert math.isclose(cols["roi_host_s_per_sim_ms"], 28.475 / 42.475293084, rel_tol=1e-3)
    rest = sum(cols[f"phase_{n}_host_s"] for n in ("restore", "startup", "handback", "exit"))
    assert math.isclose(cols["nonroi_host_s"], rest, rel_tol=1e-9)
