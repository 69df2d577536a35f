"""kMLB's page-fault cost from gem5 runs of the `faultbench` preset (issue 10 item 3).

    python3 -m analysis.results.faultbench DIR [DIR ...]

Reads every done run's ``guest/prog-*-fb.out`` (the ``FAULTBENCH threads=..
pages=.. ns=..`` line of kernel-patches/guest/fault_bench.c), and prints
pages per simulated second per kernel (stock, release, nokmlb: the point's
boot kernel and variant) and thread count, with each as a ratio to stock at
the same thread count. Under gem5 the guest clock is simulated time, so the
figures are architectural and deterministic (no repeat noise).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ..sweep.point import SweepPoint
from ..sweep.rundir import RunDir, State

LINE = re.compile(r"FAULTBENCH threads=(\d+) rep=(\d+) pages=(\d+) ns=([0-9.]+)")


def kernel_of(point: SweepPoint) -> str:
    """stock, or the patched kernel's variant (release, nokmlb, ...)."""
    return "stock" if point.boot_kernel == "stock" else point.kernel_variant


def collect(dirs: list[Path]) -> tuple[list[dict], list[str]]:
    rows, skipped = [], []
    for d in dirs:
        for spec in sorted((d / "runs").glob("*/spec.json")):
            run = RunDir(spec.parent)
            if run.state() is not State.DONE:
                skipped.append(f"{run.path.name}: state {run.state()}")
                continue
            point = SweepPoint.from_dict(json.loads(spec.read_text())["point"])
            outs = sorted(run.guest.glob("prog-*.out"))
            found = [m for f in outs for m in LINE.finditer(f.read_text(errors="replace"))]
            if len(found) != 1:
                skipped.append(f"{run.path.name}: {len(found)} FAULTBENCH lines")
                continue
            threads, _rep, pages, ns = found[0].groups()
            rows.append(
                {
                    "kernel": kernel_of(point),
                    "backend": point.backend,
                    "threads": int(threads),
                    "pages": int(pages),
                    "ns": float(ns),
                    "pages_per_s": int(pages) / (float(ns) / 1e9),
                    "run": run.path.name,
                }
            )
    return rows, skipped


def ratios(rows: list[dict]) -> list[dict]:
    """Each row with ``ratio_to_stock`` (stock's pages/s over this kernel's: > 1 = slower)."""
    stock = {r["threads"]: r["pages_per_s"] for r in rows if r["kernel"] == "stock"}
    out = []
    for r in sorted(rows, key=lambda r: (r["threads"], r["kernel"])):
        base = stock.get(r["threads"])
        out.append(dict(r, time_ratio_to_stock=None if base is None else base / r["pages_per_s"]))
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    rows, skipped = collect([Path(a) for a in argv])
    for s in skipped:
        print(f"skipped {s}")
    if not rows:
        print("faultbench: no fault_bench result", file=sys.stderr)
        return 1
    backends = {r["backend"] for r in rows}
    print(f"fault_bench (backend {', '.join(sorted(backends))}); time per fault vs stock")
    for r in ratios(rows):
        t = r["time_ratio_to_stock"]
        print(
            f"threads {r['threads']}: {r['kernel']:8s} {r['pages']:8d} pages in "
            f"{r['ns'] / 1e6:8.3f} ms = {r['pages_per_s'] / 1e6:7.3f} M pages/s"
            + ("" if t is None else f", time ratio to stock {t:.4f}")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
