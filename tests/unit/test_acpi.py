"""ACPI blob: decode every table with ``iasl -d`` (acpica-tools) and compare each
field with the topology. Expected values are computed here from the topology's
parameters, not taken from acpi.py, so an encoding mistake cannot cancel out.

The RSDP is the exception: iasl 20200925 refuses to disassemble a standalone
RSDP file (acpica issue #380), so the test writes the expected RSDP as iasl
data-table source, compiles it (iasl computes both checksums) and compares bytes.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "configs"))

from numa_lb.acpi import BLOB_BASE, build_blob  # noqa: E402
from numa_lb.topology import Topology  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
IASL = shutil.which("iasl")

pytestmark = pytest.mark.skipif(
    IASL is None, reason="SKIPPED unit/acpi-iasl: iasl not found (Debian package acpica-tools)"
)

FIELD = re.compile(r"^\[([0-9A-F]+)h \d+\s+(\d+)\]\s+(.+?) : (.*)$")
DECODED = re.compile(r"^\s+(\S.*?) : (\S+)\s*$")


@dataclass
class Decoded:
    """One table as iasl printed it: header fields, subtables, and warnings."""

    header: dict[str, str] = field(default_factory=dict)
    subtables: list[dict[str, str]] = field(default_factory=list)
    text: str = ""


def _strip(value: str) -> str:
    value = re.sub(r"\s*/\*.*\*/\s*$", "", value)  # iasl remarks such as bad checksums
    value = re.sub(r"\s+\[.*\]$", "", value)  # "[Processor Local APIC]" annotations
    return value.strip().strip('"')


def iasl_decode(table: bytes, name: str, workdir: Path) -> Decoded:
    dat = workdir / f"{name}.dat"
    dat.write_bytes(table)
    run = subprocess.run(
        [IASL, "-d", dat.name], cwd=workdir, capture_output=True, text=True, timeout=60
    )
    dsl = workdir / f"{name}.dsl"
    assert run.returncode == 0 and dsl.exists(), run.stdout + run.stderr
    out = Decoded(text=dsl.read_text())
    current = out.header
    last_field = ""
    for line in out.text.split("Raw Table Data")[0].splitlines():
        if m := FIELD.match(line):
            key = re.sub(r"\s*\(decoded below\)", "", m.group(3).strip())
            value = m.group(4)
            if key == "Subtable Type":
                current = {}
                out.subtables.append(current)
            assert key not in current, f"duplicate field {key} in {name}"
            current[key] = _strip(value)
            current[key + " (raw)"] = value
            last_field = key
        elif (m := DECODED.match(line)) and last_field.startswith("Flags"):
            current[f"{last_field.split(' ')[0]}.{m.group(1).strip()}"] = m.group(2)
    return out


def _hex(value: str) -> int:
    return int(value.split()[0], 16)


def check_header(d: Decoded, signature: str, table: bytes, revision: int) -> None:
    h = d.header
    assert h["Signature"] == signature
    assert _hex(h["Table Length"]) == len(table)
    assert _hex(h["Revision"]) == revision
    assert "Incorrect checksum" not in h["Checksum (raw)"], h["Checksum (raw)"]
    assert sum(table) % 256 == 0
    assert h["Oem ID"] == "NUMALB"
    assert h["Oem Table ID"] == "GEM5NUMA"


TOPOLOGIES = {
    "default-4x4": Topology(),
    "1x1": Topology(sockets=1, cores_per_socket=1, mem_per_node=128 * MiB),
    "2x2-3GiB-nodes": Topology(sockets=2, cores_per_socket=2, mem_per_node=3 * GiB),
    "8x16-ring-above-4GiB": Topology.from_options(
        sockets=8, cores_per_socket=16, mem_per_node="1GiB", inter_socket="ring"
    ),
    "3x3-slit40": Topology(sockets=3, cores_per_socket=3, numa_factor=2.0, slit_remote_distance=40),
}

# Node memory ranges, written out by hand per topology: (base, length).
EXPECTED_MEMORY = {
    "default-4x4": [(i * 512 * MiB, 512 * MiB) for i in range(4)],
    "1x1": [(0, 128 * MiB)],
    "2x2-3GiB-nodes": [(0, 3 * GiB), (4 * GiB, 3 * GiB)],
    "8x16-ring-above-4GiB": [(0, GiB), (GiB, GiB), (2 * GiB, GiB)]
    + [((4 + i) * GiB, GiB) for i in range(5)],
    "3x3-slit40": [(0, 512 * MiB), (512 * MiB, 512 * MiB), (GiB, 512 * MiB)],
}

EXPECTED_SLIT_ROW0 = {
    "default-4x4": [10, 16, 16, 16],
    "1x1": [10],
    "2x2-3GiB-nodes": [10, 16],
    "8x16-ring-above-4GiB": [10, 16, 22, 28, 34, 28, 22, 16],
    "3x3-slit40": [10, 40, 40],
}


@pytest.fixture(params=sorted(TOPOLOGIES))
def case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Topology, Path]:
    return request.param, TOPOLOGIES[request.param], tmp_path


def test_blob_layout(case: tuple[str, Topology, Path]) -> None:
    _, topo, _ = case
    blob = build_blob(topo)
    assert blob.base == 0xE0000 == BLOB_BASE
    assert blob.data[:8] == b"RSD PTR "
    assert BLOB_BASE + len(blob.data) <= 0xF0000
    for sig, off in blob.offsets.items():
        assert (BLOB_BASE + off) % 16 == 0, sig
        if sig != "RSDP":
            assert blob.data[off : off + 4] == sig.encode()


def test_rsdp_matches_iasl_compiled_rsdp(case: tuple[str, Topology, Path]) -> None:
    _, topo, tmp = case
    blob = build_blob(topo)
    xsdt_addr = BLOB_BASE + blob.data.index(b"XSDT")
    source = "\n".join(
        [
            '[0008] Signature : "RSD PTR "',
            "[0001] Checksum : 00",
            '[0006] Oem ID : "NUMALB"',
            "[0001] Revision : 02",
            "[0004] RSDT Address : 00000000",
            "[0004] Length : 00000024",
            f"[0008] XSDT Address : {xsdt_addr:016X}",
            "[0001] Extended Checksum : 00",
            "[0003] Reserved : 000000",
            "",
        ]
    )
    (tmp / "rsdp.asl").write_text(source)
    run = subprocess.run([IASL, "rsdp.asl"], cwd=tmp, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    compiled = (tmp / "rsdp.aml").read_bytes()
    assert len(compiled) == 36
    assert blob.table("RSDP") == compiled
    assert sum(compiled[:20]) % 256 == 0 and sum(compiled) % 256 == 0


def test_xsdt_points_at_each_table(case: tuple[str, Topology, Path]) -> None:
    _, topo, tmp = case
    blob = build_blob(topo)
    xsdt = blob.table("XSDT")
    d = iasl_decode(xsdt, "xsdt", tmp)
    check_header(d, "XSDT", xsdt, 1)
    addrs = [
        _hex(v)
        for k, v in d.header.items()
        if k.startswith("ACPI Table Address") and "(raw)" not in k
    ]
    signatures = [blob.data[a - BLOB_BASE : a - BLOB_BASE + 4] for a in addrs]
    assert sorted(signatures) == [b"APIC", b"SLIT", b"SRAT"]
    for a in addrs:
        (length,) = struct.unpack_from("<I", blob.data, a - BLOB_BASE + 4)
        assert a - BLOB_BASE + length <= len(blob.data)
        assert sum(blob.data[a - BLOB_BASE : a - BLOB_BASE + length]) % 256 == 0


def test_madt_fields(case: tuple[str, Topology, Path]) -> None:
    _, topo, tmp = case
    madt = build_blob(topo).table("APIC")
    d = iasl_decode(madt, "apic", tmp)
    check_header(d, "APIC", madt, 3)
    assert d.header["Local Apic Address"] == "FEE00000"
    assert d.header["Flags.PC-AT Compatibility"] == "1"
    ncpus = topo.sockets * topo.cores_per_socket
    lapics = [s for s in d.subtables if _hex(s["Subtable Type"]) == 0]
    ioapics = [s for s in d.subtables if _hex(s["Subtable Type"]) == 1]
    overrides = [s for s in d.subtables if _hex(s["Subtable Type"]) == 2]
    assert len(lapics) + len(ioapics) + len(overrides) == len(d.subtables)
    assert [(_hex(s["Processor ID"]), _hex(s["Local Apic ID"])) for s in lapics] == [
        (cpu, cpu) for cpu in range(ncpus)
    ]
    assert all(s["Flags.Processor Enabled"] == "1" and _hex(s["Length"]) == 8 for s in lapics)
    assert len(ioapics) == 1
    io = ioapics[0]
    assert _hex(io["I/O Apic ID"]) == ncpus
    assert _hex(io["Address"]) == 0xFEC00000
    assert _hex(io["Interrupt"]) == 0  # GSI base
    isa_routes = {_hex(s["Source"]): _hex(s["Interrupt"]) for s in overrides}
    assert isa_routes == {0: 2, 1: 1, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 10: 10,
                          11: 11, 12: 12, 13: 13, 14: 14}  # fmt: skip
    assert all(_hex(s["Bus"]) == 0 and _hex(s["Flags"]) == 0 for s in overrides)


def test_srat_fields(case: tuple[str, Topology, Path]) -> None:
    name, topo, tmp = case
    srat = build_blob(topo).table("SRAT")
    d = iasl_decode(srat, "srat", tmp)
    check_header(d, "SRAT", srat, 3)
    assert _hex(d.header["Table Revision"]) == 1  # the "reserved, must be 1" field
    cpus = [s for s in d.subtables if _hex(s["Subtable Type"]) == 0]
    mems = [s for s in d.subtables if _hex(s["Subtable Type"]) == 1]
    assert len(cpus) + len(mems) == len(d.subtables)
    # processor affinity: 16 bytes, enabled, domain = socket, in ascending order
    expected_cpus = [
        (s, s * topo.cores_per_socket + c)
        for s in range(topo.sockets)
        for c in range(topo.cores_per_socket)
    ]
    got_cpus = [
        (_hex(s["Proximity Domain Low(8)"]) | _hex(s["Proximity Domain High(24)"]) << 8,
         _hex(s["Apic ID"]))
        for s in cpus
    ]  # fmt: skip
    assert got_cpus == expected_cpus
    for s in cpus:
        assert _hex(s["Length"]) == 16 and s["Flags.Enabled"] == "1"
        assert _hex(s["Clock Domain"]) == 0
    # memory affinity: 40 bytes, enabled, not hot-pluggable, not NV, domains ascending
    got_mem = [(_hex(s["Proximity Domain"]), _hex(s["Base Address"]), _hex(s["Address Length"]))
               for s in mems]  # fmt: skip
    assert got_mem == [
        (node, base, size) for node, (base, size) in enumerate(EXPECTED_MEMORY[name])
    ]
    for s in mems:
        assert _hex(s["Length"]) == 40
        assert s["Flags.Enabled"] == "1"
        assert s["Flags.Hot Pluggable"] == "0" and s["Flags.Non-Volatile"] == "0"
    # node 0 starts at 0; ranges plus the hole tile [0, end of RAM) with < 1 MiB gaps nowhere
    assert got_mem[0][1] == 0
    covered = sum(size for _, _, size in got_mem)
    assert covered == topo.sockets * topo.mem_per_node
    for (_, b0, s0), (_, b1, _) in zip(got_mem, got_mem[1:], strict=False):
        assert b0 + s0 == b1 or (b0 + s0 <= 3 * GiB and b1 == 4 * GiB)


def test_slit_fields(case: tuple[str, Topology, Path]) -> None:
    name, topo, tmp = case
    slit = build_blob(topo).table("SLIT")
    d = iasl_decode(slit, "slit", tmp)
    check_header(d, "SLIT", slit, 1)
    n = topo.sockets
    assert _hex(d.header["Localities"]) == n
    matrix = [[int(x, 16) for x in d.header[f"Locality {i:>3}"].split()] for i in range(n)]
    assert matrix[0] == EXPECTED_SLIT_ROW0[name]
    for i in range(n):
        assert matrix[i][i] == 10
        for j in range(n):
            assert matrix[i][j] == matrix[j][i]
            if i != j:
                assert matrix[i][j] > 10
        # every row is row 0 rotated: sockets are interchangeable in full and ring
        assert matrix[i] == matrix[0][n - i :] + matrix[0][: n - i]


def test_decoder_notices_a_corrupted_checksum(tmp_path: Path) -> None:
    """Guard against a parser that would accept anything."""
    srat = bytearray(build_blob(Topology()).table("SRAT"))
    srat[9] ^= 0x55
    d = iasl_decode(bytes(srat), "bad", tmp_path)
    with pytest.raises(AssertionError, match="Incorrect checksum"):
        check_header(d, "SRAT", bytes(srat), 3)


def test_blob_file_round_trip(tmp_path: Path) -> None:
    blob = build_blob(Topology())
    path = blob.write(tmp_path / "acpi.bin")
    assert path.read_bytes() == blob.data
    with pytest.raises(ValueError, match="16-byte aligned"):
        build_blob(Topology(), base=0xE0008)
