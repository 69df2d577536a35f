"""The verdict's pre-registered analysis (PREREGISTRATION.md, section 3-6).

    python3 findings/2026-11-28-verdict/analyse.py FRAMES_DIR [--all ALL_FRAMES_DIR]

Run it from a worktree of the commit that put the pre-registration in force,
on the frames of the sweep's results directory with the runs it adopted from
earlier blocks (`python3 -m analysis.results.keep <results> <dir> --no-report`
from the freeze's worktree: one run per planned point) and nothing else. It
keeps exactly the points of ``runs.txt`` (point ids: the same on every gem5
build, points.py), refuses a frame holding any other point, a point with two
runs or a repeat group (one cycle of the 3 boot checkpoints) whose runs span
two gem5 binaries, classifies every run that is not done with
``failures.txt`` (one line per run: ``RUN_ID host|guest EVIDENCE``), in
FRAMES_DIR and in ALL_FRAMES_DIR (default: ``runs/frames`` here, the blind
keep of every block's runs, where a run that an earlier block lost with a
repeat group it did not finish still counts for the guest-failure override),
then prints the primary contrast and its decision after the pre-registered
overrides, the Welch check, the secondary family (exactly PLAN.family, Holm)
and, labelled exploratory, the per-program and per-checkpoint views.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from scipy import stats

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE.parent / "2026-11-28-verdict-pilot"))

from pilot import run_gates  # noqa: E402  (the pilot's gates, as pre-registered)

from analysis.results import verdict  # noqa: E402
from analysis.results.frames import read_plain  # noqa: E402

MISSING_MAX = 0.10  # more than this share of the planned pairs missing: undecided
GATE_FAIL_MAX = 0.20  # more than this share of default runs off the regime/mechanism: undecided
BLOCKS = 3  # boot checkpoints: repeat r restores variant r % 3

UNDECIDED_MISSING = "undecided (missing pairs)"
UNDECIDED_GUEST = "undecided (a primary run failed in the guest)"
UNDECIDED_REGIME = "undecided (the paper's regime not reached)"


@dataclass(frozen=True)
class Plan:
    """What the pre-registration fixes for the analysis."""

    n: int  # planned repeats 0..n-1
    family: tuple[str, ...]  # the secondary arms, in order
    mix: str
    runs_file: Path
    failures_file: Path


PLAN = Plan(
    n=0,  # TBD(rule 3): set by the in-force commit
    family=(),  # TBD(section 5): set by the in-force commit
    mix="verdict-h",
    runs_file=HERE / "runs.txt",
    failures_file=HERE / "failures.txt",
)


class Refused(Exception):
    """The input is not the pre-registered input: no analysis."""


ID_LEN = 16  # the dry run's listing prints run ids to 16 hex digits


def short(run_id: object) -> str:
    return str(run_id)[:ID_LEN]


def read_points(path: Path) -> list[str]:
    """The planned point ids: the first word of each non-comment line of
    runs.txt (points.py's lines: POINT_ID LABEL)."""
    ids = [ln.split()[0] for ln in path.read_text().splitlines()
           if ln.strip() and not ln.lstrip().startswith("#")]  # fmt: skip
    if len(set(ids)) != len(ids):
        raise Refused(f"{path}: a point is listed twice")
    bad = [i for i in ids if len(i) != 64]
    if bad:
        raise Refused(f"{path}: not a point id (64 hex digits): {bad[0]!r}")
    return ids


def read_failures(path: Path) -> dict[str, str]:
    """run id -> host|guest, from failures.txt (absent: none classified)."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for ln in path.read_text().splitlines():
        if not ln.strip() or ln.lstrip().startswith("#"):
            continue
        parts = ln.split(None, 2)
        if len(parts) < 3 or parts[1] not in ("host", "guest"):
            raise Refused(f"{path}: want 'RUN_ID host|guest EVIDENCE', got {ln!r}")
        out[short(parts[0])] = parts[1]
    return out


def select(
    metrics: pd.DataFrame, runs: pd.DataFrame, plan: Plan
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The planned runs of the frames, or Refused: a run of a point that is not
    planned, a point with two runs, a planned repeat outside 0..n-1."""
    planned = set(read_points(plan.runs_file))
    pid = runs["point_id"].astype(object)
    extra = sorted(set(pid.dropna().astype(str)) - planned)
    if extra or pid.isna().any():
        what = ", ".join(i[:16] for i in extra[:5]) or "runs without a point id"
        raise Refused(f"{len(extra) or int(pid.isna().sum())} run(s) in the frames are not of "
                      f"a point in {plan.runs_file.name}: {what}")  # fmt: skip
    twice = pid[pid.duplicated()].astype(str)
    if len(twice):
        raise Refused(f"{len(set(twice))} point(s) have two runs in the frames "
                      f"({', '.join(sorted(set(twice))[:3])[:60]}...): analyse one run per "
                      "point, the frames of `keep <results> <dir> --no-report`")  # fmt: skip
    bad = sorted(set(int(r) for r in runs["repeat"]) - set(range(plan.n)))
    if bad:
        raise Refused(f"repeats {bad} are outside the planned 0..{plan.n - 1}")
    return metrics[metrics["run_id"].isin(set(runs["run_id"]))], runs


def missing_pairs(runs: pd.DataFrame, plan: Plan) -> dict[int, list[str]]:
    """Per planned repeat, the primary runs (policy) that are absent or not done."""
    mine = (runs["mix"] == plan.mix) & ((runs["numa_factor"] - verdict.NUMA_FACTOR).abs() < 1e-9)
    done = runs[mine & (runs["state"] == "done")]
    have = {(str(p), int(r)) for p, r in zip(done["policy"], done["repeat"], strict=True)}
    out: dict[int, list[str]] = {}
    for r in range(plan.n):
        lost = [p for p in (verdict.BASELINE, verdict.POLICY) if (p, r) not in have]
        if lost:
            out[r] = lost
    return out


def group_blocks(runs: pd.DataFrame) -> dict[str, list[int]]:
    """The repeats of each block (gem5 binary: PREREGISTRATION.md section 6),
    or Refused: a repeat group (one configuration's repeats r with the same
    r // 3: one cycle of the boot checkpoints) whose runs ran on two binaries,
    or a run without a recorded binary, so its pairs would span blocks."""
    sha = runs["gem5_sha256"].astype(object)
    if sha.isna().any():
        raise Refused(f"{int(sha.isna().sum())} run(s) without a recorded gem5 binary: "
                      "their block is unknown")  # fmt: skip
    out: dict[str, set[int]] = {}
    rep = runs["repeat"].astype(int)
    for (mix, f, g), sub in runs.groupby([runs["mix"].astype(str), runs["numa_factor"],
                                          rep // BLOCKS]):  # fmt: skip
        kinds = sorted(set(sub["gem5_sha256"].astype(str)))
        if len(kinds) > 1:
            named = ", ".join(k[:16] for k in kinds)
            raise Refused(f"repeat group {g} (repeats {g * BLOCKS}-{g * BLOCKS + BLOCKS - 1}) "
                          f"of {mix} f={f:g} spans {len(kinds)} gem5 binaries ({named}): "
                          "pairs never span blocks")  # fmt: skip
        out.setdefault(kinds[0], set()).update(sub["repeat"].astype(int))
    return {k: sorted(v) for k, v in out.items()}


def stratified(c: verdict.Contrast, blocks: dict[str, list[int]]) -> str | None:
    """Sensitivity with more than one block (PREREGISTRATION.md section 6): the
    same mean (the repeat-weighted mean of the block means), its interval from
    the pooled within-block SD on n - B degrees of freedom; None with one block."""
    of = {r: b for b, reps in blocks.items() for r in reps}
    by: dict[str, list[float]] = {}
    for r, d in c.per_repeat.items():
        by.setdefault(of[r], []).append(d)
    n, b = len(c.per_repeat), len(by)
    if b < 2 or n - b < 1:
        return None
    ss = sum((d - sum(v) / len(v)) ** 2 for v in by.values() for d in v)
    sw = math.sqrt(ss / (n - b))
    mean = sum(c.per_repeat.values()) / n
    h = stats.t.ppf(0.975, n - b) * sw / math.sqrt(n)
    means = ", ".join(f"{k[:16]}: {verdict.pct(sum(v) / len(v)):+.2f} % (n={len(v)})"
                      for k, v in sorted(by.items()))  # fmt: skip
    return (f"sensitivity (stratified by block, {n - b} df): {verdict.pct(mean):+.2f} % "
            f"[{verdict.pct(mean - h):+.2f}, {verdict.pct(mean + h):+.2f}]; block means "
            f"{means}")  # fmt: skip


def block_view(c: verdict.Contrast, blocks: dict[str, list[int]]) -> str:
    """Exploratory: d_r's mean per boot checkpoint (a checkpoint is one block's
    boot of variant r % 3) and a one-way F test."""
    of = {r: b for b, reps in blocks.items() for r in reps}
    groups: dict[tuple[str, int], list[float]] = {}
    for r, d in c.per_repeat.items():
        groups.setdefault((of[r], r % BLOCKS), []).append(d)
    one = len({b for b, _ in groups}) == 1
    parts = [f"checkpoint {'' if one else b[:8] + '/'}{k}: {verdict.pct(sum(v) / len(v)):+.2f} % "
             f"(n={len(v)})" for (b, k), v in sorted(groups.items())]  # fmt: skip
    usable = [v for v in groups.values() if len(v) >= 2]
    if len(usable) >= 2:
        f, p = stats.f_oneway(*usable)
        parts.append(f"F = {f:.2f}, p = {p:.3g}")
    return "; ".join(parts)


def analyse(
    frames: Path, plan: Plan = PLAN, all_frames: Path | None = None
) -> tuple[str, list[str]]:
    """The decision and the lines to print; @all_frames: every block's runs."""
    if plan.n < 2:
        raise Refused("the plan has no n (the pre-registration is not in force)")
    metrics, runs = read_plain(frames)
    metrics, runs = select(metrics, runs, plan)
    every = runs if all_frames is None else read_plain(all_frames)[1]
    every = every[every["point_id"].astype(str).isin(set(read_points(plan.runs_file)))]
    fails = read_failures(plan.failures_file)
    lines: list[str] = []
    not_done = runs[runs["state"] != "done"]
    lost = every[(every["state"] != "done") & ~every["run_id"].isin(set(runs["run_id"]))]
    unclassified = sorted(set(pd.concat([not_done, lost])["run_id"].map(short)) - set(fails))
    if unclassified:
        listed = ", ".join(unclassified[:5])
        raise Refused(f"{len(unclassified)} run(s) not done and not in "
                      f"{plan.failures_file.name}: {listed}")  # fmt: skip
    planned = read_points(plan.runs_file)
    absent = len(set(planned) - set(runs["point_id"].astype(str)))
    lines.append(f"points: {len(planned)} planned, {len(runs) - len(not_done)} done, "
                 f"{len(not_done)} not done, {absent} never run")  # fmt: skip
    blocks = group_blocks(runs)
    each = [f"{k[:16]}: {', '.join(f'r{r}' for r in v)}" for k, v in sorted(blocks.items())]
    lines.append("repeats per block (gem5 binary): " + "; ".join(each))
    if len(lost):
        lines.append("runs of earlier blocks outside the analysis (a repeat group run again "
                     f"whole): {len(lost)} not done, classified in "
                     f"{plan.failures_file.name}")  # fmt: skip

    vs = [v for v in verdict.verdicts(metrics, family=plan.family)
          if v.primary and v.config.get("mix") == plan.mix]  # fmt: skip
    if len(vs) != 1:
        raise Refused(f"want one primary configuration on {plan.mix}, found {len(vs)}")
    v = vs[0]
    c = v.contrast
    decision = v.decision
    lines.append(f"primary: {verdict.POLICY} vs {verdict.BASELINE}, n = {c.n} paired repeats: "
                 f"{verdict.pct(c.mean):+.2f} % [{verdict.pct(c.lo):+.2f}, "
                 f"{verdict.pct(c.hi):+.2f}] (95 % t); rule: {v.decision}")  # fmt: skip
    lines.append("programs per repeat: " + ", ".join(f"r{r}: {k}" for r, k in
                                                     sorted(c.programs.items())))  # fmt: skip

    # overrides, in the pre-registration's order
    miss = missing_pairs(runs, plan)
    primary_ids = set(runs[runs["policy"].isin([verdict.BASELINE, verdict.POLICY])]["run_id"]
                      .map(short))  # fmt: skip
    primary_ids |= set(lost[lost["policy"].isin([verdict.BASELINE, verdict.POLICY])]["run_id"]
                       .map(short))  # fmt: skip
    guest = sorted(i for i in pd.concat([not_done, lost])["run_id"].map(short)
                   if fails.get(i) == "guest" and i in primary_ids)  # fmt: skip
    lines.append(f"missing primary pairs: {len(miss)} of {plan.n} "
                 f"({', '.join(f'r{r}: {p}' for r, p in miss.items()) or 'none'})")  # fmt: skip
    gates = run_gates(metrics, runs)
    dflt = gates[(gates["policy"] == verdict.BASELINE) & (gates["state"] == "done")]
    off = dflt[~(dflt["regime_ok"] & dflt["mechanism_ok"])]
    lines.append(f"default runs off the regime or mechanism gate: {len(off)} of {len(dflt)}")
    stalled = gates[gates["stalled_cpus"].fillna(0) > 0]
    unmeasured = int(gates.loc[gates["state"] == "done", "stalled_cpus"].isna().sum())
    note = f" ({unmeasured} done runs without the measure)" if unmeasured else ""
    lines.append(f"runs with a stalled CPU (platform gate): {len(stalled)}{note}")
    if guest:
        decision = UNDECIDED_GUEST
    elif len(miss) > MISSING_MAX * plan.n:
        decision = UNDECIDED_MISSING
    elif len(dflt) and len(off) > GATE_FAIL_MAX * len(dflt):
        decision = UNDECIDED_REGIME
    lines.append(f"DECISION: {decision}")

    strat = stratified(c, blocks)
    if strat:
        lines.append(strat)
    if v.welch is not None:
        w = v.welch
        lines.append(f"sensitivity (Welch, {w.df:.1f} df): {verdict.pct(w.mean):+.2f} % "
                     f"[{verdict.pct(w.lo):+.2f}, {verdict.pct(w.hi):+.2f}]")  # fmt: skip
    for s in v.secondary:
        claim = ("differs from default" if math.isfinite(s.p_holm) and s.p_holm < 0.05
                 else "no difference shown" if math.isfinite(s.p_holm) else "no test")  # fmt: skip
        lines.append(f"secondary {s.policy}: n = {s.n}, {verdict.pct(s.mean):+.2f} % "
                     f"[{verdict.pct(s.lo):+.2f}, {verdict.pct(s.hi):+.2f}] "
                     f"({s.level * 100:.2f} %), p = {s.p:.3g}, Holm p = {s.p_holm:.3g}: "
                     f"{claim}")  # fmt: skip
    lines.append("exploratory, per boot checkpoint: " + block_view(c, blocks))
    for prog, pc in v.programs.items():
        lines.append(f"exploratory, {prog}: {verdict.pct(pc.mean):+.2f} % "
                     f"[{verdict.pct(pc.lo):+.2f}, {verdict.pct(pc.hi):+.2f}]")  # fmt: skip
    return decision, lines


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--all"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    every = Path(argv[2]) if len(argv) == 3 else HERE / "runs" / "frames"
    try:
        _, lines = analyse(Path(argv[0]), all_frames=every if every.is_dir() else None)
    except Refused as e:
        print(f"refused: {e}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
