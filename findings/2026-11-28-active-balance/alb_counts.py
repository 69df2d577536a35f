"""Why stock active balancing never fired in the kept gem5 runs: the counts.

Run from the repository root:
    python3 findings/2026-11-28-active-balance/alb_counts.py

Reads the kept frames of findings/2026-11-26-finding-b192 and
findings/2026-11-27-finding-away-gem5 (every gem5 run of both, stock
included) and the two of those runs whose whole guest record is a test
fixture (tests/fixtures/finding-b192/{default,excl}/results.jsonl: the raw
/proc/schedstat before and after the ROI, per CPU and per idle type). Prints:

1. the settings the mechanism depends on, read from the repository (HZ, the
   preset's NUMA-level intervals) and, when the kernel tree is on this
   machine, from its source (cache_nice_tries of an SD_NUMA domain);
2. per run: the patch's cross-node passes (lb_attempts), those that picked
   nothing (lb_picked_none), the NUMA level's load_balance() calls (all idle
   types, newly idle, periodic = the rest), failures, the lower bound on
   newly-idle failures the frame allows, active-balance pushes and moves;
3. per finding and policy: the ranges of those;
4. for the two fixture runs: the NUMA level per idle type and per CPU
   (lb_count / lb_balanced / lb_failed, alb_count / alb_failed / alb_pushed),
   checked against the frame's sums for the same run.

Every figure of the README comes from this output.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "workloads"))

import mix_schedstat  # noqa: E402  (workloads/, stdlib only)

from analysis.results.frames import read_frames  # noqa: E402

FINDINGS = {
    "b192": ROOT / "findings/2026-11-26-finding-b192/frames",
    "away": ROOT / "findings/2026-11-27-finding-away-gem5/frames",
}
# guest records of two kept b192 runs (f = 1.6, repeat 0), copied unchanged
FIXTURES = {
    "default": ROOT / "tests/fixtures/finding-b192/default/results.jsonl",
    "excl": ROOT / "tests/fixtures/finding-b192/excl/results.jsonl",
}
PRESET = ROOT / "analysis/sweep/presets/finding.toml"
KCONFIG = ROOT / "kernel-patches/config/base.config"
# Debian's 6.1.192 tree as unpacked by kernel-patches/kbuild.py (unpatched)
KSRC = Path.home() / ".cache/numa-lb-study/kernel/src/7d28738396ce"
LEVEL = "NUMA"
LEADER_POLICIES = ("excl", "mbplus")

METRICS = [
    "sim_seconds",
    "busy_fraction",
    "lb_attempts",
    "lb_picked_none",
    "lb_migrated",
    "lb_active_moved",
    "migrations_active_balance",
    "schedstat_numa_passes",
    "schedstat_numa_passes_newidle",
    "schedstat_numa_balanced",
    "schedstat_numa_failed",
    "schedstat_numa_gained",
    "schedstat_numa_active_pushed",
]


def hz() -> int:
    """CONFIG_HZ of the study's kernels (CONFIG_HZ_<n>=y in the base config)."""
    m = re.search(r"^CONFIG_HZ_(\d+)=y$", KCONFIG.read_text(), re.M)
    if not m:
        raise SystemExit(f"{KCONFIG}: no CONFIG_HZ_<n>=y")
    return int(m.group(1))


def numa_cache_nice_tries() -> int | None:
    """cache_nice_tries sd_init() gives an SD_NUMA domain, from the kernel tree
    when it is on this machine (None otherwise)."""
    src = KSRC / "kernel/sched/topology.c"
    if not src.is_file():
        return None
    m = re.search(r"SD_NUMA\) \{\s*sd->cache_nice_tries = (\d+);", src.read_text())
    return int(m.group(1)) if m else None


def active_threshold_in_source() -> bool | None:
    """Whether imbalanced_active_balance() still reads `nr_balance_failed >
    cache_nice_tries+2` (None without the tree)."""
    src = KSRC / "kernel/sched/fair.c"
    if not src.is_file():
        return None
    return "sd->nr_balance_failed > sd->cache_nice_tries+2" in src.read_text()


# the patched tree kernel-patches/kbuild.py builds from (the series applied)
KTREE = Path.home() / ".cache/numa-lb-study/kernel/tree/7d28738396ce"
# fair.c spans that decide when active balancing starts: should_we_balance()
# through load_balance() to get_sd_balance_interval(), and the three
# *_active_balance() helpers
SPANS = (
    ("static int should_we_balance(", "get_sd_balance_interval(struct sched_domain"),
    ("asym_active_balance(struct lb_env *env)", "static int active_load_balance_cpu_stop(void"),
)


def stock_spans_in_patched_tree() -> str:
    """Whether the SPANS of fair.c read the same in the unpatched and the patched tree."""
    a, b = KSRC / "kernel/sched/fair.c", KTREE / "kernel/sched/fair.c"
    if not (a.is_file() and b.is_file()):
        return "NOT checked (a kernel tree is absent)"
    ta, tb = a.read_text(), b.read_text()
    for start, end in SPANS:
        ia, ib = ta.find(start), tb.find(start)
        if ia < 0 or ib < 0:
            return f"NOT checked ({start!r} not found)"
        if ta[ia : ta.index(end, ia)] != tb[ib : tb.index(end, ib)]:
            return f"DIFFERENT (from {start!r})"
    return "identical"


def mix_table() -> pd.DataFrame:
    """One row per run of both findings: its spec and the mix-level METRICS."""
    parts = []
    for name, d in FINDINGS.items():
        m = read_frames(d).metrics
        m = m[(m.entity_type.astype(str) == "mix") & m.metric.astype(str).isin(METRICS)]
        p = m.pivot_table(
            index=["policy", "numa_factor", "repeat", "run_id"],
            columns="metric",
            values="value",
            observed=True,
        ).reset_index()
        p.insert(0, "finding", name)
        parts.append(p)
    t = pd.concat(parts, ignore_index=True)
    t["policy"] = t["policy"].astype(str)
    for c in METRICS:
        if c not in t:
            t[c] = float("nan")
    return t.sort_values(["finding", "policy", "numa_factor", "repeat"]).reset_index(drop=True)


def derive(t: pd.DataFrame, cpus: int, hz_: int) -> pd.DataFrame:
    t = t.copy()
    t["picked_none_share"] = t.lb_picked_none / t.lb_attempts
    t["periodic"] = t.schedstat_numa_passes - t.schedstat_numa_passes_newidle
    t["ticks_per_cpu"] = t.sim_seconds * hz_
    t["periodic_per_cpu_tick"] = t.periodic / (cpus * t.ticks_per_cpu)
    # every pass ends balanced, failed, or moved something (load_balance())
    t["moved_passes"] = (
        t.schedstat_numa_passes - t.schedstat_numa_balanced - t.schedstat_numa_failed
    )
    # at most `periodic` of the failures were periodic ones: the rest were newly idle
    t["newidle_failed_min"] = (t.schedstat_numa_failed - t.periodic).clip(lower=0)
    t["newidle_share_min"] = t.newidle_failed_min / t.schedstat_numa_failed
    return t


def fmt(v: float, nd: int = 0) -> str:
    if pd.isna(v):
        return "–"
    return f"{v:.{nd}f}"


def md(rows: list[list[str]], head: list[str]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def per_run(t: pd.DataFrame) -> str:
    head = [
        "finding", "policy", "f", "rep", "run", "ROI ms", "busy",
        "x-node passes", "picked none", "share",
        "NUMA passes", "newidle", "periodic", "periodic / CPU-tick",
        "failed", "newidle failed ≥", "newidle share ≥", "moved passes",
        "alb_pushed", "active_moved", "active-balance migrations",
    ]  # fmt: skip
    rows = [
        [
            r.finding,
            r.policy,
            f"{r.numa_factor:g}",
            f"{r.repeat:g}",
            r.run_id[:8],
            fmt(r.sim_seconds * 1e3, 1),
            fmt(r.busy_fraction, 3),
            fmt(r.lb_attempts),
            fmt(r.lb_picked_none),
            fmt(r.picked_none_share, 2),
            fmt(r.schedstat_numa_passes),
            fmt(r.schedstat_numa_passes_newidle),
            fmt(r.periodic),
            fmt(r.periodic_per_cpu_tick, 2),
            fmt(r.schedstat_numa_failed),
            fmt(r.newidle_failed_min),
            fmt(r.newidle_share_min, 2),
            fmt(r.moved_passes),
            fmt(r.schedstat_numa_active_pushed),
            fmt(r.lb_active_moved),
            fmt(r.migrations_active_balance),
        ]  # fmt: skip
        for r in t.itertuples()
    ]
    return md(rows, head)


def rng(s: pd.Series, nd: int = 0) -> str:
    s = s.dropna()
    if s.empty:
        return "–"
    lo, hi = fmt(s.min(), nd), fmt(s.max(), nd)
    return lo if lo == hi else f"{lo}-{hi}"


def per_policy(t: pd.DataFrame) -> str:
    head = [
        "finding", "policy", "runs", "busy", "picked none / x-node passes",
        "periodic / NUMA passes", "periodic / CPU-tick", "failed",
        "newidle share of failures ≥", "alb_pushed", "active_moved",
    ]  # fmt: skip
    rows = []
    for (fnd, pol), g in t.groupby(["finding", "policy"], sort=True):
        rows.append(
            [
                fnd,
                pol,
                str(len(g)),
                rng(g.busy_fraction, 3),
                rng(g.picked_none_share, 2),
                rng(g.periodic / g.schedstat_numa_passes, 2),
                rng(g.periodic_per_cpu_tick, 2),
                rng(g.schedstat_numa_failed),
                rng(g.newidle_share_min, 2),
                rng(g.schedstat_numa_active_pushed),
                rng(g.lb_active_moved),
            ]  # fmt: skip
        )
    return md(rows, head)


def percpu_level(text: str, names: dict[str, str]) -> dict[str, dict[str, int]]:
    """{cpu: {counter: value}} of the LEVEL domain lines of one /proc/schedstat."""
    keys = mix_schedstat.field_names()
    out: dict[str, dict[str, int]] = {}
    cpu = None
    for ln in text.splitlines()[1:]:
        tok = ln.split()
        if not tok:
            continue
        if tok[0].startswith("cpu"):
            cpu = tok[0]
        elif tok[0].startswith("domain") and names.get(f"{cpu}/{tok[0]}") == LEVEL:
            vals = tok[2:]
            if cpu is None or len(vals) != len(keys):
                raise SystemExit(f"bad domain line for {cpu}: {ln[:80]!r}")
            out[cpu] = dict(zip(keys, map(int, vals), strict=True))
    return out


def fixture_record(path: Path) -> tuple[str, dict]:
    """The run id and the run_end schedstat record of one guest results.jsonl."""
    for ln in path.read_text().splitlines():
        rec = json.loads(ln)
        if rec.get("type") == "run_end" and "schedstat" in rec:
            return str(rec["run_id"]), rec["schedstat"]
    raise SystemExit(f"{path}: no run_end record with a schedstat entry")


def fixtures(t: pd.DataFrame, threshold: int) -> str:
    types = mix_schedstat.IDLE_TYPES
    out = []
    for pol, path in FIXTURES.items():
        rid, ss = fixture_record(path)
        full = [r for r in t.run_id if r.startswith(rid)]
        if len(full) != 1:
            raise SystemExit(f"{path}: run {rid} is not one run of the kept frames")
        row = t[t.run_id == full[0]].iloc[0]
        before = percpu_level(ss["before_raw"], ss["domain_names"])
        after = percpu_level(ss["after_raw"], ss["domain_names"])
        d = {c: {k: after[c][k] - before[c].get(k, 0) for k in after[c]} for c in after}
        tot = {k: sum(d[c][k] for c in d) for k in next(iter(d.values()))}
        # the frame's sums for this run must be these very counters
        check = {
            "schedstat_numa_passes": sum(tot[f"lb_count_{x}"] for x in types),
            "schedstat_numa_passes_newidle": tot["lb_count_newidle"],
            "schedstat_numa_balanced": sum(tot[f"lb_balanced_{x}"] for x in types),
            "schedstat_numa_failed": sum(tot[f"lb_failed_{x}"] for x in types),
            "schedstat_numa_gained": sum(tot[f"lb_gained_{x}"] for x in types),
            "schedstat_numa_active_pushed": tot["alb_pushed"],
        }
        bad = {k: (v, row[k]) for k, v in check.items() if v != row[k]}
        if bad:
            raise SystemExit(f"{path}: fixture and frame differ for run {rid}: {bad}")
        failed = check["schedstat_numa_failed"]
        out.append(
            f"### {pol}, b192 f = {row['numa_factor']:g} repeat {row['repeat']:g}, run {rid} "
            f"(fixture {path.relative_to(ROOT)}; its NUMA-level sums equal the frame's)\n"
        )
        head = ["idle type", "lb_count", "lb_balanced", "lb_failed", "lb_gained",
                "lb_hot_gained", "lb_nobusyg", "lb_nobusyq",
                "balanced, no verdict (should_we_balance or all pinned)", "lb_imbalance",
                "lb_imbalance / unbalanced pass"]  # fmt: skip
        rows = []
        for x in types:
            unbal = tot[f"lb_count_{x}"] - tot[f"lb_balanced_{x}"]
            per = tot[f"lb_imbalance_{x}"] / unbal if unbal else float("nan")
            # balanced passes that found neither "no busiest group" nor "no busiest queue"
            swb = tot[f"lb_balanced_{x}"] - tot[f"lb_nobusyg_{x}"] - tot[f"lb_nobusyq_{x}"]
            rows.append(
                [x] + [str(tot[f"{k}_{x}"]) for k in
                       ("lb_count", "lb_balanced", "lb_failed", "lb_gained",
                        "lb_hot_gained", "lb_nobusyg", "lb_nobusyq")]
                + [str(swb), str(tot[f"lb_imbalance_{x}"]), fmt(per, 2)]
            )  # fmt: skip
        out.append(md(rows, head))
        periodic_failed = tot["lb_failed_idle"] + tot["lb_failed_busy"]
        out.append(
            f"\nalb_count {tot['alb_count']}, alb_failed {tot['alb_failed']}, "
            f"alb_pushed {tot['alb_pushed']}; failures {failed}, of them newly idle "
            f"{tot['lb_failed_newidle']} (share {tot['lb_failed_newidle'] / failed:.3f}), "
            f"periodic {periodic_failed}\n"
        )
        head = ["CPU", "idle: count/balanced/failed", "busy: count/balanced/failed",
                "newidle: count/balanced/failed", "periodic failed",
                "balanced or moved passes (all types)", "alb_count"]  # fmt: skip
        rows = []
        for c in sorted(d, key=lambda s: int(s[3:])):
            x = d[c]
            cell = {y: f"{x[f'lb_count_{y}']}/{x[f'lb_balanced_{y}']}/{x[f'lb_failed_{y}']}"
                    for y in types}  # fmt: skip
            passes = sum(x[f"lb_count_{y}"] for y in types)
            fails = sum(x[f"lb_failed_{y}"] for y in types)
            rows.append(
                [c, cell["idle"], cell["busy"], cell["newidle"],
                 str(x["lb_failed_idle"] + x["lb_failed_busy"]), str(passes - fails),
                 str(x["alb_count"])]
            )  # fmt: skip
        out.append(md(rows, head))
        mx = max(d[c]["lb_failed_idle"] + d[c]["lb_failed_busy"] for c in d)
        per = [d[c]["lb_count_idle"] + d[c]["lb_count_busy"] for c in d]
        out.append(f"\nperiodic {LEVEL}-level passes per CPU in the ROI: {min(per)}-{max(per)}")
        out.append(
            f"\nmost periodic {LEVEL}-level failures on one CPU in the ROI: {mx} "
            f"(imbalanced_active_balance() needs nr_balance_failed ≥ {threshold})\n"
        )
    return "\n".join(out)


def main() -> None:
    hz_ = hz()
    sd = tomllib.loads(PRESET.read_text())["job"]["sched_domain"]
    cnt = numa_cache_nice_tries()
    thr_src = active_threshold_in_source()
    nice = 2 if cnt is None else cnt  # sd_init(), SD_NUMA branch (Linux 6.1)
    threshold = nice + 3  # nr_balance_failed > cache_nice_tries + 2
    print("## Settings\n")
    print(f"- HZ {hz_} ({KCONFIG.relative_to(ROOT)}): one jiffy = {1000 / hz_:g} ms")
    print(
        f"- preset {PRESET.relative_to(ROOT)}, level {sd['level']}: busy_factor "
        f"{sd['busy_factor']}, min_interval {sd['min_interval']} ms, max_interval "
        f"{sd['max_interval']} ms, migration_cost_ns {sd['migration_cost_ns']}"
    )
    print(
        "- should_we_balance() .. load_balance() and the *_active_balance() helpers, "
        f"unpatched vs patched tree ({KTREE}): {stock_spans_in_patched_tree()}"
    )
    src = "read from" if cnt is not None else "NOT checked (tree absent), code reading of"
    print(f"- cache_nice_tries of an SD_NUMA domain: {nice} ({src} {KSRC}/kernel/sched/topology.c)")
    print(
        f"- imbalanced_active_balance() threshold `nr_balance_failed > cache_nice_tries+2` "
        f"in fair.c: {'present' if thr_src else 'NOT checked' if thr_src is None else 'ABSENT'}"
        f"; so nr_balance_failed must reach {threshold}"
    )

    t = mix_table()
    runs = read_frames(FINDINGS["b192"]).runs
    spec = runs.iloc[0]
    cpus = int(spec.sockets) * int(spec.cores_per_socket)
    print(f"- CPUs {cpus} ({spec.sockets:g} sockets x {spec.cores_per_socket:g} cores)")
    warm = sorted({float(w) for d in FINDINGS.values() for w in read_frames(d).runs.warmup_s})
    print(f"- warm-up before the ROI (s): {', '.join(f'{w:g}' for w in warm)}\n")
    t = derive(t, cpus, hz_)

    patched = t[t.policy != "stock"]
    print("## Totals\n")
    n, n_p = len(t), len(patched)
    share_ni = t.schedstat_numa_passes_newidle / t.schedstat_numa_passes
    totals = [
        f"runs: {n} ({n_p} on the patched kernel, {n - n_p} stock)",
        f"lb_active_moved = 0 in {int((patched.lb_active_moved == 0).sum())} of {n_p} patched runs",
        "migrations_active_balance (all levels, the programs' threads) = 0 in "
        f"{int((patched.migrations_active_balance == 0).sum())} of {n_p}",
        f"NUMA-level alb_pushed = 0 in {int((t.schedstat_numa_active_pushed == 0).sum())} "
        f"of {n} runs (stock included)",
        f"ROI {rng(t.sim_seconds * 1e3, 1)} ms = {rng(t.ticks_per_cpu, 1)} jiffies per CPU",
        f"periodic NUMA-level passes per CPU (run mean): {rng(t.periodic / cpus, 1)}, "
        f"per CPU and jiffy: {rng(t.periodic_per_cpu_tick, 2)}",
        f"NUMA-level passes newly idle: {rng(share_ni, 3)} of all",
        "runs where failures exceed periodic passes (so some failures were newly idle "
        f"by count alone): {int((t.newidle_failed_min > 0).sum())} of {n}",
    ]
    print("\n".join(f"- {x}" for x in totals) + "\n")

    print("## Per policy (ranges over runs)\n")
    print(per_policy(t))
    print("\n## Per run\n")
    print(per_run(t))
    print("\n## The two runs with the raw /proc/schedstat (per idle type, per CPU)\n")
    print(fixtures(t, threshold))


if __name__ == "__main__":
    main()
