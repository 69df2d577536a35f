"""Checks of one result set handed back by the guest (qemu_boot's OUTDIR).

Used by the image tier on a live run and by the unit tier on the committed
fixture (tests/fixtures/qemu-run), so both hold the same guarantees.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from numa_lb.qemu import guest_topology

# the image tier's machine: 4 nodes x 2 vCPUs, 256 MiB each, SLIT 10/16
TOPO = guest_topology(nodes=4, cpus_per_node=2, mem_per_node_mib=256, distance=16)
# the kernel's kernel.sched_numa_lb_policy values, one stats row each (as
# kernel-patches/qemu_check.py POLICIES)
POLICIES = ("default", "tm", "mb", "bce", "mbplus", "excl_base", "excl",
            "null", "mbplus_ff", "excl_ff")  # fmt: skip


def load_records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines() if ln]


def check_result_set(out: Path, job: dict[str, Any], nodes: int) -> list[dict[str, Any]]:
    """Assert everything a sane QEMU result set holds; return the records."""
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "ok" and status["mixrunner_exit"] == 0, status
    assert status["backend"] == "qemu" and status["watchdog_fired"] is False
    assert status["run_id"] == job["run_id"]
    for name in ("init.log", "dmesg.txt", "job.json", "console.log"):
        assert (out / name).is_file(), name
    assert json.loads((out / "job.json").read_text()) == job
    console = (out / "console.log").read_text(errors="replace")
    assert "Run /opt/numa-lb/sbin/numa-lb-init as init process" in console
    assert "numa-lb-init: status ok (mixrunner exit 0)" in console
    assert "numa-lb-init: power off" in console

    recs = load_records(out)
    types = [r["type"] for r in recs]
    assert types[0] == "run" and types[-1] == "run_end"
    run, end = recs[0], recs[-1]
    assert run["run_id"] == job["run_id"]
    assert "-numalb" in run["kernel"]["release"]
    assert len(run["nodes"]) == nodes and all(run["nodes"][n] for n in run["nodes"])
    # the policy in force is the one asked for, read back from /proc/sys
    pol = run["policy"]
    assert pol["requested"] == job["policy"] and pol["in_force"] == job["policy"], pol
    assert pol["status"] == "set" and job["policy"] in POLICIES
    nb = run["numa_balancing"]
    assert nb["in_force"] == str(job["numa_balancing"]) and nb["status"] == "set", nb

    progs = [r for r in recs if r["type"] == "program"]
    assert [p["name"] for p in progs] == [p["name"] for p in job["programs"]]
    for p in progs:
        assert p["exit_code"] == 0 and not p["timed_out"], p
        assert p["elapsed_s"] > 0
        assert p["result"]["verified"] is True, p["result"]
        assert p["threads_max"] >= p["threads_requested"]
        assert p["rusage"]["utime_s"] >= 0

    tgs = [r for r in recs if r["type"] == "thread_group"]
    assert {t["program"] for t in tgs} == {p["name"] for p in progs}
    for t in tgs:
        assert t["samples"] >= 1
        assert isinstance(t["nr_migrations"], int) and t["nr_migrations"] >= 0, t
        assert t["migrations_sampled"] >= 0 and t["cross_node_migrations_sampled"] >= 0
        assert t["minflt"] >= 0
        rss = t["numa_rss_last"]  # the kMLB per-node RSS of the patched kernel
        assert rss is not None and len(rss) == nodes, t
        assert all(v >= 0 for v in rss.values()) and sum(rss.values()) > 0
        assert t["numa_rss_peak_total"] >= sum(rss.values())

    assert end["status"] == "ok" and end["elapsed_s"] > 0 and end["programs_failed"] == []
    assert end["policy_at_end"] == job["policy"]
    assert end["sched_numa_lb_stats"]["status"] == "present"
    # numa_* come from the per-node counters; pgfault/pgmigrate_* need
    # CONFIG_VM_EVENT_COUNTERS, which the kernel config (tinyconfig base) lacks
    # for now, so they are only checked when present.
    vm = end["vmstat_delta"]
    assert "numa_hit" in vm and "numa_local" in vm
    if "pgfault" in vm:
        assert vm["pgfault"] > 0
    # the selection counters of the policy in force moved, no other row did
    lb = end["sched_numa_lb_stats"]["delta"]
    # a kernel before patch 0019 (the captured fixtures) has the paper's 7 rows
    assert set(lb) in (set(POLICIES), set(POLICIES[:7])), sorted(lb)
    for other in lb:
        if other != job["policy"]:
            assert not any(lb[other]), (other, lb[other])
    assert len(end["numastat_delta"]) == nodes
    assert end["errors"] == []
    return recs
