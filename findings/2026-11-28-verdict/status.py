"""The sweep's interim status, without its effect (PREREGISTRATION.md section 6).

    python3 findings/2026-11-28-verdict/status.py FRAMES_DIR

Per run: policy, repeat, state, the pre-registered gates (regime, mechanism,
platform) and the gem5 CPU seconds; then the counts. No elapsed time, no
endpoint, no contrast: what an interim look may show.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent / "2026-11-28-verdict-pilot"))

from pilot import LEADER_POLICIES, REGIME, run_gates  # noqa: E402

from analysis.results.frames import read_plain  # noqa: E402

COLS = ["policy", "repeat", "state", *REGIME, "regime_ok", "xnode_balance",
        "lb_taken_leader_dst", "lb_skipped_leader_src", "mechanism_ok", "stalled_cpus",
        "platform_ok", "gem5_cpu_s"]  # fmt: skip


def status(frames: Path) -> pd.DataFrame:
    metrics, runs = read_plain(frames)
    g = run_gates(metrics, runs).join(runs.set_index("run_id")[["gem5_cpu_s"]])
    # the pilot defines a mechanism gate for default and the leader policies only
    g["mechanism_ok"] = g["mechanism_ok"].astype(object)
    g.loc[~g["policy"].isin(["default", *LEADER_POLICIES]), "mechanism_ok"] = None
    return g.reindex(columns=COLS).sort_values(["repeat", "policy"])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: status.py FRAMES_DIR", file=sys.stderr)
        return 2
    g = status(Path(argv[0]))
    print(g.to_string())
    done = g[g["state"] == "done"]
    regime_off = int((~done["regime_ok"]).sum())
    mech_off = int((done["mechanism_ok"] == False).sum())  # noqa: E712 (None: no gate)
    print(f"\nruns: {len(g)}, done {len(done)}; regime gate failed {regime_off}, "
          f"mechanism gate failed {mech_off}, stalled CPU in "
          f"{int((done['stalled_cpus'].fillna(0) > 0).sum())}; gem5 CPU-hours so far "
          f"{done['gem5_cpu_s'].sum() / 3600:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
