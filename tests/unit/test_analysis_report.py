"""Frames, cross-run metrics, the report and the benchmark tree, on real run trees.

tests/fixtures/sweep-quick is the quick preset run on QEMU (4 runs). Views that
need more configurations (heatmaps, Fig. 12, best/worst, paper comparison) are
checked on a small tree cloned from it by analysis/results/bench.py (the benchmark's
generator: real files, synthetic points and scaled elapsed times).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pandas as pd
import pytest
from qemu_check import STAT_FIELDS

from analysis.results.bench import make_tree, read_all
from analysis.results.frames import (
    JOB_OPTION_COLS,
    SPEC_COLS,
    build_frames,
    find_runs,
    read_frames,
)
from analysis.results.metrics import (
    METRICS,
    nb_scan_label,
    sched_scale_label,
    summarize,
    t975,
)
from analysis.results.reference import cfg_label
from analysis.results.report import write_report, write_report_from_frames
from analysis.results.warmup import warmup_effect
from analysis.sweep.spec import DEFAULT_WARMUP_S

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SWEEP = FIX / "sweep-quick"


def elapsed(run: Path) -> float:
    lines = (run / "guest" / "results.jsonl").read_text().splitlines()
    return json.loads(lines[-1])["elapsed_s"]


def test_frame_is_tidy_with_spec_columns() -> None:
    fr = build_frames([SWEEP])
    m = fr.metrics
    assert len(fr.runs) == 4 and set(fr.runs["state"]) == {"done"}
    assert fr.errors.empty
    for c in [*SPEC_COLS, "run_id", "entity_type", "entity", "metric", "value"]:
        assert c in m.columns
    key = ["run_id", "entity_type", "entity", "metric"]
    assert not m.duplicated(key).any()  # one row per run x entity x metric
    # the kernel's counter names, as qemu_check knows them ("migrated" is a metric of its own)
    assert set(m["metric"].astype(str)) <= set(METRICS) | {
        f"lb_{k}" for k in STAT_FIELDS if k != "migrated"
    }
    for run in find_runs([SWEEP]):
        point = json.loads((run / "spec.json").read_text())["point"]
        rid = json.loads((run / "spec.json").read_text())["run_id"]
        rows = m[m["run_id"] == rid]
        # points before POINT_SCHEMA 2 carry no numa_balancing: autonuma had it on
        point.setdefault("numa_balancing", 1 if point["policy"] == "autonuma" else 0)
        for c in JOB_OPTION_COLS:  # job options, not point fields
            point[c] = point["job_options"].get(c)
        # derived from a job option: the balancer's time scale
        point["sched_scale"] = sched_scale_label(point["job_options"].get("sched_domain"))
        point["nb_scan"] = nb_scan_label(point["job_options"].get("numa_balancing_scan"))
        # gem5's ROI CPU model; none on QEMU
        gem5 = point["backend"] == "gem5"
        point["cpu_roi"] = point["cpu"]["roi"] if gem5 else None
        for c in SPEC_COLS:
            vals = {None if pd.isna(v) else v for v in rows[c].astype(object)}
            assert vals == {point[c]}, c


def test_speedup_is_paired_by_repeat() -> None:
    fr = build_frames([SWEEP])
    m = fr.metrics
    by = {}
    for run in find_runs([SWEEP]):
        p = json.loads((run / "spec.json").read_text())["point"]
        by[(p["policy"], p["repeat"])] = elapsed(run)
    sp = m[(m["metric"] == "speedup") & (m["entity_type"] == "mix") & (m["policy"] == "excl")]
    assert len(sp) == 2
    for r in sp.itertuples():
        assert r.value == pytest.approx(by[("default", r.repeat)] / by[("excl", r.repeat)])
    imp = m[
        (m["metric"] == "improvement_pct") & (m["entity_type"] == "mix") & (m["policy"] == "excl")
    ].sort_values("repeat")
    assert list(imp["value"]) == pytest.approx(
        [(by[("default", r)] / by[("excl", r)] - 1) * 100 for r in (0, 1)]
    )
    d = m[(m["metric"] == "speedup") & (m["policy"] == "default")]
    assert (d["value"] == 1.0).all()


def test_summary_statistics_and_confidence_interval() -> None:
    vals = [1.0, 2.0, 4.0, 7.0]
    df = pd.DataFrame({"g": ["a"] * 4, "value": vals})
    s = summarize(df, ["g"]).iloc[0]
    sd = statistics.stdev(vals)
    assert s["mean"] == pytest.approx(3.5) and s["std"] == pytest.approx(sd) and s["n"] == 4
    assert s["ci95"] == pytest.approx(3.182 * sd / 2)  # t(0.975, 3) = 3.182
    assert t975(1) == 12.706 and t975(9) == 2.262 and t975(30) == 2.042
    assert 1.96 < t975(200) < 1.975 and t975(31) < t975(30)
    one = summarize(df.head(1), ["g"]).iloc[0]
    assert one["n"] == 1 and math.isnan(one["std"]) and math.isnan(one["ci95"])


def test_broken_inputs_become_error_entries(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(SWEEP, tree)
    runs = sorted((tree / "runs").iterdir())
    res = runs[0] / "guest" / "results.jsonl"
    res.write_text(res.read_text()[:3000])  # cut mid-record
    (runs[1] / "spec.json").write_text("{not json")
    (runs[2] / "guest" / "results.jsonl").unlink()
    fr = build_frames([tree])
    assert len(fr.runs) == 4
    errs = {
        (Path(d).name, s): msg
        for d, s, msg in zip(
            fr.errors["dir"], fr.errors["source"], fr.errors["message"], strict=True
        )
    }
    assert "not JSON" in errs[(runs[0].name, "guest/results.jsonl")]
    assert "unreadable" in errs[(runs[1].name, "spec.json")]
    assert errs[(runs[2].name, "guest/results.jsonl")] == "missing"
    paths = write_report([tree], tmp_path / "rep")
    assert "Input problems" in paths["md"].read_text()


def test_report_is_self_contained_and_escaped(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(SWEEP, tree)
    evil_mix = "<script>alert('mix')</script>"
    evil_prog = "lft<img src=x onerror=alert(1)>"
    for run in (tree / "runs").iterdir():
        spec = json.loads((run / "spec.json").read_text())
        spec["point"]["mix"] = evil_mix
        (run / "spec.json").write_text(json.dumps(spec))
        res = run / "guest" / "results.jsonl"
        res.write_text(res.read_text().replace('"lft"', json.dumps(evil_prog)))
    paths = write_report([tree], tmp_path / "rep", title="<b>title</b>")
    h = paths["html"].read_text()
    assert "<script" not in h and "<img src=x" not in h and "<b>title" not in h
    assert "&lt;script&gt;" in h and "&lt;img src=x onerror=alert(1)&gt;" in h
    assert not re.search(r"""(src|href)\s*=\s*['"](?!data:image/png;base64,)""", h)
    assert len(re.findall(r"src='data:image/png;base64,", h)) >= 3
    md = paths["md"].read_text()
    assert "NOT architectural" in md
    for view in (
        "Fig. 11 view",
        "Fig. 13 view",
        "Fig. 14 view",
        "Best and worst",
        "Metric definitions",
        "Paper vs ours",
    ):
        assert view in md
    back = pd.read_parquet(paths["frame"])
    assert len(back) == len(build_frames([tree]).metrics)


def test_markdown_escapes_strings_from_specs_and_runs(tmp_path: Path) -> None:
    # issue 13 item 18: report.md carried raw <script> from names (the HTML escaped them)
    tree = tmp_path / "t"
    shutil.copytree(SWEEP, tree)
    evil_mix = "<script>alert('mix')</script>|`x`"
    evil_prog = "lft<img src=x onerror=alert(1)>|[a](javascript:b)"
    runs = sorted((tree / "runs").iterdir())
    for run in runs:
        spec = json.loads((run / "spec.json").read_text())
        spec["point"]["mix"] = evil_mix
        (run / "spec.json").write_text(json.dumps(spec))
        res = run / "guest" / "results.jsonl"
        res.write_text(res.read_text().replace('"lft"', json.dumps(evil_prog)))
    st = json.loads((runs[0] / "status.json").read_text())
    st.update(state="failed", error="<script>boom</script> | `rm -rf`\n# heading")
    (runs[0] / "status.json").write_text(json.dumps(st))
    md = write_report([tree], tmp_path / "rep", title="<b>t|`</b>")["md"].read_text()
    assert "<script" not in md and "<img" not in md and "<b>" not in md
    assert "&lt;script>alert('mix')&lt;/script>\\|\\`x\\`" in md
    assert "&lt;img src=x onerror=alert(1)>\\|\\[a\\](javascript:b)" in md
    assert "&lt;script>boom&lt;/script> \\| \\`rm -rf\\`" in md
    assert "\n# heading" not in md and "\\# heading" in md
    assert md.startswith("# &lt;b>t\\|\\`&lt;/b>\n")
    for line in md.splitlines():  # every table row keeps its column count
        if line.startswith("| "):
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            assert all(c.startswith(" ") and c.endswith(" ") for c in cells), line


def test_views_on_a_cloned_tree_with_every_axis(tmp_path: Path) -> None:
    src = next(iter(find_runs([SWEEP])))
    n = 8 * 5 * 4 * 6 * 2  # policies x factors x cores x threads x 2 repeats
    make_tree(src, n, tmp_path / "t")
    assert read_all(tmp_path / "t") > 0
    paths = write_report([tmp_path / "t"], tmp_path / "rep")
    md = paths["md"].read_text()
    assert "Fig. 12 view" in md and "| threads | mb | mbplus | excl_base | excl |" in md
    assert "Improvement vs NUMA factor and cores per socket" in md
    assert "Not drawn" not in md
    assert "| f \\\\ cores/socket | 1 | 2 | 4 | 8 |" in md or "f \\ cores/socket" in md
    assert "Fig. 13 view: counters per policy at 16 threads" in md
    best = md.split("## Best and worst configuration per policy")[1]
    assert best.count("| excl |") == 1 and best.count("| autonuma |") == 1
    paper = md.split("Paper vs ours")[1].split("##")[0]
    assert "+10.7 %" in paper and "+11.1 %" in paper and "NOT comparable" in paper
    fr = build_frames([tmp_path / "t"])
    assert len(fr.runs) == n
    assert fr.runs["numa_factor"].nunique() == 5


def test_speedup_pairs_by_numa_balancing_and_autonuma_against_balancing_off() -> None:
    import pandas as pd  # noqa: PLC0415

    from analysis.results.metrics import add_speedup  # noqa: PLC0415

    rows = [
        # policy, numa_balancing, elapsed
        ("default", 0, 10.0), ("excl", 0, 8.0),
        ("default", 1, 5.0), ("excl", 1, 4.0),
        ("autonuma", 1, 5.0),
    ]  # fmt: skip
    frame = pd.DataFrame(
        [{"backend": "gem5", "sockets": 4, "cores_per_socket": 2, "numa_factor": 1.6,
          "link_latency": "58", "threads": 4, "mix": "m", "kernel_variant": "release",
          "repeat": 0, "entity_type": "mix", "entity": "m", "metric": "elapsed_s",
          "policy": p, "numa_balancing": nb, "value": v} for p, nb, v in rows]
    )  # fmt: skip
    out = add_speedup(frame)
    sp = out[out["metric"] == "speedup"].set_index(["policy", "numa_balancing"])["value"]
    assert sp[("excl", 0)] == 10.0 / 8.0  # against default with balancing off
    assert sp[("excl", 1)] == 5.0 / 4.0  # against default with balancing on
    assert sp[("autonuma", 1)] == 10.0 / 5.0  # what balancing adds to default
    assert sp[("default", 1)] == 1.0
    # with the unmodified kernel in the configuration, it is the baseline
    stock = frame[frame["policy"] == "default"].assign(policy="stock", value=20.0)
    out = add_speedup(pd.concat([frame, stock], ignore_index=True))
    sp = out[out["metric"] == "speedup"].set_index(["policy", "numa_balancing"])
    assert sp.loc[("excl", 0), "value"] == 20.0 / 8.0
    assert sp.loc[("default", 1), "value"] == 20.0 / 5.0
    assert set(sp["baseline"]) == {"stock"}


def test_identical_repeats_get_no_confidence_interval() -> None:
    from analysis.results.document import IDENTICAL, pm  # noqa: PLC0415

    assert pm(5.0, 0.0, True) == "+5.0 %" + IDENTICAL
    assert pm(5.0, 1.25, True) == "+5.0 % ± 1.2"
    assert pm(5.0, float("nan"), True) == "+5.0 %"  # one repeat: no CI at all


def test_the_paper_comparison_says_which_conditions_fail() -> None:
    import pandas as pd  # noqa: PLC0415

    from analysis.results.sections import PAPER_CONDITIONS, comparability  # noqa: PLC0415

    fr = build_frames([SWEEP])  # a real qemu sweep: synthetic programs, 1 repeat
    m = fr.metrics
    imp = m[(m["metric"] == "improvement_pct") & (m["entity_type"] == "mix")]
    failed = comparability(imp[imp["policy"] == "excl"], fr.runs)
    assert PAPER_CONDITIONS[0] in failed and PAPER_CONDITIONS[3] in failed
    assert PAPER_CONDITIONS[2] in failed  # no stock baseline yet
    # a run set meeting every condition is comparable
    good = pd.DataFrame({
        "run_id": ["a", "b", "c"], "backend": "gem5", "numa_factor": 1.6, "baseline": "stock",
        "numa_balancing": 1, "repeat": [0, 1, 2], "value": [9.0, 11.0, 12.5],
    })  # fmt: skip
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "program_kinds": "parsec"})
    assert comparability(good, runs) == []
    same = good.assign(value=10.0)  # identical repeats
    assert comparability(same, runs) == [PAPER_CONDITIONS[5]]
    mixed = runs.assign(program_kinds=["parsec", "parsec,workload", "parsec"])
    assert comparability(good, mixed) == [PAPER_CONDITIONS[3]]


def test_warmups_stay_apart_and_the_report_compares_them(tmp_path: Path) -> None:
    """Two runs of one point differing only in job.warmup_s are not averaged:
    the frame carries warmup_s, and the report's warm-up table shows each
    run's own elapsed time and the change against the longest warm-up."""
    tree = tmp_path / "sweep"
    shutil.copytree(SWEEP, tree)
    runs = {}
    for run in find_runs([tree]):
        spec = json.loads((run / "spec.json").read_text())
        runs[(spec["point"]["policy"], spec["point"]["repeat"])] = run
    cold = runs[("default", 1)]
    # the fixture predates job.warmup_s (qemu has none): give the two default runs one each
    for run, w in ((cold, 0), (runs[("default", 0)], 0.01)):
        spec = json.loads((run / "spec.json").read_text())
        spec["point"]["job_options"]["warmup_s"] = w
        (run / "spec.json").write_text(json.dumps(spec))
    fr = build_frames([tree])
    el = fr.metrics[(fr.metrics["metric"] == "elapsed_s") & (fr.metrics["entity_type"] == "mix")]
    assert sorted(el[el["policy"] == "default"]["warmup_s"]) == [0.0, 0.01]
    rows = warmup_effect(fr.metrics[fr.metrics["entity_type"] == "mix"])
    assert [(r.point["policy"], r.warmup_s, r.runs) for r in rows] == [
        ("default", 0.0, 1),
        ("default", 0.01, 1),
    ]
    e0, e1 = elapsed(cold), elapsed(runs[("default", 0)])
    assert rows[0].means["elapsed_s"] == pytest.approx(e0)
    assert rows[0].change_pct["elapsed_s"] == pytest.approx((e0 / e1 - 1) * 100)
    assert rows[1].change_pct["elapsed_s"] == 0
    md = write_report([tree], tmp_path / "rep")["md"].read_text()
    assert "## Warm-up effect" in md
    assert re.search(r" default \| 0\.000 \| 1 \| [0-9.]+ \(-?[0-9.]+ %\)", md), md
    # a label names a warm-up only when it is not the default
    point = {"backend": "gem5", "sockets": 4, "cores_per_socket": 2, "numa_factor": 1.6}
    assert "warm-up 0 s" in cfg_label({**point, "warmup_s": 0.0})
    assert "warm-up" not in cfg_label({**point, "warmup_s": DEFAULT_WARMUP_S})
    # the same tree without the change has no warm-up table
    md2 = write_report([SWEEP], tmp_path / "rep2")["md"].read_text()
    assert "Warm-up effect" not in md2


def test_frames_kept_before_a_spec_column_still_report(tmp_path: Path) -> None:
    fr = build_frames([SWEEP])
    old = tmp_path / "frames"
    old.mkdir()
    gone = ["warmup_s", "nb_scan"]
    fr.metrics.drop(columns=gone).to_parquet(old / "metrics.parquet", index=False)
    fr.runs.drop(columns=gone).to_parquet(old / "runs.parquet", index=False)
    fr.errors.to_parquet(old / "errors.parquet", index=False)
    back = read_frames(old)
    for c in gone:
        assert c in back.metrics.columns and back.metrics[c].isna().all(), c
        assert c in back.runs.columns, c
    out = write_report_from_frames(old, tmp_path / "rep")
    assert "Warm-up effect" not in out["md"].read_text()


def test_runs_with_scaled_numa_scan_are_a_column_of_their_own(tmp_path: Path) -> None:
    """job option numa_balancing_scan -> the nb_scan column (a label, None when
    unset); a run with it never pairs with, or averages into, one without."""
    tree = tmp_path / "sweep"
    shutil.copytree(SWEEP, tree)
    scan = {"scan_delay_ms": 10, "scan_period_min_ms": 10, "scan_period_max_ms": 100}
    for run in find_runs([tree]):
        spec = json.loads((run / "spec.json").read_text())
        pt = spec["point"]
        if pt["policy"] == "excl" and pt["repeat"] == 1:
            pt["job_options"]["numa_balancing_scan"] = scan
            (run / "spec.json").write_text(json.dumps(spec))
            scaled = spec["run_id"]
    m = build_frames([tree]).metrics
    lab = {r: x for r, x in zip(m["run_id"], m["nb_scan"].astype(object), strict=True)}
    assert lab[scaled] == "delay=10ms period=10-100ms"
    assert all(pd.isna(x) for r, x in lab.items() if r != scaled)
    sp = m[(m["metric"] == "speedup") & (m["entity_type"] == "mix") & (m["policy"] == "excl")]
    assert list(sp["repeat"]) == [0]  # excl r1 has no default partner at its scan setting


def test_the_baseline_is_named_from_speedup_rows_too() -> None:
    """Fig. 14c is titled from the program-level speedup rows. Found
    2026-11-25: with no improvement rows among them the title said "speedup
    over default" while the numbers were over stock."""
    from analysis.results.reference import baseline_name

    sp = pd.DataFrame({"metric": ["speedup"] * 2, "baseline": ["stock", "stock"]})
    assert baseline_name(sp) == "stock"
    both = pd.DataFrame({"metric": ["speedup", "improvement_pct"], "baseline": ["x", "stock"]})
    assert baseline_name(both) == "stock"
    assert baseline_name(pd.DataFrame({"metric": ["speedup"]})) == "default"
