"""The sweep driver behind ``run_all.py run``: spec -> runs -> executor -> report.

1. announce the backend (first line of output);
2. check prerequisites (backend tool, kernel, image, free disk, Slurm) and stop
   early with a clear message when one is missing;
3. expand the run matrix, create missing run directories (spec.json, job.json,
   status pending), decide per run: skip done, skip failed/timeout unless
   --rerun-failed, resume interrupted/stale ones;
4. execute (local pool or Slurm arrays); 5. write the report.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import backends as bk
from .executors import LocalExecutor, pool_size, summary_line
from .matrix import Run, build_runs, guest_job
from .point import Provenance
from .provenance import PrerequisiteError
from .rundir import (
    FINAL,
    RERUN_ON_REQUEST,
    RunDir,
    State,
    is_stale_running,
    now_iso,
    write_json_atomic,
)
from .spec import Spec

EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE, EXIT_PREREQ, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclass
class Options:
    out: Path | None = None
    executor: str = "local"
    jobs: int | None = None
    dry_run: bool = False
    rerun_failed: bool = False
    build: bool = True
    gem5: str | None = None
    report: bool = True
    wait: bool = True
    poll_s: float = 5.0
    stream: TextIO = field(default=sys.stdout)


@dataclass
class Plan:
    to_run: list[tuple[Run, RunDir]]
    skipped: Counter
    notes: list[str]


def spec_record(spec: Spec, run: Run, art: bk.Artifacts) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "label": run.point.label(),
        "sweep": spec.name,
        "spec_source": spec.source,
        "point": run.point.to_dict(),
        "provenance": art.provenance.to_dict(),
        "paths": art.paths,
        "resources": {
            **run.resources.to_dict(),
            "min_free_disk_bytes": spec.resources["min_free_disk_bytes"],
        },
        "caveat": bk.CAVEATS[run.point.backend],
        "created_at": now_iso(),
    }


def make_plan(
    runs: list[Run],
    out: Path,
    rerun_failed: bool,
    create: bool,
    recs: dict[str, dict[str, Any]] | None = None,
) -> Plan:
    to_run: list[tuple[Run, RunDir]] = []
    skipped: Counter = Counter()
    notes: list[str] = []
    for run in runs:
        rd = RunDir(run.path(out))
        if create and recs is not None:
            rd.create(recs[run.run_id], guest_job(run.point, run.run_id))
        state = rd.state()
        if state is None or state == State.PENDING:
            to_run.append((run, rd))
        elif state == State.DONE:
            skipped["done"] += 1
        elif state in RERUN_ON_REQUEST:
            if rerun_failed:
                to_run.append((run, rd))
            else:
                skipped[state.value] += 1
        elif state == State.INTERRUPTED:
            to_run.append((run, rd))
        elif state == State.RUNNING:
            if is_stale_running(rd):
                if create:
                    rd.transition(State.INTERRUPTED, error="found running with no live worker")
                to_run.append((run, rd))
            else:
                skipped["running elsewhere"] += 1
                notes.append(f"{rd.path.name} is running in another process; left alone")
    return Plan(to_run, skipped, notes)


def check_disk(out: Path, need: int) -> None:
    p = out
    while not p.exists():
        p = p.parent
    free = shutil.disk_usage(p).free
    if free < need:
        raise PrerequisiteError(
            f"disk: {free >> 20} MiB free under {p}, the sweep needs at least {need >> 20} MiB "
            "(resources.min_free_disk); free space or point --out elsewhere"
        )


def run_sweep(spec: Spec, opt: Options) -> int:
    w = opt.stream.write
    backend, why = bk.resolve_backend(spec.backend, opt.gem5)
    w(
        f"backend: {backend} ({why})"
        + (
            " -- functional emulation: timing is NOT architectural performance\n"
            if backend == "qemu"
            else " -- MOESI_hammer timing model\n"
        )
    )
    opt.stream.flush()
    out = (opt.out or Path("results") / spec.name).resolve()
    try:
        art = bk.prepare(
            backend,
            spec.kernel_variant,
            build=opt.build and not opt.dry_run,
            gem5_flag=opt.gem5,
            require=not opt.dry_run,
        )
        w(bk.announce(backend, art).replace("backend:", "using:", 1) + "\n")
        if not opt.dry_run:
            check_disk(out, spec.resources["min_free_disk_bytes"])
        if opt.executor == "slurm" and not opt.dry_run:
            from .slurm import slurm_available

            why_not = slurm_available()
            if why_not:
                raise PrerequisiteError(f"slurm executor: {why_not}")
    except PrerequisiteError as e:
        w(f"error: missing prerequisite: {e}\n")
        return EXIT_PREREQ

    runs = build_runs(spec, backend, art.provenance)
    recs = {r.run_id: spec_record(spec, r, art) for r in runs}
    w(f"sweep {spec.name}: {len(runs)} runs ({spec.source}); output {out}\n")
    plan = make_plan(runs, out, opt.rerun_failed, create=not opt.dry_run, recs=recs)
    skipped = ", ".join(f"{v} {k}" for k, v in sorted(plan.skipped.items()))
    w(f"to run: {len(plan.to_run)}" + (f"; skipped: {skipped}" if skipped else "") + "\n")
    if plan.skipped.get("failed") or plan.skipped.get("timeout"):
        w("  (failed/timed-out runs are kept; --rerun-failed runs them again)\n")
    for n in plan.notes:
        w(f"  note: {n}\n")

    if opt.dry_run:
        for run, _rd in plan.to_run:
            w(f"  {run.dirname} {run.point.label()}\n")
        if opt.executor == "slurm":
            ex = _slurm(spec, out, opt)
            ex.dry_run(ex.plan([(rd, run.resources) for run, rd in plan.to_run]))
        return EXIT_OK

    out.mkdir(parents=True, exist_ok=True)
    write_manifest(out, spec, backend, art, runs)
    code = EXIT_OK
    if plan.to_run:
        if opt.executor == "local":
            n, why_n = pool_size(
                max(r.resources.cpus for r, _ in plan.to_run),
                max(r.resources.mem_bytes for r, _ in plan.to_run),
                opt.jobs,
            )
            w(f"executor: local, {why_n}\n")
            ex = LocalExecutor(n, spec.resources["min_free_disk_bytes"], out=opt.stream)
            for _run, rd in plan.to_run:
                if rd.state() in FINAL:
                    rd.reset_for_rerun()
            res = ex.run([(rd, run.point.label()) for run, rd in plan.to_run])
            if res.interrupted:
                w(
                    "interrupted: finished runs are intact; running ones are marked interrupted; "
                    "rerun the same command to resume\n"
                )
                code = EXIT_INTERRUPTED
            elif res.stopped_reason:
                w(f"stopped early: {res.stopped_reason}\n")
                code = EXIT_PREREQ
        else:
            code = _run_slurm(spec, out, opt, plan)
            if code == EXIT_INTERRUPTED or not opt.wait:
                return code  # --no-wait: submitted, nothing to report yet
    final = Counter((RunDir(r.path(out)).state() or State.PENDING).value for r in runs)
    w(f"sweep {spec.name}: {summary_line(final)}\n")
    if code == EXIT_OK and any(k != "done" for k in final):
        code = EXIT_FAILED_RUNS
    if opt.report and code != EXIT_INTERRUPTED:
        from ..results.report import write_report

        try:
            paths = write_report(
                [out], out, title=f"sweep {spec.name}", run_ids={r.run_id for r in runs}
            )
            w(f"report: {paths['html']}\nreport: {paths['md']}\n")
        except Exception as e:  # a report bug must not hide the sweep's outcome
            w(f"report failed: {type(e).__name__}: {e}\n")
            code = code or EXIT_FAILED_RUNS
    return code


def _slurm(spec: Spec, out: Path, opt: Options) -> Any:
    from .slurm import SlurmExecutor

    r = spec.resources
    return SlurmExecutor(
        out,
        spec.name,
        r["partition"],
        r["account"],
        r["max_parallel"],
        r["slurm_extra"],
        stream=opt.stream,
    )


def _run_slurm(spec: Spec, out: Path, opt: Options, plan: Plan) -> int:
    from .slurm import live_job, query_states

    ex = _slurm(spec, out, opt)
    rds = [rd for _, rd in plan.to_run]
    ids = sorted(
        {((rd.status() or {}).get("slurm") or {}).get("array_job_id") for rd in rds} - {None}
    )
    states = query_states(ids)
    submit = []
    for run, rd in plan.to_run:
        if rd.state() == State.PENDING and live_job(rd, states):
            continue  # queued by an earlier invocation: wait for it, do not resubmit
        if rd.state() in FINAL:
            rd.reset_for_rerun()
        submit.append((rd, run.resources))
    if len(submit) < len(rds):
        opt.stream.write(f"slurm: {len(rds) - len(submit)} run(s) already queued\n")
    ex.submit(ex.plan(submit))
    if not opt.wait:
        opt.stream.write("slurm: not waiting (--no-wait); rerun the same command to collect\n")
        return EXIT_OK
    try:
        ex.wait(rds, poll_s=opt.poll_s)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def write_manifest(out: Path, spec: Spec, backend: str, art: bk.Artifacts, runs: list[Run]) -> None:
    manifest = {
        "sweep": spec.name,
        "description": spec.description,
        "source": spec.source,
        "spec": spec.raw,
        "backend": backend,
        "caveat": bk.CAVEATS[backend],
        "provenance": art.provenance.to_dict(),
        "paths": art.paths,
        "info": art.info,
        "runs": [r.run_id for r in runs],
        "written_at": now_iso(),
    }
    write_json_atomic(out / "sweep.json", manifest)


def load_provenance(d: dict[str, Any]) -> Provenance:
    return Provenance.from_dict(d)


def status_table(out: Path) -> str:
    lines = []
    counts: Counter = Counter()
    for sp in sorted((out / "runs").glob("*/status.json")):
        rd = RunDir(sp.parent)
        st = rd.status() or {}
        spec = json.loads((sp.parent / "spec.json").read_text())
        counts[st.get("state")] += 1
        err = (st.get("error") or "").splitlines()[0][:100] if st.get("error") else ""
        lines.append(f"{sp.parent.name} {st.get('state', '?'):11s} {spec.get('label', '')} {err}")
    lines.append(summary_line(counts))
    return "\n".join(lines)
