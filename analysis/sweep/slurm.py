"""The Slurm executor: one sbatch job array per resource shape.

Runs with the same (cpus, memory, time limit) go into one array whose task i
reads line i+1 of a run list file and execs ``run_all.py worker <run dir>``:
the same worker as the local executor, so status.json is written the same way
from inside the job. The driver records the job id in every run's status.json,
and (with the default ``--wait``) polls Slurm and maps job states back:

    PENDING, CONFIGURING, REQUEUED...  -> pending (worker not started yet)
    RUNNING, COMPLETING                -> running (the worker records it itself)
    COMPLETED                          -> whatever the worker recorded
    TIMEOUT, DEADLINE                  -> timeout
    CANCELLED, PREEMPTED               -> interrupted
    FAILED, NODE_FAIL, BOOT_FAIL,
    OUT_OF_MEMORY, SPECIAL_EXIT        -> failed
    (any terminal state a worker did not record becomes the mapped state)

Requirements on a real cluster: the repository, the Python environment and the
output directory on a file system every node sees at the same path; the kernel,
image and gem5 paths in spec.json too. Nothing else is node-local. Nothing from
a spec reaches the script unquoted: resources are validated numbers or names,
paths are passed through shlex.quote, and run directories come from a file.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .matrix import Resources
from .rundir import FINAL, RunDir, State, now_iso
from .spec import sbatch_reserved

ROOT = Path(__file__).resolve().parents[2]
# Slurm's limit = run time limit + this, so the worker's own limit fires first
# (tests lower it to see Slurm's TIMEOUT mapped back).
SLURM_MARGIN_S = int(os.environ.get("NUMA_LB_SLURM_MARGIN_S", "300"))

PENDING_STATES = {
    "PENDING",
    "CONFIGURING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "SUSPENDED",
    "STOPPED",
    "SIGNALING",
    "STAGE_OUT",
}
RUNNING_STATES = {"RUNNING", "COMPLETING"}
STATE_MAP = {
    "COMPLETED": None,  # the worker's own record decides
    "TIMEOUT": State.TIMEOUT,
    "DEADLINE": State.TIMEOUT,
    "CANCELLED": State.INTERRUPTED,
    "PREEMPTED": State.INTERRUPTED,
    "FAILED": State.FAILED,
    "NODE_FAIL": State.FAILED,
    "BOOT_FAIL": State.FAILED,
    "OUT_OF_MEMORY": State.FAILED,
    "SPECIAL_EXIT": State.FAILED,
    "REVOKED": State.FAILED,
}


class SlurmError(RuntimeError):
    pass


def slurm_pattern_path(path: Path | str) -> str:
    """A literal path for --output/--error: sbatch expands %x, %j, %A ... there
    (an output directory named "a%x" would otherwise change), %% is a literal %."""
    return str(path).replace("%", "%%")


def slurm_time(seconds: int) -> str:
    d, rem = divmod(int(seconds), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}"


@dataclass
class ArrayJob:
    key: Resources
    runs: list[RunDir]
    list_file: Path
    script_file: Path
    script: str
    sbatch_argv: list[str]
    job_id: str | None = None


class SlurmExecutor:
    name = "slurm"

    def __init__(
        self,
        out: Path,
        sweep: str,
        partition: str | None,
        account: str | None,
        max_parallel: int | None,
        extra: list[str],
        python: str = sys.executable,
        stream: TextIO = sys.stdout,
    ) -> None:
        self.out = Path(out).resolve()
        self.sweep = sweep
        self.partition = partition
        self.account = account
        self.max_parallel = max_parallel
        for x in extra:  # the spec refuses these too; this guards other callers
            if sbatch_reserved(x):
                raise SlurmError(f"extra sbatch option {x!r} would override --{sbatch_reserved(x)}")
        self.extra = extra
        self.python = python
        self.stream = stream

    # ------------------------------------------------------------ scripts
    def plan(self, runs: list[tuple[RunDir, Resources]]) -> list[ArrayJob]:
        groups: dict[tuple[int, int, int], list[RunDir]] = defaultdict(list)
        for rd, res in runs:
            groups[(res.cpus, res.mem_bytes, res.time_limit_s)].append(rd)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        jobs = []
        sdir = self.out / "slurm"
        for i, ((cpus, mem, tl), rds) in enumerate(sorted(groups.items())):
            base = sdir / f"{stamp}-{i}"
            list_file = base.with_suffix(".runs")
            script = self.script(list_file, len(rds), Resources(cpus, mem, tl))
            argv = [
                "sbatch",
                "--parsable",
                f"--output={slurm_pattern_path(sdir)}/%A_%a.out",
                f"--chdir={ROOT}",
                str(base.with_suffix(".sh")),
            ]
            jobs.append(
                ArrayJob(
                    Resources(cpus, mem, tl), rds, list_file, base.with_suffix(".sh"), script, argv
                )
            )
        return jobs

    def script(self, list_file: Path, n: int, res: Resources) -> str:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"numa-lb-{self.sweep}")[:64]
        arr = f"0-{n - 1}" + (f"%{self.max_parallel}" if self.max_parallel else "")
        lines = [
            "#!/bin/bash",
            f"#SBATCH --job-name={name}",
            f"#SBATCH --array={arr}",
            "#SBATCH --ntasks=1",
            f"#SBATCH --cpus-per-task={res.cpus}",
            f"#SBATCH --mem={max(1, res.mem_bytes >> 20)}M",
            f"#SBATCH --time={slurm_time(res.time_limit_s + SLURM_MARGIN_S)}",
        ]
        if self.partition:
            lines.append(f"#SBATCH --partition={self.partition}")
        if self.account:
            lines.append(f"#SBATCH --account={self.account}")
        lines += [f"#SBATCH {x}" for x in self.extra]
        lines += [
            "# numa-lb-study sweep: task i runs the run directory on line i+1 of the list.",
            "set -euo pipefail",
            f"runs={shlex.quote(str(list_file))}",
            'run_dir=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$runs")',
            '[ -n "$run_dir" ] || { echo "no run for task $SLURM_ARRAY_TASK_ID" >&2; exit 2; }',
            f"exec {shlex.quote(self.python)} {shlex.quote(str(ROOT / 'run_all.py'))} "
            'worker "$run_dir" --executor slurm',
            "",
        ]
        return "\n".join(lines)

    def dry_run(self, jobs: list[ArrayJob]) -> None:
        for j in jobs:
            self.stream.write(
                f"# {len(j.runs)} run(s): {' '.join(shlex.quote(a) for a in j.sbatch_argv)}\n"
            )
            self.stream.write(f"# {j.list_file}:\n")
            for rd in j.runs:
                self.stream.write(f"#   {rd.path}\n")
            self.stream.write(j.script + "\n")

    # ------------------------------------------------------------ submit
    def submit(self, jobs: list[ArrayJob]) -> None:
        for j in jobs:
            j.script_file.parent.mkdir(parents=True, exist_ok=True)
            j.list_file.write_text("".join(f"{rd.path}\n" for rd in j.runs))
            j.script_file.write_text(j.script)
            r = subprocess.run(j.sbatch_argv, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise SlurmError(f"sbatch failed (exit {r.returncode}): {r.stderr.strip()}")
            j.job_id = r.stdout.strip().split(";")[0]
            for i, rd in enumerate(j.runs):
                rd.update(
                    executor="slurm",
                    slurm={
                        "job_id": f"{j.job_id}_{i}",
                        "array_job_id": j.job_id,
                        "array_task_id": str(i),
                        "state": "PENDING",
                        "submitted_at": now_iso(),
                    },
                )
            self.stream.write(
                f"submitted array job {j.job_id}: {len(j.runs)} run(s), "
                f"{j.key.cpus} cpu, {j.key.mem_bytes >> 20} MiB, "
                f"{slurm_time(j.key.time_limit_s + SLURM_MARGIN_S)}\n"
            )

    # ------------------------------------------------------------ states
    def wait(
        self, runs: list[RunDir], poll_s: float = 2.0, timeout_s: float | None = None
    ) -> Counter:
        """Poll until every run is final; map Slurm states into status.json."""
        t0 = time.monotonic()
        last = ""
        settle: float | None = None
        try:
            while True:
                states = query_states(sorted({_array_id(rd) for rd in runs if _array_id(rd)}))
                counts = reconcile(runs, states)
                line = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                if line != last:
                    self.stream.write(f"slurm: {line}\n")
                    self.stream.flush()
                    last = line
                if all(rd.state() in FINAL for rd in runs):
                    # keep polling briefly so the final Slurm state lands in status.json
                    settle = settle if settle is not None else time.monotonic()
                    if all(_slurm_settled(rd) for rd in runs) or time.monotonic() - settle > 30:
                        return counts
                if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                    raise SlurmError(f"runs not finished after {timeout_s:.0f} s")
                time.sleep(poll_s)
        except KeyboardInterrupt:
            ids = sorted({_array_id(rd) for rd in runs if _array_id(rd)})
            self.stream.write(
                "\nstopped waiting (Ctrl-C); the Slurm jobs keep running "
                f"(scancel {' '.join(ids)} to stop them). Rerun the same command to "
                "collect them; nothing finished is rerun.\n"
            )
            raise


def _slurm_settled(rd: RunDir) -> bool:
    st = rd.status() or {}
    sl = st.get("slurm") or {}
    return (
        st.get("state") == State.DONE.value
        or sl.get("state") not in PENDING_STATES | RUNNING_STATES
    )


def _array_id(rd: RunDir) -> str | None:
    s = (rd.status() or {}).get("slurm") or {}
    return s.get("array_job_id")


def query_states(array_ids: list[str]) -> dict[str, tuple[str, str | None]]:
    """{"<array>_<task>": (STATE, exit code)} from squeue, then scontrol, then sacct."""
    out: dict[str, tuple[str, str | None]] = {}
    if not array_ids:
        return out
    r = subprocess.run(
        ["squeue", "-h", "-r", "-j", ",".join(array_ids), "-o", "%i|%T"],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode == 0:
        for line in r.stdout.splitlines():
            jid, _, st = line.strip().partition("|")
            out[jid] = (st, None)
    for aid in array_ids:
        r = subprocess.run(
            ["scontrol", "-o", "show", "job", aid], capture_output=True, text=True, check=False
        )
        for line in r.stdout.splitlines():
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if f.get("ArrayJobId") and f.get("ArrayTaskId", "").isdigit():
                out.setdefault(
                    f"{f['ArrayJobId']}_{f['ArrayTaskId']}",
                    (f.get("JobState", "UNKNOWN"), f.get("ExitCode")),
                )
        r = subprocess.run(
            ["sacct", "-n", "-P", "-X", "-j", aid, "-o", "JobID,State,ExitCode"],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode == 0:
            for line in r.stdout.splitlines():
                parts = line.split("|")
                if len(parts) == 3 and "_" in parts[0] and "[" not in parts[0]:
                    out.setdefault(parts[0], (parts[1].split()[0], parts[2]))
    return out


def reconcile(runs: list[RunDir], states: dict[str, tuple[str, str | None]]) -> Counter:
    """Write Slurm's view into status.json where the worker could not; count states."""
    counts: Counter = Counter()
    for rd in runs:
        st = rd.status() or {}
        ours = State(st.get("state", "pending"))
        slurm = st.get("slurm") or {}
        jid = slurm.get("job_id")
        sl_state, sl_exit = states.get(jid, (None, None)) if jid else (None, None)
        if sl_state and ours != State.DONE and slurm.get("state") != sl_state:
            rd.update(
                slurm={**slurm, "state": sl_state, "exit_code": sl_exit, "seen_at": now_iso()}
            )
        if sl_state and sl_state not in PENDING_STATES | RUNNING_STATES:
            mapped = STATE_MAP.get(sl_state, State.FAILED)
            if ours in (State.PENDING, State.RUNNING) and rd.is_locked():
                pass  # its worker is still alive (being signalled): it records the end itself
            elif ours in (State.PENDING, State.RUNNING):
                if mapped is None:
                    mapped = State.FAILED
                    err = f"Slurm job {jid} COMPLETED but the worker recorded no final state"
                else:
                    err = f"Slurm job {jid} ended {sl_state} (exit {sl_exit})"
                if ours == State.PENDING and mapped in (State.INTERRUPTED,):
                    rd.transition(State.INTERRUPTED, error=err, finished_at=now_iso())
                elif ours == State.PENDING:
                    rd.transition(mapped, error=err, finished_at=now_iso())
                else:
                    rd.transition(mapped, error=err, finished_at=now_iso(), log_tail=rd.log_tail())
            elif ours == State.INTERRUPTED and mapped == State.TIMEOUT:
                rd.transition(State.TIMEOUT, error=f"Slurm time limit (job {jid} {sl_state})")
        if sl_state is None and ours == State.PENDING and jid:
            # Not known to Slurm (any more): lost before it started.
            if slurm.get("seen_at") or slurm.get("lost_polls", 0) >= 3:
                rd.transition(State.FAILED, error=f"Slurm job {jid} vanished before starting")
            else:
                rd.update(slurm={**slurm, "lost_polls": slurm.get("lost_polls", 0) + 1})
        counts[(rd.state() or State.PENDING).value] += 1
    return counts


def slurm_available() -> str | None:
    """None when sbatch and squeue answer, else the reason."""
    for exe in ("sbatch", "squeue", "scontrol"):
        try:
            subprocess.run([exe, "--version"], capture_output=True, check=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            return f"{exe}: {e}"
    r = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return f"squeue cannot reach slurmctld: {r.stderr.strip()}"
    return None


def live_job(rd: RunDir, states: dict[str, tuple[str, str | None]]) -> bool:
    """A pending/running run whose Slurm job is still queued or running."""
    jid = ((rd.status() or {}).get("slurm") or {}).get("job_id")
    st = states.get(jid, (None, None))[0] if jid else None
    return st in PENDING_STATES | RUNNING_STATES
