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
  mixrunner.py --serve FD --rundir DIR
Exit: 0 every program exited 0; 1 a program or the runner failed (the results
are still written); 2 the job is invalid; 3 (--serve) no request, or one
refused (nothing ran).

--serve (the guest init, before the boot checkpoint: numa_lb.checkpoint=1):
import everything a run needs, write "ready" on FD (a Unix stream socket the
init holds), then wait for one request on it, a JSON line {"argv": [...]}:
the arguments the runner would have got (mixrunner_argv in the init). The
job and --outdir must lie in the run directory DIR and no argument may hold
a shell metacharacter; the answer is "ok" (then the run goes on exactly as
when started with those arguments, its run record's "prestart" holding the
monotonic times of "ready" and "request") or "refused: REASON". So the
interpreter's start and the imports happen once, before the checkpoint,
not in every restored run.

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
import importlib
import json
import os
import re
import sys
import time
from typing import Any, Dict, List, Optional

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
    "POLICY_SYSCTL", "REQUEST_KEYS", "SCHEMA", "SERVE_EXIT", "SYNTHETIC", "JobError",
    "RequestError", "Sampler", "TaskState", "ThreadGroup", "Writer", "_ROI_RE", "delta",
    "load_job", "main", "node_cpus", "node_distances", "numastat", "parse_kv_numbers",
    "parse_lb_stats", "parse_list", "parse_request", "pin_prefix", "plan_programs", "preload",
    "read_stat", "read_sysctl", "read_text", "roi_mark", "run", "run_mix", "run_programs",
    "serve", "set_sysctl", "tail", "workload_result",
]  # fmt: skip


SERVE_EXIT = 3  # --serve: no request, or one refused; nothing ran
REQUEST_KEYS = ("argv",)
REQUEST_MAX = 1 << 20
# never a shell here (argv lists only), but a request is checked as if it
# could reach one: nothing the init builds has these
SHELL_META = re.compile(r"[\s;&|$`<>(){}\[\]*?!~#'\"\\]")
# Imported inside the run path's functions (glob, shutil, subprocess: only
# the running path needs them; resource: by os.wait4): --serve imports them
# before the checkpoint (tests/unit/test_mixrunner.py checks that a run after
# preload() imports nothing more).
LAZY_MODULES = ("glob", "resource", "shutil", "subprocess")


class RequestError(Exception):
    pass


def parser() -> argparse.ArgumentParser:
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
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--serve"]:
        return serve_main(args)
    return run(parser().parse_args(args))


def run(a: argparse.Namespace, prestart: Optional[Dict[str, float]] = None) -> int:
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
    return run_mix(
        job, a.outdir, a.sysctl_root, a.lb_stats, a.sys_root, a.bin_dir, a.roi, prestart=prestart
    )


# ------------------------------------------------------------------ --serve


def preload() -> None:
    """Import what a run would import later (LAZY_MODULES)."""
    for name in LAZY_MODULES:
        importlib.import_module(name)


def serve_main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="mixrunner.py --serve", description="wait for one request on FD, then run it"
    )
    ap.add_argument(
        "--serve", type=int, required=True, metavar="FD",
        help="a Unix stream socket: 'ready' out, the request in, the answer out",
    )  # fmt: skip
    ap.add_argument("--rundir", required=True, help="the job and --outdir must lie in it")
    a = ap.parse_args(argv)
    return serve(a.serve, a.rundir)


def serve(fd: int, rundir: str) -> int:
    preload()
    ready = time.monotonic()
    try:
        os.write(fd, b"ready\n")
        line = read_request(fd)
    except OSError as e:
        print(f"mixrunner: --serve: {e}", file=sys.stderr)
        return SERVE_EXIT
    request = time.monotonic()
    try:
        if not line:
            raise RequestError("no request (end of file)")
        a = parse_request(line, rundir)
    except RequestError as e:
        print(f"mixrunner: request refused: {e}", file=sys.stderr)
        try:
            os.write(fd, b"refused: " + str(e).encode(errors="replace") + b"\n")
        except OSError:
            pass
        return SERVE_EXIT
    try:
        os.write(fd, b"ok\n")
        os.close(fd)
    except OSError as e:  # the init is gone: it runs the job itself, or not at all
        print(f"mixrunner: --serve: cannot answer: {e}", file=sys.stderr)
        return SERVE_EXIT
    return run(a, prestart={"ready": ready, "request": request})


def read_request(fd: int) -> bytes:
    """One line from FD (without the newline); b"" at end of file."""
    buf = b""
    while not buf.endswith(b"\n") and len(buf) <= REQUEST_MAX:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
    return buf.rstrip(b"\n")


def parse_request(line: bytes, rundir: str) -> argparse.Namespace:
    """The runner's arguments from one request line, or RequestError (why)."""
    if len(line) > REQUEST_MAX:
        raise RequestError(f"longer than {REQUEST_MAX} bytes")
    try:
        req = json.loads(line.decode())
    except ValueError as e:  # UnicodeDecodeError is a ValueError too
        raise RequestError(f"not JSON: {e}") from None
    if not isinstance(req, dict):
        raise RequestError(f"not a JSON object: {type(req).__name__}")
    unknown = sorted(set(req) - set(REQUEST_KEYS))
    if unknown:
        raise RequestError(f"unknown keys {unknown} (known: {list(REQUEST_KEYS)})")
    argv: Any = req.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(x, str) for x in argv):
        raise RequestError("argv must be a non-empty list of strings")
    for x in argv:
        m = SHELL_META.search(x)
        if m:
            raise RequestError(f"argument {x!r}: shell metacharacter {m.group()!r}")
        if not x:
            raise RequestError("an empty argument")
    if any(x in ("-h", "--help") for x in argv):
        raise RequestError("--help is not a run")
    try:
        a = parser().parse_args(argv)
    except SystemExit:  # argparse printed why on stderr
        raise RequestError(f"bad arguments {argv} (the reason is on stderr)") from None
    if not a.outdir:
        raise RequestError("--outdir is required")
    for what, path in (("the job", a.job), ("--outdir", a.outdir)):
        if not inside(path, rundir):
            raise RequestError(f"{what} {path!r} is outside the run directory {rundir!r}")
    return a


def inside(path: str, top: str) -> bool:
    p, t = os.path.realpath(path), os.path.realpath(top)
    return p != t and os.path.commonpath([p, t]) == t


def exit_now(rc: int) -> None:
    """End the process without the interpreter's finalization: under gem5 the
    runner's exit runs on the timing CPU after the ROI, and tearing down every
    module and object costs about 16 M instructions (callgrind, Debian's
    python3.11, the runner's imports) that change no result. Everything the
    runner writes is closed or flushed before this."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)


if __name__ == "__main__":
    exit_now(main())
