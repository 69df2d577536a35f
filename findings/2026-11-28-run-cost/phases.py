"""Where a gem5 run's CPU seconds go, per phase, from kept frames (issue 38 item 3).

Run from the repository root:
    python3 findings/2026-11-28-run-cost/phases.py LABEL=FRAMES_DIR [...]

Per done gem5 run: its gem5 process CPU seconds, each phase's CPU seconds
(m5out/phases.json, carried into the runs frame by
analysis/results/run_phases.py), the ROI's CPU seconds per simulated ms and
the phases outside the ROI summed, the ROI's simulated length and its CPU
seconds per simulated millisecond. Runs made before phases.json existed show
their total only. The last table gives, per label, the medians; ratios are
printed against the first label.
"""

import sys
from pathlib import Path

import pandas as pd

PHASES = ["restore", "startup", "warmup", "roi", "handback", "exit"]
COLS = ["gem5_cpu_s", *[f"phase_{p}_cpu_s" for p in PHASES], "nonroi_cpu_s"]
DERIVED = ["roi_sim_ms", "roi_cpu_s_per_sim_ms"]


def runs(label: str, frames: Path) -> pd.DataFrame:
    r = pd.read_parquet(frames / "runs.parquet")
    r = r[r.state.astype(str) == "done"]
    out = r[["mix", "policy", "repeat"]].astype(str)
    for c in COLS:
        out[c] = r[c] if c in r.columns else float("nan")
    # the ROI's simulated length from its host seconds and host seconds per ms
    if {"phase_roi_host_s", "roi_host_s_per_sim_ms"} <= set(r.columns):
        out["roi_sim_ms"] = r["phase_roi_host_s"] / r["roi_host_s_per_sim_ms"]
    else:
        out["roi_sim_ms"] = float("nan")
    out["roi_cpu_s_per_sim_ms"] = out["phase_roi_cpu_s"] / out["roi_sim_ms"]
    out.insert(0, "label", label)
    return out


def main(argv: list[str]) -> int:
    if not argv or any("=" not in a for a in argv):
        print(__doc__, file=sys.stderr)
        return 2
    t = pd.concat([runs(*a.split("=", 1)[:1], Path(a.split("=", 1)[1])) for a in argv])
    short = {c: c.replace("phase_", "").replace("_cpu_s", "") for c in COLS}
    print("per run (CPU s; the ROI's simulated ms and its CPU s per simulated ms):")
    print(t.rename(columns=short).to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    med = t.groupby("label", sort=False)[COLS + DERIVED].median().rename(columns=short)
    print("\nmedians per label:")
    print(med.to_string(float_format=lambda v: f"{v:.1f}"))
    print(f"\nratios against {med.index[0]}:")
    print((med / med.iloc[0]).to_string(float_format=lambda v: f"{v:.2f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
