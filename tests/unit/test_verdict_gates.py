"""What the verdict section carries beside its result (issue 44 item 7): the
per-run gates (analysis/results/gates.py), the mechanism per policy, the
improvement per program and the fidelity caveats.

Real data only: the frames kept in findings/2026-11-28-verdict-pilot (stage A:
default and excl at 8 and 12 threads, repeat 100; amendments 2 and 3: default
alone, with the gate values PLAN.md and README.md quote) and
findings/2026-11-26-finding-b192 (9 policies, 3 repeats, before the regime
counters existed). The gates' thresholds are held to the pre-registered
pilot.py, loaded from its path (it is not a module of the project)."""

from __future__ import annotations

import importlib.util
import math
import statistics
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest
from scipy import stats

from analysis.results import gates, verdict
from analysis.results.document import Section, Table, to_html, to_markdown
from analysis.results.frames import Frames, read_frames
from analysis.results.frames import plain as _plain
from analysis.results.reference import cfg_label
from analysis.results.report import write_report_from_frames
from analysis.results.sections import (
    failing_runs_table,
    gate_table,
    mechanism_table,
    program_table,
    verdict_section,
)

ROOT = Path(__file__).resolve().parents[2]
PILOT_DIR = ROOT / "findings" / "2026-11-28-verdict-pilot"
STAGE_A = PILOT_DIR / "frames"
AMENDMENT2 = PILOT_DIR / "amendment2" / "frames"
AMENDMENT3 = PILOT_DIR / "amendment3" / "frames"
B192 = ROOT / "findings" / "2026-11-26-finding-b192" / "frames"
F = 1.6  # b192's NUMA factor with default runs: its one verdict configuration


@pytest.fixture(scope="module")
def pilot() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verdict_pilot", PILOT_DIR / "pilot.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def b192() -> Frames:
    return read_frames(B192)


@pytest.fixture(scope="module")
def stage_a() -> Frames:
    return read_frames(STAGE_A)


def _config(metrics: pd.DataFrame, cfg: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(verdict.config_cols(metrics), cfg, strict=True))


def _at_f(metrics: pd.DataFrame, g: pd.DataFrame) -> pd.Series:
    """Which runs of run_gates @g are at NUMA factor F."""
    return pd.Series([_config(metrics, c)["numa_factor"] == F for c in g["cfg"]], index=g.index)


def _labels(metrics: pd.DataFrame, g: pd.DataFrame) -> dict[tuple[Any, ...], str]:
    """Every configuration of run_gates @g, labelled as the report does."""
    return {c: cfg_label(_config(metrics, c)) for c in dict.fromkeys(g["cfg"])}


def _mix_value(metrics: pd.DataFrame, run_id: str, metric: str) -> float:
    m = metrics[(metrics["run_id"] == run_id) & (metrics["entity_type"] == "mix")]
    v = m[m["metric"] == metric]["value"]
    assert len(v) == 1, (run_id, metric)
    return float(v.iloc[0])


def _table(s: Section, start: str) -> Table:
    """The section's one table whose caption starts with @start."""
    found = [it for it in s.items if isinstance(it, Table) and it.caption.startswith(start)]
    assert len(found) == 1, start
    return found[0]


# ------------------------------------------------------------------ the gates
def test_thresholds_are_the_preregistered_ones(pilot: ModuleType) -> None:
    assert gates.REGIME == pilot.REGIME
    assert gates.REGIME == {
        "sched_runnable_per_cpu_all_running": 3.0,
        "sched_busy_fraction_all_running": 0.9,
    }
    assert (gates.XNODE, gates.MIN_XNODE) == (pilot.XNODE, pilot.MIN_XNODE)
    assert gates.LEADER == pilot.LEADER
    assert gates.PLAN_LEADER_POLICIES == pilot.LEADER_POLICIES
    # the one addition: mbplus, whose leader rules are excl's (finding.py gates it too)
    assert set(gates.LEADER_POLICIES) - set(pilot.LEADER_POLICIES) == {"mbplus"}
    assert gates.XNODE_POLICIES == ("default",)
    assert not gates.has_mechanism_gate("excl_base")  # no leader rules: no gate


def test_verdict_f_passes_the_regime_and_fails_the_mechanism() -> None:
    """Amendment 3's figures (PLAN.md): verdict-f 4.01 / 0.953 passes the
    regime gate, its 46 cross-node balancing migrations fail the mechanism
    gate (bar 50); verdict-e fails the regime on its busy fraction 0.892."""
    fr = read_frames(AMENDMENT3)
    g = gates.run_gates(fr.metrics, fr.runs)
    by_mix = {_config(fr.metrics, r.cfg)["mix"]: r for r in g.itertuples()}
    f, e = by_mix["verdict-f"], by_mix["verdict-e"]
    assert f.sched_runnable_per_cpu_all_running == pytest.approx(4.0124, abs=1e-4)
    assert f.sched_busy_fraction_all_running == pytest.approx(0.9529, abs=1e-4)
    assert f.xnode_balance == 46
    assert (f.regime_ok, f.mechanism_ok) == (True, False)
    assert e.sched_busy_fraction_all_running == pytest.approx(0.8920, abs=1e-4)
    assert e.xnode_balance == 134
    assert (e.regime_ok, e.mechanism_ok) == (False, True)


@pytest.mark.parametrize(
    "frames", [AMENDMENT2, AMENDMENT3, STAGE_A, B192], ids=lambda p: p.parent.name
)
def test_the_gates_agree_with_pilot_py_on_every_kept_run(pilot: ModuleType, frames: Path) -> None:
    fr = read_frames(frames)
    mine = gates.run_gates(fr.metrics, fr.runs).set_index("run_id")
    theirs = pilot.run_gates(_plain(fr.metrics), _plain(fr.runs))
    assert set(mine.index) == set(theirs.index)
    for run, t in theirs.iterrows():
        m = mine.loc[run]
        assert bool(m["regime_ok"]) == bool(t["regime_ok"]), run
        assert bool(m["platform_ok"]) == bool(t["platform_ok"]), run
        if t["policy"] == "default" or t["policy"] in pilot.LEADER_POLICIES:
            assert m["mechanism_ok"] is bool(t["mechanism_ok"]), run
        elif t["policy"] != "mbplus":
            assert m["mechanism_ok"] is None, run  # no mechanism gate
        for c in (*gates.REGIME, *gates.LEADER):  # pilot.py has no column for a counter absent
            assert m[c] == pytest.approx(t.get(c, math.nan), nan_ok=True), (run, c)
        assert m[gates.XNODE_BALANCE] == pytest.approx(t["xnode_balance"], nan_ok=True), run


def test_the_platform_gate_wants_no_stalled_cpu(pilot: ModuleType, b192: Frames) -> None:
    """Amendment 6: a run with a CPU halted while tasks waited on it fails,
    one with none passes, one that did not measure it fails (b192 predates
    the metric); pilot.py decides the same."""
    metrics = _plain(b192.metrics)
    ids = list(dict.fromkeys(metrics["run_id"]))[:3]
    rows = metrics[(metrics["run_id"].isin(ids[:2])) & (metrics["entity_type"] == "mix")]
    rows = rows.drop_duplicates("run_id").assign(metric=gates.PLATFORM)
    rows["value"] = [0.0, 1.0]
    with_metric = pd.concat([metrics, rows], ignore_index=True)
    g = gates.run_gates(with_metric, b192.runs).set_index("run_id")
    assert [bool(g.loc[r, "platform_ok"]) for r in ids] == [True, False, False]
    t = pilot.run_gates(with_metric, _plain(b192.runs))
    assert [bool(t.loc[r, "platform_ok"]) for r in ids] == [True, False, False]


def test_mbplus_is_gated_by_the_leader_counters(b192: Frames) -> None:
    g = gates.run_gates(b192.metrics, b192.runs)
    mb = g[(g["policy"] == "mbplus") & _at_f(b192.metrics, g)]
    assert len(mb) == 3
    for r in mb.itertuples():
        want = r.lb_taken_leader_dst > 0 and r.lb_skipped_leader_src > 0
        assert r.mechanism_ok is want
    assert sorted(mb["mechanism_ok"]) == [False, True, True]  # takes 1, 1, 0 (b192 at f = 1.6)


def test_a_run_that_did_not_finish_fails_both_gates(pilot: ModuleType, stage_a: Frames) -> None:
    """The excl verdict-b run passes the mechanism gate; marked failed (its
    metrics gone, as frames.py keeps only done runs) it fails both and is
    still listed, with its configuration from the runs frame."""
    runs = _plain(stage_a.runs)
    sel = (runs["policy"] == "excl") & (runs["mix"] == "verdict-b")
    assert sel.sum() == 1
    run_id = str(runs.loc[sel, "run_id"].iloc[0])
    before = gates.run_gates(stage_a.metrics, stage_a.runs).set_index("run_id").loc[run_id]
    assert (before["regime_ok"], before["mechanism_ok"]) == (False, True)
    runs.loc[sel, "state"] = "failed"
    metrics = stage_a.metrics[stage_a.metrics["run_id"] != run_id]
    g = gates.run_gates(metrics, runs).set_index("run_id")
    assert len(g) == 6
    r = g.loc[run_id]
    assert r["state"] == "failed" and math.isnan(r["lb_taken_leader_dst"])
    assert (r["regime_ok"], r["mechanism_ok"]) == (False, False)
    assert r["cfg"] == before["cfg"]  # the runs frame's configuration is the metrics'
    t = pilot.run_gates(_plain(metrics), runs).loc[run_id]
    assert (bool(t["regime_ok"]), bool(t["mechanism_ok"])) == (False, False)


def test_every_run_has_the_same_configuration_in_both_frames(b192: Frames) -> None:
    cols = verdict.config_cols(b192.metrics)
    runs = b192.runs.drop_duplicates("run_id")
    from_runs = dict(zip(runs["run_id"].astype(str), verdict.config_keys(runs, cols), strict=True))
    g = gates.run_gates(b192.metrics)  # the metrics' configuration only
    assert len(g) == 45
    assert all(from_runs[r] == c for r, c in zip(g["run_id"], g["cfg"], strict=True))


# ------------------------------------------------------------------ the tables
def test_the_gate_table_counts_every_run_and_takes_medians(b192: Frames) -> None:
    s = verdict_section(b192.metrics, b192.runs)
    assert s is not None
    t = _table(s, "The per-run gates")
    rows = {r[1]: r for r in t.rows}
    assert len(rows) == 9 and {r[2] for r in t.rows} == {3}  # 27 runs, none dropped
    v = verdict.verdicts(b192.metrics)[0]
    assert sum(r[2] for r in t.rows) == v.runs == 27
    # b192 predates the regime counters: not measured, so no run passes
    assert {r[4] for r in t.rows} == {0} and {r[7] for r in t.rows} == {"–"}
    assert {r[6] for r in t.rows} == {0}  # nor the stalled-CPU count (platform gate)
    assert rows["default"][5] == 3 and rows["mbplus"][5] == 2 and rows["excl"][5] == 1
    assert rows["excl_base"][5] == "–" and rows["stock"][5] == "–"
    g = gates.run_gates(b192.metrics, b192.runs)
    at_f = _at_f(b192.metrics, g)
    excl = g[(g["policy"] == "excl") & at_f]
    xnode = [_mix_value(b192.metrics, r, "migrations_balance_xnode")
             + _mix_value(b192.metrics, r, "migrations_active_balance_xnode")
             for r in excl["run_id"]]  # fmt: skip
    assert sorted(xnode) == [14, 17, 20]
    assert rows["excl"][9] == str(int(statistics.median(xnode)))
    skips = [_mix_value(b192.metrics, r, "lb_skipped_leader_src") for r in excl["run_id"]]
    assert rows["excl"][11] == str(int(statistics.median(skips))) == "166"
    # the primary contrast still has all three repeats: gate failures drop nothing
    assert v.contrast.n == 3 and v.decision == verdict.REFUTED
    failing = _table(s, "The runs failing a gate")
    assert "27 of 27" in failing.caption and len(failing.rows) == 27
    assert (
        sum(r[5] == "regime and mechanism and platform" for r in failing.rows) == 3
    )  # excl 2, mbplus 1


def test_a_failed_run_stays_in_the_section(b192: Frames) -> None:
    """excl's repeat 0 at f = 1.6 marked failed: the verdict pairs the other
    two repeats; the gate table counts 3 excl runs, 1 not done, and lists it."""
    runs = _plain(b192.runs)
    sel = (runs["policy"] == "excl") & (runs["repeat"] == 0) & (runs["numa_factor"] == F)
    assert sel.sum() == 1
    run_id = str(runs.loc[sel, "run_id"].iloc[0])
    runs.loc[sel, "state"] = "timeout"
    metrics = b192.metrics[b192.metrics["run_id"] != run_id]
    s = verdict_section(metrics, runs)
    assert s is not None
    excl = [r for r in _table(s, "The per-run gates").rows if r[1] == "excl"]
    assert [r[2:6] for r in excl] == [[3, 1, 0, 1]]
    listed = [r for r in _table(s, "The runs failing a gate").rows if r[3] == run_id[:16]]
    assert [r[4:6] for r in listed] == [["timeout", "regime and mechanism and platform"]]


def test_the_mechanism_table_of_stage_a(stage_a: Frames) -> None:
    """One run a point: the medians are the runs' values; excl's leader rules
    turn down most passes (verdict-b 8 threads: 0.887), default's almost none."""
    g = gates.run_gates(stage_a.metrics, stage_a.runs)
    labels = _labels(stage_a.metrics, g)
    t = mechanism_table(g, labels)
    assert len(t.rows) == 6
    for r in g.itertuples():
        row = [x for x in t.rows if x[0] == labels[r.cfg] and x[1] == r.policy]
        assert len(row) == 1
        m = stage_a.metrics
        share = _mix_value(m, r.run_id, "lb_picked_none") / _mix_value(m, r.run_id, "lb_attempts")
        xnode = _mix_value(m, r.run_id, "migrations_balance_xnode") + _mix_value(
            m, r.run_id, "migrations_active_balance_xnode"
        )
        want = [1, f"{_mix_value(m, r.run_id, 'run_delay_ms_per_thread'):.1f}", f"{share:.3f}",
                f"{_mix_value(m, r.run_id, 'remote_ratio'):.3f}", str(int(xnode)),
                str(int(_mix_value(m, r.run_id, "cross_node_migrations")))]  # fmt: skip
        assert row[0][2:] == want
    excl_b = [x for x in t.rows if x[1] == "excl" and "verdict-b" in x[0]]
    assert [x[3:] for x in excl_b] == [["16.2", "0.887", "0.305", "32", "34"]]
    gt = gate_table(g, labels)
    assert [r[4] for r in gt.rows] == [0] * 6  # stage A failed the regime gate (amendment 1)
    assert [r[5] for r in gt.rows] == [1] * 6
    assert "runs failing a gate: 6 of 6" in failing_runs_table(g, labels).caption


def test_the_mechanism_medians_over_repeats(b192: Frames) -> None:
    s = verdict_section(b192.metrics, b192.runs)
    assert s is not None
    t = _table(s, "The mechanism per policy")
    assert "medians over the done runs" in t.caption
    g = gates.run_gates(b192.metrics, b192.runs)
    at_f = _at_f(b192.metrics, g)
    for pol in ("default", "excl", "mbplus"):
        ids = g[(g["policy"] == pol) & at_f]["run_id"]
        shares = [_mix_value(b192.metrics, r, "lb_picked_none")
                  / _mix_value(b192.metrics, r, "lb_attempts") for r in ids]  # fmt: skip
        remote = [_mix_value(b192.metrics, r, "remote_ratio") for r in ids]
        row = [r for r in t.rows if r[1] == pol][0]
        assert row[2] == 3
        assert row[4] == f"{statistics.median(shares):.3f}"
        assert row[5] == f"{statistics.median(remote):.3f}"
        assert row[3] == "–"  # run delay per thread: not measured in b192


# ------------------------------------------------------------------ per program
def test_the_improvement_per_program(b192: Frames) -> None:
    m = b192.metrics
    v = verdict.verdicts(m)[0]
    assert sorted(v.programs) == ["lft-a", "lft-b", "pft"]
    p = m[(m["entity_type"] == "program") & (m["metric"] == "elapsed_s") & (m["numa_factor"] == F)]
    t = {(str(r.policy), int(r.repeat), str(r.entity)): r.value for r in p.itertuples()}
    for prog, c in v.programs.items():
        d = [math.log(t[("default", r, prog)] / t[("excl", r, prog)]) for r in (0, 1, 2)]
        assert list(c.per_repeat.values()) == pytest.approx(d, abs=1e-12)
        lo, hi = stats.t.interval(0.95, 2, loc=statistics.fmean(d), scale=stats.sem(d))
        assert (c.mean, c.lo, c.hi) == pytest.approx((statistics.fmean(d), lo, hi))
    # every program paired in every repeat: their means average to the endpoint's
    means = statistics.fmean(c.mean for c in v.programs.values())
    assert means == pytest.approx(v.contrast.mean, abs=1e-12)
    table = program_table([("cfg", v)])
    assert table is not None
    pft = v.programs["pft"]
    want = f"[{verdict.pct(pft.lo):+.2f}, {verdict.pct(pft.hi):+.2f}]"
    assert ["cfg", "pft", 3, f"{verdict.pct(pft.mean):+.2f} %", want] in table.rows
    assert pft.hi < 0  # pft is slower under excl, beyond its interval


def test_one_repeat_gives_no_interval_per_program(stage_a: Frames) -> None:
    vs = verdict.verdicts(stage_a.metrics)
    assert len(vs) == 2 and all(v.contrast.n == 1 for v in vs)  # excl at 8 threads, a and b
    table = program_table([(str(v.config["mix"]), v) for v in vs])
    assert table is not None and len(table.rows) == 16  # 8 programs a mix
    assert {r[2] for r in table.rows} == {1} and {r[4] for r in table.rows} == {"–"}


# ------------------------------------------------------------------ in the report
def test_the_report_carries_gates_mechanism_and_caveats(tmp_path: Path) -> None:
    md = write_report_from_frames(B192, tmp_path)["md"].read_text()
    head, rest = md.split("\n## ", 1)
    assert "no shared L3" in head and "3-hop owner forwarding" in head  # backends.GEM5_CAVEAT
    sec = rest.split("## Verdict: excl against default", 1)[1].split("\n## ", 1)[0]
    assert "are not checked in this section" not in sec
    assert "a run that fails a gate stays in every contrast" in sec
    assert (
        "| gem5 4x2 f=1.6 lb3-block192 t=6 | excl | 3 | 0 | 0 | 1 | 0 | – | – | 17 | 0 | 166 |"
        in sec
    )
    assert "*The mechanism per policy: medians over the done runs" in sec
    assert "| gem5 4x2 f=1.6 lb3-block192 t=6 | pft | 3 |" in sec
    assert "stated at the head of this report" in sec and "TimingSimpleCPU" in sec


def test_the_new_tables_escape_their_inputs(b192: Frames) -> None:
    m = _plain(b192.metrics)
    evil = "<img src=x>|p"
    m.loc[(m["entity_type"] == "program") & (m["entity"] == "pft"), "entity"] = evil
    s = verdict_section(m, _plain(b192.runs))
    assert s is not None
    assert evil in [r[1] for r in _table(s, "Improvement of excl over default per program").rows]
    html = to_html([Section("t"), s])
    assert "<img src=x" not in html and "&lt;img src=x&gt;|p" in html
    md = to_markdown([Section("t"), s], "files")
    assert "<img src=x" not in md and "&lt;img src=x>\\|p" in md


def test_the_endpoint_refuses_two_runs_of_a_point(pilot: ModuleType, b192: Frames) -> None:
    """Two runs of one point (e.g. a repeat run on two gem5 builds, PLAN.md
    amendment 8) would be averaged by the pivot: refused instead."""
    m = b192.metrics
    d = pilot.endpoint(m, "lb3-block192")
    assert len(d) == 3
    one = m[(m["run_id"] == m["run_id"].iloc[0])].copy()
    one["run_id"] = "0" * 64
    with pytest.raises(ValueError, match="appear twice for one policy and repeat"):
        pilot.endpoint(pd.concat([m, one]), "lb3-block192")
