#!/usr/bin/env python3
"""numa-lb-study mix runner: runs one job (a mix of programs) inside the guest.

Reads a job (JSON), sets the load-balancing policy and NUMA balancing through
/proc/sys, starts every program of the mix at the same moment, samples their
thread groups while they run, waits, and writes JSON lines (schema in
workloads/README.md) with per-program, per-thread-group and per-run data.

Runs as a normal process on any Linux (the unit tests run it on the build
host) and as a child of the guest init. Stdlib only, and Python >= 3.6
because the gem5-resources x86-parsec image is Ubuntu 18.04: hence
typing.List/Dict/Optional, no dataclasses, no subprocess text=/capture_output.

Usage:
  mixrunner.py JOB.json --outdir DIR [--sysctl-root /proc/sys]
               [--lb-stats /proc/sched_numa_lb_stats] [--bin-dir DIR] [--dry-run]
Exit: 0 every program exited 0; 1 a program or the runner failed (the results
are still written); 2 the job is invalid.

This file is the entry point and the module others import (analysis/sweep,
disk-image/qemu_boot, the tests): it re-exports the names below. The work is
done by its sibling modules, one per phase of a run:
  mix_job.py        the job format: validation and defaults
  mix_sysctl.py     the policy / NUMA balancing sysctls, set and read back
  mix_placement.py  topology (cpu/node sets), pinning scenarios, program plans
  mix_run.py        the run: start the mix together, sample, reap, time out
  mix_metrics.py    /proc and sysfs readings: kernel counters, the sampler
  mix_handback.py   results.jsonl: the writer and the per-program records
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6;
# E402: the sibling modules are imported after sys.path is set.
# ruff: noqa: UP006, UP035, UP045, E402

import argparse
import json
import os
import sys
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the mix_* phase modules and parsec_catalog are siblings
from mix_handback import _ROI_RE, Writer, tail, workload_result
from mix_job import PINNINGS, SCHEMA, SYNTHETIC, JobError, load_job
from mix_metrics import (
    F_MAJFLT,
    F_MINFLT,
    F_NUM_THREADS,
    F_PROCESSOR,
    Sampler,
    TaskState,
    ThreadGroup,
    delta,
    numastat,
    parse_kv_numbers,
    parse_lb_stats,
    read_stat,
    read_text,
)
from mix_placement import node_cpus, node_distances, parse_list, pin_prefix, plan_programs
from mix_run import roi_mark, run_mix, run_programs
from mix_sysctl import NUMAB_SYSCTL, POLICY_SYSCTL, read_sysctl, set_sysctl

# What other code uses as mixrunner.<name>: keep this list when moving code.
__all__ = [
    "F_MAJFLT", "F_MINFLT", "F_NUM_THREADS", "F_PROCESSOR", "NUMAB_SYSCTL", "PINNINGS",
    "POLICY_SYSCTL", "SCHEMA", "SYNTHETIC", "JobError", "Sampler", "TaskState", "ThreadGroup",
    "Writer", "_ROI_RE", "delta", "load_job", "main", "node_cpus", "node_distances",
    "numastat", "parse_kv_numbers", "parse_lb_stats", "parse_list", "pin_prefix",
    "plan_programs", "read_stat", "read_sysctl", "read_text", "roi_mark", "run_mix",
    "run_programs", "set_sysctl", "tail", "workload_result",
]  # fmt: skip


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("job", help="job JSON file ('-' for stdin)")
    ap.add_argument("--outdir", help="result directory (results.jsonl, program output)")
    ap.add_argument("--sysctl-root", default="/proc/sys")
    ap.add_argument("--lb-stats", default="/proc/sched_numa_lb_stats")
    ap.add_argument("--sys-root", default="/sys")
    ap.add_argument("--bin-dir", action="append", help="where synthetic workloads live")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    ap.add_argument(
        "--roi",
        nargs="+",
        metavar="ARG",
        help="bracket the mix: M5 [OPTIONS] ID runs M5 OPTIONS workbegin|workend ID 0",
    )
    a = ap.parse_args(argv)
    try:
        raw = sys.stdin.read() if a.job == "-" else open(a.job).read()
        job = load_job(json.loads(raw))
    except (OSError, ValueError, JobError) as e:
        # JSON errors are ValueErrors; a bad job must never look like a run
        print(f"mixrunner: invalid job: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        topo = node_cpus(a.sys_root)
        dirs = a.bin_dir or ([job["bin_dir"]] if job["bin_dir"] else [])
        dirs += [HERE, os.path.join(HERE, "build")]
        try:
            plans = plan_programs(job, dirs, sorted(n for n, c in topo.items() if c))
        except (OSError, ValueError) as e:
            print(f"mixrunner: cannot plan: {e}", file=sys.stderr)
            return 1
        for p in plans:
            p.pop("env")
            print(json.dumps(dict(p, type="plan"), sort_keys=True))
        return 0
    if not a.outdir:
        print("mixrunner: --outdir is required (except with --dry-run)", file=sys.stderr)
        return 2
    return run_mix(job, a.outdir, a.sysctl_root, a.lb_stats, a.sys_root, a.bin_dir, a.roi)


if __name__ == "__main__":
    sys.exit(main())
