"""Unit tests for workloads/m5ops: build, host behaviour, argument parsing, encodings.

The host is not gem5, so every op must fail cleanly (exit 1, message) rather
than die of SIGILL; the encodings are checked by disassembling the static
binary, and the function table against gem5's own header when the v24.0.0.1
source tree is present.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.cache import gem5_src_dir

REPO = Path(__file__).resolve().parents[2]
M5DIR = REPO / "workloads" / "m5ops"
# gem5's source tree: $GEM5_SRC, else the one build-gem5 uses (<cache>/gem5/src/v24.0.0.1)
GEM5_SRC = Path(os.environ.get("GEM5_SRC") or gem5_src_dir())

# Our function table, restated independently of m5ops.h: op name -> immediate.
OPS = {
    "exit": 0x21,
    "sum": 0x23,
    "reset_stats": 0x40,
    "dump_stats": 0x41,
    "dump_reset_stats": 0x42,
    "checkpoint": 0x43,
    "write_file": 0x4F,
    "read_file": 0x50,
    "work_begin": 0x5A,
    "work_end": 0x5B,
}
# gem5's macro names for the same functions.
GEM5_NAMES = {
    "exit": "M5OP_EXIT",
    "sum": "M5OP_SUM",
    "reset_stats": "M5OP_RESET_STATS",
    "dump_stats": "M5OP_DUMP_STATS",
    "dump_reset_stats": "M5OP_DUMP_RESET_STATS",
    "checkpoint": "M5OP_CHECKPOINT",
    "write_file": "M5OP_WRITE_FILE",
    "read_file": "M5OP_READ_FILE",
    "work_begin": "M5OP_WORK_BEGIN",
    "work_end": "M5OP_WORK_END",
}


@pytest.fixture(scope="session")
def m5build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("SKIPPED unit-c: gcc/make not found")
    out = tmp_path_factory.mktemp("m5build")
    proc = subprocess.run(
        ["make", "-C", str(M5DIR), f"O={out}"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning" not in (proc.stdout + proc.stderr).lower(), proc.stderr
    return out


def run_m5(build: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(build / "m5"), *args], capture_output=True, text=True, timeout=10)


def test_binary_is_static(m5build: Path) -> None:
    hdr = subprocess.run(
        ["objdump", "-h", str(m5build / "m5")], capture_output=True, text=True, check=True
    ).stdout
    assert ".interp" not in hdr, "m5 must be statically linked (no ELF interpreter)"


def test_probe_reports_not_gem5(m5build: Path) -> None:
    for spelling in ("probe", "--probe"):
        p = run_m5(m5build, spelling)
        assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)  # not a signal death
        assert p.stdout.startswith("not-gem5:")
        assert "SIGILL" in p.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["exit"],
        ["exit", "100"],
        ["resetstats"],
        ["dumpstats", "0", "0"],
        ["dumpresetstats"],
        ["checkpoint"],
        ["workbegin", "1", "2"],
        ["workend"],
        ["readfile"],
        ["sum", "1", "2", "3", "4", "5", "6"],
    ],
)
def test_ops_fail_cleanly_outside_gem5(m5build: Path, args: list[str]) -> None:
    p = run_m5(m5build, *args)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "not running under gem5" in p.stderr
    assert "nothing done" in p.stderr
    assert p.stdout == ""


def test_writefile_outside_gem5(m5build: Path, tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("hello\n")
    p = run_m5(m5build, "writefile", str(f))
    assert p.returncode == 1 and "nothing done" in p.stderr


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["exit", "abc"],
        ["exit", "-5"],
        ["exit", "1", "2"],
        ["resetstats", "1", "2", "3"],
        ["workbegin", "0x"],
        ["readfile", "1", "2"],
        ["writefile"],
        ["writefile", "a", "b", "c"],
        ["sum", "1", "2", "3", "4", "5"],
        ["probe", "extra"],
        ["--addr=nothex", "probe"],
    ],
)
def test_usage_errors(m5build: Path, args: list[str]) -> None:
    p = run_m5(m5build, *args)
    assert p.returncode == 2, (args, p.returncode, p.stderr)
    assert p.stderr.strip(), "usage errors must say what is wrong"
    # A usage error is reported before any op is attempted.
    assert "not running under gem5" not in p.stderr


def test_help_and_numbers(m5build: Path) -> None:
    p = run_m5(m5build, "--help")
    assert p.returncode == 0 and "writefile" in p.stdout
    # Hex and decimal arguments parse (then fail only because this is not gem5).
    for a in ("0x10", "4096", "0"):
        assert run_m5(m5build, "exit", a).returncode == 1


def test_addr_transport_without_devmem_is_clean(m5build: Path) -> None:
    # Either /dev/mem is absent/denied (exit 4) or the window does not answer
    # like gem5 (exit 1); never a crash.
    p = run_m5(m5build, "--addr", "probe")
    assert p.returncode in (1, 4), (p.returncode, p.stdout, p.stderr)


def _function_bytes(binary: Path) -> dict[str, bytes]:
    """Map symbol -> raw bytes of its body, from objdump -d."""
    dis = subprocess.run(
        ["objdump", "-d", str(binary)], capture_output=True, text=True, check=True
    ).stdout
    funcs: dict[str, bytearray] = {}
    cur: bytearray | None = None
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            cur = funcs.setdefault(m.group(1), bytearray())
            continue
        m = re.match(r"^\s+[0-9a-f]+:\t((?:[0-9a-f]{2} )+)", line)
        if m and cur is not None:
            cur.extend(bytes.fromhex(m.group(1).replace(" ", "")))
    return {k: bytes(v) for k, v in funcs.items()}


def _disassembly_of(binary: Path, sym: str) -> str:
    dis = subprocess.run(
        ["objdump", "-d", str(binary)], capture_output=True, text=True, check=True
    ).stdout
    m = re.search(rf"^[0-9a-f]+ <{re.escape(sym)}>:\n(.*?)(?:\n\n|\Z)", dis, re.S | re.M)
    assert m, f"symbol {sym} not found"
    return m.group(1)


def test_each_op_encodes_0f04_with_its_immediate(m5build: Path) -> None:
    funcs = _function_bytes(m5build / "m5")
    for op, imm in OPS.items():
        body = funcs.get(f"m5i_{op}_6")
        assert body is not None, f"m5i_{op}_6 missing from the binary"
        want = b"\x0f\x04" + imm.to_bytes(2, "little")
        assert body.count(b"\x0f\x04") == 1, (op, body.hex())
        assert want in body, f"{op}: expected {want.hex()} in {body.hex()}"


def test_public_ops_reach_their_instruction(m5build: Path) -> None:
    binary = m5build / "m5"
    public = {
        "m5_exit": "exit",
        "m5_reset_stats": "reset_stats",
        "m5_dump_stats": "dump_stats",
        "m5_dump_reset_stats": "dump_reset_stats",
        "m5_checkpoint": "checkpoint",
        "m5_read_file": "read_file",
        "m5_write_file": "write_file",
        "m5_work_begin": "work_begin",
        "m5_work_end": "work_end",
        "m5_sum": "sum",
    }
    for sym, op in public.items():
        body = _disassembly_of(binary, sym)
        assert f"<m5i_{op}_6>" in body, f"{sym} does not call m5i_{op}_6"
    # The probe executes the SUM op (m5_sum may be inlined into it).
    assert "<m5i_sum_6>" in _disassembly_of(binary, "m5_probe")


def test_table_matches_gem5_header() -> None:
    hdr = GEM5_SRC / "include/gem5/asm/generic/m5ops.h"
    if not hdr.exists():
        pytest.skip(f"SKIPPED m5ops-table-check: gem5 source not found at {GEM5_SRC}")
    defs = dict(
        (m.group(1), int(m.group(2), 16))
        for m in re.finditer(r"#define\s+(M5OP_\w+)\s+0x([0-9a-fA-F]+)", hdr.read_text())
    )
    for op, imm in OPS.items():
        assert defs[GEM5_NAMES[op]] == imm, op
    # And our header states the same numbers.
    ours = (M5DIR / "m5ops.h").read_text()
    for op, imm in OPS.items():
        m = re.search(rf"M5_FUNC_{op.upper()}\s*=\s*0x([0-9a-f]+)", ours)
        assert m and int(m.group(1), 16) == imm, op


def test_writefile_argument_order_matches_gem5() -> None:
    src = GEM5_SRC / "src/sim/pseudo_inst.cc"
    if not src.exists():
        pytest.skip(f"SKIPPED m5ops-abi-check: gem5 source not found at {GEM5_SRC}")
    text = src.read_text()
    m = re.search(r"writefile\(ThreadContext \*tc, ([^)]*)\)", text)
    assert m
    params = [p.strip().split()[-1] for p in m.group(1).split(",")]
    # Our m5i_write_file(vaddr, len, offset, filename_vaddr) in rdi, rsi, rdx, rcx.
    assert params == ["vaddr", "len", "offset", "filename_addr"]
    m = re.search(r"readfile\(ThreadContext \*tc, ([^)]*)\)", text)
    assert m
    assert [p.strip().split()[-1] for p in m.group(1).split(",")] == ["vaddr", "len", "offset"]
