"""One kernel command line for both backends (configs/numa_lb/kernel_cmdline.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "configs"))
sys.path.insert(0, str(ROOT / "disk-image"))

from numa_lb.kernel_cmdline import INIT_PATH, guest_args  # noqa: E402
from numa_lb.topology import Topology  # noqa: E402

COMMON = ["root=/dev/sda", "rw", "console=ttyS0", f"init={INIT_PATH}", "panic=-1"]


def test_both_backends_share_root_init_console_and_panic() -> None:
    topo = Topology()
    gem5 = guest_args("gem5", clock_hz=topo.cpu_clock_hz)
    qemu = guest_args("qemu")
    assert gem5[: len(COMMON)] == COMMON
    assert qemu[: len(COMMON)] == COMMON
    # gem5 only: the delay-loop shortcut, HLT idle, the TSC, the init's seeds
    assert "lpj=11200000" in gem5 and "idle=halt" in gem5 and "tsc=reliable" in gem5
    assert "numa_lb.backend=gem5" in gem5 and "PYTHONHASHSEED=0" in gem5
    assert not any(a.startswith("lpj=") for a in qemu)
    assert "numa_lb.disk_wait=30" in qemu
    # qemu only: a loaded host must not make the TCG guest fail the timer check
    assert "no_timer_check" in qemu and "no_timer_check" not in gem5
    # the gem5 timing arguments are the ones the board's stdlib default carries
    board_default = [a for a in topo.kernel_args() if not a.startswith(("root=", "console="))]
    assert set(board_default) <= set(gem5)


def test_checkpoint_flag_and_extras() -> None:
    args = guest_args("gem5", "/x/init", clock_hz=2_000_000_000, checkpoint=True, extra=["a=1"])
    assert "init=/x/init" in args and args[-2:] == ["numa_lb.checkpoint=1", "a=1"]
    assert "numa_lb.checkpoint=1" not in guest_args("gem5", clock_hz=2_000_000_000)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"backend": "kvm"}, "backend"),
        ({"backend": "gem5"}, "clock_hz"),
        ({"backend": "qemu", "checkpoint": True}, "checkpoint"),
    ],
)
def test_bad_requests_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        guest_args(**kwargs)


def test_the_image_records_the_qemu_command_line() -> None:
    import build_image  # noqa: PLC0415
    import qemu_boot  # noqa: PLC0415

    assert build_image.INIT_PATH == INIT_PATH == qemu_boot.INIT_PATH
    assert qemu_boot.kernel_cmdline("x=1").split() == [*guest_args("qemu"), "x=1"]


def test_init_and_root_come_from_the_image_record(tmp_path: Path) -> None:
    from numa_lb.kernel_cmdline import ROOT_DEVICE, image_boot  # noqa: PLC0415

    img = tmp_path / "rootfs.img"
    assert image_boot(img) == (INIT_PATH, ROOT_DEVICE)  # no image.json: the defaults
    (tmp_path / "image.json").write_text('{"init": "/x/init", "root": "PARTUUID=0a0b0c0d-01"}')
    assert image_boot(img) == ("/x/init", "PARTUUID=0a0b0c0d-01")
    args = guest_args("gem5", "/x/init", root="PARTUUID=0a0b0c0d-01", clock_hz=2_000_000_000)
    assert args[0] == "root=PARTUUID=0a0b0c0d-01"
    for bad in ("[1]", "{broken", '{"root": 7}'):
        (tmp_path / "image.json").write_text(bad)
        assert image_boot(img)[1] == ROOT_DEVICE
    with pytest.raises(ValueError, match="root"):
        guest_args("qemu", root="/dev/sda init=/bin/sh")
