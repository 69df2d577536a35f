"""Cross-node passes that moved nothing, per policy (issue 43's last figure).

Run from the repository root:
    python3 findings/2026-11-28-kernel-parity/empty_passes.py FRAMES_DIR [...]

For every done run of the frames: the kMLB counters of the NUMA-level pass
(kernel-patches 0009/0012, /proc/sched_numa_lb_stats, all tasks): passes
(`lb_attempts`), passes that moved nothing (`lb_picked_none`), their share,
tasks moved (`lb_migrated`), the `_ff` variants' fallback takes
(`lb_fallback_taken`, absent on policies without one), and the stock
balancer's cross-node moves (`migrations_balance_xnode`). The share is what
issue 43 item 5 compares: the leader rules of excl and mbplus turn down every
candidate in most passes, first fit almost never.
"""

import sys
from pathlib import Path

import pandas as pd

COUNTERS = ["lb_attempts", "lb_picked_none", "lb_migrated", "lb_fallback_taken",
            "migrations_balance_xnode"]  # fmt: skip


def table(frames: Path) -> pd.DataFrame:
    m = pd.read_parquet(frames / "metrics.parquet")
    runs = pd.read_parquet(frames / "runs.parquet")
    done = set(runs.loc[runs.state.astype(str) == "done", "run_id"])
    mx = m[(m.entity_type.astype(str) == "mix") & m.run_id.isin(done)]
    mx = mx[mx.metric.astype(str).isin(COUNTERS)]
    w = mx.pivot_table(index="run_id", columns="metric", values="value", aggfunc="first",
                       observed=True)  # fmt: skip
    w.columns = [str(c) for c in w.columns]
    info = runs.set_index("run_id")[["policy", "mix", "numa_factor", "repeat"]].astype(str)
    w = info.join(w, how="inner")
    w["share_picked_none"] = w["lb_picked_none"] / w["lb_attempts"]
    return w.sort_values(["mix", "policy", "repeat"])


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for d in argv:
        t = table(Path(d))
        cols = [c for c in ["policy", "mix", "repeat", *COUNTERS, "share_picked_none"]
                if c in t.columns]  # fmt: skip
        print(f"# {d}: {len(t)} done runs")
        print(t[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
