"""QEMU's view of a ``Topology``: ``-smp``, ``-m``, per-node memory and ``-numa``.

The same object that builds the gem5 machine and its ACPI tables sets QEMU's
NUMA layout, so the two backends cannot disagree on CPUs, node memory or the
SLIT. QEMU writes its own SRAT/SLIT from these arguments.
"""

from __future__ import annotations

from .topology import Topology
from .units import MiB

# The QEMU test guest of the kernel and image tiers: small and quick under TCG.
QEMU_GUEST_NODES = 4
QEMU_GUEST_CPUS_PER_NODE = 2
QEMU_GUEST_MEM_PER_NODE_MIB = 256
QEMU_GUEST_DISTANCE = 16


def guest_topology(
    nodes: int = QEMU_GUEST_NODES,
    cpus_per_node: int = QEMU_GUEST_CPUS_PER_NODE,
    mem_per_node_mib: int = QEMU_GUEST_MEM_PER_NODE_MIB,
    distance: int = QEMU_GUEST_DISTANCE,
) -> Topology:
    """The QEMU test guest as a ``Topology`` (SLIT distance given, not derived)."""
    return Topology(
        sockets=nodes,
        cores_per_socket=cpus_per_node,
        mem_per_node=mem_per_node_mib * MiB,
        slit_remote_distance=distance,
    )


def cpulist(topo: Topology, node: int) -> str:
    """The node's CPUs in the kernel's cpulist format (``0-1``), as sysfs prints them."""
    cpus = topo.cpus_of_socket(node)
    first, last = cpus[0], cpus[-1]
    return str(first) if first == last else f"{first}-{last}"


def qemu_args(topo: Topology) -> list[str]:
    """-smp/-m, one RAM backend and ``-numa node`` per socket, ``-numa dist`` from the SLIT."""
    mib = topo.mem_per_node // MiB
    args = [
        "-smp",
        f"{topo.ncpus},sockets={topo.sockets},cores={topo.cores_per_socket},threads=1",
        "-m",
        f"{topo.sockets * mib}M",
    ]
    for n in range(topo.sockets):
        args += [
            "-object",
            f"memory-backend-ram,id=m{n},size={mib}M",
            "-numa",
            f"node,nodeid={n},cpus={cpulist(topo, n)},memdev=m{n}",
        ]
    slit = topo.slit()
    for a in range(topo.sockets):
        for b in range(topo.sockets):
            # QEMU mirrors src->dst to dst->src unless the reverse is given too.
            if a != b and (a < b or slit[a][b] != slit[b][a]):
                args += ["-numa", f"dist,src={a},dst={b},val={slit[a][b]}"]
    return args
