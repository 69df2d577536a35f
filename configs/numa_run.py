"""Boot the patched kernel on the NUMA machine and run one job (gem5 full system).

Boot checkpoint, once per (topology, kernel, image):

    gem5.opt --outdir=CKPT_RUN configs/numa_run.py --sockets 4 --cores-per-socket 1 \
        --kernel vmlinux --disk-image rootfs.img --take-checkpoint CKPT_RUN/cpt

A run restored from it, with its own NUMA factor, policy and workload:

    gem5.opt --outdir=RUN/m5out configs/numa_run.py --sockets 4 --cores-per-socket 1 \
        --numa-factor 2.0 --kernel vmlinux --disk-image rootfs.img \
        --job RUN/job.json --restore-checkpoint CKPT_RUN/cpt

The guest's job (a mix runner job, workloads/README.md) reaches the guest
through gem5's readfile (``readfile.bin``, a copy of ``job.tar``; the counter
bridge then answers the policy daemons' sample requests, m5 workbegin 3, in
the same file: numa_lb/counter_bridge.py, ``counter_bridge.json``); the init
hands its result files back with m5
writefile (``<outdir>/guest-<name>``, collected into ``<outdir>/guest/``) or,
if that fails, on the serial console. ``roi.json`` records every exit event
and the ROI ticks; the stats dump at the guest's workend is the ROI.
``phases.json`` records the host and CPU seconds of every phase of the
process (restore, startup, warmup, roi, handback, exit: numa_lb/phases.py).
Exit status: 0 guest exited (or checkpoint written), 2 --max-sim-seconds
reached, 1 anything else.
"""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import sys
from pathlib import Path

import _m5.core
import m5
from gem5.components.processors.cpu_types import CPUTypes
from gem5.components.processors.simple_processor import SimpleProcessor
from gem5.components.processors.simple_switchable_processor import SimpleSwitchableProcessor
from gem5.isas import ISA
from gem5.resources.resource import DiskImageResource, KernelResource
from gem5.simulate.exit_event import ExitEvent
from gem5.simulate.simulator import Simulator

CONFIGS = Path(__file__).resolve().parent
REPO = CONFIGS.parent
sys.path.insert(0, str(CONFIGS))
sys.path.insert(0, str(REPO / "disk-image"))

import guest_io  # noqa: E402  (disk-image/: the job and result formats)
from numa_lb.counter_bridge import (  # noqa: E402
    READFILE_NAME,
    CounterBridge,
    bridge_latency,
    core_paths,
)
from numa_lb.cpu_switch import back_to_boot_cpu  # noqa: E402
from numa_lb.hammer_hierarchy import NumaHammerCacheHierarchy  # noqa: E402
from numa_lb.kernel_cmdline import guest_args, image_boot  # noqa: E402
from numa_lb.numa_board import NumaX86Board  # noqa: E402
from numa_lb.options import add_topology_args, topology_or_exit  # noqa: E402
from numa_lb.phases import PhaseClock  # noqa: E402
from numa_lb.roi import BOOT_RECORD_NAME, RoiProtocol, checkpoint_tick  # noqa: E402
from numa_lb.ruby_stats import reset_stats  # noqa: E402
from numa_lb.topology import Topology, boot_mismatch  # noqa: E402

CPU_TYPES = {"atomic": CPUTypes.ATOMIC, "timing": CPUTypes.TIMING, "o3": CPUTypes.O3}
GUEST_PREFIX = "guest-"
# gem5 MessageBuffer::enqueue: with the Ruby system's randomization on, every
# message ignores its delay and waits random_time() = 1-4 ticks instead.
PERTURB_REFUSED = (
    "--perturb is refused for study runs: Ruby randomization makes every message "
    "buffer ignore its delay (MessageBuffer::enqueue uses a random 1-4 ticks), so the "
    "link latency and every cache/directory latency vanish and the NUMA factor "
    "collapses to about 1. Repeats differ on the guest side instead (--seed, the "
    "init's repeat seed). The protocol tester configs/ruby_random_test.py keeps it."
)
CONSOLE_FILE = "board.pc.com_1.device"  # gem5's file for the board's first UART


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_topology_args(p)
    g = p.add_argument_group("run")
    g.add_argument("--cpu-boot", default="atomic", choices=["atomic", "timing"])
    g.add_argument("--cpu-roi", default="timing", choices=["atomic", "timing", "o3"])
    g.add_argument(
        "--cpu-post-roi",
        default="roi",
        choices=["roi", "atomic"],
        help="CPU for the hand-back after the ROI: stay on the ROI CPU, or back to the "
        "atomic boot CPU after writing every dirty cache line back (numa_lb/cpu_switch.py)",
    )
    g.add_argument("--kernel", required=True, type=Path, help="vmlinux (ELF)")
    g.add_argument("--disk-image", required=True, type=Path, help="raw ext4 root image")
    g.add_argument("--job", type=Path, help="mix runner job (JSON); needed unless checkpointing")
    g.add_argument(
        "--init-option",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="option for the guest init (disk-image/init), e.g. watchdog_s=600",
    )
    g.add_argument("--seed", type=int, default=0, help="repeat index; seeds gem5's RNG")
    g.add_argument(
        "--perturb",
        action="store_true",
        help="refused: Ruby randomization erases the latency model (configs/ruby_random_test.py)",
    )
    g.add_argument("--kernel-arg", action="append", default=[], help="extra kernel argument")
    g.add_argument("--max-sim-seconds", type=float, help="stop after this much simulated time")
    ck = g.add_mutually_exclusive_group()
    ck.add_argument("--take-checkpoint", type=Path, help="boot, checkpoint into DIR, stop")
    ck.add_argument("--restore-checkpoint", type=Path, help="start from the boot checkpoint DIR")
    return p.parse_args()


def job_tar(args: argparse.Namespace, outdir: Path) -> Path | None:
    """The readfile payload: the init's job tar (guest_io, one format for both backends)."""
    if args.job is None:
        return None
    options = dict(guest_io.parse_init_option(text) for text in args.init_option)
    options.setdefault("gem5_prefix", GUEST_PREFIX)
    job = json.loads(args.job.read_text())
    return guest_io.pack_job_file(job, outdir / "job.tar", options)


def save_checkpoint(simulator: Simulator, path: Path, topology: Topology) -> None:
    """The checkpoint, with the topology it was booted with (checked at restore)."""
    simulator.save_checkpoint(path)
    (path / BOOT_RECORD_NAME).write_text(json.dumps(topology.to_record(), indent=1) + "\n")


def check_restore(cpt: Path, topology: Topology) -> None:
    """Refuse a restore whose boot-fixed machine (BOOT_FIELDS) differs, naming the field."""
    if not (cpt / "m5.cpt").is_file():
        fail(f"--restore-checkpoint {cpt}: no m5.cpt there")
    try:
        boot = json.loads((cpt / BOOT_RECORD_NAME).read_text())
    except (OSError, ValueError) as e:
        fail(f"--restore-checkpoint {cpt}: no readable {BOOT_RECORD_NAME} ({e}); boot it again")
    if not isinstance(boot, dict):
        fail(f"--restore-checkpoint {cpt}: {BOOT_RECORD_NAME} is not a topology record")
    why = boot_mismatch(boot, topology.to_record())
    if why is not None:
        fail(f"--restore-checkpoint {cpt}: {why}")


def fail(message: str) -> None:
    print(f"numa_run: error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def main() -> None:
    args = parse_args()
    if args.perturb:
        fail(PERTURB_REFUSED)
    topology = topology_or_exit(args)
    for what, path in (("kernel", args.kernel), ("disk image", args.disk_image)):
        if not path.is_file():
            fail(f"{what} {path} does not exist")
    if args.job is None and args.take_checkpoint is None:
        fail("--job is required unless --take-checkpoint is given")
    if args.restore_checkpoint is not None:
        check_restore(args.restore_checkpoint, topology)
    outdir = Path(m5.options.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    # the restore phase runs from the process's start (its age from /proc)
    phases = PhaseClock(outdir, tick=lambda: m5.curTick())

    boot, roi = CPU_TYPES[args.cpu_boot], CPU_TYPES[args.cpu_roi]
    if args.cpu_post_roi == "atomic" and (args.cpu_boot != "atomic" or boot == roi):
        fail("--cpu-post-roi atomic needs --cpu-boot atomic and a different --cpu-roi")
    if boot == roi:
        processor = SimpleProcessor(cpu_type=boot, isa=ISA.X86, num_cores=topology.ncpus)
        switch = None
    else:
        processor = SimpleSwitchableProcessor(
            starting_core_type=boot, switch_core_type=roi, isa=ISA.X86, num_cores=topology.ncpus
        )
        switch = processor.switch
    hierarchy = NumaHammerCacheHierarchy(topology)
    board = NumaX86Board(
        topology=topology, processor=processor, cache_hierarchy=hierarchy, output_dir=outdir
    )
    _m5.core.seedRandom(args.seed)  # gem5's random_mt (Ruby delays, testers)

    # One command line for both backends (numa_lb/kernel_cmdline.py); the root
    # device is given literally, so the board's {root_value} is not used here.
    init_path, root = image_boot(args.disk_image)  # image.json: init and root PARTUUID
    kernel_args = guest_args(
        "gem5",
        init_path,
        root=root,
        clock_hz=topology.cpu_clock_hz,
        kernel_hz=topology.kernel_hz,
        checkpoint=args.take_checkpoint is not None,
    )
    kernel_args += args.kernel_arg
    readfile = job_tar(args, outdir)
    if readfile is not None:  # served to m5 readfile: the job, then counter samples
        readfile = Path(shutil.copyfile(readfile, outdir / READFILE_NAME))
    board.set_kernel_disk_workload(
        kernel=KernelResource(local_path=str(args.kernel)),
        disk_image=DiskImageResource(local_path=str(args.disk_image), root_partition=None),
        readfile=str(readfile) if readfile else None,
        kernel_args=kernel_args,
        checkpoint=args.restore_checkpoint,
    )

    record = {
        "topology": topology.to_record(),
        "kernel_args": kernel_args,
        "cpu_boot": args.cpu_boot,
        "cpu_roi": args.cpu_roi,
        "cpu_post_roi": args.cpu_post_roi,
        "seed": args.seed,
        "perturb": args.perturb,
        "restored_from": str(args.restore_checkpoint) if args.restore_checkpoint else None,
        "job": str(args.job) if args.job else None,
    }
    simulator: Simulator | None = None
    # --max-sim-seconds is an absolute cap on this process's simulated time: a
    # restore resumes at the checkpoint's tick, and the protocol re-arms what is
    # left after every exit event (gem5 would restart the full budget each time).
    start_tick = checkpoint_tick(args.restore_checkpoint) if args.restore_checkpoint else 0
    tick_limit = None
    if args.max_sim_seconds is not None:
        tick_limit = start_tick + int(args.max_sim_seconds * 1e12)
    bridge = None
    if readfile is not None:
        bridge = CounterBridge(
            outdir=outdir,
            readfile=readfile,
            root=m5.objects.Root.getInstance,
            tick=m5.curTick,
            active_cores=lambda: core_paths(processor),
            sockets=[topology.cpus_of_socket(s) for s in range(topology.sockets)],
            cpu_clock_hz=topology.cpu_clock_hz,
            reset_tick=start_tick,  # the first simulate() resets the statistics
            config=outdir / "config.json",
            in_roi=lambda: protocol.state.value == "roi",
            latency=bridge_latency(topology),
        )
    protocol = RoiProtocol(
        outdir=outdir,
        tick=lambda: m5.curTick(),
        reset_stats=lambda: reset_stats(board),  # the throttles too (numa_lb/ruby_stats.py)
        dump_stats=m5.stats.dump,
        switch_cpus=switch,
        save_checkpoint=lambda path: save_checkpoint(simulator, path, topology),
        take_checkpoint=args.take_checkpoint,
        record=record,
        # workbegin/workend carry their work id as the exit event's code
        work_id=lambda: simulator.get_last_exit_event_code(),
        tick_limit=tick_limit,
        set_max_ticks=lambda ticks: simulator.set_max_ticks(ticks),
        sample=bridge.sample if bridge else None,
        switch=bridge.ledger.on_switch if bridge else None,
        before_reset=bridge.before_reset if bridge else None,
        after_roi=(lambda: back_to_boot_cpu(board, processor))
        if args.cpu_post_roi == "atomic"
        else None,
        phase=phases.mark,
    )
    simulator = Simulator(board=board, on_exit_event=protocol.handlers(ExitEvent))
    if tick_limit is not None:
        simulator.set_max_ticks(tick_limit - start_tick)
    print("numa_run: " + json.dumps({k: record[k] for k in ("cpu_boot", "cpu_roi", "seed")}))
    print(f"numa_run: topology {json.dumps(topology.to_record())}", flush=True)
    # registered before the first simulate() registers gem5's exit handlers
    # (the exit stats dump): atexit runs them first, so "end" comes after them
    atexit.register(phases.finish)
    instantiate = getattr(simulator, "_instantiate", None)
    if callable(instantiate):  # what run() does first (idempotent): the checkpoint loads here
        instantiate()
    else:  # another gem5: the instantiation falls into the startup phase
        phases.record["startup_includes_instantiation"] = True
    phases.mark("startup")
    simulator.run()
    phases.mark("exit")

    print(
        f"numa_run: stopped at tick {m5.curTick()} in state {protocol.state.value}: "
        f"{simulator.get_last_exit_event_cause()}",
        flush=True,
    )
    # with a daemon's samples or the guest's switch marks: the record, with
    # the counts at the end (the attribution's known-answer tests read them)
    if bridge is not None and (bridge.samples or bridge.ledger.marks):
        bridge.close()
        bridge.write_record()
        print(f"numa_run: counter bridge: {bridge.record()['samples']} samples", flush=True)
    console = outdir / CONSOLE_FILE
    status = guest_io.collect_gem5(outdir, outdir / "guest", GUEST_PREFIX, console)
    if args.job is not None:
        got = "none" if status is None else status.get("status")
        print(f"numa_run: guest status {got} (files in {outdir / 'guest'})", flush=True)
    sys.exit(protocol.exit_code())


if __name__ == "__m5_main__":
    main()
