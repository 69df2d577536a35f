"""Benchmark: frame + report time for a synthetic tree of N runs cloned from a real one.

    ./run_all.py bench [--runs 10000] [--from RUN_DIR] [--workdir DIR] [--keep]

The tree: N run directories (spec.json, status.json, guest/results.jsonl)
cloned from one real run. Each clone gets its own point (policy x NUMA factor
x cores per socket x threads, then repeats) and run id, and its elapsed times
scaled by a deterministic pseudo-random factor in [0.8, 1.2] so that means,
deviations and pairings are not degenerate. Everything else is the real run's
content.

Printed: the time to build the frames (parse + metrics + parquet) and the
report (analysis + plots + HTML/Markdown), each also as a ratio to a baseline
measured in the same process on the same tree: reading every input file's
bytes (no parsing). The issue's target: frame + report under 60 s for 10,000
runs on the development machine.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ..sweep.atomic import write_text_atomic
from ..sweep.point import ID_LEN_DIR
from .frames import build_frames, find_runs
from .report import build, to_html, to_markdown

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SRC = ROOT / "tests" / "fixtures" / "sweep-quick"
POLICIES = ["default", "tm", "mb", "bce", "mbplus", "excl_base", "excl", "autonuma"]
FACTORS = [1.2, 1.6, 2.0, 2.5, 3.0]
CORES = [1, 2, 4, 8]
THREADS = [1, 2, 4, 8, 16, 32]
TARGET_S = 60.0


def _source_run(src: Path) -> Path:
    if (src / "spec.json").is_file():
        return src
    runs = find_runs([src])
    done = [r for r in runs if json.loads((r / "status.json").read_text()).get("state") == "done"]
    if not done:
        raise SystemExit(f"bench: no finished run under {src}")
    return done[0]


def _scale(rec: dict[str, Any], f: float) -> dict[str, Any]:
    if "elapsed_s" in rec and isinstance(rec["elapsed_s"], int | float):
        rec = dict(rec, elapsed_s=rec["elapsed_s"] * f)
    return rec


def make_tree(src: Path, n: int, out: Path, seed: int = 1) -> int:
    """Write n synthetic run directories under out/runs; returns n."""
    src = _source_run(src)
    spec = json.loads((src / "spec.json").read_text())
    status = (src / "status.json").read_text()
    lines = [
        json.loads(x)
        for x in (src / "guest" / "results.jsonl").read_text().splitlines()
        if x.strip()
    ]
    rng = random.Random(seed)
    combos = itertools.product(range(10**6), FACTORS, CORES, THREADS, POLICIES)
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for i, (rep, f, c, t, pol) in zip(range(n), combos, strict=False):
        rid = f"{i:016x}" + "b" * 48
        d = runs / rid[:ID_LEN_DIR]
        (d / "guest").mkdir(parents=True, exist_ok=True)
        point = dict(
            spec["point"], policy=pol, numa_factor=f, cores_per_socket=c, threads=t, repeat=rep
        )
        (d / "spec.json").write_text(json.dumps(dict(spec, run_id=rid, point=point, sweep="bench")))
        (d / "status.json").write_text(status)
        k = rng.uniform(0.8, 1.2)
        (d / "guest" / "results.jsonl").write_text(
            "".join(json.dumps(_scale(rec, k)) + "\n" for rec in lines)
        )
    return n


def read_all(tree: Path) -> int:
    """The baseline: read every input file's bytes; returns the byte count."""
    total = 0
    for r in find_runs([tree]):
        for name in ("spec.json", "status.json", "guest/results.jsonl"):
            total += len((r / name).read_bytes())
    return total


def run_bench(n: int, src: Path, work: Path) -> dict[str, float]:
    t0 = time.perf_counter()
    make_tree(src, n, work)
    gen = time.perf_counter() - t0

    t0 = time.perf_counter()
    nbytes = read_all(work)
    base = time.perf_counter() - t0

    t0 = time.perf_counter()
    fr = build_frames([work])
    fr.write(work / "frames")
    t_frame = time.perf_counter() - t0

    t0 = time.perf_counter()
    secs = build(fr, f"bench: {n} synthetic runs", [work])
    write_text_atomic(work / "report.html", to_html(secs))  # as report.py writes them
    write_text_atomic(work / "report.md", to_markdown(secs, "report_files"))
    t_report = time.perf_counter() - t0
    return {
        "runs": float(len(fr.runs)),
        "rows": float(len(fr.metrics)),
        "bytes": float(nbytes),
        "generate_s": gen,
        "baseline_s": base,
        "frame_s": t_frame,
        "report_s": t_report,
    }


def main(n: int, src: Path | None, workdir: Path | None, keep: bool) -> int:
    src = Path(src) if src else DEFAULT_SRC
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="numa-lb-bench-"))
    if (work / "runs").exists():
        shutil.rmtree(work / "runs")
    try:
        r = run_bench(n, src, work)
    finally:
        if not keep and workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    total = r["frame_s"] + r["report_s"]
    print(
        f"bench: {int(r['runs'])} runs cloned from {_source_run(src)} "
        f"({r['bytes'] / 1e6:.0f} MB of inputs, {int(r['rows'])} frame rows); "
        f"tree generated in {r['generate_s']:.1f} s"
    )
    print(f"baseline (read every input file):  {r['baseline_s']:7.2f} s")
    print(
        f"frame (parse, metrics, parquet):   {r['frame_s']:7.2f} s  = "
        f"{r['frame_s'] / r['baseline_s']:.1f} x baseline"
    )
    print(
        f"report (analysis, plots, HTML/MD): {r['report_s']:7.2f} s  = "
        f"{r['report_s'] / r['baseline_s']:.1f} x baseline"
    )
    print(
        f"frame + report:                    {total:7.2f} s  = "
        f"{total / r['baseline_s']:.1f} x baseline; target < {TARGET_S:.0f} s: "
        f"{'met' if total < TARGET_S else 'MISSED'}"
    )
    if keep or workdir:
        print(f"tree kept at {work}")
    return 0 if total < TARGET_S else 1
