"""Spec -> run matrix: sweep points, their guest jobs, resources and run ids.

Order of expansion: repeat (outermost), mix, sockets, cores per socket, NUMA
factor / link latency, threads, policy (innermost). A first complete pass over
every configuration therefore finishes before the second repeat starts, and a
policy's run sits next to its `default` partner, so partial sweeps already pair.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .point import ID_LEN_DIR, Provenance, SweepPoint, run_id
from .spec import Spec

JOB_SCHEMA = 1


@dataclass
class Resources:
    cpus: int
    mem_bytes: int
    time_limit_s: int

    def to_dict(self) -> dict[str, int]:
        return {"cpus": self.cpus, "mem_bytes": self.mem_bytes, "time_limit_s": self.time_limit_s}


@dataclass
class Run:
    point: SweepPoint
    run_id: str
    resources: Resources

    @property
    def dirname(self) -> str:
        return self.run_id[:ID_LEN_DIR]

    def path(self, out: Path) -> Path:
        return out / "runs" / self.dirname


def points(spec: Spec, backend: str) -> list[SweepPoint]:
    """Every point of the spec for a resolved backend (qemu | gem5)."""
    ax = spec.axes
    lat_key = "numa_factor" if ax["numa_factor"] else "link_latency"
    out = []
    for rep, mix, s, c, lat, t, pol in itertools.product(
        range(spec.repeats),
        ax["mix"],
        ax["sockets"],
        ax["cores_per_socket"],
        ax[lat_key],
        ax["threads"],
        ax["policy"],
    ):
        out.append(
            SweepPoint(
                backend=backend,
                policy=pol,
                sockets=s,
                cores_per_socket=c,
                numa_factor=lat if lat_key == "numa_factor" else None,
                link_latency=lat if lat_key == "link_latency" else None,
                threads=t,
                mix=mix,
                repeat=rep,
                kernel_variant=spec.kernel_variant,
                machine=dict(spec.machine),
                job_options=dict(spec.job),
                programs=[{**p, "threads": p.get("threads", t)} for p in spec.mixes[mix]],
                cpu=dict(spec.cpu) if backend == "gem5" else None,
                gem5=dict(spec.gem5) if backend == "gem5" else None,
            )
        )
    return out


def resources_for(spec: Spec, point: SweepPoint) -> Resources:
    r = spec.resources
    res = Resources(r["cpus_per_run"], r["mem_per_run_bytes"], r["time_limit_s"])
    cols = point.as_columns()
    for ov in r["override"]:
        if all(_matches(cols.get(k), v) for k, v in ov["match"].items()):
            res.cpus = ov.get("cpus_per_run", res.cpus)
            res.mem_bytes = ov.get("mem_per_run_bytes", res.mem_bytes)
            res.time_limit_s = ov.get("time_limit_s", res.time_limit_s)
    return res


def _matches(value: Any, want: Any) -> bool:
    if isinstance(want, list):
        return any(_matches(value, w) for w in want)
    if isinstance(value, float) and isinstance(want, int | float):
        return abs(value - want) < 1e-9
    return value == want


def build_runs(spec: Spec, backend: str, prov: Provenance) -> list[Run]:
    runs = []
    seen: set[str] = set()
    for p in points(spec, backend):
        rid = run_id(p, prov)
        if rid in seen:  # cannot happen for distinct points; guard anyway
            raise ValueError(f"duplicate run id for {p.label()}")
        seen.add(rid)
        runs.append(Run(p, rid, resources_for(spec, p)))
    return runs


def guest_job(point: SweepPoint, rid: str) -> dict[str, Any]:
    """The mix runner job (workloads/README.md, schema 1) for one point."""
    o = point.job_options
    return {
        "schema": JOB_SCHEMA,
        "run_id": rid,
        "policy": point.policy,
        # autonuma = default + numa_balancing 1 (the runner maps the name); every
        # other policy runs with NUMA balancing explicitly off.
        "numa_balancing": 1 if point.policy == "autonuma" else 0,
        "strict_policy": o["strict_policy"],
        "pinning": o["pinning"],
        "pin_threads": o["pin_threads"],
        "sample_interval_s": o["sample_interval_s"],
        "read_sched": o["read_sched"],
        "timeout_s": o["timeout_s"],
        "parsec": {
            "root": o["parsec_root"],
            "config": o["parsec_config"],
            "launcher": o["parsec_launcher"],
        },
        "programs": [dict(p) for p in point.programs],
    }
