"""The first finding's analysis (issue 15): positive control, go/no-go gate,
improvement over the unmodified kernel per NUMA factor with paired 95 % CIs,
and a conclusion written from those numbers.

Everything here reads the mix-level rows of the tidy metrics frame
(``entity_type == "mix"``), except improvement_by_program (its program rows),
and returns plain frames and sentences; report.py lays them out. Thresholds
are the issue's, named once below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .metrics import summarize, t975

# Go/no-go gate of a discriminating scenario (issue 15 item 2)
GATE_MIN_BALANCE_XNODE = 50  # default: cross-node load-balancing migrations per run
GATE_LEADER_POLICIES = ("mbplus", "excl", "mbplus_ff", "excl_ff")  # leader takes, skips > 0
BALANCE_XNODE = ("migrations_balance_xnode", "migrations_active_balance_xnode")
LEADER_COUNTERS = ("lb_taken_leader_dst", "lb_skipped_leader_src")

FIDELITY_CAVEATS = (
    "no L3 (MOESI_hammer: the LLC is the private L2)",
    "in-order TimingSimpleCPU in the ROI",
    "synthetic programs (not PARSEC)",
    "Linux 6.1 instead of the paper's 3.11",
    "balancing intervals scaled to the ROI (docs/DESIGN.md, Time scale)",
)


def _values(mx: pd.DataFrame, metric: str) -> pd.DataFrame:
    return mx[mx["metric"] == metric]


def _link_cycles(v: object) -> float:
    """A link latency axis value ("60", 60, "20ns") as a sort key: cycles, or nan."""
    try:
        return float(str(v))
    except ValueError:
        return math.nan


def machine_label(numa_factor: float, link_latency: object) -> str:
    """How a control row names its machine: the requested factor, else the link."""
    if not math.isnan(numa_factor):
        return f"f={numa_factor:g}"
    return f"link {link_latency}" if link_latency not in (None, "") else "?"


def machines(mx: pd.DataFrame) -> list[str]:
    """machine_label of every row: points given by link latency keep their link
    apart (their numa_factor is NaN, so grouping by it would merge the links)."""
    links = mx["link_latency"] if "link_latency" in mx.columns else [None] * len(mx)
    return [
        machine_label(float(f), "" if ll is None or ll != ll else ll)
        for f, ll in zip(mx["numa_factor"], links, strict=True)
    ]


def machines_with_mix(mx: pd.DataFrame) -> list[str]:
    """machines(), plus the mix when the rows hold several (a pilot and its
    variants): their runs must not be averaged together."""
    labels = machines(mx)
    if "mix" in mx.columns and mx["mix"].astype(str).nunique() > 1:
        labels = [f"{m} {x}" for m, x in zip(labels, mx["mix"].astype(str), strict=True)]
    # ... and the balancer's time scale when runs set different ones
    if "sched_scale" in mx.columns:
        # a missing value (NaN/None) is a real setting here: the kernel's defaults
        sc = ["kernel defaults" if x is None or x != x else str(x) for x in mx["sched_scale"]]
        if len(set(sc)) > 1:
            labels = [f"{m} [{x}]" for m, x in zip(labels, sc, strict=True)]
    # ... and NUMA balancing's scan time constants when runs set different ones
    if "nb_scan" in mx.columns:
        nbs = ["kernel scan" if x is None or x != x else str(x) for x in mx["nb_scan"]]
        if len(set(nbs)) > 1:
            labels = [f"{m} [{x}]" for m, x in zip(labels, nbs, strict=True)]
    # ... and the ROI CPU model (in-order timing vs out-of-order) when it differs
    if "cpu_roi" in mx.columns:
        # frames kept before the column: every gem5 run so far had the timing CPU
        backend = mx["backend"].astype(str) if "backend" in mx.columns else [""] * len(mx)
        cpu = [
            str(x) if x is not None and x == x else ("timing" if b == "gem5" else "no ROI")
            for x, b in zip(mx["cpu_roi"], backend, strict=True)
        ]
        if len(set(cpu)) > 1:
            labels = [f"{m} [{x} CPU]" for m, x in zip(labels, cpu, strict=True)]
    return labels


def machine_order(label: str) -> tuple[int, float]:
    """Sort key of a machine_label: factors first, then links, each numerically."""
    if label.startswith("f="):
        return (0, _link_cycles(label[2:].split(" ")[0]))
    if label.startswith("link "):
        return (1, _link_cycles(label[5:].split(" ")[0]))
    return (2, math.nan)


def positive_control(mx: pd.DataFrame) -> pd.DataFrame | None:
    """Per machine (requested NUMA factor, or inter-socket link latency for
    points given by latency; machines_with_mix keeps a different mix, time
    scale or ROI CPU apart): mean elapsed pinned direct and crossed, their
    ratio, and the gem5 remote-access ratio of each. None without both pinnings."""
    if "pinning" not in mx.columns:
        return None
    pins = set(mx["pinning"].dropna().astype(str))
    if not {"direct", "crossed"} <= pins:
        return None
    # only the pinned runs: a sweep's free runs kept beside the control (the
    # finding's frame holds both) would add machines with no pair, a "xnan"
    # ratio and a false "does NOT grow with f"
    mx = mx[mx["pinning"].astype(str).isin(("direct", "crossed"))].copy()
    if "link_latency" not in mx.columns:
        mx["link_latency"] = ""
    # object first: a categorical column (frames read back) refuses a new "" value
    mx["link_latency"] = mx["link_latency"].astype(object).fillna("").astype(str)
    mx["_machine"] = machines_with_mix(mx)
    rows = []
    keys = ["numa_factor", "link_latency", "_machine"]
    for (f, ll, label), g in mx.groupby(keys, dropna=False, observed=True):
        row: dict[str, object] = {"numa_factor": float(f), "link_latency": ll}
        row["machine"] = label
        # what sets the row apart besides the factor (mix, time scale, ROI CPU)
        row["variant"] = str(label)[len(machine_label(float(f), ll)) :].strip()
        for pin in ("direct", "crossed"):
            gp = g[g["pinning"].astype(str) == pin]
            for metric, col in (("elapsed_s", "elapsed"), ("remote_ratio", "remote_ratio")):
                v = gp[gp["metric"] == metric]["value"]
                row[f"{col}_{pin}"] = float(v.mean()) if len(v) else math.nan
        d, c = row["elapsed_direct"], row["elapsed_crossed"]
        row["crossed_over_direct"] = c / d if d and d > 0 else math.nan  # type: ignore[operator]
        rows.append(row)
    out = pd.DataFrame(rows)
    out["_link"] = out["link_latency"].map(_link_cycles)
    out = out.sort_values(["variant", "numa_factor", "_link"]).drop(columns="_link")
    return out.reset_index(drop=True)


def _variants(ctl: pd.DataFrame) -> pd.Series:
    """positive_control's variant column ("" for a table made without one)."""
    return ctl["variant"] if "variant" in ctl.columns else pd.Series([""] * len(ctl))


def control_grows(ctl: pd.DataFrame) -> bool:
    """The NUMA effect (crossed/direct) grows with f, strictly, over >= 2 factors
    of each variant (a variant measured at one factor only tests nothing)."""
    variants = _variants(ctl)
    tested = False
    for v in dict.fromkeys(variants):
        r = ctl[variants.to_numpy() == v]["crossed_over_direct"].tolist()
        if len(r) < 2:
            continue
        tested = True
        if not all(b > a for a, b in zip(r, r[1:], strict=False)):
            return False
    return tested


@dataclass
class GateResult:
    rows: pd.DataFrame  # one per (machine, policy, repeat, check)
    passed: bool
    reasons: list[str]


def gate(mx: pd.DataFrame) -> GateResult | None:
    """The go/no-go gate per run: default needs >= GATE_MIN_BALANCE_XNODE
    cross-node load-balancing migrations (detach + active balance, summed over
    the mix's thread groups, kernel counts at program end); mbplus and excl
    need non-zero leader-on-destination takes and leader-on-source skips.
    None when the runs hold none of those policies. Pinned runs (the positive
    control's direct/crossed) and one-program runs are left out: they test
    nothing here (a pinned thread cannot move; one program has no competitor)."""
    if "pinning" in mx.columns:
        free = [p is None or p != p or str(p) == "free" for p in mx["pinning"].astype(object)]
        mx = mx[free]
    # ... and so are runs of one program (a calibration's pointer chase): the
    # mechanism needs several programs competing for the nodes
    if {"entity_type", "entity", "run_id"} <= set(mx.columns):
        progs = mx[mx["entity_type"].astype(str) == "program"]
        per_run = progs.groupby("run_id", observed=True)["entity"].nunique()
        single = set(per_run[per_run < 2].index)
        mx = mx[~mx["run_id"].isin(single)] if single else mx
    pol = mx["policy"].astype(str)
    have = set(pol)
    if "default" not in have and not have & set(GATE_LEADER_POLICIES):
        return None
    # one row per run: a sweep may hold several mixes (a pilot and its variant)
    mx = mx.assign(_machine=machines_with_mix(mx))
    rows = []
    for (p, m_, r), g in mx.groupby([pol, "_machine", "repeat"], dropna=False, observed=True):
        # the ROI's simulated length (gem5), so a failing scenario says how
        # long a ROI would need to be at the same rate
        roi = g[g["metric"] == "sim_seconds"]["value"]
        roi_s = float(roi.iloc[0]) if len(roi) else math.nan
        if p == "default":
            vals = [g[g["metric"] == m]["value"] for m in BALANCE_XNODE]
            v = float(sum(x.sum() for x in vals)) if all(len(x) for x in vals) else math.nan
            rows.append((m_, p, r, "cross-node balancing migrations", v,
                         f">= {GATE_MIN_BALANCE_XNODE}",
                         bool(v >= GATE_MIN_BALANCE_XNODE), roi_s))  # fmt: skip
        elif p in GATE_LEADER_POLICIES:
            for m in LEADER_COUNTERS:
                x = g[g["metric"] == m]["value"]
                v = float(x.sum()) if len(x) else math.nan
                rows.append((m_, p, r, m, v, "> 0", bool(v > 0), roi_s))
    df = pd.DataFrame(
        rows, columns=["machine", "policy", "repeat", "check", "value", "needs", "ok", "roi_s"]
    )
    df["per_100ms"] = df["value"] / df["roi_s"] * 0.1
    reasons = [
        f"{x.policy} {x.machine} r{int(x.repeat)}: {x.check} = {x.value:g} (needs {x.needs})"
        for x in df[~df["ok"]].itertuples()
    ]
    return GateResult(df, bool(len(df)) and not reasons, reasons)


def improvement_by_factor(mx: pd.DataFrame) -> pd.DataFrame:
    """Improvement over the baseline (stock where the runs have it) per policy
    and machine (NUMA factor, or link latency for points given by it): mean,
    95 % CI bounds over repeats (paired by repeat), n, and whether the
    interval excludes 0."""
    imp = mx[mx["metric"] == "improvement_pct"]
    if "baseline" in imp.columns:
        imp = imp[imp["policy"].astype(str) != imp["baseline"].astype(str)]
    if imp.empty:
        return pd.DataFrame(
            columns=["policy", "numa_factor", "machine", "mean", "ci95_lo", "ci95_hi", "n",
                     "differs"]
        )  # fmt: skip
    imp = imp.assign(machine=machines_with_mix(imp))
    s = summarize(imp, ["policy", "numa_factor", "machine"])
    s["differs"] = (s["n"] >= 2) & ((s["ci95_lo"] > 0) | (s["ci95_hi"] < 0))
    return s.sort_values(
        ["machine", "policy"], key=lambda c: c.map(machine_order) if c.name == "machine" else c
    ).reset_index(drop=True)


RESOLUTION_TARGET_PCT = 2.0  # the interval half-width a referee would want, in points


def repeats_for(sd: float, half_width: float) -> int | None:
    """Fewest paired repeats n whose 95 % interval (t(n-1) sd / sqrt n) is at
    most half_width (2 when the repeats do not vary); None beyond 1000 or for
    an unusable input."""
    if not (sd >= 0 and half_width > 0):
        return None
    if sd == 0:
        return 2
    for n in range(2, 1001):
        if t975(n - 1) * sd / math.sqrt(n) <= half_width:
            return n
    return None


def resolution(imp: pd.DataFrame) -> str | None:
    """How wide the intervals are, and how many paired repeats would give a
    half-width of RESOLUTION_TARGET_PCT at the measured spread (medians over
    the points with >= 2 pairs): "no difference" means little without it."""
    ok = imp[(imp["n"] >= 2) & imp["std"].notna()]
    if ok.empty:
        return None
    hw = float(ok["ci95"].median())
    sd = float(ok["std"].median())
    n = repeats_for(sd, RESOLUTION_TARGET_PCT)
    need = f"about {n}" if n is not None else "more than 1000"
    lo, hi = int(ok["n"].min()), int(ok["n"].max())
    pairs = f"{lo} pairs each" if lo == hi else f"{lo}-{hi} pairs"
    return (
        f"Resolution: the 95 % intervals are +/-{hw:.1f} points wide (median over "
        f"{len(ok)} points, {pairs}); at the measured spread "
        f"(median sd of the paired improvement {sd:.1f} points) +/-"
        f"{RESOLUTION_TARGET_PCT:g} would need {need} paired repeats."
    )


def improvement_by_program(metrics: pd.DataFrame) -> pd.DataFrame:
    """improvement_by_factor per program of the mix (entity_type "program"):
    a policy that keeps one program's threads near their data can speed that
    program up while the mix's elapsed time, set by its slowest program, does
    not move."""
    if "entity_type" not in metrics.columns:
        return pd.DataFrame()
    prog = metrics[(metrics["entity_type"].astype(str) == "program")
                   & (metrics["metric"] == "improvement_pct")]  # fmt: skip
    if "baseline" in prog.columns:
        prog = prog[prog["policy"].astype(str) != prog["baseline"].astype(str)]
    if prog.empty:
        return pd.DataFrame()
    prog = prog.assign(machine=machines_with_mix(prog), program=prog["entity"].astype(str))
    s = summarize(prog, ["policy", "numa_factor", "machine", "program"])
    s["differs"] = (s["n"] >= 2) & ((s["ci95_lo"] > 0) | (s["ci95_hi"] < 0))
    return s.sort_values(
        ["machine", "policy", "program"],
        key=lambda c: c.map(machine_order) if c.name == "machine" else c,
    ).reset_index(drop=True)


HOME_METRICS = ("start_home_share", "home_node_share", "home_node_load")


def home_node_by_program(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per policy, machine and program: start_home_share, home_node_share and
    home_node_load (metrics.py) as mean, min and max over the runs, and the
    number of runs. A
    leader-on-destination take needs a thread away from its leader's node and
    that node pulling: workers that start there (start share 1) and are never
    seen away (home share 1 in every run) leave nothing to take. Empty without
    those metrics (older frames); a stock kernel has only the start share."""
    if "entity_type" not in metrics.columns:
        return pd.DataFrame()
    d = metrics[(metrics["entity_type"].astype(str) == "program")
                & metrics["metric"].isin(HOME_METRICS)]  # fmt: skip
    if d.empty:
        return pd.DataFrame()
    d = d.assign(machine=machines_with_mix(d), program=d["entity"].astype(str),
                 metric=d["metric"].astype(str), policy=d["policy"].astype(str))  # fmt: skip
    t = (
        d.groupby(["policy", "machine", "program", "metric"], observed=True)["value"]
        .agg(["mean", "min", "max", "size"])
        .unstack("metric")
    )
    t.columns = [f"{m}_{a}" for a, m in t.columns]
    for m in HOME_METRICS:  # a frame of stock runs only has no kMLB share
        for a in ("mean", "min", "max", "size"):
            if f"{m}_{a}" not in t.columns:
                t[f"{m}_{a}"] = math.nan
    t["runs"] = t[[f"{m}_size" for m in HOME_METRICS]].max(axis=1)
    return (
        t.reset_index()
        .sort_values(
            ["machine", "policy", "program"],
            key=lambda c: c.map(machine_order) if c.name == "machine" else c,
        )
        .reset_index(drop=True)
    )


def _why_no_takes(g: GateResult, home: pd.DataFrame | None) -> str | None:
    """A failed take check whose policy never had a thread of some program
    away from that program's home node (home-node share 1 in every run)."""
    if home is None or home.empty or g.rows.empty:
        return None
    failed = g.rows[(~g.rows["ok"]) & (g.rows["check"] == "lb_taken_leader_dst")]
    pols = sorted(set(failed["policy"].astype(str)))
    h = home[home["policy"].isin(pols) & (home["home_node_share_min"] >= 1.0)]
    progs = sorted(set(h["program"]))
    if not pols or not progs:
        return None
    return (
        f"Why the take check failed: under {', '.join(pols)} every thread of "
        f"{', '.join(progs)} was on its home node in every sample of every run "
        "(home-node share 1.000), so there was no thread away from its leader to take back."
    )


def _machine_of(r: Any) -> str:
    m = getattr(r, "machine", None)
    return str(m) if isinstance(m, str) else machine_label(float(r.numa_factor), "")


def conclusion(
    imp: pd.DataFrame,
    gate_result: GateResult | None,
    ctl: pd.DataFrame | None,
    backends: frozenset[str] = frozenset({"gem5"}),
    programs: pd.DataFrame | None = None,
    home: pd.DataFrame | None = None,
) -> list[str]:
    """Sentences written from the numbers: the control, the gate, which
    policies differ from the baseline beyond their intervals at which f, the
    intervals' resolution, and (exploratory) which programs differ. @home
    (home_node_by_program) explains a failed take check when it can."""
    out = []
    if ctl is not None and len(ctl):
        rs = ", ".join(f"{r.machine}: x{r.crossed_over_direct:.3f}" for r in ctl.itertuples())
        if _variants(ctl).value_counts().max() < 2:
            grows = "is measured on one machine only: growth with f is not tested"
        else:
            grows = "grows with f" if control_grows(ctl) else "does NOT grow with f"
        out.append(f"Positive control: crossed/direct elapsed {rs}; the NUMA effect {grows}.")
    if gate_result is not None:
        if gate_result.passed:
            out.append("Gate: passed in every run; the scenario can discriminate the policies.")
        else:
            out.append(
                f"Gate: FAILED in {len(gate_result.reasons)} check(s) "
                f"(e.g. {gate_result.reasons[0]}); this scenario is not used for conclusions."
            )
            if (why := _why_no_takes(gate_result, home)) is not None:
                out.append(why)
    if not imp.empty and (gate_result is None or gate_result.passed):
        diff = imp[imp["differs"]]
        few = imp[imp["n"] < 2]
        if len(few):  # one pair gives no interval: say so, never "no difference"
            pts = ", ".join(f"{r.policy} at {_machine_of(r)}" for r in few.itertuples())
            out.append(
                f"No 95 % interval for {pts}: fewer than two paired repeats; "
                "these points are not compared."
            )
        if diff.empty and len(few) < len(imp):
            out.append(
                "No policy with two or more paired repeats differs from the baseline "
                "beyond its 95 % interval at any NUMA factor."
            )
        if (res := resolution(imp)) is not None:
            out.append(res)
        for r in diff.itertuples():
            word = "faster" if r.mean > 0 else "slower"
            out.append(
                f"{r.policy} at {_machine_of(r)}: {r.mean:+.1f} % "
                f"[{r.ci95_lo:+.1f}, {r.ci95_hi:+.1f}] ({word} than the baseline, "
                f"{int(r.n)} paired repeats)."
            )
    if programs is not None and len(programs) and (gate_result is None or gate_result.passed):
        tested = programs[programs["n"] >= 2]
        pd_ = tested[tested["differs"]]
        # many comparisons at 95 % each: some clear their interval by chance
        m = len(tested)
        chance = f"exploratory: {m} comparisons, about {0.05 * m:.1f} expected by chance"
        if len(pd_):
            out.append(
                f"Per program, beyond the 95 % interval ({chance}): "
                + "; ".join(
                    f"{r.program} under {r.policy} at {_machine_of(r)} {r.mean:+.1f} % "
                    f"[{r.ci95_lo:+.1f}, {r.ci95_hi:+.1f}]"
                    for r in pd_.itertuples()
                )
                + "."
            )
        elif m:
            out.append(
                f"No program differs from the baseline beyond its 95 % interval ({m} comparisons)."
            )
    if "qemu" in backends:
        out.append(
            "QEMU runs: functional emulation, their times are NOT architectural performance; "
            "read the counts, not the improvements."
        )
    if "gem5" in backends:
        out.append("Fidelity caveats: " + "; ".join(FIDELITY_CAVEATS) + ".")
    return out
