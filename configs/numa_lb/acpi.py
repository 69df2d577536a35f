"""ACPI firmware tables that tell the guest the NUMA topology.

gem5's x86 FS workload writes no SRAT, SLIT or MADT, so the board loads this blob
into the BIOS area (default base 0xE0000) and disables gem5's own RSDP. Linux
finds the RSDP by its legacy scan of 0xE0000-0xFFFFF on 16-byte boundaries.

Written from the ACPI specification (6.x, sections 5.2.5 RSDP, 5.2.6 SDT header,
5.2.8 XSDT, 5.2.12 MADT, 5.2.16 SRAT, 5.2.17 SLIT); pure ``struct`` packing. Every
multi-byte field is little-endian. Every table's bytes sum to 0 mod 256.

Blob layout, each part 16-byte aligned, all addresses computed from the base:

    base + 0x00  RSDP (revision 2, 36 bytes; RsdtAddress 0, XsdtAddress set)
    then         XSDT -> MADT, SRAT, SLIT
    then         MADT: one local APIC per CPU (ACPI id = APIC id = cpu index),
                 one I/O APIC (id = ncpus, 0xFEC00000, GSI base 0), ISA
                 interrupt source overrides IRQ0->GSI2, IRQ1->1, IRQ3..14 identity
                 (the same routing gem5's X86Board writes into the MP table)
    then         SRAT (revision 3): processor affinity entries (16 bytes) in CPU
                 order, then memory affinity entries (40 bytes) in node order; all
                 enabled, none hot-pluggable; proximity domain = node = socket
    then         SLIT: the Topology's distance matrix

The whole blob must fit in [base, 0xF0000): gem5 writes SMBIOS and the Intel MP
table from 0xF0000.

No FADT/DSDT: Linux then disables ACPI after setup_arch, by which time it has
already parsed SRAT/SLIT (NUMA) and the MADT (CPUs, I/O APIC).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from .memory_map import IO_APIC_BASE, LOCAL_APIC_BASE
from .topology import Topology

BLOB_BASE = 0xE0000
BLOB_LIMIT = 0xF0000  # gem5's SMBIOS / MP tables start here
ALIGN = 16

OEM_ID = b"NUMALB"  # 6 bytes
OEM_TABLE_ID = b"GEM5NUMA"  # 8 bytes
OEM_REVISION = 1
CREATOR_ID = b"NLBS"  # 4 bytes: numa-lb-study
CREATOR_REVISION = 1

SDT_HEADER = struct.Struct("<4sIBB6s8sI4sI")  # 36 bytes
RSDP = struct.Struct("<8sB6sBIIQB3x")  # 36 bytes, ACPI 2.0+
RSDP_V1_LENGTH = 20  # the first checksum covers only the ACPI 1.0 part

MADT_REVISION = 3
MADT_PCAT_COMPAT = 1  # dual 8259 PICs present (gem5's south bridge has them)
MADT_LOCAL_APIC = struct.Struct("<BBBBI")  # type 0, length 8
MADT_IO_APIC = struct.Struct("<BBBBII")  # type 1, length 12
MADT_ISO = struct.Struct("<BBBBIH")  # type 2, length 10: interrupt source override
LOCAL_APIC_ENABLED = 1
ISA_BUS = 0
ISO_FLAGS_CONFORMS = 0  # polarity and trigger as the ISA bus defines (edge, high)
# ISA IRQ -> GSI; IRQ2 is the 8259 cascade and has no entry.
ISA_IRQ_TO_GSI = {0: 2, 1: 1, **{irq: irq for irq in range(3, 15)}}

SRAT_REVISION = 3
SRAT_PROCESSOR = struct.Struct("<BBBBIB3sI")  # type 0, length 16
SRAT_MEMORY = struct.Struct("<BBIHIIIIIIQ")  # type 1, length 40
SRAT_ENABLED = 1  # bit 1 (hot-pluggable) and bit 2 (non-volatile) stay clear

SLIT_REVISION = 1
XSDT_REVISION = 1


def checksum(data: bytes) -> int:
    """The byte that makes ``data`` plus it sum to 0 mod 256."""
    return (-sum(data)) & 0xFF


def _align(value: int) -> int:
    return (value + ALIGN - 1) // ALIGN * ALIGN


def sdt(signature: bytes, revision: int, body: bytes) -> bytes:
    """A system description table: 36-byte header + body, checksummed."""
    assert len(signature) == 4
    length = SDT_HEADER.size + len(body)
    header = SDT_HEADER.pack(
        signature,
        length,
        revision,
        0,
        OEM_ID,
        OEM_TABLE_ID,
        OEM_REVISION,
        CREATOR_ID,
        CREATOR_REVISION,
    )
    table = bytearray(header + body)
    table[9] = checksum(table)
    return bytes(table)


def rsdp(xsdt_address: int) -> bytes:
    data = bytearray(RSDP.pack(b"RSD PTR ", 0, OEM_ID, 2, 0, RSDP.size, xsdt_address, 0))
    data[8] = checksum(data[:RSDP_V1_LENGTH])
    data[32] = checksum(data)
    return bytes(data)


def xsdt(table_addresses: list[int]) -> bytes:
    return sdt(b"XSDT", XSDT_REVISION, b"".join(struct.pack("<Q", a) for a in table_addresses))


def madt(topo: Topology) -> bytes:
    body = bytearray(struct.pack("<II", LOCAL_APIC_BASE, MADT_PCAT_COMPAT))
    for cpu in range(topo.ncpus):
        body += MADT_LOCAL_APIC.pack(
            0, MADT_LOCAL_APIC.size, cpu, topo.apic_id(cpu), LOCAL_APIC_ENABLED
        )
    body += MADT_IO_APIC.pack(1, MADT_IO_APIC.size, topo.io_apic_id, 0, IO_APIC_BASE, 0)
    for irq, gsi in ISA_IRQ_TO_GSI.items():
        body += MADT_ISO.pack(2, MADT_ISO.size, ISA_BUS, irq, gsi, ISO_FLAGS_CONFORMS)
    return sdt(b"APIC", MADT_REVISION, bytes(body))


def srat(topo: Topology) -> bytes:
    # Reserved field "must be 1" for backward compatibility, then 8 reserved bytes.
    body = bytearray(struct.pack("<I8x", 1))
    # Linux numbers nodes in the order it first meets proximity domains, so CPU
    # entries go in CPU order, which is socket order (proximity domains ascending).
    for cpu in range(topo.ncpus):
        domain = topo.socket_of_cpu(cpu)
        body += SRAT_PROCESSOR.pack(
            0,
            SRAT_PROCESSOR.size,
            domain & 0xFF,
            topo.apic_id(cpu),
            SRAT_ENABLED,
            0,  # local SAPIC EID (IA-64 only)
            (domain >> 8).to_bytes(3, "little"),
            0,  # clock domain
        )
    for node, r in enumerate(topo.node_ranges()):
        body += SRAT_MEMORY.pack(
            1,
            SRAT_MEMORY.size,
            node,
            0,
            r.start & 0xFFFF_FFFF,
            r.start >> 32,
            r.size & 0xFFFF_FFFF,
            r.size >> 32,
            0,
            SRAT_ENABLED,
            0,
        )
    return sdt(b"SRAT", SRAT_REVISION, bytes(body))


def slit(topo: Topology) -> bytes:
    matrix = topo.slit()
    body = struct.pack("<Q", len(matrix)) + bytes(d for row in matrix for d in row)
    return sdt(b"SLIT", SLIT_REVISION, body)


@dataclass(frozen=True)
class AcpiBlob:
    """The tables laid out for loading at ``base``; ``offsets`` are from ``base``."""

    base: int
    data: bytes
    offsets: dict[str, int]

    def table(self, signature: str) -> bytes:
        """The bytes of one table (``RSDP`` or a 4-character signature)."""
        start = self.offsets[signature]
        if signature == "RSDP":
            return self.data[start : start + RSDP.size]
        (length,) = struct.unpack_from("<I", self.data, start + 4)
        return self.data[start : start + length]

    def write(self, path: Path) -> Path:
        path.write_bytes(self.data)
        return path


def build_blob(topo: Topology, base: int = BLOB_BASE) -> AcpiBlob:
    if base % ALIGN or not 0xE0000 <= base < BLOB_LIMIT:
        raise ValueError(f"acpi base: must be 16-byte aligned in [0xE0000, 0xF0000), got {base:#x}")
    tables = {"APIC": madt(topo), "SRAT": srat(topo), "SLIT": slit(topo)}
    offsets = {"RSDP": 0}
    cursor = _align(RSDP.size)
    offsets["XSDT"] = cursor
    cursor = _align(cursor + SDT_HEADER.size + 8 * len(tables))
    for sig, table in tables.items():
        offsets[sig] = cursor
        cursor = _align(cursor + len(table))
    xsdt_table = xsdt([base + offsets[sig] for sig in tables])
    assert len(xsdt_table) == SDT_HEADER.size + 8 * len(tables)
    parts = {"RSDP": rsdp(base + offsets["XSDT"]), "XSDT": xsdt_table, **tables}
    data = bytearray(cursor)
    for sig, part in parts.items():
        data[offsets[sig] : offsets[sig] + len(part)] = part
    if base + len(data) > BLOB_LIMIT:
        raise ValueError(
            f"acpi blob: {len(data)} bytes at {base:#x} overrun {BLOB_LIMIT:#x} where gem5 "
            "writes its SMBIOS and MP tables"
        )
    return AcpiBlob(base=base, data=bytes(data), offsets=offsets)
