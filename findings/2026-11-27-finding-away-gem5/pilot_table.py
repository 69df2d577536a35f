"""The README's per-run table of the gem5 pilot of lb3-block192-away, from the kept frame.

Run from the repository root:
    python3 findings/2026-11-27-finding-away-gem5/pilot_table.py
Per run: the gate's counts (leader-on-destination takes, leader-on-source
skips, cross-node balancing migrations = detach + active balance), the mix's
elapsed time and remote-access ratio, the leader programs' start_home_share
and home_node_share (lft-a / lft-b), and the gem5 process's CPU seconds.
"""

import pandas as pd

d = "findings/2026-11-27-finding-away-gem5/frames"
m = pd.read_parquet(f"{d}/metrics.parquet")
m = m.assign(policy=m.policy.astype(str), metric=m.metric.astype(str))
runs = pd.read_parquet(f"{d}/runs.parquet").set_index("run_id")
mx = m[m.entity_type.astype(str) == "mix"].pivot_table(
    index=["policy", "repeat", "run_id"], columns="metric", values="value", observed=True
)
pr = m[m.entity_type.astype(str) == "program"]

print(
    "| policy | repeat | leader takes | leader skips | cross-node balancing migrations | "
    "elapsed (s) | remote ratio | workers at home at start, lft-a / lft-b | "
    "home-node share, lft-a / lft-b | gem5 CPU s |"
)
print("|---|---|---|---|---|---|---|---|---|---|")
for (pol, rep, rid), r in mx.iterrows():
    p = pr[pr.run_id == rid]

    def share(metric: str, p: pd.DataFrame = p) -> str:
        v = p[p.metric == metric].set_index("entity").value
        return f"{v.get('lft-a', float('nan')):.2f} / {v.get('lft-b', float('nan')):.2f}"

    leader = pol in ("excl", "mbplus")
    xnode = r.migrations_balance_xnode + r.migrations_active_balance_xnode
    print(
        f"| {pol} | {rep} | {r.lb_taken_leader_dst:g} | {r.lb_skipped_leader_src:g} | {xnode:g} | "
        f"{r.elapsed_s:.4f} | {r.remote_ratio:.3f} | "
        f"{share('start_home_share')} | {share('home_node_share') if leader else '–'} | "
        f"{runs.loc[rid, 'gem5_cpu_s']:.0f} |"
    )
ck = runs.checkpoint_cpu_s.dropna().unique()
print(f"\nboot checkpoint CPU s: {', '.join(f'{v:.0f}' for v in ck)}")
