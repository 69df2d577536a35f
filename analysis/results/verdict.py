"""The verdict: the pre-registered confirmatory contrast and its decision
(issue 44 item 7), computed from the tidy metrics frame.

Endpoint (findings/2026-11-28-verdict-pilot/PLAN.md, rule 2): per repeat r,
d_r = the mean over the mix's programs of ln(t_baseline / t_policy), t = the
program's guest elapsed time (``entity_type == "program"``, ``metric ==
"elapsed_s"``). The two runs of a pair share every configuration column
(metrics.CONFIG_COLS present in the frame) and the repeat; only programs
present in both runs count. Estimate: the mean of d_r over the repeats with a
Student t interval; in percent (exp(x) - 1) x 100.

Primary contrast: ``excl`` against ``default``, NUMA balancing 0, 95 %
interval, decided by ``decide``: confirmed if the lower bound > 0 (and the
upper bound >= ln(1.03)); "confirmed, smaller than +3 %" if the whole interval
lies in (0, ln(1.03)) (excl faster, by less than a third of the paper's +10.7 %
for excl); refuted if the upper bound < ln(1.03) and the lower bound <= 0;
otherwise undecided (each bound is a one-sided test at 2.5 %: H0 no gain, H0 a
gain of +3 % or more); fewer than 2 paired repeats (or repeats that are all
identical) give no interval and no verdict. Sensitivity: Welch's unpaired t
interval on the per-run mean over programs of ln(t). Secondary contrasts:
every other policy against ``default`` (same endpoint; ``autonuma`` against
default with balancing off, as metrics.add_speedup pairs it), paired t-test
p-values Holm-adjusted within the family and intervals at the Bonferroni
level 1 - 0.05/m. Per program (exploratory, beside the result): the mean
over the repeats of the program's ln(t_baseline / t_policy) for the primary
arm, with its own 95 % t interval, unadjusted for the number of programs.

Each configuration is computed on its own (one ``Verdict`` per configuration
with both arms); ``primary`` marks those at the pre-registered machine,
NUMA factor 1.6 (not on QEMU, whose times are host time under TCG). Whether
any of it is confirmatory is not for this code to say: that needs a
pre-registration committed before the runs (findings/<name>/PREREGISTRATION.md).
Plain dataclasses and frames; the report's section is sections.verdict_section,
which reports the per-run gates and the mechanism beside the result (gates.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
from scipy import stats

from .metrics import CONFIG_COLS

POLICY = "excl"  # the pre-registered policy
BASELINE = "default"  # first fit on the same patched kernel and checkpoint
NUMA_BALANCING = 0
NUMA_FACTOR = 1.6  # the pre-registered machine (the verdict preset's)
LEVEL = 0.95
ALPHA = 1 - LEVEL
PAPER_PCT = 10.7  # Chiang & Su's improvement for excl
REFUTE_BELOW = math.log(1.03)  # +3 %: a third of the paper's +10.7 %
AUTONUMA = "autonuma"  # runs with NUMA balancing on; paired with the baseline off

CONFIRMED = "confirmed"
CONFIRMED_SMALL = "confirmed, smaller than +3 %"  # faster, by less than a third of the paper's
REFUTED = "refuted"
UNDECIDED = "undecided"
TOO_FEW = "not enough repeats"
IDENTICAL = "identical repeats"  # n >= 2 but no spread: no interval either


def pct(x: float) -> float:
    """A mean log ratio as a percent improvement: (exp(x) - 1) x 100."""
    return math.expm1(x) * 100.0 if math.isfinite(x) else math.nan


@dataclass(frozen=True)
class Contrast:
    """A policy against the baseline in one configuration: d_r per repeat
    (log scale), their mean and t interval at @level, and the paired t-test's
    two-sided p (p_holm: Holm-adjusted within the secondary family; nan for
    the primary contrast and where there is no test)."""

    policy: str
    numa_balancing: int
    baseline_numa_balancing: int
    per_repeat: dict[int, float]
    level: float
    mean: float
    lo: float
    hi: float
    p: float
    p_holm: float = math.nan
    programs: dict[int, int] = field(default_factory=dict)  # programs paired per repeat

    @property
    def n(self) -> int:
        return len(self.per_repeat)

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)


@dataclass(frozen=True)
class Welch:
    """Welch's unpaired t interval on the per-run mean over programs of
    ln(t): mean(baseline) - mean(policy), so its sign is the endpoint's."""

    mean: float
    lo: float
    hi: float
    df: float
    n_policy: int
    n_baseline: int


@dataclass(frozen=True)
class Verdict:
    """One configuration's primary contrast, its decision, the Welch check
    and the secondary family."""

    config: dict[str, Any]
    primary: bool  # at the pre-registered machine (NUMA factor 1.6, not QEMU)
    contrast: Contrast
    decision: str
    welch: Welch | None
    secondary: tuple[Contrast, ...]
    runs: int  # runs of the configuration with program times
    # the primary contrast per program (exploratory: no adjustment for the m programs)
    programs: dict[str, Contrast] = field(default_factory=dict)
    family_size: int | None = None  # a pre-registered family's m (else: the arms with a test)

    @property
    def bonferroni_level(self) -> float:
        m = self.family_size or sum(1 for c in self.secondary if math.isfinite(c.p))
        return 1 - ALPHA / m if m else math.nan


# ------------------------------------------------------------------ inputs
def config_cols(metrics: pd.DataFrame) -> list[str]:
    return [c for c in CONFIG_COLS if c in metrics.columns]


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def config_keys(frame: pd.DataFrame, cols: Sequence[str]) -> list[tuple[Any, ...]]:
    """Each row's configuration as a tuple of @cols (a Verdict's config in
    that order), missing values as None; a column @frame lacks is None."""
    n = len(frame)
    vals = [frame[c].astype(object) if c in frame.columns else [None] * n for c in cols]
    rows = zip(*vals, strict=True) if cols else [()] * n
    return [tuple(None if _missing(v) else v for v in t) for t in rows]


def program_times(metrics: pd.DataFrame) -> pd.DataFrame:
    """The programs' ln(elapsed) per run: columns cfg (a tuple of the
    configuration columns, missing values as None), cfg_id (its number),
    policy, numa_balancing, repeat, run_id, program, log_t. Non-positive or
    missing times are left out (a program without a time has none to compare)."""
    p = metrics[
        (metrics["entity_type"].astype(str) == "program")
        & (metrics["metric"].astype(str) == "elapsed_s")
    ]
    p = p[p["value"].notna() & (p["value"] > 0)]
    nb = p["numa_balancing"] if "numa_balancing" in p.columns else pd.Series(0, index=p.index)
    tuples = pd.Series(config_keys(p, config_cols(metrics)), dtype=object)
    return pd.DataFrame(
        {
            "cfg": tuples.to_numpy(),
            "cfg_id": pd.factorize(tuples)[0],
            "policy": p["policy"].astype(str).to_numpy(),
            "numa_balancing": pd.to_numeric(nb, errors="coerce").fillna(0).astype(int).to_numpy(),
            "repeat": p["repeat"].astype(int).to_numpy(),
            "run_id": p["run_id"].astype(str).to_numpy(),
            "program": p["entity"].astype(str).to_numpy(),
            "log_t": p["value"].map(math.log).to_numpy(),
        }
    )


def _arm(t: pd.DataFrame, cfg: int, policy: str, nb: int) -> pd.DataFrame:
    return t[(t["cfg_id"] == cfg) & (t["policy"] == policy) & (t["numa_balancing"] == nb)]


def _baseline_nb(policy: str, nb: int) -> int:
    return NUMA_BALANCING if policy == AUTONUMA else nb


# ------------------------------------------------------------------ statistics
def program_pairs(t: pd.DataFrame) -> pd.DataFrame:
    """Every program's ln(t_baseline / t_policy) (column diff) per arm and
    repeat, from program_times @t: one row per cfg_id, policy,
    numa_balancing, base_nb (the baseline's balancing), repeat and program
    that both runs have. Two runs of one point and repeat (two sweeps) are
    averaged per program first."""
    keys = ["cfg_id", "policy", "numa_balancing", "repeat", "program"]
    g = t.groupby(keys, sort=False)["log_t"].mean().reset_index()
    is_base = g["policy"] == BASELINE
    base = g[is_base].drop(columns="policy")
    base = base.rename(columns={"numa_balancing": "base_nb", "log_t": "log_base"})
    arms = g[~is_base].copy()
    arms["base_nb"] = [_baseline_nb(p, nb) for p, nb in zip(arms["policy"], arms["numa_balancing"],
                                                              strict=True)]  # fmt: skip
    m = arms.merge(base, on=["cfg_id", "base_nb", "repeat", "program"], how="inner")
    m["diff"] = m["log_base"] - m["log_t"]
    return m[["cfg_id", "policy", "numa_balancing", "base_nb", "repeat", "program", "diff"]]


def pairs(t: pd.DataFrame) -> pd.DataFrame:
    """d_r of every arm of every configuration against the baseline, from
    program_times @t: one row per cfg_id, policy, numa_balancing, base_nb
    (the baseline's balancing) and repeat, with d (the mean over the
    programs both runs have of ln(t_baseline / t_policy)) and programs (how
    many). Two runs of one point and repeat (two sweeps) are averaged per
    program first."""
    return _mean_over_programs(program_pairs(t))


def _mean_over_programs(pp: pd.DataFrame) -> pd.DataFrame:
    out = pp.groupby(["cfg_id", "policy", "numa_balancing", "base_nb", "repeat"], sort=True)
    return out["diff"].agg(d="mean", programs="size").reset_index()


def by_program(pp: pd.DataFrame) -> dict[str, Contrast]:
    """One arm's contrast per program, from its program_pairs rows @pp: the
    mean over the repeats of the program's ln(t_baseline / t_policy) with
    its 95 % t interval (none with fewer than 2 repeats or no spread), in
    the order of the program names."""
    rows = pp.rename(columns={"diff": "d"}).assign(programs=1)
    return {str(prog): paired(g.sort_values("repeat"), LEVEL)
            for prog, g in sorted(rows.groupby("program"), key=lambda x: str(x[0]))}  # fmt: skip


def t_interval(x: Sequence[float], level: float) -> tuple[float, float, float, float]:
    """mean, the Student t interval's bounds at @level and the two-sided p of
    the one-sample t-test against 0; bounds and p nan for fewer than 2
    values or no spread."""
    n = len(x)
    mean = sum(x) / n if n else math.nan
    if n < 2:
        return mean, math.nan, math.nan, math.nan
    if max(x) == min(x):  # identical repeats (a deterministic run): no spread to measure
        return mean, math.nan, math.nan, math.nan
    se = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1)) / math.sqrt(n)
    q = float(stats.t.ppf(1 - (1 - level) / 2, n - 1))
    p = float(2 * stats.t.sf(abs(mean / se), n - 1))
    return mean, mean - q * se, mean + q * se, p


def paired(rows: pd.DataFrame, level: float) -> Contrast:
    """The contrast of one arm from its rows of ``pairs`` (one per repeat)."""
    first = rows.iloc[0]
    d = {int(r): float(v) for r, v in zip(rows["repeat"], rows["d"], strict=True)}
    mean, lo, hi, p = t_interval(list(d.values()), level)
    return Contrast(str(first["policy"]), int(first["numa_balancing"]), int(first["base_nb"]), d,
                    level, mean, lo, hi, p,
                    programs={int(r): int(v) for r, v in zip(rows["repeat"], rows["programs"],
                                                             strict=True)})  # fmt: skip


def _per_run(rows: pd.DataFrame) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for run, prog, log_t in zip(rows["run_id"], rows["program"], rows["log_t"], strict=True):
        out.setdefault(run, {})[prog] = log_t
    return out


def welch(t: pd.DataFrame, cfg: int, policy: str, nb: int, base_nb: int,
          level: float = LEVEL) -> Welch | None:  # fmt: skip
    """Welch's interval on the per-run mean over programs of ln(t), over
    every run of each arm; the programs are those every one of these runs
    has (the two means then average the same programs). None with fewer than
    2 runs an arm, or no spread in either."""
    ra, rb = _per_run(_arm(t, cfg, BASELINE, base_nb)), _per_run(_arm(t, cfg, policy, nb))
    if len(ra) < 2 or len(rb) < 2:
        return None
    common = set.intersection(*(set(v) for v in [*ra.values(), *rb.values()]))
    if not common:
        return None
    xa = [statistics.fmean(v[p] for p in common) for v in ra.values()]
    xb = [statistics.fmean(v[p] for p in common) for v in rb.values()]
    if max(xa) == min(xa) and max(xb) == min(xb):
        return None
    va, vb = statistics.variance(xa) / len(xa), statistics.variance(xb) / len(xb)
    df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))
    diff = statistics.fmean(xa) - statistics.fmean(xb)
    half = float(stats.t.ppf(1 - (1 - level) / 2, df)) * math.sqrt(va + vb)
    return Welch(diff, diff - half, diff + half, df, len(xb), len(xa))


def holm(ps: Sequence[float], m: int | None = None) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given; a nan p (no
    test) stays nan. The family's size is the number of tests, or @m when
    given (a pre-registered family whose arm has no test still counts)."""
    idx = sorted((i for i, p in enumerate(ps) if math.isfinite(p)), key=lambda i: ps[i])
    m = len(idx) if m is None else max(m, len(idx))
    out = [math.nan] * len(ps)
    running = 0.0
    for k, i in enumerate(idx):
        running = max(running, min(1.0, (m - k) * ps[i]))
        out[i] = running
    return out


def decide(c: Contrast) -> str:
    """The pre-registered rule on the primary contrast's 95 % interval (log
    scale): its bounds are two one-sided tests at 2.5 %, lo > 0 (a gain) and
    hi < ln(1.03) (no gain of +3 %, a third of the paper's); both can hold."""
    if c.n < 2:
        return TOO_FEW
    if not c.has_interval:
        return IDENTICAL
    if c.lo > 0:
        return CONFIRMED if c.hi >= REFUTE_BELOW else CONFIRMED_SMALL
    if c.hi < REFUTE_BELOW:
        return REFUTED
    return UNDECIDED


# ------------------------------------------------------------------ verdicts
def _is_primary_machine(config: dict[str, Any]) -> bool:
    """NUMA factor 1.6 on a simulated machine (QEMU's times are host time)."""
    f = config.get("numa_factor")
    at = isinstance(f, int | float) and not _missing(f) and abs(float(f) - NUMA_FACTOR) < 1e-9
    return at and config.get("backend") != "qemu"


def secondary_family(
    arms: Sequence[pd.DataFrame | Contrast], m: int | None = None
) -> tuple[Contrast, ...]:
    """The secondary contrasts of one configuration from their ``pairs``
    rows (every policy and balancing setting but the baseline and the
    primary arm; an arm given as a Contrast has no pairs): Holm over those
    with a test (m of them, or @m: a pre-registered family's size), each
    interval at the Bonferroni level 1 - 0.05/m."""
    first = [a if isinstance(a, Contrast) else paired(a, LEVEL) for a in arms]
    if m is None:
        m = sum(1 for c in first if math.isfinite(c.p))
    level = 1 - ALPHA / m if m else LEVEL
    adj = holm([c.p for c in first], m)
    out = []
    for c, a in zip(first, adj, strict=True):
        _, lo, hi, _ = t_interval(list(c.per_repeat.values()), level)
        out.append(replace(c, level=level, lo=lo, hi=hi, p_holm=a))
    return tuple(out)


def arm_key(policy: str) -> tuple[str, int]:
    """A secondary arm by name: its policy and NUMA balancing (autonuma's on)."""
    return policy, 1 if policy == AUTONUMA else NUMA_BALANCING


def no_pairs(policy: str) -> Contrast:
    """A pre-registered arm without a paired repeat: no estimate, no test."""
    pol, nb = arm_key(policy)
    return Contrast(pol, nb, _baseline_nb(pol, nb), {}, LEVEL, math.nan, math.nan, math.nan,
                    math.nan)  # fmt: skip


def verdicts(metrics: pd.DataFrame, family: Sequence[str] | None = None) -> list[Verdict]:
    """One Verdict per configuration that has runs of both the policy and the
    baseline at NUMA balancing 0 with at least one paired repeat, in the
    order the configurations first appear in @metrics. The secondary family
    is every other arm of the configuration, or exactly the policies of
    @family in that order (a pre-registered family: an arm without pairs
    stays in it with no test and counts in m; an arm not named is left out)."""
    t = program_times(metrics)
    cols = config_cols(metrics)
    pp = program_pairs(t)
    arms: dict[int, dict[tuple[str, int], pd.DataFrame]] = {}
    for (cfg, pol, nb), rows in _mean_over_programs(pp).groupby(
        ["cfg_id", "policy", "numa_balancing"]
    ):
        arms.setdefault(int(cfg), {})[(str(pol), int(nb))] = rows
    keys = t.drop_duplicates("cfg_id").set_index("cfg_id")["cfg"]
    out = []
    for cfg, sub in t.groupby("cfg_id", sort=False):
        mine = arms.get(int(cfg), {})
        prim = mine.get((POLICY, NUMA_BALANCING))
        if prim is None:
            continue
        config = dict(zip(cols, keys[cfg], strict=True))
        c = paired(prim, LEVEL)
        others: list[pd.DataFrame | Contrast]
        if family is None:
            others = [mine[k] for k in sorted(mine) if k != (POLICY, NUMA_BALANCING)]
        else:
            others = [mine[arm_key(p)] if arm_key(p) in mine else no_pairs(p) for p in family]
        out.append(
            Verdict(
                config,
                _is_primary_machine(config),
                c,
                decide(c),
                welch(sub, int(cfg), POLICY, NUMA_BALANCING, NUMA_BALANCING),
                secondary_family(others, None if family is None else len(family)),
                int(sub["run_id"].nunique()),
                by_program(_arm(pp, int(cfg), POLICY, NUMA_BALANCING)),
                None if family is None else len(family),
            )
        )
    return out


def decided(vs: Sequence[Verdict]) -> bool:
    """Whether any configuration has the paired repeats (>= 2) for a verdict:
    the report shows its section only then."""
    return any(v.contrast.n >= 2 for v in vs)


def contrast_frame(vs: Sequence[Verdict]) -> pd.DataFrame:
    """Every contrast of @vs as one row: the configuration's columns, role
    (primary / secondary), policy, balancing, n, level, mean and bounds on
    the log scale and in percent, p, p_holm, and the decision (primary rows)."""
    rows = []
    for v in vs:
        for role, c in [("primary", v.contrast)] + [("secondary", s) for s in v.secondary]:
            rows.append(
                {**v.config, "role": role, "preregistered_machine": v.primary,
                 "policy": c.policy, "numa_balancing": c.numa_balancing,
                 "baseline": BASELINE, "baseline_numa_balancing": c.baseline_numa_balancing,
                 "n": c.n, "level": c.level, "mean": c.mean, "lo": c.lo, "hi": c.hi,
                 "mean_pct": pct(c.mean), "lo_pct": pct(c.lo), "hi_pct": pct(c.hi),
                 "p": c.p, "p_holm": c.p_holm,
                 "decision": v.decision if role == "primary" else None}
            )  # fmt: skip
    return pd.DataFrame(rows)
