"""`./run_all.py bench-run` (issue 38 item 7): its refusals, the point it builds
from a real run directory, and its per-phase table.

gem5 is not run here (the benchmark itself is for the lead, with two builds);
the table is checked on phases.json files written by the real writer with
replayed clocks (CONSTRUCTED timelines, not captured from gem5).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "configs"))

from numa_lb.phases import END, PhaseClock  # noqa: E402

from analysis.results import run_bench  # noqa: E402
from analysis.results.run_phases import phase_columns  # noqa: E402

RUN = ROOT / "tests" / "fixtures" / "gem5-run-4x2"  # a real run directory of a sweep
TRUE = shutil.which("true")  # an executable file; never run by these tests


EMPTY_CACHE = Path(tempfile.mkdtemp(prefix="numa-lb-empty-cache-"))


def _bench(*args: str, env_gem5: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GEM5", "GEM5_VARIANT")}
    # an empty cache: no cached gem5 build stands in for a missing one
    env["NUMA_LB_CACHE"] = str(EMPTY_CACHE)
    if env_gem5 is not None:
        env["GEM5"] = env_gem5
    cmd = [sys.executable, str(ROOT / "run_all.py"), "bench-run", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def _run_dir(tmp: Path, with_inputs: bool = True) -> tuple[Path, Path]:
    """A copy of the fixture run dir whose command's kernel, image and checkpoint
    exist here (empty files stand in for them: bench-run only checks they exist)."""
    run = tmp / "run"
    shutil.copytree(RUN, run)
    cmd = json.loads((run / "logs" / "gem5.cmd.json").read_text())
    cpt = tmp / "cpt"
    if with_inputs:
        cpt.mkdir()
        (cpt / "m5.cpt").write_text("[root.globals]\ncurTick=775898569593\n")
        for flag in ("--kernel", "--disk-image"):
            i = cmd.index(flag) + 1
            cmd[i] = str(tmp / Path(cmd[i]).name)
            Path(cmd[i]).write_text("")
    cmd[cmd.index("--restore-checkpoint") + 1] = str(cpt)
    (run / "logs" / "gem5.cmd.json").write_text(json.dumps(cmd))
    return run, cpt


def _refusal(p: subprocess.CompletedProcess[str], want: str) -> None:
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench-run: ") and want in lines[0], p.stderr
    assert p.stdout == ""


def test_refuses_without_gem5() -> None:
    _refusal(_bench("--from", str(RUN)), "needs gem5: --old GEM5, $GEM5 or a cached build")
    _refusal(_bench("--from", str(RUN), "--old", TRUE), "needs gem5: --new GEM5, $GEM5 or a cached")


def test_refuses_a_gem5_that_is_not_an_executable_file(tmp_path: Path) -> None:
    plain = tmp_path / "gem5.opt"
    plain.write_text("")
    _refusal(_bench("--from", str(RUN), "--old", str(plain), "--new", TRUE), "not an executable")
    _refusal(_bench("--from", str(RUN), env_gem5=str(tmp_path)), "not an executable")


def test_refuses_a_missing_checkpoint(tmp_path: Path) -> None:
    run, cpt = _run_dir(tmp_path, with_inputs=False)
    _refusal(_bench("--from", str(run), env_gem5=TRUE), f"checkpoint {cpt}: no m5.cpt")
    _refusal(_bench("--from", str(run), "--checkpoint", str(tmp_path), env_gem5=TRUE), "no m5.cpt")


def test_refuses_without_a_run_dir_or_its_inputs(tmp_path: Path) -> None:
    _refusal(_bench(env_gem5=TRUE), "needs --from RUN_DIR")
    _refusal(_bench("--from", str(tmp_path), env_gem5=TRUE), "no logs/gem5.cmd.json")
    # the fixture's kernel lives on the machine that ran it
    run, cpt = _run_dir(tmp_path)
    cmd = json.loads((run / "logs" / "gem5.cmd.json").read_text())
    cmd[cmd.index("--kernel") + 1] = "/nonexistent/vmlinux"
    (run / "logs" / "gem5.cmd.json").write_text(json.dumps(cmd))
    _refusal(_bench("--from", str(run), env_gem5=TRUE), "--kernel /nonexistent/vmlinux")
    with pytest.raises(run_bench.Refused, match="--new-args"):
        run_bench.variants(TRUE, TRUE, "", "--cpu-post-roi 'atomic")


def test_the_point_is_the_run_dirs_command_on_the_given_checkpoint(tmp_path: Path) -> None:
    run, cpt = _run_dir(tmp_path)
    args, got = run_bench.point_args(run, None)
    original = json.loads((RUN / "logs" / "gem5.cmd.json").read_text())[3:]
    assert got == cpt
    assert args[args.index("--job") + 1] == str(run / "job.json")
    assert args[args.index("--restore-checkpoint") + 1] == str(cpt)

    # every other argument as the sweep ran it
    def others(a: list[str]) -> list[str]:
        changed = {"--job", "--restore-checkpoint", "--kernel", "--disk-image"}
        return [x for i, x in enumerate(a) if x not in changed and a[i - 1] not in changed]

    assert others(args) == others(original) and len(args) == len(original)
    other = tmp_path / "other"
    other.mkdir()
    (other / "m5.cpt").write_text("")
    args, got = run_bench.point_args(run, other)
    assert got == other and args[args.index("--restore-checkpoint") + 1] == str(other)
    assert args.count("--restore-checkpoint") == 1
    old, new = run_bench.variants(TRUE, TRUE, "", "--cpu-post-roi atomic")
    assert (old.extra, new.extra) == ([], ["--cpu-post-roi", "atomic"])


def _phases(outdir: Path, host: list[float], ticks: list[int]) -> None:
    """A CONSTRUCTED phases.json: marks startup..end at these host seconds (CPU 90 %)."""
    outdir.mkdir(parents=True)
    h, c, t = [0.0, *host], [0.9 * x for x in host], list(ticks)
    clock = PhaseClock(outdir, tick=lambda: t.pop(0), host=lambda: h.pop(0),
                       cpu=lambda: c.pop(0), process_age=lambda: 0.0)  # fmt: skip
    for name in ("startup", "warmup", "roi", "handback", "exit", END):
        clock.mark(name)


def test_the_table_gives_each_phase_and_new_over_old(tmp_path: Path) -> None:
    ticks = [0, 10**9, 2 * 10**9, 12 * 10**9, 13 * 10**9, 13 * 10**9]  # ROI: 10 simulated ms
    _phases(tmp_path / "old", [40, 1400, 1490, 1760, 2150, 2151], ticks)
    _phases(tmp_path / "new", [20, 700, 745, 880, 1075, 1076], ticks)  # twice as fast
    rows = {}
    for v, wall in (("old", 2151.5), ("new", 1076.5)):
        rows[v] = {"gem5_host_s": wall, "gem5_cpu_s": 0.9 * wall, "roi_sim_ms": 10.0}
        rows[v].update(phase_columns(tmp_path / v, wall, 0.9 * wall, []))
    table = {w: (a, b, r) for w, a, b, r in run_bench.table(rows["old"], rows["new"])}
    assert table["phase restore"] == pytest.approx((40, 20, 0.5))
    assert table["phase roi"] == pytest.approx((270, 135, 0.5))
    assert table["phase handback"] == pytest.approx((390, 195, 0.5))
    assert table["phase exit"] == pytest.approx((1, 1, 1.0))
    assert table["ROI host s per simulated ms"] == pytest.approx((27.0, 13.5, 0.5))
    assert table["outside the ROI (phases)"] == pytest.approx((2151 - 270, 1076 - 135, 941 / 1881))
    assert table["ROI simulated ms"] == pytest.approx((10, 10, 1.0))
    # a run without phases (or a failed one): unknown, never a ratio of nothing
    rows["new"] = {"gem5_host_s": 5.0, "phase_roi_host_s": None}
    table = {w: (a, b, r) for w, a, b, r in run_bench.table(rows["old"], rows["new"])}
    assert table["phase roi"] == (270, None, None)
    text = run_bench.format_table(run_bench.table(rows["old"], rows["new"]))
    assert len(text.splitlines()) == 1 + len(run_bench.TABLE_ROWS)
    assert "phase roi" in text and " -" in text
