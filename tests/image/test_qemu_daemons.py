"""Image tier: a user-level policy in the real guest under QEMU refuses.

The job names imar; the guest init starts the daemon from the image, the
daemon finds no counters on the qemu backend and exits with one line naming
the reason, and the init fails the job as invalid before any program runs
(the status, the daemon's log and the absence of results come back).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import qemu_boot
from checks import TOPO

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "daemons"))
import counters  # noqa: E402

pytestmark = pytest.mark.qemu
JOB = {
    "run_id": "image-tier-imar",
    "policy": "imar",
    "daemon_params": {"interval_s": 0.01},
    "timeout_s": 300,
    "programs": [{"name": "lft", "workload": "leader_ft", "threads": 2,
                  "args": ["--size=4M", "--iters=2"]}],
}  # fmt: skip


def test_imar_refuses_in_the_qemu_guest(kernel: Path, image: Path, tmp_path: Path) -> None:
    res = qemu_boot.run(kernel, image, JOB, tmp_path / "out", TOPO, timeout=600)
    st = res.guest_status
    assert st is not None, res.log_tail
    assert st["backend"] == "qemu" and st["status"] == "invalid-job"
    assert st["error"] == (
        f"daemon imar (exit 3): numa-lb-daemon: policy imar cannot run here: "
        f"{counters.QEMU_REFUSAL}"
    )
    assert st["mixrunner_exit"] is None and "results.jsonl" not in res.files
    log = [json.loads(x) for x in (res.out_dir / "daemon-imar.jsonl").read_text().splitlines()]
    assert log[0]["type"] == "error" and log[0]["fatal"]
