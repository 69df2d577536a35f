"""The README's per-point table, printed from the kept frame.

Run from the repository root: python3 findings/2026-11-26-finding-b192/readme_tables.py
One Markdown row per policy and NUMA factor: improvement over stock paired
by repeat (mean and 95 % CI, finding.improvement_by_factor: the report's
numbers) with the per-pair values, then per-run means of remote ratio,
busy IPC and LLC MPKI, and per-run values of cross-node balancing
migrations (detach + active balance) and of leader takes / skips.
"""

import sys

import pandas as pd

sys.path.insert(0, ".")  # run from the repository root: the analysis package
from analysis.results import finding  # noqa: E402

m = pd.read_parquet("findings/2026-11-26-finding-b192/frames/metrics.parquet")
mx = m[m.entity_type.astype(str) == "mix"]
mx = mx.assign(policy=mx.policy.astype(str), metric=mx.metric.astype(str))
imp = finding.improvement_by_factor(mx).set_index(["policy", "numa_factor"])
order = ["stock", "default", "tm", "mb", "bce", "mbplus", "excl_base", "excl", "autonuma"]


def per_run(g: pd.DataFrame, metric: str) -> list[float]:
    return list(g[g.metric == metric].sort_values("repeat").value)


def runs(vals: list[float]) -> str:
    return " / ".join(f"{v:g}" for v in vals) if vals else "–"


print(
    "| point | runs | improvement over stock, paired (95 % CI; per pair) | remote ratio | "
    "busy IPC | LLC MPKI | cross-node balancing migrations | leader takes; skips |"
)
print("|---|---|---|---|---|---|---|---|")
for f in sorted(mx.numa_factor.unique()):
    for pol in order:
        g = mx[(mx.policy == pol) & (mx.numa_factor == f)]
        if g.empty:
            continue
        n = g[g.metric == "elapsed_s"].repeat.nunique()
        if (pol, f) in imp.index:
            r = imp.loc[(pol, f)]
            pairs = ", ".join(f"{v:+.2f}" for v in per_run(g, "improvement_pct"))
            ci = f"[{r.ci95_lo:+.2f}, {r.ci95_hi:+.2f}]" if r.n >= 2 else "no interval"
            bold = "**" if r.differs else ""
            cell = f"{bold}{r['mean']:+.2f} % {ci}{bold} ({pairs})"
        else:
            cell = ""
        detach = per_run(g, "migrations_balance_xnode")
        active = per_run(g, "migrations_active_balance_xnode")
        bal = [a + b for a, b in zip(detach, active, strict=True)]
        take, skip = per_run(g, "lb_taken_leader_dst"), per_run(g, "lb_skipped_leader_src")
        leader = f"{runs(take)}; {runs(skip)}" if pol in finding.GATE_LEADER_POLICIES else "–"
        mean = {k: g[g.metric == k].value.mean() for k in ("remote_ratio", "ipc", "llc_mpki")}
        print(
            f"| {pol}, f = {f:g} | {n} | {cell} | {mean['remote_ratio']:.3f} | "
            f"{mean['ipc']:.3f} | {mean['llc_mpki']:.2f} | {runs(bal)} | {leader} |"
        )

# The ranges the README's description quotes, from the same per-run values.
rr = mx[mx.metric == "remote_ratio"]
leaders = rr.policy.isin(["excl", "mbplus"])
stock = rr.policy == "stock"
lo, hi = rr[leaders].value.min(), rr[leaders].value.max()
print(
    f"\nremote ratio per run: excl/mbplus {lo:.2f}-{hi:.2f}, "
    f"stock {rr[stock].value.min():.2f}-{rr[stock].value.max():.2f}"
)
ipc = mx[mx.metric == "ipc"].groupby(["numa_factor", "policy"]).value.mean()
for f in sorted(mx.numa_factor.unique()):
    gains = [100 * (ipc[(f, p)] / ipc[(f, "stock")] - 1) for p in ("excl", "mbplus")]
    print(f"busy IPC over stock at f = {f:g}: excl {gains[0]:+.1f} %, mbplus {gains[1]:+.1f} %")
xn = mx[mx.metric.isin(["migrations_balance_xnode", "migrations_active_balance_xnode"])]
xn = xn.groupby(["policy", "numa_factor", "repeat"], observed=True).value.sum().reset_index()
blind = ~xn.policy.isin(["excl", "mbplus", "stock"])
lead = xn.policy.isin(["excl", "mbplus"])
print(
    f"cross-node balancing migrations per run: excl/mbplus mean {xn[lead].value.mean():.1f} "
    f"({xn[lead].value.min():g}-{xn[lead].value.max():g}, n = {lead.sum()}); other policies "
    f"mean {xn[blind].value.mean():.1f} ({xn[blind].value.min():g}-{xn[blind].value.max():g}, "
    f"n = {blind.sum()})"
)
