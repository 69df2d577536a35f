"""The crowd checks (issue 43 item 1) from the kept QEMU consoles.

Run from the repository root:
    python3 findings/2026-11-28-kernel-parity/crowd.py
For each console: the kernel, each crowd phase's report (tasks, longest gap
between a 10 ms sleeper's wake-ups on another CPU, CPUs the tasks ended on)
and the policy's /proc/sched_numa_lb_stats deltas over the phase (cross-node
passes, tasks looked at, looks per pass, tasks moved). The console before the
fix kept one stats pair for both phases ("crowd-<policy>").
"""

import sys
from pathlib import Path

sys.path.insert(0, "kernel-patches")
sys.path.insert(0, "configs")
import qemu_check  # noqa: E402

HERE = Path(__file__).resolve().parent


def main() -> int:
    for f in sorted((HERE / "consoles").glob("*crowd*.txt")):
        run = qemu_check.parse_console(f.read_text())
        print(
            f"\n{f.name}: kernel {run.kernel}, guest finished: {run.done}, "
            f"splats: {len(run.splats())}"
        )
        print(
            "| phase | tasks | longest gap ms | CPUs used | ok | passes | looked | looked/pass "
            "| moved |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for s in run.stress:
            if not s["tag"].startswith("crowd-"):
                continue
            mode, pol = s["mode"], s["tag"].split("-", 2)[2]
            under = next(
                (u for u in (f"crowd-{mode}-{pol}", f"crowd-{pol}") if u in run.stats_after), None
            )
            cells = ["–"] * 4
            if under is not None and pol in run.stats_after[under]:
                b, a = run.stats_before[under][pol], run.stats_after[under][pol]
                d = {k: a[k] - b[k] for k in ("attempts", "visited", "migrated")}
                per = d["visited"] / d["attempts"] if d["attempts"] else float("nan")
                both = " (both phases)" if under == f"crowd-{pol}" else ""
                cells = [
                    f"{d['attempts']}{both}",
                    str(d["visited"]),
                    f"{per:.1f}",
                    str(d["migrated"]),
                ]
            print(
                f"| {mode} under {pol} | {s['tasks']} | {s['max_gap_ms']} | {s['cpus_used']} | "
                f"{s['ok']} | " + " | ".join(cells) + " |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
