#!/usr/bin/env python3
"""Sizing of the verdict mixes (analysis/sweep/presets/verdict.toml): callgrind
user instructions per thread of each program on this host (the same static
binaries the image carries), turned into simulated time with a rate calibrated
on the kept frame of findings/2026-11-26-finding-b192, and a processor-sharing
model of 8 CPUs for the regime (README.md next to this file says how and what
it leaves out).

    make -C workloads && python3 findings/2026-11-28-verdict-sizing/sizing.py [MIX ...]

Deterministic up to callgrind (single-threaded replay); ~1 min on the 2-core VM.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "workloads" / "build"
PRESET = REPO / "analysis" / "sweep" / "presets" / "verdict.toml"

CPUS = 8
CLOCK_HZ = 2.8e9  # configs/numa_lb/options.py --cpu-clock
# User instructions (callgrind) per gem5 busy cycle, from lb3-block192 at f = 1.6
# under default (the kept frame of findings/2026-11-26-finding-b192): its
# programs' callgrind user instructions (2 x leader_ft 6M/6 threads: 30.22 M main
# + 6 x 2.09 M workers; perthread_ft 3M/6 threads: 50.53 M main + 6 x 12.50 M
# workers; 210.9 M in all, measured below with the same binaries) over its mean
# ROI busy cycles (1.666e9, 8 CPUs). gem5's own instruction count (3.54e8) is
# higher: kernel, runner, and that mix's 6900 sleeps and wake-ups.
B192_USER = 2 * (30.22e6 + 6 * 2.09e6) + 50.53e6 + 6 * 12.50e6
B192_BUSY_CYCLES = 1.666e9
RATE = B192_USER / B192_BUSY_CYCLES * CLOCK_HZ  # user instructions per busy CPU-second


def callgrind_threads(binary: str, threads: int, args: list[str]) -> list[int]:
    """Instructions per thread, main thread first."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                f"--callgrind-out-file={out}",
                str(BUILD / binary),
                "--threads",
                str(threads),
                *args,
            ],
            check=True,
            capture_output=True,
            timeout=1200,
        )
        counts = []
        for f in sorted(glob.glob(out + "-*"), key=lambda p: int(p.rsplit("-", 1)[1])):
            for ln in Path(f).read_text().splitlines():
                if ln.startswith(("summary:", "totals:")):
                    counts.append(int(ln.split()[1]))
                    break
        return counts


def phases(workload: str, main: int, workers: list[int], iters: int) -> list[tuple[int, float]]:
    """(runnable threads, instructions per thread) in order, from the code:
    leader_ft: the leader first-touches (its init), workers run, the leader
    verifies (a second pass over the array: taken as half its count each);
    perthread_ft: workers first-touch and run, the leader verifies every block
    serially; master_clients: the master initialises, updates once per round
    while the clients wait at the barrier, and verifies: each taken as one
    pass over its array (main / (iters + 2)) and alternated with the clients'
    rounds; compute_small: the leader's part is its verification (every 16th
    option recomputed serially for every iteration), after the workers."""
    t, w = len(workers), sum(workers) / len(workers)
    if workload in ("perthread_ft", "compute_small"):
        return [(t, w), (1, main)]
    if workload == "master_clients":
        m = main / (iters + 2)
        return [(1, m)] + [(t, w / iters), (1, m)] * iters
    return [(1, main / 2), (t, w), (1, main / 2)]  # leader_ft


def simulate(progs: dict[str, list[tuple[int, float]]], dt: float = 1e-5) -> dict:
    """Processor sharing: every runnable thread gets min(1, CPUS / runnable) of
    a CPU at RATE; a program moves to its next phase when the phase's work per
    thread is done. Returns each program's end and the regime figures."""
    state = {n: [0, 0.0] for n in progs}  # phase index, work done in it per thread
    end: dict[str, float] = {}
    t = busy = runnable = 0.0
    first = None
    busy_all = run_all = 0.0
    while len(end) < len(progs):
        active = {n: progs[n][s[0]] for n, s in state.items() if n not in end}
        r = sum(ph[0] for ph in active.values())
        share = min(1.0, CPUS / r)
        busy += min(r, CPUS) * dt
        runnable += r * dt
        if first is None:
            busy_all += min(r, CPUS) * dt
            run_all += r * dt
        for n, (_, work) in active.items():
            s = state[n]
            s[1] += share * RATE * dt
            if s[1] >= work:
                s[0], s[1] = s[0] + 1, 0.0
                if s[0] == len(progs[n]):
                    end[n] = t + dt
                    if first is None:
                        first = t + dt
        t += dt
    roi = max(end.values())
    return {
        "end": end,
        "roi_s": roi,
        "all_running_s": first,
        "busy": busy / (roi * CPUS),
        "runnable": runnable / (roi * CPUS),
        "busy_all": busy_all / (first * CPUS),
        "runnable_all": run_all / (first * CPUS),
    }


def main() -> None:
    spec = tomllib.loads(PRESET.read_text())
    default_threads = spec["axes"]["threads"][0]
    mixes = sys.argv[1:] or list(spec["mixes"])
    print(
        f"rate: {RATE / 1e6:.0f} M user instructions per busy CPU-second "
        f"({B192_USER / B192_BUSY_CYCLES:.3f} per busy cycle at {CLOCK_HZ / 1e9} GHz)"
    )
    for mix in mixes:
        progs, total = {}, 0
        print(f"\n{mix}")
        for p in spec["mixes"][mix]["programs"]:
            th = p.get("threads", default_threads)
            args = [a for a in p["args"] if a != "--start-away"]  # moves threads, not work
            c = callgrind_threads(p["workload"], th, args)
            iters = int(next((a.split("=")[1] for a in args if a.startswith("--iters=")), "1"))
            progs[p["name"]] = phases(p["workload"], c[0], c[1:], iters)
            total += sum(c)
            print(
                f"  {p['name']:10s} {p['workload']:14s} {th} thr {' '.join(args):24s} "
                f"main {c[0] / 1e6:6.2f} M  workers {sum(c[1:]) / 1e6:6.2f} M"
            )
        r = simulate(progs)
        ends = r["end"]
        print(
            f"  user instructions {total / 1e6:.0f} M; modelled ROI {r['roi_s'] * 1e3:.0f} ms, "
            f"all running {r['all_running_s'] * 1e3:.0f} ms"
        )
        print(
            f"  busy {r['busy']:.2f} runnable/CPU {r['runnable']:.2f} (ROI); "
            f"busy {r['busy_all']:.2f} runnable/CPU {r['runnable_all']:.2f} (all running)"
        )
        print(
            "  ends (ms): "
            + ", ".join(f"{n} {v * 1e3:.0f}" for n, v in sorted(ends.items(), key=lambda x: x[1]))
        )
        print(f"  spread longest/shortest {max(ends.values()) / min(ends.values()):.2f}")


if __name__ == "__main__":
    main()
