"""Topology: defaults, validation messages, option parsing, CPU numbering, caches."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "configs"))

from numa_lb.caches import CacheGeometry, l2_with_l3_share  # noqa: E402
from numa_lb.topology import Topology, TopologyError  # noqa: E402
from numa_lb.units import parse_frequency, parse_size  # noqa: E402

MiB = 1 << 20


def test_defaults_follow_the_paper_machine() -> None:
    t = Topology()
    assert (t.sockets, t.cores_per_socket, t.ncpus) == (4, 4, 16)
    assert t.mem_per_node == 512 * MiB
    assert t.cpu_clock_hz == 2_800_000_000
    assert (t.l1d.size, t.l1d.assoc) == (16 * 1024, 4)
    assert (t.l1i.size, t.l1i.assoc) == (32 * 1024, 2)
    assert (t.l2.size, t.l2.assoc) == (MiB, 16)
    assert t.l2_effective == t.l2
    assert t.probe_filter and t.probe_filter_entries == 256 * 1024
    assert t.probe_filter_size == 16 * MiB
    assert t.inter_socket.value == "full"
    assert t.target_numa_factor == 1.6
    assert t.slit_distance == 16
    assert t.memory_type == "DDR3_1600_8x8"


@pytest.mark.parametrize(
    ("kwargs", "parameter", "allowed"),
    [
        ({"sockets": 0}, "sockets", "1..8"),
        ({"sockets": 9}, "sockets", "1..8"),
        ({"sockets": 2.0}, "sockets", "1..8"),
        ({"sockets": True}, "sockets", "1..8"),
        ({"cores_per_socket": 17}, "cores_per_socket", "1..16"),
        ({"cores_per_socket": 0}, "cores_per_socket", "1..16"),
        ({"mem_per_node": "100MiB"}, "mem_per_node", "multiple of 128MiB"),
        ({"mem_per_node": "4GiB"}, "mem_per_node", "3GiB"),
        ({"mem_per_node": "lots"}, "mem_per_node", "MiB"),
        ({"cpu_clock": "2.8"}, "cpu_clock", "GHz"),
        ({"cpu_clock": "50MHz"}, "cpu_clock", "100MHz"),
        ({"inter_socket": "mesh"}, "inter_socket", "full, ring"),
        ({"memory_type": "HBM"}, "memory_type", "DDR3_1600_8x8"),
        ({"numa_factor": 1.0}, "numa_factor", "(1.0, 10.0]"),
        ({"numa_factor": 11}, "numa_factor", "(1.0, 10.0]"),
        ({"numa_factor": float("nan")}, "numa_factor", "(1.0, 10.0]"),
        ({"link_latency_cycles": 0}, "link_latency_cycles", "1..100000"),
        ({"link_latency": "-3ns"}, "link_latency", "20ns"),
        ({"numa_factor": 2.0, "link_latency": 30}, "numa_factor/link_latency_cycles", "either"),
        ({"slit_remote_distance": 10}, "slit_remote_distance", "11..254"),
        ({"slit_remote_distance": 255}, "slit_remote_distance", "11..254"),
        (
            {"sockets": 8, "inter_socket": "ring", "slit_remote_distance": 80},
            "slit_remote_distance",
            "4 hops",
        ),
        ({"probe_filter_entries": 3000}, "probe_filter_entries", "power-of-two"),
        ({"l2_size": "768KiB"}, "l2_size", "power of two"),
        ({"kernel_hz": 200}, "kernel_hz", "250"),
    ],
)
def test_invalid_values_name_the_parameter(
    kwargs: dict[str, object], parameter: str, allowed: str
) -> None:
    with pytest.raises(TopologyError) as err:
        Topology.from_options(**kwargs)  # type: ignore[arg-type]
    message = str(err.value)
    assert message.startswith(parameter + ":") or message.startswith(parameter + "/"), message
    assert allowed in message


def test_topology_is_frozen() -> None:
    t = Topology()
    with pytest.raises(AttributeError):
        t.sockets = 2  # type: ignore[misc]


def test_from_options_parses_human_units() -> None:
    t = Topology.from_options(
        mem_per_node="1GiB", cpu_clock="2GHz", link_latency="10ns", l2_size="2MiB", sockets=2
    )
    assert t.mem_per_node == 1 << 30
    assert t.cpu_clock_hz == 2_000_000_000
    assert t.link_latency_ns == 10.0 and t.link_latency().cycles == 20
    assert t.l2.size == 2 * MiB and t.l2.assoc == 16
    assert Topology.from_options(link_latency="42").link_latency().cycles == 42
    assert Topology.from_options(link_latency=7).link_latency_cycles == 7


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512MiB", 512 * MiB), ("512MB", 512 * MiB), ("1.5GiB", 1536 * MiB), ("4096", 4096)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_parse_size_and_frequency_reject_garbage() -> None:
    with pytest.raises(ValueError, match="not a whole number"):
        parse_size("0.3B")
    with pytest.raises(ValueError, match="units"):
        parse_size("12 parsecs")
    assert parse_frequency("2.8GHz") == 2_800_000_000
    with pytest.raises(ValueError):
        parse_frequency("fast")


def test_cpus_are_numbered_socket_major() -> None:
    t = Topology(sockets=3, cores_per_socket=5)
    assert t.ncpus == 15
    assert t.cpus_of_socket(1) == [5, 6, 7, 8, 9]
    assert [t.socket_of_cpu(c) for c in (0, 4, 5, 14)] == [0, 0, 1, 2]
    assert [t.apic_id(c) for c in range(15)] == list(range(15))
    assert t.io_apic_id == 15
    with pytest.raises(IndexError):
        t.socket_of_cpu(15)


@pytest.mark.parametrize(
    ("cores_per_socket", "size", "assoc"),
    [
        (4, 3 * MiB, 48),  # 1 MiB + 8 MiB / 4
        (8, 2 * MiB, 32),  # 1 MiB + 8 MiB / 8
        (3, 3712 * 1024, 58),  # 8 MiB / 3 = 2730.7 KiB, rounded down to 42 ways of 64 KiB
        (16, 1536 * 1024, 24),
        (1, 9 * MiB, 144),
    ],
)
def test_l2_variant_adds_the_core_share_of_the_l3(
    cores_per_socket: int, size: int, assoc: int
) -> None:
    t = Topology(cores_per_socket=cores_per_socket, l2_includes_l3_share=True)
    assert (t.l2_effective.size, t.l2_effective.assoc) == (size, assoc)
    assert t.l2_effective.sets == 1024  # same set count as the base L2
    assert t.to_record()["l2"] == {"size": t.l2_effective.size_str, "assoc": assoc}


def test_cache_geometry_rejects_non_power_of_two_sets() -> None:
    with pytest.raises(ValueError, match="power of two"):
        CacheGeometry("l2", 3 * MiB, 16)  # 3072 sets
    with pytest.raises(ValueError, match="whole number"):
        CacheGeometry("l1d", 1000, 4)
    base = CacheGeometry("l2", MiB, 16)
    assert l2_with_l3_share(base, 4).size == 3 * MiB


def test_record_holds_requested_and_resolved_values() -> None:
    rec = Topology(numa_factor=2.0).to_record()
    assert rec["numa_factor_requested"] == 2.0
    assert rec["link_latency_requested"] == "numa_factor=2"
    assert rec["link_latency_source"] == "first-order model (uncalibrated)"
    assert rec["slit_remote_distance"] == 20
    assert rec["node_ranges"][0] == [0, 512 * MiB]
    assert rec["kernel_args"][1] == "console=ttyS0"


def test_record_is_json_and_differs_between_topologies() -> None:
    import json

    a = json.loads(json.dumps(Topology().to_record()))
    b = json.loads(json.dumps(Topology(sockets=2, inter_socket="ring").to_record()))
    assert a["sockets"] == 4 and b["sockets"] == 2
    assert a["inter_socket"] == "full" and b["inter_socket"] == "ring"
    assert len(a["slit"]) == 4 and len(b["slit"]) == 2


def test_kernel_args_agree_with_the_clock() -> None:
    assert Topology().kernel_args() == [
        "earlyprintk=ttyS0",
        "console=ttyS0",
        "lpj=11200000",  # 2.8 GHz / HZ 250
        "idle=halt",  # no MWAIT idle: atomic_noncaching boots see no monitor writes
        "tsc=reliable",  # gem5's TSCs are synchronous; else Linux times with jiffies
        "root={root_value}",
    ]
    assert "lpj=2000000" in Topology(cpu_clock_hz=2_000_000_000, kernel_hz=1000).kernel_args()


def test_pure_modules_do_not_import_gem5() -> None:
    import importlib

    pure = ("units", "caches", "memory_map", "numa_factor", "kernel_cmdline", "topology", "qemu",
            "ruby_requests", "counter_bridge")  # fmt: skip
    for name in pure:
        importlib.import_module(f"numa_lb.{name}")
    importlib.import_module("numa_lb.acpi")
    assert "m5" not in sys.modules and "gem5" not in sys.modules
