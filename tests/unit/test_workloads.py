"""Unit tests for the synthetic workloads (workloads/src).

Each workload verifies itself, but that alone could be a closed form agreeing
with a wrong implementation, so the checksums are also recomputed here by a
straightforward Python simulation of what each workload claims to do, on
small sizes. Thread start-up is checked from inside (tasks_seen, thread
records) and from outside (/proc/<pid>/task); placement reporting is checked
against move_pages semantics (on a 1-node host every page is on node 0, so
what is tested is the reporting mechanism, not NUMA placement itself).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WL = REPO / "workloads"
M64 = (1 << 64) - 1
MUL = 6364136223846793005
ADD = 1442695040888963407
PAGE = os.sysconf("SC_PAGESIZE")


@pytest.fixture(scope="session")
def wlbuild(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("SKIPPED unit-c: gcc/make not found")
    out = tmp_path_factory.mktemp("wlbuild")
    p = subprocess.run(
        ["make", "-C", str(WL / "src"), f"O={out}"], capture_output=True, text=True, timeout=180
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "warning" not in (p.stdout + p.stderr).lower(), p.stderr
    return out


def run(build: Path, prog: str, *args: str, timeout: float = 30) -> dict[str, Any]:
    p = subprocess.run([str(build / prog), *args], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (prog, args, p.returncode, p.stdout, p.stderr)
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, "exactly one JSON line on stdout"
    d: dict[str, Any] = json.loads(lines[0])
    assert d["workload"] == prog
    assert d["verified"] is True
    assert d["elapsed_s"] > 0
    return d


def mix(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def upd(x: int) -> int:
    return (x * MUL + ADD) & M64


def hx(v: int) -> str:
    return f"0x{v:016x}"


def online_nodes() -> set[int]:
    out: set[int] = set()
    txt = Path("/sys/devices/system/node/online").read_text().strip()
    for part in txt.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def check_threads(d: dict[str, Any], threads: int) -> None:
    assert d["threads"] == threads
    assert d["threads_started"] == threads
    # the main thread plus every worker were alive at the same time
    assert d["tasks_seen"] == threads + 1
    recs = d["thread_records"]
    assert len(recs) == threads
    tids = {r["tid"] for r in recs}
    assert len(tids) == threads and d["pid"] not in tids and all(t > 0 for t in tids)
    for r in recs:
        assert r["cpu_start"] >= 0 and r["node_start"] in online_nodes()


def check_region(reg: dict[str, Any], nbytes: int, expected_node: int | None) -> None:
    pages = (nbytes + PAGE - 1) // PAGE
    assert reg["pages"] == pages
    assert "error" not in reg, reg
    # every page was written, so every page is present, on a real node
    assert reg["present"] == pages and reg["absent"] == 0 and reg["errors"] == 0
    assert sum(reg["nodes"].values()) == pages
    assert {int(n) for n in reg["nodes"]} <= online_nodes()
    if expected_node is not None:
        assert reg["expected_node"] == expected_node
        if len(online_nodes()) == 1:
            assert reg["on_expected_node"] == pages


# ---------------------------------------------------------------- leader_ft


def ref_leader(n: int, threads: int, iters: int, seed: int, passes: int = 1) -> tuple[int, int]:
    a = [mix(i ^ (seed << 40)) for i in range(n)]
    chunks = [(n * t // threads, n * (t + 1) // threads) for t in range(threads)]
    reads = 0
    for _ in range(iters):
        for _ in range(passes):
            for t in range(threads):
                lo, hi = chunks[t]
                nlo, nhi = chunks[(t + 1) % threads]
                reads += sum(a[lo:hi]) + sum(a[nlo:nhi])
        for _ in range(passes):
            a = [upd(x) for x in a]
    return sum(a) & M64, reads & M64


@pytest.mark.parametrize("threads", [1, 3])
def test_leader_ft_computes_what_it_claims(wlbuild: Path, threads: int) -> None:
    size, iters, seed = 4096, 3, 7
    d = run(
        wlbuild,
        "leader_ft",
        f"--size={size}",
        f"--threads={threads}",
        f"--iters={iters}",
        f"--seed={seed}",
    )
    final, reads = ref_leader(size // 8, threads, iters, seed)
    assert d["checksum"] == hx(final) == d["expected"]
    assert d["read_checksum"] == hx(reads) == d["read_expected"]
    check_threads(d, threads)


def test_leader_ft_placement_is_leader_first_touch(wlbuild: Path) -> None:
    size = 1 << 20
    d = run(wlbuild, "leader_ft", f"--size={size}", "--threads=2", "--iters=2")
    # all shared pages were first touched by the leader: on the leader's node
    check_region(d["placement_init"]["shared"], size, d["leader_node"])
    check_region(d["placement_end"]["shared"], size, d["leader_node"])


# ------------------------------------------------------------- perthread_ft


def ref_perthread(
    n: int, threads: int, iters: int, seed: int, share: int, passes: int = 1
) -> tuple[int, int]:
    blk = [[mix((t << 48) ^ i ^ (seed << 40)) for i in range(n)] for t in range(threads)]
    share_n = n * share // 100
    reads = 0
    for _ in range(iters):
        for _ in range(passes):
            for t in range(threads):
                reads += sum(blk[t]) + sum(blk[(t + 1) % threads][:share_n])
        for _ in range(passes):
            blk = [[upd(x) for x in b] for b in blk]
    return sum(sum(b) for b in blk) & M64, reads & M64


@pytest.mark.parametrize("threads,share", [(1, 0), (4, 25), (2, 100)])
def test_perthread_ft_computes_what_it_claims(wlbuild: Path, threads: int, share: int) -> None:
    size, iters, seed = 2048, 3, 3
    d = run(
        wlbuild,
        "perthread_ft",
        f"--size={size}",
        f"--threads={threads}",
        f"--iters={iters}",
        f"--seed={seed}",
        f"--share-pct={share}",
    )
    final, reads = ref_perthread(size // 8, threads, iters, seed, share)
    assert d["checksum"] == hx(final)
    assert d["read_checksum"] == hx(reads)
    check_threads(d, threads)


def test_perthread_ft_placement_follows_each_worker(wlbuild: Path) -> None:
    size, threads = 256 << 10, 3
    d = run(wlbuild, "perthread_ft", f"--size={size}", f"--threads={threads}", "--iters=1")
    recs = d["thread_records"]
    for t in range(threads):
        # each block was first touched by its worker, on that worker's node
        ftn = recs[t]["first_touch_node"]
        assert ftn in online_nodes()
        check_region(d["placement_init"][f"block{t}"], size, ftn)


SCHED_COUNTERS = {
    "nr_migrations": "se.nr_migrations",
    "failed_affine": "nr_failed_migrations_affine",
    "failed_running": "nr_failed_migrations_running",
    "failed_hot": "nr_failed_migrations_hot",
    "forced": "nr_forced_migrations",
}


@pytest.mark.parametrize("prog", ["leader_ft", "perthread_ft", "ptrchase"])
def test_thread_records_carry_the_kernels_balancing_counters(wlbuild: Path, prog: str) -> None:
    """Each worker reads its own /proc/thread-self/sched at its end: a counter
    this kernel prints (the refusals only with kernel.sched_schedstats=1) is a
    count, one it does not print is -1, never a made-up 0."""
    p = Path("/proc/thread-self/sched")
    printed = p.read_text() if p.exists() else ""
    args = ["--size=256K", "--threads=2"] + (["--iters=1"] if prog != "ptrchase" else [])
    d = run(wlbuild, prog, *args)
    recs = d["thread_records"]
    assert recs
    for r in recs:
        for key, name in SCHED_COUNTERS.items():
            if f"{name} " in printed:
                assert isinstance(r[key], int) and r[key] >= 0, (key, r)
            else:
                assert r[key] == -1, (key, r)


@pytest.mark.parametrize("prog", ["leader_ft", "master_clients", "compute_small"])
def test_thread_records_carry_each_workers_run_and_run_delay(wlbuild: Path, prog: str) -> None:
    """Each worker reads its own /proc/thread-self/schedstat at its end: the ns
    it ran, the ns it waited on a run queue and its timeslices, read by the
    worker itself so nothing after its last phase is missed; -1 where the
    kernel has no such file, never a made-up 0. A worker's CPU time lies within
    its program's elapsed time."""
    have = Path("/proc/thread-self/schedstat").exists()
    args = ["--size=256K", "--threads=3", "--iters=2"]
    d = run(wlbuild, prog, *args)
    recs = d["thread_records"]
    assert len(recs) == 3
    for r in recs:
        if not have:
            assert (r["run_ns"], r["run_delay_ns"], r["timeslices"]) == (-1, -1, -1), r
            continue
        assert r["run_ns"] > 0 and r["run_delay_ns"] >= 0 and r["timeslices"] >= 1, r
        assert r["run_ns"] < d["elapsed_s"] * 1e9 + 1e7  # ran within its program's life


# ------------------------------------------------- blocking threads (bursts)


@pytest.mark.parametrize("prog", ["leader_ft", "perthread_ft"])
def test_bursts_block_and_compute_the_same(wlbuild: Path, prog: str) -> None:
    """--bursts/--sleep-us split each phase into pieces with a sleep after
    each: the result is the same as without, the compute phase lasts at least
    the sleeps, and every worker blocked (voluntary context switches)."""
    threads, iters, bursts, sleep_us = 3, 2, 5, 2000
    base = ["--size=96K", f"--threads={threads}", f"--iters={iters}", "--seed=5"]
    plain = run(wlbuild, prog, *base)
    d = run(wlbuild, prog, *base, f"--bursts={bursts}", f"--sleep-us={sleep_us}")
    assert d["checksum"] == plain["checksum"] and d["read_checksum"] == plain["read_checksum"]
    assert (d["bursts"], d["sleep_us"]) == (bursts, sleep_us)
    assert (plain["bursts"], plain["sleep_us"]) == (1, 0)
    sleeps = iters * 2 * bursts  # per worker: read and write phase
    assert d["compute_s"] >= sleeps * sleep_us * 1e-6
    assert d["voluntary_switches"] >= threads * sleeps
    check_threads(d, threads)


# ------------------------------------------------ longer phases (passes)


@pytest.mark.parametrize("prog", ["leader_ft", "perthread_ft"])
def test_passes_repeat_each_phase_before_its_barrier(wlbuild: Path, prog: str) -> None:
    """--passes P: each phase passes over its data P times before the barrier,
    so iters I x passes P does the updates of I x P plain iterations (the
    same final data) with 2 I barriers instead of 2 I P; the reads are P
    passes over each iteration's state (the reference models), and the
    program's own closed form agrees."""
    threads, iters, passes, seed = 3, 2, 3, 11
    base = [f"--threads={threads}", f"--seed={seed}"]
    size = ["--size=3072"] if prog == "leader_ft" else ["--size=1024", "--share-pct=25"]
    d = run(wlbuild, prog, *base, *size, f"--iters={iters}", f"--passes={passes}")
    plain = run(wlbuild, prog, *base, *size, f"--iters={iters * passes}")
    if prog == "leader_ft":
        final, reads = ref_leader(3072 // 8, threads, iters, seed, passes)
    else:
        final, reads = ref_perthread(1024 // 8, threads, iters, seed, 25, passes)
    assert d["verified"] and d["passes"] == passes and plain["passes"] == 1
    assert d["checksum"] == hx(final) == plain["checksum"]
    assert d["read_checksum"] == hx(reads) == d["read_expected"]
    assert d["read_checksum"] != plain["read_checksum"]  # other states read
    check_threads(d, threads)


@pytest.mark.parametrize(
    "prog,arg",
    [
        ("leader_ft", "--passes=0"),
        ("perthread_ft", "--passes=1048577"),
        ("master_clients", "--passes=2"),
        ("compute_small", "--passes=2"),
        ("leader_ft", "--bursts=0"),
        ("perthread_ft", "--sleep-us=-1"),
        ("leader_ft", "--sleep-us=1000001"),
        ("master_clients", "--bursts=2"),
        ("compute_small", "--sleep-us=5"),
    ],
)
def test_bursts_and_passes_bad_values_are_usage_errors(wlbuild: Path, prog: str, arg: str) -> None:
    p = subprocess.run([str(wlbuild / prog), arg], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == ""
    assert f"bad value for {arg.split('=')[0]}" in p.stderr


# ----------------------------------------------------------- master_clients


def ref_master(n: int, pn: int, clients: int, iters: int, seed: int) -> tuple[int, int]:
    m = [mix(i ^ (seed << 40)) for i in range(n)]
    priv = [[mix(((c + 1) << 50) ^ i ^ (seed << 40)) for i in range(pn)] for c in range(clients)]
    for _ in range(iters):
        s = sum(m) & M64
        contrib = [((c + 1) * s) & M64 for c in range(clients)]
        priv = [[(x + contrib[c]) & M64 for x in priv[c]] for c in range(clients)]
        r = sum(contrib) & M64
        m = [(x + r) & M64 for x in m]
    return sum(m) & M64, sum(sum(p) for p in priv) & M64


@pytest.mark.parametrize("threads", [1, 3])
def test_master_clients_computes_what_it_claims(wlbuild: Path, threads: int) -> None:
    size, psize, iters, seed = 2048, 512, 4, 5
    d = run(
        wlbuild,
        "master_clients",
        f"--size={size}",
        f"--private-size={psize}",
        f"--threads={threads}",
        f"--iters={iters}",
        f"--seed={seed}",
    )
    final, priv = ref_master(size // 8, psize // 8, threads, iters, seed)
    assert d["checksum"] == hx(final)
    assert d["private_checksum"] == hx(priv)
    check_threads(d, threads)
    check_region(d["placement_init"]["master"], size, d["master_node"])
    for t in range(threads):
        check_region(
            d["placement_init"][f"private{t}"], psize, d["thread_records"][t]["first_touch_node"]
        )


# ------------------------------------------------------------ compute_small


def ref_compute(nopt: int, iters: int, seed: int) -> float:
    def unit(x: int) -> float:
        return (mix(x & M64) >> 11) * (1.0 / 9007199254740992.0)

    total = 0.0
    for i in range(nopt):
        b = ((i ^ (seed << 40)) * 8) & M64
        spot, strike = 50 + 100 * unit(b), 50 + 100 * unit(b + 1)
        rate, vol, tm = 0.01 + 0.09 * unit(b + 2), 0.05 + 0.6 * unit(b + 3), 0.1 + 2 * unit(b + 4)
        call = mix(b + 5) & 1
        acc = 0.0
        for k in range(iters):
            s = spot * (1.0 + 1e-6 * k)
            sq = vol * math.sqrt(tm)
            d1 = (math.log(s / strike) + (rate + 0.5 * vol * vol) * tm) / sq
            d2 = d1 - sq
            disc = strike * math.exp(-rate * tm)
            if call:
                acc += s * 0.5 * math.erfc(-d1 / math.sqrt(2)) - disc * 0.5 * math.erfc(
                    -d2 / math.sqrt(2)
                )
            else:
                acc += disc * 0.5 * math.erfc(d2 / math.sqrt(2)) - s * 0.5 * math.erfc(
                    d1 / math.sqrt(2)
                )
        total += acc
    return total


def test_compute_small_computes_what_it_claims(wlbuild: Path) -> None:
    nopt, iters, seed, threads = 100, 20, 9, 3
    d = run(
        wlbuild,
        "compute_small",
        f"--size={nopt * 48}",
        f"--threads={threads}",
        f"--iters={iters}",
        f"--seed={seed}",
        "--verify-stride=1",
    )
    assert d["options"] == nopt
    assert d["verified_options"] == nopt and d["mismatches"] == 0
    ref = ref_compute(nopt, iters, seed)
    assert math.isclose(d["price_sum"], ref, rel_tol=1e-9), (d["price_sum"], ref)
    check_threads(d, threads)
    check_region(d["placement_init"]["options"], nopt * 48, d["leader_node"])


# ---------------------------------------------------------------- ptrchase


def test_ptrchase_single(wlbuild: Path) -> None:
    size = 4 << 20
    d = run(wlbuild, "ptrchase", f"--size={size}", "--iters=200000")
    assert d["mode"] == "single" and d["chain_lines"] == size // 64
    assert 0 < d["ns_per_load"] < 1e5
    check_threads(d, 1)
    rec = d["thread_records"][0]
    check_region(d["placement_end"]["chain0"], size, rec["first_touch_node"])


def test_ptrchase_bound_pair_and_threads(wlbuild: Path) -> None:
    node = min(online_nodes())
    size = 2 << 20
    d = run(
        wlbuild,
        "ptrchase",
        f"--size={size}",
        "--iters=50000",
        "--threads=2",
        f"--cpu-node={node}",
        f"--mem-node={node}",
    )
    assert d["cpu_node"] == node and d["mem_node"] == node
    check_threads(d, 2)
    for t in range(2):
        # the thread ran on the requested node and its chain is bound there
        assert d["thread_records"][t]["node_end"] == node
        reg = d["placement_end"][f"chain{t}"]
        check_region(reg, size, node)
        assert reg["on_expected_node"] == reg["pages"]
    assert len(d["ns_per_load_per_thread"]) == 2


def test_ptrchase_sweep_matrix(wlbuild: Path) -> None:
    size = 2 << 20
    p = subprocess.run(
        [str(wlbuild / "ptrchase"), "--sweep", f"--size={size}", "--iters=20000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    nodes = sorted(online_nodes())
    assert d["mode"] == "sweep" and d["verified"]
    assert len(d["matrix_ns"]) == len(d["cpu_nodes"])
    assert all(len(row) == len(d["mem_nodes"]) for row in d["matrix_ns"])
    assert set(d["mem_nodes"]) <= set(nodes)
    assert all(v > 0 for row in d["matrix_ns"] for v in row)
    # every chain page landed on the memory node it was bound to
    assert all(v == d["pages_per_pair"] for row in d["pages_on_mem_node"] for v in row)
    if len(nodes) == 1:
        assert d["numa_factor"] is None and d["remote_ns"] is None
        assert d["local_ns"] == pytest.approx(d["matrix_ns"][0][0], rel=1e-3)
    else:
        assert d["numa_factor"] > 0
    assert "NUMA factor" in p.stderr and "cpu\\mem" in p.stderr


def test_ptrchase_pairs_one_after_another(wlbuild: Path) -> None:
    node = min(online_nodes())
    size = 2 << 20
    p = subprocess.run(
        [str(wlbuild / "ptrchase"), f"--pairs={node}:{node},{node}:{node}", f"--size={size}",
         "--iters=20000"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["mode"] == "pairs" and d["verified"] and "matrix_ns" not in d
    assert [x[:2] for x in d["pairs"]] == [[node, node], [node, node]]
    for _, _, ns, pages, ctx in d["pairs"]:
        assert ns > 0 and pages == d["pages_per_pair"] and ctx >= 0
    # two local pairs: the local mean is theirs, no remote figure, no factor
    assert d["local_ns"] == pytest.approx((d["pairs"][0][2] + d["pairs"][1][2]) / 2, rel=1e-3)
    assert d["remote_ns"] is None and d["numa_factor"] is None
    assert f"cpu node {node}, memory node {node}" in p.stderr


def test_ptrchase_pairs_naming_a_node_without_memory_is_a_usage_error(wlbuild: Path) -> None:
    node = min(online_nodes())
    bad = max(online_nodes()) + 1
    p = subprocess.run(
        [str(wlbuild / "ptrchase"), f"--pairs={node}:{bad}", "--size=1M", "--iters=1000"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert p.returncode == 2 and f"node {bad} has no memory" in p.stderr


def test_ptrchase_counts_context_switches_in_the_timed_window(wlbuild: Path) -> None:
    d = run(wlbuild, "ptrchase", "--size=1M", "--iters=20000")
    assert isinstance(d["ctx_switches_timed"], int) and d["ctx_switches_timed"] >= 0


def test_ptrchase_unknown_mem_node_fails_cleanly(wlbuild: Path) -> None:
    bad = max(online_nodes()) + 1
    p = subprocess.run(
        [str(wlbuild / "ptrchase"), "--size=1M", "--iters=1000", f"--mem-node={bad}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 3 and "mbind" in p.stderr


# ------------------------------------------------------ threads, from outside


def test_threads_visible_in_proc_while_running(wlbuild: Path) -> None:
    threads = 3
    proc = subprocess.Popen(
        [
            str(wlbuild / "leader_ft"),
            "--size=4M",
            f"--threads={threads}",
            "--iters=400",
            "--no-placement",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen = 0
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                seen = max(seen, len(os.listdir(f"/proc/{proc.pid}/task")))
            except FileNotFoundError:
                break
            if seen == threads + 1:
                break
            time.sleep(0.005)
    finally:
        # once all threads were seen there is nothing more to learn
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert seen == threads + 1


# -------------------------------------------------------------- CLI errors


@pytest.mark.parametrize(
    "prog,args",
    [
        ("leader_ft", ["--threads=0"]),
        ("leader_ft", ["--size=12Q"]),
        ("leader_ft", ["--share-pct=5"]),  # not an option of this workload
        ("leader_ft", ["extra"]),
        ("perthread_ft", ["--share-pct=101"]),
        ("master_clients", ["--private-size=1"]),
        ("compute_small", ["--verify-stride=0"]),
        ("ptrchase", ["--sweep", "--cpu-node=0"]),
        ("ptrchase", ["--sweep", "--pairs=0:0"]),
        ("ptrchase", ["--pairs=0:0", "--mem-node=0"]),
        ("ptrchase", ["--pairs=0:0,"]),
        ("ptrchase", ["--pairs=0"]),
        ("ptrchase", ["--pairs=a:b"]),
        ("ptrchase", ["--pairs=" + ",".join(["0:0"] * 65)]),
        ("ptrchase", ["--size=64"]),
        ("ptrchase", ["--bogus"]),
        ("perthread_ft", ["--start-away"]),
        ("ptrchase", ["--start-away"]),
    ],
)
def test_usage_errors(wlbuild: Path, prog: str, args: list[str]) -> None:
    p = subprocess.run([str(wlbuild / prog), *args], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, (prog, args, p.returncode, p.stderr)
    assert p.stdout == "" and p.stderr.strip()


def test_an_option_another_program_owns_is_named_in_the_error(wlbuild: Path) -> None:
    p = subprocess.run(
        [str(wlbuild / "perthread_ft"), "--start-away"], capture_output=True, text=True, timeout=10
    )
    assert p.stderr.startswith("perthread_ft: --start-away is not an option of this program")


def test_leader_ft_start_away_off_by_default(wlbuild: Path) -> None:
    d = run(wlbuild, "leader_ft", "--threads=3", "--size=64K", "--iters=1")
    assert d["start_away"] is False
    assert [r["node_away"] for r in d["thread_records"]] == [-1, -1, -1]


def test_leader_ft_start_away_needs_another_node(wlbuild: Path) -> None:
    """On a one-node host there is nowhere to start away: a runtime error that
    says so, no JSON. (On several nodes the QEMU pilot of the lb3-block192-away
    mix exercises it: findings/README.md.)"""
    if len(online_nodes()) > 1:
        pytest.skip("SKIPPED unit-c start-away error: this host has several NUMA nodes")
    p = subprocess.run(
        [str(wlbuild / "leader_ft"), "--threads=2", "--size=64K", "--iters=1", "--start-away"],
        capture_output=True, text=True, timeout=10,
    )  # fmt: skip
    assert p.returncode == 3 and p.stdout == ""
    assert "--start-away needs a node with CPUs other than the leader's (node 0)" in p.stderr


@pytest.mark.parametrize(
    "prog", ["leader_ft", "perthread_ft", "master_clients", "compute_small", "ptrchase"]
)
def test_help_and_static(wlbuild: Path, prog: str) -> None:
    p = subprocess.run([str(wlbuild / prog), "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and "--size" in p.stdout and "--threads" in p.stdout
    hdr = subprocess.run(
        ["objdump", "-h", str(wlbuild / prog)], capture_output=True, text=True, check=True
    ).stdout
    assert ".interp" not in hdr


def test_make_install_layout(tmp_path: Path) -> None:
    """What the disk-image builder relies on: one bin dir with everything."""
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("SKIPPED unit-c: gcc/make not found")
    dest = tmp_path / "root"
    p = subprocess.run(
        ["make", "-C", str(WL), "install", f"DESTDIR={dest}", "PREFIX=/opt/numa-lb",
         f"O={tmp_path / 'build'}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    bindir = dest / "opt/numa-lb/bin"
    for name in ("m5", "leader_ft", "perthread_ft", "master_clients", "compute_small",
                 "ptrchase", "mixrunner.py"):  # fmt: skip
        assert os.access(bindir / name, os.X_OK), name
    assert (bindir / "parsec_catalog.py").exists()
    # the installed runner finds the workloads next to itself
    plan = subprocess.run(
        [sys.executable, str(bindir / "mixrunner.py"), "-", "--dry-run"],
        input=json.dumps({"programs": [{"workload": "ptrchase"}]}),
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["argv"][0] == str(bindir / "ptrchase")
