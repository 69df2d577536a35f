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
    CANCELLED, PREEMPTED, NODE_FAIL,
    BOOT_FAIL                          -> interrupted (not the run's fault: the
                                          same command resumes it)
    FAILED, OUT_OF_MEMORY, SPECIAL_EXIT -> failed
    (any terminal state a worker did not record becomes the mapped state)

A run whose node died is requeued by Slurm where the cluster allows it
(JobRequeue=1, the default; the new attempt starts once the old job
credential has expired, 120 s by default) or ends NODE_FAIL -> interrupted.
A run recorded running whose job Slurm no longer knows and whose worker
holds no lock is lost: interrupted. Before planning, a rerun reconciles the
runs of the output directory this way (``reconcile_dir``), so rerunning the
same command completes whatever a dead node left.

Arrays larger than the cluster's MaxArraySize (``scontrol show config``) are
split into several arrays; with ``resources.max_parallel`` each part waits
for the one before (``--dependency=afterany``) so the limit holds overall.
The job script exports NUMA_LB_STAGED_ONLY=1: the driver staged kernel,
image, gem5 and boot checkpoints on the submitting host (staging.py), and a
compute node never builds one.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .matrix import Resources
from .rundir import FINAL, RunDir, State, now_iso
from .spec import sbatch_reserved
from .staging import STAGED_ONLY_ENV

ROOT = Path(__file__).resolve().parents[2]
# Slurm's limit = run time limit + this, so the worker's own limit fires first
# (tests lower it to see Slurm's TIMEOUT mapped back).
SLURM_MARGIN_S = int(os.environ.get("NUMA_LB_SLURM_MARGIN_S", "300"))
# Slurm's own default; used when the cluster cannot be asked (a dry run elsewhere).
DEFAULT_MAX_ARRAY_SIZE = 1001

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
    "NODE_FAIL": State.INTERRUPTED,
    "BOOT_FAIL": State.INTERRUPTED,
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
    after: ArrayJob | None = None  # a part of a split group: starts after this one
    part: tuple[int, int] = (1, 1)  # (part, parts) of its resource group


@dataclass
class ClusterInfo:
    """What the preview and the planner need to know about the cluster."""

    max_array_size: int
    max_array_note: str
    partition: str | None
    nodes: list[dict[str, Any]] = field(default_factory=list)  # usable nodes of the partition
    problem: str | None = None


def parse_config_value(text: str, key: str) -> str | None:
    """A value of `scontrol show config` output ("Key = value" lines)."""
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and k.strip() == key:
            return v.strip()
    return None


def parse_sinfo_nodes(text: str, partition: str | None) -> tuple[str | None, list[dict[str, Any]]]:
    """(partition, usable nodes) from `sinfo -h -N -o %N|%P|%c|%m|%T` output.

    No partition given: the default one (sinfo marks it with *). Nodes that
    are down, drained, failing or not responding are not usable.
    """
    rows = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5:
            continue
        name, part, cpus, mem, state = parts
        rows.append((name, part, cpus, mem, state))
    if partition is None:
        partition = next((p.rstrip("*") for _, p, *_ in rows if p.endswith("*")), None)
    nodes = []
    bad = ("down", "drain", "fail", "maint", "reserved", "unknown", "future", "inval", "*")
    for name, part, cpus, mem, state in rows:
        if part.rstrip("*") != partition:
            continue
        st = state.lower()
        if any(b in st for b in bad) or not cpus.isdigit() or not mem.isdigit():
            continue
        nodes.append({"name": name, "cpus": int(cpus), "mem_mib": int(mem), "state": state})
    return partition, nodes


def cluster_info(partition: str | None) -> ClusterInfo:
    """MaxArraySize from `scontrol show config`, usable nodes from sinfo."""
    try:
        r = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        r = None
        why = f"scontrol: {e}"
    else:
        err = " ".join(r.stderr.split())  # one line
        why = f"scontrol show config: exit {r.returncode}: {err[-200:]}"
    raw = parse_config_value(r.stdout, "MaxArraySize") if r and r.returncode == 0 else None
    if raw is not None and raw.isdigit() and int(raw) > 0:
        info = ClusterInfo(int(raw), f"MaxArraySize {raw} (scontrol show config)", partition)
    else:
        note = f"MaxArraySize unknown, assumed {DEFAULT_MAX_ARRAY_SIZE} (Slurm's default)"
        if raw is not None:
            why = f"MaxArraySize = {raw!r} in scontrol show config"
        return ClusterInfo(DEFAULT_MAX_ARRAY_SIZE, note, partition, problem=why)
    try:
        s = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N|%P|%c|%m|%T"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        info.problem = f"sinfo: {e}"
        return info
    if s.returncode != 0:
        info.problem = f"sinfo: exit {s.returncode}: {' '.join(s.stderr.split())[-200:]}"
        return info
    info.partition, info.nodes = parse_sinfo_nodes(s.stdout, partition)
    return info


def split(items: list[Any], size: int) -> list[list[Any]]:
    """Consecutive parts of at most `size` items (size >= 1)."""
    if size < 1:
        raise ValueError(f"array size limit must be >= 1, got {size}")
    return [items[i : i + size] for i in range(0, len(items), size)]


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
    def plan(
        self, runs: list[tuple[RunDir, Resources]], max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    ) -> list[ArrayJob]:
        """One array per resource shape; a shape with more runs than the
        cluster's MaxArraySize becomes several arrays (parts)."""
        groups: dict[tuple[int, int, int], list[RunDir]] = defaultdict(list)
        for rd, res in runs:
            groups[(res.cpus, res.mem_bytes, res.time_limit_s)].append(rd)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        jobs = []
        sdir = self.out / "slurm"
        for i, ((cpus, mem, tl), rds) in enumerate(sorted(groups.items())):
            parts = split(rds, max_array_size)
            prev: ArrayJob | None = None
            for k, part in enumerate(parts):
                base = sdir / (f"{stamp}-{i}" + (f"-{k + 1}" if len(parts) > 1 else ""))
                list_file = base.with_suffix(".runs")
                script = self.script(list_file, len(part), Resources(cpus, mem, tl))
                argv = [
                    "sbatch",
                    "--parsable",
                    f"--output={slurm_pattern_path(sdir)}/%A_%a.out",
                    f"--chdir={ROOT}",
                    str(base.with_suffix(".sh")),
                ]
                job = ArrayJob(
                    Resources(cpus, mem, tl),
                    part,
                    list_file,
                    base.with_suffix(".sh"),
                    script,
                    argv,
                    after=prev if self.max_parallel else None,
                    part=(k + 1, len(parts)),
                )
                jobs.append(job)
                prev = job
        return jobs

    def prepare(
        self, runs: list[tuple[RunDir, Any]], tool_version: str, info: ClusterInfo | None = None
    ) -> list[ArrayJob]:
        """Plan the arrays for the cluster (split at MaxArraySize) and print the
        split and the cost preview. runs: (run dir, matrix.Run)."""
        info = info or cluster_info(self.partition)
        jobs = self.plan([(rd, run.resources) for rd, run in runs], info.max_array_size)
        note = self.split_note(jobs, info.max_array_note)
        if note:
            self.stream.write(note + "\n")
        if info.problem:
            self.stream.write(
                f"slurm: the cluster could not be asked ({info.problem}); "
                f"{info.max_array_note}; parallelism unknown\n"
            )
        self.stream.write(self.preview(jobs, runs, tool_version, info) + "\n")
        self.stream.flush()
        return jobs

    def preview(
        self, jobs: list[ArrayJob], runs: list[tuple[RunDir, Any]], tool_version: str,
        info: ClusterInfo,
    ) -> str:  # fmt: skip
        from . import cost

        point_of = {rd.path: run.point for rd, run in runs}
        groups: list[cost.Group] = []
        index: dict[tuple[int, int, int], int] = {}
        for j in jobs:
            gk = (j.key.cpus, j.key.mem_bytes, j.key.time_limit_s)
            if gk not in index:
                p, why = cost.slots(info.nodes, j.key.cpus, j.key.mem_bytes, self.max_parallel)
                if p and info.partition:
                    why += f" in partition {info.partition}"
                index[gk] = len(groups)
                groups.append(
                    cost.Group(
                        f"{j.key.cpus} cpu, {j.key.mem_bytes >> 20} MiB, "
                        f"{slurm_time(j.key.time_limit_s + SLURM_MARGIN_S)}",
                        j.key.cpus,
                        j.key.mem_bytes,
                        p,
                        why,
                    )
                )
            g = groups[index[gk]]
            for rd in j.runs:
                pt = point_of[rd.path]
                g.items.append(
                    cost.Item(
                        index[gk],
                        cost.shape_of(pt.to_dict(), tool_version),
                        pt.mix,
                        pt.threads,
                        j.key.cpus,
                    )
                )
        keys = {cost.shape_key(it.shape) for g in groups for it in g.items}
        base = cost.history_dir()
        return cost.preview(groups, cost.load_history(keys, base), base)

    def split_note(self, jobs: list[ArrayJob], max_array_note: str) -> str | None:
        """One line per split group: how many arrays and why."""
        lines = []
        for j in jobs:
            if j.part[1] > 1 and j.part[0] == 1:
                sizes = [len(x.runs) for x in jobs if x.key == j.key]
                chain = (
                    f"; each part starts after the one before (max_parallel {self.max_parallel})"
                    if self.max_parallel
                    else ""
                )
                lines.append(
                    f"slurm: {sum(sizes)} runs of {j.key.cpus} cpu, {j.key.mem_bytes >> 20} MiB "
                    f"split into {len(sizes)} arrays of {' + '.join(map(str, sizes))} "
                    f"({max_array_note}){chain}"
                )
        return "\n".join(lines) or None

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
            "# kernel, image, gem5 and boot checkpoints were staged before submission:",
            "# a compute node never builds them",
            f"export {STAGED_ONLY_ENV}=1",
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
                f"# {len(j.runs)} run(s): {' '.join(shlex.quote(a) for a in self.argv(j))}\n"
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
            r = subprocess.run(self.argv(j), capture_output=True, text=True, check=False)
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
                f"{slurm_time(j.key.time_limit_s + SLURM_MARGIN_S)}"
                + (f" (part {j.part[0]}/{j.part[1]})" if j.part[1] > 1 else "")
                + (f", after {j.after.job_id}" if j.after and j.after.job_id else "")
                + "\n"
            )

    @staticmethod
    def argv(j: ArrayJob) -> list[str]:
        """sbatch's arguments; a later part of a split group depends on the one before."""
        if j.after is None:
            return list(j.sbatch_argv)
        dep = f"--dependency=afterany:{j.after.job_id or '<previous part>'}"
        return [*j.sbatch_argv[:-1], dep, j.sbatch_argv[-1]]

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
                states, answered = query(sorted({_array_id(rd) for rd in runs if _array_id(rd)}))
                counts = reconcile(runs, states, lost_after=3 if answered else None)
                line = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                if line != last:
                    self.stream.write(f"slurm: {line}\n")
                    self.stream.flush()
                    last = line
                if all(rd.state() in FINAL for rd in runs) and not any(map(_requeued, runs)):
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


def _requeued(rd: RunDir) -> bool:
    """Ended on our side (e.g. its node failed) but queued again by Slurm
    (reconcile wrote the pending state after the end): it will run again."""
    st = rd.status() or {}
    sl = st.get("slurm") or {}
    return st.get("state") != State.DONE.value and sl.get("state") in PENDING_STATES


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
    return query(array_ids)[0]


def query(array_ids: list[str]) -> tuple[dict[str, tuple[str, str | None]], bool]:
    """query_states and whether Slurm answered (squeue reached slurmctld)."""
    out: dict[str, tuple[str, str | None]] = {}
    if not array_ids:
        return out, True
    r = subprocess.run(
        ["squeue", "-h", "-r", "-j", ",".join(array_ids), "-o", "%i|%T"],
        capture_output=True,
        text=True,
        check=False,
    )
    # squeue -j with only ids slurmctld has forgotten exits 1 "Invalid job id"
    answered = r.returncode == 0 or "Invalid job id" in r.stderr
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
    return out, answered


def reconcile(
    runs: list[RunDir], states: dict[str, tuple[str, str | None]], lost_after: int | None = None
) -> Counter:
    """Write Slurm's view into status.json where the worker could not; count states.

    A pending run unknown to Slurm for 3 polls vanished before starting: failed.
    With `lost_after` (only when Slurm answered the query), a running run whose
    job Slurm no longer knows and whose worker holds no lock is lost with its
    node after that many polls: interrupted."""
    counts: Counter = Counter()
    for rd in runs:
        # under the run's status lock: the worker may record its end while we decide
        with rd.status_lock():
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
                        rd.transition(
                            mapped, error=err, finished_at=now_iso(), log_tail=rd.log_tail()
                        )
                elif ours == State.INTERRUPTED and mapped == State.TIMEOUT:
                    rd.transition(State.TIMEOUT, error=f"Slurm time limit (job {jid} {sl_state})")
            if sl_state is None and ours == State.PENDING and jid:
                # Not known to Slurm (any more): lost before it started.
                if slurm.get("seen_at") or slurm.get("lost_polls", 0) >= 3:
                    rd.transition(State.FAILED, error=f"Slurm job {jid} vanished before starting")
                else:
                    rd.update(slurm={**slurm, "lost_polls": slurm.get("lost_polls", 0) + 1})
            elif (
                lost_after is not None
                and sl_state is None
                and ours == State.RUNNING
                and jid
                and not rd.is_locked()
            ):
                # Started, then its node died and Slurm forgot the job (MinJobAge).
                if slurm.get("lost_polls", 0) + 1 >= lost_after:
                    rd.transition(
                        State.INTERRUPTED,
                        error=f"Slurm job {jid} (node {slurm.get('node', '?')}) is gone and its "
                        "worker holds no lock: lost with its node",
                        finished_at=now_iso(),
                    )
                else:
                    rd.update(slurm={**slurm, "lost_polls": slurm.get("lost_polls", 0) + 1})
        counts[(rd.state() or State.PENDING).value] += 1
    return counts


def reconcile_dir(out: Path, names: set[str] | None = None) -> Counter:
    """Before planning a rerun: map what Slurm knows (or has forgotten) into the
    pending/running runs of an output directory, so runs a dead node left
    running become interrupted and are run again. Slurm must be reachable."""
    runs = []
    try:
        with os.scandir(out / "runs") as it:
            entries = [e.name for e in it if names is None or e.name in names]
    except (FileNotFoundError, NotADirectoryError):
        return Counter()
    for name in entries:
        rd = RunDir(out / "runs" / name)
        st = rd.status() or {}
        if st.get("state") in (State.PENDING.value, State.RUNNING.value) and (
            st.get("slurm") or {}
        ).get("job_id"):
            runs.append(rd)
    if not runs:
        return Counter()
    states, answered = query(sorted({_array_id(rd) for rd in runs if _array_id(rd)}))
    return reconcile(runs, states, lost_after=1 if answered else None)


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
