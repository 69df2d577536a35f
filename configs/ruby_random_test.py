"""Ruby random tester on the study's multi-socket MOESI_hammer hierarchy.

    gem5.opt configs/ruby_random_test.py --sockets 4 --cores-per-socket 4 --checks 20000

gem5's own tests never run x86 MOESI_hammer on several sockets, so before
trusting timing results this drives the same controllers, directories (probe
filter included), routers and inter-socket links as ``numa_run.py`` with
gem5's RubyTester: random loads and stores from every core port to a small set
of lines (false sharing, set conflicts), each value checked, with Ruby's random
message delays on. Flushes are off unless --check-flush: the tester's flush
checks fail on stock gem5 v24.0.0.1 MOESI_hammer even with one core and one
directory in gem5's own configs/example/ruby_random_test.py. The tester's
addresses span about 26 KiB, so the nodes share 32 KiB (at least 8 KiB each)
and every socket's directory owns some of the lines; everything else comes from
the ``Topology`` the flags describe. Prints ``RUBY_RANDOM_TEST PASS ...`` and
exits 0 when all checks completed; a wrong value or a deadlock makes gem5 stop
with an error (non-zero exit).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import _m5.core
import m5
from gem5.coherence_protocol import CoherenceProtocol  # noqa: F401 - fails early off-Ruby
from gem5.isas import ISA
from gem5.utils.requires import requires
from m5.objects import (
    AddrRange,
    Root,
    RubySystem,
    RubyTester,
    SimpleMemory,
    SrcClockDomain,
    System,
    VoltageDomain,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from numa_lb.caches import LINE_SIZE, CacheGeometry  # noqa: E402
from numa_lb.hammer_hierarchy import (  # noqa: E402
    HAMMER_VIRTUAL_NETWORKS,
    MOESI_HAMMER,
    HammerCoreCache,
    HammerDirectory,
    SocketNetwork,
)
from numa_lb.options import add_topology_args, topology_or_exit  # noqa: E402
from numa_lb.ruby_stats import reset_stats  # noqa: E402
from numa_lb.topology import Topology  # noqa: E402

# RubyTester's CheckTable uses addresses 1000 .. ~26600: nodes share 32 KiB
# (at least 8 KiB each), so every directory owns some of the checked lines.
TESTED_BYTES = 32 * 1024
MIN_NODE_BYTES = 8 * 1024
# Stress sizes: the tested lines (~400) overflow every cache and the probe filter.
TINY_L1 = 256  # 4 lines
TINY_L2 = 512  # 8 lines
TINY_PF_ENTRIES = 16


def node_bytes(sockets: int) -> int:
    size = MIN_NODE_BYTES
    while size * sockets < TESTED_BYTES:
        size *= 2
    return size


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_topology_args(p)
    p.add_argument("--checks", type=int, default=10000, help="checks to complete")
    p.add_argument("--wakeup", type=int, default=10, help="tester wakeup period (cycles)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--check-flush",
        action="store_true",
        help="also issue flushes (fail on stock gem5 v24.0.0.1 MOESI_hammer: configs/README.md)",
    )
    p.add_argument("--no-randomization", action="store_true", help="no random message delays")
    p.add_argument(
        "--reset-stats-at",
        type=int,
        default=None,
        metavar="TICK",
        help="reset statistics (numa_lb/ruby_stats.py) at TICK and dump them at the end",
    )
    p.add_argument(
        "--plain-stats-reset",
        action="store_true",
        help="with --reset-stats-at: only m5.stats.reset() (shows what it misses)",
    )
    p.add_argument(
        "--tiny-caches",
        action="store_true",
        help=f"L1I/L1D {TINY_L1} B 2-way, L2 {TINY_L2} B 2-way: every access evicts, so "
        "writebacks race with requests (full-size caches hold the whole tested range)",
    )
    p.add_argument(
        "--tiny-probe-filter",
        action="store_true",
        help=f"{TINY_PF_ENTRIES}-entry 2-way probe filter: its replacements (and the "
        "invalidations they force) happen all the time",
    )
    return p.parse_args()


def stressed(topology: Topology, tiny_caches: bool, tiny_pf: bool) -> Topology:
    """The topology with gem5-tester-sized caches and/or probe filter."""
    changes: dict = {}
    if tiny_caches:
        changes["l1d"] = CacheGeometry("l1d", TINY_L1, 2)
        changes["l1i"] = CacheGeometry("l1i", TINY_L1, 2)
        changes["l2"] = CacheGeometry("l2", TINY_L2, 2)
    if tiny_pf:
        changes.update(probe_filter_entries=TINY_PF_ENTRIES, probe_filter_assoc=2)
    return dataclasses.replace(topology, **changes) if changes else topology


def main() -> None:
    args = parse_args()
    topology = stressed(topology_or_exit(args), args.tiny_caches, args.tiny_probe_filter)
    requires(isa_required=ISA.X86, coherence_protocol_required=MOESI_HAMMER)
    _m5.core.seedRandom(args.seed)  # gem5's random_mt (Ruby delays, testers)

    ncpus = topology.ncpus
    node = node_bytes(topology.sockets)
    ranges = [AddrRange(n * node, size=node) for n in range(topology.sockets)]
    tester = RubyTester(
        check_flush=args.check_flush, checks_to_complete=args.checks, wakeup_frequency=args.wakeup
    )
    system = System(cpu=tester, mem_ranges=[AddrRange(topology.sockets * node)])
    system.voltage_domain = VoltageDomain()
    system.clk_domain = SrcClockDomain(
        clock=f"{topology.cpu_clock_hz}Hz", voltage_domain=system.voltage_domain
    )
    system.mem_mode = "timing"

    ruby = RubySystem()
    ruby.number_of_virtual_networks = HAMMER_VIRTUAL_NETWORKS
    ruby.block_size_bytes = LINE_SIZE
    ruby.randomization = not args.no_randomization  # random delays: the tester's best friend
    system.ruby = ruby
    network = SocketNetwork(ruby, topology)
    ruby.network = network

    by_socket: list[list] = [[] for _ in range(topology.sockets)]
    caches = []
    for cpu in range(ncpus):
        cache = HammerCoreCache(cpu, topology, False, network, ruby)
        cache.sequencer.using_ruby_tester = True
        cache.sequencer.no_retry_on_stall = True
        tester.cpuInstDataPort = cache.sequencer.in_ports
        caches.append(cache)
        by_socket[topology.socket_of_cpu(cpu)].append(cache)
    memories = [SimpleMemory(range=r, latency="50ns") for r in ranges]
    directories = []
    for node, (rng, mem) in enumerate(zip(ranges, memories, strict=True)):
        directory = HammerDirectory(node, topology, rng, mem.port, network, ruby)
        directories.append(directory)
        by_socket[node].append(directory)
    system.memories = memories
    ruby.core_caches = caches
    ruby.directories = directories
    ruby.num_of_sequencers = ncpus
    network.connect_controllers(by_socket)
    network.setup_buffers()
    tester.num_cpus = ncpus

    root = Root(full_system=False, system=system)
    m5.instantiate()
    event = None
    if args.reset_stats_at is not None:
        event = m5.simulate(args.reset_stats_at)
        if event.getCause() == "simulate() limit reached":
            if args.plain_stats_reset:  # gem5's own reset: the throttles run on
                m5.stats.reset()
            else:
                reset_stats(root)
            event = None
    event = event or m5.simulate()
    cause = event.getCause()
    if args.reset_stats_at is not None:
        m5.stats.dump()
    result = {
        "sockets": topology.sockets,
        "cores_per_socket": topology.cores_per_socket,
        "probe_filter": topology.probe_filter,
        "probe_filter_entries": topology.probe_filter_entries,
        "l1d": topology.l1d.size,
        "l2": topology.l2_effective.size,
        "link_latency_cycles": topology.link_latency().cycles,
        "checks": args.checks,
        "cause": cause,
        "tick": m5.curTick(),
    }
    ok = cause == "Ruby Tester completed"
    print(f"RUBY_RANDOM_TEST {'PASS' if ok else 'FAIL'} {json.dumps(result)}", flush=True)
    del root
    sys.exit(0 if ok else 1)


if __name__ == "__m5_main__":
    main()
