"""Build the NUMA machine and instantiate it, without simulating (config check).

    gem5.opt configs/numa_instantiate.py --sockets 2 --cores-per-socket 2 \
        --kernel /path/to/vmlinux

Prints one ``INSTANTIATED ...`` line with the resolved topology and exits 0. A
kernel is needed only because gem5's x86 FS workload refuses to initialise
without one; nothing is executed. Used by tests/gem5. ``--bridge-read`` also
reads the live statistics once through the counter bridge, as the ROI start
does (``BRIDGE ...`` line): the names it looks up exist on this machine and
CPU model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import m5
from gem5.components.processors.cpu_types import CPUTypes
from gem5.components.processors.simple_processor import SimpleProcessor
from gem5.isas import ISA
from m5.objects import Root

sys.path.insert(0, str(Path(__file__).resolve().parent))

from numa_lb.counter_bridge import READFILE_NAME, CounterBridge, core_paths  # noqa: E402
from numa_lb.hammer_hierarchy import NumaHammerCacheHierarchy  # noqa: E402
from numa_lb.numa_board import NumaX86Board  # noqa: E402
from numa_lb.options import add_topology_args, topology_or_exit  # noqa: E402

CPU_TYPES = {"atomic": CPUTypes.ATOMIC, "timing": CPUTypes.TIMING, "o3": CPUTypes.O3}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_topology_args(p)
    p.add_argument("--cpu-type", default="atomic", choices=sorted(CPU_TYPES))
    p.add_argument("--bridge-read", action="store_true")
    p.add_argument("--kernel", required=True, type=Path)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    topology = topology_or_exit(args)
    processor = SimpleProcessor(
        cpu_type=CPU_TYPES[args.cpu_type], isa=ISA.X86, num_cores=topology.ncpus
    )
    board = NumaX86Board(
        topology=topology,
        processor=processor,
        cache_hierarchy=NumaHammerCacheHierarchy(topology),
    )
    # Minimal FS set-up without a disk: the kernel is loaded, never run.
    board._set_fullsystem(True)
    board.workload.object_file = str(args.kernel)
    board.workload.command_line = " ".join(board.get_default_kernel_args())

    root = Root(full_system=True, board=board)
    board._pre_instantiate()
    m5.instantiate()
    summary = {
        "sockets": topology.sockets,
        "ncpus": topology.ncpus,
        "link_latency_cycles": topology.link_latency().cycles,
        "node_ranges": [[r.start, r.end] for r in topology.node_ranges()],
        "directories": len(board.cache_hierarchy.ruby_system.directories),
        "int_links": len(board.cache_hierarchy.ruby_system.network.int_links),
    }
    print("INSTANTIATED " + json.dumps(summary), flush=True)
    if args.bridge_read:
        outdir = Path(m5.options.outdir)
        bridge = CounterBridge(
            outdir=outdir, readfile=outdir / READFILE_NAME, root=Root.getInstance,
            tick=m5.curTick,
            active_cores=lambda: core_paths(processor),
            sockets=[topology.cpus_of_socket(s) for s in range(topology.sockets)],
            cpu_clock_hz=topology.cpu_clock_hz, reset_tick=0, config=outdir / "config.json",
        )  # fmt: skip
        cur = bridge.current()
        paths = core_paths(processor)
        print("BRIDGE " + json.dumps({"paths": paths, "busy_cycles": cur["busy_cycles"],
                                      "insts": cur["insts"]}), flush=True)  # fmt: skip
    del root


if __name__ == "__m5_main__":
    main()
