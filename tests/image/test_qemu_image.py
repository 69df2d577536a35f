"""Image tier: build the disk image (cached), boot it with our kernel as a 4-node
QEMU guest, run a two-program mix end to end, check what comes back.

    python3 -m pytest -q -rs tests/image

Two boots here (the mix, then a tools run), about 12 s each under TCG on
this 2-core host; test_qemu_status.py adds three short ones.  With
NUMA_LB_UPDATE_FIXTURES=1 the result set is also copied to
tests/fixtures/qemu-run/ (the analysis parsers' fixture).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import qemu_boot
from checks import TOPO, check_result_set, load_records

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.qemu
FIXTURE = ROOT / "tests" / "fixtures" / "qemu-run"
JOB = {
    "run_id": "image-tier-excl",
    "policy": "excl",
    "numa_balancing": 0,
    "pinning": "free",
    "timeout_s": 300,
    "programs": [
        {"name": "lft", "workload": "leader_ft", "threads": 4,
         "args": ["--size=32M", "--iters=24"]},
        {"name": "pft", "workload": "perthread_ft", "threads": 4,
         "args": ["--size=8M", "--iters=24"]},
    ],
}  # fmt: skip


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def guest(
    kernel: Path, image: Path, tmp_path_factory: pytest.TempPathFactory
) -> qemu_boot.RunResult:
    before = sha256(image)
    out = tmp_path_factory.mktemp("qemu-run")
    res = qemu_boot.run(kernel, image, JOB, out, TOPO, timeout=1200)
    assert sha256(image) == before, "the cached image was written"
    if os.environ.get("NUMA_LB_UPDATE_FIXTURES") == "1" and res.status == "ok":
        shutil.rmtree(FIXTURE, ignore_errors=True)
        shutil.copytree(out, FIXTURE, ignore=shutil.ignore_patterns(".qemu-work-*"))
    return res


def test_run_is_ok(guest: qemu_boot.RunResult) -> None:
    assert guest.status == "ok", f"{guest.error}\n{guest.log_tail}"
    assert guest.exit_code == 0 and guest.qemu_returncode == 0
    assert not guest.splats, guest.splats


def test_result_files_parse_with_sane_values(guest: qemu_boot.RunResult) -> None:
    recs = check_result_set(guest.out_dir, JOB, TOPO.sockets)
    run = recs[0]
    # the guest saw the machine QEMU was told to build
    want = {str(n): list(range(n * 2, n * 2 + 2)) for n in range(TOPO.sockets)}
    assert run["nodes"] == want


def test_guest_ran_the_image_it_was_given(guest: qemu_boot.RunResult, image: Path) -> None:
    meta = json.loads((image.parent / "image.json").read_text())
    st = guest.guest_status
    assert st is not None and st["image"]["image_key"] == meta["image_key"]
    assert "init=/opt/numa-lb/sbin/numa-lb-init" in st["cmdline"]


def test_work_files_are_cleaned_and_host_record_written(guest: qemu_boot.RunResult) -> None:
    assert not list(guest.out_dir.glob(".qemu-work-*"))
    host = json.loads((guest.out_dir / "host.json").read_text())
    assert host["result"]["status"] == "ok" and "-enable-kvm" not in host["command"]
    assert host["slit"][0] == [10, 16, 16, 16]


# ------------------------------------------------------------------ tools in the image

TOOLS_JOB = {
    "run_id": "image-tier-tools",
    "policy": "mb",
    "numa_balancing": 1,
    "pinning": "direct",
    "timeout_s": 300,
    "programs": [
        {"name": "lft", "workload": "leader_ft", "threads": 2, "args": ["--size=8M"], "node": 1},
        {"name": "perf", "node": 3, "cmd": [
            "perf", "stat", "-x", ",", "-e", "cpu-migrations,page-faults,task-clock",
            "/opt/numa-lb/bin/compute_small", "--threads", "2"]},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def tools(
    kernel: Path, image: Path, tmp_path_factory: pytest.TempPathFactory
) -> qemu_boot.RunResult:
    out = tmp_path_factory.mktemp("qemu-tools")
    return qemu_boot.run(kernel, image, TOOLS_JOB, out, TOPO, timeout=1200)


def test_numactl_pinning_and_numa_balancing_in_the_guest(tools: qemu_boot.RunResult) -> None:
    assert tools.status == "ok", f"{tools.error}\n{tools.log_tail}"
    recs = load_records(tools.out_dir)
    assert recs[0]["numa_balancing"]["in_force"] == "1"
    assert recs[0]["policy"]["in_force"] == "mb"
    lft = next(r for r in recs if r["type"] == "program" and r["name"] == "lft")
    assert lft["argv"][0].endswith("numactl") and "--cpunodebind=1" in lft["argv"]
    assert lft["placement"]["cpu_node"] == 1
    # every thread ran on node 1 and the data was first touched there
    res = lft["result"]
    assert {t["node_end"] for t in res["thread_records"]} == {1}, res["thread_records"]
    assert res["placement_init"]["shared"]["nodes"] == {
        "1": res["placement_init"]["shared"]["pages"]
    }


def test_perf_software_events_work_in_the_guest(tools: qemu_boot.RunResult) -> None:
    assert tools.status == "ok", f"{tools.error}\n{tools.log_tail}"
    err = (tools.out_dir / "prog-01-perf.err").read_text()
    counts = {}
    for line in err.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2] in ("cpu-migrations", "page-faults", "task-clock"):
            counts[f[2]] = float(f[0])
    assert set(counts) == {"cpu-migrations", "page-faults", "task-clock"}, err
    assert counts["page-faults"] > 0 and counts["task-clock"] > 0 and counts["cpu-migrations"] >= 0
