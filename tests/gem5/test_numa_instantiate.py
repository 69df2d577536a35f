"""gem5 tier: instantiate 1x1, 2x2 and 4x4 NUMA machines and check what gem5 built.

Needs $GEM5 (a gem5.opt built for X86 with PROTOCOL=MOESI_hammer) and a kernel
ELF ($NUMA_LB_VMLINUX, else the artifact of kernel-patches/kbuild.py); gem5's x86
FS workload refuses to initialise without one, but nothing is executed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from analysis.cache import default_gem5

NO_GEM5 = "SKIPPED gem5: no gem5 binary: " + default_gem5()[1]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "configs"))

from numa_lb.acpi import build_blob  # noqa: E402
from numa_lb.numa_factor import G34_4P_SLIT  # noqa: E402
from numa_lb.options import add_topology_args, topology_from_args  # noqa: E402

pytestmark = pytest.mark.gem5


def _gem5() -> Path | None:
    value = default_gem5()[0]  # $GEM5, else the cached build (analysis/cache.py)
    return Path(value) if value and Path(value).is_file() else None


def _kernel() -> Path | None:
    value = os.environ.get("NUMA_LB_VMLINUX")
    if value:
        return Path(value) if Path(value).is_file() else None
    try:
        out = subprocess.run(
            [sys.executable, str(REPO / "kernel-patches" / "kbuild.py"), "path"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    vmlinux = Path(out.stdout.strip() or "/nonexistent") / "vmlinux"
    return vmlinux if out.returncode == 0 and vmlinux.is_file() else None


GEM5 = _gem5()
KERNEL = _kernel() if GEM5 else None
if GEM5 is None:
    REASON = NO_GEM5
elif KERNEL is None:
    REASON = "SKIPPED gem5: no kernel ($NUMA_LB_VMLINUX unset, no kbuild.py artifact)"
else:
    REASON = ""
if REASON:
    print(REASON)


def _objects(node: Any, type_name: str) -> list[dict[str, Any]]:
    """Every SimObject of a given C++ type in gem5's config.json tree."""
    found = []
    if isinstance(node, dict):
        if node.get("type") == type_name:
            found.append(node)
        for value in node.values():
            found += _objects(value, type_name)
    elif isinstance(node, list):
        for value in node:
            found += _objects(value, type_name)
    return found


@pytest.mark.skipif(bool(REASON), reason=REASON or "n/a")
@pytest.mark.parametrize(
    ("sockets", "cores", "inter_socket"),
    [(1, 1, "full"), (2, 2, "full"), (4, 4, "full"),
     # the paper's machine (issue 40 item 4): 4 x 8, and 8 G34 dies x 4 (two hop classes)
     (4, 8, "full"), (8, 4, "g34")],
    ids=["1x1", "2x2", "4x4", "paper-4x8", "paper-8node-g34"],
)  # fmt: skip
def test_instantiate(sockets: int, cores: int, inter_socket: str, tmp_path: Path) -> None:
    assert GEM5 is not None and KERNEL is not None
    # instantiation only: any link latency (no calibration table needed)
    flags = ["--sockets", str(sockets), "--cores-per-socket", str(cores), "--link-latency", "40",
             "--inter-socket", inter_socket, "--slit-remote-distance", "16"]  # fmt: skip
    run = subprocess.run(
        [str(GEM5), "--outdir", str(tmp_path), str(REPO / "configs" / "numa_instantiate.py"),
         *flags, "--kernel", str(KERNEL)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("INSTANTIATED "))
    summary = json.loads(line.removeprefix("INSTANTIATED "))
    # the same flags through the same parser: the topology the script built
    parser = argparse.ArgumentParser()
    add_topology_args(parser)
    topo = topology_from_args(parser.parse_args(flags))
    assert summary["ncpus"] == sockets * cores
    assert summary["directories"] == sockets
    assert summary["int_links"] == 2 * len(topo.links())  # one each way per physical link
    if inter_socket == "full":
        assert len(topo.links()) == sockets * (sockets - 1) // 2
    else:  # G34: the published 4P SLIT's one-hop pairs are the links, the rest two hops
        assert topo.slit() == [list(row) for row in G34_4P_SLIT]
        assert {d for row in topo.slit() for d in row} == {10, 16, 22}

    # the firmware blob gem5 loads is exactly the one the topology describes
    assert (tmp_path / "numa_acpi.bin").read_bytes() == build_blob(topo).data
    record = json.loads((tmp_path / "numa_topology.json").read_text())
    assert record["slit"] == topo.slit()

    config = json.loads((tmp_path / "config.json").read_text())
    workload = _objects(config, "X86FsLinux")[0]
    assert workload["extras_addrs"] == [0xE0000]
    assert not workload.get("acpi_description_table_pointer")
    directories = sorted(_objects(config, "Directory_Controller"), key=lambda d: d["version"])
    assert [d["probe_filter_enabled"] for d in directories] == [True] * sockets
    # gem5 prints an AddrRange as "start:end" (decimal, end exclusive)
    assert [d["addr_ranges"] for d in directories] == [
        [f"{r.start}:{r.end}"] for r in topo.node_ranges()
    ]
    links = _objects(config, "SimpleIntLink")
    assert {link["latency"] for link in links} <= {topo.link_latency().cycles}
    assert len(_objects(config, "L1Cache_Controller")) == sockets * cores


@pytest.mark.skipif(GEM5 is None, reason=NO_GEM5)
@pytest.mark.parametrize(
    ("machine", "refused"),
    [
        ([], False),  # 4 x 2 at 2.8 GHz with the probe filter: its table is shipped
        (["--cores-per-socket", "4"], True),
        (["--cpu-clock", "3GHz"], True),
        (["--no-probe-filter"], True),
    ],
    ids=["4x2-calibrated", "4x4", "3GHz", "no-probe-filter"],
)
def test_a_factor_is_resolved_only_on_the_machine_it_was_measured_on(
    machine: list[str], refused: bool, tmp_path: Path
) -> None:
    """Issue 14 item 4, through gem5 and the study's run script: a NUMA factor
    becomes a link latency only with the table measured under the same
    conditions (shape, clock, probe filter, DRAM, link bandwidth)."""
    assert GEM5 is not None
    run = subprocess.run(
        [str(GEM5), "--outdir", str(tmp_path), str(REPO / "configs" / "numa_run.py"),
         "--sockets", "4", "--cores-per-socket", "2", *machine, "--numa-factor", "1.6",
         "--kernel", "/nonexistent", "--disk-image", "/nonexistent"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode != 0  # no kernel here: at best it gets past the topology
    if refused:
        assert "calibration: no table" in run.stderr and "measured on this machine" in run.stderr
    else:
        assert "calibration" not in run.stderr
        assert "kernel /nonexistent does not exist" in run.stderr


@pytest.mark.skipif(bool(REASON), reason=REASON or "n/a")
@pytest.mark.parametrize(("cores", "cpu"), [(4, "timing"), (2, "o3"), (4, "o3")])
def test_the_counter_bridge_reads_every_core(cores: int, cpu: str, tmp_path: Path) -> None:
    """The bridge finds each active core's counters under its stats name (at
    tick 0 the values are 0: this checks the lookups, which is what failed).
    Found 2026-11-25 (issue 14): past 10 cores gem5 pads the index in paths
    (cores00) but not in stats names (cores0), and O3 has no notIdleFraction;
    either raised KeyError at the ROI start, which gem5 24 swallows."""
    assert GEM5 is not None and KERNEL is not None
    run = subprocess.run(
        [str(GEM5), "--outdir", str(tmp_path), str(REPO / "configs" / "numa_instantiate.py"),
         "--sockets", "4", "--cores-per-socket", str(cores), "--link-latency", "40",
         "--cpu-type", cpu, "--bridge-read", "--kernel", str(KERNEL)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("BRIDGE "))
    got = json.loads(line.removeprefix("BRIDGE "))
    assert len(got["paths"]) == 4 * cores
    assert (cores > 2) == ("board.processor.cores00.core" in got["paths"])  # padded past 10
