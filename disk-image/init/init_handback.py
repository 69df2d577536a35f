"""Hand-back of the results, for numa-lb-init: collect the result files,
then under gem5 `m5 writefile` the results tar once (gem5_handback "tar", the
default) or each file (status.json last, "writefile"), or print the results
tar on the serial console; under QEMU write the tar over the results disk
(dropping the biggest non-essential files when it does not fit).
Stdlib only, Python >= 3.6 (see numa-lb-init).
"""

# typing comments and %-formatting on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP031, UP035, UP045
import json
import os
import sys
import termios
import time
from typing import Dict, List  # noqa: F401 (List: type comments)

from init_formats import (
    GEM5_HANDBACK_DEFAULT,
    GEM5_TAR,
    MAX_MEMBER,
    STATUS_FILE,
    console_encode,
    fit_results,
    pack_results,
    safe_name,
)
from init_system import uptime

PRINTK = "/proc/sys/kernel/printk"  # console log level: 1 keeps kernel lines out of the block


class HandBack:
    """Init's hand back (mixed into Init: uses self.log, self.phase, self.status,
    self.opts, self.lines, self.lock, self.backend, self.host, self.m5_call,
    self.find_disks, self.results_disk, self.outdir, self.rundir)."""

    def collect(self) -> Dict[str, bytes]:
        files = {}  # type: Dict[str, bytes]
        for d in (self.outdir, self.rundir):
            try:
                names = sorted(os.listdir(d))
            except OSError:
                continue
            for n in names:
                p = os.path.join(d, n)
                if os.path.isfile(p) and safe_name(n) and n not in files:
                    try:
                        with open(p, "rb") as f:
                            files[n] = f.read(MAX_MEMBER)
                    except OSError as e:
                        self.log("cannot read %s: %s" % (p, e))
        if not self.host:
            files["dmesg.txt"] = read_kmsg().encode()
        return files

    def hand_back(self) -> None:
        self.phase("handback")
        # CLOCK_MONOTONIC (the mix runner's run_end.monotonic_s clock; uptime
        # has 10 ms steps): where a gem5 run's time after the ROI goes
        stamps = self.status.setdefault("monotonic_s", {})
        stamps["handback"] = time.monotonic()
        files = self.collect()
        stamps["collected"] = time.monotonic()
        self.status["files"] = {n: len(b) for n, b in sorted(files.items())}
        self.status["uptime_end_s"] = round(uptime(), 3)
        self.log(
            "status %s (mixrunner exit %s), %d files, handing back via %s"
            % (self.status["status"], self.status["mixrunner_exit"], len(files), self.backend)
        )
        files["init.log"] = ("\n".join(self.lines) + "\n").encode()
        if self.backend == "gem5":
            prefix = str(self.opts.get("gem5_prefix", "guest-"))
            how = str(self.opts.get("gem5_handback", GEM5_HANDBACK_DEFAULT))
            self.status["gem5_handback"] = how
            files[STATUS_FILE] = (json.dumps(self.status, indent=1, sort_keys=True) + "\n").encode()
            names = sorted(n for n in files if n != STATUS_FILE) + [STATUS_FILE]
            failed = []  # type: List[str]
            calls = 0
            if how == "tar":  # one m5 call: status.json is inside, the tar whole or refused
                data = pack_results(files, self.status)
                path = os.path.join(self.rundir, "handback-" + GEM5_TAR)
                with open(path, "wb") as f:
                    f.write(data)
                rc, _ = self.m5_call(["writefile", path, prefix + GEM5_TAR])
                calls += 1
                if rc != 0:
                    failed.append(GEM5_TAR)
            elif how == "writefile":
                for n in names:
                    path = os.path.join(self.rundir, "handback-" + n)
                    with open(path, "wb") as f:
                        f.write(files[n])
                    rc, _ = self.m5_call(["writefile", path, prefix + n])
                    calls += 1
                    if rc != 0:
                        failed.append(n)
            if calls:  # after the hand-back: on the console only (the host keeps it)
                self.log(
                    "handed back %d files with %d m5 writefile: collect %.6f s, write %.6f s"
                    % (len(files), calls, stamps["collected"] - stamps["handback"],
                       time.monotonic() - stamps["collected"])
                )  # fmt: skip
            if how == "console" or failed:
                self.log(
                    "results on the serial console (%s)"
                    % ("as asked" if how == "console" else "m5 writefile failed for %s" % failed)
                )
                self.console_handback(files)
            return
        disk = getattr(self, "results_disk", None)
        if disk is None:
            _, disk = self.find_disks(time.time() + 5)
        if disk is None:
            self.log("no results disk: nothing handed back")
            return
        with open(disk, "r+b") as f:
            size = f.seek(0, 2)
            data = fit_results(files, self.status, size)
            f.seek(0)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self.log("wrote %d bytes of results to %s" % (len(data), disk))

    def console_handback(self, files: Dict[str, bytes]) -> None:
        text = console_encode(files, self.status)
        # keep kernel messages from interleaving with the block
        try:
            with open(PRINTK, "w") as f:
                f.write("1\n")
        except OSError:
            pass
        with self.lock:
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except OSError as e:
                self.lines.append("console hand back failed: %s" % e)
                return
            drain_console(sys.stdout)


def drain_console(stream) -> None:  # type: ignore[no-untyped-def]
    """Wait until a tty has sent what was written to it. flush() only hands the
    bytes to the tty layer: the serial driver sends them afterwards, and an
    m5 exit before it is done cuts the block (the gem5 boot test lost the end
    of a 51,200-byte results block this way, 2026-11-28). Not a tty: nothing
    to wait for."""
    try:
        termios.tcdrain(stream.fileno())
    except (OSError, ValueError, termios.error):
        pass


def read_kmsg() -> str:
    """The kernel log (/dev/kmsg records), '[seconds] message' lines."""
    lines = []
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return "cannot open /dev/kmsg: %s\n" % e
    try:
        while True:
            try:
                rec = os.read(fd, 8192).decode(errors="replace")
            except BlockingIOError:
                break
            except OSError as e:  # EPIPE: overwritten records; go on
                if e.errno == 32:
                    continue
                break
            if not rec:
                break
            head, _, msg = rec.partition(";")
            fields = head.split(",")
            ts = int(fields[2]) / 1e6 if len(fields) > 2 and fields[2].isdigit() else 0.0
            lines.append("[%12.6f] %s" % (ts, msg.split("\n", 1)[0]))
    finally:
        os.close(fd)
    return "\n".join(lines) + "\n"
