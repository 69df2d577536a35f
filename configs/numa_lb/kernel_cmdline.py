"""The guest kernel command line, for both backends, in one place.

Nothing NUMA-related is passed on the command line on purpose: the guest learns
CPUs, nodes and distances from the firmware (our ACPI tables under gem5, QEMU's
under ``-numa``) and memory from the E820 table, all generated from one
``Topology``. The command line carries what every boot needs (root, init,
console, panic), what makes a gem5 boot practical (lpj) and correct (idle=halt,
tsc=reliable), and what the init reads (``numa_lb.*``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

DEBIAN_HZ = 250  # CONFIG_HZ of Debian's 6.1 kernel config
CONSOLE = "ttyS0"
# Where disk-image/build_image.py installs our init; image.json records it too.
INIT_PATH = "/opt/numa-lb/sbin/numa-lb-init"
# Our images name their root partition by PARTUUID (image.json "root"): QEMU's
# libata probes its IDE disks in parallel, so the root disk is not always sda.
# /dev/sda is the fallback for an image without image.json (gem5 has one disk).
ROOT_DEVICE = "/dev/sda"
IMAGE_RECORD = "image.json"
BACKENDS = ("gem5", "qemu")
# QEMU: how long the init waits for the job and results disks to appear.
QEMU_DISK_WAIT_S = 30
# Every QEMU guest (study image and the kernel tier's test guest): on a loaded
# host a TCG guest can miss the IO-APIC timer check and panic ("IO-APIC +
# timer doesn't work!"): the parsec tier's boots did, 2026-11-24, with 6
# runnable processes on 2 cores.
QEMU_TIMER_ARGS = ("no_timer_check",)


def loops_per_jiffy(clock_hz: int, kernel_hz: int = DEBIAN_HZ) -> int:
    """lpj for a TSC-based delay loop: TSC ticks per jiffy.

    Passing it skips the delay-loop calibration, which costs simulated seconds.
    """
    return clock_hz // kernel_hz


def gem5_timing_args(clock_hz: int, kernel_hz: int = DEBIAN_HZ) -> list[str]:
    """What a gem5 boot needs beyond the common arguments."""
    return [
        f"earlyprintk={CONSOLE}",
        f"lpj={loops_per_jiffy(clock_hz, kernel_hz)}",
        # MWAIT idle wakes on a write to the monitored line; gem5's atomic_noncaching
        # boot bypasses Ruby, so no such write is ever seen and a remote wake-up
        # (the scheduler skips the IPI for a CPU in mwait) waits for the next
        # tick, which NO_HZ idle has stopped. HLT idle is woken by an IPI; gem5
        # has no STI interrupt shadow, so an IPI pending at the idle loop's
        # "sti; hlt" is taken before the HLT, which kernel patch 0025 steps
        # over as hardware would (else the CPU halts with work queued).
        "idle=halt",
        # gem5's TSCs all count the one simulated clock, but Linux assumes a
        # multi-socket non-Intel machine without CONSTANT_TSC is unsynchronized,
        # marks the TSC unstable and falls back to jiffies: 4 ms clock_gettime
        # resolution, useless for the guest-timed workloads.
        "tsc=reliable",
    ]


def kernel_args(clock_hz: int, kernel_hz: int = DEBIAN_HZ, console: str = CONSOLE) -> list[str]:
    """The gem5 board's default arguments, in stdlib form (the board fills ``{root_value}``)."""
    timing = gem5_timing_args(clock_hz, kernel_hz)
    return [timing[0], f"console={console}", *timing[1:], "root={root_value}"]


def image_boot(image: Path) -> tuple[str, str]:
    """(init, root) for a disk image, from the image.json beside it.

    disk-image/build_image.py records both; an image without the record (or an
    old one without "root") boots with INIT_PATH on ROOT_DEVICE.
    """
    try:
        meta = json.loads((Path(image).parent / IMAGE_RECORD).read_text())
    except (OSError, ValueError):
        return INIT_PATH, ROOT_DEVICE
    if not isinstance(meta, dict):
        return INIT_PATH, ROOT_DEVICE
    init = meta.get("init") if isinstance(meta.get("init"), str) else INIT_PATH
    root = meta.get("root") if isinstance(meta.get("root"), str) else ROOT_DEVICE
    return init, root


def guest_args(
    backend: str,
    init: str = INIT_PATH,
    *,
    root: str = ROOT_DEVICE,
    clock_hz: int | None = None,
    kernel_hz: int = DEBIAN_HZ,
    checkpoint: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """The full command line of a study boot on ``backend`` (gem5 needs ``clock_hz``)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not root or any(c.isspace() for c in root):
        raise ValueError(f"root: must be one word (a device or PARTUUID=...), got {root!r}")
    args = [f"root={root}", "rw", f"console={CONSOLE}", f"init={init}", "panic=-1"]
    if backend == "gem5":
        if clock_hz is None:
            raise ValueError("clock_hz: a gem5 boot needs the CPU clock (lpj)")
        args += gem5_timing_args(clock_hz, kernel_hz)
        args += [
            "numa_lb.backend=gem5",
            # lets the daemons turn on the kernel's context-switch marks
            # (kernel.numa_lb_m5_switch: an m5 op, an invalid opcode elsewhere)
            "numa_lb_m5=1",
            # The kernel hands unknown key=value arguments to init as environment.
            # Python's start-up reads /dev/urandom for its hash seed before the init
            # can seed the kernel's RNG, and that first read busy-waits for entropy
            # under gem5 (disk-image/init, seed_kernel_rng).
            "PYTHONHASHSEED=0",
        ]
        if checkpoint:
            args.append("numa_lb.checkpoint=1")
    else:
        if checkpoint:
            raise ValueError("checkpoint: only gem5 boots take boot checkpoints")
        args += [f"numa_lb.disk_wait={QEMU_DISK_WAIT_S}", *QEMU_TIMER_ARGS]
    return args + list(extra)
