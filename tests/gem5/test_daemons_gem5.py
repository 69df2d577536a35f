"""gem5 tier: the policy daemons on the counter bridge, 4 sockets x 2 cores.

One boot checkpoint (4 x 2), then one restored run per daemon policy (imar,
imar2, devil, plb) of a two-program mix, with the daemons' periods scaled to
the simulated ROI (milliseconds, not the papers' seconds). Checked in each
run: the guest's status, the daemon's log (decisions taken from samples whose
source is the gem5 bridge, every decision naming the sample it used), the
bridge's record (as many replies as the daemon took samples, their host
cost, samples inside the ROI) and that sampling left the ROI protocol alone
(one workbegin, one workend). devil's run is also a known answer: a
ptrchase thread bound to node 1's memory makes its group a devil whose
references the bridged counters put on node 1.

Needs $GEM5, the release kernel and the disk image (built on demand).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gem5.gem5_runs import (
    MACHINE,
    artifacts_or_skip,
    boot_checkpoint,
    jsonl,
    restore_job,
    session_base,
)

# four restored 4 x 2 runs after a boot: the gem5-long tier (tests/run), not CI's gem5 tier
pytestmark = [pytest.mark.gem5, pytest.mark.gem5_long]

MIX = [
    {"name": "lft", "workload": "leader_ft", "threads": 3, "args": ["--size=4M", "--iters=3"]},
    {"name": "mc", "workload": "master_clients", "threads": 3,
     "args": ["--size=2M", "--iters=3"]},
]  # fmt: skip
DEVIL_MIX = [
    {"name": "pc", "workload": "ptrchase", "threads": 1,
     "args": ["--mem-node=1", "--size=4M", "--iters=30000"]},
    *MIX,
]  # fmt: skip
# The papers' periods are seconds; the ROI here lasts tens of milliseconds.
PARAMS = {
    "imar": {"interval_s": 0.005},
    "imar2": {"interval_s": 0.0025, "interval_min_s": 0.0025, "interval_max_s": 0.01},
    "devil": {"interval_s": 0.005},
    "plb": {"interval_s": 0.0025},
}


@pytest.fixture(scope="module")
def artifacts() -> dict[str, Path]:
    return artifacts_or_skip()


@pytest.fixture(scope="module")
def boot(artifacts: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return boot_checkpoint(session_base(tmp_path_factory), artifacts, MACHINE)


def restore(boot: Path, artifacts: dict[str, Path], policy: str) -> Path:
    job = {"run_id": f"daemon-{policy}", "policy": policy, "seed": 1, "timeout_s": 3000,
           "programs": DEVIL_MIX if policy == "devil" else MIX,
           "daemon_params": PARAMS[policy]}  # fmt: skip
    return restore_job(boot, artifacts, policy, job, MACHINE)


@pytest.mark.parametrize("policy", ["imar", "imar2", "devil", "plb"])
def test_daemon_decides_from_bridged_counters(
    boot: Path, artifacts: dict[str, Path], policy: str
) -> None:
    out = restore(boot, artifacts, policy)
    status = json.loads((out / "guest" / "status.json").read_text())
    assert status["status"] == "ok", status
    assert status["daemon"]["ready"] == f"numa-lb-daemon: ready {policy} gem5"
    assert status["daemon"]["exit"] == 0
    log = jsonl(out / "guest" / f"daemon-{policy}.jsonl")
    kinds = [r["type"] for r in log]
    assert kinds[0] == "start" and kinds[-1] == "summary" and "error" not in kinds
    summary = log[-1]
    assert summary["source"] == "gem5" and summary["samples"] >= 3
    intervals = [r for r in log if r["type"] == "interval"]
    assert intervals and all(r["source"] == "gem5" for r in intervals)
    seqs = [r["seq"] for r in intervals]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # every reply fresh
    assert all(r["host_ms"] is not None and r["sample_cost_us"] > 0 for r in intervals)
    decisions = [r for r in log if r["type"] == "decision"]
    assert decisions and all(d["source"] == "gem5" and d["seq"] in seqs for d in decisions)

    bridge = json.loads((out / "counter_bridge.json").read_text())
    assert bridge["errors"] == 0 and bridge["samples"] == summary["samples"]
    assert bridge["samples_in_roi"] > 0 and bridge["host_ms_mean"] > 0
    roi = json.loads((out / "roi.json").read_text())
    assert [e["event"] for e in roi["events"]] == ["workbegin", "workend", "exit"]

    if policy == "imar2":
        assert summary["actions"].get("interchange", 0) >= 1
    if policy == "devil":
        pc = [d for d in decisions if d.get("mpki") is not None and d["devil"]]
        assert pc, "the ptrchase group is a devil"
        assert any(d["shares"].get("1", 0) >= 0.8 and d["pattern_source"].startswith("counters")
                   for d in pc), pc  # fmt: skip
