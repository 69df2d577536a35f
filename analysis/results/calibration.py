"""NUMA-factor calibration: inter-socket link latency -> measured NUMA factor.

The measurement is a sweep like any other (gem5 backend, 4 sockets x 1 core;
per run one ``ptrchase --pairs=0:0,1:2``: a local (cpu node 0, memory node 0)
and a one-hop remote (1, 2) chase, one after the other in one process; the
latency is guest-timed, i.e. simulated time). ``ptrchase --sweep`` (every
pair, the matrix printed) is accepted too; it costs 8x the simulation time.

Why not two programs at the same time (the first table did that): the first
program's exit and the mix runner's wake-up then land inside the other's
timed window whenever the windows overlap, which depends on the link
latency, and the table had a 20 ns step between 12 and 14 cycles that was
this, not the memory system. Every timed window now counts its context
switches, and a run with any is left out.

    ./run_all.py run --preset calibration                # one run per link latency
    ./run_all.py calibrate results/calibration    # -> configs/numa_lb/calibration/<machine>.csv
    ./run_all.py run --preset calibration-check          # f = 1.2, 1.6, 2.0, 3.0 via the table
    ./run_all.py calibrate --check results/calibration-check   # within +-5 %?

``measured_numa_factor`` = mean remote / mean local latency; with a fully
connected topology every remote pair is one hop. Runs that are not done, or
whose ptrchase did not verify, are listed and left out, never guessed.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "configs"))

from numa_lb.numa_factor import CONDITIONS_PREFIX, CalibrationTable  # noqa: E402
from numa_lb.options import CALIBRATION_DIR  # noqa: E402

from ..sweep.atomic import atomic_path  # noqa: E402
from ..sweep.point import SweepPoint  # noqa: E402
from ..sweep.rundir import RunDir, State  # noqa: E402
from .guest import parse_results_file  # noqa: E402

TOLERANCE = 0.05  # the acceptance band of the issue: +-5 % of the requested factor


@dataclass
class Measurement:
    run: str
    link_latency_cycles: int
    numa_factor_requested: float | None
    numa_factor_measured: float
    local_ns: float
    remote_ns: float
    matrix_ns: list[list[float]]
    conditions: dict[str, str]  # Topology.calibration_conditions() of the run
    # background programs (name -> threads) that loaded the machine while the
    # chase ran; a loaded measurement is compared with an idle one, never a table
    load: dict[str, int] = field(default_factory=dict)

    @property
    def loaded(self) -> bool:
        return bool(self.load)


def _ptrchase_result(run: RunDir) -> dict[str, Any] | str:
    """Local/remote latency of a run, or why it has none.

    A ``ptrchase --pairs``/``--sweep`` program gives its own figures (pairs
    measured one after another); single-pair programs (``--cpu-node``/
    ``--mem-node``) give the mean of the local and of the remote programs. A
    chase that did not verify, or whose timed window saw a context switch
    (someone else's time is in the figure), makes the run unusable."""
    g = parse_results_file(run.guest / "results.jsonl")
    results = [p.get("result") for p in g.programs]
    results = [r for r in results if isinstance(r, dict) and r.get("workload") == "ptrchase"]
    if not results:
        return "no ptrchase result"
    if not all(r.get("verified") for r in results):
        return "a ptrchase did not verify"
    for r in results:
        if r.get("mode") in ("sweep", "pairs"):
            pairs = r.get("pairs", [])
            switched = [p[:2] for p in pairs if len(p) > 4 and p[4] > 0]
            if switched:
                return f"context switches in the timed window of pairs {switched}"
            if r.get("numa_factor") is None:
                return "ptrchase measured no local and remote pair"
            r = dict(r)
            r.setdefault("matrix_ns", [p[:3] for p in pairs])
            return r
    switched = [r.get("cpu_node") for r in results if r.get("ctx_switches_timed", 0) > 0]
    if switched:
        return f"context switches in the timed window of the chase on cpu nodes {switched}"
    local = [r["ns_per_load"] for r in results if r.get("cpu_node") == r.get("mem_node")]
    remote = [r["ns_per_load"] for r in results if r.get("cpu_node") != r.get("mem_node")]
    if not local or not remote:
        return "no local and remote ptrchase pair"
    lo, re_ = sum(local) / len(local), sum(remote) / len(remote)
    matrix = [[r.get("cpu_node"), r.get("mem_node"), r["ns_per_load"]] for r in results]
    return {"local_ns": lo, "remote_ns": re_, "numa_factor": re_ / lo, "matrix_ns": matrix}


# Runs recorded before the link bandwidth was a Topology field used gem5's default
# inter-socket links: 16 B per cycle (bandwidth_factor 160 at endpoint 100).
LEGACY_LINK_BANDWIDTH_FACTOR = "160"


def conditions_of(topo: dict[str, Any]) -> dict[str, str] | None:
    """Topology.calibration_conditions() of a run, from its numa_topology.json."""
    recorded = topo.get("calibration_conditions")
    if isinstance(recorded, dict):
        return {str(k): str(v) for k, v in recorded.items()}
    need = ("sockets", "cores_per_socket", "cpu_clock_hz", "memory_type", "probe_filter")
    if any(k not in topo for k in need):
        return None
    return {
        "sockets": str(topo["sockets"]),
        "cores_per_socket": str(topo["cores_per_socket"]),
        "cpu_clock_hz": str(topo["cpu_clock_hz"]),
        "memory_type": str(topo["memory_type"]),
        "probe_filter": str(int(bool(topo["probe_filter"]))),
        "inter_socket": str(topo.get("inter_socket", "full")),
        "link_bandwidth_factor": LEGACY_LINK_BANDWIDTH_FACTOR,
    }


def collect(out: Path) -> tuple[list[Measurement], list[str]]:
    """Measurements of every done run under ``out`` and why others were skipped."""
    found: list[Measurement] = []
    skipped: list[str] = []
    for spec_file in sorted((out / "runs").glob("*/spec.json")):
        run = RunDir(spec_file.parent)
        name = run.path.name
        state = run.state()
        if state is not State.DONE:
            skipped.append(f"{name}: state {state}")
            continue
        spec = run.spec()
        point = SweepPoint.from_dict(spec["point"])
        if point.sockets < 2 or spec.get("backend", "gem5") != "gem5":
            skipped.append(f"{name}: not a multi-socket gem5 run")
            continue
        res = _ptrchase_result(run)
        if isinstance(res, str):
            skipped.append(f"{name}: {res}")
            continue
        load = {
            str(p.get("name")): int(p.get("threads_requested") or 1)
            for p in parse_results_file(run.guest / "results.jsonl").programs
            if p.get("background")
        }
        topo_file = run.m5out / "numa_topology.json"
        topo = json.loads(topo_file.read_text()) if topo_file.exists() else {}
        cycles = topo.get("link_latency_cycles")
        if cycles is None:
            skipped.append(f"{name}: no m5out/numa_topology.json")
            continue
        conditions = conditions_of(topo)
        if conditions is None:
            skipped.append(f"{name}: its topology record states no calibration conditions")
            continue
        found.append(
            Measurement(
                run=name,
                link_latency_cycles=int(cycles),
                numa_factor_requested=topo.get("numa_factor_requested"),
                numa_factor_measured=float(res["numa_factor"]),
                local_ns=float(res["local_ns"]),
                remote_ns=float(res["remote_ns"]),
                matrix_ns=res["matrix_ns"],
                conditions=conditions,
                load=load,
            )
        )
    return found, skipped


def compare_load(loaded: list[Measurement], idle: list[Measurement]) -> list[dict[str, Any]]:
    """Per link latency measured both ways (same machine): idle vs loaded latency."""
    rows = []
    by_idle = {(m.link_latency_cycles, tuple(sorted(m.conditions.items()))): m for m in idle}
    for m in sorted(loaded, key=lambda m: m.link_latency_cycles):
        i = by_idle.get((m.link_latency_cycles, tuple(sorted(m.conditions.items()))))
        if i is None:
            continue
        rows.append(
            {
                "link_latency_cycles": m.link_latency_cycles,
                "idle_local_ns": round(i.local_ns, 2),
                "loaded_local_ns": round(m.local_ns, 2),
                "idle_remote_ns": round(i.remote_ns, 2),
                "loaded_remote_ns": round(m.remote_ns, 2),
                "idle_factor": round(i.numa_factor_measured, 4),
                "loaded_factor": round(m.numa_factor_measured, 4),
                "local_ratio": round(m.local_ns / i.local_ns, 4),
                "remote_ratio": round(m.remote_ns / i.remote_ns, 4),
            }
        )
    return rows


def table(measurements: list[Measurement]) -> CalibrationTable:
    """One point per link latency (the mean if several repeats measured it); every run
    must have been made under the same conditions (one table per machine)."""
    conds = {tuple(sorted(m.conditions.items())) for m in measurements}
    if len(conds) != 1:
        raise ValueError(
            f"the runs were made on {len(conds)} different machines (calibration conditions "
            f"{sorted(str(dict(c)) for c in conds)}): calibrate each machine from its own runs"
        )
    by_lat: dict[int, list[float]] = {}
    for m in measurements:
        by_lat.setdefault(m.link_latency_cycles, []).append(m.numa_factor_measured)
    points = tuple(sorted((c, sum(v) / len(v)) for c, v in by_lat.items()))
    return CalibrationTable(points=points, source="measurement", conditions=conds.pop())


def table_name(conditions: dict[str, str]) -> str:
    """A readable file name for a machine's table, e.g. 4x2-2800MHz-pf1-bw46-DDR3_1600_8x8-full."""
    c = conditions
    mhz = int(c.get("cpu_clock_hz", "0")) // 1_000_000
    return (
        f"{c.get('sockets')}x{c.get('cores_per_socket')}-{mhz}MHz-pf{c.get('probe_filter')}"
        f"-bw{c.get('link_bandwidth_factor')}-{c.get('memory_type')}-{c.get('inter_socket')}"
    )


def write_csv(cal: CalibrationTable, path: Path, note: str) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="") as f:
        for line in note.splitlines():
            f.write(f"# {line}\n")
        conds = " ".join(f"{k}={v}" for k, v in cal.conditions)
        f.write(f"{CONDITIONS_PREFIX} {conds}\n")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["link_latency_cycles", "measured_numa_factor"])
        for cycles, factor in cal.points:
            w.writerow([cycles, f"{factor:.4f}"])


def check(measurements: list[Measurement]) -> list[dict[str, Any]]:
    """Requested vs measured factor for runs that asked for a factor."""
    rows = []
    for m in measurements:
        if m.numa_factor_requested is None:
            continue
        err = m.numa_factor_measured / m.numa_factor_requested - 1.0
        rows.append(
            {
                "run": m.run,
                "requested": m.numa_factor_requested,
                "link_latency_cycles": m.link_latency_cycles,
                "measured": round(m.numa_factor_measured, 4),
                "error_pct": round(100 * err, 2),
                "within_tolerance": abs(err) <= TOLERANCE,
            }
        )
    return sorted(rows, key=lambda r: r["requested"])


def main(out: Path, do_check: bool, write: Path | None, idle: Path | None = None) -> int:
    measurements, skipped = collect(out)
    for s in skipped:
        print(f"skipped {s}")
    if not measurements:
        print(f"calibrate: no usable measurement under {out}", file=sys.stderr)
        return 1
    for m in sorted(measurements, key=lambda m: m.link_latency_cycles):
        load = f" (loaded: {m.load})" if m.loaded else ""
        print(
            f"link {m.link_latency_cycles:4d} cycles: local {m.local_ns:7.2f} ns, "
            f"remote {m.remote_ns:7.2f} ns, factor {m.numa_factor_measured:.4f}{load}"
        )
    loaded = [m for m in measurements if m.loaded]
    if idle is not None:
        base, why = collect(idle)
        base = [m for m in base if not m.loaded]
        rows = compare_load(loaded, base)
        for r in rows:
            print(json.dumps(r))
        if not rows:
            print(f"calibrate: no link latency measured both loaded ({out}) and idle ({idle})",
                  file=sys.stderr)  # fmt: skip
            return 1
        return 0
    if loaded:
        # a table turns a requested factor into a link latency: that is the idle factor
        print(
            f"calibrate: {len(loaded)} run(s) measured under load: no table written "
            "(compare with the idle runs: --idle DIR)"
        )
        return 0
    if do_check:
        rows = check(measurements)
        for r in rows:
            print(json.dumps(r))
        bad = [r for r in rows if not r["within_tolerance"]]
        print(f"calibrate: {len(rows) - len(bad)}/{len(rows)} within +-{TOLERANCE:.0%}")
        return 1 if bad or not rows else 0
    try:
        cal = table(measurements)
    except ValueError as err:
        print(f"calibrate: {err}", file=sys.stderr)
        return 1
    target = write or CALIBRATION_DIR / f"{table_name(dict(cal.conditions))}.csv"
    write_csv(
        cal,
        target,
        f"NUMA-factor calibration (analysis/calibration.py) from {len(measurements)} runs "
        f"under {out.name}/\nmeasured factor = mean remote / mean local ptrchase latency",
    )
    print(f"calibrate: wrote {target}")
    return 0
