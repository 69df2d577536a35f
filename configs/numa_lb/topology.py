"""The one description of the simulated NUMA machine.

``Topology`` is the single source of truth: the gem5 components, the ACPI tables
(``acpi.py``), the E820 table and the kernel command line are all derived from one
instance, so they cannot disagree. It is frozen and validated on construction;
an invalid value raises ``TopologyError`` naming the parameter and what is allowed,
before any simulation object exists.

Defaults follow the paper's machine (Chiang & Su [Chiang21], Table 4: 4 x AMD Opteron 6320,
2.8 GHz, NUMA factor 1.6) as far as MOESI_hammer can express it, scaled to 4
cores per socket (the paper has 8) to keep simulation affordable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from . import memory_map, numa_factor
from .caches import (
    L1D_DEFAULT_ASSOC,
    L1D_DEFAULT_SIZE,
    L1I_DEFAULT_ASSOC,
    L1I_DEFAULT_SIZE,
    L2_DEFAULT_ASSOC,
    L2_DEFAULT_SIZE,
    L3_PER_SOCKET,
    LINE_SIZE,
    CacheGeometry,
    l2_with_l3_share,
)
from .kernel_cmdline import DEBIAN_HZ, kernel_args
from .memory_map import AddrRange, E820Entry
from .numa_factor import CalibrationTable, InterSocket
from .units import MiB, format_size, parse_frequency, parse_latency_ns, parse_size

SOCKETS_ALLOWED = range(1, 9)
CORES_PER_SOCKET_ALLOWED = range(1, 17)
PAPER_NUMA_FACTOR = 1.6  # numactl on the paper's machine
NUMA_FACTOR_MAX = 10.0
LINK_LATENCY_MAX_CYCLES = 100_000
# HT Assist reserves 1 MiB of each socket's L3 for 4-byte probe-filter entries:
# 256 Ki entries, 4-way, each tracking one 64-byte line.
PROBE_FILTER_DEFAULT_ENTRIES = 256 * 1024
PROBE_FILTER_DEFAULT_ASSOC = 4
# Inter-socket link bandwidth per direction. The paper's machine (4 x Opteron
# 6320, [Chiang21] Table 4) links its sockets with HyperTransport 3.0: 6.4 GT/s
# on a 16-bit link = 12.8 GB/s per direction (gem5's default, 16 B per Ruby
# cycle, is 44.8 GB/s at 2.8 GHz: remote traffic would never be link-limited,
# since one DDR3-1600 channel per node gives 12.8 GB/s).
LINK_BANDWIDTH_DEFAULT_GBPS = 12.8
# Ruby throttles move endpoint_bandwidth * bandwidth_factor / 1000 bytes per
# cycle; endpoint_bandwidth 100 gives link bandwidths in steps of 0.1 B/cycle.
RUBY_ENDPOINT_BANDWIDTH = 100
EXT_LINK_BYTES_PER_CYCLE = 16  # gem5's default for controller <-> router links
MEMORY_TYPES = ("DDR3_1600_8x8", "DDR3_2133_8x8", "DDR4_2400_8x8")


# What a boot fixes in the guest, so a restore must not change it (the rest, e.g.
# caches, link latency and the ROI CPU, may differ): the CPUs and memory the
# kernel enumerated, the SLIT it read from our ACPI tables, and the clock its
# TSC/LAPIC calibration and lpj were taken from (another clock would skew every
# guest-timed elapsed time).
BOOT_FIELDS = (
    "sockets",
    "cores_per_socket",
    "ncpus",
    "mem_per_node",
    "node_ranges",
    "cpu_clock_hz",
    "kernel_hz",
    "slit",
)


def boot_mismatch(boot: dict[str, Any], now: dict[str, Any]) -> str | None:
    """The first boot field (``BOOT_FIELDS``) where two topology records differ, described."""
    for name in BOOT_FIELDS:
        if boot.get(name) != now.get(name):
            was, got = boot.get(name), now.get(name)
            return f"{name}: the checkpoint was booted with {was!r}, this run has {got!r}"
    return None


class TopologyError(ValueError):
    """An invalid machine description; the message starts with the parameter name."""


def parse_gbps(value: str | float, name: str) -> float:
    """A bandwidth in GB/s: a number, or text such as "12.8GB/s" / "12.8 GB/s"."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    num = text[: -len("GB/s")].strip() if text.endswith("GB/s") else text
    try:
        return float(num)
    except ValueError:
        raise ValueError(f"{name}: expected GB/s such as 12.8GB/s, got {value!r}") from None


@dataclass(frozen=True)
class LinkLatency:
    """The inter-socket link latency a run uses, and where it came from."""

    cycles: int
    ns: float
    requested: str  # what the user asked for, e.g. "numa_factor=1.6" or "link_latency=20ns"
    source: str  # "given", "first-order model (uncalibrated)" or the calibration file
    predicted_numa_factor: float  # one hop, from the calibration table or the model


@dataclass(frozen=True)
class Topology:
    sockets: int = 4
    cores_per_socket: int = 4
    mem_per_node: int = 512 * MiB
    cpu_clock_hz: int = 2_800_000_000
    memory_type: str = "DDR3_1600_8x8"
    l1d: CacheGeometry = field(
        default_factory=lambda: CacheGeometry("l1d", L1D_DEFAULT_SIZE, L1D_DEFAULT_ASSOC)
    )
    l1i: CacheGeometry = field(
        default_factory=lambda: CacheGeometry("l1i", L1I_DEFAULT_SIZE, L1I_DEFAULT_ASSOC)
    )
    l2: CacheGeometry = field(
        default_factory=lambda: CacheGeometry("l2", L2_DEFAULT_SIZE, L2_DEFAULT_ASSOC)
    )
    # Grow each L2 by its core's share of the unmodelled 8 MiB socket L3 (caches.py).
    l2_includes_l3_share: bool = False
    probe_filter: bool = True
    probe_filter_entries: int = PROBE_FILTER_DEFAULT_ENTRIES
    probe_filter_assoc: int = PROBE_FILTER_DEFAULT_ASSOC
    inter_socket: InterSocket = InterSocket.FULL
    # At most one of the next three; none means numa_factor = 1.6.
    numa_factor: float | None = None
    link_latency_cycles: int | None = None
    link_latency_ns: float | None = None
    # None: round(10 * f) (f requested, or predicted from a given link latency).
    slit_remote_distance: int | None = None
    calibration: CalibrationTable | None = None
    kernel_hz: int = DEBIAN_HZ
    link_bandwidth_gbps: float = LINK_BANDWIDTH_DEFAULT_GBPS

    # ------------------------------------------------------------------ checks
    def __post_init__(self) -> None:
        self._check_int("sockets", self.sockets, SOCKETS_ALLOWED)
        self._check_int("cores_per_socket", self.cores_per_socket, CORES_PER_SOCKET_ALLOWED)
        if not isinstance(self.mem_per_node, int) or isinstance(self.mem_per_node, bool):
            raise TopologyError(
                f"mem_per_node: must be a byte count (use Topology.from_options for "
                f"strings such as '512MiB'), got {self.mem_per_node!r}"
            )
        if (
            self.mem_per_node % memory_map.NODE_ALIGNMENT
            or not 0 < self.mem_per_node <= memory_map.MAX_NODE_SIZE
        ):
            raise TopologyError(
                f"mem_per_node: must be a multiple of 128MiB from 128MiB to 3GiB (node 0 "
                f"must fit below the PCI hole), got {self._size(self.mem_per_node)}"
            )
        if not isinstance(self.cpu_clock_hz, int) or not (
            100_000_000 <= self.cpu_clock_hz <= 10_000_000_000
        ):
            raise TopologyError(
                f"cpu_clock: must be between 100MHz and 10GHz, got {self.cpu_clock_hz!r} Hz"
            )
        if self.memory_type not in MEMORY_TYPES:
            raise TopologyError(
                f"memory_type: must be one of {', '.join(MEMORY_TYPES)}, got {self.memory_type!r}"
            )
        for name, geometry in (("l1d", self.l1d), ("l1i", self.l1i), ("l2", self.l2)):
            if not isinstance(geometry, CacheGeometry):
                raise TopologyError(f"{name}: must be a CacheGeometry, got {geometry!r}")
        try:
            InterSocket(self.inter_socket)
        except ValueError:
            allowed = ", ".join(k.value for k in InterSocket)
            raise TopologyError(
                f"inter_socket: must be one of {allowed}, got {self.inter_socket!r}"
            ) from None
        object.__setattr__(self, "inter_socket", InterSocket(self.inter_socket))
        try:
            numa_factor.hop_counts(self.sockets, self.inter_socket)
        except ValueError as err:
            raise TopologyError(str(err)) from None
        try:
            CacheGeometry(
                "probe_filter", self.probe_filter_entries * LINE_SIZE, self.probe_filter_assoc
            )
        except ValueError as err:
            raise TopologyError(
                f"probe_filter_entries/probe_filter_assoc: {self.probe_filter_entries} entries "
                f"{self.probe_filter_assoc}-way must form a power-of-two number of sets ({err})"
            ) from None
        bw = self.link_bandwidth_gbps
        if isinstance(bw, bool) or not isinstance(bw, int | float) or not 0.1 <= bw <= 1000:
            raise TopologyError(
                f"link_bandwidth_gbps: must be a number of GB/s from 0.1 to 1000, got {bw!r}"
            )
        self._check_latency_request()
        self._check_slit()
        self._check_int("kernel_hz", self.kernel_hz, (100, 250, 300, 1000))
        if self.calibration is not None and (
            why := self.calibration.mismatch(self.calibration_conditions())
        ):
            raise TopologyError(
                f"calibration: {why}; recalibrate for this machine (./run_all.py --preset "
                "calibration with its machine settings, then ./run_all.py calibrate) or use "
                "the uncalibrated model (--calibration none)"
            )

    @staticmethod
    def _size(nbytes: int) -> str:
        return format_size(nbytes)

    @staticmethod
    def _check_int(name: str, value: Any, allowed: range | tuple[int, ...]) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value not in allowed:
            spelled = (
                f"an integer in {allowed.start}..{allowed.stop - 1}"
                if isinstance(allowed, range)
                else f"one of {', '.join(map(str, allowed))}"
            )
            raise TopologyError(f"{name}: must be {spelled}, got {value!r}")

    def _check_latency_request(self) -> None:
        given = [
            n
            for n in ("numa_factor", "link_latency_cycles", "link_latency_ns")
            if getattr(self, n) is not None
        ]
        if len(given) > 1:
            raise TopologyError(
                f"{'/'.join(given)}: give either a target numa_factor or one link latency "
                "(cycles or ns), not several"
            )
        f = self.numa_factor
        if f is not None and not (
            isinstance(f, int | float) and 1.0 < f <= NUMA_FACTOR_MAX and math.isfinite(f)
        ):
            raise TopologyError(
                f"numa_factor: must be a number in (1.0, {NUMA_FACTOR_MAX}], got {f!r}"
            )
        c = self.link_latency_cycles
        if c is not None and (
            isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= LINK_LATENCY_MAX_CYCLES
        ):
            raise TopologyError(
                f"link_latency_cycles: must be an integer in 1..{LINK_LATENCY_MAX_CYCLES}, "
                f"got {c!r}"
            )
        ns = self.link_latency_ns
        if ns is not None and not (isinstance(ns, int | float) and 0 < ns <= 10_000):
            raise TopologyError(f"link_latency_ns: must be in (0, 10000] ns, got {ns!r}")
        # Resolving fails here (e.g. factor outside the calibration table), not later.
        try:
            self.link_latency()
        except ValueError as err:
            raise TopologyError(str(err)) from None

    def _check_slit(self) -> None:
        d = self.slit_remote_distance
        if d is not None and (
            isinstance(d, bool)
            or not isinstance(d, int)
            or not numa_factor.LOCAL_DISTANCE < d <= numa_factor.MAX_DISTANCE
        ):
            raise TopologyError(
                f"slit_remote_distance: must be an integer in 11..{numa_factor.MAX_DISTANCE} "
                f"(10 is the local distance; Linux rejects a SLIT with remote <= 10), got {d!r}"
            )
        farthest = max(max(row) for row in self.hops())
        worst = numa_factor.LOCAL_DISTANCE + farthest * (self.slit_distance - 10)
        if worst > numa_factor.MAX_DISTANCE:
            raise TopologyError(
                f"slit_remote_distance: {self.slit_distance} per hop over {farthest} hops of a "
                f"{self.inter_socket.value} topology gives {worst} > {numa_factor.MAX_DISTANCE}"
            )

    # ------------------------------------------------------------ construction
    @classmethod
    def from_options(
        cls,
        *,
        mem_per_node: str | int | None = None,
        cpu_clock: str | int | None = None,
        link_latency: str | int | None = None,
        l1d_size: str | None = None,
        l1i_size: str | None = None,
        l2_size: str | None = None,
        link_bandwidth: str | float | None = None,
        **kwargs: Any,
    ) -> Topology:
        """Build from human-written values: "1GiB", "2.8GHz", "20ns" or cycles (int).

        ``link_latency`` given as an int (or a digit string) means cycles, with a
        time unit it means nanoseconds. Cache sizes keep the default associativity.
        """
        try:
            if mem_per_node is not None:
                kwargs["mem_per_node"] = parse_size(mem_per_node, "mem_per_node")
            if cpu_clock is not None:
                kwargs["cpu_clock_hz"] = parse_frequency(cpu_clock, "cpu_clock")
            if link_bandwidth is not None:
                kwargs["link_bandwidth_gbps"] = parse_gbps(link_bandwidth, "link_bandwidth")
            if link_latency is not None:
                if isinstance(link_latency, int) or str(link_latency).strip().isdigit():
                    kwargs["link_latency_cycles"] = int(link_latency)
                else:
                    kwargs["link_latency_ns"] = parse_latency_ns(link_latency, "link_latency")
            for name, text, assoc in (
                ("l1d", l1d_size, L1D_DEFAULT_ASSOC),
                ("l1i", l1i_size, L1I_DEFAULT_ASSOC),
                ("l2", l2_size, L2_DEFAULT_ASSOC),
            ):
                if text is not None:
                    kwargs[name] = CacheGeometry(name, parse_size(text, f"{name}_size"), assoc)
        except ValueError as err:
            raise TopologyError(str(err)) from None
        return cls(**kwargs)

    # ------------------------------------------------------------------- CPUs
    @property
    def ncpus(self) -> int:
        return self.sockets * self.cores_per_socket

    def socket_of_cpu(self, cpu: int) -> int:
        """CPUs are numbered socket-major: socket s has s*cores .. (s+1)*cores-1."""
        if not 0 <= cpu < self.ncpus:
            raise IndexError(f"cpu {cpu} out of range 0..{self.ncpus - 1}")
        return cpu // self.cores_per_socket

    def cpus_of_socket(self, socket: int) -> list[int]:
        return list(range(socket * self.cores_per_socket, (socket + 1) * self.cores_per_socket))

    def apic_id(self, cpu: int) -> int:
        """gem5 x86 sets initialApicId = contextId = cpu index."""
        self.socket_of_cpu(cpu)  # range check
        return cpu

    @property
    def io_apic_id(self) -> int:
        """The first id after the local APICs, as gem5's X86Board assigns it."""
        return self.ncpus

    # ------------------------------------------------------------------ caches
    @property
    def l2_effective(self) -> CacheGeometry:
        if self.l2_includes_l3_share:
            return l2_with_l3_share(self.l2, self.cores_per_socket, L3_PER_SOCKET)
        return self.l2

    @property
    def probe_filter_size(self) -> int:
        """Ruby sizes the probe filter in bytes of tracked lines: entries * 64."""
        return self.probe_filter_entries * LINE_SIZE

    # ------------------------------------------------------------------ memory
    @property
    def total_memory(self) -> int:
        return self.sockets * self.mem_per_node

    def node_ranges(self) -> list[AddrRange]:
        return memory_map.node_ranges(self.sockets, self.mem_per_node)

    def e820(self) -> list[E820Entry]:
        return memory_map.e820_entries(self.node_ranges())

    # ------------------------------------------------------- links, distances
    def hops(self) -> list[list[int]]:
        return numa_factor.hop_counts(self.sockets, self.inter_socket)

    def links(self) -> list[tuple[int, int]]:
        return numa_factor.links(self.sockets, self.inter_socket)

    @property
    def local_latency_cycles(self) -> float:
        return numa_factor.LOCAL_LATENCY_ESTIMATE_NS * self.cpu_clock_hz / 1e9

    def link_latency(self) -> LinkLatency:
        """Resolve the requested factor or latency into whole Ruby cycles."""
        cal = self.calibration
        source = cal.source if cal else "first-order model (uncalibrated)"

        def factor_of(cycles: int) -> float:
            if cal:
                try:
                    return cal.factor(cycles)
                except ValueError:
                    # a link latency given outside the table (the calibration's own
                    # runs, say): the first-order model predicts; never refused
                    if source != "given":
                        raise
            return numa_factor.model_factor(cycles, self.local_latency_cycles)

        if self.link_latency_cycles is not None:
            cycles = self.link_latency_cycles
            requested = f"link_latency_cycles={cycles}"
            source = "given"
        elif self.link_latency_ns is not None:
            cycles = numa_factor.ns_to_cycles(self.link_latency_ns, self.cpu_clock_hz)
            requested = f"link_latency_ns={self.link_latency_ns:g}"
            source = "given"
        else:
            f = self.numa_factor if self.numa_factor is not None else PAPER_NUMA_FACTOR
            requested = f"numa_factor={f:g}"
            if cal:
                cycles = cal.link_cycles(f)
            else:
                cycles = numa_factor.model_link_cycles(f, self.local_latency_cycles)
        return LinkLatency(
            cycles=cycles,
            ns=numa_factor.cycles_to_ns(cycles, self.cpu_clock_hz),
            requested=requested,
            source=source,
            predicted_numa_factor=factor_of(cycles),
        )

    @property
    def link_bandwidth_factor(self) -> int:
        """Ruby bandwidth_factor of an inter-socket link (with RUBY_ENDPOINT_BANDWIDTH)."""
        per_cycle = self.link_bandwidth_gbps * 1e9 / self.cpu_clock_hz
        return max(1, round(per_cycle * 1000 / RUBY_ENDPOINT_BANDWIDTH))

    @property
    def link_bandwidth_resolved_gbps(self) -> float:
        """The bandwidth Ruby really models after rounding to its units."""
        per_cycle = self.link_bandwidth_factor * RUBY_ENDPOINT_BANDWIDTH / 1000
        return per_cycle * self.cpu_clock_hz / 1e9

    def calibration_conditions(self) -> dict[str, str]:
        """What a measured NUMA factor depends on besides the link latency.

        A calibration table holds for the machine it was measured on: the clock
        (latencies are in cycles), the DRAM, the probe filter (without it every
        miss broadcasts probes), the link bandwidth (serialization of the data
        response), the shape of the machine.
        """
        return {
            "sockets": str(self.sockets),
            "cores_per_socket": str(self.cores_per_socket),
            "cpu_clock_hz": str(self.cpu_clock_hz),
            "memory_type": self.memory_type,
            "probe_filter": str(int(self.probe_filter)),
            "inter_socket": self.inter_socket.value,
            "link_bandwidth_factor": str(self.link_bandwidth_factor),
        }

    @property
    def target_numa_factor(self) -> float:
        """The one-hop factor asked for, or predicted from a given link latency."""
        if self.link_latency_cycles is None and self.link_latency_ns is None:
            return self.numa_factor if self.numa_factor is not None else PAPER_NUMA_FACTOR
        return self.link_latency().predicted_numa_factor

    @property
    def slit_distance(self) -> int:
        """SLIT distance for one hop."""
        if self.slit_remote_distance is not None:
            return self.slit_remote_distance
        return numa_factor.default_slit_remote_distance(self.target_numa_factor)

    def slit(self) -> list[list[int]]:
        return numa_factor.slit_matrix(self.hops(), self.slit_distance)

    # ------------------------------------------------------------------ kernel
    def kernel_args(self) -> list[str]:
        return kernel_args(self.cpu_clock_hz, self.kernel_hz)

    # ------------------------------------------------------------------ record
    def to_record(self) -> dict[str, Any]:
        """JSON-ready description for the run record (requested and resolved values)."""
        link = self.link_latency()
        l2 = self.l2_effective
        return {
            "sockets": self.sockets,
            "cores_per_socket": self.cores_per_socket,
            "ncpus": self.ncpus,
            "mem_per_node": format_size(self.mem_per_node),
            "memory_type": self.memory_type,
            "cpu_clock_hz": self.cpu_clock_hz,
            "l1d": {"size": self.l1d.size_str, "assoc": self.l1d.assoc},
            "l1i": {"size": self.l1i.size_str, "assoc": self.l1i.assoc},
            "l2": {"size": l2.size_str, "assoc": l2.assoc},
            "l2_includes_l3_share": self.l2_includes_l3_share,
            "probe_filter": self.probe_filter,
            "probe_filter_entries": self.probe_filter_entries,
            "probe_filter_assoc": self.probe_filter_assoc,
            "inter_socket": self.inter_socket.value,
            "numa_factor_requested": self.numa_factor,
            "link_latency_requested": link.requested,
            "link_latency_cycles": link.cycles,
            "link_latency_ns": link.ns,
            "link_latency_source": link.source,
            "link_bandwidth_gbps": self.link_bandwidth_gbps,
            "link_bandwidth_gbps_modelled": round(self.link_bandwidth_resolved_gbps, 4),
            "link_bandwidth_factor": self.link_bandwidth_factor,
            "calibration_conditions": self.calibration_conditions(),
            "numa_factor_predicted": link.predicted_numa_factor,
            "slit_remote_distance": self.slit_distance,
            "kernel_hz": self.kernel_hz,
            "slit": self.slit(),
            "node_ranges": [[r.start, r.end] for r in self.node_ranges()],
            "kernel_args": self.kernel_args(),
        }
