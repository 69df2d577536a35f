#!/usr/bin/env python3
"""numa-lb-study mix runner: runs one job (a mix of programs) inside the guest.

Reads a job (JSON), sets the load-balancing policy and NUMA balancing through
/proc/sys, starts every program of the mix at the same moment, samples their
thread groups while they run, waits, and writes JSON lines (schema in
workloads/README.md) with per-program, per-thread-group and per-run data.

Runs as a normal process on any Linux (the unit tests run it on the build
host) and as a child of the guest init. Stdlib only, and Python >= 3.6
because the gem5-resources x86-parsec image is Ubuntu 18.04: hence
typing.List/Dict/Optional, no dataclasses, no subprocess text=/capture_output.

Usage:
  mixrunner.py JOB.json --outdir DIR [--sysctl-root /proc/sys]
               [--lb-stats /proc/sched_numa_lb_stats] [--bin-dir DIR] [--dry-run]
Exit: 0 every program exited 0; 1 a program or the runner failed (the results
are still written); 2 the job is invalid.
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import argparse
import json
import os
import platform
import re
import select
import shutil
import signal
import sys
import tarfile
import time
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parsec_catalog  # noqa: E402  (sibling module, path set above)

SCHEMA = 1
POLICY_SYSCTL = "kernel/sched_numa_lb_policy"
NUMAB_SYSCTL = "kernel/numa_balancing"
PINNINGS = ("free", "direct", "interleave", "crossed")
SYNTHETIC = tuple(parsec_catalog.SYNTHETIC)
_NAME_OK = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")
_POLICY_OK = re.compile(r"^[a-z0-9_]{1,32}$")
_ROI_RE = re.compile(r"\[HOOKS\] Total time spent in ROI: ([0-9.]+)s")
_RSS_RE = re.compile(r"N(\d+)=(\d+)")


class JobError(Exception):
    """The job file is malformed: nothing was run."""


# ------------------------------------------------------------------- job


def _get(d: Dict[str, Any], key: str, types: Any, default: Any = None) -> Any:
    v = d.get(key, default)
    if v is not None and not isinstance(v, types):
        raise JobError(f"{key!r} has the wrong type: {v!r}")
    if isinstance(v, bool) and types in (int, float, (int, float)):
        raise JobError(f"{key!r} must be a number, not a boolean")
    return v


def load_job(job: Dict[str, Any]) -> Dict[str, Any]:
    """Validate a job and return it normalised (defaults filled in)."""
    if not isinstance(job, dict):
        raise JobError("a job is a JSON object")
    known = {
        "schema", "run_id", "policy", "numa_balancing", "strict_policy", "pinning",
        "pin_threads", "sample_interval_s", "read_sched", "timeout_s", "parsec",
        "bin_dir", "programs", "restore_sysctls",
    }  # fmt: skip
    unknown = sorted(set(job) - known)
    if unknown:
        raise JobError(f"unknown job keys: {unknown}")
    if _get(job, "schema", int, SCHEMA) != SCHEMA:
        raise JobError(f"job schema {job.get('schema')} not supported (want {SCHEMA})")
    out = {
        "schema": SCHEMA,
        "run_id": _get(job, "run_id", str, ""),
        "policy": _get(job, "policy", str),
        "numa_balancing": _get(job, "numa_balancing", int),
        "strict_policy": _get(job, "strict_policy", bool, False),
        "pinning": _get(job, "pinning", str, "free"),
        "pin_threads": _get(job, "pin_threads", bool, True),
        "sample_interval_s": float(_get(job, "sample_interval_s", (int, float), 0.1)),
        "read_sched": _get(job, "read_sched", bool, True),
        "timeout_s": _get(job, "timeout_s", (int, float)),
        "bin_dir": _get(job, "bin_dir", str),
        "restore_sysctls": _get(job, "restore_sysctls", bool, True),
    }  # type: Dict[str, Any]
    pol = out["policy"]
    if pol is not None and not _POLICY_OK.match(pol):
        raise JobError(f"bad policy name {pol!r}")
    if pol == "autonuma":
        # the study's vocabulary: autonuma = stock selection + NUMA balancing
        if out["numa_balancing"] == 0:
            raise JobError("policy 'autonuma' contradicts numa_balancing=0")
        out["policy"], out["numa_balancing"] = "default", 1
    out["policy_requested"] = pol
    if out["numa_balancing"] not in (None, 0, 1):
        raise JobError("numa_balancing must be 0, 1 or null")
    if out["pinning"] not in PINNINGS:
        raise JobError(f"pinning must be one of {PINNINGS}")
    if not out["sample_interval_s"] > 0:
        raise JobError("sample_interval_s must be > 0")
    if out["timeout_s"] is not None and not out["timeout_s"] > 0:
        raise JobError("timeout_s must be > 0")
    parsec = _get(job, "parsec", dict, {})
    out["parsec"] = {
        "root": _get(parsec, "root", str, parsec_catalog.GEM5_PARSEC_ROOT),
        "config": _get(parsec, "config", str, parsec_catalog.GEM5_PARSEC_CONFIG),
        "launcher": _get(parsec, "launcher", str, "parsecmgmt"),
    }
    if out["parsec"]["launcher"] not in ("parsecmgmt", "direct"):
        raise JobError("parsec.launcher must be 'parsecmgmt' or 'direct'")
    progs = _get(job, "programs", list)
    if not progs:
        raise JobError("a job needs a non-empty 'programs' list")
    out["programs"] = []
    names = set()
    for i, p in enumerate(progs):
        q = _load_program(i, p)
        if q["name"] in names:
            raise JobError(f"duplicate program name {q['name']!r}")
        names.add(q["name"])
        out["programs"].append(q)
    return out


def _load_program(i: int, p: Any) -> Dict[str, Any]:
    if not isinstance(p, dict):
        raise JobError(f"program {i} is not an object")
    kinds = [k for k in ("workload", "parsec", "cmd") if k in p]
    if len(kinds) != 1:
        raise JobError(f"program {i}: give exactly one of workload, parsec, cmd")
    known = {"name", "workload", "parsec", "cmd", "threads", "args", "input", "node", "env"}
    unknown = sorted(set(p) - known)
    if unknown:
        raise JobError(f"program {i}: unknown keys {unknown}")
    kind = kinds[0]
    q = {"index": i, "kind": kind}  # type: Dict[str, Any]
    q["threads"] = _get(p, "threads", int, 1)
    if q["threads"] < 1:
        raise JobError(f"program {i}: threads must be >= 1")
    q["args"] = _get(p, "args", list, [])
    if not all(isinstance(a, str) for a in q["args"]):
        raise JobError(f"program {i}: args must be strings")
    q["node"] = _get(p, "node", int)
    env = _get(p, "env", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise JobError(f"program {i}: env must map strings to strings")
    q["env"] = env
    if kind == "workload":
        q["workload"] = _get(p, "workload", str)
        if q["workload"] not in SYNTHETIC:
            raise JobError(f"program {i}: unknown workload {q['workload']!r} ({SYNTHETIC})")
        default = q["workload"]
    elif kind == "parsec":
        try:
            prog = parsec_catalog.lookup(_get(p, "parsec", str))
        except KeyError as e:
            raise JobError(f"program {i}: {e.args[0]}") from None
        q["parsec"] = prog.package
        q["input"] = _get(p, "input", str, "simsmall")
        if q["input"] not in parsec_catalog.INPUTS:
            raise JobError(f"program {i}: input must be one of {parsec_catalog.INPUTS}")
        if q["args"]:
            raise JobError(f"program {i}: PARSEC programs take no args")
        default = prog.package
    else:
        cmd = _get(p, "cmd", list)
        if not cmd or not all(isinstance(a, str) for a in cmd):
            raise JobError(f"program {i}: cmd must be a non-empty list of strings")
        q["cmd"] = cmd
        default = os.path.basename(cmd[0])
    q["name"] = _get(p, "name", str, f"{i}-{default}")
    if not _NAME_OK.match(q["name"]):
        raise JobError(f"program {i}: name {q['name']!r} must match {_NAME_OK.pattern}")
    return q


# -------------------------------------------------------------- topology


def parse_list(text: str) -> List[int]:
    """Kernel cpu/node list syntax: '0-3,8,10-11' -> [0,1,2,3,8,10,11]."""
    out = []  # type: List[int]
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def read_text(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def node_cpus(sys_root: str = "/sys") -> Dict[int, List[int]]:
    """NUMA node -> CPUs, from sysfs. A machine without NUMA sysfs is node 0."""
    base = os.path.join(sys_root, "devices/system/node")
    online = read_text(os.path.join(base, "online"))
    out = {}  # type: Dict[int, List[int]]
    if online is None:
        return {0: list(range(os.cpu_count() or 1))}
    for n in parse_list(online):
        txt = read_text(os.path.join(base, f"node{n}", "cpulist"))
        out[n] = parse_list(txt) if txt else []
    return out


def node_distances(sys_root: str = "/sys") -> Dict[int, List[int]]:
    """NUMA node -> its row of the SLIT as the kernel took it (nodeN/distance)."""
    base = os.path.join(sys_root, "devices/system/node")
    out = {}  # type: Dict[int, List[int]]
    for n in parse_list(read_text(os.path.join(base, "online")) or ""):
        txt = read_text(os.path.join(base, f"node{n}", "distance"))
        out[n] = [int(t) for t in txt.split()] if txt else []
    return out


# --------------------------------------------------------------- sysctls


def read_sysctl(root: str, name: str) -> Optional[str]:
    txt = read_text(os.path.join(root, name))
    return None if txt is None else txt.strip()


def set_sysctl(root: str, name: str, value: Optional[str]) -> Dict[str, Any]:
    """Write one sysctl through /proc/sys (no shell) and read back what is in force."""
    path = os.path.join(root, name)
    rec = {"name": name.replace("/", "."), "requested": value}  # type: Dict[str, Any]
    before = read_sysctl(root, name)
    rec["before"] = before
    if before is None and not os.path.exists(path):
        rec["status"] = "absent"
        rec["in_force"] = None
        return rec
    if value is None:
        rec["status"] = "untouched"
    else:
        try:
            with open(path, "w") as f:
                f.write(value + "\n")
            rec["status"] = "set"
        except OSError as e:
            rec["status"] = "error"
            rec["error"] = f"{type(e).__name__}: {e}"
    rec["in_force"] = read_sysctl(root, name)
    if value is not None and rec["status"] == "set" and rec["in_force"] != value:
        # e.g. a policy file that shows a list with the active one marked
        rec["status"] = "mismatch"
    return rec


# ------------------------------------------------------------- snapshots


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


# ---------------------------------------------------------------- plans


def _find_binary(name: str, dirs: List[str]) -> str:
    for d in dirs:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    raise FileNotFoundError(f"workload binary {name!r} not found in {dirs}")


def pin_prefix(
    pinning: str, node: int, nodes: List[int], pin_threads: bool
) -> Tuple[List[str], Dict[str, Any]]:
    """numactl prefix for a seeds/001 placement scenario on one program."""
    info = {"scenario": pinning, "cpu_node": None, "mem": None}  # type: Dict[str, Any]
    if pinning == "free":
        return [], info
    cpu = ["--cpunodebind=" + str(node)] if pin_threads else []
    info["cpu_node"] = node if pin_threads else None
    if pinning == "direct":
        mem = node
        memarg = "--preferred=" + str(node)
    elif pinning == "interleave":
        mem = "all"
        memarg = "--interleave=all"
    else:  # crossed: pair nodes 0<->1, 2<->3, ... as in seeds/001
        partner = node ^ 1
        if partner not in nodes:
            partner = nodes[(nodes.index(node) + 1) % len(nodes)]
        mem = partner
        memarg = "--preferred=" + str(partner)
        if partner == node:
            info["note"] = "only one node: crossed cannot put memory elsewhere"
    info["mem"] = mem
    return ["numactl"] + cpu + [memarg], info


def plan_programs(job: Dict[str, Any], bin_dirs: List[str], nodes: List[int]) -> List[Dict]:
    """Turn the job's programs into argv/env/cwd, placement included."""
    plans = []
    cpu_nodes = nodes or [0]
    for q in job["programs"]:
        plan = {"index": q["index"], "name": q["name"], "kind": q["kind"]}  # type: Dict
        env = dict(os.environ)
        env.update(q["env"])
        cwd = None
        prepare = None
        if q["kind"] == "workload":
            argv = [_find_binary(q["workload"], bin_dirs), "--threads", str(q["threads"])]
            argv += q["args"]
        elif q["kind"] == "parsec":
            prog = parsec_catalog.lookup(q["parsec"])
            root, cfg = job["parsec"]["root"], job["parsec"]["config"]
            env = parsec_catalog.parsec_env(root, env)
            if prog.package == "parsec.freqmine":
                env.setdefault("OMP_NUM_THREADS", str(q["threads"]))
            if job["parsec"]["launcher"] == "parsecmgmt":
                argv = parsec_catalog.parsecmgmt_command(prog, q["input"], q["threads"], root, cfg)
            else:
                d = parsec_catalog.direct_command(prog, q["input"], q["threads"], root, cfg)
                argv, cwd, prepare = d.argv, d.cwd, d.input_tar
            plan["parsec"] = {
                "package": prog.package,
                "input": q["input"],
                "config": cfg,
                "allocation": prog.allocation,
                "launcher": job["parsec"]["launcher"],
            }
        else:
            argv = list(q["cmd"])
        node = q["node"] if q["node"] is not None else cpu_nodes[q["index"] % len(cpu_nodes)]
        prefix, info = pin_prefix(job["pinning"], node, cpu_nodes, job["pin_threads"])
        if prefix and shutil.which(prefix[0], path=env.get("PATH")) is None:
            raise ValueError(f"pinning {job['pinning']!r} needs {prefix[0]} in PATH")
        plan.update(
            argv=prefix + argv, env=env, cwd=cwd, prepare_tar=prepare, placement=info,
            threads_requested=q["threads"],
        )  # fmt: skip
        plans.append(plan)
    return plans


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


class TaskState:
    __slots__ = ("cpu", "migrations", "cross_node", "nr_migrations", "nodes")

    def __init__(self) -> None:
        self.cpu = -1
        self.migrations = 0
        self.cross_node = 0
        self.nr_migrations = None  # type: Optional[int]
        self.nodes = {}  # type: Dict[int, int]


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
            if self.read_sched:
                m = _NR_MIGR_RE.search(read_text(base + "/sched") or "")
                if m:
                    task.nr_migrations = int(m.group(1))


# ---------------------------------------------------------------- output


class Writer:
    def __init__(self, path: Optional[str]) -> None:
        self.f = open(path, "w") if path else sys.stdout

    def write(self, rec: Dict[str, Any]) -> None:
        self.f.write(json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n")
        self.f.flush()  # partial results survive a guest that dies mid-run

    def close(self) -> None:
        if self.f is not sys.stdout:
            self.f.close()


def tail(path: str, nbytes: int = 65536) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - nbytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def workload_result(stdout_tail: str) -> Optional[Dict[str, Any]]:
    """The last JSON object line with a 'workload' key (our synthetic programs)."""
    for line in reversed(stdout_tail.splitlines()):
        line = line.strip()
        if line.startswith("{") and '"workload"' in line:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict):
                return d
    return None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name)


# ------------------------------------------------------------------- run


def run_mix(
    job: Dict[str, Any],
    outdir: str,
    sysctl_root: str = "/proc/sys",
    lb_stats: str = "/proc/sched_numa_lb_stats",
    sys_root: str = "/sys",
    bin_dirs: Optional[List[str]] = None,
    roi: Optional[List[str]] = None,
) -> int:
    """ROI: when given (``[M5, OPTIONS..., ID]``), ``M5 OPTIONS workbegin|workend
    ID 0`` run right before
    the programs are released and right after the last one is reaped (under
    gem5: switch to the timing CPU and reset stats / dump stats), so the
    runner's own start-up and bookkeeping stay out of the measured region."""
    os.makedirs(outdir, exist_ok=True)
    w = Writer(os.path.join(outdir, "results.jsonl"))
    errors = []  # type: List[str]
    rid = job["run_id"]
    topo = node_cpus(sys_root)
    cpu_node = {c: n for n, cpus in topo.items() for c in cpus}
    cpu_nodes = sorted(n for n, cpus in topo.items() if cpus)
    uname = platform.uname()

    # 1. policy and NUMA balancing, through /proc/sys, read back
    pol = set_sysctl(sysctl_root, POLICY_SYSCTL, job["policy"])
    nb = set_sysctl(
        sysctl_root,
        NUMAB_SYSCTL,
        None if job["numa_balancing"] is None else str(job["numa_balancing"]),
    )
    for rec in (pol, nb):
        if rec["status"] in ("error", "mismatch"):
            errors.append(f"{rec['name']}: {rec['status']} {rec.get('error', '')}".strip())
    fatal = None
    if job["strict_policy"] and job["policy"] is not None and pol["status"] != "set":
        fatal = f"strict_policy: {pol['name']} could not be set ({pol['status']})"
    elif job["policy"] is not None and pol["status"] == "error":
        fatal = f"{pol['name']} rejected {job['policy']!r}: {pol.get('error')}"

    w.write(
        {
            "type": "run",
            "schema": SCHEMA,
            "run_id": rid,
            "time_unix": time.time(),
            "kernel": {
                "release": uname.release,
                "version": uname.version,
                "machine": uname.machine,
                "proc_version": (read_text("/proc/version") or "").strip(),
            },
            "python": platform.python_version(),
            "nodes": {str(n): c for n, c in sorted(topo.items())},
            "distances": {str(n): d for n, d in sorted(node_distances(sys_root).items())},
            "policy": dict(pol, requested_name=job["policy_requested"]),
            "numa_balancing": nb,
            "pinning": job["pinning"],
            "pin_threads": job["pin_threads"],
            "sample_interval_s": job["sample_interval_s"],
            "job": job,
        }
    )
    if fatal:
        errors.append(fatal)
        w.write({"type": "run_end", "run_id": rid, "status": "failed", "errors": errors})
        w.close()
        return 1

    # 2. plans (binaries, PARSEC command lines, numactl prefixes)
    if bin_dirs is None:
        bin_dirs = [job["bin_dir"]] if job["bin_dir"] else []
        bin_dirs += [HERE, os.path.join(HERE, "build")]
    try:
        plans = plan_programs(job, bin_dirs, cpu_nodes)
    except (OSError, ValueError) as e:
        errors.append(f"planning failed: {e}")
        w.write({"type": "run_end", "run_id": rid, "status": "failed", "errors": errors})
        w.close()
        return 1
    for p in plans:
        if p["prepare_tar"]:  # direct PARSEC launcher: unpack inputs, untimed
            os.makedirs(p["cwd"], exist_ok=True)
            with tarfile.open(p["prepare_tar"]) as tf:
                tf.extractall(p["cwd"])

    # 3. counters before
    vm0 = parse_kv_numbers(read_text("/proc/vmstat"))
    ns0 = numastat(sys_root)
    lb0 = read_text(lb_stats)

    # 4. start everything together: each program is '/bin/sh -c read; exec'
    #    blocked on a pipe the runner closes once all are spawned
    status = run_programs(plans, job, outdir, cpu_node, errors, roi)

    # 5. counters after, policy still in force?
    vm1 = parse_kv_numbers(read_text("/proc/vmstat"))
    ns1 = numastat(sys_root)
    lb1 = read_text(lb_stats)
    pol_end = read_sysctl(sysctl_root, POLICY_SYSCTL)
    nb_end = read_sysctl(sysctl_root, NUMAB_SYSCTL)
    if pol["status"] == "set" and pol_end != pol["in_force"]:
        errors.append(f"policy changed during the run: {pol['in_force']} -> {pol_end}")

    for rec in status["programs"]:
        w.write(rec)
    for rec in status["thread_groups"]:
        w.write(rec)

    restored = {}  # type: Dict[str, Any]
    if job["restore_sysctls"]:
        for rec, path in ((pol, POLICY_SYSCTL), (nb, NUMAB_SYSCTL)):
            if rec["status"] == "set" and rec["before"] is not None:
                restored[rec["name"]] = set_sysctl(sysctl_root, path, rec["before"])["status"]

    lb_rec = {"path": lb_stats, "status": "absent" if lb0 is None else "present"}  # type: Dict
    if lb0 is not None:
        b, a = parse_lb_stats(lb0), parse_lb_stats(lb1)
        lb_rec.update(before_raw=lb0, after_raw=lb1, before=b, after=a, delta=delta(b, a))
    failed = [p["name"] for p in status["programs"] if p["exit_code"] != 0]
    w.write(
        {
            "type": "run_end",
            "run_id": rid,
            "status": "ok" if not failed and not errors else "failed",
            "elapsed_s": status["elapsed_s"],
            "timed_out": status["timed_out"],
            "programs_failed": failed,
            "policy_at_end": pol_end,
            "numa_balancing_at_end": nb_end,
            "sysctls_restored": restored,
            "vmstat_delta": delta(vm0, vm1),
            "numastat_delta": delta(ns0, ns1),
            "sched_numa_lb_stats": lb_rec,
            "samples": status["samples"],
            "roi": status["roi"],
            "errors": errors,
        }
    )
    w.close()
    return 0 if not failed and not errors else 1


def roi_mark(roi: Optional[List[str]], what: str, errors: List[str]) -> Optional[int]:
    """Run ``M5 OPTIONS WHAT ID 0`` for ``roi = [M5, OPTIONS..., ID]``; its exit
    status (None: no ROI)."""
    if not roi:
        return None
    import subprocess  # noqa: PLC0415 - only the running path needs it

    try:
        rc = subprocess.call(roi[:-1] + [what, roi[-1], "0"])
    except OSError as e:
        errors.append(f"roi {what}: {e}")
        return -1
    if rc != 0:
        errors.append(f"roi {what}: exit {rc}")
    return rc


def run_programs(
    plans: List[Dict], job: Dict[str, Any], outdir: str, cpu_node: Dict[int, int],
    errors: List[str], roi: Optional[List[str]] = None,
) -> Dict[str, Any]:  # fmt: skip
    import subprocess  # local: only the running path needs it

    gate_r, gate_w = os.pipe()
    procs = {}  # type: Dict[int, Dict[str, Any]]  # pid -> state
    results = {}  # type: Dict[int, Dict[str, Any]]  # program index -> record
    for p in plans:
        out = os.path.join(outdir, f"prog-{p['index']:02d}-{_safe(p['name'])}")
        rec = {
            "type": "program",
            "run_id": job["run_id"],
            "index": p["index"],
            "name": p["name"],
            "kind": p["kind"],
            "argv": p["argv"],
            "threads_requested": p["threads_requested"],
            "placement": p["placement"],
            "stdout": os.path.basename(out) + ".out",
            "stderr": os.path.basename(out) + ".err",
            "pid": None,
            "exit_code": None,
            "signal": None,
            "timed_out": False,
            "elapsed_s": None,
            "rusage": None,
            "result": None,
            "roi_s": None,
            "error": None,
        }  # type: Dict[str, Any]
        if "parsec" in p:
            rec["parsec"] = p["parsec"]
        results[p["index"]] = rec
        # The shell blocks in 'read' on the gate pipe (its stdin) until the
        # runner closes the write end, then execs the program with stdin
        # from /dev/null: every program starts within one exec of the others.
        argv = ["/bin/sh", "-c", 'read _gate; exec "$@" </dev/null', "mix-gate"] + p["argv"]
        try:
            with open(out + ".out", "wb") as so, open(out + ".err", "wb") as se:
                proc = subprocess.Popen(
                    argv, stdin=gate_r, stdout=so, stderr=se, env=p["env"], cwd=p["cwd"],
                    start_new_session=True,  # own process group: timeout kills the tree
                )  # fmt: skip
        except OSError as e:
            rec["error"] = f"spawn failed: {e}"
            rec["exit_code"] = 127
            errors.append(f"{p['name']}: {rec['error']}")
            continue
        rec["pid"] = proc.pid
        procs[proc.pid] = {"index": p["index"], "proc": proc, "tree": p["kind"] != "workload"}
    os.close(gate_r)

    # SIGCHLD wakes the select() below, so exits are timed to the
    # millisecond without busy polling between samples.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    old_wake = signal.set_wakeup_fd(wake_w)
    old_chld = signal.signal(signal.SIGCHLD, lambda s, f: None)

    sampler = Sampler(cpu_node, job["read_sched"])
    interval = job["sample_interval_s"]
    roi_rc = {"begin": roi_mark(roi, "workbegin", errors)}
    t0 = time.monotonic()
    os.close(gate_w)  # release the gate: all programs start now
    deadline = t0 + job["timeout_s"] if job["timeout_s"] else None
    timed_out = False
    samples = 0
    next_sample = t0
    try:
        while procs:
            now = time.monotonic()
            if now >= next_sample:
                for pid, st in procs.items():
                    sampler.sample(st["index"], pid, st["tree"], now - t0)
                samples += 1
                next_sample = now + interval
            _reap(procs, results, t0)
            if not procs:
                break
            if deadline is not None and time.monotonic() >= deadline and not timed_out:
                timed_out = True
                errors.append(f"timeout after {job['timeout_s']} s: killing {len(procs)}")
                for pid, st in procs.items():
                    results[st["index"]]["timed_out"] = True
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
            wait = max(0.0, next_sample - time.monotonic())
            if deadline is not None and not timed_out:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                select.select([wake_r], [], [], wait)
            except InterruptedError:
                pass
            try:
                while os.read(wake_r, 512):
                    pass
            except (BlockingIOError, InterruptedError):
                pass
    finally:
        signal.signal(signal.SIGCHLD, old_chld)
        signal.set_wakeup_fd(old_wake)
        os.close(wake_r)
        os.close(wake_w)
    elapsed = time.monotonic() - t0
    roi_rc["end"] = roi_mark(roi, "workend", errors)

    tgs = []
    for rec in results.values():
        out_tail = tail(os.path.join(outdir, rec["stdout"]))
        rec["result"] = workload_result(out_tail)
        m = _ROI_RE.findall(out_tail + tail(os.path.join(outdir, rec["stderr"])))
        rec["roi_s"] = float(m[-1]) if m else None
        groups = sampler.groups.get(rec["index"], {})
        rec["threads_max"] = max((g.threads_max for g in groups.values()), default=0)
        for g in sorted(groups.values(), key=lambda g: g.first_seen):
            tgs.append(
                dict(g.record(), type="thread_group", run_id=job["run_id"],
                     program=rec["name"], program_index=rec["index"])
            )  # fmt: skip
    return {
        "programs": [results[i] for i in sorted(results)],
        "thread_groups": tgs,
        "elapsed_s": round(elapsed, 6),
        "timed_out": timed_out,
        "samples": samples,
        "roi": roi_rc,
    }


def _reap(procs: Dict[int, Dict[str, Any]], results: Dict[int, Dict], t0: float) -> None:
    for pid in list(procs):
        try:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            wpid, status, ru = pid, 0, None
        if wpid == 0:
            continue
        st = procs.pop(pid)
        st["proc"].returncode = status  # keep Popen from re-waiting or warning
        rec = results[st["index"]]
        rec["elapsed_s"] = round(time.monotonic() - t0, 6)
        if os.WIFSIGNALED(status):
            rec["signal"] = os.WTERMSIG(status)
            rec["exit_code"] = 128 + rec["signal"]
        else:
            rec["exit_code"] = os.WEXITSTATUS(status)
        if ru is not None:
            rec["rusage"] = {
                "utime_s": ru.ru_utime,
                "stime_s": ru.ru_stime,
                "minflt": ru.ru_minflt,
                "majflt": ru.ru_majflt,
                "nvcsw": ru.ru_nvcsw,
                "nivcsw": ru.ru_nivcsw,
                "maxrss_kb": ru.ru_maxrss,
            }


# ------------------------------------------------------------------ main


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("job", help="job JSON file ('-' for stdin)")
    ap.add_argument("--outdir", help="result directory (results.jsonl, program output)")
    ap.add_argument("--sysctl-root", default="/proc/sys")
    ap.add_argument("--lb-stats", default="/proc/sched_numa_lb_stats")
    ap.add_argument("--sys-root", default="/sys")
    ap.add_argument("--bin-dir", action="append", help="where synthetic workloads live")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    ap.add_argument(
        "--roi",
        nargs="+",
        metavar="ARG",
        help="bracket the mix: M5 [OPTIONS] ID runs M5 OPTIONS workbegin|workend ID 0",
    )
    a = ap.parse_args(argv)
    try:
        raw = sys.stdin.read() if a.job == "-" else open(a.job).read()
        job = load_job(json.loads(raw))
    except (OSError, ValueError, JobError) as e:
        # JSON errors are ValueErrors; a bad job must never look like a run
        print(f"mixrunner: invalid job: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        topo = node_cpus(a.sys_root)
        dirs = a.bin_dir or ([job["bin_dir"]] if job["bin_dir"] else [])
        dirs += [HERE, os.path.join(HERE, "build")]
        try:
            plans = plan_programs(job, dirs, sorted(n for n, c in topo.items() if c))
        except (OSError, ValueError) as e:
            print(f"mixrunner: cannot plan: {e}", file=sys.stderr)
            return 1
        for p in plans:
            p.pop("env")
            print(json.dumps(dict(p, type="plan"), sort_keys=True))
        return 0
    if not a.outdir:
        print("mixrunner: --outdir is required (except with --dry-run)", file=sys.stderr)
        return 2
    return run_mix(job, a.outdir, a.sysctl_root, a.lb_stats, a.sys_root, a.bin_dir, a.roi)


if __name__ == "__main__":
    sys.exit(main())
