"""The verdict pilot's decisions, by the rules of PLAN.md (committed before its runs).

    python3 findings/2026-11-28-verdict-pilot/pilot.py FRAMES_DIR

FRAMES_DIR holds the frames `./run_all.py report` wrote for the pilot's
results (metrics/runs .parquet). Prints per run the regime and mechanism
gates, the mix rule (1), the endpoint per repeat and its spread with the n
of rule 3, the fallback medians of rule 4 and the cost of rule 5. Policy
effects printed here are exploratory (PLAN.md).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
from scipy import stats

REGIME = {"sched_runnable_per_cpu_all_running": 3.0, "sched_busy_fraction_all_running": 0.9}
XNODE = ("migrations_balance_xnode", "migrations_active_balance_xnode")
MIN_XNODE = 50
LEADER = ("lb_taken_leader_dst", "lb_skipped_leader_src")
LEADER_POLICIES = ("excl", "excl_ff", "mbplus_ff")
STALLED = "sched_stalled_cpus_all_running"  # amendment 6's platform gate: == 0
HALF_WIDTH = math.log(1.015)  # rule 3: 95 % interval half-width <= 1.5 points
CHI2_020_4 = 1.649  # rule 3 as first written (5 repeats); amendment 7 uses the exact quantile
BLOCK = 3  # amendment 7: n a multiple of the 3 boot checkpoints (repeat r restores r % 3)


def run_gates(metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its gate values and whether it passes each gate."""
    mix = metrics[metrics["entity_type"] == "mix"]
    wide = mix.pivot_table(index="run_id", columns="metric", values="value", aggfunc="first")
    out = runs.set_index("run_id")[["policy", "mix", "threads", "repeat", "state"]].astype(object)
    out = out.join(wide.reindex(out.index), how="left")
    done = out["state"] == "done"
    regime = done.copy()
    for metric, low in REGIME.items():
        regime &= out.get(metric, pd.Series(math.nan, index=out.index)) >= low
    out["regime_ok"] = regime
    xnode = sum(out.get(m, pd.Series(math.nan, index=out.index)) for m in XNODE)
    leader = pd.Series(True, index=out.index)
    for m in LEADER:
        leader &= out.get(m, pd.Series(math.nan, index=out.index)) > 0
    out["xnode_balance"] = xnode
    out["stalled_cpus"] = out.get(STALLED, pd.Series(math.nan, index=out.index))
    out["platform_ok"] = done & (out["stalled_cpus"] == 0)
    out["mechanism_ok"] = done & (
        ((out["policy"] == "default") & (xnode >= MIN_XNODE))
        | (out["policy"].isin(LEADER_POLICIES) & leader)
    )
    return out


# Rule 1's order, each amendment's mixes preferred one first (kernel placement
# first: the paper's); the mixes of different amendments never share a frame.
PREFERENCE = (
    "verdict-b", "verdict-a",  # PLAN.md, amendment 1
    "verdict-d", "verdict-c",  # amendment 2
    "verdict-f", "verdict-e",  # amendment 3
    "verdict-g", "verdict-h",  # amendment 4
)  # fmt: skip


def choose_mix(gates: pd.DataFrame, amendment5: bool = True, platform: bool = False) -> str | None:
    """Rule 1: the first mix of PREFERENCE whose runs of repeat 100 pass, else
    None (no sweep). Up to amendment 4 both the default and the excl run had
    to pass both gates (amendment5=False); amendment 5 (post hoc, PLAN.md):
    the default run both gates, the excl run the mechanism gate; amendment 6
    (@platform): and both runs the platform gate (no CPU halted with tasks
    queued while all programs run). One thread count at a time (amendment
    1: 8, then 12)."""
    stage_a = gates[(gates["repeat"] == 100) & gates["policy"].isin(("default", "excl"))]
    for mix in PREFERENCE:
        g = stage_a[stage_a["mix"] == mix]
        if set(g["policy"]) != {"default", "excl"}:
            continue
        base, excl = g[g["policy"] == "default"], g[g["policy"] == "excl"]
        ok = bool((base.regime_ok & base.mechanism_ok).all()) and bool(excl.mechanism_ok.all())
        if not amendment5:
            ok = ok and bool(excl.regime_ok.all())
        if platform:
            ok = ok and bool(g.platform_ok.all())
        if ok:
            return mix
    return None


def endpoint(
    metrics: pd.DataFrame, mix: str, policy: str = "excl", factor: float = 1.6
) -> pd.Series:
    """Rule 2 per repeat: mean over programs of ln(t_default / t_policy), at
    the pilot's NUMA factor (a frame with other factors, e.g. b192 in the
    tests, is not averaged over them)."""
    p = metrics[
        (metrics["entity_type"] == "program")
        & (metrics["metric"] == "elapsed_s")
        & (metrics["mix"] == mix)
        & ((metrics["numa_factor"] - factor).abs() < 1e-9)
        & metrics["policy"].isin(("default", policy))
    ]
    if set(p["policy"]) != {"default", policy}:
        raise ValueError(f"no program times of both default and {policy} on {mix} at "
                         f"f = {factor:g}")  # fmt: skip
    for col in ("threads", "numa_balancing", "sockets", "cores_per_socket", "kernel_variant"):
        if col in p.columns and p[col].nunique(dropna=False) > 1:
            raise ValueError(f"the program times of {mix} at f = {factor:g} span several "
                             f"{col} values: give one configuration's frames")  # fmt: skip
    twice = p.duplicated(["repeat", "entity", "policy"])
    if twice.any():  # pivot_table would average two runs of one point (two blocks)
        raise ValueError(f"{int(twice.sum())} program time(s) of {mix} appear twice for one "
                         "policy and repeat: give frames with one run per point")  # fmt: skip
    t = p.pivot_table(index=["repeat", "entity"], columns="policy", values="value")
    t = t.dropna()
    return (t["default"] / t[policy]).map(math.log).groupby(level="repeat").mean()


def repeats_needed(sd: float, k: int) -> tuple[float, int, int]:
    """Rule 3 with amendment 7: s_U from the pilot's SD over its k paired
    repeats (k >= 3; the chi-square's lower 0.20 quantile at k - 1 degrees
    of freedom: a one-sided upper 80 % limit for sigma), the n rule 3 asks
    for, and that n rounded up to a multiple of the 3 boot checkpoints."""
    if k < 3:
        raise ValueError(f"rule 3 needs at least 3 paired pilot repeats, got {k}")
    s_u = sd * math.sqrt((k - 1) / float(stats.chi2.ppf(0.20, k - 1)))
    n = 5
    while stats.t.ppf(0.975, n - 1) * s_u / math.sqrt(n) > HALF_WIDTH:
        n += 1
    return s_u, n, -(-n // BLOCK) * BLOCK


def fallback_medians(gates: pd.DataFrame, mix: str) -> dict[str, float]:
    """Rule 4: the median lb_fallback_taken of each _ff variant's runs on @mix."""
    if "lb_fallback_taken" not in gates.columns:  # frames from before the counter
        return {"excl_ff": math.nan, "mbplus_ff": math.nan}
    ff = gates[gates["mix"] == mix].groupby("policy")["lb_fallback_taken"].median()
    return {p: float(v) for p, v in ff.reindex(["excl_ff", "mbplus_ff"]).items()}


def costs(runs: pd.DataFrame, mix: str, threads: int | None = None) -> tuple[pd.Series, pd.Series]:
    """Rule 5 with amendment 7: the gem5 CPU s of the done runs on @mix (and
    @threads), and of the pilot's boot checkpoints (each key once)."""
    done = runs[(runs["state"] == "done") & (runs["mix"] == mix)]
    if threads is not None and "threads" in done.columns:
        done = done[done["threads"] == threads]
    ckpt = runs.drop_duplicates("checkpoint_key")["checkpoint_cpu_s"].dropna()
    return done["gem5_cpu_s"], ckpt


def main(frames: Path) -> int:
    metrics = pd.read_parquet(frames / "metrics.parquet")
    runs = pd.read_parquet(frames / "runs.parquet")
    for c in ("policy", "mix", "entity_type", "metric", "state"):
        for df in (metrics, runs):
            if c in df.columns:
                df[c] = df[c].astype(object)
    gates = run_gates(metrics, runs)
    cols = ["policy", "mix", "threads", "repeat", "state", *REGIME, "regime_ok", "xnode_balance",
            *LEADER, "mechanism_ok", "stalled_cpus", "platform_ok"]  # fmt: skip
    print("gates per run:")
    print(gates.reindex(columns=cols).sort_values(["threads", "mix", "policy"]).to_string())
    mix = None
    for t in sorted(set(gates["threads"])):
        as_planned = choose_mix(gates[gates["threads"] == t], amendment5=False)
        post_hoc = choose_mix(gates[gates["threads"] == t])
        mix = choose_mix(gates[gates["threads"] == t], platform=True)
        print(f"\nrule 1 at {t} threads, up to amendment 4 (both runs both gates): "
              f"{as_planned or 'none qualifies'}")  # fmt: skip
        print(f"rule 1 at {t} threads, amendment 5 (post hoc: the regime on default): "
              f"{post_hoc or 'none qualifies'}")  # fmt: skip
        print(f"rule 1 at {t} threads, amendment 6 (and no stalled CPU, both runs): "
              f"{mix or 'none qualifies: no sweep on these mixes'}")  # fmt: skip
        if mix is not None:
            gates = gates[gates["threads"] == t]
            metrics = metrics[metrics["threads"] == t]
            break
    if mix is None:
        return 0
    d = endpoint(metrics, mix)
    print("\nrule 2, endpoint per repeat (mean ln(t_default/t_excl) over programs; exploratory):")
    print((d.map(math.expm1) * 100).round(2).to_string())
    if len(d) >= 3:
        s_u, n, n3 = repeats_needed(float(d.std(ddof=1)), len(d))
        print(f"rule 3 (amendment 7): {len(d)} paired repeats, s = {d.std(ddof=1):.4f}, "
              f"s_U = {s_u:.4f}, n = {n}, rounded up to a multiple of {BLOCK}: {n3}")  # fmt: skip
    else:
        print(f"rule 3: {len(d)} paired repeats, at least 3 needed")
    print(f"\nrule 4, median lb_fallback_taken: {fallback_medians(gates, mix)}")
    cost, ckpt = costs(runs, mix, t)
    print(f"rule 5, gem5 CPU s a run on {mix} (amendment 7: that mix's done runs): mean "
          f"{cost.mean():.0f}, max {cost.max():.0f} ({len(cost)} runs); boot checkpoints: "
          f"mean {ckpt.mean():.0f} CPU s ({len(ckpt)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
