"""The numbers the pre-registration's TBD marks take, by its rules alone
(PREREGISTRATION.md section 4 and 5; the pilot's rules 3-5 as amended up to
amendment 7), from the pilot's frames.

    python3 findings/2026-11-28-verdict/plan.py PILOT_FRAMES [NB_FRAMES]

PILOT_FRAMES: the frames of stage B6 with the runs it adopted from earlier
blocks (`python3 -m analysis.results.keep <results> <dir> --no-report` from the
freeze's worktree: one run per point; a point with two runs, or a repeat
group whose runs span two gem5 binaries, is refused as in analyse.py);
NB_FRAMES: those of the NUMA-balancing check run (absent: no arm 4).
Prints n, the cost figures, the arms that join in order and the projected
CPU-hours; nothing is decided here that the rules leave open.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from scipy import stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent / "2026-11-28-verdict-pilot"))
sys.path.insert(0, str(HERE))

from analyse import Refused, group_blocks  # noqa: E402  (one rule for blocks, as the analysis)
from pilot import BLOCK, costs, endpoint, fallback_medians, repeats_needed, run_gates  # noqa: E402

from analysis.results.frames import read_plain  # noqa: E402

BUDGET_S = 40 * 3600.0  # gem5 CPU seconds
MIN_N = 6  # a cut primary keeps at least two repeats per checkpoint
MIX = "verdict-h"
FF = ("excl_ff", "mbplus_ff")  # rule 4's candidates; a tie (incl. both 0) -> excl_ff


@dataclass(frozen=True)
class Numbers:
    k: int  # the pilot's paired repeats
    s: float
    s_u: float
    n_rule: int  # rule 3's n
    n: int  # the sweep's n (multiple of 3, cut to the budget if need be)
    run_s: float  # C
    checkpoint_s: float  # K
    ff: str
    ff_medians: dict[str, float]
    hint_faults: float | None
    arms: tuple[str, ...]
    total_s: float

    def half_width(self, sd: float) -> float:
        """The 95 % half-width in percent at n and @sd."""
        return math.expm1(stats.t.ppf(0.975, self.n - 1) * sd / math.sqrt(self.n)) * 100


def mix_value(metrics: pd.DataFrame, run_ids: pd.Series, metric: str) -> pd.Series:
    sel = (metrics["entity_type"] == "mix") & (metrics["metric"] == metric)
    sel &= metrics["run_id"].isin(run_ids)
    return metrics[sel].set_index("run_id")["value"]


def one_block_per_group(runs: pd.DataFrame, mix: str) -> None:
    """ValueError unless the pilot's runs on @mix at f = 1.6 hold one run per
    point and every repeat group on one gem5 binary (PLAN.md amendment 8)."""
    mine = runs[(runs["mix"] == mix) & ((runs["numa_factor"] - 1.6).abs() < 1e-9)]
    pid = mine["point_id"].astype(object)
    if pid.duplicated().any():
        n = int(pid.duplicated().sum())
        raise ValueError(f"{n} point(s) of {mix} have two runs: give the frames of "
                         "`keep <results> <dir> --no-report` (one per point)")  # fmt: skip
    try:
        group_blocks(mine)
    except Refused as e:
        raise ValueError(str(e)) from e


def numbers(pilot: Path, nb: Path | None = None, mix: str = MIX) -> Numbers:
    metrics, runs = read_plain(pilot)
    one_block_per_group(runs, mix)
    d = endpoint(metrics, mix)
    s = float(d.std(ddof=1))
    s_u, n_rule, n = repeats_needed(s, len(d))
    cost, ckpt = costs(runs, mix)
    run_s, checkpoint_s = float(cost.mean()), float(ckpt.mean())
    med = fallback_medians(run_gates(metrics, runs), mix)
    ff = max(FF, key=lambda p: (0 if math.isnan(med[p]) else med[p], p == "excl_ff"))
    hint = None
    if nb is not None:
        m2, r2 = read_plain(nb)
        ids = r2.loc[(r2["state"] == "done") & (r2["policy"] == "autonuma"), "run_id"]
        v = mix_value(m2, ids, "numa_hint_faults")
        hint = float(v.max()) if len(v) else 0.0
    if 2 * n * run_s > BUDGET_S:
        n = max(MIN_N, int(BUDGET_S // (2 * run_s)) // BLOCK * BLOCK)
    total = 2 * n * run_s
    arms: list[str] = []
    for arm in (ff, "mbplus", "stock", "autonuma"):
        if arm == "autonuma" and not (hint is not None and hint > 0):
            break
        extra = n * run_s + (3 * checkpoint_s if arm == "stock" else 0.0)
        if total + extra > BUDGET_S:
            break
        arms.append(arm)
        total += extra
    return Numbers(len(d), s, s_u, n_rule, n, run_s, checkpoint_s, ff, med, hint, tuple(arms),
                   total)  # fmt: skip


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: plan.py PILOT_FRAMES [NB_FRAMES]", file=sys.stderr)
        return 2
    try:
        x = numbers(Path(argv[0]), Path(argv[1]) if len(argv) == 2 else None)
    except (ValueError, OSError) as e:
        print(f"plan.py: {e}", file=sys.stderr)
        return 1
    print(f"rule 3: k = {x.k} pilot pairs, s = {x.s:.5f}, s_U = {x.s_u:.5f}, n = {x.n_rule}")
    print(f"n (a multiple of {BLOCK}, within the budget): {x.n}; 95 % half-width at s_U "
          f"{x.half_width(x.s_u):.2f} points, at s {x.half_width(x.s):.2f}")  # fmt: skip
    print(f"rule 5: C = {x.run_s:.0f} gem5 CPU s a run, K = {x.checkpoint_s:.0f} a checkpoint")
    print(f"rule 4: median lb_fallback_taken {x.ff_medians}: {x.ff} joins")
    print(f"NB check: hint faults {x.hint_faults}")
    print(f"arms that join, in order: {list(x.arms) or 'none'}; projected "
          f"{x.total_s / 3600:.1f} CPU-hours of {BUDGET_S / 3600:.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
