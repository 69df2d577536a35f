"""The run payload of the slurm-multinode tier: the slurm tier's host runner.

``test_sweep_local.host_runner`` runs the real guest mix runner
(workloads/mixrunner.py) on the node, in place of QEMU/gem5 (a QEMU boot per
run would make a node-loss test take an hour on a 2-core machine; the real
QEMU path has its own test, which runs when the kernel and image are built).
Before the mix the payload waits ``NUMA_LB_PAYLOAD_S`` seconds, so that a run
is still running when the test stops its node; nothing of the result is made
up: the guest files are the mix runner's own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from test_sweep_local import host_runner  # tests/unit, on PYTHONPATH


def slow_host_runner(rec: dict[str, Any], run_dir: Path, timeout_s: float) -> Any:
    print(f"payload on {os.uname().nodename}: waiting {os.environ.get('NUMA_LB_PAYLOAD_S')} s")
    time.sleep(float(os.environ.get("NUMA_LB_PAYLOAD_S", "0")))
    return host_runner(rec, run_dir, timeout_s)
