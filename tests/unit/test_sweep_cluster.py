"""Cluster-side parts of the sweep engine, without a cluster (issue 17):

* refusals before any run: the paper/sensitivity presets on qemu without
  --allow-qemu-timing; mixes whose programs the image lacks (image.json);
* arrays split at the cluster's MaxArraySize (and chained under max_parallel);
  `scontrol show config` and sinfo output parsed;
* run history and the cost preview (host-hours per group, total, wall time);
* staging: build_once under concurrent processes, a killed builder, a compute
  node that may not build, inputs missing on a node; the stage step makes each
  missing checkpoint once;
* reconcile: a running run whose job Slurm forgot and whose worker is gone.

The real multi-node behaviour is in tests/slurm_multinode (real slurmd nodes).
"""

from __future__ import annotations

import importlib.util
import io
import json
import multiprocessing as mp
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from analysis.sweep import cost, preflight, staging
from analysis.sweep.matrix import build_runs
from analysis.sweep.point import Provenance
from analysis.sweep.rundir import RunDir, State
from analysis.sweep.slurm import (
    DEFAULT_MAX_ARRAY_SIZE,
    ClusterInfo,
    SlurmExecutor,
    cluster_info,
    parse_config_value,
    parse_sinfo_nodes,
    reconcile,
    split,
)
from analysis.sweep.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
QPROV = Provenance("qemu", "k" * 16, "i" * 16, {"configs": "c" * 64}, "QEMU emulator version 7.2")

# The files an image of ours lists in image.json (disk-image/build_image.py).
IMAGE_FILES = {
    f"/opt/numa-lb/bin/{b}": "0" * 64
    for b in ("leader_ft", "perthread_ft", "master_clients", "compute_small", "ptrchase", "m5")
}


def image(files: dict[str, str] | None = None, parsec: Any = None) -> dict[str, Any]:
    return {"image_key": "abcd", "files": IMAGE_FILES if files is None else files, "parsec": parsec}


def run_all(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "run_all.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )


# ------------------------------------------------------------ qemu timing
@pytest.mark.parametrize("preset", ["paper", "sensitivity"])
def test_timing_presets_are_refused_on_qemu(preset: str) -> None:
    spec = load_spec(preset=preset)
    msg = preflight.qemu_timing_refusal(spec, "qemu", "auto: no gem5 configured", False)
    assert msg is not None
    assert f"the {preset} preset measures timing" in msg
    assert "NOT architectural" in msg and "--allow-qemu-timing" in msg
    assert preflight.qemu_timing_refusal(spec, "qemu", "x", True) is None  # the explicit flag
    assert preflight.qemu_timing_refusal(spec, "gem5", "x", False) is None
    assert preflight.qemu_timing_refusal(load_spec(preset="quick"), "qemu", "x", False) is None


def test_a_copy_of_the_paper_preset_is_refused_too(tmp_path: Path) -> None:
    src = (ROOT / "analysis/sweep/presets/paper.toml").read_text()
    (tmp_path / "paper.toml").write_text(src)
    spec = load_spec(tmp_path / "paper.toml")
    assert preflight.timing_preset(spec) == "paper"
    renamed = load_spec(tmp_path / "paper.toml", overrides=["sweep.name=mine"])
    assert preflight.timing_preset(renamed) is None  # the user's own sweep now


def test_cli_refuses_sensitivity_on_qemu_before_building(tmp_path: Path) -> None:
    out = tmp_path / "s"
    r = run_all("--preset", "sensitivity", "--backend", "qemu", "--out", str(out), "--no-build")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("backend: qemu")
    assert lines[1].startswith("error: refused: the sensitivity preset measures timing")
    assert "--allow-qemu-timing" in lines[1]
    assert not out.exists()
    # --dry-run is refused the same way (the new user's first command)
    r = run_all("--preset", "paper", "--executor", "slurm", "--dry-run", "--backend", "qemu")
    assert r.returncode == 2 and "error: refused: the paper preset" in r.stdout


# ------------------------------------------------------------ image programs
def test_image_lacking_a_synthetic_workload_is_refused() -> None:
    spec = load_spec(preset="sensitivity")  # mix synthetic4: lft pft mc cs
    assert preflight.image_problems(spec, image()) is None
    files = {k: v for k, v in IMAGE_FILES.items() if not k.endswith("/master_clients")}
    msg = preflight.image_problems(spec, image(files))
    assert msg is not None
    assert msg.startswith("the sweep's mixes need programs the image lacks: ")
    assert "/opt/numa-lb/bin/master_clients (mix synthetic4) is not in the image abcd" in msg
    assert "disk-image/build_image.py build" in msg


def test_paper_mix_on_an_image_without_parsec_is_refused() -> None:
    spec = load_spec(preset="paper")
    msg = preflight.image_problems(spec, image(parsec=None))
    assert msg is not None and "PARSEC: the image abcd has no PARSEC programs" in msg


def test_parsecmgmt_mix_on_our_image_is_refused() -> None:
    spec = load_spec(preset="paper", overrides=["job.parsec_launcher=parsecmgmt"])
    msg = preflight.image_problems(spec, image())
    assert msg is not None
    assert 'job.parsec_launcher = "parsecmgmt" from /home/gem5/parsec-benchmark' in msg
    assert "holds no file under /home/gem5/parsec-benchmark" in msg
    tree = {**IMAGE_FILES, "/home/gem5/parsec-benchmark/bin/parsecmgmt": "0"}
    assert preflight.image_problems(spec, image(tree)) is None


def test_a_cmd_under_our_prefix_must_be_in_the_image(tmp_path: Path) -> None:
    toml = """
[sweep]
backend = "qemu"
[axes]
mix = ["m"]
[mixes.m]
programs = [
  { name = "a", cmd = ["/opt/numa-lb/bin/notthere", "-x"] },
  { name = "b", cmd = ["/bin/true"] },
]
"""
    (tmp_path / "c.toml").write_text(toml)
    spec = load_spec(tmp_path / "c.toml")
    msg = preflight.image_problems(spec, image())
    assert msg is not None and "/opt/numa-lb/bin/notthere (mix m)" in msg
    assert "/bin/true" not in msg  # Debian's files are not in image.json: not checked


def test_an_unbuilt_image_without_parsec_src_is_known_to_lack_parsec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PARSEC_SRC", raising=False)
    meta = preflight.image_meta(tmp_path / "unbuilt-image-0123456789abcdef")
    assert meta is not None and meta["parsec"] is None
    msg = preflight.image_problems(load_spec(preset="paper"), meta)
    assert msg is not None and "0123456789abcdef (not built yet; PARSEC_SRC is unset)" in msg
    # synthetic programs of an unbuilt image are not known: not refused
    assert preflight.image_problems(load_spec(preset="quick"), meta) is None
    monkeypatch.setenv("PARSEC_SRC", str(tmp_path))
    assert preflight.image_meta(tmp_path / "unbuilt-image-0123456789abcdef") is None


def test_guest_prefix_is_the_image_tools() -> None:
    spec = importlib.util.spec_from_file_location("bi", ROOT / "disk-image" / "build_image.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bi"] = mod
    spec.loader.exec_module(mod)
    assert mod.PREFIX == preflight.GUEST_PREFIX


def test_a_real_image_json_runs_the_quick_preset() -> None:
    metas = sorted((Path.home() / ".cache/numa-lb-study/images").glob("*/image.json"))
    if not metas:
        pytest.skip("no image built on this machine (disk-image/build_image.py build)")
    meta = json.loads(metas[-1].read_text())
    assert preflight.image_problems(load_spec(preset="quick"), meta) is None


# ------------------------------------------------------------ MaxArraySize
SCONTROL = """Configuration data as of 2026-11-24T02:10:00
AccountingStorageBackupHost = (null)
MaxArraySize            = 5
MaxJobCount             = 10000
SlurmdTimeout           = 10 sec
"""


def test_parse_scontrol_and_sinfo() -> None:
    assert parse_config_value(SCONTROL, "MaxArraySize") == "5"
    assert parse_config_value(SCONTROL, "MaxArray") is None
    sinfo = "nlbn1|study*|2|4096|idle\nnlbn2|study*|2|4096|down*\nx9|other|64|1024|idle\n"
    part, nodes = parse_sinfo_nodes(sinfo, None)
    assert part == "study" and [n["name"] for n in nodes] == ["nlbn1"]
    part, nodes = parse_sinfo_nodes(sinfo, "other")
    assert part == "other" and nodes[0]["cpus"] == 64


def test_a_cluster_that_cannot_be_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol here (a dry run on a laptop)
    info = cluster_info(None)
    assert info.max_array_size == DEFAULT_MAX_ARRAY_SIZE and info.nodes == []
    assert info.problem is not None and info.problem.startswith("scontrol: ")
    assert info.max_array_note == "MaxArraySize unknown, assumed 1001 (Slurm's default)"


def test_an_array_larger_than_max_array_size_is_split(tmp_path: Path) -> None:
    out = tmp_path / "o"
    spec = load_spec(preset="quick", overrides=["sweep.repeats=6"])  # 12 runs, one shape
    runs = build_runs(spec, "qemu", QPROV)
    ex = SlurmExecutor(out, "quick", None, None, None, [])
    jobs = ex.plan([(RunDir(r.path(out)), r.resources) for r in runs], max_array_size=5)
    assert [len(j.runs) for j in jobs] == [5, 5, 2]
    assert [j.part for j in jobs] == [(1, 3), (2, 3), (3, 3)]
    assert "#SBATCH --array=0-4\n" in jobs[0].script and "#SBATCH --array=0-1\n" in jobs[2].script
    assert len({j.list_file for j in jobs}) == 3 and len({j.script_file for j in jobs}) == 3
    assert [rd.path for j in jobs for rd in j.runs] == [r.path(out) for r in runs]
    assert all(j.after is None for j in jobs)  # no max_parallel: Slurm decides
    note = ex.split_note(jobs, "MaxArraySize 5 (scontrol show config)")
    assert note == (
        "slurm: 12 runs of 2 cpu, 1536 MiB split into 3 arrays of 5 + 5 + 2 "
        "(MaxArraySize 5 (scontrol show config))"
    )
    # under max_parallel each part waits for the one before
    ex = SlurmExecutor(out, "quick", None, None, 2, [])
    jobs = ex.plan([(RunDir(r.path(out)), r.resources) for r in runs], max_array_size=5)
    assert jobs[1].after is jobs[0] and jobs[2].after is jobs[1]
    jobs[0].job_id = "41"
    argv = ex.argv(jobs[1])
    assert argv[-2] == "--dependency=afterany:41" and argv[-1] == str(jobs[1].script_file)
    assert "%2" in jobs[0].script
    assert "each part starts after the one before (max_parallel 2)" in (
        ex.split_note(jobs, "x") or ""
    )
    with pytest.raises(ValueError, match="must be >= 1"):
        split([1, 2], 0)


def test_jobs_are_told_not_to_build(tmp_path: Path) -> None:
    runs = build_runs(load_spec(preset="quick"), "qemu", QPROV)
    ex = SlurmExecutor(tmp_path, "quick", None, None, None, [])
    (job,) = ex.plan([(RunDir(r.path(tmp_path)), r.resources) for r in runs])
    assert f"export {staging.STAGED_ONLY_ENV}=1\n" in job.script
    r = subprocess.run(["bash", "-n"], input=job.script, text=True, capture_output=True)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------ cost preview
def _rec(run: Any, prov: Provenance = QPROV) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "sweep": "quick",
        "label": run.point.label(),
        "point": run.point.to_dict(),
        "provenance": prov.to_dict(),
        "resources": run.resources.to_dict(),
    }


def test_history_and_cost_preview(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cost.HISTORY_ENV, str(tmp_path / "hist"))
    spec = load_spec(preset="quick", overrides=["sweep.repeats=3"])  # 6 runs, 2 cpu each
    runs = build_runs(spec, "qemu", QPROV)
    out = tmp_path / "o"
    ex = SlurmExecutor(out, "quick", None, None, None, [], stream=io.StringIO())
    info = ClusterInfo(5, "MaxArraySize 5", "study", [
        {"name": "n1", "cpus": 2, "mem_mib": 4096, "state": "idle"},
        {"name": "n2", "cpus": 4, "mem_mib": 4096, "state": "idle"},
    ])  # fmt: skip
    pairs = [(RunDir(r.path(out)), r) for r in runs]
    jobs = ex.plan([(rd, r.resources) for rd, r in pairs], info.max_array_size)
    text = ex.preview(jobs, pairs, QPROV.tool_version, info)
    assert "cost preview: 0 earlier done run(s)" in text
    assert "group 1 [2 cpu, 1536 MiB, 0-00:15:00]: 6 run(s), unknown; wall unknown" in text
    assert "4x2 qemu (QEMU emulator version 7.2): 6 run(s), unknown" in text
    assert text.splitlines()[-1] == "  total: 6 run(s), unknown; wall unknown"
    # history: two done runs of this shape and mix (60 s, 120 s), a failed one, a foreign shape
    for i, (dur, state) in enumerate([(60.0, "done"), (120.0, "done"), (5.0, "failed")]):
        st = {"state": state, "duration_s": dur, "attempt": 1, "slurm": {"node": "n1"}}
        assert cost.record_run(_rec(runs[i]), st) is not None
    other = Provenance("qemu", "k" * 16, "i" * 16, {"configs": "c"}, "QEMU emulator version 9")
    cost.record_run(_rec(runs[3], other), {"state": "done", "duration_s": 9999.0, "attempt": 1})
    text = ex.preview(jobs, pairs, QPROV.tool_version, info)
    # median 90 s/run x 6 = 540 s = 0.15 host-hours, x 2 cpu = 0.30 core-hours;
    # slots: n1 1 (2 cpu / 2), n2 2 (4 cpu / 2; 4096 MiB / 1536 = 2) = 3 -> 2 waves
    assert "cost preview: 2 earlier done run(s)" in text
    assert "6 run(s), 0.15 host-hours (0.30 core-hours); wall ~ 3 min at parallelism 3" in text
    assert "(3 slot(s) on 2 usable node(s) in partition study)" in text
    assert "mean 90 s/run; 2 earlier run(s)" in text
    assert "total: 6 run(s), 0.15 host-hours (0.30 core-hours); wall ~ 3 min" in text
    # max_parallel caps the parallelism
    ex1 = SlurmExecutor(out, "quick", None, None, 1, [], stream=io.StringIO())
    text = ex1.preview(jobs, pairs, QPROV.tool_version, info)
    assert "wall ~ 9 min at parallelism 1 (max_parallel 1; 3 slot(s)" in text


def test_test_payload_runs_stay_out_of_the_users_history(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMA_LB_TEST_RUNNER", "m:f")
    monkeypatch.delenv(cost.HISTORY_ENV, raising=False)
    run = build_runs(load_spec(preset="quick"), "qemu", QPROV)[0]
    assert cost.record_run(_rec(run), {"state": "done", "duration_s": 1.0}) is None


def test_slots() -> None:
    nodes = [{"cpus": 8, "mem_mib": 16384}, {"cpus": 8, "mem_mib": 4096}]
    assert cost.slots(nodes, 1, 4 << 30, None) == (5, "5 slot(s) on 2 usable node(s)")
    assert cost.slots([], 1, 1, None) == (None, "cluster nodes unknown")
    assert cost.slots([], 1, 1, 7)[0] == 7
    assert cost.slots(nodes, 16, 1, None)[0] is None


# ------------------------------------------------------------ staging
def _builder(base: str, key: str, q: Any, hold: float) -> None:
    def build(tmp: Path) -> None:
        q.put(("build", os.getpid()))
        for i in range(4):  # slowly, so the others really wait
            (tmp / f"part{i}").write_text(f"{i}\n" * 1000)
            time.sleep(hold / 4)

    notes: list[str] = []
    d = staging.build_once(Path(base), key, build, note=notes.append)
    content = "".join((d / f"part{i}").read_text() for i in range(4))
    q.put(("done", os.getpid(), str(d), len(content), notes))


def test_build_once_builds_once_for_concurrent_processes(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_builder, args=(str(tmp_path), "k1", q, 1.0)) for _ in range(4)]
    for p in procs:
        p.start()
    msgs = [q.get(timeout=60) for _ in range(5)]
    for p in procs:
        p.join(10)
    builds = [m for m in msgs if m[0] == "build"]
    done = [m for m in msgs if m[0] == "done"]
    assert len(builds) == 1 and len(done) == 4
    assert {m[2] for m in done} == {str(tmp_path / "k1")}
    assert {m[3] for m in done} == {4 * 2000}  # every caller saw the whole directory
    waited = [m for m in done if m[4]]
    assert waited and all("waiting for artifact k1: being built by" in m[4][0] for m in waited)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k1", "k1.lock"]


def _doomed(base: str, started: Any) -> None:
    def build(tmp: Path) -> None:
        (tmp / "half").write_text("x")
        started.set()
        time.sleep(60)

    staging.build_once(Path(base), "k2", build)


def test_a_killed_builder_leaves_nothing_usable_and_the_next_one_builds(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    started = ctx.Event()
    p = ctx.Process(target=_doomed, args=(str(tmp_path), started))
    p.start()
    assert started.wait(30)
    os.kill(p.pid, signal.SIGKILL)  # as when its node dies
    p.join(10)
    assert not (tmp_path / "k2").exists()
    assert list(tmp_path.glob("k2.tmp.*"))  # its half-built directory, ignored
    d = staging.build_once(tmp_path, "k2", lambda t: (t / "whole").write_text("y"))
    assert (d / "whole").read_text() == "y" and not (d / "half").exists()
    assert not list(tmp_path.glob("k2.tmp.*"))


def test_a_failing_build_leaves_nothing(tmp_path: Path) -> None:
    def bad(tmp: Path) -> None:
        (tmp / "x").write_text("x")
        raise RuntimeError("boot checkpoint failed (gem5 exit 1)")

    with pytest.raises(RuntimeError, match="gem5 exit 1"):
        staging.build_once(tmp_path, "k3", bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k3.lock"]


def test_a_compute_node_never_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(staging.STAGED_ONLY_ENV, "1")
    assert staging.staged_only()
    with pytest.raises(staging.NotStaged) as e:
        staging.build_once(tmp_path, "k4", lambda t: None, allow_build=not staging.staged_only())
    assert "k4 is not in" in str(e.value) and "submitting host" in str(e.value)
    assert "NUMA_LB_CACHE" in str(e.value)
    ready = staging.build_once(tmp_path, "k5", lambda t: None)  # staged earlier: fine
    monkeypatch.setenv(staging.STAGED_ONLY_ENV, "1")
    assert staging.build_once(tmp_path, "k5", lambda t: None, allow_build=False) == ready


def test_inputs_missing_on_a_node_are_named(tmp_path: Path) -> None:
    k = tmp_path / "bzImage"
    k.write_text("k")
    rec = {"paths": {"kernel": str(k), "image": str(tmp_path / "nope.img")}}
    why = staging.inputs_problem(rec)
    assert why is not None and f"image {tmp_path / 'nope.img'}" in why
    assert "every node sees at the same path" in why
    with pytest.raises(staging.NotStaged):
        staging.check_inputs(rec)
    rec["paths"]["image"] = str(k)
    assert staging.inputs_problem(rec) is None


def test_stage_makes_each_missing_checkpoint_once(tmp_path: Path) -> None:
    f = tmp_path / "vmlinux"
    f.write_text("k")
    recs = [{"paths": {"kernel": str(f)}, "key": k} for k in ("a", "a", "b", "c", "a")]
    made: list[str] = []
    buf = io.StringIO()
    summary = staging.stage(
        recs,
        buf,
        lambda r: r["key"],
        lambda key: key == "c",  # c was staged earlier
        lambda r: made.append(r["key"]) or tmp_path,  # type: ignore[func-returns-value]
    )
    assert made == ["a", "b"]
    assert summary["checkpoints_present"] == ["c"]
    text = buf.getvalue()
    assert "stage: boot checkpoint a (3 run(s)) missing: booting it here, once" in text
    assert "stage: boot checkpoints: 1 present, 2 made" in text
    recs.append({"paths": {"kernel": str(tmp_path / "gone")}, "key": "a"})
    with pytest.raises(staging.NotStaged, match="does not exist on this host"):
        staging.stage(recs, buf, lambda r: r["key"], lambda k: True, None)


def test_a_shared_file_system_without_locks_gets_a_clear_error(tmp_path: Path) -> None:
    # flock on an O_PATH descriptor fails (EBADF) as on a mount without lock
    # support (ENOLCK/ENOSYS): the caller gets the reason, not a bare OSError
    (tmp_path / "x.lock").write_text("")
    fd = os.open(tmp_path / "x.lock", os.O_PATH)
    try:
        with pytest.raises(staging.LockError, match="must support file locks"):
            staging._lock(fd, tmp_path / "x.lock", blocking=True)
    finally:
        os.close(fd)


# ------------------------------------------------------------ reconcile
def test_a_running_run_whose_job_slurm_forgot_is_interrupted(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "r")
    rd.create({"run_id": "r" * 64}, {})
    rd.update(slurm={"job_id": "9_1", "array_job_id": "9", "state": "RUNNING", "node": "nlbn2"})
    rd.transition(State.RUNNING)
    reconcile([rd], {})  # no lost_after: Slurm may just not have answered
    assert rd.state() == State.RUNNING
    with rd.lock():  # a live worker: never touched
        reconcile([rd], {}, lost_after=1)
    assert rd.state() == State.RUNNING
    reconcile([rd], {}, lost_after=1)
    assert rd.state() == State.INTERRUPTED
    assert "node nlbn2" in rd.status()["error"] and "lost with its node" in rd.status()["error"]


def test_slurm_extra_cannot_smuggle_a_shell(tmp_path: Path) -> None:
    from analysis.sweep.spec import SpecError

    with pytest.raises(SpecError):
        load_spec(preset="quick", overrides=['resources.slurm_extra=["--comment=$(reboot)"]'])
    ok = load_spec(preset="quick", overrides=['resources.slurm_extra=["--no-requeue"]'])
    runs = build_runs(ok, "qemu", QPROV)
    ex = SlurmExecutor(tmp_path, "q", None, None, None, ok.resources["slurm_extra"])
    (job,) = ex.plan([(RunDir(r.path(tmp_path)), r.resources) for r in runs])
    assert "#SBATCH --no-requeue\n" in job.script
    assert shlex.split(" ".join(ex.argv(job)))[-1] == str(job.script_file)
