"""Selection cost per pass at sched/nr_migrate 32 and 64 (issue 43), from the
kept consoles of `kernel-patches/qemu_check.py bench --nr-migrate N --seconds 5`
(QEMU TCG: the nanoseconds compare code paths, not real hardware).

Run from the repository root: python3 findings/2026-11-28-kernel-parity/bench.py
"""

import sys
from pathlib import Path

sys.path.insert(0, "kernel-patches")
sys.path.insert(0, "configs")
import qemu_check  # noqa: E402
from numa_lb.qemu import guest_topology  # noqa: E402

HERE = Path(__file__).resolve().parent

for f in sorted((HERE / "consoles").glob("bench-*.txt")):
    run = qemu_check.parse_console(f.read_text())
    print(f"\n{f.name}")
    qemu_check.print_bench(
        run, guest_topology(), 5, int(run.sysctl.get("nr_migrate", 0)), "2026-11-28"
    )
