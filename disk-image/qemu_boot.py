#!/usr/bin/env python3
"""QEMU backend primitive: boot our kernel on our image, hand in a job, get the results.

    disk-image/qemu_boot.py run JOB.json OUTDIR [--kernel BZIMAGE] [--image IMG]
        [--nodes 4 --cpus-per-node 2 --mem-per-node 256 --distance 16]
        [--timeout S] [--init-option KEY=JSON]...

Python: run(kernel, image, job, out_dir, topology, timeout) -> RunResult.

qemu-system-x86_64 under TCG only (KVM guests hang on these machines), the
NUMA machine from the configs' Topology (configs/numa_lb/qemu.py: `-numa node/dist`
from the same object that builds the gem5 machine and its ACPI tables),
PIIX IDE disks on `-M pc`:

    ide index 0  root:    a qcow2 overlay on the cached raw image (never written)
    ide index 1  job:     raw, a tar made by numa-lb-init's pack_job()
    ide index 2  results: raw, pre-sized, a blank marker tar the guest overwrites

The guest init finds the job and results disks by content, runs the mix,
writes the results tar and powers off; QEMU runs with -no-reboot so power
off, reboot and panic (panic=-1) all end the process.  OUTDIR receives the
result files (status.json, results.jsonl, init.log, dmesg.txt, ...),
console.log (the serial console, ttyS0) and host.json (this record).
No job field ever reaches a shell: everything is argv lists and files.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "kernel-patches"))
sys.path.insert(0, str(ROOT / "configs"))
sys.path.insert(0, str(ROOT / "workloads"))
sys.path.insert(0, str(HERE))
from guest_io import init, parse_init_option  # noqa: E402 - numa-lb-init: job/results formats
from numa_lb.kernel_cmdline import INIT_PATH, ROOT_DEVICE, guest_args, image_boot  # noqa: E402
from numa_lb.qemu import guest_topology, qemu_args  # noqa: E402
from numa_lb.topology import Topology  # noqa: E402 - the one machine description
from qemu_check import SPLAT  # noqa: E402 - sibling tool, not a package

STATUSES = ("ok", "guest-error", "timeout", "crash")
BOOT_MARGIN_S = 300.0  # boot + hand back under TCG, on top of the guest watchdog


@dataclass
class RunResult:
    status: str  # ok | guest-error | timeout | crash
    exit_code: int | None  # the mix runner's (None: it never finished)
    qemu_returncode: int | None  # None: killed by the host timeout
    seconds: float
    out_dir: Path
    files: list[str] = field(default_factory=list)
    error: str | None = None
    log_tail: str = ""
    guest_status: dict[str, Any] | None = None
    splats: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        d["out_dir"] = str(self.out_dir)
        return d


def kernel_cmdline(extra: str = "", image: Path | None = None) -> str:
    """The QEMU boot's command line (configs/numa_lb/kernel_cmdline.py, shared with gem5);
    init and root (PARTUUID) come from the image's image.json when there is one."""
    init_path, root = image_boot(image) if image is not None else (INIT_PATH, ROOT_DEVICE)
    return " ".join(guest_args("qemu", init_path, root=root, extra=extra.split()))


def qemu_command(
    kernel: Path,
    root: Path,
    job_disk: Path,
    results_disk: Path,
    topo: Topology,
    append: str,
) -> list[str]:
    def drive(path: Path, fmt: str, index: int) -> list[str]:
        if "," in str(path):  # QEMU option syntax; no shell is involved
            raise ValueError(f"QEMU -drive paths must not contain commas: {path}")
        return ["-drive", f"file={path},format={fmt},if=ide,index={index},media=disk"]

    return [
        "qemu-system-x86_64",
        "-M", "pc",
        "-accel", "tcg,thread=multi",
        "-cpu", "max",
        *qemu_args(topo),
        "-nodefaults",
        "-no-reboot",
        "-display", "none",
        "-serial", "stdio",
        "-kernel", str(kernel),
        "-append", append,
        *drive(root, "qcow2", 0),
        *drive(job_disk, "raw", 1),
        *drive(results_disk, "raw", 2),
    ]  # fmt: skip


def validate_job(job: dict[str, Any]) -> None:
    """The mix runner's own validation, on the host, before a minute of booting."""
    import mixrunner  # noqa: PLC0415 - workloads/ is on sys.path

    try:
        mixrunner.load_job(job)
    except mixrunner.JobError as e:
        raise ValueError(f"invalid job: {e}") from e


def _follow(pipe: Any, console: Path, tail: list[str], echo: bool) -> None:
    with open(console, "wb") as f:
        for raw in iter(pipe.readline, b""):
            f.write(raw)
            f.flush()
            line = raw.decode(errors="replace").rstrip()
            tail.append(line)
            if len(tail) > 400:
                del tail[:200]
            if echo and "numa-lb-init:" in line:
                print(f"qemu_boot: guest: {line}", flush=True)


def run(
    kernel: Path,
    image: Path,
    job: dict[str, Any],
    out_dir: Path,
    topology: Topology | None = None,
    timeout: float | None = None,
    init_options: dict[str, Any] | None = None,
    extra_append: str = "",
    results_mib: int = 64,
    echo: bool = True,
    keep_work: bool = False,
    log_path: Path | None = None,
) -> RunResult:
    """Boot KERNEL (bzImage) on IMAGE (raw, used read-only through a qcow2 overlay),
    run JOB (a mix runner job) and put the result files + console.log into OUT_DIR.
    TOPOLOGY: the configs' Topology (default: numa_lb.qemu.guest_topology(), 4 nodes x
    2 vCPUs, 256 MiB, SLIT 16).  TIMEOUT (host seconds) defaults to the guest watchdog +
    BOOT_MARGIN_S.  LOG_PATH: also copy console.log there."""
    topo = topology or guest_topology()
    slit = topo.slit()
    validate_job(job)
    opts = {"clock_unix": int(time.time())}
    opts.update(init_options or {})
    watchdog = init.default_watchdog(job, opts)
    timeout = float(timeout) if timeout is not None else watchdog + BOOT_MARGIN_S
    if not shutil.which("qemu-system-x86_64"):
        raise RuntimeError("qemu-system-x86_64 not found (apt-get install qemu-system-x86)")
    kernel, image = Path(kernel).resolve(), Path(image).resolve()
    for p in (kernel, image):
        if not p.is_file():
            raise FileNotFoundError(p)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in [*out_dir.iterdir()]:
        if stale.is_file() and (init.safe_name(stale.name) or stale.name == "console.log"):
            stale.unlink()
    work = Path(tempfile.mkdtemp(prefix=".qemu-work-", dir=out_dir))
    t0 = time.monotonic()
    try:
        root = work / "root.qcow2"
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image), "-F", "raw", str(root)],
            check=True,
            capture_output=True,
        )
        job_disk = work / "job.img"
        data = init.pack_job(job, opts)
        job_disk.write_bytes(data + bytes(-len(data) % (1 << 20)))
        results_disk = work / "results.img"
        results_disk.write_bytes(init.blank_results(65536))
        with open(results_disk, "r+b") as f:
            f.truncate(results_mib << 20)  # sparse
        append = kernel_cmdline(extra_append, image)
        cmd = qemu_command(kernel, root, job_disk, results_disk, topo, append)
        console = out_dir / "console.log"
        if echo:
            print(
                f"qemu_boot: {topo.sockets} nodes x {topo.cores_per_socket} vCPUs, "
                f"{topo.mem_per_node >> 20} MiB/node, SLIT {slit[0][1:] if len(slit) > 1 else []}; "
                f"timeout {timeout:.0f} s; job {job.get('run_id', '')!r}",
                flush=True,
            )
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        tail: list[str] = []
        reader = threading.Thread(target=_follow, args=(proc.stdout, console, tail, echo))
        reader.start()
        timed_out = False
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            proc.wait()
            rc = None
        reader.join(30)
        seconds = time.monotonic() - t0
        log_tail = "\n".join(tail[-60:])
        res = RunResult(
            status="crash", exit_code=None, qemu_returncode=rc, seconds=round(seconds, 1),
            out_dir=out_dir, log_tail=log_tail,
        )  # fmt: skip
        res.splats = [ln for ln in tail if SPLAT.search(ln)][:20]
        files: dict[str, bytes] | None = None
        try:
            with open(results_disk, "rb") as f:
                files = init.read_results(f)
        except init.JobError as e:
            res.error = f"results disk unreadable: {e}"
        if files is not None:
            for name, blob in files.items():
                (out_dir / name).write_bytes(blob)
            res.files = sorted(files)
            gs = json.loads(files[init.STATUS_FILE])
            res.guest_status = gs
            res.exit_code = gs.get("mixrunner_exit")
            res.error = gs.get("error")
            if gs.get("status") == "ok":
                res.status = "ok"
            elif gs.get("status") == "watchdog":
                res.status = "timeout"
            else:
                res.status = "guest-error"
        if timed_out:
            res.status = "timeout"
            res.error = f"host timeout after {timeout:.0f} s" + (
                f"; {res.error}" if res.error else ""
            )
        elif files is None and res.error is None:
            panic = next((ln for ln in tail if "Kernel panic" in ln), None)
            res.error = "the guest handed back no results" + (
                f" ({panic.strip()})" if panic else ""
            )
            if rc not in (0, None):
                res.error += f"; qemu exit {rc}"
        host = {
            "backend": "qemu",
            "fidelity": "functional only: QEMU TCG has no memory-latency model",
            "result": res.record(),
            "kernel": str(kernel),
            "image": str(image),
            "append": append,
            "topology": {
                "nodes": topo.sockets,
                "cpus_per_node": topo.cores_per_socket,
                "mem_per_node_mib": topo.mem_per_node >> 20,
                "inter_socket": topo.inter_socket.value,
            },
            "slit": slit,
            "command": cmd,
            "init_options": opts,
            "timeout_s": timeout,
        }
        if log_path is not None:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(console, log_path)
        (out_dir / "host.json").write_text(json.dumps(host, indent=1, default=str) + "\n")
        if echo:
            print(f"qemu_boot: {res.status} in {res.seconds:.0f} s: {res.error or ''}", flush=True)
        return res
    finally:
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="boot, run one job, collect the results")
    r.add_argument("job", type=Path, help="mix runner job (JSON)")
    r.add_argument("out", type=Path, help="output directory")
    r.add_argument("--kernel", type=Path, help="bzImage (default: kbuild release build)")
    r.add_argument("--image", type=Path, help="raw image (default: build_image build)")
    r.add_argument("--nodes", type=int, default=4)
    r.add_argument("--cpus-per-node", type=int, default=2)
    r.add_argument("--mem-per-node", type=int, default=256, help="MiB")
    r.add_argument("--distance", type=int, default=16, help="SLIT remote distance")
    r.add_argument("--timeout", type=float)
    r.add_argument("--init-option", type=parse_init_option, action="append", default=[])
    r.add_argument("--keep-work", action="store_true")
    a = ap.parse_args(argv)
    job = json.loads(a.job.read_text())
    if a.kernel is None:
        import kbuild  # noqa: PLC0415

        a.kernel = kbuild.build("release", None) / "bzImage"
    if a.image is None:
        sys.path.insert(0, str(HERE))
        import build_image  # noqa: PLC0415

        a.image = build_image.build()
    topo = guest_topology(a.nodes, a.cpus_per_node, a.mem_per_node, a.distance)
    res = run(
        a.kernel, a.image, job, a.out, topo, a.timeout, dict(a.init_option), keep_work=a.keep_work
    )
    print(json.dumps({k: v for k, v in res.record().items() if k != "log_tail"}, indent=1))
    return 0 if res.status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
