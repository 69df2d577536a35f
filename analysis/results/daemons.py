"""The policy daemons' logs (``guest/daemon-<policy>.jsonl``, daemons/) and the
gem5 counter bridge's record (``m5out/counter_bridge.json``): parse, turn into
metric rows, and the report's section that sets the user-level policies
(imar, imar2, devil, plb) beside the kernel ones.

A daemon log is JSON lines: ``start``, ``parent``, one ``interval`` per
sample after the first, ``decision`` records (action: interchange, rollback,
hold, coschedule, migrate, keep, skip, none ...), ``refused`` (a sample whose
counts were not trusted, dropped: reason mem_inconsistent, negative_count,
negative_delta or not_counted, daemons/counters.py), ``error`` and a closing
``summary`` with the counts. A log without a summary (a daemon killed before
it wrote one) is counted from its records and flagged; a line that is not
JSON ends the parse with an error, what came before it is kept.

Metric rows (entity ``mix``), defined in metrics.py: daemon_samples,
daemon_decisions, daemon_thread_moves, daemon_interchanges,
daemon_rollbacks, daemon_coschedules, daemon_samples_refused (by reason in
the report's per-run lines), daemon_sample_cost_us (guest clock,
mean per sample: simulated under gem5), daemon_cpu_s, bridge_host_ms (host
time per sample in the bridge's handler) and bridge_samples_in_roi.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .document import Section, Table

DAEMON_POLICIES = ("imar", "imar2", "devil", "plb")
COUNTS = ("samples", "decisions", "thread_moves", "interchanges", "rollbacks", "coschedules",
          "samples_refused")  # fmt: skip
BRIDGE_RECORD = "counter_bridge.json"


@dataclass
class DaemonLog:
    policy: str | None = None
    start: dict[str, Any] | None = None
    intervals: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, Any]:
        """The summary's counts, or counted from the records without one."""
        by_reason: dict[str, int] = {}
        for r in self.refused:
            by_reason[str(r.get("reason"))] = by_reason.get(str(r.get("reason")), 0) + 1
        if self.summary is not None:
            return {k: self.summary.get(k) for k in COUNTS} | {
                "refused": self.summary.get("refused") or {},
                "actions": self.summary.get("actions") or {},
                "daemon_cpu_s": self.summary.get("daemon_cpu_s"),
                "sample_cost_us": (self.summary.get("sample_cost_us") or {}).get("mean"),
                "source": self.summary.get("source"),
            }
        actions: dict[str, int] = {}
        for d in self.decisions:
            actions[str(d.get("action"))] = actions.get(str(d.get("action")), 0) + 1
        costs = [float(i["sample_cost_us"]) for i in self.intervals if "sample_cost_us" in i]
        return {
            "samples": len(self.intervals) + (1 if self.intervals else 0) + len(self.refused),
            "decisions": len(self.decisions),
            "thread_moves": None,
            "interchanges": actions.get("interchange", 0),
            "rollbacks": actions.get("rollback", 0),
            "coschedules": actions.get("coschedule", 0),
            "samples_refused": len(self.refused),
            "refused": by_reason,
            "actions": actions,
            "daemon_cpu_s": None,
            "sample_cost_us": sum(costs) / len(costs) if costs else None,
            "source": (self.start or {}).get("source"),
        }


def parse_daemon_text(text: str, where: str = "daemon log") -> DaemonLog:
    log = DaemonLog()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            log.problems.append(f"{where} line {n}: not JSON; {n - 1} line(s) before it kept")
            break
        if not isinstance(rec, dict):
            log.problems.append(f"{where} line {n}: not a JSON object")
            continue
        t = rec.get("type")
        if t == "start":
            log.start = rec
            log.policy = rec.get("policy")
        elif t == "interval":
            log.intervals.append(rec)
        elif t == "decision":
            log.decisions.append(rec)
        elif t == "refused":
            log.refused.append(rec)
        elif t == "error":
            log.errors.append(rec)
            log.policy = log.policy or rec.get("policy")
        elif t == "summary":
            log.summary = rec
            log.policy = log.policy or rec.get("policy")
    fatal = [e for e in log.errors if e.get("fatal")]
    if fatal:
        log.problems.append(f"{where}: {fatal[0].get('what')}")
    elif log.summary is None and not log.problems:
        log.problems.append(f"{where}: no summary (the daemon did not finish)")
    return log


def find_logs(guest_dir: Path) -> list[Path]:
    return sorted(guest_dir.glob("daemon-*.jsonl"))


def daemon_rows(run_dir: Path, mix: str, errors: list[tuple[str, str]]) -> list[tuple]:
    """Metric rows of a run's daemon log and bridge record (none without them)."""
    rows: list[tuple[str, str, str, float]] = []
    for path in find_logs(run_dir / "guest"):
        log = parse_daemon_text(path.read_text(errors="replace"), path.name)
        errors.extend((f"guest/{path.name}", p) for p in log.problems)
        c = log.counts()
        for k in COUNTS:
            if isinstance(c.get(k), int | float):
                rows.append(("mix", mix, f"daemon_{k}", float(c[k])))
        for k, metric in (("sample_cost_us", "daemon_sample_cost_us"),
                          ("daemon_cpu_s", "daemon_cpu_s")):  # fmt: skip
            if isinstance(c.get(k), int | float):
                rows.append(("mix", mix, metric, float(c[k])))
    bridge = run_dir / "m5out" / BRIDGE_RECORD
    if bridge.is_file():
        try:
            b = json.loads(bridge.read_text())
        except (OSError, ValueError) as e:
            errors.append((f"m5out/{BRIDGE_RECORD}", f"unreadable: {e}"))
        else:
            if isinstance(b.get("host_ms_mean"), int | float):
                rows.append(("mix", mix, "bridge_host_ms", float(b["host_ms_mean"])))
            if isinstance(b.get("samples_in_roi"), int):
                rows.append(("mix", mix, "bridge_samples_in_roi", float(b["samples_in_roi"])))
    return rows


def bridge_host_s_in_roi(m5out: Path) -> float:
    """Host seconds the bridge's handler took during the ROI (0 without a bridge):
    simulation-speed figures take them out of the ROI's host time."""
    try:
        b = json.loads((m5out / BRIDGE_RECORD).read_text())
    except (OSError, ValueError):
        return 0.0
    v = b.get("host_s_in_roi")
    return float(v) if isinstance(v, int | float) else 0.0


# ------------------------------------------------------------------- report

TABLE_METRICS = [
    ("daemon_decisions", "daemon decisions"),
    ("daemon_thread_moves", "daemon thread moves"),
    ("daemon_rollbacks", "rollbacks"),
    ("daemon_samples_refused", "samples refused"),
    ("task_migrations", "kernel task migrations"),
    ("cross_node_migrations", "cross-node"),
    ("elapsed_s", "elapsed (s)"),
    ("improvement_pct", "improvement (%)"),
]


def policy_table(mx: pd.DataFrame) -> tuple[list[str], list[list[Any]]]:
    """Per policy (kernel and user-level), the mean over runs of the decisions
    and migrations and the outcome, mix level. Kernel policies have no daemon
    columns ("-")."""
    mix = mx[mx["entity_type"] == "mix"] if "entity_type" in mx.columns else mx
    head = ["policy", "kind", "runs", *[label for _, label in TABLE_METRICS]]
    rows: list[list[Any]] = []
    if mix.empty:
        return head, rows
    for pol in sorted(set(mix["policy"].astype(str)), key=_policy_key):
        sub = mix[mix["policy"].astype(str) == pol]
        kind = "daemon" if pol in DAEMON_POLICIES else "kernel"
        row: list[Any] = [pol, kind, int(sub["run_id"].nunique()) if "run_id" in sub else None]
        for metric, _ in TABLE_METRICS:
            v = sub[sub["metric"] == metric]["value"]
            row.append(round(float(v.mean()), 3) if len(v) else "-")
        rows.append(row)
    return head, rows


def _policy_key(p: str) -> tuple[int, str]:
    return (1 if p in DAEMON_POLICIES else 0, p)


def decision_summary(log: DaemonLog) -> str:
    """One line per run: what the daemon decided, from which counters."""
    c = log.counts()
    acts = ", ".join(f"{k} {v}" for k, v in sorted(c["actions"].items())) or "none"
    why = ", ".join(f"{k} {v}" for k, v in sorted(c["refused"].items()))
    refused = (
        ""
        if c["samples_refused"] is None
        # None: a log from before refusals
        else (f"; {c['samples_refused']} refused" + (f" ({why})" if why else ""))
    )
    return (
        f"{log.policy}: {c['samples']} samples ({c['source']}{refused}), "
        f"{c['decisions']} decisions ({acts}), {c['thread_moves']} thread moves, "
        f"{c['rollbacks']} rollbacks" + "".join(f"; {x}" for x in signal_notes(log))
    )


def signal_notes(log: DaemonLog) -> list[str]:
    """How the daemon found what it decided from (issue 39): the attribution of
    counts to threads per interval (per_task: the bridge's per-task counts;
    per_cpu_last_thread: per-CPU counts shared by run time, a proxy), the
    split of requests by home node (approximate: gem5 counts them per socket)
    with devil's mean node-split purity (1.0: no other task missed on the
    program's sockets), and IMAR's latency source. Logs from before these
    fields give nothing."""
    out = []
    att = (log.summary or {}).get("attribution")
    if not att:
        att = {}
        for i in log.intervals:
            if i.get("attribution"):
                att[i["attribution"]] = att.get(i["attribution"], 0) + 1
    if att:
        out.append("attribution " + ", ".join(f"{k} {v}" for k, v in sorted(att.items())))
    splits = sorted({str(i["node_split"]) for i in log.intervals if i.get("node_split")})
    if splits:
        pur = [float(d["node_split_purity"]) for d in log.decisions
               if d.get("node_split_purity") is not None]  # fmt: skip
        out.append("node split: " + " / ".join(splits)
                   + (f", purity mean {sum(pur) / len(pur):.3f}" if pur else ""))  # fmt: skip
    lat = (log.summary or {}).get("latency_sources")
    if not lat:
        lat = {}
        for i in log.intervals:
            if i.get("latency_source"):
                lat[i["latency_source"]] = lat.get(i["latency_source"], 0) + 1
    if lat:
        out.append("latency: " + " / ".join(f"{k} ({v})" for k, v in sorted(lat.items())))
    return out


def daemon_section(mx: pd.DataFrame, runs: pd.DataFrame | None = None) -> Section | None:
    """The report's section for the user-level policies, or None when the runs
    have none: per policy, kernel and user-level side by side, the daemon's
    decisions, the thread moves it made, the kernel's task migrations and the
    outcome; then each daemon run's decision summary."""
    if mx.empty or not set(mx["policy"].astype(str)) & set(DAEMON_POLICIES):
        return None
    s = Section("User-level policies beside the kernel policies: decisions, migrations, outcome")
    s.paras.append(
        "imar, imar2 [Lorenzo18], devil [HongYoo] and plb [Revilla24] run as guest daemons "
        "on the stock balancer (the patched kernel's default selection), pinning threads "
        "with sched_setaffinity from per-core counters (gem5: the counter bridge). "
        "Daemon decisions and thread moves come from the daemon's log; kernel task "
        "migrations count every move of the programs' threads, the daemon's included. "
        "Samples refused: counter samples the daemon dropped instead of deciding from "
        "them (the bridge's requests by node inconsistent, a negative count, a count "
        "lower than the sample before, a perf group that never ran); by reason in the "
        "per-run lines. Each per-run line also names how the counts reached the threads "
        "(attribution per_task: each thread's own counts from the bridge's ledger of "
        "context switches; per_cpu_last_thread: its last CPU's counts shared by run time, "
        "a proxy), the split of requests by home node (approximate: gem5 counts a "
        "socket's requests, not a task's; devil's purity 1.0 means no other task missed "
        "on the program's sockets) and IMAR's latency source (measured: the calibrated "
        "load latency per hop x the thread's requests by node; slit: the named "
        "fallback). Means over runs, mix level."
    )
    head, rows = policy_table(mx)
    s.items.append(Table(head, rows, "Decisions, migrations and outcome per policy"))
    if runs is not None and not runs.empty and "dir" in runs.columns:
        lines = []
        for _, r in runs[runs["policy"].astype(str).isin(DAEMON_POLICIES)].iterrows():
            for path in find_logs(Path(str(r["dir"])) / "guest"):
                log = parse_daemon_text(path.read_text(errors="replace"), path.name)
                lines.append([str(r["run_id"])[:16], decision_summary(log)])
        if lines:
            s.items.append(Table(["run", "decision summary"], lines[:200], "Per daemon run"))
    return s
