"""The committed QEMU result set (tests/fixtures/qemu-run) is a real, complete run.

It was captured by the image tier (NUMA_LB_UPDATE_FIXTURES=1 python3 -m pytest
tests/image) and is what the analysis parsers are tested on; here it must pass
the same checks as a live run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "qemu-run"
sys.path.insert(0, str(ROOT / "tests" / "image"))

from checks import check_result_set  # noqa: E402


def test_fixture_is_a_complete_ok_run() -> None:
    job = json.loads((FIXTURE / "job.json").read_text())
    host = json.loads((FIXTURE / "host.json").read_text())
    nodes = host["topology"]["nodes"]
    assert nodes == 4
    check_result_set(FIXTURE, job, nodes)
    assert host["result"]["status"] == "ok" and host["backend"] == "qemu"
    assert "functional only" in host["fidelity"]
    assert sorted(host["result"]["files"]) == sorted(
        p.name for p in FIXTURE.iterdir() if p.name not in ("console.log", "host.json")
    )


def test_fixture_stays_small() -> None:
    assert sum(p.stat().st_size for p in FIXTURE.iterdir()) < 200_000
