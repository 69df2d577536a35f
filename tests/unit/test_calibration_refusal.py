"""A gem5 sweep asking for a NUMA factor on a machine without a calibration
table is refused before anything is built, booted or submitted (issue 40 item
6): configs/numa_run.py refuses such a run itself, so without the check every
run, or the Slurm stage step's first boot, failed with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from analysis.sweep import preflight  # noqa: E402
from analysis.sweep.spec import load_spec  # noqa: E402


def spec(*overrides: str):  # noqa: ANN201
    return load_spec(preset="quick", overrides=list(overrides))


def test_a_machine_without_a_table_is_named() -> None:
    s = spec("axes.cores_per_socket=[2, 3]", "axes.numa_factor=[1.6, 2.0]")
    msg = preflight.calibration_refusal(s, "gem5")
    assert msg is not None
    assert "machine 4 x 3 (cores_per_socket=3 " in msg
    assert "4 x 2" not in msg  # 4 x 2 has its table (configs/numa_lb/calibration)
    assert "--preset calibration" in msg and "axes.link_latency" in msg


def test_what_is_not_refused() -> None:
    no_table = "axes.cores_per_socket=[3]"
    assert preflight.calibration_refusal(spec(no_table), "qemu") is None  # qemu: SLIT only
    assert preflight.calibration_refusal(spec("axes.cores_per_socket=[2]"), "gem5") is None
    by_latency = spec(no_table, "axes.numa_factor=[]", 'axes.link_latency=[60, "20ns"]')
    assert preflight.calibration_refusal(by_latency, "gem5") is None
    # the 4 x 3 points excluded: nothing of the sweep needs a 4 x 3 table
    excluded = spec(
        "axes.cores_per_socket=[2, 3]",
        "exclude=[{cores_per_socket = [3]}]",
    )
    assert preflight.calibration_refusal(excluded, "gem5") is None


def test_the_command_refuses_in_one_line_and_creates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = subprocess.run(
        [sys.executable, str(ROOT / "run_all.py"), "run", "--preset", "quick",
         "--backend", "gem5", "--set", "axes.cores_per_socket=[3]", "--out", str(out),
         "--executor", "slurm", "--dry-run"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    errors = [x for x in (p.stdout + p.stderr).splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        "error: refused: axes.numa_factor on gem5: no calibration table"
    ), p.stdout + p.stderr
    assert not out.exists()


# The shipped presets that ask gem5 for a factor on a machine without a table
# (README, "Calibration tables and presets"). Exact: a new table must take its
# preset off this list, and a new preset must not join it unnoticed.
REFUSED_ON_GEM5 = {"paper-8node", "sensitivity"}


def test_which_shipped_presets_lack_a_table_on_gem5() -> None:
    from analysis.sweep.spec import preset_names  # noqa: PLC0415

    refused = {
        n for n in preset_names() if preflight.calibration_refusal(load_spec(preset=n), "gem5")
    }
    assert refused == REFUSED_ON_GEM5
