"""Pure parts of the executors and backends: sbatch scripts, Slurm state mapping,
gem5 command lines, boot-checkpoint keys and their lock, QEMU result mapping."""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from analysis.sweep import backends as bk
from analysis.sweep import provenance as pv
from analysis.sweep.matrix import Resources, build_runs, guest_job
from analysis.sweep.point import Provenance
from analysis.sweep.rundir import RunDir, State
from analysis.sweep.slurm import SlurmExecutor, reconcile, slurm_time
from analysis.sweep.spec import load_spec

PROV = Provenance(
    "gem5", "k" * 16, "i" * 16, {"configs": "c" * 64}, "gem5 version 24.0.0.1", "g" * 64
)
PATHS = {"gem5": "/opt/gem5/gem5.opt", "kernel": "/k/vmlinux", "image": "/i/rootfs.img"}


def rec_for(run: Any) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "point": run.point.to_dict(),
        "provenance": PROV.to_dict(),
        "paths": PATHS,
    }


def test_sbatch_script_quotes_paths_and_groups_by_resources(tmp_path: Path) -> None:
    out = tmp_path / "out dir; $(touch pwned)"
    ex = SlurmExecutor(out, "my sweep", "gpu", "proj-1", 4, ["--qos=low"])
    spec = load_spec(preset="paper")
    runs = build_runs(spec, "gem5", PROV, {"release": "k" * 16, "stock": "s" * 16})
    rds = [(RunDir(r.path(out)), r.resources) for r in runs]
    jobs = ex.plan(rds)
    # stock + 7 policies x 8 repeats: threads 16/32 (more memory) and 1/2/4/8
    assert sorted(len(j.runs) for j in jobs) == [8 * 2 * 8, 8 * 4 * 8]
    for j in jobs:
        s = j.script
        assert f"#SBATCH --array=0-{len(j.runs) - 1}%4" in s
        assert "#SBATCH --partition=gpu" in s and "#SBATCH --account=proj-1" in s
        assert "#SBATCH --qos=low" in s and "#SBATCH --job-name=numa-lb-my_sweep" in s
        assert f"#SBATCH --time={slurm_time(7 * 86400 + 300)}" in s
        assert f"runs={shlex.quote(str(j.list_file))}" in s
        assert "$(touch pwned)" not in s.replace(shlex.quote(str(j.list_file)), "")
        assert 'worker "$run_dir" --executor slurm' in s
        assert j.sbatch_argv[0] == "sbatch" and j.sbatch_argv[-1] == str(j.script_file)
    assert slurm_time(59) == "0-00:00:59" and slurm_time(90061) == "1-01:01:01"


def test_percent_in_the_output_dir_is_literal_for_slurm(tmp_path: Path) -> None:
    # sbatch expands %x (job name), %j ... in --output: "%" must reach it as "%%"
    out = tmp_path / "res%x 100%"
    ex = SlurmExecutor(out, "quick", None, None, None, [])
    runs = build_runs(load_spec(preset="quick"), "gem5", PROV)
    (job,) = ex.plan([(RunDir(r.path(out)), r.resources) for r in runs])
    output = next(a for a in job.sbatch_argv if a.startswith("--output="))
    assert output == f"--output={str(out.resolve()).replace('%', '%%')}/slurm/%A_%a.out"
    assert "res%%x 100%%" in output and "res%x" not in output


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        ("--array=0-999", "--array"),
        ("--arr=0-3", "--array"),  # sbatch takes unambiguous prefixes
        ("--output=/tmp/x", "--output"),
        ("--error=/tmp/x", "--error"),
        ("--parsable", "--parsable"),
        ("--wrap=id", "--wrap"),
        ("--chdir=/", "--chdir"),
        ("--time=1", "--time"),
        ("--mem=1G", "--mem"),
        ("--wait", "--wait"),
    ],
)
def test_slurm_extra_cannot_override_the_executors_options(extra: str, option: str) -> None:
    from analysis.sweep.slurm import SlurmError
    from analysis.sweep.spec import SpecError

    with pytest.raises(SpecError) as ei:
        load_spec(preset="quick", overrides=[f'resources.slurm_extra=["{extra}"]'])
    assert ei.value.field == "resources.slurm_extra[0]"
    assert f"would override {option}" in str(ei.value)
    with pytest.raises(SlurmError, match=f"would override {option}"):
        SlurmExecutor(Path("/tmp/x"), "quick", None, None, None, [extra])


def test_harmless_slurm_extra_is_kept() -> None:
    spec = load_spec(
        preset="quick", overrides=['resources.slurm_extra=["--qos=low", "--time-min=10"]']
    )
    assert spec.resources["slurm_extra"] == ["--qos=low", "--time-min=10"]


def _run_dir(tmp_path: Path, name: str, state: State, job: str) -> RunDir:
    rd = RunDir(tmp_path / name)
    rd.create({"run_id": name * 64}, {})
    rd.update(slurm={"job_id": job, "array_job_id": job.split("_")[0], "state": "PENDING"})
    if state != State.PENDING:
        rd.transition(State.RUNNING)
        if state != State.RUNNING:
            rd.transition(state)
    return rd


def test_reconcile_maps_terminal_slurm_states(tmp_path: Path) -> None:
    cases = {
        "a": (State.PENDING, "7_0", "CANCELLED", "interrupted"),
        "b": (State.RUNNING, "7_1", "NODE_FAIL", "interrupted"),  # the node, not the run
        "c": (State.RUNNING, "7_2", "OUT_OF_MEMORY", "failed"),
        "d": (State.INTERRUPTED, "7_3", "TIMEOUT", "timeout"),
        "e": (State.RUNNING, "7_4", "COMPLETED", "failed"),  # worker wrote nothing
        "f": (State.DONE, "7_5", "COMPLETED", "done"),
        "g": (State.PENDING, "7_6", "PENDING", "pending"),
        "h": (State.RUNNING, "7_7", "RUNNING", "running"),
        "i": (State.PENDING, "7_8", "PENDING", "pending"),
    }
    rds = {k: _run_dir(tmp_path, k, st, job) for k, (st, job, _, _) in cases.items()}
    done_before = rds["f"].status_file.read_text()
    states = {job: (sl, "0:0") for _, job, sl, _ in cases.values()}
    del states["7_8"]  # unknown to Slurm: counted, failed after repeated misses
    counts = reconcile(list(rds.values()), states)
    for k, (_, _, _, want) in cases.items():
        assert rds[k].state().value == want, k
    assert rds["f"].status_file.read_text() == done_before
    assert "COMPLETED but the worker recorded no final state" in rds["e"].status()["error"]
    assert rds["d"].status()["slurm"]["state"] == "TIMEOUT"
    assert sum(counts.values()) == len(cases)
    for _ in range(3):
        reconcile([rds["i"]], {})
    assert rds["i"].state() == State.FAILED and "vanished" in rds["i"].status()["error"]


def test_reconcile_leaves_runs_with_a_live_worker(tmp_path: Path) -> None:
    rd = _run_dir(tmp_path, "x", State.RUNNING, "9_0")
    with rd.lock():
        reconcile([rd], {"9_0": ("CANCELLED", None)})
        assert rd.state() == State.RUNNING
    reconcile([rd], {"9_0": ("CANCELLED", None)})
    assert rd.state() == State.INTERRUPTED


def _worker_ends(path: str, ready: Any, go: Any) -> None:
    """A worker's end, as the real one orders it: run lock, then the final record."""
    rd = RunDir(Path(path))
    with rd.lock() as got:
        assert got
        with rd.status_lock():
            ready.set()
            go.wait(10)
            time.sleep(0.3)  # the reconciler is waiting on the status lock by now
            rd.transition(State.DONE, exit_code=0)


def test_reconcile_waits_for_a_worker_recording_its_end(tmp_path: Path) -> None:
    # CI 2026-11-27: a reconciler that read "running" while the worker wrote its
    # end mapped the run from Slurm's view and lost the worker's own record.
    rd = _run_dir(tmp_path, "w", State.RUNNING, "5_0")
    ctx = mp.get_context("fork")
    ready, go = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_worker_ends, args=(str(rd.path), ready, go))
    p.start()
    assert ready.wait(10)
    go.set()
    t0 = time.monotonic()
    counts = reconcile([rd], {"5_0": ("COMPLETED", "0:0")})
    waited = time.monotonic() - t0
    p.join(10)
    assert p.exitcode == 0
    assert counts == {"done": 1}, counts
    assert waited >= 0.2  # it waited for the worker instead of deciding on a stale read
    st = rd.status()
    assert st["state"] == "done" and "error" not in st
    assert st["slurm"]["state"] == "PENDING"  # a done run is never rewritten


def test_gem5_command_line_is_a_list_built_from_the_point(tmp_path: Path) -> None:
    spec = load_spec(
        preset="sensitivity",
        overrides=['gem5.args=["--debug-flags", "x y"]', "machine.slit_remote_distance=16"],
    )
    run = build_runs(spec, "gem5", PROV)[7]
    rd = tmp_path / "run"
    cmd = bk.gem5_command(rec_for(run), rd)
    assert cmd[:2] == [PATHS["gem5"], f"--outdir={rd / 'm5out'}"]
    assert cmd[2].endswith("configs/numa_run.py")
    p = run.point
    want = [
        "--sockets",
        str(p.sockets),
        "--cores-per-socket",
        str(p.cores_per_socket),
        "--numa-factor",
        repr(p.numa_factor),
        "--slit-remote-distance",
        "16",
        "--cpu-boot",
        "atomic",
        "--cpu-roi",
        "timing",
        "--cpu-post-roi",  # the spec's default: the hand-back on the ROI CPU
        "roi",
        "--kernel",
        PATHS["kernel"],
        "--disk-image",
        PATHS["image"],
        "--job",
        str(rd / "job.json"),
        "--seed",
        "0",
    ]
    for a, b in zip(want[::2], want[1::2], strict=True):
        assert cmd[cmd.index(a) + 1] == b
    assert cmd[-2:] == ["--debug-flags", "x y"]  # verbatim, one argv item each
    c2 = bk.gem5_command(rec_for(run), rd, checkpoint=Path("/ck/cpt"))
    assert c2[c2.index("--restore-checkpoint") + 1] == "/ck/cpt"
    # the boot has no ROI: no post-ROI CPU; cpu.post_roi=atomic hands back to the boot CPU
    boot = bk.gem5_command(rec_for(run), rd, checkpoint=Path("/ck/cpt"), take_checkpoint=True)
    assert "--cpu-post-roi" not in boot
    back = load_spec(preset="sensitivity", overrides=["cpu.post_roi=atomic"])
    c3 = bk.gem5_command(rec_for(build_runs(back, "gem5", PROV)[7]), rd)
    assert c3[c3.index("--cpu-post-roi") + 1] == "atomic"
    # a point recorded before cpu.post_roi existed ran its hand-back on the ROI CPU
    old = rec_for(run)
    del old["point"]["cpu"]["post_roi"]
    c4 = bk.gem5_command(old, rd)
    assert c4[c4.index("--cpu-post-roi") + 1] == "roi"


def test_checkpoint_key_follows_what_the_guest_saw_at_boot() -> None:
    spec = load_spec(preset="sensitivity", overrides=["machine.slit_remote_distance=16"])
    runs = build_runs(spec, "gem5", PROV)
    keys: dict[tuple[Any, ...], set[str]] = {}
    for r in runs:
        keys.setdefault((r.point.cores_per_socket,), set()).add(bk.checkpoint_key(rec_for(r)))
    # fixed SLIT: one checkpoint per core count, shared by factors, policies, repeats
    assert all(len(v) == 1 for v in keys.values()) and len(keys) == 5
    free = build_runs(load_spec(preset="sensitivity"), "gem5", PROV)
    ks = {
        (r.point.cores_per_socket, r.point.numa_factor): bk.checkpoint_key(rec_for(r)) for r in free
    }
    assert len(set(ks.values())) == 25  # SLIT follows f: one boot per (cores, f)


def test_stage_runs_checks_inputs_and_reuses_staged_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Slurm stage step (backends.stage_runs): every input present on this
    host, one checkpoint per key, a staged one found and not booted again; runs
    with gem5.checkpoint = false need none."""
    monkeypatch.setenv("NUMA_LB_CACHE", str(tmp_path / "cache"))
    paths = {}
    for k in ("gem5", "kernel", "image"):
        paths[k] = str(tmp_path / k)
        Path(paths[k]).write_text(k)
    runs = build_runs(load_spec(preset="sensitivity"), "gem5", PROV)[:4]
    recs = [dict(rec_for(r), paths=paths) for r in runs]
    keys = sorted({bk.checkpoint_key(r) for r in recs})
    for k in keys:
        (bk.checkpoint_base() / k).mkdir(parents=True)
        (bk.checkpoint_base() / k / "DONE").write_text("")
    buf = io.StringIO()
    summary = bk.stage_runs(recs, buf, tmp_path / "slurm")
    assert summary["runs"] == 4 and summary["inputs"] == sorted(paths.values())
    assert sorted(summary["checkpoints_present"]) == keys and summary["checkpoints_made"] == []
    assert f"stage: boot checkpoints: {len(keys)} present, 0 made" in buf.getvalue()
    no_ck = load_spec(preset="sensitivity", overrides=["gem5.checkpoint=false"])
    recs = [dict(rec_for(r), paths=paths) for r in build_runs(no_ck, "gem5", PROV)[:2]]
    summary = bk.stage_runs(recs, io.StringIO(), tmp_path / "slurm")
    assert summary["checkpoints_present"] == summary["checkpoints_made"] == []
    recs[0]["paths"] = dict(paths, image=str(tmp_path / "gone.img"))
    with pytest.raises(bk.staging.NotStaged, match="does not exist on this host"):
        bk.stage_runs(recs, io.StringIO(), tmp_path / "slurm")


def _take(rec: dict[str, Any], log_path: str, q: Any) -> None:
    calls = []

    def fake_run(cmd: list[str], **kw: Any) -> Any:
        calls.append(cmd)
        time.sleep(0.5)
        ck = Path(cmd[cmd.index("--take-checkpoint") + 1])
        ck.mkdir(parents=True)
        return type("R", (), {"returncode": 0})()

    bk.subprocess.run = fake_run  # type: ignore[assignment]
    with open(log_path, "ab") as log:
        d = bk.ensure_checkpoint(rec, Path(log_path).parent, log, 60)
    q.put((str(d), len(calls)))


def test_boot_checkpoint_is_created_once_under_a_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUMA_LB_CACHE", str(tmp_path / "cache"))
    run = build_runs(load_spec(preset="sensitivity"), "gem5", PROV)[0]
    rec = rec_for(run)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_take, args=(rec, str(tmp_path / f"l{i}.log"), q)) for i in range(3)
    ]
    for p in procs:
        p.start()
    res = [q.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(10)
    assert len({d for d, _ in res}) == 1
    assert sorted(n for _, n in res) == [0, 0, 1]  # one boot, two reuses
    assert (Path(res[0][0]) / "DONE").exists()
    assert Path(res[0][0]).parent == pv.cache_root() / "checkpoints"


@pytest.mark.parametrize(
    "status, exit_code, want",
    [
        ("ok", 0, (0, False, None)),
        ("guest-error", 1, (1, False, "boom")),
        ("timeout", None, (1, True, "boom")),
        ("crash", None, (1, False, "boom")),
    ],
)
def test_qemu_result_mapping(status: str, exit_code: int | None, want: tuple[Any, ...]) -> None:
    qb = bk.load_qemu_boot()
    res = qb.RunResult(
        status=status,
        exit_code=exit_code,
        qemu_returncode=0,
        seconds=1.0,
        out_dir=Path("/x"),
        error=None if status == "ok" else "boom",
    )
    o = bk.outcome_from_qemu(res)
    assert (o.exit_code, o.timed_out, o.error) == want
    json.dumps(o.to_dict())


def test_guest_job_carries_the_run_id() -> None:
    run = build_runs(load_spec(preset="quick"), "qemu", PROV)[0]
    assert guest_job(run.point, run.run_id)["run_id"] == run.run_id


def test_resources_dataclass_roundtrip() -> None:
    r = Resources(2, 1 << 30, 600)
    assert r.to_dict() == {"cpus": 2, "mem_bytes": 1 << 30, "time_limit_s": 600}


def test_a_gem5_run_killed_at_its_limit_says_how_far_it_got(tmp_path: Path) -> None:
    from analysis.sweep.backends import progress_at_limit  # noqa: PLC0415

    m5 = tmp_path / "m5out"
    m5.mkdir()
    assert progress_at_limit(m5) == ""  # no roi.json: nothing known
    (m5 / "roi.json").write_text("[")
    assert progress_at_limit(m5) == ""  # corrupt: nothing, no crash
    # the finding pilot of 2026-11-24, killed inside its ROI
    ev = [{"event": "warmup", "tick": 953253667023, "host_time_unix": 1.0},
          {"event": "workbegin", "tick": 980492868054, "host_time_unix": 2.0}]  # fmt: skip
    (m5 / "roi.json").write_text(json.dumps({"events": ev}))
    assert "last exit event: workbegin at tick 980492868054" in progress_at_limit(m5)


def test_gem5_at_its_limit_gets_sigusr1_to_dump_statistics_then_dies(tmp_path: Path) -> None:
    # a stand-in for gem5's SIGUSR1 handler: write a statistics line, keep running
    fake = tmp_path / "gem5"
    fake.write_text("#!/bin/sh\ntrap 'echo \"simSeconds 0.123\" >> stats.txt' USR1\n"
                    "while :; do sleep 0.1; done\n")  # fmt: skip
    fake.chmod(0o755)
    t0 = time.monotonic()
    with open(tmp_path / "log", "wb") as log:
        rc = bk.run_to_limit([str(fake)], log, tmp_path, 1.0, tmp_path / "stats.txt")
    assert rc is None and time.monotonic() - t0 < 15
    assert (tmp_path / "stats.txt").read_text().strip() == "simSeconds 0.123"
    (tmp_path / "roi.json").write_text(json.dumps({"events": [{"event": "workbegin", "tick": 9}]}))
    msg = bk.progress_at_limit(tmp_path)
    assert "workbegin at tick 9" in msg and "0.123 s simulated" in msg
    with open(tmp_path / "log", "wb") as log:  # a normal end: its exit code
        assert bk.run_to_limit(["sh", "-c", "exit 3"], log, tmp_path, timeout_s=10) == 3


def test_children_cpu_time_counts_a_busy_child_not_a_sleeping_one(tmp_path: Path) -> None:
    """run_gem5 records gem5's CPU seconds as the difference of children_cpu_s
    around it: a child that spins for 0.3 s adds about that, one that sleeps
    0.3 s almost nothing (its wall time would say 0.3 s both times)."""
    spin = [sys.executable, "-c", "import time\nt=time.process_time()\n"
            "while time.process_time()-t<0.3: pass"]  # fmt: skip
    nap = [sys.executable, "-c", "import time; time.sleep(0.3)"]
    with open(tmp_path / "log", "wb") as log:
        c0 = bk.children_cpu_s()
        assert bk.run_to_limit(spin, log, tmp_path, timeout_s=60) == 0
        c1 = bk.children_cpu_s()
        assert bk.run_to_limit(nap, log, tmp_path, timeout_s=60) == 0
        c2 = bk.children_cpu_s()
    assert c1 - c0 >= 0.3
    assert c2 - c1 < 0.25  # the interpreter's start-up only


def test_boot_checkpoints_give_each_repeat_one_of_n_boots_that_differ(tmp_path: Path) -> None:
    """machine.boot_checkpoints = 3: repeats 0..5 restore checkpoints 0,1,2,0,1,2 of
    their kernel; the boot of variant v > 0 asks the init for it on the kernel
    command line; a single checkpoint keeps the key and run ids it had."""
    over = ["machine.slit_remote_distance=16", "sweep.repeats=6", "axes.policy=['default']",
            "axes.cores_per_socket=[2]", "axes.numa_factor=[1.6]"]  # fmt: skip
    one = build_runs(load_spec(preset="sensitivity", overrides=over), "gem5", PROV)
    three = build_runs(
        load_spec(preset="sensitivity", overrides=[*over, "machine.boot_checkpoints=3"]),
        "gem5",
        PROV,
    )
    assert [bk.boot_variant(r.point) for r in three] == [0, 1, 2, 0, 1, 2]
    assert {bk.boot_variant(r.point) for r in one} == {0}
    keys = [bk.checkpoint_key(rec_for(r)) for r in three]
    assert keys[:3] == keys[3:] and len(set(keys)) == 3
    assert keys[0] == bk.checkpoint_key(rec_for(one[0]))  # variant 0: the old key
    assert "boot_checkpoints" not in one[0].point.machine  # n = 1: the old run ids
    ck = Path("/ck/cpt")
    for r, v in zip(three[:3], (0, 1, 2), strict=True):
        boot = bk.gem5_command(rec_for(r), tmp_path, checkpoint=ck, take_checkpoint=True)
        restore = bk.gem5_command(rec_for(r), tmp_path, checkpoint=ck)
        assert "--kernel-arg" not in restore
        if v == 0:
            assert "--kernel-arg" not in boot
        else:
            assert boot[boot.index("--kernel-arg") + 1] == f"numa_lb.boot_variant={v}"


def test_a_pilot_takes_its_own_repeat_indices_so_its_runs_are_not_the_sweeps() -> None:
    over = ["machine.slit_remote_distance=16", "sweep.repeats=2", "axes.policy=['default']",
            "axes.cores_per_socket=[2]", "axes.numa_factor=[1.6]"]  # fmt: skip
    sweep = build_runs(load_spec(preset="sensitivity", overrides=over), "gem5", PROV)
    pilot = build_runs(
        load_spec(preset="sensitivity", overrides=[*over, "sweep.first_repeat=100"]), "gem5", PROV
    )
    assert [r.point.repeat for r in sweep] == [0, 1]
    assert [r.point.repeat for r in pilot] == [100, 101]
    assert not {r.run_id for r in sweep} & {r.run_id for r in pilot}


def test_parallel_workers_start_on_different_boot_checkpoints() -> None:
    from analysis.sweep.driver import boots_first  # noqa: PLC0415

    over = ["machine.slit_remote_distance=16", "sweep.repeats=3", "axes.cores_per_socket=[2]",
            "axes.numa_factor=[1.6]", "axes.policy=['default', 'excl']",
            "machine.boot_checkpoints=3"]  # fmt: skip
    runs = build_runs(load_spec(preset="sensitivity", overrides=over), "gem5", PROV)
    items = [(r, None) for r in runs]
    order = boots_first(items, lambda r: bk.checkpoint_key(rec_for(r)))  # type: ignore[arg-type]
    reps = [(r.point.repeat, r.point.policy) for r, _ in order]
    assert reps == [(0, "default"), (1, "default"), (2, "default"),
                    (0, "excl"), (1, "excl"), (2, "excl")]  # fmt: skip
    assert boots_first(items, lambda r: None) == items  # qemu: no checkpoints, same order
    assert boots_first(items, lambda r: "k", limit=2) == items  # too long to hash: as is


def test_children_max_rss_is_the_largest_reaped_childs_peak() -> None:
    """host_times.json's gem5_max_rss_mib: ru_maxrss of the reaped children, so
    a child that touched 64 MiB raises it to at least that."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from analysis.sweep.backends import children_max_rss_mib  # noqa: PLC0415

    code = "b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096])"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert children_max_rss_mib() >= 64
