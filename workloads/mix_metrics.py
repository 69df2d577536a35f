"""Metric collection for the mix runner: what it reads from /proc and sysfs.

Whole-run kernel counters (vmstat, numastat, the policy patch's
sched_numa_lb_stats) taken before and after the mix, and the Sampler that
follows each program's thread groups and tasks while they run (CPU and node
per sample, migrations, faults, per-node RSS). Reads only, never writes.
Stdlib only, Python >= 3.6 (see mixrunner.py).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
import re
import time
from typing import Any, Dict, List, Optional, Tuple

_RSS_RE = re.compile(r"N(\d+)=(\d+)")


def read_text(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


# ------------------------------------------------------------- snapshots


CLOCKSOURCE = "devices/system/clocksource/clocksource0/current_clocksource"


def clock_info(sys_root: str = "/sys") -> Dict[str, Any]:
    """The clock every elapsed time is read from (time.monotonic), checked at run start.

    A kernel that marked the TSC unstable falls back to jiffies: clock_getres
    then reports the tick (4 ms at HZ=250), and every elapsed time is a multiple
    of it. ``step_s`` is the smallest change seen in successive reads (an
    empirical check of the same thing, bounded to 100000 reads).
    """
    step = None  # type: Optional[float]
    t0 = time.monotonic()
    for _ in range(100000):
        t1 = time.monotonic()
        if t1 != t0:
            step = t1 - t0
            break
    cs = read_text(os.path.join(sys_root, CLOCKSOURCE))
    return {
        "clock": "CLOCK_MONOTONIC",
        "clocksource": cs.strip() if cs else None,
        "resolution_s": time.clock_getres(time.CLOCK_MONOTONIC),
        "step_s": step,
    }


def parse_kv_numbers(text: Optional[str]) -> Dict[str, int]:
    """'key value' lines (vmstat, numastat) -> dict of ints."""
    out = {}  # type: Dict[str, int]
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                pass
    return out


def numastat(sys_root: str) -> Dict[str, Dict[str, int]]:
    base = os.path.join(sys_root, "devices/system/node")
    out = {}  # type: Dict[str, Dict[str, int]]
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return out
    for d in names:
        if re.match(r"^node\d+$", d):
            out[d[4:]] = parse_kv_numbers(read_text(os.path.join(base, d, "numastat")))
    return out


def _num(tok: str) -> Optional[int]:
    try:
        return int(tok)
    except ValueError:
        return None


def parse_lb_stats(text: Optional[str]) -> Any:
    """Best-effort structure for the per-policy counters file.

    Its exact layout belongs to the kernel patch, so the raw text is always
    kept too. Understood: 'key value' / 'key: value' lines -> {key: n}; a
    header line of names followed by 'row n n ...' lines -> {row: {col: n}};
    'name n n ...' lines without a header -> {name: [n, ...]}.
    """
    if text is None:
        return None
    lines = [ln.replace(":", " ").split() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return {}
    head = lines[0]
    rows = lines[1:]
    if (
        rows
        and all(_num(t) is None for t in head)
        and all(len(r) >= 2 and _num(r[0]) is None for r in rows)
        and all(all(_num(t) is not None for t in r[1:]) for r in rows)
    ):
        cols = head[-(len(rows[0]) - 1) :] if len(head) >= len(rows[0]) - 1 else head
        if all(len(r) - 1 == len(cols) for r in rows):
            # zip(strict=) is Python >= 3.10; lengths were checked above
            return {r[0]: dict(zip(cols, map(int, r[1:]))) for r in rows}  # noqa: B905
    out = {}  # type: Dict[str, Any]
    for r in lines:
        vals = [_num(t) for t in r[1:]]
        if len(r) >= 2 and _num(r[0]) is None and all(v is not None for v in vals):
            out[r[0]] = vals[0] if len(vals) == 1 else vals
    return out


def delta(before: Any, after: Any) -> Any:
    """after - before over matching numeric leaves (dicts, lists, ints)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return {k: delta(before[k], after[k]) for k in after if k in before}
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [delta(a, b) for a, b in zip(before, after)]  # noqa: B905 (py3.6: no strict=)
    if isinstance(before, int) and isinstance(after, int):
        return after - before
    return None


# -------------------------------------------------------------- sampling


def read_stat(path: str) -> Optional[Tuple[str, List[str]]]:
    """/proc/.../stat -> (comm, fields from 'state' on); comm may hold spaces."""
    txt = read_text(path)
    if not txt:
        return None
    lp, rp = txt.find("("), txt.rfind(")")
    if lp < 0 or rp < 0:
        return None
    return txt[lp + 1 : rp], txt[rp + 2 :].split()


# index into read_stat()'s fields: field number (1-based, proc(5)) minus 3
F_MINFLT, F_MAJFLT, F_NUM_THREADS, F_PROCESSOR = 10 - 3, 12 - 3, 20 - 3, 39 - 3
_NR_MIGR_RE = re.compile(r"^se\.nr_migrations\s*:\s*(\d+)", re.M)


def parse_task_schedstat(text: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """/proc/<pid>/task/<tid>/schedstat: (ns on the CPU, ns waiting on a run
    queue, timeslices) -- proc_pid_schedstat in fs/proc/base.c; None when the
    file is absent or not three integers."""
    tok = (text or "").split()
    if len(tok) != 3 or not all(t.isdigit() for t in tok):
        return None
    return int(tok[0]), int(tok[1]), int(tok[2])


class TaskState:
    __slots__ = ("cpu", "migrations", "cross_node", "nr_migrations", "nodes", "schedstat")

    def __init__(self) -> None:
        self.cpu = -1
        self.migrations = 0
        self.cross_node = 0
        self.nr_migrations = None  # type: Optional[int]
        self.nodes = {}  # type: Dict[int, int]
        # (run ns, run_delay ns, timeslices) at the last sample
        self.schedstat = None  # type: Optional[Tuple[int, int, int]]


class ThreadGroup:
    """What the sampler learnt about one process (thread group) of a program."""

    def __init__(self, tgid: int, root: bool, t: float) -> None:
        self.tgid = tgid
        self.root = root
        self.comm = ""
        self.first_seen = t
        self.last_seen = t
        self.samples = 0
        self.threads_max = 0
        self.tasks = {}  # type: Dict[int, TaskState]
        self.minflt = None  # type: Optional[int]
        self.majflt = None  # type: Optional[int]
        self.numa_rss = None  # type: Optional[Dict[str, int]]
        self.numa_rss_peak_total = None  # type: Optional[int]

    def record(self) -> Dict[str, Any]:
        nr = [t.nr_migrations for t in self.tasks.values() if t.nr_migrations is not None]
        node_samples = {}  # type: Dict[str, int]
        for t in self.tasks.values():
            for n, c in t.nodes.items():
                node_samples[str(n)] = node_samples.get(str(n), 0) + c
        ss = [t.schedstat for t in self.tasks.values() if t.schedstat is not None]
        return {
            "pid": self.tgid,
            "comm": self.comm,
            "root": self.root,
            "samples": self.samples,
            "first_seen_s": round(self.first_seen, 6),
            "last_seen_s": round(self.last_seen, 6),
            "threads_max": self.threads_max,
            "tasks_seen": len(self.tasks),
            "migrations_sampled": sum(t.migrations for t in self.tasks.values()),
            "cross_node_migrations_sampled": sum(t.cross_node for t in self.tasks.values()),
            "nr_migrations": sum(nr) if nr else None,
            "nr_migrations_tasks": len(nr),
            "minflt": self.minflt,
            "majflt": self.majflt,
            "numa_rss_last": self.numa_rss,
            "numa_rss_peak_total": self.numa_rss_peak_total,
            "node_samples": node_samples,
            # per-task /proc/.../schedstat at each task's last sample, summed
            # (lower bounds: a task's last stretch before it exits is missed)
            "schedstat_tasks": len(ss),
            "run_ns": sum(x[0] for x in ss) if ss else None,
            "run_delay_ns": sum(x[1] for x in ss) if ss else None,
            "timeslices": sum(x[2] for x in ss) if ss else None,
        }


class Sampler:
    def __init__(self, cpu_node: Dict[int, int], read_sched: bool) -> None:
        self.cpu_node = cpu_node
        self.read_sched = read_sched
        self.groups = {}  # type: Dict[int, Dict[int, ThreadGroup]]  # program -> tgid -> tg

    def _descendants(self, root: int) -> List[int]:
        """root and every process below it, via /proc/<pid>/task/<tid>/children."""
        out, todo, seen = [], [root], set()  # type: List[int], List[int], set
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            out.append(pid)
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                txt = read_text(f"/proc/{pid}/task/{tid}/children")
                if txt:
                    todo.extend(int(c) for c in txt.split())
        return out

    def sample(self, prog: int, root_pid: int, tree: bool, t: float) -> None:
        groups = self.groups.setdefault(prog, {})
        pids = self._descendants(root_pid) if tree else [root_pid]
        for pid in pids:
            st = read_stat(f"/proc/{pid}/stat")
            if st is None or not st[1] or st[1][0] == "Z":
                continue  # gone, or a zombie whose mm is already torn down
            tg = groups.get(pid)
            if tg is None:
                tg = groups[pid] = ThreadGroup(pid, pid == root_pid, t)
            self._sample_group(tg, st, t)

    def _sample_group(self, tg: ThreadGroup, st: Tuple[str, List[str]], t: float) -> None:
        comm, f = st
        tg.comm = comm
        tg.last_seen = t
        tg.samples += 1
        tg.minflt, tg.majflt = int(f[F_MINFLT]), int(f[F_MAJFLT])
        tg.threads_max = max(tg.threads_max, int(f[F_NUM_THREADS]))
        rss = read_text(f"/proc/{tg.tgid}/numa_rss")
        if rss is not None:
            nodes = {n: int(v) for n, v in _RSS_RE.findall(rss)}
            if nodes or tg.numa_rss is None:
                tg.numa_rss = nodes
                tot = sum(nodes.values())
                tg.numa_rss_peak_total = max(tg.numa_rss_peak_total or 0, tot)
        try:
            tids = os.listdir(f"/proc/{tg.tgid}/task")
        except OSError:
            return
        for tid_s in tids:
            base = f"/proc/{tg.tgid}/task/{tid_s}"
            ts = read_stat(base + "/stat")
            if ts is None or len(ts[1]) <= F_PROCESSOR:
                continue
            tid = int(tid_s)
            task = tg.tasks.get(tid)
            if task is None:
                task = tg.tasks[tid] = TaskState()
            cpu = int(ts[1][F_PROCESSOR])
            node = self.cpu_node.get(cpu, -1)
            if task.cpu >= 0 and cpu != task.cpu:
                task.migrations += 1
                if self.cpu_node.get(task.cpu, -1) != node:
                    task.cross_node += 1
            task.cpu = cpu
            task.nodes[node] = task.nodes.get(node, 0) + 1
            # counted whenever the kernel has CONFIG_SCHED_INFO (the sysctl
            # kernel.sched_schedstats does not gate it); without, "0 0 0"
            ss = parse_task_schedstat(read_text(base + "/schedstat"))
            if ss is not None:
                task.schedstat = ss
            if self.read_sched:
                m = _NR_MIGR_RE.search(read_text(base + "/sched") or "")
                if m:
                    task.nr_migrations = int(m.group(1))
