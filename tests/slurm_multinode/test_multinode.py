"""Sweeps on a real two-node Slurm cluster (conftest.py, cluster.py), issue 17.

* a plain job array lands on both nodes, each node its own hostname/address;
* a sweep's arrays (split at the cluster's MaxArraySize) spread over both
  nodes; the second node dies mid-array (slurmd and every process on it
  SIGKILLed): with Slurm's requeue its runs run again on the other node in
  the same invocation; with --no-requeue they end interrupted (NODE_FAIL) and
  rerunning the same command completes them;
* tasks on both nodes that need the same staged directory (the boot
  checkpoint primitive) wait for one build on the shared path;
* the cost preview reads the runs above back from the shared history;
* the quick preset with real QEMU boots on both nodes (when kernel and image
  are built).

The run payload is the slurm tier's host runner (payload.py): the real mix
runner executed on the node. Kernel and image paths given to those runs are
placeholder files on the shared path: the host runner never reads them, the
stage step only checks that every node can see them.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
UNIT = ROOT / "tests" / "unit"
sys.path.insert(0, str(ROOT))

from cluster import Cluster  # noqa: E402

from analysis.sweep import backends as bk  # noqa: E402
from analysis.sweep import driver as sweep  # noqa: E402
from analysis.sweep.point import Provenance  # noqa: E402
from analysis.sweep.spec import load_spec  # noqa: E402

PAYLOAD_S = 20  # seconds each host-runner run waits before its mix
NODES = ("nlbn1", "nlbn2")


def statuses(out: Path) -> dict[str, dict[str, Any]]:
    res = {}
    for p in sorted((out / "runs").glob("*/status.json")):
        try:
            res[p.parent.name] = json.loads(p.read_text())
        except ValueError:
            continue  # being replaced right now
    return res


def attempts(out: Path, name: str) -> list[dict[str, Any]]:
    """Every attempt of a run, oldest first (attempts/N/status.json, then the current)."""
    d = out / "runs" / name
    old = sorted(d.glob("attempts/*/status.json"), key=lambda p: int(p.parent.name))
    return [json.loads(p.read_text()) for p in old] + [json.loads((d / "status.json").read_text())]


def wait_for(pred: Callable[[], bool], timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def node_of(s: dict[str, Any]) -> str | None:
    return (s.get("slurm") or {}).get("node")


@pytest.fixture
def host_payload(cluster: Cluster, shared: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment the driver and (through sbatch --export=ALL) the jobs see."""
    for k, v in cluster.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("NUMA_LB_TEST_RUNNER", "payload:slow_host_runner")
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{UNIT}:{ROOT}")
    monkeypatch.setenv("NUMA_LB_PAYLOAD_S", str(PAYLOAD_S))
    monkeypatch.setenv("NUMA_LB_HISTORY", str(shared / "history"))
    monkeypatch.setenv("NUMA_LB_CACHE", str(shared / "cache"))
    monkeypatch.delenv("FAKE_MODE", raising=False)
    if not (ROOT / "workloads" / "build" / "leader_ft").exists():
        subprocess.run(["make", "-C", str(ROOT / "workloads"), "-s"], check=True)
    art = shared / "artifacts"
    art.mkdir(exist_ok=True)
    paths = {"kernel": str(art / "bzImage"), "image": str(art / "rootfs.img")}
    for p in paths.values():
        Path(p).write_text("placeholder: the host-runner payload never reads it\n")

    def prepare(backend: str, variant: str, build: bool, gem5_flag: str | None,
                require: bool = True, **kw: Any) -> bk.Artifacts:  # fmt: skip
        prov = Provenance(backend, "kernel-test", "image-test", {"configs": "t"}, "host runner")
        return bk.Artifacts(prov, dict(paths))

    monkeypatch.setattr(bk, "prepare", prepare)
    return paths


SPEC = ["resources.cpus_per_run=1", 'resources.mem_per_run="256MiB"', 'resources.time_limit="10m"']


def start_sweep(out: Path, *overrides: str, **opts: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """run_sweep in a thread (the driver submits, then waits and reconciles)."""
    spec = load_spec(preset="quick", overrides=[*SPEC, *overrides])
    res: dict[str, Any] = {"stream": io.StringIO()}

    def go() -> None:
        res["code"] = sweep.run_sweep(
            spec,
            sweep.Options(out=out, executor="slurm", poll_s=1.0, stream=res["stream"], **opts),
        )

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, res


def finish(t: threading.Thread, res: dict[str, Any], timeout: float) -> tuple[int, str]:
    t.join(timeout)
    assert not t.is_alive(), f"still running after {timeout:.0f} s:\n{res['stream'].getvalue()}"
    return res["code"], res["stream"].getvalue()


def stop_second_node_mid_array(cluster: Cluster, out: Path) -> list[str]:
    """Once runs are running on both nodes, kill nlbn2; the runs it had."""

    def both_running() -> bool:
        nodes = {node_of(s) for s in statuses(out).values() if s.get("state") == "running"}
        return set(NODES) <= nodes

    wait_for(both_running, 180, "runs running on both nodes")
    time.sleep(3)  # into the payload
    victims = sorted(
        n for n, s in statuses(out).items() if s.get("state") == "running" and node_of(s) == "nlbn2"
    )
    killed = cluster.stop_node("nlbn2")
    assert killed, "nothing was running in nlbn2's namespace"
    return victims


def restart_second_node(cluster: Cluster) -> None:
    wait_for(lambda: cluster.node_states().get("nlbn2", "").startswith("down"), 120, "nlbn2 down")
    cluster.start_node("nlbn2")
    cluster.wait_nodes({"nlbn2": "idle"}, 120)


def table(out: Path) -> str:
    lines = []
    for name in sorted(statuses(out)):
        att = attempts(out, name)
        hist = " -> ".join(f"{node_of(a) or '-'}:{a.get('state')}" for a in att)
        lines.append(f"    {name} {att[-1].get('state'):11s} attempts {hist}")
    return "\n".join(lines)


# ---------------------------------------------------------------------- tests
def test_an_array_lands_on_both_nodes(cluster: Cluster, shared: Path) -> None:
    env = {**os.environ, **cluster.env()}
    d = shared / "hello"
    d.mkdir(exist_ok=True)
    r = subprocess.run(
        ["sbatch", "--parsable", "--array=0-3", "--cpus-per-task=1", "--mem=64M",
         f"--output={d}/%a.out", "--wrap",
         'echo "$(hostname) $SLURMD_NODENAME $(ip -4 -o addr show scope global | '
         "awk '{print $4}')\"; sleep 5"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()

    def gone() -> bool:
        q = subprocess.run(["squeue", "-h", "-j", job], env=env, capture_output=True, text=True)
        return q.stdout.strip() == ""

    wait_for(gone, 120, f"array {job} to finish")
    seen = {tuple(p.read_text().split()) for p in d.glob("*.out")}
    assert {s[0] for s in seen} == set(NODES), seen  # hostname = NodeName on each node
    assert all(s[0] == s[1] for s in seen)
    addrs = {s[0]: s[2] for s in seen}
    assert addrs["nlbn1"] != addrs["nlbn2"] and all(a.startswith("10.213.") for a in addrs.values())
    print(f"\narray {job}: " + ", ".join(f"{h} {a}" for h, a in sorted(addrs.items())))


def test_node_lost_mid_array_its_runs_are_requeued_and_done(
    cluster: Cluster, shared: Path, host_payload: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    out = shared / "out-requeue"
    t0 = time.monotonic()
    t, res = start_sweep(out, "sweep.repeats=4")  # 8 runs > MaxArraySize 5: two arrays
    victims = stop_second_node_mid_array(cluster, out)
    t_kill = time.monotonic() - t0
    code, text = finish(t, res, 600)
    assert code == 0, text
    assert "split into 2 arrays of 5 + 3 (MaxArraySize 5 (scontrol show config))" in text
    assert text.count("submitted array job") == 2
    assert "stage: 8 run(s) read 2 input file(s), all present" in text
    assert "cost preview:" in text
    st = statuses(out)
    assert len(st) == 8 and {s["state"] for s in st.values()} == {"done"}
    used = {node_of(a) for n in st for a in attempts(out, n)}
    assert used == set(NODES)  # the arrays spread over both nodes
    assert victims, "no run was on nlbn2 when it died"
    for v in victims:
        att = attempts(out, v)
        assert len(att) == 2, att
        assert node_of(att[0]) == "nlbn2" and att[0]["state"] == "interrupted"
        assert "found running, lock free" in att[0]["error"]  # its worker died with the node
        assert node_of(att[1]) == "nlbn1" and att[1]["state"] == "done"
    with capsys.disabled():
        print(
            f"\nrequeue: 8 runs in 2 arrays; nlbn2 killed at {t_kill:.0f} s with "
            f"{len(victims)} run(s) on it; all done after {time.monotonic() - t0:.0f} s:\n"
            + table(out)
        )
    restart_second_node(cluster)


def test_node_lost_without_requeue_then_the_same_command_completes(
    cluster: Cluster, shared: Path, host_payload: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    out = shared / "out-norequeue"
    extra = 'resources.slurm_extra=["--no-requeue"]'
    t, res = start_sweep(out, "sweep.repeats=3", extra)  # 6 runs
    victims = stop_second_node_mid_array(cluster, out)
    code, text = finish(t, res, 600)
    assert code == 1, text  # not every run done
    st = statuses(out)
    assert victims and all(st[v]["state"] == "interrupted" for v in victims)
    for v in victims:
        assert st[v]["slurm"]["state"] == "NODE_FAIL"
        assert "ended NODE_FAIL" in st[v]["error"], st[v]
    done_first = sorted(n for n, s in st.items() if s["state"] == "done")
    assert len(done_first) == 6 - len(victims)
    first = table(out)
    restart_second_node(cluster)
    # the same command again: only the interrupted runs are submitted
    t, res = start_sweep(out, "sweep.repeats=3", extra)
    code, text = finish(t, res, 600)
    assert code == 0, text
    assert f"to run: {len(victims)}; skipped: {6 - len(victims)} done" in text
    st = statuses(out)
    assert {s["state"] for s in st.values()} == {"done"}
    for v in victims:
        att = attempts(out, v)
        assert [a["state"] for a in att] == ["interrupted", "done"]
        assert node_of(att[0]) == "nlbn2"
    with capsys.disabled():
        print(
            f"\nno requeue: {len(victims)} run(s) lost with nlbn2 -> interrupted (NODE_FAIL):\n"
            f"{first}\n  after rerunning the same command:\n{table(out)}"
        )


def test_tasks_on_both_nodes_wait_for_one_build_on_the_shared_path(
    cluster: Cluster, shared: Path, capsys: pytest.CaptureFixture
) -> None:
    env = {**os.environ, **cluster.env()}
    results = shared / "lockprobe"
    results.mkdir(exist_ok=True)
    base = shared / "cache" / "checkpoints"
    r = subprocess.run(
        ["sbatch", "--parsable", "--array=0-3", "--cpus-per-task=1", "--mem=64M",
         f"--output={results}/%a.out", "--wrap", shlex.join([sys.executable,
         str(HERE / "lockprobe.py"), str(base), "bootkey0123", str(results)])],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    wait_for(lambda: len(list(results.glob("task*.json"))) == 4, 180, "4 lockprobe tasks")
    recs = [json.loads(p.read_text()) for p in sorted(results.glob("task*.json"))]
    assert {x["node"] for x in recs} == set(NODES), recs
    assert sum(x["built"] for x in recs) == 1  # one build for the whole array
    assert len({x["sha256"] for x in recs}) == 1  # everyone read the complete result
    waiters = [x for x in recs if x["notes"]]
    assert waiters and all("being built by" in x["notes"][0] for x in waiters)
    assert sorted(p.name for p in base.iterdir()) == ["bootkey0123", "bootkey0123.lock"]
    with capsys.disabled():
        print("\nshared checkpoint: " + "; ".join(
            f"task {x['task']} on {x['node']}: {'built' if x['built'] else 'reused'} "
            f"({x['seconds']} s{', waited' if x['notes'] else ''})" for x in recs))  # fmt: skip


def test_cost_preview_from_the_history_of_these_runs(
    cluster: Cluster, shared: Path, host_payload: dict[str, str], capsys: pytest.CaptureFixture
) -> None:
    hist = list((shared / "history").glob("*/*.json"))
    if not hist:
        pytest.skip("no earlier runs in the shared history (the node-loss tests did not run)")
    spec = load_spec(preset="quick", overrides=[*SPEC, "sweep.repeats=10"])  # 20 runs
    buf = io.StringIO()
    code = sweep.run_sweep(
        spec,
        sweep.Options(out=shared / "out-preview", executor="slurm", dry_run=True, stream=buf),
    )
    text = buf.getvalue()
    assert code == 0, text
    assert "split into 4 arrays of 5 + 5 + 5 + 5" in text
    line = next(x for x in text.splitlines() if x.startswith("  group 1 ["))
    # 2 nodes x (2 cpus / 1 cpu per run) = 4 slots; 20 runs of ~PAYLOAD_S each
    assert "20 run(s), " in line and "host-hours" in line and "unknown" not in line
    assert "at parallelism 4 (4 slot(s) on 2 usable node(s) in partition study)" in line
    total = next(x for x in text.splitlines() if x.startswith("  total: "))
    hours = float(total.split()[3])
    # printed with 2 decimals: 20 runs of 20 s = 0.111 h shows as 0.11
    assert 20 * PAYLOAD_S / 3600 - 0.005 <= hours <= 20 * (PAYLOAD_S + 30) / 3600 + 0.005, total
    # another machine shape: nothing known
    other = load_spec(preset="quick", overrides=[*SPEC, "axes.cores_per_socket=1"])
    buf2 = io.StringIO()
    sweep.run_sweep(
        other, sweep.Options(out=shared / "out-p2", executor="slurm", dry_run=True, stream=buf2)
    )
    assert "4x1 qemu (host runner): 2 run(s), unknown (no earlier done run" in buf2.getvalue()
    with capsys.disabled():
        print("\n" + "\n".join(x for x in text.splitlines() if "cost preview" in x
                               or x.startswith("  ") and "run(s)" in x))  # fmt: skip


def test_quick_preset_with_qemu_on_both_nodes(
    cluster: Cluster, shared: Path, capsys: pytest.CaptureFixture
) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "slurm"))
    from test_slurm_executor import artifacts_built

    why = artifacts_built()
    if why:
        pytest.skip(f"SKIPPED slurm-multinode/qemu: kernel or image not built ({why})")
    env = {**os.environ, **cluster.env(), "NUMA_LB_HISTORY": str(shared / "history")}
    out = shared / "out-qemu"
    cmd = [sys.executable, str(ROOT / "run_all.py"), "--preset", "quick", "--executor", "slurm",
           "--set", "sweep.repeats=2", "--out", str(out), "--poll", "2", "--no-build"]  # fmt: skip
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stage: 4 run(s) read 2 input file(s), all present" in r.stdout
    st = statuses(out)
    assert len(st) == 4 and {s["state"] for s in st.values()} == {"done"}
    assert {node_of(s) for s in st.values()} == set(NODES)
    assert {s["host"] for s in st.values()} == set(NODES)
    # the preview of a larger sweep of the same shape now has numbers
    more = [*cmd[: cmd.index("--out")], "--out", str(shared / "out-qemu-more"), "--dry-run"]
    more[more.index("sweep.repeats=2")] = "sweep.repeats=8"
    r2 = subprocess.run(more, env=env, capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0, r2.stdout + r2.stderr
    preview = [x for x in r2.stdout.splitlines() if x.startswith(("cost preview", "  "))]
    preview = [x for x in preview if "cost preview" in x or "run(s)" in x]
    assert "16 run(s)" in preview[1] and "unknown" not in preview[1], preview
    assert "at parallelism 2 (2 slot(s) on 2 usable node(s)" in preview[1]
    with capsys.disabled():
        print("\nqemu on two nodes:\n" + table(out) + "\n" + "\n".join(preview))
