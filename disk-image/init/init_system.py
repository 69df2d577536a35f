"""The machine under numa-lb-init: mounts, the kernel RNG, the m5 tool, the
clock, the backend (gem5 or QEMU) and power-off, plus the small /proc
readers the other phases use. Stdlib only, Python >= 3.6 (see numa-lb-init).
"""

# typing comments and %-formatting on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP031, UP035, UP045
import ctypes
import fcntl
import hashlib
import os
import struct
import subprocess
import time
from typing import Any, List, Optional, Tuple

RNDADDENTROPY = 0x40085203  # _IOW('R', 0x03, int[2])
RNG_SEED_BITS = 256  # what the kernel needs before it calls the CRNG ready
CMDLINE = "/proc/cmdline"  # the init's --host --cmdline FILE replaces it (tests)


class System:
    """Init's system calls (mixed into Init: uses self.log, self.libc, self.m5,
    self.host, self.backend)."""

    def mount(self, src: str, target: str, fstype: str, data: str = "") -> None:
        if is_mounted(target):
            return
        try:
            os.makedirs(target, exist_ok=True)
        except OSError:
            pass
        rc = -1
        if self.libc is not None:
            rc = self.libc.mount(
                src.encode(), target.encode(), fstype.encode(), 0, data.encode() or None
            )
        if rc != 0:
            err = os.strerror(ctypes.get_errno()) if self.libc is not None else "no libc"
            self.log("mount %s on %s failed: %s" % (fstype, target, err))

    def seed_kernel_rng(self) -> None:
        """Make the kernel's CRNG ready now, from a fixed seed.

        gem5 has no RDRAND and a deterministic cycle counter, so the first read
        of /dev/urandom (any Python child without PYTHONHASHSEED, os.urandom)
        would make Linux 6.1 busy-wait in try_to_generate_entropy() for 256
        jiffies, about 1 s of simulated time on a single CPU. A simulation
        needs no secrets, and a fixed seed keeps runs reproducible.
        """
        seed = hashlib.sha256(b"numa-lb-study guest rng\0" + read_file("/proc/cmdline").encode())
        data = seed.digest()
        try:
            with open("/dev/urandom", "wb") as f:
                fcntl.ioctl(f, RNDADDENTROPY, struct.pack("ii", RNG_SEED_BITS, len(data)) + data)
        except OSError as e:
            self.log("seeding the kernel RNG failed: %s" % e)

    def mount_all(self) -> None:
        self.mount("proc", "/proc", "proc")
        self.mount("sysfs", "/sys", "sysfs")
        self.mount("devtmpfs", "/dev", "devtmpfs")
        self.mount("debugfs", "/sys/kernel/debug", "debugfs")
        self.mount("tmpfs", "/run", "tmpfs", "mode=0755")
        self.mount("tmpfs", "/tmp", "tmpfs", "mode=1777")

    def m5_options(self) -> List[str]:
        # numa_lb.m5=addr: the /dev/mem transport (gem5's KVM CPU faults on 0F 04)
        return ["--addr"] if cmdline_param("numa_lb.m5") == "addr" else []

    def m5_call(self, args: List[str], timeout: float = 600) -> Tuple[int, bytes]:
        try:
            p = subprocess.Popen(
                [self.m5] + self.m5_options() + args,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            out, err = p.communicate(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.log("m5 %s: %s" % (" ".join(args), e))
            return -1, b""
        if p.returncode != 0 and args[0] != "probe":
            self.log(
                "m5 %s: exit %d %s"
                % (" ".join(args), p.returncode, err.decode(errors="replace").strip())
            )
        return p.returncode, out

    def detect_backend(self) -> str:
        if self.backend != "auto":
            return self.backend
        forced = cmdline_param("numa_lb.backend")
        if forced in ("gem5", "qemu"):
            return forced
        rc, out = self.m5_call(["probe"], timeout=60)
        return "gem5" if rc == 0 else "qemu"

    def set_clock(self, t: Any) -> None:
        if not isinstance(t, (int, float)) or self.host or time.time() > t:
            return
        if self.libc is None:
            return

        class Timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

        ts = Timespec(int(t), int((t % 1) * 1e9))
        if self.libc.clock_settime(0, ctypes.byref(ts)) == 0:
            self.log("clock set to %d" % int(t))

    def power_off(self) -> None:
        if self.backend == "gem5":
            self.log("m5 exit")
            self.m5_call(["exit"], timeout=60)
        if self.host:
            return
        self.log("power off")
        try:
            os.sync()
        except OSError:
            pass
        if self.libc is not None:
            self.libc.reboot(0x4321FEDC)  # LINUX_REBOOT_CMD_POWER_OFF
            self.libc.reboot(0x01234567)  # LINUX_REBOOT_CMD_RESTART (QEMU -no-reboot exits)
        for cmd in (["busybox", "poweroff", "-f"], ["busybox", "reboot", "-f"]):
            try:
                subprocess.call(cmd, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            with open("/proc/sysrq-trigger", "w") as f:
                f.write("o")
        except OSError:
            pass
        self.log("could not power off; exiting PID 1 (the kernel panics, panic=-1 reboots)")


def uptime() -> float:
    try:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return time.monotonic()


def read_file(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def is_mounted(target: str) -> bool:
    for line in read_file("/proc/mounts").splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[1] == target:
            return True
    return False


def cmdline_param(key: str) -> Optional[str]:
    for word in read_file(CMDLINE).split():
        if word.startswith(key + "="):
            return word.split("=", 1)[1]
    return None
