"""Per-node DRAM for the NUMA board (gem5 stdlib memory component).

One memory controller with one DRAM channel per node, each owning exactly its
node's contiguous range, so that the MOESI_hammer directory of socket s talks to
the memory of node s only. (The Opteron has two channels per node; one channel is
a simplification, recorded in configs/README.md.)
"""

from __future__ import annotations

from collections.abc import Sequence

import m5.objects
from gem5.components.boards.abstract_board import AbstractBoard
from gem5.components.memory.abstract_memory_system import AbstractMemorySystem
from gem5.utils.override import overrides
from m5.objects import AddrRange, MemCtrl, Port

from .topology import Topology


class NumaMemory(AbstractMemorySystem):
    """``topology.sockets`` controllers of ``topology.mem_per_node`` each."""

    def __init__(self, topology: Topology) -> None:
        super().__init__()
        self._topology = topology
        dram_class = getattr(m5.objects, topology.memory_type)
        self.mem_ctrl = [MemCtrl(dram=dram_class()) for _ in range(topology.sockets)]

    @overrides(AbstractMemorySystem)
    def incorporate_memory(self, board: AbstractBoard) -> None:
        pass  # the cache hierarchy connects each controller to its directory

    @overrides(AbstractMemorySystem)
    def get_mem_ports(self) -> Sequence[tuple[AddrRange, Port]]:
        return [(ctrl.dram.range, ctrl.port) for ctrl in self.mem_ctrl]

    @overrides(AbstractMemorySystem)
    def get_memory_controllers(self) -> list[MemCtrl]:
        return list(self.mem_ctrl)

    @overrides(AbstractMemorySystem)
    def get_size(self) -> int:
        return self._topology.total_memory

    @overrides(AbstractMemorySystem)
    def set_memory_range(self, ranges: list[AddrRange]) -> None:
        """One range per node, in node order, each exactly ``mem_per_node`` long."""
        if len(ranges) != len(self.mem_ctrl):
            raise ValueError(f"memory: {len(ranges)} ranges given for {len(self.mem_ctrl)} nodes")
        for node, (ctrl, rng) in enumerate(zip(self.mem_ctrl, ranges, strict=True)):
            if rng.size() != self._topology.mem_per_node:
                raise ValueError(
                    f"memory: node {node} range {rng} is not mem_per_node "
                    f"({self._topology.mem_per_node} bytes) long"
                )
            ctrl.dram.range = rng

    @overrides(AbstractMemorySystem)
    def get_uninterleaved_range(self) -> list[AddrRange]:
        return [ctrl.dram.range for ctrl in self.mem_ctrl]
