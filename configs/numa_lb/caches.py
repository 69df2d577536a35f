"""Per-core cache geometry of the modelled AMD Opteron 6320 (Piledriver).

MOESI_hammer has exactly three private levels per core (L1I, L1D, L2) and no
shared L3, so the Opteron's per-pair and per-socket structures are turned into
per-core equivalents:

* L1D: 16 KiB, 4-way per core (as on the chip).
* L1I: the 64 KiB, 2-way instruction cache is shared by a core pair (a "module");
  each core gets half: 32 KiB, 2-way.
* L2: 2 MiB, 16-way per module; each core gets half: 1 MiB, 16-way.
* L3: 8 MiB per socket is not modelled. The optional ``l3_share`` variant grows
  every L2 by the core's share of it:

      l2_size = 1 MiB + floor((8 MiB / cores_per_socket) / way) * way
      l2_assoc = 16 + (l2_size - 1 MiB) / way,       way = 1 MiB / 16 = 64 KiB

  i.e. the extra capacity is added as whole ways of the base L2 so the set count
  stays a power of two (1024 sets). 4 cores/socket -> 3 MiB, 48-way;
  8 cores/socket -> 2 MiB, 32-way; 3 cores/socket -> 3712 KiB, 58-way.

Ruby's CacheMemory indexes with floor(log2(sets)) bits, so a set count that is
not a power of two would silently leave sets unused; ``CacheGeometry`` rejects it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import KiB, MiB, format_size

LINE_SIZE = 64

L1D_DEFAULT_SIZE = 16 * KiB
L1D_DEFAULT_ASSOC = 4
L1I_DEFAULT_SIZE = 32 * KiB  # half of the 64 KiB shared by a core pair
L1I_DEFAULT_ASSOC = 2
L2_DEFAULT_SIZE = 1 * MiB  # half of the 2 MiB shared by a core pair
L2_DEFAULT_ASSOC = 16
L3_PER_SOCKET = 8 * MiB  # not modelled by MOESI_hammer; see l2_with_l3_share()


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True)
class CacheGeometry:
    """One cache: capacity in bytes and associativity (64-byte lines)."""

    name: str
    size: int
    assoc: int

    def __post_init__(self) -> None:
        if self.assoc < 1:
            raise ValueError(f"{self.name}_assoc: must be >= 1, got {self.assoc}")
        if self.size % (self.assoc * LINE_SIZE):
            raise ValueError(
                f"{self.name}_size: {format_size(self.size)} is not a whole number of "
                f"{self.assoc}-way sets of {LINE_SIZE}-byte lines"
            )
        if not _is_power_of_two(self.sets) or self.sets < 2:
            raise ValueError(
                f"{self.name}_size/{self.name}_assoc: {format_size(self.size)} "
                f"{self.assoc}-way gives {self.sets} sets; Ruby needs a power of two >= 2"
            )

    @property
    def sets(self) -> int:
        return self.size // (self.assoc * LINE_SIZE)

    @property
    def size_str(self) -> str:
        return format_size(self.size)


def l2_with_l3_share(
    l2: CacheGeometry, cores_per_socket: int, l3_per_socket: int = L3_PER_SOCKET
) -> CacheGeometry:
    """The L2 grown by this core's share of the socket L3, in whole base-L2 ways."""
    way = l2.size // l2.assoc
    extra_ways = (l3_per_socket // cores_per_socket) // way
    return CacheGeometry(name=l2.name, size=l2.size + extra_ways * way, assoc=l2.assoc + extra_ways)
