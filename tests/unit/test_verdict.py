"""The verdict (analysis/results/verdict.py) and its report section, on the
frames kept in findings/2026-11-26-finding-b192 (gem5, lb3-block192, 9
policies at f = 1.6 with 3 repeats, excl, mbplus and stock also at f = 1.1
and 2.5 without default). The expected numbers are recomputed here plainly
(loops over repeats and programs) or by scipy; the constructed inputs are that
frame with some elapsed times scaled or copied."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from analysis.results import verdict
from analysis.results.document import Figure, Section, Table, to_html, to_markdown
from analysis.results.frames import plain as _plain
from analysis.results.frames import read_frames
from analysis.results.report import write_report_from_frames
from analysis.results.sections import PAPER, verdict_section

ROOT = Path(__file__).resolve().parents[2]
B192 = ROOT / "findings" / "2026-11-26-finding-b192" / "frames"
F = 1.6  # the only NUMA factor of b192 with default runs


@pytest.fixture(scope="module")
def b192() -> pd.DataFrame:
    return read_frames(B192).metrics


def _times(m: pd.DataFrame, f: float = F) -> dict[tuple[str, int, int, str], float]:
    """(policy, numa_balancing, repeat, program) -> elapsed_s at NUMA factor @f."""
    out = {}
    for r in m.itertuples():
        if r.entity_type == "program" and r.metric == "elapsed_s" and r.numa_factor == f:
            out[(str(r.policy), int(r.numa_balancing), int(r.repeat), str(r.entity))] = r.value
    return out


def _d(m: pd.DataFrame, policy: str, nb: int = 0, base_nb: int = 0) -> dict[int, float]:
    """The endpoint per repeat, plainly: for each repeat, the mean over the
    programs both runs have of ln(t_default / t_policy)."""
    t = _times(m)
    out = {}
    for rep in sorted({k[2] for k in t}):
        logs = []
        for (p, n, r, prog), tp in t.items():
            if p == policy and n == nb and r == rep and ("default", base_nb, rep, prog) in t:
                logs.append(math.log(t[("default", base_nb, rep, prog)] / tp))
        if logs:
            out[rep] = sum(logs) / len(logs)
    return out


def _scale(m: pd.DataFrame, policy: str, factors: dict[int, float]) -> pd.DataFrame:
    """@policy's program elapsed times at f = 1.6 times factors[repeat]."""
    m = _plain(m)
    for rep, k in factors.items():
        sel = (m["policy"] == policy) & (m["entity_type"] == "program")
        sel &= (m["metric"] == "elapsed_s") & (m["repeat"] == rep) & (m["numa_factor"] == F)
        assert sel.sum() == 3  # three programs
        m.loc[sel, "value"] *= k
    return m


def _only(vs: list[verdict.Verdict]) -> verdict.Verdict:
    assert len(vs) == 1
    return vs[0]


# ------------------------------------------------------------------ endpoint
def test_the_endpoint_is_the_mean_log_ratio_over_programs_per_repeat(b192: pd.DataFrame) -> None:
    v = _only(verdict.verdicts(b192))  # default exists at f = 1.6 only
    assert v.config["numa_factor"] == F and v.config["mix"] == "lb3-block192"
    assert v.primary and v.runs == 27  # 9 policies x 3 repeats
    want = _d(b192, "excl")
    assert sorted(want) == [0, 1, 2]
    assert v.contrast.per_repeat == pytest.approx(want, abs=1e-12)
    assert v.contrast.programs == {0: 3, 1: 3, 2: 3}
    assert v.contrast.mean == pytest.approx(sum(want.values()) / 3, abs=1e-12)
    # the secondary contrasts: same endpoint; autonuma against default with balancing off
    sec = {c.policy: c for c in v.secondary}
    assert set(sec) == {"autonuma", "bce", "excl_base", "mb", "mbplus", "stock", "tm"}
    assert sec["mbplus"].per_repeat == pytest.approx(_d(b192, "mbplus"), abs=1e-12)
    assert sec["stock"].per_repeat == pytest.approx(_d(b192, "stock"), abs=1e-12)
    auto = sec["autonuma"]
    assert (auto.numa_balancing, auto.baseline_numa_balancing) == (1, 0)
    assert auto.per_repeat == pytest.approx(_d(b192, "autonuma", 1, 0), abs=1e-12)


def test_only_programs_both_runs_have_count(b192: pd.DataFrame) -> None:
    m = _plain(b192)
    gone = ((m["policy"] == "excl") & (m["repeat"] == 1) & (m["entity"] == "pft")
            & (m["numa_factor"] == F))  # fmt: skip
    m = m[~gone]
    c = _only(verdict.verdicts(m)).contrast
    assert c.programs == {0: 3, 1: 2, 2: 3}
    assert c.per_repeat == pytest.approx(_d(m, "excl"), abs=1e-12)


def test_pairs_stay_inside_their_configuration(b192: pd.DataFrame) -> None:
    """excl runs at f = 1.1 and 2.5 have no default partner; given one at 2.5
    (default's f = 1.6 runs relabelled), that configuration gets its own
    verdict, not marked as the pre-registered machine."""
    m = _plain(b192)
    base = m[(m["policy"] == "default")].assign(numa_factor=2.5, run_id=lambda d: d["run_id"] + "x")
    vs = verdict.verdicts(pd.concat([m, base], ignore_index=True))
    by_f = {v.config["numa_factor"]: v for v in vs}
    assert set(by_f) == {1.6, 2.5}
    assert by_f[1.6].primary and not by_f[2.5].primary
    assert by_f[1.6].contrast.per_repeat == pytest.approx(_d(b192, "excl"), abs=1e-12)
    t = _times(m, 2.5)
    t16 = _times(m, 1.6)
    want = {r: sum(math.log(t16[("default", 0, r, p)] / t[("excl", 0, r, p)])
                   for p in ("lft-a", "lft-b", "pft")) / 3 for r in (0, 1, 2)}  # fmt: skip
    assert by_f[2.5].contrast.per_repeat == pytest.approx(want, abs=1e-12)
    assert {c.policy for c in by_f[2.5].secondary} == {"mbplus", "stock"}


# ------------------------------------------------------------------ statistics
def test_intervals_and_p_values_agree_with_scipy(b192: pd.DataFrame) -> None:
    v = _only(verdict.verdicts(b192))
    d = list(_d(b192, "excl").values())
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=sum(d) / len(d), scale=stats.sem(d))
    c = v.contrast
    assert (c.lo, c.hi, c.level) == (pytest.approx(lo), pytest.approx(hi), 0.95)
    assert c.p == pytest.approx(stats.ttest_1samp(d, 0).pvalue)
    assert math.isnan(c.p_holm)
    # the percent form: (exp(x) - 1) x 100
    assert verdict.pct(c.lo) == pytest.approx((math.exp(lo) - 1) * 100)
    # each secondary at the Bonferroni level 1 - 0.05/m
    m = len(v.secondary)
    assert v.bonferroni_level == pytest.approx(1 - 0.05 / m)
    for s in v.secondary:
        x = list(_d(b192, s.policy, s.numa_balancing, s.baseline_numa_balancing).values())
        lo, hi = stats.t.interval(1 - 0.05 / m, len(x) - 1, loc=sum(x) / len(x),
                                  scale=stats.sem(x))  # fmt: skip
        assert (s.lo, s.hi) == (pytest.approx(lo), pytest.approx(hi))
        assert s.p == pytest.approx(stats.ttest_1samp(x, 0).pvalue)


def test_welch_interval_agrees_with_scipy(b192: pd.DataFrame) -> None:
    t = _times(b192)
    per_run: dict[str, list[float]] = {"default": [], "excl": []}
    for pol in per_run:
        for rep in (0, 1, 2):
            logs = [math.log(v) for (p, n, r, _), v in t.items() if (p, n, r) == (pol, 0, rep)]
            per_run[pol].append(sum(logs) / len(logs))
    res = stats.ttest_ind(per_run["default"], per_run["excl"], equal_var=False)
    ci = res.confidence_interval(0.95)
    w = _only(verdict.verdicts(b192)).welch
    assert w is not None and (w.n_policy, w.n_baseline) == (3, 3)
    assert (w.lo, w.hi, w.df) == (pytest.approx(ci.low), pytest.approx(ci.high),
                                  pytest.approx(res.df))  # fmt: skip


def test_holm_adjusts_in_the_order_of_the_p_values(b192: pd.DataFrame) -> None:
    # mbplus 10 % and tm 4 % faster in every repeat: two small p, the others as kept
    m = _scale(_scale(b192, "mbplus", {0: 0.9, 1: 0.9, 2: 0.9}), "tm", {0: 0.96, 1: 0.96, 2: 0.96})
    sec = _only(verdict.verdicts(m)).secondary
    ps = [c.p for c in sec]
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    assert [sec[i].policy for i in order[:2]] == ["mbplus", "tm"]
    k = len(ps)
    want, running = {}, 0.0
    for j, i in enumerate(order):  # step-down: (m - j) p_(j), never below the one before
        running = max(running, min(1.0, (k - j) * ps[i]))
        want[i] = running
    assert [c.p_holm for c in sec] == pytest.approx([want[i] for i in range(k)])
    adjusted = [sec[i].p_holm for i in order]
    assert adjusted == sorted(adjusted)
    assert all(c.p_holm >= c.p for c in sec)
    assert sec[order[0]].p_holm == pytest.approx(k * ps[order[0]])
    assert verdict.holm([0.04, math.nan, 0.01]) == pytest.approx([0.04, math.nan, 0.02],
                                                                  nan_ok=True)  # fmt: skip


# ------------------------------------------------------------------ decision
def test_the_kept_frame_is_refuted_by_the_rule(b192: pd.DataFrame) -> None:
    v = _only(verdict.verdicts(b192))
    assert v.contrast.hi < math.log(1.03)
    assert v.decision == verdict.REFUTED


def test_excl_five_percent_faster_is_confirmed(b192: pd.DataFrame) -> None:
    v = _only(verdict.verdicts(_scale(b192, "excl", {0: 0.95, 1: 0.95, 2: 0.95})))
    assert v.contrast.lo > 0
    assert v.decision == verdict.CONFIRMED
    d = _d(b192, "excl")
    assert v.contrast.mean == pytest.approx(sum(d.values()) / 3 - math.log(0.95))


def test_excl_slower_is_refuted_and_a_wide_interval_is_undecided(b192: pd.DataFrame) -> None:
    slow = _only(verdict.verdicts(_scale(b192, "excl", {0: 1.1, 1: 1.1, 2: 1.1})))
    assert slow.contrast.hi < 0 and slow.decision == verdict.REFUTED
    # repeats 6 %, 0 % and 2 % faster: an interval from below 0 to above +3 %
    wide = _only(verdict.verdicts(_scale(b192, "excl", {0: 1 / 1.06, 2: 1 / 1.02})))
    assert wide.contrast.lo < 0 < math.log(1.03) < wide.contrast.hi
    assert wide.decision == verdict.UNDECIDED


def test_a_gain_whose_interval_stays_below_three_percent_is_confirmed_smaller(
    b192: pd.DataFrame,
) -> None:
    """Both one-sided tests reject: excl is faster (lo > 0) and not by +3 %
    (hi < ln 1.03). Neither plain outcome says that, so the rule has its own."""
    d = _d(b192, "excl")
    want = {0: 0.010, 1: 0.012, 2: 0.014}
    v = _only(verdict.verdicts(_scale(b192, "excl", {r: math.exp(d[r] - want[r]) for r in d})))
    assert v.contrast.per_repeat == pytest.approx(want, abs=1e-12)
    assert 0 < v.contrast.lo and v.contrast.hi < math.log(1.03)
    assert v.decision == verdict.CONFIRMED_SMALL
    # larger gains: the upper bound passes +3 %, plain confirmed
    wide = {0: 0.022, 1: 0.025, 2: 0.028}
    v = _only(verdict.verdicts(_scale(b192, "excl", {r: math.exp(d[r] - wide[r]) for r in d})))
    assert 0 < v.contrast.lo and v.contrast.hi >= math.log(1.03)
    assert v.decision == verdict.CONFIRMED


def test_a_preregistered_family_is_exactly_the_arms_it_names(b192: pd.DataFrame) -> None:
    """Arms outside the family leave it; a named arm without runs stays, with
    no test, and counts in m (Holm and the Bonferroni level)."""
    every = _only(verdict.verdicts(b192))
    mb = next(c for c in every.secondary if c.policy == "mbplus")
    v = _only(verdict.verdicts(b192, family=["mbplus", "imar"]))
    assert [c.policy for c in v.secondary] == ["mbplus", "imar"]
    got, none = v.secondary
    assert got.per_repeat == pytest.approx(mb.per_repeat, abs=1e-12)
    assert got.p == pytest.approx(mb.p) and got.p_holm == pytest.approx(min(1.0, 2 * mb.p))
    assert got.level == pytest.approx(1 - 0.05 / 2) and v.bonferroni_level == got.level
    assert none.n == 0 and math.isnan(none.p) and math.isnan(none.p_holm)
    assert v.contrast == every.contrast and v.decision == every.decision
    assert verdict.holm([0.01, math.nan], m=2) == pytest.approx([0.02, math.nan], nan_ok=True)


def test_one_paired_repeat_gives_no_interval_and_no_verdict(b192: pd.DataFrame) -> None:
    m = b192[~((b192["policy"] == "excl") & (b192["repeat"] > 0))]
    v = _only(verdict.verdicts(m))
    assert v.contrast.n == 1 and not v.contrast.has_interval
    assert v.decision == verdict.TOO_FEW
    assert not verdict.decided([v])
    assert verdict_section(m) is None


def test_identical_repeats_give_no_interval(b192: pd.DataFrame) -> None:
    """A deterministic simulator without guest-side variation repeats itself:
    repeat 0's runs copied as repeats 1 and 2 measure no spread."""
    m = _plain(b192)
    r0 = m[m["policy"].isin(["default", "excl"]) & (m["repeat"] == 0)]
    rest = m[~(m["policy"].isin(["default", "excl"]))]
    copies = [r0.assign(repeat=r, run_id=r0["run_id"] + str(r)) for r in (1, 2)]
    v = _only(verdict.verdicts(pd.concat([rest, r0, *copies], ignore_index=True)))
    assert v.contrast.n == 3 and not v.contrast.has_interval
    assert v.decision == verdict.IDENTICAL and v.welch is None


def test_qemu_runs_are_never_the_preregistered_machine(b192: pd.DataFrame) -> None:
    m = _plain(b192).assign(backend="qemu")
    v = _only(verdict.verdicts(m))
    assert v.config["numa_factor"] == F and not v.primary
    s = verdict_section(m)
    assert s is not None
    assert any(p.startswith("WARNING") and "QEMU" in p for p in s.paras)
    assert any("every verdict below is exploratory" in p for p in s.paras)
    assert not any(p.startswith("Primary verdict") for p in s.paras)


def test_constants_are_the_papers(b192: pd.DataFrame) -> None:
    assert verdict.PAPER_PCT == PAPER[verdict.POLICY]
    assert verdict.pct(verdict.REFUTE_BELOW) == pytest.approx(3.0)
    assert (verdict.POLICY, verdict.BASELINE, verdict.NUMA_BALANCING) == ("excl", "default", 0)


def test_contrast_frame_has_a_row_per_contrast(b192: pd.DataFrame) -> None:
    vs = verdict.verdicts(b192)
    f = verdict.contrast_frame(vs)
    assert len(f) == 1 + len(vs[0].secondary)
    prim = f[f["role"] == "primary"].iloc[0]
    assert prim["policy"] == "excl" and prim["decision"] == verdict.REFUTED
    assert prim["mean_pct"] == pytest.approx(verdict.pct(vs[0].contrast.mean))


# ------------------------------------------------------------------ section
@pytest.mark.parametrize("gone", ["excl", "default"])
def test_no_section_without_excl_or_default(b192: pd.DataFrame, gone: str) -> None:
    m = b192[b192["policy"] != gone]
    assert verdict.verdicts(m) == []
    assert verdict_section(m) is None


def test_a_report_without_default_runs_has_no_verdict_section(tmp_path: Path) -> None:
    fr = read_frames(B192)
    keep = set(fr.runs.loc[fr.runs["policy"].astype(str) != "default", "run_id"])
    fr.only(keep).write(tmp_path / "frames")
    md = write_report_from_frames(tmp_path / "frames", tmp_path / "rep")["md"].read_text()
    assert "## Verdict" not in md and "## Headline" in md
    assert not (tmp_path / "rep" / "report_files" / "verdict_forest.png").exists()


def test_the_section_escapes_its_inputs(b192: pd.DataFrame) -> None:
    m = _plain(b192)
    evil = "<script>alert(1)</script>|x"
    m["mix"] = evil
    s = verdict_section(m)
    assert s is not None
    html = to_html([Section("t"), s])
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;|x" in html
    md = to_markdown([Section("t"), s], "files")
    assert "<script" not in md and "&lt;script>alert(1)&lt;/script>\\|x" in md
    for line in md.splitlines():  # every table row keeps its column count
        if line.startswith("| "):
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            assert all(c.startswith(" ") and c.endswith(" ") for c in cells), line


def test_many_configurations_draw_the_first_few(b192: pd.DataFrame) -> None:
    """Eight configurations (the f = 1.6 runs again at other thread counts, and
    once at f = 2.5): a verdict row each, the secondary table and the forest
    for six, the pre-registered machine's first."""
    m = _plain(b192)
    m = m[(m["numa_factor"] == F)]
    copies = [m.assign(threads=t, run_id=m["run_id"] + f"t{t}") for t in range(100, 106)]
    other = m.assign(numa_factor=2.5, run_id=m["run_id"] + "f")
    s = verdict_section(pd.concat([other, m, *copies], ignore_index=True))
    assert s is not None
    tables = [it for it in s.items if isinstance(it, Table)]
    assert len(tables[0].rows) == 8  # the verdict table: every configuration
    assert {r[0] for r in tables[1].rows} == {r[0] for r in tables[0].rows if "f=1.6" in r[0]} - {
        r[0] for r in tables[0].rows if "t=105" in r[0]
    }
    assert any("show 6 of the 8 configurations" in p for p in s.paras)
    fig = [it for it in s.items if isinstance(it, Figure)][0]
    assert "Runs: 162 runs in 6 configurations." in fig.caption


def test_the_b192_report_has_the_verdict_section(b192: pd.DataFrame, tmp_path: Path) -> None:
    out = write_report_from_frames(B192, tmp_path)
    md = out["md"].read_text()
    part = md.split("\n## Verdict: excl against default", 1)
    assert len(part) == 2
    sec = part[1].split("\n## ", 1)[0]
    c = _only(verdict.verdicts(b192)).contrast
    interval = f"\\[{verdict.pct(c.lo):+.2f}, {verdict.pct(c.hi):+.2f}\\]"
    assert f"REFUTED. excl against default: {verdict.pct(c.mean):+.2f} % {interval}" in sec
    assert "n = 3 paired repeats" in sec and "Welch" in sec
    assert "PREREGISTRATION.md" in sec and "exploratory" in sec
    assert "| gem5 4x2 f=1.6 lb3-block192 t=6 | mbplus | 3 |" in sec and "99.29 %" in sec
    assert (tmp_path / "report_files" / "verdict_forest.png").is_file()
    assert "Runs: 27 runs in 1 configuration." in sec
    assert "the dashed line +3 % (refuted if excl's whole interval lies below it)" in sec
    assert "<h2>Verdict: excl against default, the pre-registered contrast</h2>" in (
        out["html"].read_text()
    )


def test_the_forest_draws_the_refute_bound() -> None:
    """plots.forest's threshold: a dashed line the axis keeps in view even
    when every interval lies on the other side of 0 (a different picture)."""
    from analysis.results import plots  # noqa: PLC0415

    rows = [{"group": "g", "label": "excl", "mean": -4.0, "lo": -6.0, "hi": -2.0, "n": 5,
             "marked": True}]  # fmt: skip
    plain = plots.forest(rows, "x", "t")
    bound = plots.forest(rows, "x", "t", threshold=(3.0, "+3 %: refute bound"))
    assert plain.startswith(b"\x89PNG") and bound.startswith(b"\x89PNG")
    assert plain != bound
