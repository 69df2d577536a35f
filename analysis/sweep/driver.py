"""The sweep driver behind ``run_all.py run``: spec -> runs -> executor -> report.

1. announce the backend (first line of output);
2. check prerequisites (backend tool, kernel, image, free disk, Slurm) and stop
   early with a clear message when one is missing;
3. expand the run matrix (lazily: a 10^6-run spec never sits in memory),
   decide per run: skip done, skip failed/timeout unless --rerun-failed, resume
   interrupted/stale ones; adopt runs done on another machine (--kept, kept.py);
4. execute (local pool or Slurm arrays); a run directory (spec.json, job.json,
   status pending) is created just before its run starts (local) or is
   submitted (Slurm), never all up front; 5. write the report.

More than LARGE_SWEEP runs need Options.allow_large (--allow-large): a typo in
an axis or in --repeats should not start, or even list, a million runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import backends as bk
from .cli_paths import UsageError, sweep_dir_out
from .executors import LocalExecutor, drain_on_sigusr1, pool_size, summary_line
from .kept import KeptError, KeptRuns, load_kept
from .matrix import Run, guest_job, iter_runs, kernel_variants, run_count
from .point import ID_LEN_DIR, Provenance, SweepPoint
from .preflight import (
    calibration_refusal,
    daemon_qemu_refusal,
    image_meta,
    image_problems,
    qemu_timing_refusal,
    switch_marks_qemu_refusal,
)
from .provenance import PrerequisiteError
from .rundir import (
    FINAL,
    RERUN_ON_REQUEST,
    RunDir,
    State,
    StatusError,
    is_stale_running,
    now_iso,
    read_object,
    status_problem,
    write_json_atomic,
)
from .spec import Spec
from .staging import NotStaged

EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE, EXIT_PREREQ, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
LARGE_SWEEP = 10_000  # runs; more need --allow-large


@dataclass
class Options:
    out: Path | None = None
    executor: str = "local"
    jobs: int | None = None
    dry_run: bool = False
    stage_only: bool = False  # --stage-only: build inputs and boot checkpoints, run nothing
    rerun_failed: bool = False
    build: bool = True
    gem5: str | None = None
    report: bool = True
    wait: bool = True
    poll_s: float = 5.0
    allow_large: bool = False
    allow_qemu_timing: bool = False  # --allow-qemu-timing: paper/sensitivity on qemu
    kept: list[Path] = field(default_factory=list)  # --kept: frames dirs of earlier machines
    kept_whole_repeats: bool = False  # --kept-whole-repeats: adopt whole repeats only
    stream: TextIO = field(default_factory=lambda: sys.stdout)  # at call time, not import
    backend_origin: str | None = None  # "--backend" etc. when the CLI set it; None: the spec


@dataclass
class Plan:
    to_run: list[tuple[Run, RunDir]]
    skipped: Counter
    notes: list[str]
    run_ids: list[str] = field(default_factory=list)  # every run of the sweep, in order
    kept: set[str] = field(default_factory=set)  # planned run ids a kept run stands for


Adopt = Callable[[Run], bool]  # does a kept run stand for this planned run?
ADOPTABLE = ("run", "failed", "timeout")  # verdicts a kept done run replaces


def spec_record(spec: Spec, run: Run, art: bk.Artifacts) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "label": run.point.label(),
        "sweep": spec.name,
        "spec_source": spec.source,
        "point": run.point.to_dict(),
        "provenance": art.provenance_for(run.point.boot_kernel).to_dict(),
        "paths": art.paths_for(run.point.boot_kernel),
        "resources": {
            **run.resources.to_dict(),
            "min_free_disk_bytes": spec.resources["min_free_disk_bytes"],
        },
        "caveat": bk.CAVEATS[run.point.backend],
        "created_at": now_iso(),
    }


def existing_run_dirs(out: Path) -> set[str]:
    """Names under <out>/runs, read once: a new sweep's runs have no directory,
    and asking the file system about each of 10^6 runs one by one costs seconds."""
    try:
        with os.scandir(out / "runs") as it:
            return {e.name for e in it}
    except (FileNotFoundError, NotADirectoryError):
        return set()


def classify(
    runs: Iterable[Run],
    out: Path,
    rerun_failed: bool,
    existing: set[str],
    adopt: Adopt | None = None,
    replaced: list[Run] | None = None,
) -> Iterator[tuple[Run, str]]:
    """(run, verdict) per run: "run", "stale" (running, worker gone: run it) or
    why it is skipped ("done", "failed", "timeout", "running elsewhere", "kept":
    @adopt found a run done elsewhere, in place of running or of a failure here;
    the runs that failed here are appended to @replaced).
    """
    for run, verdict in _local_verdicts(runs, out, rerun_failed, existing):
        if adopt is not None and verdict in ADOPTABLE and adopt(run):
            if verdict != "run" and replaced is not None:
                replaced.append(run)
            verdict = "kept"
        yield run, verdict


def replaced_note(replaced: list[Run], out: Path) -> list[str]:
    """The plan note on runs that failed here and were replaced by kept runs:
    the same point done on another build, failed on this one, is worth a look."""
    if not replaced:
        return []
    return [f"kept: {len(replaced)} run(s) that failed here were replaced by kept runs; "
            f"a failure on this build is worth a look: {replaced[0].path(out)}"]  # fmt: skip


def _local_verdicts(
    runs: Iterable[Run], out: Path, rerun_failed: bool, existing: set[str]
) -> Iterator[tuple[Run, str]]:
    """classify() from this output directory alone.

    Only runs whose directory exists touch the file system (and pathlib: at
    10^6 runs, building every run's Path was the dry run's largest cost).
    """
    runs_dir = out / "runs"
    for run in runs:
        if run.dirname not in existing:
            yield run, "run"
            continue
        rd = RunDir(runs_dir / run.dirname)
        state = rd.state()
        if state is None or state in (State.PENDING, State.INTERRUPTED):
            yield run, "run"
        elif state == State.DONE:
            yield run, "done"
        elif state in RERUN_ON_REQUEST:
            yield run, "run" if rerun_failed else state.value
        elif is_stale_running(rd):
            yield run, "stale"
        else:
            yield run, "running elsewhere"


def make_plan(
    runs: Iterable[Run],
    out: Path,
    rerun_failed: bool,
    create: bool = True,
    adopt: Adopt | None = None,
) -> Plan:
    """Decide per run; create=True (a real run) marks stale running runs interrupted.

    Writes no run directory: those are created just before each run starts.
    """
    plan = Plan([], Counter(), [])
    replaced: list[Run] = []
    for run, verdict in classify(runs, out, rerun_failed, existing_run_dirs(out), adopt, replaced):
        plan.run_ids.append(run.run_id)
        if verdict == "kept":
            plan.kept.add(run.run_id)
        if verdict in ("run", "stale"):
            rd = RunDir(run.path(out))
            if verdict == "stale" and create:
                rd.transition(State.INTERRUPTED, error="found running with no live worker")
            plan.to_run.append((run, rd))
            continue
        plan.skipped[verdict] += 1
        if verdict == "running elsewhere":
            plan.notes.append(f"{run.dirname} is running in another process; left alone")
    plan.notes.extend(replaced_note(replaced, out))
    return plan


def whole_repeat_input(
    runs: Iterable[Run], out: Path, art: bk.Artifacts
) -> Iterator[tuple[SweepPoint, Provenance, bool]]:
    """(point, provenance, started here) per planned run, for KeptRuns.whole_repeats:
    a run directory here in any state but pending or interrupted (done, failed,
    timed out, running, or left running by a dead worker: its group runs here)."""
    existing = existing_run_dirs(out)
    unstarted = (None, State.PENDING, State.INTERRUPTED)
    for run in runs:
        here = run.dirname in existing and RunDir(run.path(out)).state() not in unstarted
        yield run.point, art.provenance_for(run.point.boot_kernel), here


def kept_adopter(kept: KeptRuns | None, art: bk.Artifacts) -> Adopt | None:
    """adopt() for classify: the planned run's provenance is that of the kernel
    its point boots (the stock policy boots another build)."""
    if kept is None:
        return None
    return lambda run: kept.adopt(run.point, run.run_id, art.provenance_for(run.point.boot_kernel))


def ensure_run_dir(spec: Spec, art: bk.Artifacts, run: Run, rd: RunDir) -> str | None:
    """Create the run directory if it is not there yet; the problem, if any."""
    try:
        rd.create(spec_record(spec, run, art), guest_job(run.point, run.run_id))
    except (StatusError, OSError) as e:
        return str(e)
    return None


def _skipped_line(skipped: Counter) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(skipped.items()))


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


def too_large(spec: Spec, opt: Options) -> str | None:
    """The refusal message for a sweep over LARGE_SWEEP runs without --allow-large."""
    n = run_count(spec)
    if n <= LARGE_SWEEP or opt.allow_large:
        return None
    return (
        f"sweep {spec.name} expands to {n:,} runs (more than {LARGE_SWEEP:,}); "
        "check the axes and repeats, or pass --allow-large to confirm"
    )


def run_sweep(spec: Spec, opt: Options) -> int:
    """The `run` command; SIGUSR1 drains a local sweep from its first line on."""
    with drain_on_sigusr1():
        return _run_sweep(spec, opt)


def _run_sweep(spec: Spec, opt: Options) -> int:
    w = opt.stream.write
    refusal = too_large(spec, opt)
    if refusal:
        w(f"error: {refusal}\n")
        return EXIT_USAGE
    try:  # before any build: a file or a read-only directory must cost nothing
        sweep_dir_out(opt.out or Path("results") / spec.name, "--out")
    except UsageError as e:
        w(f"error: {e}\n")
        return EXIT_USAGE
    origin = opt.backend_origin or (
        spec.source if spec.source.startswith("preset ") else f"spec {spec.source}"
    )
    backend, why = bk.resolve_backend(spec.backend, opt.gem5, origin)
    w(
        f"backend: {backend} ({why})"
        + (
            " -- functional emulation: timing is NOT architectural performance\n"
            if backend == "qemu"
            else " -- MOESI_hammer timing model\n"
        )
    )
    opt.stream.flush()
    refusal = qemu_timing_refusal(spec, backend, why, opt.allow_qemu_timing)
    refusal = refusal or daemon_qemu_refusal(spec, backend, why)
    refusal = refusal or switch_marks_qemu_refusal(spec, backend, why)
    refusal = refusal or calibration_refusal(spec, backend)
    if refusal:
        w(f"error: refused: {refusal}\n")
        return EXIT_USAGE
    out = (opt.out or Path("results") / spec.name).resolve()
    if opt.kept_whole_repeats and not opt.kept:
        w("error: --kept-whole-repeats needs --kept FRAMES_DIR\n")
        return EXIT_USAGE
    try:  # before any build: a wrong --kept path must cost nothing
        kept = load_kept(opt.kept) if opt.kept else None
    except KeptError as e:
        w(f"error: --kept: {e}\n")
        return EXIT_USAGE
    try:
        art = bk.prepare(
            backend,
            spec.kernel_variant,
            build=opt.build and not opt.dry_run,
            gem5_flag=opt.gem5,
            require=not opt.dry_run,
            extra_variants=tuple(kernel_variants(spec)),
        )
        w(bk.announce(backend, art).replace("backend:", "using:", 1) + "\n")
        why = image_problems(spec, image_meta(Path(art.paths["image"])))
        if why:
            raise PrerequisiteError(why)
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

    w(f"sweep {spec.name}: {run_count(spec)} runs ({spec.source}); output {out}\n")
    if opt.executor == "slurm" and not opt.dry_run:  # dead nodes' "running" -> interrupted
        from .slurm import reconcile_dir

        reconcile_dir(out)
    runs = iter_runs(spec, backend, art.provenance, art.kernel_ids())
    if kept is not None and opt.kept_whole_repeats:
        kept.whole_repeats(whole_repeat_input(runs, out, art), opt.rerun_failed)
        runs = iter_runs(spec, backend, art.provenance, art.kernel_ids())
    adopt = kept_adopter(kept, art)
    if opt.dry_run:
        return dry_run(spec, opt, art, runs, out, adopt, kept)
    plan = make_plan(runs, out, opt.rerun_failed, adopt=adopt)
    plan.notes.extend(kept.notes() if kept else [])
    _plan_summary(w, len(plan.to_run), plan.skipped, plan.notes)
    if opt.stage_only:
        return stage_only(spec, out, opt, plan, art)

    out.mkdir(parents=True, exist_ok=True)
    write_manifest(out, spec, backend, art, plan.run_ids, kept)
    code = EXIT_OK
    if plan.to_run:
        if opt.executor == "local":
            code = _run_local(spec, out, opt, plan, art)
        else:
            code = _run_slurm(spec, out, opt, plan, art)
            if code == EXIT_INTERRUPTED or not opt.wait:
                return code  # --no-wait: submitted, nothing to report yet
    final = final_states(out, plan.run_ids, kept_states(kept, plan.kept))
    w(f"sweep {spec.name}: {summary_line(final)}\n")
    if code == EXIT_OK and any(k not in ("done", "kept") for k in final):
        code = EXIT_FAILED_RUNS
    if opt.report and code != EXIT_INTERRUPTED:
        from ..results.report import write_report

        try:
            paths = write_report(
                [out],
                out,
                title=f"sweep {spec.name}",
                run_ids=set(plan.run_ids) - plan.kept,
                kept=kept.report_inputs() if kept else None,
            )
            w(f"report: {paths['html']}\nreport: {paths['md']}\n")
        except Exception as e:  # a report bug must not hide the sweep's outcome
            w(f"report failed: {type(e).__name__}: {e}\n")
            code = code or EXIT_FAILED_RUNS
    return code


def stage_only(spec: Spec, out: Path, opt: Options, plan: Plan, art: bk.Artifacts) -> int:
    """--stage-only: the stage step of a Slurm submission on any executor: every
    input of the runs still to run checked here and their missing boot
    checkpoints made (one after the other, gem5's output under <out>/stage),
    and nothing run: no run directory is created, so the sweep's next
    invocation runs them all, from the checkpoints made here."""
    recs = [spec_record(spec, run, art) for run, _ in plan.to_run]
    try:
        bk.stage_runs(recs, opt.stream, out / "stage")
    except (NotStaged, RuntimeError, OSError) as e:
        opt.stream.write(f"error: staging failed: {e}\n")
        return EXIT_PREREQ
    opt.stream.write(
        f"sweep {spec.name}: staged for {len(recs)} run(s); nothing run (--stage-only)\n"
    )
    return EXIT_OK


def _plan_summary(w: Any, n_run: int, skipped: Counter, notes: list[str]) -> None:
    sk = _skipped_line(skipped)
    w(f"to run: {n_run}" + (f"; skipped: {sk}" if sk else "") + "\n")
    if skipped.get("failed") or skipped.get("timeout"):
        w("  (failed/timed-out runs are left as they are; --rerun-failed runs them again)\n")
    for n in notes:
        w(f"  note: {n}\n")


def dry_run(
    spec: Spec,
    opt: Options,
    art: bk.Artifacts,
    runs: Iterable[Run],
    out: Path,
    adopt: Adopt | None = None,
    kept: KeptRuns | None = None,
) -> int:
    """List the runs a real run would start, streaming; write nothing anywhere."""
    w = opt.stream.write
    for need in art.info.get("would_build", []):
        w(f"will build {need}\n")  # a dry run builds nothing; the real run first builds it
    skipped: Counter = Counter()
    notes: list[str] = []
    to_run: list[tuple[RunDir, Any]] = []  # Slurm only: the array scripts group them
    n_run = 0
    replaced: list[Run] = []
    existing = existing_run_dirs(out)
    for run, verdict in classify(runs, out, opt.rerun_failed, existing, adopt, replaced):
        if verdict in ("run", "stale"):
            n_run += 1
            w(f"  {run.dirname} {run.point.label()}\n")
            if opt.executor == "slurm":
                to_run.append((RunDir(run.path(out)), run))
        else:
            skipped[verdict] += 1
            if verdict == "running elsewhere":
                notes.append(f"{run.dirname} is running in another process; left alone")
    notes += replaced_note(replaced, out)
    _plan_summary(w, n_run, skipped, notes + (kept.notes() if kept else []))
    if opt.executor == "slurm":
        missing = bk.missing_checkpoints(spec_record(spec, run, art) for _, run in to_run)
        if missing:  # the submission would boot them here first, one after the other
            keys = ", ".join(f"{k} ({n} run(s))" for k, n in missing.items())
            w(
                f"error: not staged: {len(missing)} boot checkpoint(s) of these runs are not "
                f"in {bk.checkpoint_base()}: {keys}; the submission would boot them on this "
                "host first, one after the other. Make them with the same command and "
                "--stage-only, then --dry-run again for the job scripts\n"
            )
            return EXIT_PREREQ
        ex = _slurm(spec, out, opt)
        ex.dry_run(ex.prepare(to_run, art.provenance.tool_version))
    return EXIT_OK


def _run_local(spec: Spec, out: Path, opt: Options, plan: Plan, art: bk.Artifacts) -> int:
    w = opt.stream.write
    n, why_n = pool_size(
        max(r.resources.cpus for r, _ in plan.to_run),
        max(r.resources.mem_bytes for r, _ in plan.to_run),
        opt.jobs,
    )
    w(f"executor: local, {why_n}; driver pid {os.getpid()} (`kill -USR1` it to drain)\n")
    if n > 1:
        plan.to_run[:] = boots_first(plan.to_run, lambda r: _checkpoint_of(spec, r, art))

    def prepare(i: int) -> str | None:  # just before run i starts: its directory
        run, rd = plan.to_run[i]
        problem = ensure_run_dir(spec, art, run, rd)
        if problem is None and rd.state() in FINAL:
            rd.reset_for_rerun()
        return problem

    ex = LocalExecutor(n, spec.resources["min_free_disk_bytes"], out=opt.stream)
    res = ex.run([(rd, run.point.label()) for run, rd in plan.to_run], prepare=prepare)
    if res.interrupted:
        w(
            "interrupted: finished runs are intact; running ones are marked interrupted; "
            "rerun the same command to resume\n"
        )
        return EXIT_INTERRUPTED
    if res.stopped_reason:
        w(f"stopped early: {res.stopped_reason}\n")
        return EXIT_PREREQ
    if res.drained:  # 0: the drain came after the last run had started; the sweep is whole
        w(
            f"drained: the running runs finished, {res.drained} not started; "
            "rerun the same command to resume\n"
        )
        return EXIT_INTERRUPTED
    return EXIT_OK


def _checkpoint_of(spec: Spec, run: Run, art: bk.Artifacts) -> str | None:
    """The boot checkpoint a run restores (None: it boots without one)."""
    if run.point.backend != "gem5" or not (run.point.gem5 or {}).get("checkpoint", True):
        return None
    return bk.checkpoint_key(spec_record(spec, run, art))


def boots_first(
    to_run: list[tuple[Run, RunDir]], key: Callable[[Run], str | None], limit: int = 2000
) -> list[tuple[Run, RunDir]]:
    """The first run of each boot checkpoint moved to the front, the rest in
    order: a worker that boots a checkpoint blocks the others that need it
    (backends.ensure_checkpoint's lock), so parallel workers should start on
    different checkpoints (machine.boot_checkpoints > 1: the repeats' boots
    run side by side instead of one after the other). Plans longer than
    ``limit`` keep their order (a key hashes configs/ each time)."""
    if len(to_run) > limit:
        return to_run
    seen: set[str] = set()
    first, rest = [], []
    for item in to_run:
        k = key(item[0])
        if k is not None and k not in seen:
            seen.add(k)
            first.append(item)
        else:
            rest.append(item)
    return first + rest


def kept_states(kept: KeptRuns | None, ids: Collection[str]) -> dict[str, str]:
    """planned run id -> the state of the kept run that stands for it."""
    return {rid: kept.adopted[rid].state for rid in ids} if kept else {}


def final_states(
    out: Path, run_ids: list[str], kept: Collection[str] | dict[str, str] = ()
) -> Counter:
    """State counts of the sweep's runs; a run without a directory never started;
    a run a kept run stands for is "kept" (done, on another machine), or "kept
    failed" / "kept timeout" (@kept as a dict: planned id -> the kept run's state;
    --kept-whole-repeats adopts failures)."""
    existing = existing_run_dirs(out)
    counts: Counter = Counter()
    states = kept if isinstance(kept, dict) else dict.fromkeys(kept, "done")
    for rid in run_ids:
        if rid in states:
            counts["kept" if states[rid] == "done" else f"kept {states[rid]}"] += 1
            continue
        name = rid[:ID_LEN_DIR]
        st = RunDir(out / "runs" / name).state() if name in existing else None
        counts[(st or State.PENDING).value] += 1
    return counts


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


def _run_slurm(spec: Spec, out: Path, opt: Options, plan: Plan, art: bk.Artifacts) -> int:
    from .slurm import live_job, query_states

    ex = _slurm(spec, out, opt)
    ready = []
    for run, rd in plan.to_run:  # a job reads its run directory: create them before sbatch
        problem = ensure_run_dir(spec, art, run, rd)
        if problem:
            opt.stream.write(f"  note: {rd.path.name} not submitted: {problem}\n")
        else:
            ready.append((run, rd))
    rds = [rd for _, rd in ready]
    ids = sorted(
        {((rd.status() or {}).get("slurm") or {}).get("array_job_id") for rd in rds} - {None}
    )
    states = query_states(ids)
    submit = []
    for run, rd in ready:
        if rd.state() == State.PENDING and live_job(rd, states):
            continue  # queued by an earlier invocation: wait for it, do not resubmit
        if rd.state() in FINAL:
            rd.reset_for_rerun()
        submit.append((rd, run))
    if len(submit) < len(rds):
        opt.stream.write(f"slurm: {len(rds) - len(submit)} run(s) already queued\n")
    jobs = ex.prepare(submit, art.provenance.tool_version) if submit else []  # + cost preview
    if submit:
        try:  # kernel, image, gem5, boot checkpoints: here, once, before the array
            bk.stage_runs([rd.spec() for rd, _ in submit], opt.stream, out / "slurm")
        except (NotStaged, RuntimeError, OSError) as e:
            opt.stream.write(f"error: staging failed, nothing submitted: {e}\n")
            return EXIT_PREREQ
    ex.submit(jobs)
    if not opt.wait:
        opt.stream.write("slurm: not waiting (--no-wait); rerun the same command to collect\n")
        return EXIT_OK
    try:
        ex.wait(rds, poll_s=opt.poll_s)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK


def write_manifest(
    out: Path,
    spec: Spec,
    backend: str,
    art: bk.Artifacts,
    run_ids: list[str],
    kept: KeptRuns | None = None,
) -> None:
    manifest = {
        "sweep": spec.name,
        "description": spec.description,
        "source": spec.source,
        "spec": spec.raw,
        "backend": backend,
        "caveat": bk.CAVEATS[backend],
        "provenance": art.provenance.to_dict(),
        "paths": art.paths,
        "kernels": art.kernels,
        "info": art.info,
        "runs": run_ids,
        "kept": kept_record(kept),
        "git": git_state(),
        "written_at": now_iso(),
    }
    write_json_atomic(out / "sweep.json", manifest)


def kept_record(kept: KeptRuns | None) -> dict[str, dict[str, str]]:
    """sweep.json "kept": planned run id -> the kept run that stands for it and
    its frames directory, an absolute path (load_kept resolves it), where keep
    reads it back."""
    adopted = kept.adopted.items() if kept else ()
    return {p: {"run_id": k.run_id, "frames": str(k.frames), "state": k.state} for p, k in adopted}


def git_state() -> dict[str, Any] | None:
    """The project commit the sweep ran from and whether its tree had local
    changes (a finding quotes it); None outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    git = ["git", "-C", str(root)]
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def load_provenance(d: dict[str, Any]) -> Provenance:
    return Provenance.from_dict(d)


def status_table(out: Path) -> str:
    """One line per run directory (state, point, error or the reason the state is
    not known), then the counts and the runs of sweep.json not started yet."""
    lines = []
    counts: Counter = Counter()
    names = sorted(existing_run_dirs(out))
    for name in names:
        state, label, note = _status_row(out / "runs" / name)
        counts[state] += 1
        lines.append(f"{name} {state:11s} {label} {note}".rstrip())
    lines.append(summary_line(counts))
    manifest, _ = read_object(out / "sweep.json")
    planned = (manifest or {}).get("runs")
    kept = (manifest or {}).get("kept")
    kept = kept if isinstance(kept, dict) else {}
    if isinstance(planned, list):
        have = set(names) | {r[:ID_LEN_DIR] for r in kept}
        missing = sum(1 for r in planned if isinstance(r, str) and r[:ID_LEN_DIR] not in have)
        done = sum(1 for v in kept.values() if not isinstance(v, dict) or
                   v.get("state", "done") == "done")  # fmt: skip
        if done:
            lines.append(f"{done} run(s) of sweep.json kept (done on another machine, --kept)")
        if len(kept) - done:
            lines.append(f"{len(kept) - done} run(s) of sweep.json kept as failed or timed out "
                         "on another machine (--kept-whole-repeats)")  # fmt: skip
        if missing:
            lines.append(f"{missing} run(s) of sweep.json not started (no run directory yet)")
    return "\n".join(lines)


def _status_row(path: Path) -> tuple[str, str, str]:
    """(state, label, note) of one run directory; never raises on bad files."""
    spec, spec_problem = read_object(path / "spec.json")
    label = str(spec.get("label", "")) if spec else "?"
    notes = [f"(spec.json {spec_problem})"] if spec_problem else []
    st, st_problem = read_object(path / "status.json")
    if st is not None:
        st_problem = status_problem(st)
    if st_problem == "missing":
        return "missing", label, " ".join([*notes, "(no status.json)"])
    if st_problem or st is None:
        return "unknown", label, " ".join([*notes, f"(status.json {st_problem})"])
    err = st.get("error")
    if err:
        notes.append(str(err).splitlines()[0][:100] if str(err).strip() else "")
    return str(st["state"]), label, " ".join(notes)
