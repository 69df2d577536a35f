"""The verdict's per-run gates and the mechanism beside its result (issue 44
item 7), from the tidy metrics and runs frames.

The gates are the pre-registered ones of findings/2026-11-28-verdict-pilot/
PLAN.md ("Gates (per run)", committed before the pilot's first run; coded
there in pilot.py ``run_gates``, whose constants tests/unit/test_verdict_gates.py
holds these to):

* regime (every policy): ``sched_runnable_per_cpu_all_running >= 3`` and
  ``sched_busy_fraction_all_running >= 0.9``;
* mechanism: ``default`` at least 50 cross-node balancing migrations
  (``migrations_balance_xnode + migrations_active_balance_xnode``); ``excl``,
  ``excl_ff``, ``mbplus_ff`` and also ``mbplus`` (the same leader rules,
  which finding.py's gate checks too): ``lb_taken_leader_dst > 0`` and
  ``lb_skipped_leader_src > 0``. Any other policy (``excl_base``, which has
  no leader rules, ``stock``, ``autonuma``, ...) has no mechanism gate: None,
  neither passed nor failed;
* platform (every policy; amendment 6): ``sched_stalled_cpus_all_running
  == 0``, no CPU halted with tasks queued while all programs run (gem5's
  idle-HLT race, findings/2026-11-28-idle-hlt);
* a run that is not ``done`` fails them all; so does a gate value that was
  not measured (NaN compares false, as in pilot.py).

Every run is kept: the gates are reported beside the result and never drop
a run from a contrast. The mechanism counters (``MECHANISM``) are reported
per policy beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from .verdict import config_cols, config_keys

REGIME = {"sched_runnable_per_cpu_all_running": 3.0, "sched_busy_fraction_all_running": 0.9}
XNODE = ("migrations_balance_xnode", "migrations_active_balance_xnode")
MIN_XNODE = 50  # default: cross-node balancing migrations per run
XNODE_POLICIES = ("default",)
LEADER = ("lb_taken_leader_dst", "lb_skipped_leader_src")  # each > 0
PLAN_LEADER_POLICIES = ("excl", "excl_ff", "mbplus_ff")  # PLAN.md's list
LEADER_POLICIES = (*PLAN_LEADER_POLICIES, "mbplus")  # mbplus: the same leader rules
PLATFORM = "sched_stalled_cpus_all_running"  # == 0 (amendment 6)
DONE = "done"

XNODE_BALANCE = "xnode_balance"  # derived: the sum of XNODE
PICKED_NONE_SHARE = "picked_none_share"  # derived: lb_picked_none / lb_attempts
# the mechanism beside the result, per run (mix rows); derived ones last
MECHANISM = ("run_delay_ms_per_thread", PICKED_NONE_SHARE, "remote_ratio", XNODE_BALANCE,
             "cross_node_migrations")  # fmt: skip
COUNTERS = (*REGIME, *XNODE, *LEADER, PLATFORM, "run_delay_ms_per_thread", "lb_picked_none",
            "lb_attempts", "remote_ratio", "cross_node_migrations")  # fmt: skip
RUN_COLS = ("run_id", "cfg", "policy", "numa_balancing", "repeat", "state")
# the values summary() takes the median of
VALUES = tuple(dict.fromkeys([*REGIME, XNODE_BALANCE, *LEADER, PLATFORM, *MECHANISM]))


def _info(frame: pd.DataFrame, cols: Sequence[str], state: Any) -> pd.DataFrame:
    """One row per run of @frame: run_id, cfg (verdict.config_keys), policy,
    numa_balancing, repeat and state (@state where @frame has no column)."""
    f = frame.drop_duplicates("run_id")
    n = len(f)

    def col(c: str, default: Any) -> list[Any]:
        return list(f[c].astype(object)) if c in f.columns else [default] * n

    return pd.DataFrame(
        {
            "run_id": f["run_id"].astype(str).to_list(),
            "cfg": pd.Series(config_keys(f, cols), dtype=object).to_list(),
            "policy": [str(p) for p in col("policy", None)],
            "numa_balancing": pd.to_numeric(pd.Series(col("numa_balancing", 0)), errors="coerce")
            .fillna(0)
            .astype(int)
            .to_list(),
            "repeat": col("repeat", None),
            "state": [str(s) for s in col("state", state)],
        },
        columns=list(RUN_COLS),
    )


def run_table(metrics: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every run once: RUN_COLS and the mix's COUNTERS (NaN where not
    measured). The runs of @metrics (done runs: frames.py) and those of
    @runs that @metrics lacks (failed, timed out, ... with their state); a
    run in both keeps @metrics' configuration and @runs' state."""
    cols = config_cols(metrics)
    info = _info(metrics, cols, DONE)
    if runs is not None and not runs.empty:
        other = _info(runs, cols, None)
        state = dict(zip(other["run_id"], other["state"], strict=True))
        info["state"] = [state.get(r, s) for r, s in zip(info["run_id"], info["state"],
                                                         strict=True)]  # fmt: skip
        extra = other[~other["run_id"].isin(set(info["run_id"]))]
        info = pd.concat([info, extra], ignore_index=True) if len(extra) else info
    mix = metrics[
        (metrics["entity_type"].astype(str) == "mix") & metrics["metric"].astype(str).isin(COUNTERS)
    ]
    wide = pd.DataFrame(
        {"run_id": mix["run_id"].astype(str), "metric": mix["metric"].astype(str),
         "value": mix["value"].astype(float)}
    ).pivot_table(index="run_id", columns="metric", values="value", aggfunc="first")  # fmt: skip
    wide = wide.reindex(columns=list(COUNTERS))
    return info.join(wide, on="run_id")


def add_gates(t: pd.DataFrame) -> pd.DataFrame:
    """@t (run_table) with the derived columns XNODE_BALANCE and
    PICKED_NONE_SHARE, regime_ok and platform_ok (bool) and mechanism_ok
    (True, False, or None for a policy without a mechanism gate)."""
    t = t.copy()
    done = t["state"] == DONE
    regime = done.copy()
    for metric, low in REGIME.items():
        regime &= t[metric] >= low
    t["regime_ok"] = regime.astype(bool)
    t["platform_ok"] = (done & (t[PLATFORM] == 0)).astype(bool)
    t[XNODE_BALANCE] = t[list(XNODE)].sum(axis=1, min_count=len(XNODE))
    attempts = t["lb_attempts"].where(t["lb_attempts"] > 0)
    t[PICKED_NONE_SHARE] = t["lb_picked_none"] / attempts
    leader = (t[list(LEADER)] > 0).all(axis=1)
    xnode = t[XNODE_BALANCE] >= MIN_XNODE
    mech: list[bool | None] = []
    for pol, ok_done, ok_x, ok_l in zip(t["policy"], done, xnode, leader, strict=True):
        if pol in XNODE_POLICIES:
            mech.append(bool(ok_done and ok_x))
        elif pol in LEADER_POLICIES:
            mech.append(bool(ok_done and ok_l))
        else:
            mech.append(None)
    t["mechanism_ok"] = pd.Series(mech, index=t.index, dtype=object)
    return t


def run_gates(metrics: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run: its configuration, state, gate values, the derived
    mechanism columns and whether it passes each gate (add_gates)."""
    return add_gates(run_table(metrics, runs))


def has_mechanism_gate(policy: str) -> bool:
    return policy in XNODE_POLICIES or policy in LEADER_POLICIES


def summary(g: pd.DataFrame) -> pd.DataFrame:
    """Per cfg, policy and numa_balancing of run_gates @g: runs, done,
    regime and platform (runs passing each), mechanism (runs passing it; None without a
    gate), and the medians over the done runs of REGIME, XNODE_BALANCE,
    LEADER and MECHANISM (NaN where no done run measured it)."""
    rows = []
    keys = ["cfg", "policy", "numa_balancing"]
    for (cfg, pol, nb), sub in g.groupby(keys, sort=False, dropna=False):
        done = sub[sub["state"] == DONE]
        medians = {m: float(done[m].median()) if len(done) else float("nan") for m in VALUES}
        mech = int(sum(x is True for x in sub["mechanism_ok"]))
        rows.append({"cfg": cfg, "policy": pol, "numa_balancing": int(nb), "runs": len(sub),
                     "done": len(done), "regime": int(sub["regime_ok"].sum()),
                     "platform": int(sub["platform_ok"].sum()),
                     "mechanism": mech if has_mechanism_gate(str(pol)) else None,
                     **medians})  # fmt: skip
    return pd.DataFrame(rows)
