"""Kernel patch 0025 recognises the idle loop's `sti; hlt` by its bytes: an
interrupt whose return address is an 0xf4 (HLT) right after an 0xfb (STI)
inside the idle text [__cpuidle_text_start, __cpuidle_text_end) is stepped
over. That is exact only if every HLT in the idle text is such a pair; this
checks it on each built vmlinux by disassembling that range."""

import re
import subprocess

import pytest
import qemu_check

INSN = re.compile(r"^\s*([0-9a-f]+):\t((?:[0-9a-f]{2} )+)\s*\t(\S+)")


def _symbol(vmlinux: str, name: str) -> int:
    out = subprocess.run(["nm", vmlinux], capture_output=True, text=True, check=True).stdout
    for parts in map(str.split, out.splitlines()):
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise AssertionError(f"{name} not in {vmlinux}")


def idle_text(vmlinux: str) -> list[tuple[int, str, str]]:
    """(address, bytes, mnemonic) of every instruction in the idle text."""
    lo, hi = _symbol(vmlinux, "__cpuidle_text_start"), _symbol(vmlinux, "__cpuidle_text_end")
    cmd = ["objdump", "-d", f"--start-address={lo:#x}", f"--stop-address={hi:#x}", vmlinux]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [
        (int(m.group(1), 16), m.group(2).strip(), m.group(3))
        for m in map(INSN.match, out.splitlines())
        if m
    ]


@pytest.mark.parametrize("variant", ["release", "stock", "nokmlb"])
def test_every_idle_hlt_follows_an_sti(variant: str) -> None:
    vmlinux = str(qemu_check.kernel_dir(variant) / "vmlinux")
    insns = idle_text(vmlinux)
    assert len(insns) > 100, "the idle text did not disassemble"
    hlts = [i for i, (_, _, op) in enumerate(insns) if op == "hlt"]
    assert hlts, "no HLT in the idle text: native_safe_halt moved out of it"
    for i in hlts:
        addr, raw, _ = insns[i]
        prev_addr, prev_raw, prev_op = insns[i - 1]
        assert (prev_op, prev_raw, raw) == ("sti", "fb", "f4"), hex(addr)
        assert prev_addr + 1 == addr, hex(addr)
    # no other instruction starts with the HLT opcode byte
    assert [i for i, (_, raw, _) in enumerate(insns) if raw.startswith("f4")] == hlts
