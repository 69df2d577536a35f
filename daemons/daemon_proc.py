"""What the daemons read from /proc and sysfs, and the one thing they change:
thread affinity (sched_setaffinity on a thread id).

Managed threads are the tasks of every process below a given parent (the mix
runner, whose children are the mix's programs). Stdlib only, Python >= 3.6.
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
import re
from typing import Dict, Iterable, List, NamedTuple, Optional

# /proc/<pid>/stat fields after the ")" of comm: [0] is field 3 (state),
# [1] field 4 (ppid), [36] field 39 (processor: the CPU it last ran on).
F_STATE, F_PPID, F_PROCESSOR = 0, 1, 36
_RSS_RE = re.compile(r"N(\d+)=(\d+)")


def read_text(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def parse_list(text: str) -> List[int]:
    """Kernel cpu/node list syntax: '0-3,8' -> [0, 1, 2, 3, 8]."""
    out = []  # type: List[int]
    for part in text.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            out.extend(range(int(a), int(b or a) + 1))
    return out


def node_cpus(sys_root: str = "/sys") -> Dict[int, List[int]]:
    """NUMA node -> its CPUs (a machine without NUMA sysfs is node 0)."""
    base = os.path.join(sys_root, "devices/system/node")
    online = read_text(os.path.join(base, "online"))
    if online is None:
        return {0: list(range(os.cpu_count() or 1))}
    out = {}  # type: Dict[int, List[int]]
    for n in parse_list(online):
        txt = read_text(os.path.join(base, f"node{n}", "cpulist"))
        out[n] = parse_list(txt) if txt else []
    return out


def node_distances(sys_root: str = "/sys") -> Dict[int, List[int]]:
    """NUMA node -> its SLIT row (10 on the diagonal)."""
    base = os.path.join(sys_root, "devices/system/node")
    out = {}  # type: Dict[int, List[int]]
    for n in parse_list(read_text(os.path.join(base, "online")) or ""):
        txt = read_text(os.path.join(base, f"node{n}", "distance"))
        out[n] = [int(t) for t in txt.split()] if txt else []
    return out


def stat_fields(text: Optional[str]) -> Optional[List[str]]:
    if not text:
        return None
    rp = text.rfind(")")
    return text[rp + 2 :].split() if rp >= 0 else None


class Task(NamedTuple):
    tid: int
    pid: int  # its thread group
    cpu: int  # where it last ran
    run_ns: int  # cumulative time on a CPU (schedstat)
    state: str


def children_map(proc: str = "/proc") -> Dict[int, List[int]]:
    """ppid -> pids, from every /proc/<pid>/stat."""
    out = {}  # type: Dict[int, List[int]]
    for name in os.listdir(proc):
        if name.isdigit():
            f = stat_fields(read_text(os.path.join(proc, name, "stat")))
            if f and len(f) > F_PPID:
                out.setdefault(int(f[F_PPID]), []).append(int(name))
    return out


def descendants(root: int, proc: str = "/proc") -> List[int]:
    """Every live process below ROOT (not ROOT itself), in discovery order."""
    kids = children_map(proc)
    out = []  # type: List[int]
    todo = [root]
    while todo:
        for c in sorted(kids.get(todo.pop(0), [])):
            if c not in out:
                out.append(c)
                todo.append(c)
    return out


def tasks_of(pid: int, proc: str = "/proc") -> List[Task]:
    """The threads of one process (an exited one has none)."""
    base = os.path.join(proc, str(pid), "task")
    try:
        tids = sorted(int(t) for t in os.listdir(base) if t.isdigit())
    except OSError:
        return []
    out = []  # type: List[Task]
    for tid in tids:
        f = stat_fields(read_text(os.path.join(base, str(tid), "stat")))
        ss = (read_text(os.path.join(base, str(tid), "schedstat")) or "").split()
        if not f or len(f) <= F_PROCESSOR or not ss:
            continue
        out.append(Task(tid, pid, int(f[F_PROCESSOR]), int(ss[0]), f[F_STATE]))
    return out


def managed_tasks(parent: int, exclude: Iterable[int] = (), proc: str = "/proc") -> Dict[int, Task]:
    """tid -> Task for every thread of every process below PARENT."""
    skip = set(exclude)
    out = {}  # type: Dict[int, Task]
    for pid in descendants(parent, proc):
        if pid in skip:
            continue
        for t in tasks_of(pid, proc):
            if t.state not in ("Z", "X"):
                out[t.tid] = t
    return out


def set_affinity(tid: int, cpus: Iterable[int]) -> Optional[str]:
    """Pin one thread; None on success, else why not (a thread that exited
    meanwhile says "gone")."""
    try:
        os.sched_setaffinity(tid, set(cpus))
    except ProcessLookupError:
        return "gone"
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    return None


def get_affinity(tid: int) -> Optional[List[int]]:
    try:
        return sorted(os.sched_getaffinity(tid))
    except OSError:
        return None


def pages_by_node(pid: int, proc: str = "/proc") -> Optional[Dict[int, int]]:
    """Resident pages of a process per node: the patched kernel's kMLB
    /proc/<pid>/numa_rss ("N0=.. N1=.."), else the sum of numa_maps' N<n>=
    counts; None when neither is readable."""
    txt = read_text(os.path.join(proc, str(pid), "numa_rss"))
    if txt is None:
        txt = read_text(os.path.join(proc, str(pid), "numa_maps"))
    if txt is None:
        return None
    out = {}  # type: Dict[int, int]
    for n, v in _RSS_RE.findall(txt):
        out[int(n)] = out.get(int(n), 0) + int(v)
    return out


def self_cpu_s() -> float:
    """This process's user + system CPU time."""
    t = os.times()
    return t.user + t.system
