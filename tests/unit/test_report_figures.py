"""Issue 42: figures, sections and tables that fit the runs they show.

Inputs are real: tests/fixtures/sweep-quick-vmstat (the quick preset, QEMU, one
repeat), tests/fixtures/sweep-quick (the same with two repeats) and the frames
kept in findings/2026-11-26-finding-b192 (gem5, one thread count, three NUMA
factors, three repeats).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis.results import finding, plots
from analysis.results.forest import Contrast, forest_figure, forest_frame
from analysis.results.frames import build_frames, read_frames
from analysis.results.report import write_report, write_report_from_frames

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "tests" / "fixtures" / "sweep-quick-vmstat"  # one repeat
QUICK2 = ROOT / "tests" / "fixtures" / "sweep-quick"  # two repeats
B192 = ROOT / "findings" / "2026-11-26-finding-b192" / "frames"


def _mix(metrics: pd.DataFrame) -> pd.DataFrame:
    return metrics[metrics["entity_type"] == "mix"]


def _section(md: str, title: str) -> str:
    part = md.split("\n## " + title, 1)
    assert len(part) == 2, f"no section {title!r}"
    return part[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("quick")
    write_report([QUICK], out)
    return out


@pytest.fixture(scope="module")
def b192_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("b192")
    write_report_from_frames(B192, out)
    return out


# ------------------------------------------------------------------ forest
def test_forest_numbers_are_the_paired_summary_of_finding() -> None:
    mx = _mix(read_frames(B192).metrics)
    f = forest_frame(mx, [Contrast("excl", "f=1.6")])
    ref = finding.improvement_by_factor(mx)
    assert len(f) == len(ref) == 12
    merged = f.merge(ref, on=["policy", "machine"], suffixes=("", "_ref"))
    for col in ("mean", "ci95_lo", "ci95_hi", "n"):
        assert (merged[col] - merged[f"{col}_ref"]).abs().max() < 1e-12
    assert f[f["marked"]][["policy", "machine"]].values.tolist() == [["excl", "f=1.6"]]
    # a pair by hand: excl at f=1.6, stock vs excl per repeat
    el = mx[(mx["metric"] == "elapsed_s") & ((mx["numa_factor"] - 1.6).abs() < 1e-9)]
    t = el.pivot_table(index="repeat", columns="policy", values="value")
    imp = (t["stock"] / t["excl"] - 1) * 100
    row = f[(f["policy"] == "excl") & (f["machine"] == "f=1.6")].iloc[0]
    assert row["mean"] == pytest.approx(imp.mean())
    half = 4.303 * imp.std(ddof=1) / math.sqrt(3)  # t(0.975, 2)
    assert row["ci95_hi"] - row["mean"] == pytest.approx(half)


def test_forest_with_one_pair_gives_no_interval_and_says_so() -> None:
    mx = _mix(build_frames([QUICK]).metrics)
    fig_table = forest_figure(mx, "default", "2 runs")
    assert fig_table is not None
    fig, table = fig_table
    assert fig.png.startswith(b"\x89PNG")
    assert "One pair per point: no interval" in fig.caption and "Runs: 2 runs" in fig.caption
    assert table.rows == [["excl", "f=1.6", "+5.25 %", "no interval (1 pair)", 1, "no"]]


def test_forest_marks_the_preregistered_contrast_only() -> None:
    mx = _mix(read_frames(B192).metrics)
    fig, table = forest_figure(mx, "stock", "runs", marked=[Contrast("mbplus", "f=2.5")])  # type: ignore[misc]
    marked = [r for r in table.rows if "pre-registered" in r[0]]
    assert [r[1] for r in marked] == ["f=2.5"] and marked[0][0].startswith("mbplus")
    assert "pre-registered contrast" in fig.caption
    # unmarked: no word of it
    _, plain = forest_figure(mx, "stock", "runs")  # type: ignore[misc]
    assert not any("pre-registered" in str(c) for r in plain.rows for c in r)


def test_forest_keeps_thread_counts_apart() -> None:
    mx = _mix(build_frames([QUICK2]).metrics)
    two = pd.concat([mx, mx.assign(threads=6)], ignore_index=True)
    f = forest_frame(two)
    assert sorted(f["machine"]) == ["f=1.6 t=3", "f=1.6 t=6"]
    assert set(f["n"]) == {2}  # two repeats each, never pooled into four


def test_forest_plot_draws_rows_without_intervals() -> None:
    rows = [
        {"group": "f=1.6", "label": "excl", "mean": 1.0, "lo": -1.0, "hi": 3.0, "n": 3,
         "marked": True},
        {"group": "f=1.6", "label": "mbplus", "mean": 2.0, "lo": math.nan, "hi": math.nan,
         "n": 1, "marked": False},
    ]  # fmt: skip
    assert plots.forest(rows, "improvement (%)", "t").startswith(b"\x89PNG")


# ------------------------------------------------------------------ figures in the report
def test_quick_report_has_a_forest_plot_and_no_empty_panels(quick_report: Path) -> None:
    md = (quick_report / "report.md").read_text()
    files = {p.name for p in (quick_report / "report_files").iterdir()}
    assert "fig11_forest.png" in files and "fig11.png" not in files
    assert "fig14b.png" not in files  # one repeat: no standard deviation to draw
    assert not any(f.startswith("heat_") for f in files)  # one cell
    f11 = _section(md, "Fig. 11 view as a forest plot")
    assert "Standard deviation: not drawn, no repeats" in f11
    assert "no interval (1 pair)" in f11
    assert "(sd –)" not in md
    f13 = _section(md, "Fig. 13 view")
    assert re.search(r"All zero under every policy \(not drawn\): page migrations", f13)
    assert "Fig. 14b (standard deviation per program): not drawn, no repeats." in md
    heat = _section(md, "Improvement vs NUMA factor")
    assert "needs at least 2 NUMA factors x 2 core counts" in heat
    # every figure has a caption saying what it shows and on which runs
    for cap in re.findall(r"!\[[^\]]*\]\([^)]*\)\n\n\*([^\n]*)\*", md):
        assert "Runs: " in cap, cap


def test_gem5_finding_report_fits_its_runs(b192_report: Path) -> None:
    md = (b192_report / "report.md").read_text()
    files = {p.name for p in (b192_report / "report_files").iterdir()}
    assert "fig11_forest.png" in files and "fig11.png" not in files
    assert not any(f.startswith("heat_") for f in files)  # 3 factors x 1 core count
    f11 = _section(md, "Fig. 11 view as a forest plot")
    assert "45 runs, 9 policies, 3 repeats per point" in f11
    assert "| excl | f=1.6 | -0.50 % | \\[-4.34, +3.35\\] | 3 | no |" in f11
    f13 = _section(md, "Fig. 13 view")
    assert "All zero under every policy (not drawn): migrations by active balance, page " in f13
    assert "fig14b.png" in files  # three repeats: a standard deviation
    heat = _section(md, "Improvement vs NUMA factor")
    assert "f: 1.1, 1.6, 2.5 and cores/socket: 2" in heat and "forest plot" in heat


# ------------------------------------------------------------------ sections
def test_quick_report_leads_with_counts_and_has_no_finding_section(quick_report: Path) -> None:
    md = (quick_report / "report.md").read_text()
    assert "## First finding" not in md and "Go/no-go gate" not in md
    assert "Not shown: the first-finding section" in md
    head = _section(md, "Headline")
    assert head.startswith(": what the kernel did per policy (counts)")
    # the counts come before the improvement, which says it has no interval
    assert head.index("counter (mean per run)") < head.index("Improvement = ")
    assert "one pair per policy, so no 95 % CI (it needs at least 2 repeats)" in head
    assert "mean ± 95 % CI" not in head


def test_gem5_finding_keeps_its_finding_section(b192_report: Path) -> None:
    md = (b192_report / "report.md").read_text()
    assert "## First finding" in md and "Not shown" not in md
    head = _section(md, "Headline")
    assert head.startswith(": improvement over stock") and "mean ± 95 % CI over the pairs" in head


def test_finding_section_needs_repeats_or_a_control() -> None:
    from analysis.results.sections import finding_unfilled  # noqa: PLC0415

    mx = _mix(read_frames(B192).metrics)
    assert finding_unfilled(mx) is None
    one = mx[mx["repeat"] == 0]
    assert finding_unfilled(one) == "one repeat per point, so no improvement has a 95 % interval"
    old_kernel = _mix(build_frames([QUICK2]).metrics)  # two repeats, no per-process counters
    assert "counters were not measured" in str(finding_unfilled(old_kernel))


# ------------------------------------------------------------------ tables
def test_report_md_reads_as_text(quick_report: Path, b192_report: Path) -> None:
    for rep in (quick_report, b192_report):
        md = (rep / "report.md").read_text()
        assert "&amp;" not in md and "&gt;" not in md and "&lt;" not in md
        assert "Chiang & Su" in md


def test_markdown_keeps_html_inert_without_entities() -> None:
    from analysis.results.document import md_text  # noqa: PLC0415

    assert md_text("Chiang & Su, >= 50, a < b") == "Chiang & Su, >= 50, a < b"
    assert md_text("<script>x</script>") == "&lt;script>x&lt;/script>"
    assert (
        md_text("&lt; &#60; <!-- c --> <http://x>")
        == "&amp;lt; &amp;\\#60; &lt;!-- c --> &lt;http://x>"
    )
    assert md_text("> quoted") == "\\> quoted"


def test_names_are_explained_where_they_appear(quick_report: Path, b192_report: Path) -> None:
    md = (quick_report / "report.md").read_text()
    runs = _section(md, "Runs")
    assert "Mix tiny: lft = leader_ft --threads 3 --size=16M --iters=4; pft = " in runs
    assert "leader_ft: the main thread first-touches all shared data" in runs
    assert "Mix tiny: lft = " in _section(md, "Fig. 14 view")
    md = (b192_report / "report.md").read_text()
    assert "Mix lb3-block192 (as the shipped presets define it today" in _section(md, "Runs")
    assert "lft-a = leader_ft" in _section(md, "First finding")


def test_per_run_means_fit_and_promise_only_what_runs_have(b192_report: Path) -> None:
    md = (b192_report / "report.md").read_text()
    fs = _section(md, "First finding")
    heads = [ln for ln in fs.splitlines() if ln.startswith("| policy | machine |")]
    assert all(ln.count(" | ") <= 8 for ln in heads)  # no table of 18 columns
    assert "*Per-run means: Memory and CPU (gem5)*" in fs
    assert "tasks moved across nodes by load balancing (all tasks) (lb_migrated)" in fs
    assert "What the migration counts count:" in fs


def test_qemu_per_run_means_do_not_promise_gem5_metrics() -> None:
    from analysis.results.sections import per_run_means  # noqa: PLC0415

    mx = _mix(build_frames([QUICK]).metrics)
    tables = per_run_means(mx)
    caps = [t.caption for t in tables if not isinstance(t, str)]
    assert caps and not any("Memory" in c or "IPC" in c or "MPKI" in c for c in caps)
