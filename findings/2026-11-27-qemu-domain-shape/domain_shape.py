"""Fork placement of the leader_ft workers under two QEMU domain shapes.

Run from the repository root:
    python3 findings/2026-11-27-qemu-domain-shape/domain_shape.py
Prints, per shape (mc: QEMU's sockets of 2 cores sharing an L3; die: one CPU
per socket, two per node, gem5's shape), the leader_ft workers fork placement
put on their leader's node (start_home_share x 6 workers per program), the
range of start_home_share and home_node_share per policy, and each run's
leader takes and skips and cross-node balancing migrations.
"""

import pandas as pd

HERE = "findings/2026-11-27-qemu-domain-shape"
WORKERS = 6  # --threads of each leader_ft program in lb3-block192
COUNTS = {
    "lb_taken_leader_dst": "takes",
    "lb_skipped_leader_src": "skips",
    "migrations_balance_xnode": "xnode",
    "migrations_active_balance_xnode": "xnode_active",
}

for shape in ["mc", "die"]:
    m = pd.read_parquet(f"{HERE}/{shape}/frames/metrics.parquet")
    m = m.assign(policy=m.policy.astype(str), metric=m.metric.astype(str))
    p = m[(m.entity_type == "program") & m.entity.isin(["lft-a", "lft-b"])]
    s = p[p.metric == "start_home_share"]
    home = round((s.value * WORKERS).sum())
    print(
        f"== {shape}: runs {s.run_id.nunique()}, leader_ft workers {WORKERS * len(s)}, "
        f"started on the leader's node {home}"
    )
    t = p[p.metric.isin(["start_home_share", "home_node_share"])]
    g = t.groupby(["policy", "metric"]).value.agg(["min", "max"]).unstack("metric")
    print(g.round(2).to_string())
    mx = m[(m.entity_type == "mix") & m.metric.isin(list(COUNTS))]
    k = mx.pivot_table(index=["policy", "repeat"], columns="metric", values="value", observed=True)
    print(k.rename(columns=COUNTS).fillna(0).astype(int).to_string())
