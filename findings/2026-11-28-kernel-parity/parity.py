"""Kernel parity (issue 43 item 4): the NUMA level's schedstat counts of the
policy pass run as first fit (null) against the stock loop (default), and of
the patched kernel's default against the unmodified kernel (stock).

Run from the repository root:
    python3 findings/2026-11-28-kernel-parity/parity.py [FRAMES_DIR ...]
(default: findings/2026-11-28-kernel-parity/frames, NUMA balancing off, and
findings/2026-11-28-kernel-parity/nb1/frames, on). For each count: mean and
SD per policy over the repeats, and the difference of means with its Welch
95 % interval. Pre-stated rule: two policies agree on a count when that
interval contains 0. Counts are per run (the mix is the same); per second of
the mix too, since a run's length can differ. The pre-stated test is repeats
0-4 (the preset's 5); repeats 5-14, run after seeing it, are exploratory and
printed apart, over all 15.
"""

import math
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, ".")  # run from the repository root: the analysis package
from analysis.results.metrics import t975  # noqa: E402

COUNTS = [
    "schedstat_numa_passes",
    "schedstat_numa_balanced",
    "schedstat_numa_failed",
    "schedstat_numa_gained",
    "schedstat_numa_imbalance",
    "schedstat_numa_no_busiest",
]
PAIRS = [("null", "default"), ("default", "stock")]


def welch(a: pd.Series, b: pd.Series) -> tuple[float, float, float]:
    """Difference of means a - b and its Welch 95 % interval."""
    d = a.mean() - b.mean()
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    h = t975(max(1, math.floor(dof))) * se  # Welch's df, rounded down
    return d, d - h, d + h


def main(frames: Path) -> int:
    m = pd.read_parquet(frames / "metrics.parquet")
    mx = m[m.entity_type.astype(str) == "mix"]
    mx = mx.assign(policy=mx.policy.astype(str), metric=mx.metric.astype(str))
    groups = sorted(mx.numa_balancing.unique()) if "numa_balancing" in mx.columns else [None]
    sets = [("pre-stated, repeats 0-4", 5), ("exploratory, all repeats", None)]
    for (label, upto), nb in [(s, nb) for nb in groups for s in sets]:
        g = mx if nb is None else mx[mx.numa_balancing == nb]
        if upto is not None:
            g = g[g.repeat < upto]
        elif g.repeat.max() < 5:
            continue  # nothing beyond the pre-stated repeats
        wide = g.pivot_table(index=["policy", "repeat"], columns="metric", values="value")
        elapsed = wide["elapsed_s"]
        print(f"\n## numa_balancing = {nb}, {label}\n")
        pols = [p for p in ("stock", "default", "null") if p in wide.index.get_level_values(0)]
        print(
            "| count | "
            + " | ".join(f"{p} (n, mean +- SD)" for p in pols)
            + " | "
            + " | ".join(f"{a} - {b} [95 % CI]" for a, b in PAIRS)
            + " |"
        )
        print("|---" * (1 + len(pols) + len(PAIRS)) + "|")
        for per_s in (False, True):
            for c in COUNTS + ["elapsed_s"]:
                if c not in wide.columns or (per_s and c == "elapsed_s"):
                    continue
                col = wide[c] / elapsed if per_s else wide[c]
                cells = []
                for p in pols:
                    v = col.loc[p].dropna()
                    cells.append(f"{len(v)}, {v.mean():.1f} +- {v.std(ddof=1):.1f}")
                diffs = []
                for a, b in PAIRS:
                    if a in pols and b in pols:
                        d, lo, hi = welch(col.loc[a].dropna(), col.loc[b].dropna())
                        agree = "agree" if lo <= 0 <= hi else "DIFFER"
                        diffs.append(f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}] {agree}")
                    else:
                        diffs.append("–")
                name = f"{c} per s" if per_s else c
                print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(diffs) + " |")
    return 0


if __name__ == "__main__":
    here = Path("findings/2026-11-28-kernel-parity")
    dirs = [Path(a) for a in sys.argv[1:]] or [here / "frames", here / "nb1" / "frames"]
    sys.exit(max(main(d) for d in dirs))
