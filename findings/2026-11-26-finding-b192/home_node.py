"""Where the leader_ft workers ran: the mechanism behind the failed take leg.

Run from the repository root: python3 findings/2026-11-26-finding-b192/home_node.py
Prints, from the kept frame, per policy: the leader_ft workers fork placement
put on their leader's node (start_home_share x 6 workers per program), and
the range over runs of home_node_share and home_node_load of the two
leader_ft programs (metrics.py defines all three).
"""

import pandas as pd

m = pd.read_parquet("findings/2026-11-26-finding-b192/frames/metrics.parquet")
p = m[(m.entity_type == "program") & m.entity.isin(["lft-a", "lft-b"])]
p = p.assign(policy=p.policy.astype(str), metric=p.metric.astype(str))
workers = 6  # --threads of each leader_ft program in lb3-block192
s = p[p.metric == "start_home_share"]
print(
    f"runs {s.run_id.nunique()}, leader_ft workers {workers * len(s)}, "
    f"started on the leader's node {round((s.value * workers).sum())}"
)
t = p[p.metric.isin(["start_home_share", "home_node_share", "home_node_load"])]
g = t.groupby(["policy", "metric"]).value.agg(["min", "max", "count"]).unstack("metric")
print(g.round(3).to_string())
for group, pols in [("excl+mbplus", ["excl", "mbplus"]), ("default", ["default"])]:
    x = t[t.policy.isin(pols)]
    for metric in ["home_node_share", "home_node_load"]:
        v = x[x.metric == metric].value
        print(f"{group}: {metric} {v.min():.2f}-{v.max():.2f} over {x.run_id.nunique()} runs")
