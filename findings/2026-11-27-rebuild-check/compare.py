"""One point of the b192 finding sweep run again on the rebuilt gem5: how far apart?

Run from the repository root:
    python3 findings/2026-11-27-rebuild-check/compare.py
For every run of this dir's frame, the b192 sweep's run of the same point
(point_id: the point without the gem5 binary), side by side: the mix's
elapsed time, simulated seconds, ROI instructions, remote ratio, busy IPC,
LLC MPKI and the counters of the gate; then how many of the two runs'
shared metrics differ at all.
"""

import pandas as pd

here = "findings/2026-11-27-rebuild-check/frames"
b192 = "findings/2026-11-26-finding-b192/frames"
new_runs = pd.read_parquet(f"{here}/runs.parquet")
old_runs = pd.read_parquet(f"{b192}/runs.parquet")
new_m = pd.read_parquet(f"{here}/metrics.parquet")
old_m = pd.read_parquet(f"{b192}/metrics.parquet")
key = ["entity_type", "entity", "metric"]
shown = [
    "elapsed_s",
    "sim_seconds",
    "instructions",
    "remote_ratio",
    "ipc",
    "llc_mpki",
    "migrations_balance_xnode",
    "schedstat_numa_passes",
]

for _, n in new_runs.iterrows():
    o = old_runs[old_runs.point_id == n.point_id].iloc[0]
    a = old_m[old_m.run_id == o.run_id].set_index(key).value
    b = new_m[new_m.run_id == n.run_id].set_index(key).value
    both = pd.concat([a.rename("old"), b.rename("new")], axis=1).dropna()
    mix = both.xs("mix", level="entity_type").droplevel("entity")
    label = f"{n.policy} f={n.numa_factor:g} r{n['repeat']}"
    print(
        f"{label}: old run {o.run_id[:16]} (gem5 {o.gem5_sha256[:8]}), "
        f"new run {n.run_id[:16]} (gem5 {n.gem5_sha256[:8]})"
    )
    t = mix.loc[[m for m in shown if m in mix.index]]
    t = t.assign(change_pct=(100 * (t.new / t.old - 1)).round(2))
    print(t.to_string())
    print(f"shared metrics: {len(both)}, differing: {int((both.old != both.new).sum())}\n")
