"""What a preset would cost on gem5, projected from measured runs (issue 15 item 6).

    python3 -m analysis.results.projection MEASURED_DIR [...] --preset paper \\
        [--preset sensitivity] [--roi-instructions MIX=N ...] [--nodes 100] \\
        [--slots-per-node 32]

Measured, from the done gem5 runs under MEASURED_DIR (their tidy frames; a kept
finding's ``frames/`` directory is read as it is):

* ``boot_s`` per simulated CPU: each boot checkpoint's host seconds divided by
  its CPUs (sockets x cores), median. A target shape's boot = that x its CPUs
  (assumption: the atomic boot's host time grows with the CPUs it brings up);
* ``outside_s``: restore, job start, warm-up and hand back (gem5 process time
  minus the ROI's instructions at its rate, so the counter bridge's handler
  time in the ROI, which the rate leaves out, is counted here), median; taken
  as independent of the shape;
* ``ips``: ROI committed instructions per host second, median; taken as
  independent of the shape (gem5 runs one event queue: its instruction rate
  is a property of the host and the memory system, not of the core count);
* ROI instructions of a mix: ``--roi-instructions MIX=N`` or, for a mix that
  the measured runs ran at the same thread count, their median. Otherwise the
  run is "unknown" and the totals say how many runs that leaves out.

CPU or wall seconds: a run recorded since 2026-11-25 has its gem5 process's
CPU seconds (user + system) beside its wall seconds. Where it has them, its
outside-ROI time and ROI rate are scaled by its CPU share (CPU / wall), and a
checkpoint's boot counts at its CPU seconds: a run that shared its cores with
others would otherwise inflate the estimate. The share also drops whatever
else kept the process off a CPU (waiting for the checkpoint's disk reads, the
stats written), and it is the whole process's share applied to its parts. A
cluster slot is billed by the wall clock, so the tool prints the wall-based
projection beside the CPU-based one.

Phases: a run recorded since issue 38 has its phases measured
(``m5out/phases.json``, analysis/results/run_phases.py). For such a run
``outside_s`` is its phases but the ROI, summed (``nonroi_cpu_s``, or
``nonroi_host_s`` on the wall basis), and its ROI rate is its instructions
over the ROI phase's seconds: no CPU share is applied, and the counter
bridge's handler time stays in the ROI, where it grows with the ROI's length.
The tool then also prints the ROI's seconds per simulated millisecond and the
median of each phase. Runs without phases fall back to the figures above, and
the output says how many runs that is.

Target: the preset's runs (the spec expansion the driver would run) and its
boot checkpoints (one per boot kernel x topology x SLIT). Host-hours = boots +
sum of runs. Wall time on N nodes of S run slots each: the boots in parallel,
then the runs in waves of N x S, the longest run per wave (a lower bound:
queueing, staging and stragglers come on top).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..sweep.matrix import iter_points, resources_for
from ..sweep.spec import SpecError, load_spec
from .frames import Frames, build_frames, merge_frames, read_frames
from .run_phases import PHASES


@dataclass(frozen=True)
class Measured:
    boot_s_per_cpu: float
    outside_s: float
    ips: float
    roi_instructions: dict[tuple[str, int], float]  # (mix, threads) -> median
    runs: int
    cpu_runs: int = 0  # runs whose figures are CPU time (the rest: wall time)
    boots: int = 0  # boot checkpoints measured
    cpu_boots: int = 0  # ... of them at CPU seconds
    phase_runs: int = 0  # runs whose outside-ROI time and ROI rate come from phases.json
    roi_s_per_sim_ms: float | None = None  # median over those runs
    phase_s: tuple[tuple[str, float], ...] = ()  # (phase, median seconds) over those runs


def measure(dirs: list[Path], cpu: bool = True) -> Measured:
    """The measured figures; cpu=False takes every run and boot at its wall time."""
    fr = load_measured(dirs)
    runs = fr.runs
    done = runs[(runs["state"] == "done") & (runs["backend"] == "gem5")]
    if done.empty:
        raise ValueError("no done gem5 run under " + ", ".join(map(str, dirs)))
    mx = fr.metrics
    mx = mx[(mx["entity_type"] == "mix") & mx["run_id"].isin(done["run_id"])]

    def per_run(metric: str) -> pd.Series:
        return mx[mx["metric"] == metric].groupby("run_id", observed=True)["value"].sum()

    ck = done.dropna(subset=["checkpoint_key", "checkpoint_host_s"])
    ck = ck.drop_duplicates("checkpoint_key")
    boot_cpu, run_cpu = ("checkpoint_cpu_s", "gem5_cpu_s") if cpu else (None, None)
    per_cpu = [_cpu_or_wall(r, boot_cpu, "checkpoint_host_s")
               / (int(r.sockets) * int(r.cores_per_socket)) for r in ck.itertuples()]  # fmt: skip
    cpu_boots = sum(1 for r in ck.itertuples() if _has(r, boot_cpu))
    roi, ips, ins = per_run("roi_host_s"), per_run("sim_speed_ips"), per_run("instructions")
    g5 = done.set_index("run_id")["gem5_host_s"].dropna()
    # a run's CPU share (CPU / wall of its gem5 process) where its CPU time is
    # known: wall-clock figures of runs that shared cores overstate their cost
    share = {r.run_id: _cpu_or_wall(r, run_cpu, "gem5_host_s") / float(r.gem5_host_s)
             for r in done.itertuples() if _positive(r.gem5_host_s)}  # fmt: skip
    cpu_runs = sum(1 for r in done.itertuples() if _has(r, run_cpu))
    # the ROI at its instruction rate: what the rate leaves out (the counter
    # bridge's handler time in the ROI) stays in the rest of the run
    roi_at_rate = {r: float(ins[r]) / float(ips[r]) for r in ips.index
                   if r in ins.index and ips[r] > 0}  # fmt: skip
    phased = _phase_figures(done, ins, cpu)
    outside = [float(g5[r] - roi_at_rate.get(r, roi[r])) * share.get(r, 1.0)
               for r in g5.index if r in roi.index and r not in phased]  # fmt: skip
    outside += [f["outside"] for f in phased.values()]
    ips = pd.Series({r: phased.get(r, {}).get("ips", float(v) / share.get(r, 1.0))
                     for r, v in ips.items()}, dtype=float)  # fmt: skip
    if not per_cpu or not outside or ips.empty:
        raise ValueError("the measured runs lack checkpoint, gem5 or ROI host times")
    by_mix: dict[tuple[str, int], list[float]] = {}
    for r in done.itertuples():
        if r.run_id in ins.index:
            by_mix.setdefault((str(r.mix), int(r.threads)), []).append(float(ins[r.run_id]))
    return Measured(
        statistics.median(per_cpu),
        statistics.median(outside),
        float(ips.median()),
        {k: statistics.median(v) for k, v in by_mix.items()},
        len(done),
        cpu_runs,
        len(per_cpu),
        cpu_boots,
        len(phased),
        _median([f["per_ms"] for f in phased.values()]),
        tuple(
            (k, statistics.median(v))
            for k in PHASES
            if (v := [f[k] for f in phased.values() if k in f])
        ),  # fmt: skip
    )


def _phase_figures(done: pd.DataFrame, ins: pd.Series, cpu: bool) -> dict[str, dict[str, float]]:
    """Per run with measured phases (run_phases.py): its outside-ROI seconds, ROI
    instructions per second, ROI seconds per simulated ms and each phase's
    seconds, on the CPU basis (CPU seconds where recorded) or the wall basis."""
    if "nonroi_host_s" not in done:
        return {}
    out: dict[str, dict[str, float]] = {}
    for r in done.to_dict("records"):
        host_roi, per_ms = r.get("phase_roi_host_s"), r.get("roi_host_s_per_sim_ms")
        if not (_positive(r.get("nonroi_host_s")) and _positive(host_roi)):
            continue
        use_cpu = cpu and _positive(r.get("nonroi_cpu_s")) and _positive(r.get("phase_roi_cpu_s"))
        k = "cpu_s" if use_cpu else "host_s"
        roi_s = float(r[f"phase_roi_{k}"])
        f = {"outside": float(r[f"nonroi_{k}"])}
        if r["run_id"] in ins.index and ins[r["run_id"]] > 0:
            f["ips"] = float(ins[r["run_id"]]) / roi_s
        if _positive(per_ms):
            f["per_ms"] = roi_s / (float(host_roi) / float(per_ms))  # s / simulated ms
        for name in PHASES:
            v = r.get(f"phase_{name}_{k}")
            if v is not None and math.isfinite(float(v)):
                f[name] = float(v)
        out[r["run_id"]] = f
    return out


def _median(v: list[float]) -> float | None:
    v = [x for x in v if math.isfinite(x)]
    return statistics.median(v) if v else None


def load_measured(dirs: list[Path]) -> Frames:
    """Frames of sweep dirs (built from their runs) and of kept frames dirs (a
    finding's ``frames/``, read back), merged: a kept finding's cost projects
    again from the repository alone."""
    kept = [d for d in dirs if (Path(d) / "runs.parquet").is_file()]
    swept = [d for d in dirs if d not in kept]
    parts = [(str(d), read_frames(Path(d))) for d in kept]
    if swept:
        parts.append((", ".join(map(str, swept)), build_frames(swept)))
    return merge_frames(parts)[0]


def _positive(v: object) -> bool:
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and x > 0


def _has(r: object, col: str | None) -> bool:
    return col is not None and _positive(getattr(r, col, None))


def _cpu_or_wall(r: object, cpu: str | None, wall: str) -> float:
    """A row's CPU seconds where recorded (and positive), else its wall seconds."""
    c = getattr(r, cpu, None) if cpu is not None else None
    return float(c) if _positive(c) else float(getattr(r, wall))  # type: ignore[arg-type]


@dataclass
class Projection:
    preset: str
    runs: int
    boots: int
    unknown: int  # runs without an instruction estimate, left out of the sums
    boot_h: float
    run_h: float
    wall_h: float
    nodes: int
    slots: int


def project(preset: str, m: Measured, given: dict[str, float], nodes: int,
            slots_per_node: int) -> Projection:  # fmt: skip
    spec = load_spec(preset=preset)
    boots: dict[tuple, int] = {}
    run_s: list[float] = []
    unknown = slots = 0
    for p in iter_points(spec, "gem5"):  # one point per run: repeats included
        cpus = p.sockets * p.cores_per_socket
        slots = slots or max(1, slots_per_node // resources_for(spec, p).cpus)
        slit = p.machine.get("slit_remote_distance") or (p.numa_factor, p.link_latency)
        boots[(p.boot_kernel, p.sockets, p.cores_per_socket,
               p.machine.get("mem_per_node"), str(slit))] = cpus  # fmt: skip
        ins = given.get(p.mix, m.roi_instructions.get((p.mix, p.threads)))
        if ins is None:
            unknown += 1
            continue
        run_s.append(m.outside_s + ins / m.ips)
    boot_s = [m.boot_s_per_cpu * c for c in boots.values()]
    wave = nodes * max(slots, 1)
    waves = math.ceil(len(run_s) / wave) if run_s else 0
    longest = max(run_s, default=0.0)
    wall = (max(boot_s, default=0.0) + waves * longest) / 3600
    return Projection(preset, len(run_s) + unknown, len(boots), unknown,
                      sum(boot_s) / 3600, sum(run_s) / 3600, wall, nodes, wave)  # fmt: skip


def phases_line(m: Measured, basis: str) -> str:
    """The measured phases (ROI seconds per simulated ms, outside the ROI), or what
    the figures fall back to when no run recorded them."""
    old = ("outside the ROI = gem5 process minus the ROI at its instruction rate, ROI rate "
           "from the ROI dump's hostSeconds")  # fmt: skip
    if not m.phase_runs:
        return (f"phases: no run recorded them (m5out/phases.json, runs before issue 38): "
                f"{old}; no ROI seconds per simulated ms")  # fmt: skip
    unit = "CPU s" if basis == "CPU" else "host s"
    per_ms = "unknown" if m.roi_s_per_sim_ms is None else f"{m.roi_s_per_sim_ms:.2f}"
    parts = ", ".join(f"{k} {v:.0f}" for k, v in m.phase_s if k != "roi")
    rest = "" if m.phase_runs == m.runs else f"; the other {m.runs - m.phase_runs}: {old}"
    return (f"phases ({m.phase_runs} of {m.runs} runs, median {unit}): ROI {per_ms} {unit} per "
            f"simulated ms; outside the ROI {parts}" + rest)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("measured", nargs="+", type=Path,
                    help="sweep dirs with done gem5 runs, or kept frames dirs")  # fmt: skip
    ap.add_argument("--preset", action="append", required=True)
    ap.add_argument("--roi-instructions", action="append", default=[], metavar="MIX=N",
                    help="ROI committed instructions (all CPUs) of a mix's run")  # fmt: skip
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--slots-per-node", type=int, default=32, help="host cores per node")
    a = ap.parse_args(argv)
    given: dict[str, float] = {}
    for kv in a.roi_instructions:
        mix, _, n = kv.partition("=")
        try:
            given[mix] = float(n)
        except ValueError:
            print(f"projection: --roi-instructions {kv!r}: want MIX=N", file=sys.stderr)
            return 2
    if a.nodes < 1 or a.slots_per_node < 1:
        print("projection: --nodes and --slots-per-node must be >= 1", file=sys.stderr)
        return 2
    try:
        bases = [("CPU", measure(a.measured))]
        if bases[0][1].cpu_runs or bases[0][1].cpu_boots:  # and the wall clock's
            bases.append(("wall", measure(a.measured, cpu=False)))
        out = [(b, m, [project(p, m, given, a.nodes, a.slots_per_node) for p in a.preset])
               for b, m in bases]  # fmt: skip
    except (OSError, ValueError, SpecError) as e:
        print(f"projection: {e}", file=sys.stderr)
        return 2
    for b, m, projs in out:
        if b == "wall":
            basis = "wall time of every run and boot"
        elif m.cpu_runs or m.cpu_boots:
            basis = (f"CPU time of {m.cpu_runs} run(s) and {m.cpu_boots} boot(s), wall time "
                     f"of {m.runs - m.cpu_runs} and {m.boots - m.cpu_boots}")  # fmt: skip
        else:
            basis = "wall time: runs that shared cores overstate"
        print(f"measured ({m.runs} done gem5 runs; {basis}): boot {m.boot_s_per_cpu:.0f} host s "
              f"per simulated CPU; outside the ROI {m.outside_s:.0f} s per run; ROI "
              f"{m.ips / 1e6:.3f} M inst/host s, i.e. {1e9 / m.ips / 3600:.2f} host-hours per "
              "10^9 ROI instructions")  # fmt: skip
        print("  " + phases_line(m, b))
        for p in projs:
            left = (
                f"; {p.unknown} run(s) without an instruction estimate left out"
                if p.unknown
                else ""
            )
            print(f"  {p.preset}: {p.runs} runs, {p.boots} boot checkpoints: "
                  f"{p.boot_h + p.run_h:.1f} host-hours (boots {p.boot_h:.1f}, runs "
                  f"{p.run_h:.1f}); wall >= {p.wall_h:.1f} h on {p.nodes} nodes "
                  f"({p.slots} runs at once)" + left)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
