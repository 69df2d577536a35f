"""Job in, for numa-lb-init: under gem5 `m5 readfile` (after an optional
checkpoint), under QEMU the raw disk whose first tar member is the job
marker, found by content among the disks that do not hold the root
filesystem. Stdlib only, Python >= 3.6 (see numa-lb-init).
"""

# typing comments and %-formatting on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP031, UP035, UP045
import io
import os
import subprocess
import sys
import time
import traceback
from typing import IO, Any, Dict, List, Optional, Tuple

from init_formats import JOB_MARKER, RESULTS_EMPTY, JobError, unpack_job
from init_system import cmdline_param, read_file


class JobIn:
    """Init's job reading (mixed into Init: uses self.a, self.prefix, self.log, self.m5_call,
    self.backend, self.status, self.prestart_runner; sets self.results_disk under QEMU)."""

    def guest_disks(self) -> List[str]:
        """Whole disks that do not hold the root filesystem."""
        if self.a.disk:
            return list(self.a.disk)
        root = os.stat("/").st_dev
        out = []
        try:
            names = sorted(os.listdir("/sys/block"))
        except OSError:
            return out
        for name in names:
            if name.startswith(("loop", "ram", "sr", "zram", "dm-", "md", "nbd")):
                continue
            base = "/sys/block/" + name
            devs = [read_file(base + "/dev")]
            devs += [
                read_file(base + "/" + s + "/dev") for s in os.listdir(base) if s.startswith(name)
            ]
            if any(dev_t(d) == root for d in devs if d):
                continue
            out.append("/dev/" + name)
        return out

    def find_disks(self, deadline: float) -> Tuple[Optional[str], Optional[str]]:
        job_disk = res_disk = None
        while True:
            for dev in self.guest_disks():
                name = first_member(dev)
                if name == JOB_MARKER:
                    job_disk = dev
                elif name == RESULTS_EMPTY:
                    res_disk = dev
            if (job_disk and res_disk) or time.time() > deadline:
                return job_disk, res_disk
            time.sleep(0.2)

    def read_job(self) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        if self.backend == "gem5":
            if cmdline_param("numa_lb.checkpoint") == "1":
                self.vary_boot(cmdline_param("numa_lb.boot_variant"))
                self.warm_page_cache()
                try:  # the runner waits through the checkpoint (init_run.py)
                    self.prestart_runner()
                except Exception as e:  # noqa: BLE001 - an optimisation, never fatal
                    self.status["prestart"] = {"used": False, "error": "%s: %s" % (
                        type(e).__name__, e)}  # fmt: skip
                    self.log("prestart failed: %s" % traceback.format_exc())
                self.log("m5 checkpoint")
                self.m5_call(["checkpoint"])
            self.log("m5 readfile")
            rc, data = self.m5_call(["readfile"])
            if rc != 0 or not data:
                raise JobError("m5 readfile returned no job (rc %d)" % rc)
        else:
            wait = self.a.disk_wait
            if wait is None:
                wait = float(cmdline_param("numa_lb.disk_wait") or 30)
            job_disk, self.results_disk = self.find_disks(time.time() + wait)
            self.log("job disk %s, results disk %s" % (job_disk, self.results_disk))
            if job_disk is None:
                raise JobError("no job disk (a disk whose first tar member is %s)" % JOB_MARKER)
            with open(job_disk, "rb") as f:
                data = read_tar_stream(f)
        self.status["job_bytes"] = len(data)
        return unpack_job(data)

    def vary_boot(self, text: Optional[str]) -> None:
        """Make boot checkpoint N (numa_lb.boot_variant=N, N > 0) differ from the
        others of its kernel: gem5 boots are deterministic, so without this
        every checkpoint would be the same state. N-dependent work before the
        m5 checkpoint moves what a restored run starts from: the simulated
        time and so the phase of the timer tick and the balancer's intervals
        against the job's start (N x 13.7 ms of sleep), the page allocator's
        free lists (N x 3 MiB touched by this process, then freed: the job's
        pages come from other frames, so other cache sets) and the next pids
        (N x 7 short children). Variant 0 (or none) does nothing."""
        try:
            n = int(text or 0)
        except ValueError:
            self.log("boot variant %r is not an integer: ignored" % text)
            return
        if n <= 0:
            return
        t0 = time.time()
        block = bytearray(n * 3 << 20)  # zero-filled: every page touched
        for i in range(0, len(block), 4096):
            block[i] = i & 0xFF
        del block
        for _ in range(n * 7):
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        time.sleep(n * 0.0137)
        self.status["boot_variant"] = n
        self.log("boot variant %d: %d MiB touched, %d children, %.1f ms slept; %.3f s"
                 % (n, 3 * n, 7 * n, 13.7 * n, time.time() - t0))  # fmt: skip

    def warm_page_cache(self) -> None:
        """Before the boot checkpoint: read what every run reads first (our
        binaries, the mix runner's modules through one `mixrunner.py --help`),
        so the checkpoint's memory holds them in the page cache. A restored run
        then starts its mix runner without disk I/O and its atomic phase
        before the ROI shrinks for every run that shares the checkpoint.
        Best effort: a failure is logged, never fatal."""
        t0 = time.time()
        nbytes = 0
        for sub in ("bin", "lib"):
            top = os.path.join(self.prefix, sub)
            for dirpath, _dirs, files in os.walk(top):
                for name in sorted(files):
                    try:
                        with open(os.path.join(dirpath, name), "rb") as f:
                            while True:
                                chunk = f.read(1 << 20)
                                if not chunk:
                                    break
                                nbytes += len(chunk)
                    except OSError as e:
                        self.log("warm: %s: %s" % (name, e))
        python = getattr(self.a, "python", None) or sys.executable or "/usr/bin/python3"
        runner = os.path.join(self.prefix, "bin", "mixrunner.py")
        try:
            rc = subprocess.call(
                [python, runner, "--help"], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
                env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as e:
            rc = "%s" % e
        self.log(
            "warm: %d bytes read, mixrunner --help: %s, %.2f s" % (nbytes, rc, time.time() - t0)
        )


def dev_t(text: str) -> int:
    major, minor = text.strip().split(":")
    return os.makedev(int(major), int(minor))


def first_member(dev: str) -> Optional[str]:
    """Name of the first tar member on DEV (one 512-byte block), None if not a tar."""
    try:
        with open(dev, "rb") as f:
            block = f.read(512)
    except OSError:
        return None
    if len(block) < 512 or block[257:262] != b"ustar":
        return None
    return block[:100].split(b"\0", 1)[0].decode(errors="replace")


def read_tar_stream(f: IO[bytes], limit: int = 64 << 20) -> bytes:
    """The bytes of a tar archive at the start of a raw disk, up to its end marker."""
    out = io.BytesIO()
    zeros = 0
    while out.tell() < limit:
        block = f.read(512)
        if len(block) < 512:
            break
        out.write(block)
        if block == bytes(512):
            zeros += 1
            if zeros == 2:
                break
            continue
        zeros = 0
        if block[257:262] == b"ustar":
            size = int(block[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
            data = f.read((size + 511) // 512 * 512)
            out.write(data)
    return out.getvalue()
