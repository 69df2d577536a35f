"""Benchmark of the simulated machine itself (gem5): boot cost and ROI speed.

    ./run_all.py bench-machine [--cores 1,2,4] [--no-probe-filter-too] [--out DIR]

For every cores-per-socket value C it boots (AtomicSimpleCPU, to the init's
boot checkpoint) and runs one fixed ROI (TimingSimpleCPU, a compute_small +
leader_ft mix with 2 threads per socket, restored from that checkpoint) on

* the study's machine: 4 sockets x C cores, inter-socket links (f = 1.6), and
* the baseline: 1 socket x 4C cores, the same cores and caches, no links,

and prints host seconds to boot and simulated instructions per host second in
the ROI (gem5's ``hostInstRate`` of the ROI dump), each machine's figure also
as a ratio to its baseline measured in the same invocation. With
``--no-probe-filter-too`` the 4-socket machine is also measured with the probe
filter off, as a ratio to the probe filter on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.cache import default_gem5

from ..sweep.atomic import write_text_atomic
from ..sweep.backends import children_cpu_s
from .gem5stats import core_counters, parse_stats_file, roi_dump, roi_dump_index

ROOT = Path(__file__).resolve().parents[2]
RUN_SCRIPT = ROOT / "configs" / "numa_run.py"


@dataclass
class Machine:
    label: str
    sockets: int
    cores_per_socket: int
    probe_filter: bool = True

    def args(self) -> list[str]:
        a = ["--sockets", str(self.sockets), "--cores-per-socket", str(self.cores_per_socket)]
        a += ["--mem-per-node", f"{2048 // self.sockets}MiB", "--numa-factor", "1.6"]
        return a + ([] if self.probe_filter else ["--no-probe-filter"])


def mix(ncpus: int) -> dict[str, Any]:
    threads = max(1, ncpus // 2)
    return {
        "run_id": "bench",
        "policy": "default",
        "programs": [
            {"name": "cs", "workload": "compute_small", "threads": threads, "args": ["--iters=1"]},
            {"name": "lft", "workload": "leader_ft", "threads": threads,
             "args": ["--size=1M", "--iters=1"]},
        ],
    }  # fmt: skip


def gem5_process(gem5: str, outdir: Path, args: list[str], log: Path) -> tuple[int, float, float]:
    """Run ``gem5 --outdir=OUTDIR configs/numa_run.py ARGS`` (no shell), output to
    ``log``: (exit code, wall seconds, CPU seconds of the gem5 process)."""
    t0, cpu0 = time.monotonic(), children_cpu_s()
    with open(log, "w") as f:
        rc = subprocess.run(
            [gem5, f"--outdir={outdir}", str(RUN_SCRIPT), *args],
            stdout=f, stderr=subprocess.STDOUT, check=False,
        ).returncode  # fmt: skip
    return rc, time.monotonic() - t0, children_cpu_s() - cpu0


def measure(gem5: str, m: Machine, kernel: Path, image: Path, work: Path) -> dict[str, Any]:
    base = work / m.label
    base.mkdir(parents=True, exist_ok=True)
    common = [*m.args(), "--kernel", str(kernel), "--disk-image", str(image)]
    rc, boot_s, _ = gem5_process(
        gem5, base / "boot", [*common, "--take-checkpoint", str(base / "cpt")], base / "boot.log"
    )
    if rc != 0:
        raise RuntimeError(f"{m.label}: boot failed (exit {rc}), see {base / 'boot.log'}")
    job = base / "job.json"
    job.write_text(json.dumps(mix(m.sockets * m.cores_per_socket)))
    args = [*common, "--job", str(job), "--restore-checkpoint", str(base / "cpt")]
    rc, run_s, _ = gem5_process(gem5, base / "run", args, base / "run.log")
    if rc != 0:
        raise RuntimeError(f"{m.label}: ROI run failed (exit {rc}), see {base / 'run.log'}")
    m5out = base / "run"
    roi = roi_dump(parse_stats_file(m5out / "stats.txt"), roi_dump_index(m5out)).values
    insts = sum(core_counters(roi)["insts"].values())
    host_s = roi.get("hostSeconds")
    return {
        "machine": m.label,
        "boot_host_s": round(boot_s, 1),
        "run_host_s": round(run_s, 1),
        "roi_sim_insts": insts,
        "roi_host_s": host_s,
        # ROI instructions / ROI host seconds (metrics.sim_speed_ips); gem5's
        # hostInstRate also counts the switched-out boot CPUs' instructions.
        "roi_ips": insts / host_s if insts and host_s else None,
    }


def main(gem5: str | None, cores: list[int], pf_off: bool, out: Path | None) -> int:
    gem5, how = default_gem5(gem5)
    if not gem5:
        print(f"bench-machine: needs gem5 (--gem5, $GEM5 or build-gem5): {how}", file=sys.stderr)
        return 3
    sys.path.insert(0, str(ROOT / "kernel-patches"))
    sys.path.insert(0, str(ROOT / "disk-image"))
    import build_image  # noqa: PLC0415
    import kbuild  # noqa: PLC0415

    kernel = kbuild.build("release", None) / "vmlinux"
    image = build_image.build()
    work = out or Path(tempfile.mkdtemp(prefix="bench-machine-"))
    rows = []
    for c in cores:
        pairs = [(Machine(f"4x{c}", 4, c), Machine(f"1x{4 * c}", 1, 4 * c))]
        if pf_off:
            pairs.append((Machine(f"4x{c}-nopf", 4, c, probe_filter=False), pairs[0][0]))
        done: dict[str, dict[str, Any]] = {}
        for m, baseline in pairs:
            for x in (baseline, m):
                if x.label not in done:
                    done[x.label] = measure(gem5, x, kernel, image, work)
            r, b = done[m.label], done[baseline.label]
            row = dict(r, baseline=baseline.label)
            row["baseline_boot_host_s"] = b["boot_host_s"]
            row["baseline_roi_ips"] = b["roi_ips"]
            row["boot_ratio"] = round(r["boot_host_s"] / b["boot_host_s"], 3)
            if r["roi_ips"] and b["roi_ips"]:
                row["ips_ratio"] = round(r["roi_ips"] / b["roi_ips"], 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_text_atomic(work / "bench-machine.json", json.dumps(rows, indent=1) + "\n")
    print(f"bench-machine: {len(rows)} comparisons, details in {work}")
    return 0
