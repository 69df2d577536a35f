"""Backend adapters: how one run is executed on qemu or gem5.

The model (spec, points, run ids) knows nothing of backends; a backend turns one
run directory into outputs. Both are called by the worker (``worker.py``) in a
child process of their own (own process group) so a timeout or Ctrl-C can kill
everything a backend started.

* ``qemu``: ``disk-image/qemu_boot.py``'s ``run(kernel, image, job, out_dir,
  topology, timeout)`` (owned by the disk-image engineer). Functional emulation
  under TCG: its timing is never architectural performance.
* ``gem5``: ``gem5.opt --outdir=<run>/m5out configs/<script>.py <args>``; the
  run script belongs to configs/. Arguments are built from the point only, as a
  list (no shell); ``gem5.args`` from the spec are appended verbatim.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from analysis.cache import default_gem5

from . import provenance as pv
from . import staging
from .atomic import write_text_atomic
from .point import Provenance, SweepPoint, canonical_json
from .point import boot_variant as boot_variant_of
from .spec import topology_for

ROOT = Path(__file__).resolve().parents[2]
QEMU_BOOT = ROOT / "disk-image" / "qemu_boot.py"

QEMU_CAVEAT = (
    "qemu backend: functional emulation (TCG) with -numa nodes and SLIT distances only; "
    "memory latency is not modelled, so elapsed times, speedups and improvements are NOT "
    "architectural performance and must not be read as NUMA results. Counts (migrations, "
    "page faults, page migrations, kMLB placement) are the guest kernel's own and are "
    "meaningful as behaviour, not as timing."
)
GEM5_CAVEAT = (
    "gem5 backend (MOESI_hammer): no shared L3 (the Opteron 6320's 8 MiB per socket), so "
    "the LLC is the private L2; L1/L2 exclusive; 3-hop owner forwarding; NUMA factor from "
    "the link latency (first-order model unless a calibration table is given)."
)
CAVEATS = {"qemu": QEMU_CAVEAT, "gem5": GEM5_CAVEAT}


@dataclass
class Artifacts:
    """Resolved inputs of a sweep: ids (hashed into run ids) and paths (not hashed)."""

    provenance: Provenance  # kernel_build_id: the spec's kernel variant
    paths: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    # every kernel variant the sweep boots -> build_id, kernel_dir, kernel
    kernels: dict[str, dict[str, str]] = field(default_factory=dict)

    def kernel_ids(self) -> dict[str, str]:
        return {v: k["build_id"] for v, k in self.kernels.items()}

    def provenance_for(self, variant: str) -> Provenance:
        """The provenance of a run that boots kernel @variant."""
        k = self.kernels.get(variant)
        return (
            self.provenance
            if k is None
            else replace(self.provenance, kernel_build_id=k["build_id"])
        )

    def paths_for(self, variant: str) -> dict[str, str]:
        """The paths of a run that boots kernel @variant."""
        k = self.kernels.get(variant)
        if k is None:
            return self.paths
        return {**self.paths, "kernel_dir": k["kernel_dir"], "kernel": k["kernel"]}


@dataclass
class Outcome:
    """What a backend reports; the worker turns it into a final state."""

    exit_code: int | None
    timed_out: bool = False
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "error": self.error,
            "details": self.details,
        }


def resolve_backend(
    requested: str, gem5_flag: str | None, origin: str = "the spec"
) -> tuple[str, str]:
    """(backend, reason). auto = gem5 when a gem5 binary is configured (--gem5,
    $GEM5, or a finished build in the cache: analysis/cache.py), else qemu.

    @origin names who set sweep.backend: "preset quick", "spec FILE",
    "--backend", "--set sweep.backend"."""
    if requested in ("qemu", "gem5"):
        return requested, f'requested by {origin}: sweep.backend = "{requested}"'
    gem5, how = default_gem5(gem5_flag)
    if gem5 and Path(gem5).is_file() and os.access(gem5, os.X_OK):
        return "gem5", f"auto: gem5 configured ({gem5}, from {how})"
    why = how if gem5 is None else f"{how} {gem5} is not an executable file"
    return "qemu", f"auto: no gem5 configured ({why})"


def announce(backend: str, art: Artifacts | None) -> str:
    if backend == "qemu":
        ver = art.provenance.tool_version if art else ""
        return (
            f"backend: qemu ({ver}) -- functional emulation: "
            "timing is NOT architectural performance"
        )
    ver = art.provenance.tool_version if art else "?"
    path = art.paths.get("gem5", "") if art else ""
    return f"backend: gem5 {ver} ({path}) -- timing model MOESI_hammer"


# ----------------------------------------------------------------- prerequisites
def prepare(
    backend: str,
    spec_variant: str,
    build: bool,
    gem5_flag: str | None,
    require: bool = True,
    extra_variants: tuple[str, ...] = (),
) -> Artifacts:
    """Find (and with build=True, build) the kernels and image; hash what matters.

    @spec_variant is the sweep's kernel; @extra_variants the others its points
    boot (``stock`` for the stock policy), found or built the same way.

    Raises PrerequisiteError with a message saying what is missing and how to
    get it. With build=False nothing is built; ids still come out (from the
    artifact dir name / image path) so a dry run can list run ids.
    """
    paths: dict[str, str] = {}
    info: dict[str, Any] = {}
    if backend == "qemu":
        tool_version = pv.qemu_version()
        if not QEMU_BOOT.exists():
            raise pv.PrerequisiteError(
                "qemu backend: disk-image/qemu_boot.py does not exist yet (the QEMU boot "
                "primitive is being written by the disk-image engineer)"
            )
    elif backend == "gem5":
        g, how = default_gem5(gem5_flag)
        if not g:
            raise pv.PrerequisiteError(
                "gem5 backend: no gem5 binary; build one into the cache with "
                "`./run_all.py build-gem5`, set GEM5=/path/to/gem5.fast or pass --gem5 "
                f"(gem5 v24.0.0.1, X86, Ruby MOESI_hammer); {how}"
            )
        gp = Path(g)
        if not (gp.is_file() and os.access(gp, os.X_OK)):
            raise pv.PrerequisiteError(f"gem5 backend: {gp} is not an executable file")
        tool_version, opts = pv.gem5_version(gp)
        tool_version = f"gem5 version {tool_version}"
        info["gem5_build_options"] = {
            k: opts[k] for k in sorted(opts) if "PROTOCOL" in k or "ISA" in k
        }
        paths["gem5"] = str(gp.resolve())
        info["gem5_chosen_by"] = how
        # build-gem5's record of how this binary was built (None: built by hand)
        info["gem5_build"] = pv.gem5_build_provenance(gp)
    else:
        raise ValueError(backend)

    kernels: dict[str, dict[str, str]] = {}
    for variant in (spec_variant, *[v for v in extra_variants if v != spec_variant]):
        kdir = pv.kernel_artifacts(variant, build)
        kernels[variant] = {
            "build_id": pv.kernel_build_id(kdir, need_built=require),
            "kernel_dir": str(kdir),
            "kernel": str(kdir / ("bzImage" if backend == "qemu" else "vmlinux")),
        }
    kid = kernels[spec_variant]["build_id"]
    paths["kernel_dir"] = kernels[spec_variant]["kernel_dir"]
    paths["kernel"] = kernels[spec_variant]["kernel"]
    img = pv.image_path(build, need_built=require)
    iid = pv.image_id(img, need_built=require)
    paths["image"] = str(img)
    if not require:  # a dry run: say what a real run would build first
        info["would_build"] = [
            need
            for variant, k in kernels.items()
            for need in would_build(Path(k["kernel_dir"]), img, variant)
        ]
        info["would_build"] = list(dict.fromkeys(info["would_build"]))
    prov = Provenance(
        backend=backend,
        kernel_build_id=kid,
        image_id=iid,
        code_revision=pv.code_revision(backend),
        tool_version=tool_version,
        gem5_sha256=(
            pv.cached_sha256(Path(paths["gem5"]), store=require) if backend == "gem5" else None
        ),
    )
    return Artifacts(prov, paths, info, kernels)


def would_build(kernel_dir: Path, image: Path, variant: str) -> list[str]:
    """What a real run would build first (a dry run lists it and builds nothing)."""
    need = []
    if not (kernel_dir / "build.json").exists():
        need.append(f"kernel: `kernel-patches/kbuild.py build --variant {variant}` -> {kernel_dir}")
    if not image.is_file():
        need.append(f"disk image: `disk-image/build_image.py build` (image {image.name})")
    return need


# ------------------------------------------------------------------------ qemu
def load_qemu_boot() -> ModuleType:
    spec = importlib.util.spec_from_file_location("qemu_boot", QEMU_BOOT)
    if spec is None or spec.loader is None:
        raise pv.PrerequisiteError(f"cannot load {QEMU_BOOT}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["qemu_boot"] = mod  # dataclasses look their module up while executing it
    spec.loader.exec_module(mod)
    return mod


def run_qemu(rec: dict[str, Any], run_dir: Path, timeout_s: float) -> Outcome:
    staging.check_inputs(rec)  # on a shared path, staged by the submitting host
    point = SweepPoint.from_dict(rec["point"])
    lat_key = "numa_factor" if point.numa_factor is not None else "link_latency"
    lat = point.numa_factor if point.numa_factor is not None else point.link_latency
    topo = topology_for(point.sockets, point.cores_per_socket, lat_key, lat, point.machine)
    job = json.loads((run_dir / "job.json").read_text())
    out = run_dir / "guest"
    out.mkdir(parents=True, exist_ok=True)
    result = load_qemu_boot().run(
        kernel=Path(rec["paths"]["kernel"]),
        image=Path(rec["paths"]["image"]),
        job=job,
        out_dir=out,
        topology=topo,
        timeout=timeout_s,
        log_path=run_dir / "logs" / "console.log",
    )
    return outcome_from_qemu(result)


def outcome_from_qemu(result: Any) -> Outcome:
    """qemu_boot.RunResult -> Outcome; the whole record is kept as details."""
    ok = result.status == "ok"
    if result.exit_code is not None:
        exit_code = result.exit_code
    else:
        exit_code = 0 if ok else 1
    err = None if ok else (result.error or f"qemu_boot status {result.status!r}")
    return Outcome(
        exit_code=int(exit_code),
        timed_out=result.status == "timeout",
        error=err,
        details=result.record(),
    )


# ------------------------------------------------------------------------ gem5
def gem5_args(
    point: SweepPoint, paths: dict[str, str], run_dir: Path, with_job: bool = True
) -> list[str]:
    """Arguments after the script (the configs/ run script's command line).

    A boot that only takes the checkpoint gets no job: the guest stops at its
    m5 checkpoint, before it reads one."""
    m = point.machine
    a = [
        "--sockets", str(point.sockets),
        "--cores-per-socket", str(point.cores_per_socket),
        "--mem-per-node", m["mem_per_node"],
        "--cpu-clock", m["cpu_clock"],
        "--memory-type", m["memory_type"],
        "--inter-socket", m["inter_socket"],
    ]  # fmt: skip
    if point.numa_factor is not None:
        a += ["--numa-factor", repr(point.numa_factor)]
    else:
        a += ["--link-latency", str(point.link_latency)]
    if m.get("slit_remote_distance") is not None:
        a += ["--slit-remote-distance", str(m["slit_remote_distance"])]
    if m.get("link_bandwidth") is not None:
        a += ["--link-bandwidth", str(m["link_bandwidth"])]
    if not m.get("probe_filter", True):
        a.append("--no-probe-filter")
    if m.get("l2_includes_l3_share"):
        a.append("--l2-includes-l3-share")
    cpu = point.cpu or {}
    a += ["--cpu-boot", cpu.get("boot", "atomic"), "--cpu-roi", cpu.get("roi", "timing")]
    a += ["--kernel", paths["kernel"], "--disk-image", paths["image"]]
    if with_job:  # a boot has no ROI, so no post-ROI CPU; points made before
        # post_roi existed ran the hand-back on the ROI CPU
        a += ["--job", str(run_dir / "job.json"), "--cpu-post-roi", cpu.get("post_roi", "roi")]
    a += ["--seed", str(point.repeat)]
    if not with_job and boot_variant(point):  # only the boot reads it (the init, before
        # its m5 checkpoint); a restore does not boot, so its command line is moot
        a += ["--kernel-arg", f"numa_lb.boot_variant={boot_variant(point)}"]
    return a


def boot_variant(point: SweepPoint) -> int:
    """Which of the machine's boot checkpoints a point restores (point.boot_variant)."""
    return boot_variant_of(point.repeat, point.machine)


def gem5_command(
    rec: dict[str, Any],
    run_dir: Path,
    checkpoint: Path | None = None,
    take_checkpoint: bool = False,
) -> list[str]:
    point = SweepPoint.from_dict(rec["point"])
    g5 = point.gem5 or {}
    script = ROOT / "configs" / g5.get("script", "numa_run.py")
    outdir = run_dir / "m5out"
    cmd = [rec["paths"]["gem5"], f"--outdir={outdir}", str(script)]
    cmd += gem5_args(point, rec["paths"], run_dir, with_job=not take_checkpoint)
    if checkpoint is not None:
        cmd += ["--take-checkpoint" if take_checkpoint else "--restore-checkpoint", str(checkpoint)]
    cmd += list(g5.get("args", []))
    return cmd


CALIBRATION_DIR = "numa_lb/calibration"


def calibration_files() -> tuple[str, ...]:
    """configs/-relative paths of the calibration tables (left out of checkpoint keys)."""
    base = ROOT / "configs"
    return tuple(str(p.relative_to(base)) for p in sorted((base / CALIBRATION_DIR).glob("*")))


def checkpoint_key(rec: dict[str, Any]) -> str:
    """One boot checkpoint per (boot topology, kernel, image, gem5, configs code).

    The calibration tables are left out of the configs hash: they only turn a
    factor into a link latency, which a restore may change. The CPU clock is in:
    the guest calibrated its TSC, LAPIC timer and lpj against it at boot.

    What the guest saw at boot (core count, memory map, SLIT) and the boot CPU
    decide the checkpoint; link latency, caches, ROI CPU and policy may differ at
    restore (configs/README.md, "Checkpoints and the SLIT").
    """
    p = SweepPoint.from_dict(rec["point"])
    lat_key = "numa_factor" if p.numa_factor is not None else "link_latency"
    lat = p.numa_factor if p.numa_factor is not None else p.link_latency
    topo = topology_for(p.sockets, p.cores_per_socket, lat_key, lat, p.machine)
    prov = rec["provenance"]
    key = {
        "sockets": p.sockets,
        "cores_per_socket": p.cores_per_socket,
        "mem_per_node": p.machine["mem_per_node"],
        "memory_type": p.machine["memory_type"],
        "cpu_clock_hz": topo.cpu_clock_hz,
        "slit": topo.slit(),
        "cpu_boot": (p.cpu or {}).get("boot"),
        "kernel": prov["kernel_build_id"],
        "image": prov["image_id"],
        "gem5": prov["gem5_sha256"],
        "configs": pv.tree_hash(ROOT / "configs", exclude=calibration_files()),
    }
    if boot_variant(p):  # absent for variant 0: the key of a single checkpoint stays
        key["boot_variant"] = boot_variant(p)
    return hashlib.sha256(canonical_json(key).encode()).hexdigest()[:20]


BOOT_COST_NAME = "boot_cost.json"  # in a checkpoint directory: the boot's host seconds
HOST_TIMES_NAME = "host_times.json"  # in a run's logs/: checkpoint and gem5 host seconds


def checkpoint_cost(cdir: Path) -> dict[str, Any] | None:
    """The boot cost recorded with a checkpoint (None for one made before it was)."""
    try:
        cost = json.loads((cdir / BOOT_COST_NAME).read_text())
    except (OSError, ValueError):
        return None
    return cost if isinstance(cost, dict) else None


def checkpoint_base() -> Path:
    """Where boot checkpoints live: the artifact cache, shared by every node."""
    return pv.cache_root() / "checkpoints"


def ensure_checkpoint(rec: dict[str, Any], run_dir: Path, log: Any, timeout_s: float) -> Path:
    """Create the boot checkpoint once and return its directory.

    staging.build_once: workers (on any node sharing the cache) asking for the
    same key wait on ``<key>.lock`` and reuse the finished checkpoint; a failed
    or killed boot leaves nothing under ``<key>``. Inside a Slurm job
    (NUMA_LB_STAGED_ONLY=1) a missing checkpoint is an error, never a boot: the
    submitting host staged them before the array started.
    """
    key = checkpoint_key(rec)

    def boot(tmp: Path) -> None:
        cmd = gem5_command(rec, tmp, checkpoint=tmp / "cpt", take_checkpoint=True)
        log.write(f"boot checkpoint {key}: {cmd}\n".encode())
        log.flush()
        t0, cpu0 = time.time(), children_cpu_s()
        r = subprocess.run(
            cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False
        )
        if r.returncode != 0 or not (tmp / "cpt").exists():
            raise RuntimeError(f"boot checkpoint failed (gem5 exit {r.returncode})")
        # the boot's host cost, shared by every run restoring this checkpoint
        cost = {"key": key, "host_s": round(time.time() - t0, 3), "host": socket.gethostname(),
                "cpu_s": round(children_cpu_s() - cpu0, 3)}  # fmt: skip
        (tmp / BOOT_COST_NAME).write_text(json.dumps(cost) + "\n")

    def note(msg: str) -> None:
        log.write(f"{msg}\n".encode())
        log.flush()

    return staging.build_once(
        checkpoint_base(),
        key,
        boot,
        note=note,
        allow_build=not staging.staged_only(),
        what="boot checkpoint",
    )


def uses_checkpoint(rec: dict[str, Any]) -> bool:
    """Whether a run restores a boot checkpoint (qemu runs and gem5.checkpoint =
    false boot on their own)."""
    p = SweepPoint.from_dict(rec["point"])
    return p.backend == "gem5" and bool((p.gem5 or {}).get("checkpoint", True))


def missing_checkpoints(recs: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The boot checkpoints these runs restore that are not in the cache yet,
    each with how many of the runs need it (nothing is made)."""
    base = checkpoint_base()
    out: dict[str, int] = {}
    for rec in recs:
        if uses_checkpoint(rec):
            key = checkpoint_key(rec)
            if not (base / key / staging.DONE).exists():
                out[key] = out.get(key, 0) + 1
    return out


def stage_runs(recs: list[dict[str, Any]], stream: TextIO, log_dir: Path) -> dict[str, Any]:
    """The stage step of a Slurm submission: `stage` with the gem5 boot
    checkpoints (qemu runs and gem5.checkpoint = false need none)."""
    base = checkpoint_base()

    def make(rec: dict[str, Any]) -> Path:
        log_dir.mkdir(parents=True, exist_ok=True)
        key = checkpoint_key(rec)
        stream.write(f"stage: gem5's output: {log_dir / f'stage-checkpoint-{key}.log'}\n")
        with open(log_dir / f"stage-checkpoint-{key}.log", "ab") as log:
            return ensure_checkpoint(rec, log_dir, log, float(rec["resources"]["time_limit_s"]))

    return staging.stage(
        recs,
        stream,
        checkpoint_key,
        lambda key: (base / key / staging.DONE).exists(),
        make,
        needs_checkpoint=uses_checkpoint,
    )


def checkpoint_activity(run_dir: Path) -> str:
    """What a running gem5 run is doing about its boot checkpoint, from its
    logs/gem5.log ("" when it has its checkpoint or never asked for one)."""
    logs = run_dir / "logs"
    if (logs / HOST_TIMES_NAME).exists():  # written once the checkpoint is there
        return ""
    try:
        with open(logs / "gem5.log", "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - (256 << 10)))
            tail = f.read().decode(errors="replace")
    except OSError:
        return ""
    for line in reversed(tail.splitlines()):
        if line.startswith("waiting for boot checkpoint "):
            return "waiting for its boot checkpoint (another run is booting it)"
        if line.startswith("boot checkpoint "):
            if ": lock released" in line:  # the wait is over: restoring it next
                return ""
            return f"booting its boot checkpoint under gem5 ({staging.CHECKPOINT_TYPICAL})"
    return ""


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's reaped children. A worker
    runs one gem5 at a time, so the difference around one gem5 process is that
    process's CPU time, whatever else shares the host's cores."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def children_max_rss_mib() -> float:
    """Peak resident set (MiB) of the largest child this process has reaped
    (Linux: ru_maxrss in KiB): after a run, its gem5 process's peak, or the
    boot's when this worker booted the checkpoint and the boot was larger."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_gem5(rec: dict[str, Any], run_dir: Path, timeout_s: float) -> Outcome:
    staging.check_inputs(rec)  # on a shared path, staged by the submitting host
    point = SweepPoint.from_dict(rec["point"])
    logp = run_dir / "logs" / "gem5.log"
    host_times: dict[str, Any] = {}
    with open(logp, "ab") as log:
        ckpt = None
        if (point.gem5 or {}).get("checkpoint", True):
            t0 = time.time()
            cdir = ensure_checkpoint(rec, run_dir, log, timeout_s)
            host_times["checkpoint_wait_s"] = round(time.time() - t0, 3)  # built or waited
            host_times["checkpoint"] = checkpoint_cost(cdir)
            ckpt = cdir / "cpt"
            # now, not only at the end: the worker's time limit starts after the wait
            write_text_atomic(run_dir / "logs" / HOST_TIMES_NAME, json.dumps(host_times) + "\n")
        cmd = gem5_command(rec, run_dir, checkpoint=ckpt)
        write_text_atomic(run_dir / "logs" / "gem5.cmd.json", json.dumps(cmd) + "\n")
        t0, cpu0 = time.time(), children_cpu_s()
        try:
            rc = run_to_limit(cmd, log, run_dir, timeout_s, run_dir / "m5out" / "stats.txt")
            if rc is None:
                where = progress_at_limit(run_dir / "m5out")
                return Outcome(exit_code=None, timed_out=True,
                               error=f"gem5 exceeded {timeout_s:.0f} s{where}")  # fmt: skip
        finally:
            host_times["gem5_s"] = round(time.time() - t0, 3)  # the restored run's process
            # its CPU time: the wall time above grows when runs share cores
            host_times["gem5_cpu_s"] = round(children_cpu_s() - cpu0, 3)
            host_times["gem5_max_rss_mib"] = round(children_max_rss_mib(), 1)
            write_text_atomic(run_dir / "logs" / HOST_TIMES_NAME, json.dumps(host_times) + "\n")
    guest = collect_gem5_guest_files(run_dir)
    details: dict[str, Any] = {"command": cmd, "guest_status": guest}
    if rc != 0:
        return Outcome(exit_code=rc, error=f"gem5 exited with {rc}", details=details)
    if guest is None or guest.get("status") != "ok":
        why = "no guest results" if guest is None else f"guest status {guest.get('status')!r}"
        return Outcome(
            exit_code=rc, error=f"{why}: {guest and guest.get('error')}", details=details
        )
    if (why := roi_problem(run_dir / "m5out")) is not None:
        return Outcome(exit_code=rc, error=why, details=details)
    return Outcome(exit_code=0, details=details)


STATS_DUMP_GRACE_S = 30.0  # for gem5 to write its statistics after SIGUSR1


def run_to_limit(
    cmd: list[str], log: Any, cwd: Path, timeout_s: float, stats: Path | None = None
) -> int | None:
    """Run gem5 to its end or its time limit: its exit code, or None at the
    limit. At the limit gem5 first gets SIGUSR1, on which it dumps its
    statistics (src/sim/init_signals.cc: async_statdump) so a killed run still
    says how many ticks and instructions it got through; once ``stats`` has
    grown (or after STATS_DUMP_GRACE_S), SIGKILL."""
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        size = _size(stats)
        proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + STATS_DUMP_GRACE_S
        while proc.poll() is None and time.monotonic() < deadline:
            if stats is not None and _size(stats) > size:
                time.sleep(1.0)  # let the dump finish
                break
            time.sleep(0.2)
        proc.kill()
        proc.wait()
        return None
    except BaseException:
        proc.kill()  # an interrupted worker must not leave gem5 running
        proc.wait()
        raise


def _size(p: Path | None) -> int:
    try:
        return p.stat().st_size if p is not None else 0
    except OSError:
        return 0


def _last_stat(stats: Path, name: str) -> str | None:
    try:
        text = stats.read_text(errors="replace")
    except OSError:
        return None
    hits = re.findall(rf"^{re.escape(name)}\s+(\S+)", text, re.M)
    return hits[-1] if hits else None


def progress_at_limit(m5out: Path) -> str:
    """How far a run killed at its time limit got, from roi.json (written at
    every exit event): the last event and the simulated time since the ROI
    began, as a suffix for the error; '' when nothing is known. Tells a pilot
    whether it died before, in or after its ROI."""
    try:
        d = json.loads((m5out / "roi.json").read_text())
        events = d.get("events") or []
        last = events[-1] if events else None
    except (OSError, ValueError, AttributeError, IndexError, TypeError):
        return ""
    if not isinstance(last, dict):
        return ""
    host = last.get("host_time_unix")
    ago = f" {time.time() - host:.0f} s of host time before the kill" if host else ""
    sim = _last_stat(m5out / "stats.txt", "simSeconds")
    at = f"; statistics dumped at the limit: {sim} s simulated since the last reset" if sim else ""
    return f" (last exit event: {last.get('event')} at tick {last.get('tick')},{ago}{at})"


def roi_problem(m5out: Path) -> str | None:
    """ "ROI unknown: ..." when m5out/roi.json does not name a closed ROI's stats dump.

    A run without a known ROI is failed: its statistics would otherwise be read
    from gem5's exit dump, which also covers the boot CPUs and the hand back.
    """
    from numa_lb.roi import RoiUnknown, roi_stats_dump_index  # noqa: PLC0415 - configs/, via .spec

    try:
        roi_stats_dump_index(m5out)
    except RoiUnknown as e:
        return str(e)
    return None


def collect_gem5_guest_files(run_dir: Path) -> dict[str, Any] | None:
    """configs/numa_run.py leaves the guest's files in m5out/guest/; copy them to
    guest/ and return the guest's status.json (None when there is none)."""
    src = run_dir / "m5out" / "guest"
    dst = run_dir / "guest"
    if not src.is_dir():
        return None
    dst.mkdir(exist_ok=True)
    for f in src.iterdir():
        if f.is_file():
            shutil.copy2(f, dst / f.name)
    try:
        return json.loads((dst / "status.json").read_text())
    except (OSError, ValueError):
        return None


RUNNERS = {"qemu": run_qemu, "gem5": run_gem5}
