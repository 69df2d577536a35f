"""MOESI_hammer Ruby cache hierarchy for a multi-socket NUMA machine (gem5 stdlib).

gem5's standard library ships no MOESI_hammer hierarchy; this is ours, written
against gem5 v24.0.0.1 and the controller parameters of the protocol's SLICC
files (MOESI_hammer-cache.sm, -dir.sm, -dma.sm). Structure, all from a
``Topology``:

* per core: one L1Cache_Controller holding that core's private L1I, L1D and L2
  (MOESI_hammer keeps the three levels in one controller, L1/L2 exclusive), and
  its RubySequencer;
* per socket: one Directory_Controller with a probe filter (HT Assist) whose
  ``addr_ranges`` is exactly that node's contiguous range, wired to that node's
  memory controller (the board's memory port for the range);
* per socket: one router (Switch) to which the socket's cores, its directory and,
  on socket 0, the DMA controllers attach;
* inter-socket links between routers (fully connected or ring) whose latency
  sets the NUMA factor; both directions of a link get the same latency.

Only ``incorporate_cache`` touches the board, through the stdlib board interface.
Needs a gem5 built with PROTOCOL=MOESI_hammer for X86.
"""

from __future__ import annotations

from gem5.coherence_protocol import CoherenceProtocol
from gem5.components.boards.abstract_board import AbstractBoard
from gem5.components.cachehierarchies.abstract_cache_hierarchy import AbstractCacheHierarchy
from gem5.components.cachehierarchies.ruby.abstract_ruby_cache_hierarchy import (
    AbstractRubyCacheHierarchy,
)
from gem5.isas import ISA
from gem5.utils.override import overrides
from gem5.utils.requires import requires
from m5.objects import (
    Directory_Controller,
    DMA_Controller,
    DMASequencer,
    L1Cache_Controller,
    MessageBuffer,
    RubyCache,
    RubyDirectoryMemory,
    RubyPortProxy,
    RubySequencer,
    RubySystem,
    SimpleExtLink,
    SimpleIntLink,
    SimpleNetwork,
    Switch,
)

from .caches import LINE_SIZE
from .topology import EXT_LINK_BYTES_PER_CYCLE, RUBY_ENDPOINT_BANDWIDTH, Topology

# gem5 v24.0.0.1 names the MOESI_hammer member ARM_MOESI_HAMMER (runtime.py
# maps PROTOCOL=MOESI_hammer to it); there is no CoherenceProtocol.MOESI_HAMMER.
MOESI_HAMMER = CoherenceProtocol.ARM_MOESI_HAMMER
# MOESI_hammer uses virtual networks 0..5 (dma request, dma response, request,
# forward, response, unblock).
HAMMER_VIRTUAL_NETWORKS = 6
BLOCK_OFFSET_BITS = LINE_SIZE.bit_length() - 1
# When the probe filter is off its CacheMemory is still a required parameter;
# keep it tiny so it costs no host memory.
DISABLED_PROBE_FILTER = {"size": f"{2 * 4 * LINE_SIZE}B", "assoc": 4}


class HammerCoreCache(L1Cache_Controller):
    """A core's private L1I + L1D + L2 (one MOESI_hammer L1Cache controller)."""

    def __init__(
        self,
        version: int,
        topology: Topology,
        send_evictions: bool,
        network: SimpleNetwork,
        ruby_system: RubySystem,
    ) -> None:
        super().__init__()
        self.version = version
        self.ruby_system = ruby_system
        l2 = topology.l2_effective
        self.L1Icache = RubyCache(
            size=topology.l1i.size_str,
            assoc=topology.l1i.assoc,
            start_index_bit=BLOCK_OFFSET_BITS,
            is_icache=True,
        )
        self.L1Dcache = RubyCache(
            size=topology.l1d.size_str,
            assoc=topology.l1d.assoc,
            start_index_bit=BLOCK_OFFSET_BITS,
        )
        self.L2cache = RubyCache(
            size=l2.size_str, assoc=l2.assoc, start_index_bit=BLOCK_OFFSET_BITS
        )
        # O3 keeps its LSQ coherent and x86 mwait relies on eviction notices.
        self.send_evictions = send_evictions
        self.no_mig_atomic = True
        self.sequencer = RubySequencer(
            version=version, dcache=self.L1Dcache, ruby_system=ruby_system
        )
        self._connect_queues(network)

    def _connect_queues(self, network: SimpleNetwork) -> None:
        self.requestFromCache = MessageBuffer()
        self.requestFromCache.out_port = network.in_port
        self.responseFromCache = MessageBuffer()
        self.responseFromCache.out_port = network.in_port
        self.unblockFromCache = MessageBuffer()
        self.unblockFromCache.out_port = network.in_port
        self.forwardToCache = MessageBuffer()
        self.forwardToCache.in_port = network.out_port
        self.responseToCache = MessageBuffer()
        self.responseToCache.in_port = network.out_port
        self.mandatoryQueue = MessageBuffer()
        self.triggerQueue = MessageBuffer()


class HammerDirectory(Directory_Controller):
    """One socket's directory + probe filter, owning exactly its node's range."""

    def __init__(
        self,
        version: int,
        topology: Topology,
        mem_range,
        mem_port,
        network: SimpleNetwork,
        ruby_system: RubySystem,
    ) -> None:
        super().__init__()
        self.version = version
        self.ruby_system = ruby_system
        self.addr_ranges = [mem_range]
        self.directory = RubyDirectoryMemory()
        if topology.probe_filter:
            # Node ranges are contiguous (not line-interleaved), so the filter is
            # indexed right above the block offset.
            self.probeFilter = RubyCache(
                size=f"{topology.probe_filter_size}B",
                assoc=topology.probe_filter_assoc,
                start_index_bit=BLOCK_OFFSET_BITS,
            )
        else:
            self.probeFilter = RubyCache(start_index_bit=BLOCK_OFFSET_BITS, **DISABLED_PROBE_FILTER)
        self.probe_filter_enabled = topology.probe_filter
        self.full_bit_dir_enabled = False
        self.memory_out_port = mem_port
        self._connect_queues(network)

    def _connect_queues(self, network: SimpleNetwork) -> None:
        self.forwardFromDir = MessageBuffer()
        self.forwardFromDir.out_port = network.in_port
        self.responseFromDir = MessageBuffer()
        self.responseFromDir.out_port = network.in_port
        self.dmaResponseFromDir = MessageBuffer(ordered=True)
        self.dmaResponseFromDir.out_port = network.in_port
        self.unblockToDir = MessageBuffer()
        self.unblockToDir.in_port = network.out_port
        self.responseToDir = MessageBuffer()
        self.responseToDir.in_port = network.out_port
        self.requestToDir = MessageBuffer()
        self.requestToDir.in_port = network.out_port
        self.dmaRequestToDir = MessageBuffer(ordered=True)
        self.dmaRequestToDir.in_port = network.out_port
        self.triggerQueue = MessageBuffer(ordered=True)
        self.requestToMemory = MessageBuffer()
        self.responseFromMemory = MessageBuffer()


class HammerDMAController(DMA_Controller):
    """DMA engine for one device port (IDE, I/O bus); attached on socket 0."""

    def __init__(self, version: int, port, network: SimpleNetwork, ruby_system: RubySystem) -> None:
        super().__init__()
        self.version = version
        self.ruby_system = ruby_system
        self.dma_sequencer = DMASequencer(version=version, in_ports=port, ruby_system=ruby_system)
        self.mandatoryQueue = MessageBuffer()
        self.responseFromDir = MessageBuffer(ordered=True)
        self.responseFromDir.in_port = network.out_port
        self.requestToDir = MessageBuffer()
        self.requestToDir.out_port = network.in_port


def link_index(topology: Topology, src: int, dst: int) -> int:
    """Position in ``SocketNetwork.int_links`` of the directed link src -> dst."""
    for k, (a, b) in enumerate(topology.links()):
        if (a, b) == (src, dst):
            return 2 * k
        if (a, b) == (dst, src):
            return 2 * k + 1
    raise ValueError(f"no link between sockets {src} and {dst}")


class SocketNetwork(SimpleNetwork):
    """One router per socket; inter-socket links carry the NUMA latency.

    Stable names for the stats: ``routers[s]`` is socket s; ``int_links`` holds,
    for every linked pair (a, b) with a < b in ``Topology.links()`` order, first
    a->b then b->a (see ``link_index``). (A SimObject class may hold no
    static helpers: gem5 takes class attributes for parameters.)
    """

    def __init__(self, ruby_system: RubySystem, topology: Topology) -> None:
        super().__init__()
        self.ruby_system = ruby_system
        self.number_of_virtual_networks = HAMMER_VIRTUAL_NETWORKS
        # bytes/cycle of a link = endpoint_bandwidth * bandwidth_factor / 1000
        self.endpoint_bandwidth = RUBY_ENDPOINT_BANDWIDTH
        self._topology = topology
        self.routers = [Switch(router_id=s) for s in range(topology.sockets)]
        self.netifs = []

    def connect_controllers(self, controllers_by_socket: list[list]) -> None:
        ext_links = []
        for socket, controllers in enumerate(controllers_by_socket):
            for controller in controllers:
                ext_links.append(
                    SimpleExtLink(
                        link_id=len(ext_links),
                        ext_node=controller,
                        int_node=self.routers[socket],
                        bandwidth_factor=EXT_LINK_BYTES_PER_CYCLE * 1000 // RUBY_ENDPOINT_BANDWIDTH,
                    )
                )
        self.ext_links = ext_links
        latency = self._topology.link_latency().cycles
        int_links = []
        for a, b in self._topology.links():
            for src, dst in ((a, b), (b, a)):
                int_links.append(
                    SimpleIntLink(
                        link_id=len(ext_links) + len(int_links),
                        src_node=self.routers[src],
                        dst_node=self.routers[dst],
                        latency=latency,
                        bandwidth_factor=self._topology.link_bandwidth_factor,
                    )
                )
        self.int_links = int_links


class NumaHammerCacheHierarchy(AbstractRubyCacheHierarchy):
    """Multi-socket MOESI_hammer hierarchy built from a ``Topology``."""

    def __init__(self, topology: Topology) -> None:
        super().__init__()
        self._topology = topology

    @overrides(AbstractCacheHierarchy)
    def incorporate_cache(self, board: AbstractBoard) -> None:
        requires(isa_required=ISA.X86, coherence_protocol_required=MOESI_HAMMER)
        topo = self._topology
        cores = board.get_processor().get_cores()
        if len(cores) != topo.ncpus:
            raise ValueError(
                f"processor: has {len(cores)} cores but the topology has "
                f"{topo.sockets} sockets x {topo.cores_per_socket} cores"
            )
        mem_ports = list(board.get_mem_ports())
        expected = [(r.start, r.end) for r in topo.node_ranges()]
        got = [(int(rng.start), int(rng.end)) for rng, _ in mem_ports]
        if got != expected:
            raise ValueError(
                f"memory: ranges {got} do not match the topology's node ranges {expected}"
            )

        self.ruby_system = RubySystem()
        self.ruby_system.number_of_virtual_networks = HAMMER_VIRTUAL_NETWORKS
        self.ruby_system.block_size_bytes = LINE_SIZE
        network = SocketNetwork(self.ruby_system, topo)
        self.ruby_system.network = network

        by_socket: list[list] = [[] for _ in range(topo.sockets)]
        core_caches = []
        for cpu, core in enumerate(cores):
            cache = HammerCoreCache(
                cpu, topo, core.requires_send_evicts(), network, self.ruby_system
            )
            cache.clk_domain = board.get_clock_domain()
            cache.sequencer.clk_domain = board.get_clock_domain()
            if board.has_io_bus():
                cache.sequencer.connectIOPorts(board.get_io_bus())
            core.connect_icache(cache.sequencer.in_ports)
            core.connect_dcache(cache.sequencer.in_ports)
            core.connect_walker_ports(cache.sequencer.in_ports, cache.sequencer.in_ports)
            # x86 local APICs talk to each other through the sequencer.
            core.connect_interrupt(cache.sequencer.interrupt_out_port, cache.sequencer.in_ports)
            core_caches.append(cache)
            by_socket[topo.socket_of_cpu(cpu)].append(cache)

        directories = []
        for node, (mem_range, port) in enumerate(mem_ports):
            directory = HammerDirectory(node, topo, mem_range, port, network, self.ruby_system)
            directories.append(directory)
            by_socket[node].append(directory)

        dma_controllers = []
        if board.has_dma_ports():
            for i, port in enumerate(board.get_dma_ports()):
                dma = HammerDMAController(i, port, network, self.ruby_system)
                dma_controllers.append(dma)
                by_socket[0].append(dma)

        self.ruby_system.num_of_sequencers = len(core_caches) + len(dma_controllers)
        self.ruby_system.core_caches = core_caches
        self.ruby_system.directories = directories
        if dma_controllers:
            self.ruby_system.dma_controllers = dma_controllers

        network.connect_controllers(by_socket)
        network.setup_buffers()

        # Functional accesses (loading the kernel, the ACPI blob) go through here.
        self.ruby_system.sys_port_proxy = RubyPortProxy(ruby_system=self.ruby_system)
        board.connect_system_port(self.ruby_system.sys_port_proxy.in_ports)
