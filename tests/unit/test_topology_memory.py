"""Physical address map and E820: node ranges, the PCI hole, exact RAM coverage."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "configs"))

from numa_lb.memory_map import (  # noqa: E402
    AddrRange,
    E820Type,
    check_node_ranges,
    node_ranges,
)
from numa_lb.topology import Topology  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30


def _ranges(*pairs: tuple[int, int]) -> list[tuple[int, int]]:
    return list(pairs)


# Expected maps written out by hand (start, end) so the layout rule is pinned down.
EXPECTED = [
    (
        dict(sockets=4, mem_per_node=512 * MiB),
        _ranges((0, 512 * MiB), (512 * MiB, GiB), (GiB, 1536 * MiB), (1536 * MiB, 2 * GiB)),
    ),
    (dict(sockets=1, mem_per_node=128 * MiB), _ranges((0, 128 * MiB))),
    # 3 x 1 GiB fill exactly up to the hole, the 4th goes above 4 GiB
    (
        dict(sockets=4, mem_per_node=GiB),
        _ranges((0, GiB), (GiB, 2 * GiB), (2 * GiB, 3 * GiB), (4 * GiB, 5 * GiB)),
    ),
    # 1.25 GiB nodes: the third would cross 3 GiB, so it starts at 4 GiB
    (
        dict(sockets=3, mem_per_node=1280 * MiB),
        _ranges((0, 1280 * MiB), (1280 * MiB, 2560 * MiB), (4 * GiB, 4 * GiB + 1280 * MiB)),
    ),
    (dict(sockets=2, mem_per_node=3 * GiB), _ranges((0, 3 * GiB), (4 * GiB, 7 * GiB))),
]


@pytest.mark.parametrize(("kwargs", "expected"), EXPECTED)
def test_node_ranges_match_the_documented_layout(
    kwargs: dict[str, int], expected: list[tuple[int, int]]
) -> None:
    nodes = Topology(**kwargs).node_ranges()
    assert [(r.start, r.end) for r in nodes] == expected


def _ram_bytes_from_e820(topo: Topology) -> set[tuple[int, int]]:
    """Merge E820 entries lying inside RAM (RAM + the BIOS-area reservation)."""
    entries = topo.e820()
    # sorted, no overlaps
    for a, b in itertools.pairwise(entries):
        assert a.end <= b.addr, (a, b)
    merged: list[list[int]] = []
    for e in entries:
        if e.addr >= 0xC000_0000 and e.end <= 1 << 32:  # the hole: m5ops page only
            assert e.type is E820Type.RESERVED
            continue
        if merged and merged[-1][1] == e.addr:
            merged[-1][1] = e.end
        else:
            merged.append([e.addr, e.end])
    return {(s, e) for s, e in merged}


ALL_SHAPES = [
    dict(sockets=s, mem_per_node=m)
    for s in (1, 2, 3, 4, 8)
    for m in (128 * MiB, 512 * MiB, 640 * MiB, GiB, 1280 * MiB, 3 * GiB)
]


@pytest.mark.parametrize(
    "kwargs", ALL_SHAPES, ids=lambda k: f"{k['sockets']}x{k['mem_per_node'] >> 20}M"
)
def test_nodes_and_e820_cover_exactly_all_ram(kwargs: dict[str, int]) -> None:
    topo = Topology(**kwargs)
    nodes = topo.node_ranges()
    assert nodes[0].start == 0
    assert sum(r.size for r in nodes) == topo.total_memory
    for a, b in itertools.pairwise(nodes):
        assert a.end <= b.start  # ascending, no overlap
    for r in nodes:
        assert r.start % (128 * MiB) == 0 and r.size % (128 * MiB) == 0
        assert r.end <= 3 * GiB or r.start >= 4 * GiB, f"{r} overlaps the PCI hole"
    # merge adjacent node ranges: the RAM the guest must see
    ram: list[list[int]] = []
    for r in nodes:
        if ram and ram[-1][1] == r.start:
            ram[-1][1] = r.end
        else:
            ram.append([r.start, r.end])
    assert _ram_bytes_from_e820(topo) == {(s, e) for s, e in ram}
    usable = sum(e.size for e in topo.e820() if e.type is E820Type.RAM)
    assert usable == topo.total_memory - (0x10_0000 - 0x9FC00)


def test_e820_low_memory_matches_gem5_conventions() -> None:
    entries = Topology().e820()
    first = [(e.addr, e.size, int(e.type)) for e in entries[:3]]
    assert first == [
        (0, 0x9FC00, 1),
        (0x9FC00, 0x100000 - 0x9FC00, 2),  # the ACPI blob at 0xE0000 lives in here
        (0x100000, 2 * GiB - 0x100000, 1),
    ]
    assert (entries[-1].addr, entries[-1].size, int(entries[-1].type)) == (0xFFFF0000, 65536, 2)


def test_e820_for_memory_above_4gib() -> None:
    entries = Topology(sockets=4, mem_per_node=GiB).e820()
    assert [(e.addr, e.end, int(e.type)) for e in entries] == [
        (0, 0x9FC00, 1),
        (0x9FC00, 0x100000, 2),
        (0x100000, 3 * GiB, 1),
        (0xFFFF0000, 4 * GiB, 2),
        (4 * GiB, 5 * GiB, 1),
    ]


def test_node_range_checks_catch_bad_maps() -> None:
    with pytest.raises(AssertionError, match="start at address 0"):
        check_node_ranges([AddrRange(MiB, GiB)], GiB)
    with pytest.raises(AssertionError, match="overlap"):
        check_node_ranges([AddrRange(0, GiB), AddrRange(GiB - MiB, GiB)], 2 * GiB)
    with pytest.raises(AssertionError, match="hole"):
        check_node_ranges([AddrRange(0, 2 * GiB), AddrRange(2 * GiB, 2 * GiB)], 4 * GiB)
    with pytest.raises(AssertionError, match="cover"):
        check_node_ranges([AddrRange(0, GiB)], 2 * GiB)
    with pytest.raises(ValueError, match="mem_per_node"):
        node_ranges(2, 100 * MiB)
