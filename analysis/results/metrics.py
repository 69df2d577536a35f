"""Metrics: each defined once here (docs/DESIGN.md "Metrics"), used by every report.

Per run, ``run_metrics`` turns the parsed inputs into tidy tuples
``(entity_type, entity, metric, value)``; entity types are ``mix`` (the whole
mix = the run), ``program``, ``socket`` and ``cpu``. Across runs, ``add_speedup``
pairs every policy's run with the ``default`` run of the same configuration and
repeat, and ``summarize`` gives mean, standard deviation and the 95 % confidence
interval of the mean (Student t) over repeats.

Definitions
-----------
elapsed_s            guest wall clock of the mix (run_end.elapsed_s, first program
                     start to last exit) and of each program (gate release to
                     reap). Under gem5 the guest clock is simulated time; QEMU's
                     is host time under TCG and NOT architectural.
sim_seconds          gem5: simSeconds of the ROI dump.
speedup              default_elapsed / policy_elapsed, paired by repeat (same
                     configuration, same repeat index, same numa_balancing; autonuma
                     against default with balancing off); 1 for default itself.
improvement_pct      (speedup - 1) * 100: Chiang & Su [Chiang21]'s "performance increase".
instructions         gem5 committed instructions per CPU (commitStats0.numInsts, ROI dump).
cycles               gem5 numCycles per CPU: every core cycle of the ROI, halted ones
                     included (TimingSimpleCPU folds a halt in only at its next
                     activity, so this undercounts a CPU halted at the dump). O3
                     keeps halts out of numCycles: numCycles + quiesceCycles
                     (gem5stats.o3_cycles; a halt is folded in at its end, too).
busy_cycles          gem5's busy-cycle count (exec_context.thread_0.numBusyCycles:
                     numCycles x the tick-weighted not-idle fraction), per CPU:
                     cycles not halted, memory stalls included. An O3 core has no
                     exec_context stats: its numCycles, which are exactly that.
busy_fraction        busy_cycles / cycles.
ipc                  IPC on busy (non-idle) cycles: per CPU insts / busy_cycles; for
                     the mix sum(insts) / sum(busy_cycles). Idle CPUs do not dilute it.
sim_speed_ips        ROI committed instructions (all CPUs) / ROI host seconds
                     (hostSeconds of the ROI dump, minus the host time the counter
                     bridge's handler took in the ROI: counter_bridge.json); gem5's
                     hostInstRate is not used (its simInsts also counts the
                     switched-out boot CPUs).
roi_host_s           host seconds of the ROI (hostSeconds of the ROI dump). The run's
                     other costs are columns of the runs frame: gem5_host_s (the
                     restored gem5 process), checkpoint_host_s (the boot it restored,
                     shared by every run with the same checkpoint_key), duration_s.
llc_misses           demand misses of the last-level cache (the private L2 under
                     MOESI_hammer) per CPU, socket, mix.
llc_mpki             llc_misses per 1000 committed instructions (CPU, socket, mix).
remote_requests,     gem5: demand requests (GETS/GETX) served by another socket's
local_requests       directory / by the own one (gem5stats.remote_requests); a link
                     with no throttle line carried 0. Needs a direct link per
                     socket pair (ring: not available, said under Input problems).
remote_ratio         remote_requests / (local_requests + remote_requests) (gem5 only).
remote_writebacks,   gem5: writebacks (PUT, clean evictions included) to another
local_writebacks     socket's / the own directory; remote_writeback_ratio likewise.
remote_ratio_guest   guest view (kMLB): per thread group, the share of its
                     resident pages (numa_rss at the last sample) not on the node
                     its tasks were seen running on, weighted by task-samples per
                     node; the mix value weights thread groups by task-samples.
                     The only remote figure on the qemu backend.
home_node_share      per program (kMLB kernels): the share of its task-samples on
                     its home node, the node holding most of its resident pages
                     at the last sample (ties: the lowest node). 1 = every thread
                     seen on the home node at every sample. Read it for programs
                     whose data sit on one node (leader first-touch); a program
                     whose threads first-touch their own has no single home.
start_home_share     per program that reports its leader's node (leader_ft): the
                     share of its workers whose first CPU (thread record
                     node_start, where fork placement put them) was on that
                     node. With --start-away, node_away says where each was
                     then moved; this metric still reads node_start.
home_node_load       per program (kMLB kernels): task-samples of every program on
                     its home node / the mean per node (nodes from the run's
                     SLIT). > 1: the home node held more threads than the mean,
                     so it is seldom the idler node that pulls.
task_migrations      per program: the kernel's count for its thread group at program
                     end, exited threads included (/proc/<pid>/numa_lb_migrations,
                     read from the zombie before it is reaped); mix: the sum.
                     By cause: migrations_balance (load-balance detach),
                     _active_balance, _wakeup, _numa, _numa_swap, each also _xnode;
                     cross_node_migrations = all causes across nodes.
task_migrations_sampled  without those counters (stock kernel): the sum over the
                     program's threads of se.nr_migrations at the last sample, a
                     lower bound (threads that exited earlier are missing).
page_migrations_program  the program's pages migrated by NUMA balancing (kernel).
cross_node_migrations_sampled  task moves between nodes seen between samples (a
                     lower bound).
lb_<counter>         delta of the patch's /proc/sched_numa_lb_stats counter (e.g.
                     lb_migrated: tasks detached by cross-node load-balance passes,
                     kernel-patches 0009), summed over policies' rows. System-wide:
                     every task (kernel threads, the mix runner and its sampler
                     too), from before the programs start to after they are
                     reaped, active balance not included; cross_node_migrations
                     counts only the programs' threads, every cause (0013), so
                     lb_migrated 1 beside cross_node_migrations 0 is a task that
                     is not a program's. lb_pass_max_ns is
                     the longest cross-node pass since boot (a maximum over the
                     rows at run end, not a delta).
schedstat_numa_*     the stock kernel's /proc/schedstat (CONFIG_SCHEDSTATS) for the
                     NUMA domain level, delta over the run summed over CPUs:
                     _passes load_balance() calls at that level (all idle types),
                     _passes_newidle those from a CPU going idle, _balanced passes
                     that found the nodes balanced, _no_busiest no busiest group,
                     _failed passes that found an imbalance and moved nothing,
                     _gained tasks pulled, _active_pushed tasks pushed by active
                     balancing, _wake_affine wake-ups moved to the waker's CPU.
sched_busy_fraction  the regime, from the run queues' counters of /proc/schedstat
                     (per-CPU lines, version 15): sum over CPUs of the delta of
                     rq_cpu_time (ns that non-idle tasks ran) / (window ns x CPUs),
                     an average over the ROI. The window is the guest's monotonic
                     time between the two reads the runner takes around the
                     programs: after the ROI's work_begin with every program held
                     at its gate, and after the last one is reaped, before
                     work_end (workloads/mix_run.py). So it is elapsed_s plus the
                     two reads (< 1 ms), inside gem5's ROI (sim_seconds adds the
                     m5 calls), and at both reads no task of the mix runs or
                     waits, so the kernel (which adds a stretch when it ends)
                     has counted all of it. Every non-idle task counts: the
                     runner's sampling and kernel threads too.
sched_runnable_per_cpu  (sum of delta rq_cpu_time + sum of delta run_delay) /
                     (window ns x CPUs): runnable tasks per CPU (running +
                     waiting on a run queue), averaged over the ROI and the CPUs.
sched_busy_fraction_all_running, sched_runnable_per_cpu_all_running  the same
                     from the first read to a third one right after the first
                     program ended (the runner reads when it reaps it): the
                     regime while every program runs. LOWER BOUNDS: a task still
                     running or queued at that read has its current stretch
                     counted only later (up to a timeslice per CPU, and each
                     queued task's current wait). sched_all_running_s: that
                     window's length.
idle_hlt_steps, resched_ipis, call_ipis, local_timer_irqs  the ROI's deltas of
                     /proc/interrupts' HLT, RES, CAL and LOC rows summed over
                     the CPUs (run_end "interrupts"). HLT: interrupts gem5 took
                     between the idle loop's STI and HLT, each a wake-up that
                     patch 0025 kept from being lost; absent on a kernel
                     without the row.
sched_stalled_cpus(_all_running)  CPUs whose schedstat sched_count did not move
                     in the window while their run_delay grew: halted with
                     tasks queued, which only a lost wake-up explains (gem5's
                     idle HLT before kernel patch 0025). 0 in a valid run.
run_delay_ms_per_thread  per program: the mean over its threads of the time each
                     waited on a run queue (run_delay of the thread's
                     /proc/.../schedstat, ms); mix: the mean over every thread
                     counted. Synthetic programs: each worker reads its own at
                     its end (thread_records run_delay_ns: exact, workers only).
                     Otherwise (PARSEC, cmd) the runner's read at each sample,
                     every task of the thread groups: the last sample before a
                     task exited, a lower bound missing up to one
                     sample_interval_s per task (a process's threads are gone
                     from /proc by the time its exit is seen, and the kernel
                     keeps no per-process sum of run_delay).
page_faults          mix: /proc/vmstat pgfault delta (whole guest); when the kernel has
                     no VM event counters (pgfault absent), the sum of the programs'
                     values. program: rusage minflt + majflt of the program (children
                     included).
major_faults         mix: pgmajfault delta (same fallback); program: majflt.
page_migrations      /proc/vmstat pgmigrate_success delta (numa_pages_migrated
                     when pgmigrate_success is absent).
numa_pte_updates,    NUMA balancing at work, mix: the /proc/vmstat deltas
numa_hint_faults     numa_pte_updates (PTEs its scanner made PROT_NONE: the scan
                     ran) and numa_hint_faults (faults they caused: the input of
                     its placement and page migration); absent without
                     CONFIG_NUMA_BALANCING, 0 with kernel.numa_balancing = 0.
daemon_samples,      the user-level policies (daemons/, analysis/results/daemons.py),
daemon_decisions,    mix level, from guest/daemon-<policy>.jsonl: counter samples the
daemon_thread_moves  daemon took, decisions it logged, threads it pinned
                     (sched_setaffinity calls that took effect); daemon_interchanges
                     (IMAR/IMAR2), daemon_rollbacks (IMAR2), daemon_coschedules
                     (devil); daemon_samples_refused: samples dropped because
                     their counts were not trusted (daemons/counters.py
                     REFUSAL_REASONS; by reason in the report);
                     daemon_sample_cost_us: guest-clock time of one sample()
                     (simulated under gem5: the m5 op, readfile, parsing);
                     daemon_cpu_s: the daemon's user + system time.
bridge_host_ms       gem5: host time of the counter bridge's handler per sample
                     (reading live statistics, writing the reply), mean over the
                     run; bridge_samples_in_roi: samples answered inside the ROI.
numa_factor_measured remote/local latency from a ptrchase --sweep program in the
                     mix (calibration benchmark); absent otherwise.
programs_failed      number of programs that did not exit 0.

A gem5 statistic that is nan or inf is never read as 0: every metric it feeds
(the CPU's, and the socket and mix aggregates over that CPU) is left empty and
the run lists it under Input problems.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .gem5stats import CORE_STATS, core_counters, nonfinite, remote_requests
from .guest import GuestResults

# /proc/<pid>/numa_lb_migrations keys -> metric names (kernel patch 0013)
KERNEL_MIGRATION_METRICS = {
    "migrations_xnode": "cross_node_migrations",
    "balance": "migrations_balance",
    "balance_xnode": "migrations_balance_xnode",
    "active_balance": "migrations_active_balance",
    "active_balance_xnode": "migrations_active_balance_xnode",
    "wakeup": "migrations_wakeup",
    "wakeup_xnode": "migrations_wakeup_xnode",
    "numa_balancing": "migrations_numa",
    "numa_balancing_xnode": "migrations_numa_xnode",
    "numa_swap": "migrations_numa_swap",
    "numa_swap_xnode": "migrations_numa_swap_xnode",
    "numa_pages_migrated": "page_migrations_program",
}

# thread_records field (workloads/src/common.c, the kernel's per-task schedstat
# at each worker's end, every domain level) -> metric; -1 = not printed
THREAD_SCHEDSTAT_METRICS = {
    "failed_hot": "thread_refused_hot",
    "failed_running": "thread_refused_running",
    "failed_affine": "thread_refused_affine",
    "forced": "thread_forced_hot",
}


def thread_schedstat(result: Any) -> dict[str, float]:
    """A program's worker threads' refusal counters summed, {} when the kernel
    printed none (schedstats off, or a program without thread records)."""
    recs = result.get("thread_records") if isinstance(result, dict) else None
    out: dict[str, float] = {}
    for r in recs if isinstance(recs, list) else []:
        for key, metric in THREAD_SCHEDSTAT_METRICS.items():
            v = _f(r.get(key)) if isinstance(r, dict) else None
            if v is not None and v >= 0:
                out[metric] = out.get(metric, 0.0) + v
    return out


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    label: str
    better: str  # "lower", "higher" or "" (no direction)
    gem5_only: bool = False


_M = [
    Metric("elapsed_s", "s", "elapsed time", "lower"),
    Metric("sim_seconds", "s", "simulated ROI time", "lower", True),
    Metric("speedup", "x", "speedup over default", "higher"),
    Metric("improvement_pct", "%", "improvement over default", "higher"),
    Metric("instructions", "", "committed instructions", "", True),
    Metric("cycles", "", "core cycles (halted included)", "", True),
    Metric("busy_cycles", "", "busy (non-idle) core cycles", "", True),
    Metric("busy_fraction", "", "busy fraction of core cycles", "", True),
    Metric("ipc", "", "IPC on busy cycles", "higher", True),
    Metric("llc_misses", "", "LLC demand misses", "lower", True),
    Metric("llc_mpki", "", "LLC MPKI", "lower", True),
    Metric("remote_requests", "", "remote memory requests", "lower", True),
    Metric("local_requests", "", "local memory requests", "", True),
    Metric("remote_ratio", "", "remote-access ratio", "lower", True),
    Metric("remote_writebacks", "", "remote writebacks", "lower", True),
    Metric("local_writebacks", "", "local writebacks", "", True),
    Metric("remote_writeback_ratio", "", "remote-writeback ratio", "lower", True),
    Metric("remote_ratio_guest", "", "remote ratio (guest kMLB view)", "lower"),
    Metric("home_node_share", "", "share of thread samples on the home node", ""),
    Metric("home_node_load", "", "threads on the home node / mean per node", ""),
    Metric("start_home_share", "", "share of workers placed on the leader's node at fork", ""),
    Metric("task_migrations", "", "task migrations, programs' threads (kernel)", "lower"),
    Metric("task_migrations_sampled", "", "task migrations (sampled lower bound)", "lower"),
    Metric(
        "cross_node_migrations", "", "cross-node migrations, programs' threads (kernel)", "lower"
    ),
    Metric("migrations_balance", "", "migrations by load-balance detach", "lower"),
    Metric("migrations_balance_xnode", "", "cross-node, load-balance detach", "lower"),
    Metric("migrations_active_balance", "", "migrations by active balance", "lower"),
    Metric("migrations_active_balance_xnode", "", "cross-node, active balance", "lower"),
    Metric("migrations_wakeup", "", "migrations at wake-up placement", "lower"),
    Metric("migrations_wakeup_xnode", "", "cross-node, wake-up placement", "lower"),
    Metric("migrations_numa", "", "migrations by NUMA balancing", "lower"),
    Metric("migrations_numa_xnode", "", "cross-node, NUMA balancing", "lower"),
    Metric("migrations_numa_swap", "", "swaps by NUMA balancing", "lower"),
    Metric("migrations_numa_swap_xnode", "", "cross-node swaps, NUMA balancing", "lower"),
    Metric("page_migrations_program", "", "page migrations by NUMA balancing (kernel)", "lower"),
    Metric("cross_node_migrations_sampled", "", "cross-node migrations (sampled)", "lower"),
    Metric("lb_migrated", "", "tasks moved across nodes by load balancing (all tasks)", "lower"),
    Metric("schedstat_numa_passes", "", "NUMA-level balancing passes (schedstat)", ""),
    Metric("schedstat_numa_passes_newidle", "", "... from a CPU going idle", ""),
    Metric("schedstat_numa_balanced", "", "... that found the nodes balanced", ""),
    Metric("schedstat_numa_no_busiest", "", "... that found no busiest group", ""),
    Metric("schedstat_numa_failed", "", "... that found imbalance, moved nothing", ""),
    Metric("schedstat_numa_gained", "", "tasks pulled at the NUMA level", ""),
    Metric("schedstat_numa_imbalance", "", "imbalance found at the NUMA level (sum)", ""),
    Metric("schedstat_numa_failed_idle", "", "... failed, from an idle CPU (periodic)", ""),
    Metric("schedstat_numa_failed_busy", "", "... failed, from a busy CPU (periodic)", ""),
    Metric("schedstat_numa_failed_newidle", "", "... failed, from a CPU going idle", ""),
    Metric("schedstat_numa_active_count", "", "active balances started (NUMA)", ""),
    Metric("schedstat_numa_active_pushed", "", "tasks pushed by active balance (NUMA)", ""),
    Metric("schedstat_numa_wake_affine", "", "wake-ups moved to the waker (NUMA)", ""),
    Metric("sched_busy_fraction", "", "busy fraction of the CPUs (schedstat, ROI)", ""),
    Metric("sched_runnable_per_cpu", "", "runnable tasks per CPU (schedstat, ROI)", ""),
    Metric("sched_busy_fraction_all_running", "", "busy fraction while all run (lower bound)", ""),
    Metric(
        "sched_runnable_per_cpu_all_running", "", "runnable per CPU while all run (lower bound)", ""
    ),
    Metric("sched_all_running_s", "s", "time until the first program ended", ""),
    Metric("sched_stalled_cpus", "", "CPUs halted with tasks queued (ROI)", "lower"),
    Metric("idle_hlt_steps", "", "idle HLTs stepped over (kernel patch 0025, ROI)", ""),
    Metric("resched_ipis", "", "rescheduling IPIs received (ROI)", ""),
    Metric("call_ipis", "", "function-call IPIs received (ROI)", ""),
    Metric("local_timer_irqs", "", "local timer interrupts (ROI)", ""),
    Metric(
        "sched_stalled_cpus_all_running", "", "CPUs halted with tasks queued while all run", "lower"
    ),
    Metric("run_delay_ms_per_thread", "ms", "run-queue wait per thread (sampled)", "lower"),
    Metric("thread_refused_hot", "", "balancer refusals: cache-hot (worker threads)", ""),
    Metric("thread_refused_running", "", "balancer refusals: running (worker threads)", ""),
    Metric("thread_refused_affine", "", "balancer refusals: affinity (worker threads)", ""),
    Metric("thread_forced_hot", "", "cache-hot moved anyway (worker threads)", ""),
    Metric("page_faults", "", "page faults", "lower"),
    Metric("major_faults", "", "major page faults", "lower"),
    Metric("page_migrations", "", "page migrations", "lower"),
    Metric("numa_pte_updates", "", "PTEs marked by NUMA balancing's scan", ""),
    Metric("numa_hint_faults", "", "NUMA balancing hint faults", ""),
    Metric("numa_factor_measured", "", "measured NUMA factor", ""),
    Metric("programs_failed", "", "failed programs", "lower"),
    Metric("sim_speed_ips", "inst/s", "simulation speed (ROI inst per host s)", "higher", True),
    Metric("roi_host_s", "s", "host seconds of the ROI", "lower", True),
    Metric("daemon_samples", "", "daemon counter samples", ""),
    Metric("daemon_decisions", "", "daemon decisions", ""),
    Metric("daemon_thread_moves", "", "threads pinned by the daemon", "lower"),
    Metric("daemon_interchanges", "", "IMAR interchanges", ""),
    Metric("daemon_rollbacks", "", "IMAR2 rollbacks", ""),
    Metric("daemon_coschedules", "", "devil co-schedules", ""),
    Metric("daemon_samples_refused", "", "daemon samples refused (counts not trusted)", "lower"),
    Metric("daemon_sample_cost_us", "us", "guest time per counter sample", "lower"),
    Metric("daemon_cpu_s", "s", "daemon CPU time", "lower"),
    Metric("bridge_host_ms", "ms", "host time per bridged sample", "lower", True),
    Metric("bridge_samples_in_roi", "", "bridged samples in the ROI", "", True),
]
METRICS: dict[str, Metric] = {m.name: m for m in _M}

Row = tuple[str, str, str, float]


def _f(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, int | float):
        return float(x)
    return None


# ------------------------------------------------------------------ per run


def program_failed(p: dict[str, Any]) -> bool:
    """A program that did not succeed; a background one the runner stopped did."""
    if p.get("stopped_by_runner") and p.get("signal"):
        return False
    return p.get("exit_code") != 0


def guest_metrics(g: GuestResults, mix: str) -> list[Row]:
    rows: list[Row] = []
    end = g.run_end or {}
    if (v := _f(end.get("elapsed_s"))) is not None:
        rows.append(("mix", mix, "elapsed_s", v))
    vm = end.get("vmstat_delta") or {}
    pf, mf = _f(vm.get("pgfault")), _f(vm.get("pgmajfault"))
    if pf is None and g.programs:  # kernel without VM event counters: the programs' own
        ru = [p.get("rusage") or {} for p in g.programs]
        if all(_f(r.get("minflt")) is not None and _f(r.get("majflt")) is not None for r in ru):
            pf = sum(r["minflt"] + r["majflt"] for r in ru)
            mf = sum(r["majflt"] for r in ru)
    if pf is not None:
        rows.append(("mix", mix, "page_faults", float(pf)))
    if mf is not None:
        rows.append(("mix", mix, "major_faults", float(mf)))
    pm = _f(vm.get("pgmigrate_success"))
    if pm is None:
        pm = _f(vm.get("numa_pages_migrated"))
    if pm is not None:
        rows.append(("mix", mix, "page_migrations", pm))
    for k in ("numa_pte_updates", "numa_hint_faults"):
        if (v := _f(vm.get(k))) is not None:
            rows.append(("mix", mix, k, v))
    for k, v in schedstat_numa(end.get("schedstat") or {}).items():
        rows.append(("mix", mix, k, v))
    for k, v in sched_regime(end.get("schedstat") or {}).items():
        rows.append(("mix", mix, k, v))
    for k, v in interrupt_counts(end.get("interrupts") or {}).items():
        rows.append(("mix", mix, k, v))
    lb = end.get("sched_numa_lb_stats") or {}
    if lb.get("status") == "present":
        for k, v in lb_counters(lb).items():
            rows.append(("mix", mix, f"lb_{k}", v))
    if g.programs:
        rows.append(
            (
                "mix",
                mix,
                "programs_failed",
                float(sum(1 for p in g.programs if program_failed(p))),
            )
        )

    by_prog: dict[str, list[dict[str, Any]]] = {}
    for tg in g.thread_groups:
        by_prog.setdefault(str(tg.get("program")), []).append(tg)
    mig_total = 0.0
    cross_total = 0.0
    have_mig = False
    sampled_total = 0.0
    have_sampled = False
    kernel_totals: dict[str, float] = {}
    refused_totals: dict[str, float] = {}
    nodes = len((g.run or {}).get("distances") or {})  # the SLIT's size
    delay_total = (0.0, 0)  # run_delay ns, threads
    for p in g.programs:
        name = str(p.get("name"))
        # a background program (load for the others) runs until it is stopped: not timed
        if not p.get("background") and (v := _f(p.get("elapsed_s"))) is not None:
            rows.append(("program", name, "elapsed_s", v))
        ru = p.get("rusage") or {}
        mn, mj = _f(ru.get("minflt")), _f(ru.get("majflt"))
        if mn is not None and mj is not None:
            rows.append(("program", name, "page_faults", mn + mj))
            rows.append(("program", name, "major_faults", mj))
        for metric, v in thread_schedstat(p.get("result")).items():
            rows.append(("program", name, metric, v))
            refused_totals[metric] = refused_totals.get(metric, 0.0) + v
        tgs = by_prog.get(name, [])
        km = p.get("kernel_migrations")
        nr = [_f(t.get("nr_migrations")) for t in tgs]
        if isinstance(km, dict) and _f(km.get("migrations")) is not None:
            # the kernel's own count at program end, exited threads included
            s = float(km["migrations"])
            rows.append(("program", name, "task_migrations", s))
            for key, metric in KERNEL_MIGRATION_METRICS.items():
                if (v := _f(km.get(key))) is not None:
                    rows.append(("program", name, metric, v))
                    kernel_totals[metric] = kernel_totals.get(metric, 0.0) + v
            mig_total += s
            have_mig = True
        elif tgs and all(x is not None for x in nr):
            # no kernel counters (stock kernel): the sampled lower bound
            s = float(sum(nr))  # type: ignore[arg-type]
            rows.append(("program", name, "task_migrations_sampled", s))
            sampled_total += s
            have_sampled = True
        cross = sum(_f(t.get("cross_node_migrations_sampled")) or 0.0 for t in tgs)
        if tgs:
            rows.append(("program", name, "cross_node_migrations_sampled", cross))
            cross_total += cross
        rr = remote_ratio_guest(tgs)
        if rr is not None:
            rows.append(("program", name, "remote_ratio_guest", rr))
        if (rd := run_delay(p.get("result"), tgs)) is not None:
            rows.append(("program", name, "run_delay_ms_per_thread", rd[0] / rd[1] / 1e6))
            delay_total = (delay_total[0] + rd[0], delay_total[1] + rd[1])
        for metric, v in home_node(tgs, g.thread_groups, nodes).items():
            rows.append(("program", name, metric, v))
        res = p.get("result") or {}
        if isinstance(res, dict) and (v := start_home_share(res)) is not None:
            rows.append(("program", name, "start_home_share", v))
        if isinstance(res, dict) and (v := _f(res.get("numa_factor"))) is not None:
            rows.append(("program", name, "numa_factor_measured", v))
            rows.append(("mix", mix, "numa_factor_measured", v))
    if have_mig:
        rows.append(("mix", mix, "task_migrations", mig_total))
        for metric, v in kernel_totals.items():
            rows.append(("mix", mix, metric, v))
    if have_sampled:
        rows.append(("mix", mix, "task_migrations_sampled", sampled_total))
    for metric, v in refused_totals.items():
        rows.append(("mix", mix, metric, v))
    if g.thread_groups:
        rows.append(("mix", mix, "cross_node_migrations_sampled", cross_total))
    rr = remote_ratio_guest(g.thread_groups)
    if rr is not None:
        rows.append(("mix", mix, "remote_ratio_guest", rr))
    if delay_total[1] > 0:
        rows.append(("mix", mix, "run_delay_ms_per_thread", delay_total[0] / delay_total[1] / 1e6))
    return rows


# schedstat metric -> counter prefix, summed over the idle types (or one full name)
SCHEDSTAT_NUMA = {
    "schedstat_numa_passes": "lb_count_",
    "schedstat_numa_passes_newidle": "lb_count_newidle",
    "schedstat_numa_balanced": "lb_balanced_",
    "schedstat_numa_no_busiest": "lb_nobusyg_",
    "schedstat_numa_failed": "lb_failed_",
    "schedstat_numa_gained": "lb_gained_",
    "schedstat_numa_imbalance": "lb_imbalance_",
    "schedstat_numa_failed_idle": "lb_failed_idle",
    "schedstat_numa_failed_busy": "lb_failed_busy",
    "schedstat_numa_failed_newidle": "lb_failed_newidle",
    "schedstat_numa_active_count": "alb_count",
    "schedstat_numa_active_pushed": "alb_pushed",
    "schedstat_numa_wake_affine": "ttwu_move_affine",
}


def schedstat_numa(rec: dict[str, Any]) -> dict[str, float]:
    """The NUMA level's schedstat deltas (the run_end "schedstat" record of
    workloads/mix_schedstat.py) as metrics; {} when the guest had none."""
    d = (rec.get("delta") or {}).get("NUMA") if rec.get("status") == "present" else None
    if not isinstance(d, dict):
        return {}
    out: dict[str, float] = {}
    for metric, prefix in SCHEDSTAT_NUMA.items():
        vals = [v for k, v in d.items() if k.startswith(prefix) and isinstance(v, int | float)]
        if vals:
            out[metric] = float(sum(vals))
    return out


# /proc/interrupts rows summed over the CPUs over the ROI, as metrics
IRQ_ROWS = {"HLT": "idle_hlt_steps", "RES": "resched_ipis", "CAL": "call_ipis",
            "LOC": "local_timer_irqs"}  # fmt: skip


def interrupt_counts(rec: dict[str, Any]) -> dict[str, float]:
    """The ROI's IRQ_ROWS from the run_end "interrupts" record
    (workloads/mix_interrupts.py): a row whose counts did not move is 0 if
    the kernel has it (its end text), absent if not (HLT before patch 0025);
    {} without the record."""
    w = rec.get("roi")
    if not isinstance(w, dict) or w.get("status") != "present":
        return {}
    delta = w.get("delta") or {}
    have = {ln.split(":", 1)[0].strip() for ln in str(rec.get("end_raw") or "").splitlines()}
    out: dict[str, float] = {}
    for row, metric in IRQ_ROWS.items():
        if row in delta:
            out[metric] = float(sum(delta[row]))
        elif row in have:
            out[metric] = 0.0
    return out


def _stalled(c: dict[str, Any]) -> bool:
    """A CPU that never called schedule() in a window while tasks waited on
    its run queue: halted with work queued (the lost wake-up of gem5's idle
    HLT before kernel patch 0025, findings/2026-11-28-idle-hlt)."""
    return int(c.get("sched_count", 0)) == 0 and float(c.get("run_delay", 0)) > 0


def sched_regime(rec: dict[str, Any]) -> dict[str, float]:
    """Busy fraction and runnable tasks per CPU from the per-CPU schedstat
    windows of the run_end "schedstat" record ("cpu": workloads/mix_run.py);
    {} for a guest without them (older runner, no /proc/schedstat)."""
    cpu = rec.get("cpu")
    out: dict[str, float] = {}
    if not isinstance(cpu, dict):
        return out
    for key, suffix in (("roi", ""), ("all_running", "_all_running")):
        w = cpu.get(key)
        if not isinstance(w, dict) or w.get("status") != "present":
            continue
        sec, d = _f(w.get("window_s")), w.get("delta")
        if sec is None or sec <= 0 or not isinstance(d, dict) or not d:
            continue
        busy = sum(float(c["rq_cpu_time"]) for c in d.values())
        wait = sum(float(c["run_delay"]) for c in d.values())
        denom = sec * 1e9 * len(d)
        out["sched_busy_fraction" + suffix] = busy / denom
        out["sched_runnable_per_cpu" + suffix] = (busy + wait) / denom
        out["sched_stalled_cpus" + suffix] = float(sum(map(_stalled, d.values())))
        if key == "all_running":
            out["sched_all_running_s"] = sec
    return out


def run_delay(result: Any, tgs: list[dict[str, Any]]) -> tuple[float, int] | None:
    """A program's run-queue wait: (sum of run_delay ns, threads). From its
    workers' own thread records (each read at the worker's end: exact) when
    every record has one, else the runner's per-task samples of its thread
    groups (main thread included; lower bounds); None when neither has any."""
    recs = result.get("thread_records") if isinstance(result, dict) else None
    if isinstance(recs, list) and recs:
        vals = [_f(r.get("run_delay_ns")) if isinstance(r, dict) else None for r in recs]
        if all(v is not None and v >= 0 for v in vals):
            return sum(vals), len(vals)  # type: ignore[arg-type]
    n = sum(int(t.get("schedstat_tasks") or 0) for t in tgs)
    delays = [_f(t.get("run_delay_ns")) for t in tgs if t.get("schedstat_tasks")]
    if n <= 0 or any(x is None for x in delays):
        return None
    return sum(delays), n  # type: ignore[arg-type]


def lb_counters(lb: dict[str, Any]) -> dict[str, float]:
    """The patch's counters (delta over the run) summed over the policies' rows.

    The file is a header line ``policy attempts visited ...`` and one row per
    policy; the runner parses the rows into lists, so the field names come from
    the header of the raw text. Other layouts (``key value`` lines, dicts) are
    summed by key.
    """
    delta = lb.get("delta")
    header: list[str] = []
    for line in str(lb.get("after_raw") or lb.get("before_raw") or "").splitlines():
        toks = line.split()
        if toks and toks[0] == "policy":
            header = toks[1:]
            break
    if isinstance(delta, dict) and header and all(isinstance(v, list) for v in delta.values()):
        out: dict[str, float] = {}
        for row in delta.values():
            for name, v in zip(header, row, strict=False):
                if (f := _f(v)) is not None and not name.endswith("_max_ns"):
                    out[name] = out.get(name, 0.0) + f
        # a maximum (pass_max_ns, patch 0016) is no counter: the largest value
        # in force at the end, over the policies' rows (since boot)
        after = lb.get("after")
        for row in after.values() if isinstance(after, dict) else []:
            for name, v in zip(header, row if isinstance(row, list) else [], strict=False):
                if name.endswith("_max_ns") and (f := _f(v)) is not None:
                    out[name] = max(out.get(name, 0.0), f)
        return out
    return _sum_counters(delta)


def _sum_counters(delta: Any) -> dict[str, float]:
    """Numeric leaves of the counters' delta summed by key (across policy rows)."""
    out: dict[str, float] = {}

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if (f := _f(v)) is not None:
                    out[str(k)] = out.get(str(k), 0.0) + f
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(delta)
    return out


def remote_ratio_guest(tgs: list[dict[str, Any]]) -> float | None:
    num = 0.0
    den = 0.0
    for tg in tgs:
        rss = {str(k): float(v) for k, v in (tg.get("numa_rss_last") or {}).items()}
        ns = {str(k): float(v) for k, v in (tg.get("node_samples") or {}).items()}
        total_rss = sum(rss.values())
        total_s = sum(ns.values())
        if total_rss <= 0 or total_s <= 0:
            continue
        frac = sum(w / total_s * (1.0 - rss.get(n, 0.0) / total_rss) for n, w in ns.items())
        num += frac * total_s
        den += total_s
    return num / den if den > 0 else None


def start_home_share(res: dict[str, Any]) -> float | None:
    """Share of a program's workers that started on its leader's node; None
    without a leader node or thread records (metrics.py docstring)."""
    leader = res.get("leader_node")
    recs = res.get("thread_records")
    if isinstance(leader, bool) or not isinstance(leader, int) or leader < 0:
        return None
    if not isinstance(recs, list) or not recs:
        return None
    starts = [r.get("node_start") for r in recs if isinstance(r, dict)]
    if not starts or any(not isinstance(n, int) or n < 0 for n in starts):
        return None
    return sum(n == leader for n in starts) / len(starts)


def _node_sum(tgs: list[dict[str, Any]], key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for tg in tgs:
        for n, v in (tg.get(key) or {}).items():
            if (f := _f(v)) is not None:
                out[str(n)] = out.get(str(n), 0.0) + f
    return out


def home_node(
    tgs: list[dict[str, Any]], all_tgs: list[dict[str, Any]], nodes: int
) -> dict[str, float]:
    """home_node_share and home_node_load of one program's thread groups ``tgs``
    (``all_tgs``: every program's, ``nodes``: the machine's node count, 0 = the
    nodes seen); {} without resident pages or samples (a stock kernel)."""
    rss = _node_sum(tgs, "numa_rss_last")
    ns = _node_sum(tgs, "node_samples")
    if sum(rss.values()) <= 0 or sum(ns.values()) <= 0:
        return {}
    home = min(rss, key=lambda n: (-rss[n], int(n) if n.isdigit() else 0, n))
    out = {"home_node_share": ns.get(home, 0.0) / sum(ns.values())}
    every = _node_sum(all_tgs, "node_samples")
    per_node = sum(every.values()) / max(nodes, len(every))
    if per_node > 0:
        out["home_node_load"] = every.get(home, 0.0) / per_node
    return out


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def gem5_metrics(
    values: dict[str, float],
    cfg: dict[str, Any] | None,
    mix: str,
    cores_per_socket: int,
    bridge_host_s: float = 0.0,
) -> list[Row]:
    """Metrics of the ROI dump. A nan/inf input leaves the metrics it feeds empty
    (per CPU, and every aggregate over that CPU); ``gem5_input_problems`` names it.
    ``bridge_host_s``: host seconds the counter bridge took inside the ROI."""
    rows: list[Row] = []
    if _finite(v := values.get("simSeconds")):
        rows.append(("mix", mix, "sim_seconds", v))
    c = core_counters(values)
    insts, cycles, busy, miss = c["insts"], c["cycles"], c["busy_cycles"], c["l2_demand_misses"]
    for i in sorted(insts):
        cpu = f"cpu{i}"
        if _finite(insts[i]):
            rows.append(("cpu", cpu, "instructions", insts[i]))
        if _finite(cycles.get(i)):
            rows.append(("cpu", cpu, "cycles", cycles[i]))
        if _finite(busy.get(i)):
            rows.append(("cpu", cpu, "busy_cycles", busy[i]))
            if _finite(cycles.get(i)) and cycles[i] > 0:
                rows.append(("cpu", cpu, "busy_fraction", busy[i] / cycles[i]))
            if busy[i] > 0 and _finite(insts[i]):
                rows.append(("cpu", cpu, "ipc", insts[i] / busy[i]))
        if _finite(miss.get(i)):
            rows.append(("cpu", cpu, "llc_misses", miss[i]))
            if _finite(insts[i]) and insts[i] > 0:
                rows.append(("cpu", cpu, "llc_mpki", miss[i] / insts[i] * 1000))

    def total(d: dict[int, float]) -> float | None:
        """Sum over every CPU, or None if any CPU's value is missing or not finite."""
        if not d or any(i not in d or not _finite(d[i]) for i in insts):
            return None
        return sum(d[i] for i in insts)

    ti, tc, tb, tm = total(insts), total(cycles), total(busy), total(miss)
    if ti is not None:
        rows.append(("mix", mix, "instructions", ti))
        host = values.get("hostSeconds")
        if _finite(host):
            rows.append(("mix", mix, "roi_host_s", host))
        if _finite(host) and host - bridge_host_s > 0:
            # ROI committed instructions / ROI host seconds: gem5's hostInstRate
            # divides simInsts, which also counts the switched-out boot CPUs.
            rows.append(("mix", mix, "sim_speed_ips", ti / (host - bridge_host_s)))
    if tc is not None and tc > 0:
        rows.append(("mix", mix, "cycles", tc))
    if tb is not None and tb > 0:
        rows.append(("mix", mix, "busy_cycles", tb))
        if tc is not None and tc > 0:
            rows.append(("mix", mix, "busy_fraction", tb / tc))
        if ti is not None:
            rows.append(("mix", mix, "ipc", ti / tb))
    if tm is not None:
        rows.append(("mix", mix, "llc_misses", tm))
        if ti is not None and ti > 0:
            rows.append(("mix", mix, "llc_mpki", tm / ti * 1000))
    if miss:
        sockets: dict[int, list[int]] = {}
        for i in insts:
            sockets.setdefault(i // max(1, cores_per_socket), []).append(i)
        for s, cpus in sorted(sockets.items()):
            sm = [miss.get(i) for i in cpus]
            si = [insts[i] for i in cpus]
            if not all(_finite(x) for x in sm + si):
                continue
            rows.append(("socket", f"s{s}", "llc_misses", sum(sm)))  # type: ignore[arg-type]
            if sum(si) > 0:
                rows.append(("socket", f"s{s}", "llc_mpki", sum(sm) / sum(si) * 1000))  # type: ignore[arg-type]
    rr = remote_requests(values, cfg)
    if rr is not None and rr["consistent"]:
        req, wb = rr["requests"], rr["writebacks"]
        rows.append(("mix", mix, "remote_requests", req["remote_total"]))
        rows.append(("mix", mix, "local_requests", req["local_total"]))
        rows.append(("mix", mix, "remote_ratio", req["remote_ratio"]))
        rows.append(("mix", mix, "remote_writebacks", wb["remote_total"]))
        rows.append(("mix", mix, "local_writebacks", wb["local_total"]))
        if math.isfinite(wb["remote_ratio"]):
            rows.append(("mix", mix, "remote_writeback_ratio", wb["remote_ratio"]))
        for s, out in req["remote_out_by_socket"].items():
            loc = req["local_by_socket"].get(s, 0.0)
            rows.append(("socket", f"s{s}", "remote_requests", out))
            if out + loc > 0:
                rows.append(("socket", f"s{s}", "remote_ratio", out / (out + loc)))
    return rows


def gem5_input_problems(values: dict[str, float]) -> list[str]:
    """The nan/inf statistics among those the metrics read (listed under Input problems)."""
    bad = set(nonfinite(values, (*CORE_STATS, "simSeconds", "hostSeconds", ".m_msg_count")))
    bad |= {k for k, v in values.items() if ".msg_count." in k and not math.isfinite(v)}
    if not bad:
        return []
    shown = ", ".join(sorted(bad)[:5]) + (" ..." if len(bad) > 5 else "")
    return [f"{len(bad)} statistics are nan/inf; the metrics they feed are left empty: {shown}"]


# ------------------------------------------------------------- across runs
# The spec columns every frame carries (one per point field the reports group by).
SPEC_COLS = [
    "backend",
    "policy",
    "numa_balancing",
    "sockets",
    "cores_per_socket",
    "numa_factor",
    "link_latency",
    "threads",
    "mix",
    "repeat",
    "kernel_variant",
    "pinning",  # job option (point.job_options), an axis for the positive control
    "warmup_s",  # job option: timing-CPU warm-up before the ROI (gem5); apart, never averaged
    "sched_scale",  # job option sched_domain, as sched_scale_label(): apart, never averaged
    # job option numa_balancing_scan, as nb_scan_label(): apart, never averaged
    # (frames kept before it have no such column: read_frames adds it, empty)
    "nb_scan",
    "cpu_roi",  # gem5's CPU model in the ROI (spec cpu.roi; None off gem5): apart, never averaged
]
# The spec columns that are job options (point.job_options), not point fields.
JOB_OPTION_COLS = ("pinning", "warmup_s")


def sched_scale_label(sd: Any) -> str | None:
    """The balancer's time scale a run set (job option sched_domain) in one
    short label, e.g. "NUMA bf=1 int=1-4ms mc=0.05ms"; None: kernel defaults."""
    if not isinstance(sd, dict) or len(sd) <= 1:
        return None
    parts = [str(sd.get("level", "NUMA"))]
    if "busy_factor" in sd:
        parts.append(f"bf={sd['busy_factor']}")
    if "min_interval" in sd or "max_interval" in sd:
        parts.append(f"int={sd.get('min_interval', '')}-{sd.get('max_interval', '')}ms")
    if "imbalance_pct" in sd:
        parts.append(f"imb={sd['imbalance_pct']}")
    if isinstance(sd.get("migration_cost_ns"), int | float):
        parts.append(f"mc={sd['migration_cost_ns'] / 1e6:g}ms")
    if isinstance(sd.get("latency_ns"), int | float):
        parts.append(f"lat={sd['latency_ns'] / 1e6:g}ms")
    if isinstance(sd.get("min_granularity_ns"), int | float):
        parts.append(f"gran={sd['min_granularity_ns'] / 1e6:g}ms")
    if isinstance(sd.get("wakeup_granularity_ns"), int | float):
        parts.append(f"wake={sd['wakeup_granularity_ns'] / 1e6:g}ms")
    if isinstance(sd.get("hrtick"), bool):
        parts.append("hrtick" if sd["hrtick"] else "no-hrtick")
    return " ".join(parts)


def nb_scan_label(scan: Any) -> str | None:
    """NUMA balancing's time constants a run set (job option numa_balancing_scan)
    in one short label, e.g. "delay=10ms period=5-20ms size=64MB"; None: the
    kernel's (6.1: delay 1000 ms, period 1000-60000 ms, 256 MB)."""
    if not isinstance(scan, dict) or not scan:
        return None
    parts = []
    if "scan_delay_ms" in scan:
        parts.append(f"delay={scan['scan_delay_ms']}ms")
    lo, hi = scan.get("scan_period_min_ms"), scan.get("scan_period_max_ms")
    if lo is not None and hi is not None:
        parts.append(f"period={lo}-{hi}ms")
    elif lo is not None:
        parts.append(f"period_min={lo}ms")
    elif hi is not None:
        parts.append(f"period_max={hi}ms")
    if "scan_size_mb" in scan:
        parts.append(f"size={scan['scan_size_mb']}MB")
    return " ".join(parts) or None


# Those that identify a configuration: everything but the treatment (policy and
# NUMA balancing) and the repeat.
CONFIG_COLS = [c for c in SPEC_COLS if c not in ("policy", "numa_balancing", "repeat")]


BASELINES = ("stock", "default")  # preferred first


def add_speedup(frame: pd.DataFrame) -> pd.DataFrame:
    """Append speedup and improvement_pct rows for every elapsed_s row with a baseline partner.

    The baseline is ``stock`` (the unmodified kernel) where the configuration
    has it, else ``default`` (the patched kernel's first fit): the same
    configuration and repeat (paired), the same NUMA balancing setting;
    ``autonuma`` (default + balancing) is measured against the baseline with
    balancing off, which is what it adds. The ``baseline`` column names it.
    """
    el = frame[(frame["metric"] == "elapsed_s") & frame["entity_type"].isin(["mix", "program"])]
    if el.empty:
        return frame
    el = el.copy()
    keys = [c for c in CONFIG_COLS if c in el.columns] + ["repeat", "entity_type", "entity"]
    if "numa_balancing" in el.columns:
        nb = pd.to_numeric(el["numa_balancing"], errors="coerce").fillna(0)
        el["_baseline_nb"] = nb.where(el["policy"] != "autonuma", 0)
        keys.append("_baseline_nb")
    m = None
    for name in reversed(BASELINES):  # the preferred baseline overwrites
        base = el[el["policy"] == name][keys + ["value"]].rename(columns={"value": "t_base"})
        # one baseline per key; duplicates (same point in two sweeps) are averaged
        base = base.groupby(keys, dropna=False, observed=True, as_index=False)["t_base"].mean()
        base["baseline"] = name
        if m is None:
            m = base
        else:
            m = pd.concat([m, base]).drop_duplicates(subset=keys, keep="last")
    assert m is not None
    m = el.merge(m, on=keys, how="inner")
    m = m[(m["value"] > 0) & (m["t_base"] > 0)]  # the baseline's own rows are 1.0
    sp = m.copy()
    sp["value"] = m["t_base"] / m["value"]
    sp["metric"] = "speedup"
    imp = sp.copy()
    imp["value"] = (sp["value"] - 1.0) * 100.0
    imp["metric"] = "improvement_pct"
    new = pd.concat([sp, imp], ignore_index=True).drop(
        columns=["t_base", "_baseline_nb"], errors="ignore"
    )
    out = pd.concat([frame, new], ignore_index=True)
    out["metric"] = out["metric"].astype("category")
    return out


# Two-sided 95 % Student t quantiles t_{0.975, df}, df = 1..30.
_T975 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]


def t975(df: int) -> float:
    if df < 1:
        return math.nan
    if df <= 30:
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def summarize(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """mean, std (n-1), n, 95 % CI half-width and bounds of 'value' over the rows of each group."""
    g = frame.groupby(by, dropna=False, observed=True)["value"]
    s = g.agg(["mean", "std", "count"]).reset_index().rename(columns={"count": "n"})
    tq = np.array([t975(int(n) - 1) for n in s["n"]]) if len(s) else np.array([])
    s["ci95"] = tq * s["std"] / np.sqrt(s["n"].clip(lower=1))
    s["ci95_lo"] = s["mean"] - s["ci95"]
    s["ci95_hi"] = s["mean"] + s["ci95"]
    return s
