"""Image tier: build the disk image (cached), boot it with our kernel as a 4-node
QEMU guest, run a two-program mix end to end, check what comes back.

    python3 -m pytest -q -rs tests/image

One boot for the module (TCG, about a minute on a busy 2-core host).  With
NUMA_LB_UPDATE_FIXTURES=1 the result set is also copied to
tests/fixtures/qemu-run/ (the analysis parsers' fixture).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "disk-image"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import build_image  # noqa: E402
import qemu_boot  # noqa: E402
from checks import check_result_set  # noqa: E402
from qemu_check import Topology  # noqa: E402

pytestmark = pytest.mark.qemu
FIXTURE = ROOT / "tests" / "fixtures" / "qemu-run"
TOPO = Topology(nodes=4, cpus_per_node=2, mem_per_node_mib=256, remote_distance=16)
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


def _prerequisites() -> str | None:
    if not shutil.which("qemu-system-x86_64") or not shutil.which("qemu-img"):
        return "qemu-system-x86_64/qemu-img missing (run .ci/setup)"
    if not (build_image.rootfs_dir() / "rootfs.json").exists():
        if os.geteuid() != 0:
            return "the debootstrap tree is not cached and building it needs root"
        if not shutil.which("debootstrap"):
            return "debootstrap missing (apt-get install debootstrap)"
    return None


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def image() -> Path:
    why = _prerequisites()
    if why:
        pytest.skip(f"SKIPPED image: {why}")
    return build_image.build()


@pytest.fixture(scope="module")
def guest(image: Path, tmp_path_factory: pytest.TempPathFactory) -> qemu_boot.RunResult:
    import kbuild  # noqa: PLC0415 - kernel-patches/ is on sys.path (tests/conftest.py)

    kernel = kbuild.build("release", None) / "bzImage"
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
    recs = check_result_set(guest.out_dir, JOB, TOPO.nodes)
    run = recs[0]
    # the guest saw the machine QEMU was told to build
    want = {str(n): list(range(n * 2, n * 2 + 2)) for n in range(TOPO.nodes)}
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
