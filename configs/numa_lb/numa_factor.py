"""Inter-socket topology, hop counts, SLIT distances and NUMA-factor arithmetic.

NUMA factor f = remote load-to-use latency / local load-to-use latency for a load
that misses every cache (the definition numactl and the paper use).

Link latency <-> f. A load that misses the private caches travels
requester -> home directory -> DRAM -> requester. If the home socket is h hops
away, the request and the data response each cross h inter-socket links and h
extra routers, so to first order

    remote - local = 2 * h * (link_latency + router_latency)          [cycles]
    f(h) = 1 + 2 * h * (link_latency + router_latency) / local

This holds with the probe filter on (an uncached line needs no probes). With the
probe filter off, MOESI_hammer broadcasts probes to every socket even for local
lines, so the local latency itself grows with the link latency; only a measured
calibration table is right then. The first-order model needs the local latency,
which only a run can tell; ``LOCAL_LATENCY_ESTIMATE_NS`` is a pre-calibration
estimate (DDR3-1600 closed-row read plus controller and Ruby overheads) and every
result that comes from it is labelled "uncalibrated". A ``CalibrationTable``
produced by the calibration benchmark replaces it.

Latencies are in cycles of the Ruby clock, which the board runs at the CPU clock.

SLIT: 10 on the diagonal; one hop costs ``slit_remote_distance`` (default
round(10 * f), at least 11 because Linux rejects a SLIT with an off-diagonal
entry <= 10); h hops cost 10 + h * (slit_remote_distance - 10), linear like the
latency model. The SLIT distance is a parameter of its own because Linux treats
distances above 30 (RECLAIM_DISTANCE) differently, so sweeps may need to hold it
fixed while f varies.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

LOCAL_DISTANCE = 10
MAX_DISTANCE = 254  # 255 means "unreachable" in the SLIT
RECLAIM_DISTANCE = 30  # Linux: distances above this change sched-domain flags
ROUTER_LATENCY_CYCLES = 1  # gem5 SimpleNetwork default router_latency
LOCAL_LATENCY_ESTIMATE_NS = 70.0  # uncalibrated estimate, see module docstring
CONDITIONS_PREFIX = "# conditions:"


class InterSocket(StrEnum):
    """How the sockets' routers are linked."""

    FULL = "full"  # a direct link between every pair (the paper's 4-socket board)
    RING = "ring"  # socket i linked to i-1 and i+1 (mod n)
    # 4 AMD Opteron G34 packages of two dies each, every die a node: 8 "sockets"
    # linked as the published 4P SLIT says (G34_4P_SLIT), one or two hops apart
    G34 = "g34"


# numactl --hardware of a 4-socket AMD Opteron 6100 (G34, two dies per package:
# 8 nodes), as published by K. Closson, "You Buy a NUMA System, Oracle Says
# Disable NUMA! What Gives? Part III" (kevinclosson.net, 2010-03-31). The 6300
# of the paper [Chiang21] sits in the same G34 platform. 16 = one HyperTransport
# hop, 22 = two: the pairs at 16 are the links.
G34_4P_SLIT = (
    (10, 16, 16, 22, 16, 22, 16, 22),
    (16, 10, 22, 16, 16, 22, 22, 16),
    (16, 22, 10, 16, 16, 16, 16, 16),
    (22, 16, 16, 10, 16, 16, 22, 22),
    (16, 16, 16, 16, 10, 16, 16, 22),
    (22, 22, 16, 16, 16, 10, 22, 16),
    (16, 22, 16, 22, 16, 22, 10, 16),
    (22, 16, 16, 22, 22, 16, 16, 10),
)


def hop_counts(sockets: int, kind: InterSocket) -> list[list[int]]:
    """Minimum number of inter-socket links between every pair of sockets."""
    if kind is InterSocket.FULL:
        return [[0 if i == j else 1 for j in range(sockets)] for i in range(sockets)]
    if kind is InterSocket.RING:
        return [
            [min(abs(i - j), sockets - abs(i - j)) for j in range(sockets)] for i in range(sockets)
        ]
    if kind is InterSocket.G34:
        if sockets != len(G34_4P_SLIT):
            raise ValueError(
                f"inter_socket g34 is the 8-node layout of 4 G34 packages: sockets must be "
                f"{len(G34_4P_SLIT)}, got {sockets}"
            )
        return [[(d - LOCAL_DISTANCE) // 6 for d in row] for row in G34_4P_SLIT]
    raise ValueError(f"inter_socket: unknown kind {kind!r}")


def links(sockets: int, kind: InterSocket) -> list[tuple[int, int]]:
    """Undirected socket pairs (a < b) joined by a physical link."""
    hops = hop_counts(sockets, kind)
    return [(a, b) for a in range(sockets) for b in range(a + 1, sockets) if hops[a][b] == 1]


def default_slit_remote_distance(numa_factor: float) -> int:
    """round(10 * f), half away from zero, never below 11 (Linux needs > 10)."""
    return max(LOCAL_DISTANCE + 1, math.floor(LOCAL_DISTANCE * numa_factor + 0.5))


def slit_matrix(hops: list[list[int]], remote_distance: int) -> list[list[int]]:
    step = remote_distance - LOCAL_DISTANCE
    return [[LOCAL_DISTANCE + h * step for h in row] for row in hops]


def ns_to_cycles(ns: float, clock_hz: int) -> int:
    """Nearest whole cycle (Ruby link latencies are integers), at least 1."""
    return max(1, round(ns * clock_hz / 1e9))


def cycles_to_ns(cycles: float, clock_hz: int) -> float:
    return cycles * 1e9 / clock_hz


def model_factor(link_cycles: float, local_cycles: float, hops: int = 1) -> float:
    """First-order NUMA factor of a load whose home is ``hops`` links away."""
    return 1.0 + 2.0 * hops * (link_cycles + ROUTER_LATENCY_CYCLES) / local_cycles


def model_link_cycles(numa_factor: float, local_cycles: float) -> int:
    """Inverse of ``model_factor`` for one hop, rounded to a whole cycle >= 1."""
    exact = (numa_factor - 1.0) * local_cycles / 2.0 - ROUTER_LATENCY_CYCLES
    return max(1, round(exact))


@dataclass(frozen=True)
class CalibrationTable:
    """Measured one-hop NUMA factor as a function of link latency (cycles).

    Produced by the calibration benchmark; the inverse is taken by piecewise
    linear interpolation, so the measured factor must rise strictly with latency.
    """

    points: tuple[tuple[int, float], ...]
    source: str
    # The machine the table was measured on (Topology.calibration_conditions()
    # names): a table applies only to a machine with the same conditions.
    conditions: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if len(self.points) < 2:
            raise ValueError(f"calibration {self.source}: needs at least two points")
        for (c0, f0), (c1, f1) in zip(self.points, self.points[1:], strict=False):
            if not (c1 > c0 and f1 > f0):
                raise ValueError(
                    f"calibration {self.source}: link latency and measured factor must both "
                    f"increase strictly; ({c0}, {f0}) is followed by ({c1}, {f1})"
                )

    @classmethod
    def from_csv(cls, path: Path) -> CalibrationTable:
        """CSV with header ``link_latency_cycles,measured_numa_factor``; ``#`` lines are notes,
        and one ``# conditions: key=value ...`` line states the machine it was measured on."""
        with path.open(newline="") as fh:
            lines = list(fh)
        conditions: tuple[tuple[str, str], ...] = ()
        for line in lines:
            if line.startswith(CONDITIONS_PREFIX):
                pairs = [kv.split("=", 1) for kv in line[len(CONDITIONS_PREFIX) :].split()]
                if any(len(kv) != 2 for kv in pairs):
                    raise ValueError(f"{path}: conditions must be key=value words: {line!r}")
                conditions = tuple(sorted((k, v) for k, v in pairs))
        rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
        points = tuple(
            sorted((int(r["link_latency_cycles"]), float(r["measured_numa_factor"])) for r in rows)
        )
        return cls(points=points, source=str(path), conditions=conditions)

    def mismatch(self, machine: dict[str, str]) -> str | None:
        """The first condition the machine does not meet, described; None if it applies."""
        if not self.conditions:
            return f"{self.source} states no measurement conditions"
        for key, value in self.conditions:
            if machine.get(key) != value:
                return (
                    f"{self.source} was measured with {key}={value}, "
                    f"this machine has {key}={machine.get(key)}"
                )
        return None

    def factor(self, link_cycles: float) -> float:
        return self._interpolate(link_cycles, 0, 1)

    def link_cycles(self, numa_factor: float) -> int:
        return max(1, round(self._interpolate(numa_factor, 1, 0)))

    def _interpolate(self, x: float, xi: int, yi: int) -> float:
        pts = self.points
        lo, hi = pts[0][xi], pts[-1][xi]
        if not lo <= x <= hi:
            what = "link latency" if xi == 0 else "numa_factor"
            raise ValueError(
                f"{what}: {x} is outside the calibrated range [{lo}, {hi}] of {self.source}"
            )
        for p0, p1 in zip(pts, pts[1:], strict=False):
            if p0[xi] <= x <= p1[xi]:
                t = (x - p0[xi]) / (p1[xi] - p0[xi])
                return p0[yi] + t * (p1[yi] - p0[yi])
        raise AssertionError("unreachable: x is inside the table range")
