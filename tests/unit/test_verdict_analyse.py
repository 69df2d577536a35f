"""The verdict's pre-registered analysis script (findings/2026-11-28-verdict/
analyse.py) on a kept frame from real gem5 runs (the b192 finding: 9 policies,
3 repeats at f = 1.6): it refuses input that is not the planned input, and
applies the pre-registration's overrides (missing pairs, a guest failure, the
regime) to the rule's decision."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.results import verdict

ROOT = Path(__file__).resolve().parents[2]
B192 = ROOT / "findings" / "2026-11-26-finding-b192" / "frames"
_spec = importlib.util.spec_from_file_location(
    "verdict_analyse", ROOT / "findings" / "2026-11-28-verdict" / "analyse.py"
)
assert _spec is not None and _spec.loader is not None
an = importlib.util.module_from_spec(_spec)
sys.modules["verdict_analyse"] = an  # dataclasses look their module up
_spec.loader.exec_module(an)


def _runs() -> pd.DataFrame:
    return pd.read_parquet(B192 / "runs.parquet")


def _points() -> list[str]:
    return [str(p) for p in _runs()["point_id"]]


def _plan(tmp: Path, ids: list[str], failures: str = "", n: int = 3) -> an.Plan:
    """A plan of these point ids and failures.txt lines."""
    (tmp / "runs.txt").write_text("# planned\n" + "\n".join(f"{i} x" for i in ids) + "\n")
    (tmp / "failures.txt").write_text(failures)
    return an.Plan(n, ("mbplus", "stock", "imar"), "lb3-block192", tmp / "runs.txt",
                   tmp / "failures.txt")  # fmt: skip


def _frames(tmp: Path, drop: str | None = None, state: str = "failed") -> Path:
    """b192's frames, with run @drop marked @state and its metrics gone. b192
    ran 3 of its 45 runs on a second build of gem5 (f = 2.5, repeat 2): here
    every run is on the first, one block, unless a test says otherwise."""
    out = tmp / "frames"
    shutil.copytree(B192, out)
    r = _runs()
    r["gem5_sha256"] = r["gem5_sha256"].astype(object)
    r["gem5_sha256"] = r["gem5_sha256"].mode().iloc[0]
    r["state"] = r["state"].astype(object)
    if drop is not None:
        r.loc[r["run_id"] == drop, "state"] = state
        m = pd.read_parquet(B192 / "metrics.parquet")
        m[m["run_id"] != drop].to_parquet(out / "metrics.parquet")
    r.to_parquet(out / "runs.parquet")
    return out


def _excl_run(repeat: int) -> str:
    r = _runs()
    sel = (r["policy"].astype(str) == "excl") & (r["repeat"] == repeat) & (r["numa_factor"] == 1.6)
    return str(r.loc[sel, "run_id"].iloc[0])


def test_the_rule_is_overridden_by_the_regime_the_runs_did_not_reach(tmp_path: Path) -> None:
    """b192 ran 70 % idle: the rule says refuted, the regime override undecided."""
    decision, lines = an.analyse(_frames(tmp_path), _plan(tmp_path, _points()))
    assert f"rule: {verdict.REFUTED}" in "\n".join(lines)
    assert decision == an.UNDECIDED_REGIME
    assert "missing primary pairs: 0 of 3 (none)" in lines
    # b192 predates the platform measure: said so, not counted as a pass
    assert "runs with a stalled CPU (platform gate): 0 (45 done runs without the measure)" in lines
    fam = [ln for ln in lines if ln.startswith("secondary")]
    assert [ln.split(":")[0] for ln in fam] == ["secondary mbplus", "secondary stock",
                                                "secondary imar"]  # fmt: skip
    assert fam[2].endswith("no test") and "(98.33 %)" in fam[0]  # m = 3 with imar absent


def test_a_run_that_is_not_planned_refuses_the_analysis(tmp_path: Path) -> None:
    frames = _frames(tmp_path)
    with pytest.raises(an.Refused, match="1 run\\(s\\) in the frames are not of a point in"):
        an.analyse(frames, _plan(tmp_path, _points()[1:]))
    # run ids name one build's runs: the whole frame is unplanned
    with pytest.raises(an.Refused, match="45 run\\(s\\) in the frames are not of a point"):
        an.analyse(frames, _plan(tmp_path, list(_runs()["run_id"])))
    # the dry run's 16-digit run directories are not point ids
    with pytest.raises(an.Refused, match="not a point id"):
        an.analyse(frames, _plan(tmp_path, [str(i)[:16] for i in _runs()["run_id"]]))


def test_a_point_with_two_runs_refuses_the_analysis(tmp_path: Path) -> None:
    """Two runs of one point (a sweep's runs and an earlier block's copy of the
    same point): the input is not one run per point."""
    frames = _frames(tmp_path)
    r = pd.read_parquet(frames / "runs.parquet")
    twin = r.iloc[[0]].copy()
    twin["run_id"] = "0" * 64
    pd.concat([r, twin]).to_parquet(frames / "runs.parquet")
    with pytest.raises(an.Refused, match="1 point\\(s\\) have two runs"):
        an.analyse(frames, _plan(tmp_path, _points()))


def test_a_repeat_outside_the_plan_refuses_the_analysis(tmp_path: Path) -> None:
    with pytest.raises(an.Refused, match=r"repeats \[2\] are outside the planned 0..1"):
        an.analyse(_frames(tmp_path), _plan(tmp_path, _points(), n=2))


def test_no_n_no_analysis(tmp_path: Path) -> None:
    with pytest.raises(an.Refused, match="not in force"):
        an.analyse(_frames(tmp_path), _plan(tmp_path, [], n=0))


def test_a_failed_run_must_be_classified_then_counts_as_missing(tmp_path: Path) -> None:
    lost = _excl_run(1)
    frames = _frames(tmp_path, drop=lost)
    ids = _points()
    with pytest.raises(an.Refused, match="not done and not in failures.txt"):
        an.analyse(frames, _plan(tmp_path, ids))
    decision, lines = an.analyse(frames, _plan(tmp_path, ids, f"{lost} host gem5 killed\n"))
    assert (
        decision == an.UNDECIDED_MISSING and "missing primary pairs: 1 of 3 (r1: ['excl'])" in lines
    )
    decision, _ = an.analyse(frames, _plan(tmp_path, ids, f"{lost} guest a program failed\n"))
    assert decision == an.UNDECIDED_GUEST
    with pytest.raises(an.Refused, match="host\\|guest"):
        an.analyse(frames, _plan(tmp_path, ids, f"{lost} maybe\n"))


_pspec = importlib.util.spec_from_file_location(
    "verdict_plan", ROOT / "findings" / "2026-11-28-verdict" / "plan.py"
)
assert _pspec is not None and _pspec.loader is not None
plan = importlib.util.module_from_spec(_pspec)
sys.modules["verdict_plan"] = plan
_pspec.loader.exec_module(plan)


def test_the_plan_follows_rule_3_and_the_budget_rule_on_real_runs() -> None:
    """b192's 3 paired repeats as if they were the pilot: n from rule 3 with
    amendment 7 (a multiple of 3), then the arms in order while they fit."""
    x = plan.numbers(B192, mix="lb3-block192")
    s_u, n_rule, n3 = plan.repeats_needed(x.s, 3)
    assert (x.k, x.s_u, x.n_rule, x.n) == (3, s_u, n_rule, n3) and x.n % 3 == 0
    assert x.ff == "excl_ff"  # no fallback counts in b192: the tie goes to excl_ff
    total, arms = 2 * x.n * x.run_s, []
    for arm in ("excl_ff", "mbplus", "stock"):
        extra = x.n * x.run_s + (3 * x.checkpoint_s if arm == "stock" else 0)
        if total + extra > plan.BUDGET_S:
            break
        total, arms = total + extra, [*arms, arm]
    assert x.arms == tuple(arms) and x.total_s == pytest.approx(total)
    assert x.hint_faults is None and "autonuma" not in x.arms


def test_a_primary_over_budget_is_cut_to_a_multiple_of_3(monkeypatch: pytest.MonkeyPatch) -> None:
    full = plan.numbers(B192, mix="lb3-block192")
    monkeypatch.setattr(plan, "repeats_needed", lambda s, k: (3 * s, 20, 21))  # a wide pilot
    monkeypatch.setattr(plan, "BUDGET_S", 2 * 8 * full.run_s)  # room for 8 pairs
    x = plan.numbers(B192, mix="lb3-block192")
    assert (x.n_rule, x.n, x.arms) == (20, 6, ())  # 8 pairs fit: cut to 6, a multiple of 3
    monkeypatch.setattr(plan, "BUDGET_S", 2 * 4 * full.run_s)  # room for 4: the floor, 6
    assert plan.numbers(B192, mix="lb3-block192").n == plan.MIN_N


def test_a_pilot_frame_without_the_mix_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert plan.main([str(B192)]) == 1  # the default mix, verdict-h, is not in b192
    assert "no program times of both default and excl on verdict-h at f = 1.6" in (
        capsys.readouterr().err
    )


def test_a_pilot_with_fewer_than_3_pairs_gives_no_plan(capsys: pytest.CaptureFixture[str]) -> None:
    stage_a6 = ROOT / "findings" / "2026-11-28-verdict-pilot" / "amendment6" / "frames"
    assert plan.main([str(stage_a6)]) == 1
    assert "rule 3 needs at least 3 paired pilot repeats, got 1" in capsys.readouterr().err


def test_a_repeat_group_whose_runs_span_two_gem5_binaries_refuses_the_analysis(
    tmp_path: Path,
) -> None:
    """Pairs never span blocks (PREREGISTRATION.md section 6: a machine
    replaced mid-sweep rebuilds gem5, whose runs are a new block), nor does a
    cycle of the boot checkpoints; b192 as it was kept (3 runs at f = 2.5 r2
    on a second build) is refused the same way."""
    frames = _frames(tmp_path)
    r = pd.read_parquet(frames / "runs.parquet")
    r.loc[r["run_id"] == _excl_run(1), "gem5_sha256"] = "f" * 64
    r.to_parquet(frames / "runs.parquet")
    with pytest.raises(an.Refused, match="repeat group 0 \\(repeats 0-2\\) of lb3-block192 "
                       "f=1.6 spans 2 gem5 binaries"):  # fmt: skip
        an.analyse(frames, _plan(tmp_path, _points()))
    shutil.copy(B192 / "runs.parquet", frames / "runs.parquet")
    with pytest.raises(an.Refused, match="of lb3-block192 f=2.5 spans 2 gem5 binaries"):
        an.analyse(frames, _plan(tmp_path, _points()))
    r.loc[r["run_id"] == _excl_run(1), "gem5_sha256"] = None
    r.to_parquet(frames / "runs.parquet")
    with pytest.raises(an.Refused, match="1 run\\(s\\) without a recorded gem5 binary"):
        an.analyse(frames, _plan(tmp_path, _points()))


def test_the_analysis_lists_the_repeats_of_each_block(tmp_path: Path) -> None:
    _, lines = an.analyse(_frames(tmp_path), _plan(tmp_path, _points()))
    sha = str(_runs()["gem5_sha256"].mode().iloc[0])
    assert f"repeats per block (gem5 binary): {sha[:16]}: r0, r1, r2" in lines


def test_a_guest_failure_of_an_earlier_block_still_overrides(tmp_path: Path) -> None:
    """A repeat group run again whole in a new block leaves the earlier block's
    runs outside the analysis; a primary run that failed in the guest there
    still makes the decision undecided, and must be classified."""
    frames = _frames(tmp_path)
    earlier = tmp_path / "all"
    shutil.copytree(frames, earlier)
    r = pd.read_parquet(frames / "runs.parquet")
    old = r[r["run_id"] == _excl_run(1)].copy()
    old["run_id"], old["state"], old["gem5_sha256"] = "e" * 64, "failed", "c" * 64
    pd.concat([r, old]).to_parquet(earlier / "runs.parquet")
    with pytest.raises(an.Refused, match="1 run\\(s\\) not done and not in failures.txt: eeee"):
        an.analyse(frames, _plan(tmp_path, _points()), all_frames=earlier)
    decision, lines = an.analyse(frames, _plan(tmp_path, _points(), f"{'e' * 64} guest x\n"),
                                 all_frames=earlier)  # fmt: skip
    assert decision == an.UNDECIDED_GUEST
    assert any(ln.startswith("runs of earlier blocks outside the analysis") for ln in lines)
    decision, _ = an.analyse(frames, _plan(tmp_path, _points(), f"{'e' * 64} host x\n"),
                             all_frames=earlier)  # fmt: skip
    assert decision == an.UNDECIDED_REGIME  # b192's own decision: the host failure is moot


def test_the_plan_refuses_a_pilot_with_two_runs_of_a_point_or_a_group_on_two_builds(
    tmp_path: Path,
) -> None:
    """Stage B6's frames must hold one run per point and each repeat group on
    one gem5 binary (PLAN.md amendment 8), or rules 3-5 would average blocks."""
    frames = _frames(tmp_path)
    r = pd.read_parquet(frames / "runs.parquet")
    twin = r.iloc[[0]].copy()
    twin["run_id"] = "0" * 64
    pd.concat([r, twin]).to_parquet(frames / "runs.parquet")
    with pytest.raises(ValueError, match="1 point\\(s\\) of lb3-block192 have two runs"):
        plan.numbers(frames, mix="lb3-block192")
    r.loc[r["run_id"] == _excl_run(1), "gem5_sha256"] = "f" * 64
    r.to_parquet(frames / "runs.parquet")
    with pytest.raises(ValueError, match="spans 2 gem5 binaries"):
        plan.numbers(frames, mix="lb3-block192")


def test_two_blocks_add_a_stratified_sensitivity_line(tmp_path: Path) -> None:
    """With repeats on two builds, the interval from the pooled within-block
    SD on n - B df is printed beside the primary one (same mean)."""
    frames = _frames(tmp_path)
    r = pd.read_parquet(frames / "runs.parquet")
    r.loc[r["repeat"] == 2, "gem5_sha256"] = "f" * 64  # a group spans builds: refused...
    r.to_parquet(frames / "runs.parquet")
    with pytest.raises(an.Refused, match="spans 2 gem5 binaries"):
        an.analyse(frames, _plan(tmp_path, _points()))
    one = an.analyse(_frames(tmp_path / "one"), _plan(tmp_path, _points()))[1]
    assert not [ln for ln in one if ln.startswith("sensitivity (stratified")]
    c = verdict.Contrast.__new__(verdict.Contrast)
    object.__setattr__(c, "per_repeat", {0: 0.01, 1: 0.03, 3: -0.02, 4: 0.0})
    line = an.stratified(c, {"a" * 64: [0, 1], "b" * 64: [3, 4]})
    assert line is not None and line.startswith("sensitivity (stratified by block, 2 df): +0.50 %")
    assert "aaaaaaaaaaaaaaaa: +2.02 % (n=2), bbbbbbbbbbbbbbbb: -1.00 % (n=2)" in line
    assert an.stratified(c, {"a" * 64: [0, 1, 3, 4]}) is None
