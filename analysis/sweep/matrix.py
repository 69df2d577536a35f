"""Spec -> run matrix: sweep points, their guest jobs, resources and run ids.

Order of expansion: repeat (outermost), mix, sockets, cores per socket, NUMA
factor / link latency, threads, NUMA balancing, policy (innermost). A first complete pass over
every configuration therefore finishes before the second repeat starts, and a
policy's run sits next to its `default` partner, so partial sweeps already pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .point import ID_LEN_DIR, STOCK_KERNEL, STOCK_POLICY, Provenance, RunIds, SweepPoint
from .spec import Spec, excluded, point_count

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


def run_count(spec: Spec) -> int:
    """How many runs the spec expands to, without expanding it."""
    return point_count(spec.axes, spec.exclude) * spec.repeats


def iter_points(spec: Spec, backend: str) -> Iterator[SweepPoint]:
    """Every point of the spec for a resolved backend (qemu | gem5), lazily.

    The nested settings (machine, job options, CPU, gem5, the programs of a
    (mix, threads)) are one object shared by the points that have them: cheap
    for 10^6-run specs and what ``RunIds`` memoizes on. Nothing mutates a point.
    """
    ax = spec.axes
    lat_key = "numa_factor" if ax["numa_factor"] else "link_latency"
    machine, job = dict(spec.machine), dict(spec.job)
    cpu = dict(spec.cpu) if backend == "gem5" else None
    gem5 = dict(spec.gem5) if backend == "gem5" else None
    programs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    # one job-options object per pinning (the spec's own when it is the same)
    jobs = {pin: job if pin == job["pinning"] else {**job, "pinning": pin}
            for pin in ax["pinning"]}  # fmt: skip
    for rep, mix, s, c, lat, t, pin, nb, pol in itertools.product(
        range(spec.first_repeat, spec.first_repeat + spec.repeats),
        ax["mix"],
        ax["sockets"],
        ax["cores_per_socket"],
        ax[lat_key],
        ax["threads"],
        ax["pinning"],
        ax["numa_balancing"],
        ax["policy"],
    ):
        if spec.exclude and excluded(
            spec,
            {"mix": mix, "sockets": s, "cores_per_socket": c, lat_key: lat, "threads": t,
             "numa_balancing": nb, "policy": pol, "pinning": pin},
        ):  # fmt: skip
            continue
        progs = programs.get((mix, t))
        if progs is None:
            progs = [{**p, "threads": p.get("threads", t)} for p in spec.mixes[mix]]
            programs[(mix, t)] = progs
        yield SweepPoint(
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
            numa_balancing=1 if pol == "autonuma" else nb,
            machine=machine,
            job_options=jobs[pin],
            programs=progs,
            cpu=cpu,
            gem5=gem5,
        )


def kernel_variants(spec: Spec) -> list[str]:
    """Every kernel variant the spec's points boot, the spec's own first."""
    out = [spec.kernel_variant]
    if STOCK_POLICY in spec.axes["policy"]:
        out.append(STOCK_KERNEL)
    return out


def points(spec: Spec, backend: str) -> list[SweepPoint]:
    """Every point of the spec for a resolved backend (qemu | gem5)."""
    return list(iter_points(spec, backend))


def resources_for(spec: Spec, point: SweepPoint | None) -> Resources:
    """The point's resources; point None: the spec's defaults (no overrides)."""
    r = spec.resources
    res = Resources(r["cpus_per_run"], r["mem_per_run_bytes"], r["time_limit_s"])
    if point is None:
        return res
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


def iter_runs(
    spec: Spec, backend: str, prov: Provenance, kernel_ids: dict[str, str] | None = None
) -> Iterator[Run]:
    """The runs of the spec, lazily (a 10^6-run spec never sits in memory).

    @prov carries the build id of the spec's kernel; a point that boots another
    variant (the stock policy) is hashed with that variant's id from
    @kernel_ids, so its run id names the kernel it really ran."""
    ids = {spec.kernel_variant: RunIds(prov)}
    fixed = None if spec.resources["override"] else resources_for(spec, None)
    for p in iter_points(spec, backend):
        rid = ids.get(p.boot_kernel)
        if rid is None:
            if not kernel_ids or p.boot_kernel not in kernel_ids:
                raise ValueError(f"no kernel build id for variant {p.boot_kernel}")
            kid = kernel_ids[p.boot_kernel]
            rid = ids[p.boot_kernel] = RunIds(replace(prov, kernel_build_id=kid))
        yield Run(p, rid(p), fixed or resources_for(spec, p))


def build_runs(
    spec: Spec, backend: str, prov: Provenance, kernel_ids: dict[str, str] | None = None
) -> list[Run]:
    runs = []
    seen: set[str] = set()
    for run in iter_runs(spec, backend, prov, kernel_ids):
        if run.run_id in seen:  # cannot happen for distinct points; guard anyway
            raise ValueError(f"duplicate run id for {run.point.label()}")
        seen.add(run.run_id)
        runs.append(run)
    return runs


def guest_job(point: SweepPoint, rid: str) -> dict[str, Any]:
    """The mix runner job (workloads/README.md, schema 1) for one point."""
    o = point.job_options
    return {
        "schema": JOB_SCHEMA,
        "run_id": rid,
        "policy": point.policy,
        # explicit for every point (autonuma = default + 1; the runner maps the name)
        "numa_balancing": point.numa_balancing,
        # repeats differ on the guest side (start jitter, data seeds), the same
        # way for every policy of a repeat; never through Ruby's randomization
        "seed": point.repeat,
        "strict_policy": o["strict_policy"],
        "pinning": o["pinning"],
        "pin_threads": o["pin_threads"],
        "sample_interval_s": o["sample_interval_s"],
        "warmup_s": o["warmup_s"],
        "read_sched": o["read_sched"],
        "timeout_s": o["timeout_s"],
        # the guest powers off after the hand-back (gem5 and QEMU alike), so
        # nothing is put back: about 24 debugfs writes, 12 ms of a gem5 run's
        # hand-back on the timing CPU (findings/2026-11-28-run-cost)
        "restore_sysctls": False,
        "sched_domain": o.get("sched_domain"),
        **_numa_scan(o.get("numa_balancing_scan")),
        # absent unless asked: the run ids of sweeps without it stay
        **({"switch_marks": True} if o.get("switch_marks") else {}),
        **_daemon_params(point.policy, o.get("daemon_params")),
        "parsec": {
            "root": o["parsec_root"],
            "config": o["parsec_config"],
            "launcher": o["parsec_launcher"],
        },
        "programs": [dict(p) for p in point.programs],
    }


def _numa_scan(given: dict[str, Any] | None) -> dict[str, Any]:
    """NUMA balancing's scan settings for a job: absent when the spec has none."""
    return {} if given is None else {"numa_balancing_scan": dict(given)}


def _daemon_params(policy: str, given: dict[str, Any] | None) -> dict[str, Any]:
    """A user-level policy's daemon_params for its job (none for the others)."""
    params = (given or {}).get(policy)
    return {} if params is None else {"daemon_params": dict(params)}
