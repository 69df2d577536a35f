"""Leader-on-destination takes per ROI second: lb3-block128 against lb3-block192.

Run from the repository root: python3 findings/2026-11-26-finding-b192/take_rates.py
Prints the table and the exact conditional binomial tests of its README.
"""

import glob
import math

import pandas as pd

rows = []
for f in glob.glob("findings/2026-11-2[56]-finding-b1*/frames/metrics.parquet"):
    if "b192-r0" in f:
        continue  # its runs are in finding-b192
    d = pd.read_parquet(f)
    d = d[(d.entity_type == "mix") & d.policy.isin(["excl", "mbplus"])]
    rows.append(d[d.metric.isin(["lb_taken_leader_dst", "sim_seconds"])])
p = (
    pd.concat(rows)
    .pivot_table(index=["run_id", "mix"], columns="metric", values="value")
    .reset_index()
)
g = p.groupby("mix").agg(
    runs=("run_id", "size"),
    takes=("lb_taken_leader_dst", "sum"),
    roi_s=("sim_seconds", "sum"),
    roi_min_s=("sim_seconds", "min"),
    roi_max_s=("sim_seconds", "max"),
)
g["per_100ms"] = g.takes / g.roi_s / 10
print(g)
n, k = int(g.takes.sum()), int(g.loc["lb3-block192", "takes"])
for name, share in [
    ("one rate per ROI second", g.roi_s["lb3-block192"] / g.roi_s.sum()),
    ("one count per run", g.runs["lb3-block192"] / g.runs.sum()),
]:
    pv = sum(math.comb(n, i) * share**i * (1 - share) ** (n - i) for i in range(k + 1))
    print(f"P(block192 <= {k} of {n} takes | {name}, share {share:.3f}) = {pv:.2g}")
