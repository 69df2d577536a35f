"""A sweep point (one run's inputs) and the content-addressed run id.

``SweepPoint`` is a plain serializable dataclass: ``to_dict()`` / ``from_dict()``
round-trip through JSON exactly. The run id is the SHA-256 of the canonical JSON
of every input that changes the result:

* the point itself (all of its fields, the resolved programs included),
* ``Provenance``: kernel build id (build.json), image id, the backend's code
  revision (hash of the configs/ tree; for qemu also disk-image/qemu_boot.py and
  the QEMU version) and, for gem5, the binary's SHA-256 and version.

Resources (CPUs, memory, time limit) and paths are deliberately not hashed: they
change where and how fast a run happens, not its result. Canonical JSON: keys
sorted, no whitespace, floats as Python's shortest repr, ASCII only.
"""

from __future__ import annotations

import hashlib
import json
import operator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

POINT_SCHEMA = 2  # 2: numa_balancing
# The stock policy is the unmodified kernel (kbuild variant "stock"): the
# point keeps the sweep's kernel_variant (its configuration), the policy
# decides what boots, and the run id hashes that kernel's build id.
STOCK_POLICY = "stock"
STOCK_KERNEL = "stock"
ID_LEN_DIR = 16  # run directory name = first 16 hex digits of the run id


def boot_variant(repeat: int, machine: dict[str, Any]) -> int:
    """Which of a machine's boot checkpoints repeat ``repeat`` restores:
    repeat % machine.boot_checkpoints (absent: 1 checkpoint, variant 0)."""
    return repeat % int(machine.get("boot_checkpoints", 1))


def canonical_json(obj: Any) -> str:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


@dataclass
class SweepPoint:
    backend: str  # qemu | gem5 (resolved, never "auto")
    policy: str
    sockets: int
    cores_per_socket: int
    numa_factor: float | None
    link_latency: str | None
    threads: int
    mix: str
    repeat: int
    kernel_variant: str = "release"
    # kernel.numa_balancing in the guest (autonuma: always 1)
    numa_balancing: int = 0
    machine: dict[str, Any] = field(default_factory=dict)
    job_options: dict[str, Any] = field(default_factory=dict)
    programs: list[dict[str, Any]] = field(default_factory=list)
    cpu: dict[str, str] | None = None  # gem5 only
    gem5: dict[str, Any] | None = None  # gem5 only: script, args, checkpoint
    schema: int = POINT_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepPoint:
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown point fields {sorted(unknown)}")
        return cls(**d)

    @property
    def boot_kernel(self) -> str:
        """The kernel variant this point boots."""
        return STOCK_KERNEL if self.policy == STOCK_POLICY else self.kernel_variant

    # Short labels for listings and reports.
    @property
    def latency_label(self) -> str:
        return (
            f"f={self.numa_factor:g}"
            if self.numa_factor is not None
            else f"link={self.link_latency}"
        )

    def label(self) -> str:
        return (
            f"{self.policy} {self.sockets}x{self.cores_per_socket} {self.latency_label} "
            f"t={self.threads} {self.mix} r{self.repeat}"
        )

    def as_columns(self) -> dict[str, Any]:
        """The flat spec fields used as frame columns (nested settings omitted)."""
        return {
            "backend": self.backend,
            "policy": self.policy,
            "sockets": self.sockets,
            "cores_per_socket": self.cores_per_socket,
            "numa_factor": self.numa_factor,
            "link_latency": self.link_latency,
            "threads": self.threads,
            "mix": self.mix,
            "repeat": self.repeat,
            "kernel_variant": self.kernel_variant,
            "numa_balancing": self.numa_balancing,
            "pinning": self.job_options.get("pinning"),
        }


@dataclass
class Provenance:
    """Ids of the artifacts a run depends on; all of it enters the run id."""

    backend: str
    kernel_build_id: str
    image_id: str
    code_revision: dict[str, str]  # name -> sha256 (configs tree, qemu_boot.py, ...)
    tool_version: str  # "QEMU emulator version 7.2.x" / "gem5 version 24.0.0.1"
    gem5_sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Provenance:
        return cls(**d)


def run_id(point: SweepPoint, prov: Provenance) -> str:
    payload = {"point": point.to_dict(), "provenance": prov.to_dict()}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def point_id(point: SweepPoint | dict[str, Any]) -> str:
    """SHA-256 of the point alone (no provenance): what a run asks for, whatever
    built it. Frames record it so that a sweep on another machine, whose gem5
    binary (and so every run id) differs, can find the runs already done
    (sweep/kept.py). A dict is a point as spec.json stores it, hashed as it is."""
    d = point.to_dict() if isinstance(point, SweepPoint) else point
    return hashlib.sha256(canonical_json(d).encode()).hexdigest()


_POINT_FIELDS = tuple(sorted(f.name for f in fields(SweepPoint)))
_REPEAT = _POINT_FIELDS.index("repeat")


class RunIds:
    """``run_id`` for the many points of one sweep: the same ids, cheaply.

    ``asdict`` + ``json.dumps`` of every point cost ~0.3 ms a run (minutes for a
    10^6-run spec). Points of one sweep differ in few fields and share their
    values (``matrix.iter_points``), and only the repeat is unique per run, so
    the canonical JSON around the repeat ('"name":value' pieces in sorted
    order, as ``sort_keys`` writes them) is encoded once per combination of
    the other fields' value objects. The memo holds those objects, so their
    ``id()``s cannot be reused while it lives; it stops growing at MEMO_MAX
    (points that share nothing are then encoded in full each time).
    """

    MEMO_MAX = 100_000
    _open = '{"point":{'  # canonical JSON of {"point": ..., "provenance": ...}

    def __init__(self, prov: Provenance) -> None:
        self._prov = prov.to_dict()
        self._init('},"provenance":' + canonical_json(self._prov) + "}")

    def _init(self, tail: str) -> None:
        self._tail = tail
        self._others = operator.attrgetter(*(n for n in _POINT_FIELDS if n != "repeat"))
        self._memo: dict[tuple[int, ...], tuple[str, str, tuple[Any, ...]]] = {}

    def _full(self, point: SweepPoint) -> str:
        return run_id(point, Provenance.from_dict(self._prov))

    def _around_repeat(self, point: SweepPoint) -> tuple[str, str] | None:
        values = self._others(point)
        key = tuple(map(id, values))
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) >= self.MEMO_MAX:
                return None
            pieces = [f'"{n}":{canonical_json(getattr(point, n))}' for n in _POINT_FIELDS]
            head = "".join(x + "," for x in pieces[:_REPEAT]) + '"repeat":'
            tail = "".join("," + x for x in pieces[_REPEAT + 1 :]) + self._tail
            hit = (head, tail, values)  # values: keeps the ids in the key alive
            self._memo[key] = hit
        return hit[0], hit[1]

    def __call__(self, point: SweepPoint) -> str:
        around = self._around_repeat(point) if type(point.repeat) is int else None
        if around is None:
            return self._full(point)
        text = self._open + around[0] + str(point.repeat) + around[1]
        return hashlib.sha256(text.encode()).hexdigest()


class PointIds(RunIds):
    """``point_id`` for the many points of one sweep, memoized as ``RunIds``."""

    _open = "{"

    def __init__(self) -> None:
        self._init("}")

    def _full(self, point: SweepPoint) -> str:
        return point_id(point)
