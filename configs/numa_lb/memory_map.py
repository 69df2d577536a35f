"""Physical address map of the NUMA machine: node ranges and the E820 table.

Layout (x86, same low-memory conventions as gem5's X86 FS setup):

* RAM below 4 GiB ends at most at 3 GiB (0xC0000000); 3 GiB..4 GiB is the PCI/IO
  hole (IO APIC at 0xFEC00000, local APICs at 0xFEE00000, m5ops at 0xFFFF0000).
  Note: gem5 v24.0.0.1's stdlib ``X86Board`` refuses more than 3 GiB altogether;
  our NUMA board places the rest above 4 GiB, as gem5's older FS scripts did.
* Node i owns one contiguous range; node 0 starts at address 0 and the nodes
  follow in order. A node that would cross 3 GiB starts at 4 GiB instead, and so do
  all later ones. Nodes never straddle the hole, so every node is one range, one
  DRAM controller, one directory and one SRAT memory-affinity entry; the address
  space between the last low node and 3 GiB is then simply unpopulated.
* Node sizes are multiples of 128 MiB, the x86-64 sparsemem section size, so no
  memory section spans two nodes in the guest.

E820 (mirrors gem5's X86Board for the first MiB, so the guest sees the same BIOS
area): [0, 0x9FC00) RAM, [0x9FC00, 1 MiB) reserved (EBDA, our ACPI blob at
0xE0000, gem5's SMBIOS/MP tables at 0xF0000), then RAM up to the end of the last
low node, the m5ops page reserved, and RAM above 4 GiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from .units import GiB, KiB, MiB

PCI_HOLE_START = 0xC000_0000  # 3 GiB: RAM below 4 GiB stops here
FOUR_GIB = 0x1_0000_0000
NODE_ALIGNMENT = 128 * MiB  # x86-64 SECTION_SIZE_BITS = 27
MAX_NODE_SIZE = PCI_HOLE_START  # node 0 must fit below the hole, starting at 0
EBDA_START = 0x9FC00  # 639 KiB of conventional memory, as gem5 reports
BIOS_AREA_END = 0x10_0000  # 1 MiB
M5OPS_BASE = 0xFFFF_0000
M5OPS_SIZE = 64 * KiB
IO_APIC_BASE = 0xFEC0_0000
LOCAL_APIC_BASE = 0xFEE0_0000


class E820Type(IntEnum):
    RAM = 1
    RESERVED = 2


@dataclass(frozen=True, order=True)
class AddrRange:
    """Half-open physical range [start, end)."""

    start: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size

    def __str__(self) -> str:
        return f"[{self.start:#x}, {self.end:#x})"


@dataclass(frozen=True)
class E820Entry:
    addr: int
    size: int
    type: E820Type

    @property
    def end(self) -> int:
        return self.addr + self.size


def node_ranges(sockets: int, mem_per_node: int) -> list[AddrRange]:
    """One contiguous range per node, in node order (see module docstring)."""
    if mem_per_node % NODE_ALIGNMENT or not 0 < mem_per_node <= MAX_NODE_SIZE:
        raise ValueError(
            f"mem_per_node: must be a multiple of 128MiB between 128MiB and 3GiB, "
            f"got {mem_per_node} bytes"
        )
    ranges: list[AddrRange] = []
    cursor = 0
    for _ in range(sockets):
        if cursor < FOUR_GIB and cursor + mem_per_node > PCI_HOLE_START:
            cursor = FOUR_GIB
        ranges.append(AddrRange(cursor, mem_per_node))
        cursor += mem_per_node
    check_node_ranges(ranges, sockets * mem_per_node)
    return ranges


def check_node_ranges(ranges: list[AddrRange], total_ram: int) -> None:
    """The invariants Linux's SRAT parser needs, asserted where the map is made."""
    assert ranges and ranges[0].start == 0, "node 0 must start at address 0"
    for prev, cur in zip(ranges, ranges[1:], strict=False):
        assert prev.end <= cur.start, f"node ranges overlap: {prev} and {cur}"
    for r in ranges:
        assert r.end <= PCI_HOLE_START or r.start >= FOUR_GIB, f"node range {r} hits the hole"
    assert sum(r.size for r in ranges) == total_ram, "node ranges do not cover all RAM"


def ram_ranges(nodes: list[AddrRange]) -> list[AddrRange]:
    """RAM as the guest sees it: adjacent node ranges merged (below / above 4 GiB)."""
    merged: list[AddrRange] = []
    for r in sorted(nodes):
        if merged and merged[-1].end == r.start:
            merged[-1] = AddrRange(merged[-1].start, merged[-1].size + r.size)
        else:
            merged.append(r)
    return merged


def e820_entries(nodes: list[AddrRange]) -> list[E820Entry]:
    """E820 table whose RAM + BIOS-area entries tile exactly the node ranges."""
    entries: list[E820Entry] = []
    for i, r in enumerate(ram_ranges(nodes)):
        if i == 0:
            # gem5 puts the EBDA/BIOS area inside the first RAM range; report it
            # reserved so the kernel keeps its hands off our ACPI blob.
            assert r.start == 0 and r.end > BIOS_AREA_END
            entries.append(E820Entry(0, EBDA_START, E820Type.RAM))
            entries.append(E820Entry(EBDA_START, BIOS_AREA_END - EBDA_START, E820Type.RESERVED))
            entries.append(E820Entry(BIOS_AREA_END, r.end - BIOS_AREA_END, E820Type.RAM))
        else:
            entries.append(E820Entry(r.start, r.size, E820Type.RAM))
    entries.append(E820Entry(M5OPS_BASE, M5OPS_SIZE, E820Type.RESERVED))
    entries.sort(key=lambda e: e.addr)
    return entries


def describe(nodes: list[AddrRange]) -> str:
    lines = [f"node {i}: {r} ({r.size // MiB} MiB)" for i, r in enumerate(nodes)]
    total = sum(r.size for r in nodes)
    lines.append(f"total RAM: {total / GiB:g} GiB")
    return "\n".join(lines)
