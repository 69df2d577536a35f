"""NUMA x86 board: gem5 stdlib X86Board plus per-node memory and our firmware.

What it changes relative to gem5 v24.0.0.1's ``X86Board`` (stock gem5, no
source changes):

* memory: one range per node from ``Topology.node_ranges()`` (RAM beyond 3 GiB
  continues above 4 GiB; the stock board refuses more than 3 GiB);
* E820: ``Topology.e820()`` replaces the stock table;
* ACPI: gem5 writes no SRAT/SLIT/MADT for x86, so the blob from ``acpi.py`` is
  written to the output directory and loaded at 0xE0000 as a raw
  ``KernelWorkload`` extra; gem5's own RSDP is disabled
  (``acpi_description_table_pointer = NULL``) so Linux finds ours. gem5's MP
  table and SMBIOS at 0xF0000 stay; Linux prefers the MADT when there is one;
* kernel command line: ``Topology.kernel_args()`` (stdlib default; study runs pass
  ``kernel_cmdline.guest_args``), root on /dev/sda (libata);
* the resolved topology (requested and calibrated NUMA factor, link latency,
  SLIT, node ranges) is written to ``numa_topology.json`` in the output directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import m5
from gem5.components.boards.kernel_disk_workload import KernelDiskWorkload
from gem5.components.boards.x86_board import X86Board
from gem5.components.cachehierarchies.abstract_cache_hierarchy import AbstractCacheHierarchy
from gem5.components.memory.abstract_memory_system import AbstractMemorySystem
from gem5.components.processors.abstract_processor import AbstractProcessor
from gem5.utils.override import overrides
from m5.objects import AddrRange, X86E820Entry
from m5.params import NULL

from . import acpi
from .kernel_cmdline import ROOT_DEVICE
from .memory_map import PCI_HOLE_START, ram_ranges
from .numa_memory import NumaMemory
from .topology import Topology

ACPI_BLOB_NAME = "numa_acpi.bin"
TOPOLOGY_RECORD_NAME = "numa_topology.json"


class NumaX86Board(X86Board):
    def __init__(
        self,
        topology: Topology,
        processor: AbstractProcessor,
        cache_hierarchy: AbstractCacheHierarchy,
        memory: AbstractMemorySystem | None = None,
        output_dir: Path | None = None,
    ) -> None:
        # Read by _setup_memory_ranges/_setup_board, which X86Board's constructor calls.
        self._topology = topology
        self._output_dir = Path(output_dir or m5.options.outdir)
        if processor.get_num_cores() != topology.ncpus:
            raise ValueError(
                f"processor: has {processor.get_num_cores()} cores, the topology "
                f"{topology.sockets} x {topology.cores_per_socket} = {topology.ncpus}"
            )
        super().__init__(
            clk_freq=f"{topology.cpu_clock_hz}Hz",
            processor=processor,
            memory=memory if memory is not None else NumaMemory(topology),
            cache_hierarchy=cache_hierarchy,
        )

    def get_topology(self) -> Topology:
        return self._topology

    @overrides(X86Board)
    def _setup_memory_ranges(self) -> None:
        topo = self._topology
        memory = self.get_memory()
        if memory.get_size() != topo.total_memory:
            raise ValueError(
                f"memory: {memory.get_size()} bytes, the topology needs {topo.total_memory}"
            )
        nodes = topo.node_ranges()
        memory.set_memory_range([AddrRange(start=r.start, size=r.size) for r in nodes])
        # Same extra I/O range at the start of the hole as the stock X86Board.
        self.mem_ranges = [AddrRange(start=r.start, size=r.size) for r in ram_ranges(nodes)] + [
            AddrRange(PCI_HOLE_START, size=0x100000)
        ]

    @overrides(X86Board)
    def _setup_board(self) -> None:
        super()._setup_board()
        topo = self._topology
        self.workload.e820_table.entries = [
            X86E820Entry(addr=e.addr, size=f"{e.size}B", range_type=int(e.type))
            for e in topo.e820()
        ]
        blob = acpi.build_blob(topo)
        self._output_dir.mkdir(parents=True, exist_ok=True)
        blob_path = blob.write(self._output_dir / ACPI_BLOB_NAME)
        self.workload.acpi_description_table_pointer = NULL
        self.workload.extras = [str(blob_path)]
        self.workload.extras_addrs = [blob.base]
        record = topo.to_record() | {"acpi_blob": str(blob_path), "acpi_base": blob.base}
        (self._output_dir / TOPOLOGY_RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n")

    @overrides(KernelDiskWorkload)
    def get_disk_device(self) -> str:
        # The stock X86Board says /dev/hda (the old IDE driver); our kernel drives
        # gem5's PIIX IDE controller with libata (CONFIG_ATA_PIIX), as QEMU's.
        return ROOT_DEVICE

    @overrides(KernelDiskWorkload)
    def get_default_kernel_args(self) -> list[str]:
        return self._topology.kernel_args()
