"""Placement for the mix runner: where and how each program of a job runs.

The NUMA topology from sysfs (node -> CPUs, the SLIT rows), the numactl
prefix of a pinning scenario (free, direct, interleave, crossed) and the plan
of each program (argv with the binary or PARSEC command line, env, cwd).
Planning checks that binaries and numactl exist, so a job fails before any
program starts. Stdlib only, Python >= 3.6 (see mixrunner.py).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
import shutil
from typing import Any, Dict, List, Tuple

import parsec_catalog
from mix_metrics import read_text


def parse_list(text: str) -> List[int]:
    """Kernel cpu/node list syntax: '0-3,8,10-11' -> [0,1,2,3,8,10,11]."""
    out = []  # type: List[int]
    for part in text.strip().split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


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
    """numactl prefix for a [Lorenzo18] placement scenario on one program."""
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
    else:  # crossed: pair nodes 0<->1, 2<->3, ... as in [Lorenzo18]
        partner = node ^ 1
        if partner not in nodes:
            partner = nodes[(nodes.index(node) + 1) % len(nodes)]
        mem = partner
        memarg = "--preferred=" + str(partner)
        if partner == node:
            info["note"] = "only one node: crossed cannot put memory elsewhere"
    info["mem"] = mem
    return ["numactl"] + cpu + [memarg], info


def plan_programs(
    job: Dict[str, Any], bin_dirs: List[str], nodes: List[int], work_root: str = "/tmp"
) -> List[Dict]:
    """Turn the job's programs into argv/env/cwd, placement included. PARSEC
    programs of our build (launcher numa-lb) run in WORK_ROOT/NN-<name>."""
    plans = []
    cpu_nodes = nodes or [0]
    manifest = None  # our PARSEC build's parsec.json, read once
    for q in job["programs"]:
        plan = {"index": q["index"], "name": q["name"], "kind": q["kind"],
                "background": q.get("background", False)}  # type: Dict  # fmt: skip
        env = dict(os.environ)
        env.update(q["env"])
        cwd = None
        prepare = None
        installed = None
        if q["kind"] == "workload":
            argv = [_find_binary(q["workload"], bin_dirs), "--threads", str(q["threads"])]
            argv += q["args"]
            if job.get("seed") is not None and not any(a.startswith("--seed") for a in q["args"]):
                # the repeat's data seed, distinct per program
                argv += ["--seed", str(job["seed"] * 1000 + q["index"])]
        elif q["kind"] == "parsec":
            prog = parsec_catalog.lookup(q["parsec"])
            root, cfg = job["parsec"]["root"], job["parsec"]["config"]
            env = parsec_catalog.parsec_env(root, env)
            if prog.package == "parsec.freqmine":
                env.setdefault("OMP_NUM_THREADS", str(q["threads"]))
            if job["parsec"]["launcher"] == "parsecmgmt":
                argv = parsec_catalog.parsecmgmt_command(prog, q["input"], q["threads"], root, cfg)
            elif job["parsec"]["launcher"] == "numa-lb":
                if manifest is None:
                    manifest = parsec_catalog.load_manifest(root)
                    cfg = manifest.get("config", cfg)
                wd = os.path.join(work_root, "{:02d}-{}".format(q["index"], q["name"]))
                installed = parsec_catalog.installed_command(
                    prog, q["input"], q["threads"], wd, root, manifest
                )
                argv, cwd = installed.argv, installed.cwd
                env["NUMA_LB_PARSEC_M5"] = env.get("NUMA_LB_PARSEC_M5", "auto")
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
            installed=None if installed is None else dict(installed._asdict()),
        )  # fmt: skip
        plans.append(plan)
    return plans
