"""Running a mix: the phases of one run, and starting and reaping its programs.

run_mix is the sequence (policy sysctls, plans, counters before, the
programs, counters after, records); run_programs starts every program of the
mix at the same moment behind a gate pipe, samples them while they run and
reaps each one as it exits (SIGCHLD wakes the loop), killing the lot on
timeout; roi_mark brackets the programs with m5 work items under gem5.
Stdlib only, Python >= 3.6 (see mixrunner.py).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
import platform
import random
import re
import select
import signal
import tarfile
import time
from typing import Any, Dict, List, Optional, Tuple

import mix_interrupts
import mix_schedstat
import parsec_catalog
from mix_handback import Writer, collect_outputs, complete_records
from mix_job import SCHEMA
from mix_metrics import (
    Sampler,
    clock_info,
    delta,
    numastat,
    parse_kv_numbers,
    parse_lb_stats,
    read_text,
)
from mix_placement import node_cpus, node_distances, plan_programs
from mix_sysctl import (
    M5_SWITCH_SYSCTL,
    NUMAB_SYSCTL,
    POLICY_SYSCTL,
    SCHEDSTATS_SYSCTL,
    domain_names,
    read_sysctl,
    restore_numa_scan,
    restore_sched_domain,
    set_numa_scan,
    set_sched_domain,
    set_sysctl,
)

# where the runner looks for the synthetic binaries when the job names no bin_dir
HERE = os.path.dirname(os.path.abspath(__file__))
# OUTDIR/PARSEC_WORK/NN-<name>: work directories of our PARSEC build's programs
# (a subdirectory: the hand back takes only OUTDIR's own files)
PARSEC_WORK = "parsec-work"
# When this module was imported: with the run record's own stamp it splits a
# gem5 run's atomic phase before the warm-up into interpreter start + imports
# and the runner's set-up (CLOCK_MONOTONIC, seconds since boot in the guest).
IMPORTED_MONOTONIC_S = time.monotonic()
# gem5 work item that moves the simulation to the ROI CPU before the ROI
# (configs/numa_lb/roi.py WARM_WORK_ID): the warm-up fills Ruby's caches,
# probe filters and the TLBs that the atomic_noncaching boot left empty.
WARM_WORK_ID = 4


def run_mix(
    job: Dict[str, Any],
    outdir: str,
    sysctl_root: str = "/proc/sys",
    lb_stats: str = "/proc/sched_numa_lb_stats",
    sys_root: str = "/sys",
    bin_dirs: Optional[List[str]] = None,
    roi: Optional[List[str]] = None,
    schedstat: str = mix_schedstat.SCHEDSTAT,
    prestart: Optional[Dict[str, float]] = None,
    interrupts: str = mix_interrupts.INTERRUPTS,
) -> int:
    """ROI: when given (``[M5, OPTIONS..., ID]``), ``M5 OPTIONS workbegin|workend
    ID 0`` run right before
    the programs are released and right after the last one is reaped (under
    gem5: switch to the timing CPU and reset stats / dump stats), so the
    runner's own start-up and bookkeeping stay out of the measured region.
    PRESTART: a runner started before the job was known (mixrunner.py
    --serve), the monotonic times it was ready and got its request; goes to
    the run record as is (None: started with its arguments)."""
    os.makedirs(outdir, exist_ok=True)
    w = Writer(os.path.join(outdir, "results.jsonl"))
    errors = []  # type: List[str]
    rid = job["run_id"]
    topo = node_cpus(sys_root)
    cpu_node = {c: n for n, cpus in topo.items() for c in cpus}
    cpu_nodes = sorted(n for n, cpus in topo.items() if cpus)
    uname = platform.uname()

    # 1. policy and NUMA balancing, through /proc/sys, read back
    pol = set_sysctl(sysctl_root, POLICY_SYSCTL, job["policy"])
    nb = set_sysctl(
        sysctl_root,
        NUMAB_SYSCTL,
        None if job["numa_balancing"] is None else str(job["numa_balancing"]),
    )
    # the kernel's balancing statistics (mix_schedstat): a diagnostic, so a
    # kernel without them runs anyway and the record says so
    sst = set_sysctl(sysctl_root, SCHEDSTATS_SYSCTL, "1")
    # gem5's per-task counts: an m5 op per context switch (kernel patch 0024)
    marks = set_sysctl(sysctl_root, M5_SWITCH_SYSCTL, "1" if job["switch_marks"] else None)
    for rec in (pol, nb):
        if rec["status"] in ("error", "mismatch"):
            errors.append(f"{rec['name']}: {rec['status']} {rec.get('error', '')}".strip())
    # balancing intervals scaled to the ROI (a methodological setting of the
    # spec, the same for every policy): not applied is not the asked-for run
    dom = set_sched_domain(sys_root, job["sched_domain"])
    # NUMA balancing's scan delay, periods and size, scaled alike (written
    # before any program's mm exists: the delay is read when it is set up)
    nbs = set_numa_scan(sys_root, job["numa_balancing_scan"])
    fatal = None
    if job["strict_policy"] and job["policy"] is not None and pol["status"] != "set":
        fatal = f"strict_policy: {pol['name']} could not be set ({pol['status']})"
    elif job["policy"] is not None and pol["status"] == "error":
        fatal = f"{pol['name']} rejected {job['policy']!r}: {pol.get('error')}"
    elif job["policy_requested"] == "stock" and pol["status"] != "absent":
        fatal = f"policy stock needs the unmodified kernel, but this one has {pol['name']}"
    elif job["switch_marks"] and marks["status"] != "set":
        fatal = (
            f"switch_marks: {marks['name']} could not be set ({marks['status']}: "
            f"{marks.get('error', 'a kernel without patch 0024, or booted without numa_lb_m5=1')})"
        )
    elif dom["status"] not in ("set", "untouched"):
        fatal = f"sched_domain {job['sched_domain']} not applied ({dom['status']})"
    elif nbs["status"] not in ("set", "untouched"):
        why = {
            "absent": f"no {nbs.get('dir')}: debugfs not mounted or no CONFIG_NUMA_BALANCING",
            "error": "; ".join(nbs.get("errors", [])),
            "mismatch": f"in force {nbs.get('in_force')}",
        }.get(nbs["status"], "")
        fatal = (
            f"numa_balancing_scan {job['numa_balancing_scan']} not applied ({nbs['status']}: {why})"
        )

    w.write(
        {
            "type": "run",
            "schema": SCHEMA,
            "run_id": rid,
            "time_unix": time.time(),
            "monotonic_s": {"imported": IMPORTED_MONOTONIC_S, "run_record": time.monotonic()},
            "prestart": prestart,
            "kernel": {
                "release": uname.release,
                "version": uname.version,
                "machine": uname.machine,
                "proc_version": (read_text("/proc/version") or "").strip(),
            },
            "python": platform.python_version(),
            "clock": clock_info(sys_root),
            "nodes": {str(n): c for n, c in sorted(topo.items())},
            "distances": {str(n): d for n, d in sorted(node_distances(sys_root).items())},
            "policy": dict(pol, requested_name=job["policy_requested"]),
            "numa_balancing": nb,
            "sched_schedstats": sst,
            "switch_marks": marks,
            "sched_domain": {k: v for k, v in dom.items() if k != "before"},
            "numa_balancing_scan": nbs,
            "pinning": job["pinning"],
            "pin_threads": job["pin_threads"],
            "sample_interval_s": job["sample_interval_s"],
            "job": job,
        }
    )
    if fatal:
        restore_sched_domain(dom)
        restore_numa_scan(nbs)
        if marks["status"] == "set" and marks["before"] is not None:
            set_sysctl(sysctl_root, M5_SWITCH_SYSCTL, marks["before"])
        errors.append(fatal)
        w.write({"type": "run_end", "run_id": rid, "status": "failed", "errors": errors})
        w.close()
        return 1

    # 2. plans (binaries, PARSEC command lines, numactl prefixes)
    if bin_dirs is None:
        bin_dirs = [job["bin_dir"]] if job["bin_dir"] else []
        bin_dirs += [HERE, os.path.join(HERE, "build")]
    try:
        plans = plan_programs(
            job, bin_dirs, cpu_nodes, os.path.join(os.path.abspath(outdir), PARSEC_WORK)
        )
        for p in plans:
            if p["prepare_tar"]:  # direct PARSEC launcher: unpack inputs, untimed
                os.makedirs(p["cwd"], exist_ok=True)
                with tarfile.open(p["prepare_tar"]) as tf:
                    tf.extractall(p["cwd"])
            if p.get("installed"):  # our PARSEC build: link inputs, fill templates, untimed
                parsec_catalog.prepare_workdir(parsec_catalog.InstalledRun(**p["installed"]))
    except (OSError, ValueError) as e:
        errors.append(f"planning failed: {e}")
        w.write({"type": "run_end", "run_id": rid, "status": "failed", "errors": errors})
        w.close()
        return 1

    # 3. counters before
    vm0 = parse_kv_numbers(read_text("/proc/vmstat"))
    ns0 = numastat(sys_root)
    lb0 = read_text(lb_stats)
    ss_names = domain_names(sys_root)
    ss0 = mix_schedstat.snapshot(schedstat)

    # 4. start everything together: each program is forked and blocked on its
    #    own gate pipe before exec; the runner opens the gates (seeded offsets)
    status = run_programs(plans, job, outdir, cpu_node, errors, roi, schedstat, interrupts)
    by_index = {rec["index"]: rec for rec in status["programs"]}
    for p in plans:
        if p.get("installed"):
            by_index[p["index"]]["outputs"] = collect_outputs(
                p["installed"], outdir, "prog-{:02d}-{}".format(p["index"], _safe(p["name"]))
            )

    stamps = dict(status["monotonic_s"], records_completed=time.monotonic())
    # 5. counters after, policy still in force?
    vm1 = parse_kv_numbers(read_text("/proc/vmstat"))
    ns1 = numastat(sys_root)
    lb1 = read_text(lb_stats)
    ss1 = mix_schedstat.snapshot(schedstat)
    pol_end = read_sysctl(sysctl_root, POLICY_SYSCTL)
    nb_end = read_sysctl(sysctl_root, NUMAB_SYSCTL)
    if pol["status"] == "set" and pol_end != pol["in_force"]:
        errors.append(f"policy changed during the run: {pol['in_force']} -> {pol_end}")

    stamps["counters_read"] = time.monotonic()
    for rec in status["programs"]:
        w.write(rec)
    for rec in status["thread_groups"]:
        w.write(rec)

    restored = {}  # type: Dict[str, Any]
    if job["restore_sysctls"]:
        if dom["status"] != "untouched":
            restored["sched_domain"] = restore_sched_domain(dom)
        if nbs["status"] != "untouched":
            restored["numa_balancing_scan"] = restore_numa_scan(nbs)
        for rec, path in (
            (pol, POLICY_SYSCTL),
            (nb, NUMAB_SYSCTL),
            (sst, SCHEDSTATS_SYSCTL),
            (marks, M5_SWITCH_SYSCTL),
        ):
            if rec["status"] == "set" and rec["before"] is not None:
                restored[rec["name"]] = set_sysctl(sysctl_root, path, rec["before"])["status"]

    stamps["restored"] = time.monotonic()
    lb_rec = {"path": lb_stats, "status": "absent" if lb0 is None else "present"}  # type: Dict
    if lb0 is not None:
        b, a = parse_lb_stats(lb0), parse_lb_stats(lb1)
        lb_rec.update(before_raw=lb0, after_raw=lb1, before=b, after=a, delta=delta(b, a))
    # a background program the runner stopped is not a failure; one that ended
    # on its own with an error is
    failed = [
        p["name"] for p in status["programs"]
        if p["exit_code"] != 0 and not (p.get("stopped_by_runner") and p["signal"])
    ]  # fmt: skip
    w.write(
        {
            "type": "run_end",
            "run_id": rid,
            "status": "ok" if not failed and not errors else "failed",
            "elapsed_s": status["elapsed_s"],
            "timed_out": status["timed_out"],
            "programs_failed": failed,
            "policy_at_end": pol_end,
            "numa_balancing_at_end": nb_end,
            "sysctls_restored": restored,
            "vmstat_delta": delta(vm0, vm1),
            "numastat_delta": delta(ns0, ns1),
            "sched_numa_lb_stats": lb_rec,
            # domain deltas over the whole run; per-CPU deltas over the ROI
            "schedstat": dict(mix_schedstat.record(ss0, ss1, ss_names), cpu=status["sched_cpu"]),
            # per-CPU interrupt counts over the same windows (mix_interrupts)
            "interrupts": status["interrupts"],
            "samples": status["samples"],
            "roi": status["roi"],
            "start_jitter": status["start_jitter"],
            "errors": errors,
            # CLOCK_MONOTONIC s: release, reaped (last program), workend (its
            # m5 call returned: the ROI has ended), records_completed, counters_read,
            # restored (sysctls), record (this record built, not yet encoded)
            "monotonic_s": dict(stamps, record=time.monotonic()),
        }
    )
    w.close()
    return 0 if not failed and not errors else 1


def roi_mark(
    roi: Optional[List[str]], what: str, errors: List[str], work_id: Optional[int] = None
) -> Optional[int]:
    """Run ``M5 OPTIONS WHAT ID 0`` for ``roi = [M5, OPTIONS..., ID]`` (ID:
    ``work_id`` when given); its exit status (None: no ROI)."""
    if not roi:
        return None
    import subprocess  # noqa: PLC0415 - only the running path needs it

    wid = roi[-1] if work_id is None else str(work_id)
    try:
        rc = subprocess.call(roi[:-1] + [what, wid, "0"])
    except OSError as e:
        errors.append(f"roi {what}: {e}")
        return -1
    if rc != 0:
        errors.append(f"roi {what}: exit {rc}")
    return rc


# The patched kernel's per-thread-group migration counters (cumulative over
# exited threads, by cause); read once, at program end, from the zombie.
MIGRATIONS_FILE = "/proc/{pid}/numa_lb_migrations"


def read_kv(path: str) -> Optional[Dict[str, int]]:
    """``key value`` lines as ints; None when the file does not exist (stock kernel)."""
    text = read_text(path)
    if text is None:
        return None
    out = {}  # type: Dict[str, int]
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


# A repeat's seed varies the start, so that repeats of a deterministic simulator
# differ on the guest side (never through Ruby's randomization): a delay before
# the ROI shifts where the programs start relative to the kernel's tick and
# balancing intervals, and each program's gate opens at its own small offset.
PRE_GATE_MAX_S = 0.005
START_OFFSET_MAX_S = 0.001


def start_jitter(seed: Optional[int], indices: List[int]) -> Dict[str, Any]:
    """The seeded pre-ROI delay and per-program start offsets (all 0 without a seed)."""
    if seed is None:
        return {"seed": None, "pre_gate_s": 0.0, "offsets_s": {i: 0.0 for i in indices}}
    rng = random.Random(seed)
    pre = round(rng.uniform(0.0, PRE_GATE_MAX_S), 6)
    offsets = {i: round(rng.uniform(0.0, START_OFFSET_MAX_S), 6) for i in sorted(indices)}
    return {"seed": seed, "pre_gate_s": pre, "offsets_s": offsets}


def spawn_gated(
    argv: List[str], env: Dict[str, str], cwd: Optional[str], out: str, err: str,
    gate: int, close_in_child: List[int],
) -> int:  # fmt: skip
    """Fork a child that waits for its gate, then execs ARGV itself; return its pid.

    No shell in between (the pid sampled and counted is the program's from the
    start), and not subprocess.Popen: Popen waits for the exec, and this child
    execs only when the runner closes the gate's write end. The child closes
    every gate write end it inherited (a copy left open would keep that gate
    shut forever); an exec failure exits 127, as a shell's would.
    """
    so = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    se = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pid = os.fork()
        if pid == 0:  # child: only async-signal-safe-ish calls until exec
            try:
                os.setsid()  # own process group: timeout kills the tree
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(so, 1)
                os.dup2(se, 2)
                for w in close_in_child:
                    os.close(w)
                if cwd:
                    os.chdir(cwd)
                os.read(gate, 1)  # EOF when the runner opens the gate
                os.execvpe(argv[0], argv, env)
            except BaseException as e:  # noqa: BLE001 - the child must never return
                try:
                    os.write(2, f"mix-gate: {argv[0]}: {e}\n".encode())
                finally:
                    os._exit(127)
        return pid
    finally:
        os.close(so)
        os.close(se)


def open_gates(gates: List[Tuple[int, int]], offsets: Dict[int, float], t0: float) -> None:
    """Close each gate's write end at t0 + its offset, earliest first."""
    for index, fd in sorted(gates, key=lambda g: (offsets.get(g[0], 0.0), g[0])):
        wait = t0 + offsets.get(index, 0.0) - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        os.close(fd)


def run_programs(
    plans: List[Dict], job: Dict[str, Any], outdir: str, cpu_node: Dict[int, int],
    errors: List[str], roi: Optional[List[str]] = None, schedstat: Optional[str] = None,
    interrupts: Optional[str] = None,
) -> Dict[str, Any]:  # fmt: skip
    gates = []  # type: List[Tuple[int, int]]  # (program index, gate write end)
    procs = {}  # type: Dict[int, Dict[str, Any]]  # pid -> state
    results = {}  # type: Dict[int, Dict[str, Any]]  # program index -> record
    # Warm-up (job warmup_s > 0): the ROI CPU takes over here, before the
    # programs are forked, and the guest runs warmup_s more on it (forks,
    # timer ticks, the runner) before the ROI resets the statistics.
    warm_rc = None
    if job["warmup_s"] > 0:
        warm_rc = roi_mark(roi, "workbegin", errors, WARM_WORK_ID)
    for p in plans:
        out = os.path.join(outdir, f"prog-{p['index']:02d}-{_safe(p['name'])}")
        rec = {
            "type": "program",
            "run_id": job["run_id"],
            "index": p["index"],
            "name": p["name"],
            "kind": p["kind"],
            "argv": p["argv"],
            "threads_requested": p["threads_requested"],
            "placement": p["placement"],
            "stdout": os.path.basename(out) + ".out",
            "stderr": os.path.basename(out) + ".err",
            "pid": None,
            "exit_code": None,
            "signal": None,
            "timed_out": False,
            "elapsed_s": None,
            "rusage": None,
            "result": None,
            "roi_s": None,
            "error": None,
            # /proc/<pid>/numa_lb_migrations at exit (None: the kernel has none)
            "kernel_migrations": None,
            # load for the others: not timed, stopped when the others have ended
            "background": p.get("background", False),
        }  # type: Dict[str, Any]
        if "parsec" in p:
            rec["parsec"] = p["parsec"]
        results[p["index"]] = rec
        # No shell in between: the forked child blocks reading its gate pipe
        # (preexec) and then execs the program itself, so the pid the runner
        # samples and reads counters of is the program's from the start.
        gate_r, gate_w = os.pipe()
        try:
            pid = spawn_gated(
                p["argv"], p["env"], p["cwd"], out + ".out", out + ".err", gate_r,
                [w for _, w in gates] + [gate_w],
            )  # fmt: skip
        except OSError as e:
            os.close(gate_w)
            rec["error"] = f"spawn failed: {e}"
            rec["exit_code"] = 127
            errors.append(f"{p['name']}: {rec['error']}")
            continue
        finally:
            os.close(gate_r)
        rec["pid"] = pid
        gates.append((p["index"], gate_w))
        procs[pid] = {
            "index": p["index"],
            "tree": p["kind"] != "workload",
            "background": p.get("background", False),
        }

    # SIGCHLD wakes the select() below, so exits are timed to the
    # millisecond without busy polling between samples.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    old_wake = signal.set_wakeup_fd(wake_w)
    old_chld = signal.signal(signal.SIGCHLD, lambda s, f: None)

    sampler = Sampler(cpu_node, job["read_sched"])
    interval = job["sample_interval_s"]
    jitter = start_jitter(job.get("seed"), [i for i, _ in gates])
    for i, off in jitter["offsets_s"].items():
        results[i]["start_offset_s"] = off
    time.sleep(job["warmup_s"] + jitter["pre_gate_s"])  # jitter: shifts the tick phase
    roi_rc = {"warmup": warm_rc, "begin": roi_mark(roi, "workbegin", errors)}
    # The run queues' time counters (mix_schedstat.cpu_window) bracket the
    # programs: inside the ROI, while every program waits at its gate, and
    # again after the last one is reaped (nothing of the mix running or
    # queued, so nothing is left uncounted at either end); a third read when
    # the first program has ended closes the "all running" window.
    ss_path = schedstat or ""
    ss_begin = mix_schedstat.stamp(ss_path) if ss_path else None
    irq_path = interrupts or ""
    irq_begin = mix_interrupts.snapshot(irq_path) if irq_path else None
    ss_first = None  # type: Optional[Tuple[float, str]]
    irq_first = None  # type: Optional[str]
    n_fg = _n_foreground(procs)
    t0 = time.monotonic()
    open_gates(gates, jitter["offsets_s"], t0)  # programs start now (seeded offsets)
    deadline = t0 + job["timeout_s"] if job["timeout_s"] else None
    timed_out = False
    samples = 0
    next_sample = t0

    def foreground() -> bool:
        return _n_foreground(procs) > 0

    try:
        while foreground():
            now = time.monotonic()
            if now >= next_sample:
                for pid, st in procs.items():
                    sampler.sample(st["index"], pid, st["tree"], now - t0)
                samples += 1
                next_sample = now + interval
            _reap(procs, results, t0)
            if ss_begin is not None and ss_first is None and _n_foreground(procs) < n_fg:
                ss_first = mix_schedstat.stamp(ss_path)
                irq_first = mix_interrupts.snapshot(irq_path) if irq_begin is not None else None
            if not foreground():
                break
            if deadline is not None and time.monotonic() >= deadline and not timed_out:
                timed_out = True
                errors.append(f"timeout after {job['timeout_s']} s: killing {len(procs)}")
                for st in procs.values():
                    results[st["index"]]["timed_out"] = True
                signal_groups(procs, signal.SIGKILL)
            wait = max(0.0, next_sample - time.monotonic())
            if deadline is not None and not timed_out:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                select.select([wake_r], [], [], wait)
            except InterruptedError:
                pass
            try:
                while os.read(wake_r, 512):
                    pass
            except (BlockingIOError, InterruptedError):
                pass
    finally:
        signal.signal(signal.SIGCHLD, old_chld)
        signal.set_wakeup_fd(old_wake)
        os.close(wake_r)
        os.close(wake_w)
    reaped = time.monotonic()
    elapsed = reaped - t0
    ss_end = mix_schedstat.stamp(ss_path) if ss_begin is not None else None
    irq_end = mix_interrupts.snapshot(irq_path) if irq_begin is not None else None
    roi_rc["end"] = roi_mark(roi, "workend", errors)
    # where the guest time after the ROI goes (a gem5 run's hand-back phase):
    # CLOCK_MONOTONIC stamps, the same clock as the init's (status.json)
    stamps = {"release": t0, "reaped": reaped, "workend": time.monotonic()}
    stop_background(procs, results, t0)

    tgs = complete_records(results, sampler.groups, outdir, job["run_id"])
    return {
        "programs": [results[i] for i in sorted(results)],
        "thread_groups": tgs,
        "elapsed_s": round(elapsed, 6),
        "timed_out": timed_out,
        "samples": samples,
        "start_jitter": jitter,
        "roi": roi_rc,
        "sched_cpu": sched_cpu_record(ss_begin, ss_first, ss_end, t0),
        "interrupts": mix_interrupts.record(irq_begin, irq_first, irq_end),
        "monotonic_s": stamps,
    }


def _n_foreground(procs: Dict[int, Dict[str, Any]]) -> int:
    return sum(1 for st in procs.values() if not st["background"])


def sched_cpu_record(
    begin: Optional[Tuple[float, str]], first: Optional[Tuple[float, str]],
    end: Optional[Tuple[float, str]], t0: float,
) -> Dict[str, Any]:  # fmt: skip
    """The run_end schedstat "cpu" entry: per-CPU deltas over the ROI ("roi":
    programs released to last reaped) and until the first program ended
    ("all_running"; a task running or queued at that read is counted only
    later, so its sums are lower bounds); read times relative to the release
    and the raw texts (the kernel's, kept as for the domain lines)."""
    rec = {
        "roi": mix_schedstat.cpu_window(begin, end),
        "all_running": mix_schedstat.cpu_window(begin, first),
    }  # type: Dict[str, Any]
    for key, st in (("begin", begin), ("first_exit", first), ("end", end)):
        rec[key + "_s"] = round(st[0] - t0, 6) if st is not None else None
        rec[key + "_raw"] = st[1] if st is not None else None
    return rec


BACKGROUND_GRACE_S = 5.0  # SIGTERM, then SIGKILL after this


def signal_groups(procs: Dict[int, Dict[str, Any]], sig: int) -> None:
    """Send ``sig`` to every program's process group (one that is gone is skipped)."""
    for pid in procs:
        try:
            os.killpg(pid, sig)
        except OSError:
            pass


def stop_background(procs: Dict[int, Dict[str, Any]], results: Dict[int, Dict], t0: float) -> None:
    """End the background programs left once the others have ended (after the ROI):
    SIGTERM to each group, SIGKILL after BACKGROUND_GRACE_S, then reap them."""
    if not procs:
        return
    for st in procs.values():
        results[st["index"]]["stopped_by_runner"] = True
    signal_groups(procs, signal.SIGTERM)
    deadline = time.monotonic() + BACKGROUND_GRACE_S
    killed = False
    while procs:
        _reap(procs, results, t0)
        if not procs:
            break
        if time.monotonic() >= deadline and not killed:
            killed = True
            signal_groups(procs, signal.SIGKILL)
        time.sleep(0.01)


def _reap(procs: Dict[int, Dict[str, Any]], results: Dict[int, Dict], t0: float) -> None:
    for pid in list(procs):
        try:
            # Exited? Look without reaping: the zombie's /proc entry still holds
            # its thread group's cumulative kernel counters.
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = True
        if info is None:
            continue
        kernel_counts = read_kv(MIGRATIONS_FILE.format(pid=pid))
        try:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            wpid, status, ru = pid, 0, None
        if wpid == 0:
            continue
        results[procs[pid]["index"]]["kernel_migrations"] = kernel_counts
        st = procs.pop(pid)
        rec = results[st["index"]]
        # from this program's own gate opening (t0 + its seeded offset)
        rec["elapsed_s"] = round(time.monotonic() - t0 - rec.get("start_offset_s", 0.0), 6)
        if os.WIFSIGNALED(status):
            rec["signal"] = os.WTERMSIG(status)
            rec["exit_code"] = 128 + rec["signal"]
        else:
            rec["exit_code"] = os.WEXITSTATUS(status)
        if ru is not None:
            rec["rusage"] = {
                "utime_s": ru.ru_utime,
                "stime_s": ru.ru_stime,
                "minflt": ru.ru_minflt,
                "majflt": ru.ru_majflt,
                "nvcsw": ru.ru_nvcsw,
                "nivcsw": ru.ru_nivcsw,
                "maxrss_kb": ru.ru_maxrss,
            }


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name)
