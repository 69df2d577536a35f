"""The planned points of the verdict's spec, as the tree that runs the sweep
computes them: the content of ``runs.txt`` (PREREGISTRATION.md, section 2).

    python3 findings/2026-11-28-verdict/points.py --root /work/frozen-<freeze> \\
        findings/2026-11-28-verdict/verdict.toml > findings/2026-11-28-verdict/runs.txt

One line per point: its point id (the SHA-256 of the point alone, the frames'
``point_id``: the same on every gem5 build, unlike a run id, which hashes the
binary), then its label. ``--root`` is the worktree of the freeze, whose
``analysis`` package resolves the points the sweep runs (link latency from
its calibration tables, the job, the programs); the header names its commit.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", type=Path, help="the sweep's spec file")
    ap.add_argument("--root", type=Path, required=True, help="the freeze's worktree")
    ap.add_argument("--backend", default="gem5", help="the resolved backend (default gem5)")
    a = ap.parse_args(argv)
    root = a.root.resolve()
    if not (root / "analysis" / "sweep" / "matrix.py").is_file():
        print(f"points: {root} is not a numa-lb-study tree", file=sys.stderr)
        return 2
    sys.path.insert(0, str(root))
    from analysis.sweep.matrix import iter_points
    from analysis.sweep.point import point_id
    from analysis.sweep.spec import SpecError, load_spec

    try:
        spec = load_spec(path=a.spec.resolve())
    except (OSError, SpecError) as e:
        print(f"points: {e}", file=sys.stderr)
        return 2
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip() or "unknown"  # fmt: skip
    print(f"# planned points of {a.spec.name} ({spec.name}), from the tree at {head}")
    print("# POINT_ID LABEL (python3 findings/2026-11-28-verdict/points.py)")
    for p in iter_points(spec, a.backend):
        print(point_id(p), p.label())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
