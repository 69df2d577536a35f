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
import re
import select
import signal
import tarfile
import time
from typing import Any, Dict, List, Optional

from mix_handback import Writer, complete_records
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
from mix_sysctl import NUMAB_SYSCTL, POLICY_SYSCTL, read_sysctl, set_sysctl

# where the runner looks for the synthetic binaries when the job names no bin_dir
HERE = os.path.dirname(os.path.abspath(__file__))


def run_mix(
    job: Dict[str, Any],
    outdir: str,
    sysctl_root: str = "/proc/sys",
    lb_stats: str = "/proc/sched_numa_lb_stats",
    sys_root: str = "/sys",
    bin_dirs: Optional[List[str]] = None,
    roi: Optional[List[str]] = None,
) -> int:
    """ROI: when given (``[M5, OPTIONS..., ID]``), ``M5 OPTIONS workbegin|workend
    ID 0`` run right before
    the programs are released and right after the last one is reaped (under
    gem5: switch to the timing CPU and reset stats / dump stats), so the
    runner's own start-up and bookkeeping stay out of the measured region."""
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
    for rec in (pol, nb):
        if rec["status"] in ("error", "mismatch"):
            errors.append(f"{rec['name']}: {rec['status']} {rec.get('error', '')}".strip())
    fatal = None
    if job["strict_policy"] and job["policy"] is not None and pol["status"] != "set":
        fatal = f"strict_policy: {pol['name']} could not be set ({pol['status']})"
    elif job["policy"] is not None and pol["status"] == "error":
        fatal = f"{pol['name']} rejected {job['policy']!r}: {pol.get('error')}"

    w.write(
        {
            "type": "run",
            "schema": SCHEMA,
            "run_id": rid,
            "time_unix": time.time(),
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
            "pinning": job["pinning"],
            "pin_threads": job["pin_threads"],
            "sample_interval_s": job["sample_interval_s"],
            "job": job,
        }
    )
    if fatal:
        errors.append(fatal)
        w.write({"type": "run_end", "run_id": rid, "status": "failed", "errors": errors})
        w.close()
        return 1

    # 2. plans (binaries, PARSEC command lines, numactl prefixes)
    if bin_dirs is None:
        bin_dirs = [job["bin_dir"]] if job["bin_dir"] else []
        bin_dirs += [HERE, os.path.join(HERE, "build")]
    try:
        plans = plan_programs(job, bin_dirs, cpu_nodes)
    except (OSError, ValueError) as e:
        errors.append(f"planning failed: {e}")
        w.write({"type": "run_end", "run_id": rid, "status": "failed", "errors": errors})
        w.close()
        return 1
    for p in plans:
        if p["prepare_tar"]:  # direct PARSEC launcher: unpack inputs, untimed
            os.makedirs(p["cwd"], exist_ok=True)
            with tarfile.open(p["prepare_tar"]) as tf:
                tf.extractall(p["cwd"])

    # 3. counters before
    vm0 = parse_kv_numbers(read_text("/proc/vmstat"))
    ns0 = numastat(sys_root)
    lb0 = read_text(lb_stats)

    # 4. start everything together: each program is '/bin/sh -c read; exec'
    #    blocked on a pipe the runner closes once all are spawned
    status = run_programs(plans, job, outdir, cpu_node, errors, roi)

    # 5. counters after, policy still in force?
    vm1 = parse_kv_numbers(read_text("/proc/vmstat"))
    ns1 = numastat(sys_root)
    lb1 = read_text(lb_stats)
    pol_end = read_sysctl(sysctl_root, POLICY_SYSCTL)
    nb_end = read_sysctl(sysctl_root, NUMAB_SYSCTL)
    if pol["status"] == "set" and pol_end != pol["in_force"]:
        errors.append(f"policy changed during the run: {pol['in_force']} -> {pol_end}")

    for rec in status["programs"]:
        w.write(rec)
    for rec in status["thread_groups"]:
        w.write(rec)

    restored = {}  # type: Dict[str, Any]
    if job["restore_sysctls"]:
        for rec, path in ((pol, POLICY_SYSCTL), (nb, NUMAB_SYSCTL)):
            if rec["status"] == "set" and rec["before"] is not None:
                restored[rec["name"]] = set_sysctl(sysctl_root, path, rec["before"])["status"]

    lb_rec = {"path": lb_stats, "status": "absent" if lb0 is None else "present"}  # type: Dict
    if lb0 is not None:
        b, a = parse_lb_stats(lb0), parse_lb_stats(lb1)
        lb_rec.update(before_raw=lb0, after_raw=lb1, before=b, after=a, delta=delta(b, a))
    failed = [p["name"] for p in status["programs"] if p["exit_code"] != 0]
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
            "samples": status["samples"],
            "roi": status["roi"],
            "errors": errors,
        }
    )
    w.close()
    return 0 if not failed and not errors else 1


def roi_mark(roi: Optional[List[str]], what: str, errors: List[str]) -> Optional[int]:
    """Run ``M5 OPTIONS WHAT ID 0`` for ``roi = [M5, OPTIONS..., ID]``; its exit
    status (None: no ROI)."""
    if not roi:
        return None
    import subprocess  # noqa: PLC0415 - only the running path needs it

    try:
        rc = subprocess.call(roi[:-1] + [what, roi[-1], "0"])
    except OSError as e:
        errors.append(f"roi {what}: {e}")
        return -1
    if rc != 0:
        errors.append(f"roi {what}: exit {rc}")
    return rc


def run_programs(
    plans: List[Dict], job: Dict[str, Any], outdir: str, cpu_node: Dict[int, int],
    errors: List[str], roi: Optional[List[str]] = None,
) -> Dict[str, Any]:  # fmt: skip
    import subprocess  # local: only the running path needs it

    gate_r, gate_w = os.pipe()
    procs = {}  # type: Dict[int, Dict[str, Any]]  # pid -> state
    results = {}  # type: Dict[int, Dict[str, Any]]  # program index -> record
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
        }  # type: Dict[str, Any]
        if "parsec" in p:
            rec["parsec"] = p["parsec"]
        results[p["index"]] = rec
        # The shell blocks in 'read' on the gate pipe (its stdin) until the
        # runner closes the write end, then execs the program with stdin
        # from /dev/null: every program starts within one exec of the others.
        argv = ["/bin/sh", "-c", 'read _gate; exec "$@" </dev/null', "mix-gate"] + p["argv"]
        try:
            with open(out + ".out", "wb") as so, open(out + ".err", "wb") as se:
                proc = subprocess.Popen(
                    argv, stdin=gate_r, stdout=so, stderr=se, env=p["env"], cwd=p["cwd"],
                    start_new_session=True,  # own process group: timeout kills the tree
                )  # fmt: skip
        except OSError as e:
            rec["error"] = f"spawn failed: {e}"
            rec["exit_code"] = 127
            errors.append(f"{p['name']}: {rec['error']}")
            continue
        rec["pid"] = proc.pid
        procs[proc.pid] = {"index": p["index"], "proc": proc, "tree": p["kind"] != "workload"}
    os.close(gate_r)

    # SIGCHLD wakes the select() below, so exits are timed to the
    # millisecond without busy polling between samples.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    old_wake = signal.set_wakeup_fd(wake_w)
    old_chld = signal.signal(signal.SIGCHLD, lambda s, f: None)

    sampler = Sampler(cpu_node, job["read_sched"])
    interval = job["sample_interval_s"]
    roi_rc = {"begin": roi_mark(roi, "workbegin", errors)}
    t0 = time.monotonic()
    os.close(gate_w)  # release the gate: all programs start now
    deadline = t0 + job["timeout_s"] if job["timeout_s"] else None
    timed_out = False
    samples = 0
    next_sample = t0
    try:
        while procs:
            now = time.monotonic()
            if now >= next_sample:
                for pid, st in procs.items():
                    sampler.sample(st["index"], pid, st["tree"], now - t0)
                samples += 1
                next_sample = now + interval
            _reap(procs, results, t0)
            if not procs:
                break
            if deadline is not None and time.monotonic() >= deadline and not timed_out:
                timed_out = True
                errors.append(f"timeout after {job['timeout_s']} s: killing {len(procs)}")
                for pid, st in procs.items():
                    results[st["index"]]["timed_out"] = True
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
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
    elapsed = time.monotonic() - t0
    roi_rc["end"] = roi_mark(roi, "workend", errors)

    tgs = complete_records(results, sampler.groups, outdir, job["run_id"])
    return {
        "programs": [results[i] for i in sorted(results)],
        "thread_groups": tgs,
        "elapsed_s": round(elapsed, 6),
        "timed_out": timed_out,
        "samples": samples,
        "roi": roi_rc,
    }


def _reap(procs: Dict[int, Dict[str, Any]], results: Dict[int, Dict], t0: float) -> None:
    for pid in list(procs):
        try:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            wpid, status, ru = pid, 0, None
        if wpid == 0:
            continue
        st = procs.pop(pid)
        st["proc"].returncode = status  # keep Popen from re-waiting or warning
        rec = results[st["index"]]
        rec["elapsed_s"] = round(time.monotonic() - t0, 6)
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
