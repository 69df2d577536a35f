"""Driver + worker + local executor end to end, with a host backend.

The backend here is ``host_runner``: the real guest mix runner
(workloads/mixrunner.py) executed on this machine with a scratch sysctl
directory, wired in through the worker's NUMA_LB_TEST_RUNNER hook; kernel and
image are replaced by fixed ids. Everything else (spec, run ids, run
directories, worker processes, signals, status.json) is the production path.
The same paths with real QEMU runs are in tests/sweep/.
FAKE_MODE=crash|hang makes the excl runs crash or hang, checkpoint-wait makes
them wait 2.5 s for a "boot checkpoint" and then run 2.5 s; FAKE_MODE=siblings
records how many run directories exist while each run runs.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from analysis.sweep import backends as bk
from analysis.sweep import driver as sweep
from analysis.sweep.backends import Outcome
from analysis.sweep.point import Provenance
from analysis.sweep.provenance import PrerequisiteError
from analysis.sweep.rundir import RunDir
from analysis.sweep.spec import load_spec
from analysis.sweep.worker import run_one

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def host_runner(rec: dict[str, Any], run_dir: Path, timeout_s: float) -> Outcome:
    mode = os.environ.get("FAKE_MODE", "ok")
    if mode == "siblings":
        (Path(run_dir) / "siblings").write_text(str(len(list(Path(run_dir).parent.iterdir()))))
    if rec["point"]["policy"] == "excl":
        if mode == "crash":
            print("simulated backend crash: segfault in the emulator", flush=True)
            return Outcome(exit_code=139, error="backend exited with 139")
        if mode == "hang":
            time.sleep(3600)
        if mode == "checkpoint-wait":  # as run_gem5: a boot wait, published, then the run
            time.sleep(2.5)
            (Path(run_dir) / "logs" / bk.HOST_TIMES_NAME).write_text('{"checkpoint_wait_s": 2.5}')
            time.sleep(2.5)
    sysroot = Path(run_dir) / "scratch-sys"
    (sysroot / "kernel").mkdir(parents=True, exist_ok=True)
    (sysroot / "kernel" / "numa_balancing").write_text("0\n")
    (sysroot / "kernel" / "sched_numa_lb_policy").write_text("default\n")
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "workloads" / "mixrunner.py"),
            str(Path(run_dir) / "job.json"),
            "--outdir",
            str(Path(run_dir) / "guest"),
            "--sysctl-root",
            str(sysroot),
        ],
        timeout=timeout_s,
        check=False,
    )
    return Outcome(exit_code=r.returncode, error=None if r.returncode == 0 else "mixrunner failed")


@pytest.fixture
def host_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    if not (ROOT / "workloads" / "build" / "leader_ft").exists():
        subprocess.run(["make", "-C", str(ROOT / "workloads"), "-s"], check=True)
    monkeypatch.setenv("NUMA_LB_TEST_RUNNER", "test_sweep_local:host_runner")
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{ROOT}")
    monkeypatch.setenv("NUMA_LB_TIMEOUT_GRACE_S", "1")
    monkeypatch.delenv("FAKE_MODE", raising=False)

    def prepare(
        backend: str,
        variant: str,
        build: bool,
        gem5_flag: str | None,
        require: bool = True,
        extra_variants: tuple[str, ...] = (),
    ) -> bk.Artifacts:
        prov = Provenance(backend, "kernel-test", "image-test", {"configs": "t"}, "host runner")
        return bk.Artifacts(prov, {"kernel": "/nonexistent/bzImage", "image": "/nonexistent/img"})

    monkeypatch.setattr(bk, "prepare", prepare)


def run(out: Path, *overrides: str, **opts: Any) -> tuple[int, str]:
    spec = load_spec(preset="quick", overrides=list(overrides))
    buf = io.StringIO()
    opts.setdefault("jobs", 2)
    code = sweep.run_sweep(spec, sweep.Options(out=out, stream=buf, **opts))
    return code, buf.getvalue()


def states(out: Path) -> dict[str, str]:
    res = {}
    for sp in sorted((out / "runs").glob("*/spec.json")):
        label = json.loads(sp.read_text())["label"]
        res[label] = RunDir(sp.parent).state().value
    return res


def histories(out: Path) -> dict[str, list[str]]:
    return {
        p.parent.name: [h["state"] for h in json.loads(p.read_text())["history"]]
        for p in (out / "runs").glob("*/status.json")
    }


def test_sweep_runs_skips_done_and_reports(tmp_path: Path, host_backend: None) -> None:
    out = tmp_path / "s"
    code, text = run(out, "sweep.repeats=2")
    assert code == 0, text
    assert text.splitlines()[0].startswith("backend: qemu")
    assert set(states(out).values()) == {"done"} and len(states(out)) == 4
    assert (out / "report.html").exists() and (out / "report.md").exists()
    assert (out / "frames" / "metrics.parquet").exists()
    st = json.loads(next((out / "runs").glob("*/status.json")).read_text())
    for k in ("started_at", "finished_at", "duration_s", "host", "pid", "exit_code", "executor"):
        assert k in st
    spec = json.loads(next((out / "runs").glob("*/spec.json")).read_text())
    assert spec["point"]["backend"] == "qemu" and "NOT architectural" in spec["caveat"]
    before = histories(out)
    code, text = run(out, "sweep.repeats=2")
    assert code == 0 and "to run: 0; skipped: 4 done" in text
    assert histories(out) == before  # nothing rerun, nothing rewritten


def test_crash_is_recorded_and_does_not_stop_the_sweep(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "crash")
    out = tmp_path / "s"
    code, text = run(out, "axes.threads=2,3")
    assert code == 1
    st = states(out)
    assert sorted(st.values()) == ["done", "done", "failed", "failed"]
    failed = [
        json.loads(p.read_text())
        for p in (out / "runs").glob("*/status.json")
        if json.loads(p.read_text())["state"] == "failed"
    ]
    for f in failed:
        assert f["exit_code"] == 139
        assert "segfault in the emulator" in f["log_tail"]
    # without --rerun-failed nothing runs; with it only the failed ones, attempts kept
    code, text = run(out, "axes.threads=2,3")
    assert "skipped: 2 done, 2 failed" in text and "--rerun-failed" in text
    monkeypatch.setenv("FAKE_MODE", "ok")
    before = histories(out)
    code, text = run(out, "axes.threads=2,3", rerun_failed=True)
    assert code == 0 and "to run: 2" in text
    assert set(states(out).values()) == {"done"}
    after = histories(out)
    for k, h in after.items():
        if before[k][-1] == "done":
            assert h == before[k]
        else:
            assert h[-3:] == ["pending", "running", "done"]
            assert (out / "runs" / k / "attempts" / "1" / "logs" / "backend.log").exists()


def test_timeout_is_recorded(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "hang")
    out = tmp_path / "s"
    t0 = time.monotonic()
    code, text = run(out, 'resources.time_limit="2s"')
    assert time.monotonic() - t0 < 40
    assert code == 1
    assert sorted(states(out).values()) == ["done", "timeout"]
    st = [json.loads(p.read_text()) for p in (out / "runs").glob("*/status.json")]
    to = next(s for s in st if s["state"] == "timeout")
    assert "time limit" in to["error"] and "log_tail" in to


def test_the_time_limit_does_not_count_the_boot_checkpoint_wait(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # limit 3 s + 1 s grace: the excl run's 2.5 s wait + 2.5 s run would be
    # killed at 4 s if the wait counted; its own 2.5 s are within the limit
    monkeypatch.setenv("FAKE_MODE", "checkpoint-wait")
    out = tmp_path / "s"
    code, text = run(out, 'resources.time_limit="3s"')
    assert code == 0, text
    assert sorted(states(out).values()) == ["done", "done"]


def test_ctrl_c_keeps_finished_runs_and_resumes(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "hang")
    out = tmp_path / "s"
    spec = load_spec(preset="quick", overrides=["axes.threads=2,3"])
    buf = io.StringIO()

    def both() -> bool:  # Ctrl-C once a run is done and an excl run hangs
        st = _safe_states(out).values()
        return sum(1 for v in st if v == "done") >= 1 and "running" in st

    code = _sweep_signalled(out, spec, buf, both, signal.SIGINT, delay=0.5)
    assert code == 130, buf.getvalue()
    st = states(out)
    assert "interrupted" in st.values() and "done" in st.values()
    # never started: no run directory (each is created just before its run starts);
    # sweep.json lists every run and `status` counts the missing ones
    assert len(st) == 2 and len(json.loads((out / "sweep.json").read_text())["runs"]) == 4
    assert "2 run(s) of sweep.json not started" in sweep.status_table(out)
    done_before = {k: v for k, v in histories(out).items() if v[-1] == "done"}
    interrupted = [
        json.loads(p.read_text())
        for p in (out / "runs").glob("*/status.json")
        if json.loads(p.read_text())["state"] == "interrupted"
    ]
    assert interrupted and "SIGTERM" in interrupted[0]["error"]
    assert not _children_alive()
    monkeypatch.setenv("FAKE_MODE", "ok")
    code, text = run(out, "axes.threads=2,3")
    assert code == 0, text
    assert set(states(out).values()) == {"done"}
    after = histories(out)
    for k, h in done_before.items():
        assert after[k] == h  # finished runs were not repeated


def test_sigusr1_drains_running_runs_finish_and_the_sweep_resumes(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGUSR1 while an excl run runs (5 s in checkpoint-wait mode): it finishes
    done, no later run starts, exit 130; the same command runs the rest."""
    monkeypatch.setenv("FAKE_MODE", "checkpoint-wait")
    out = tmp_path / "s"
    spec = load_spec(preset="quick", overrides=["axes.threads=2,3"])
    buf = io.StringIO()

    def excl_running() -> bool:
        return any(v == "running" for k, v in _safe_states(out).items() if "excl" in k)

    code = _sweep_signalled(out, spec, buf, excl_running, signal.SIGUSR1)
    text = buf.getvalue()
    assert code == 130, text
    assert "draining (SIGUSR1): 1 running run(s) finish" in text
    assert "not started; rerun the same command to resume" in text
    st = states(out)
    assert set(st.values()) == {"done"} and 1 <= len(st) < 4, st  # the excl run finished
    assert any("excl" in k for k in st)
    assert not _children_alive()
    code, text = run(out, "axes.threads=2,3")
    assert code == 0, text
    assert len(states(out)) == 4 and set(states(out).values()) == {"done"}


def _sweep_signalled(
    out: Path,
    spec: Any,
    buf: io.StringIO,
    when: Callable[[], bool],
    sig: int,
    delay: float = 0.0,
) -> int:
    """run_sweep (jobs=1) while a thread sends SIG to this process once WHEN
    holds, DELAY seconds later; the sweep's exit code. Nothing is sent after
    the sweep returned (a default SIGUSR1 would end pytest): WHEN must hold."""
    finished = threading.Event()
    sent: list[bool] = []

    def send() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not finished.is_set():
            if when():
                time.sleep(delay)
                if not finished.is_set():
                    os.kill(os.getpid(), sig)
                    sent.append(True)
                return
            time.sleep(0.1)

    th = threading.Thread(target=send)
    th.start()
    try:
        code = sweep.run_sweep(spec, sweep.Options(out=out, jobs=1, stream=buf))
    finally:
        finished.set()
        th.join()
    assert sent, "the condition for the signal never held while the sweep ran"
    return code


def test_a_drain_before_the_first_run_starts_nothing(tmp_path: Path, host_backend: None) -> None:
    """SIGUSR1 while the driver prepares (before the executor's loop): no run
    starts, exit 130; the handler is the default again afterwards."""
    out = tmp_path / "s"
    spec = load_spec(preset="quick", overrides=["axes.threads=2,3"])
    buf = io.StringIO()
    real_prepare = bk.prepare

    def prepare(*a: Any, **k: Any) -> bk.Artifacts:
        os.kill(os.getpid(), signal.SIGUSR1)  # handled: the drain holds from run_sweep on
        return real_prepare(*a, **k)

    bk.prepare = prepare  # type: ignore[assignment]
    try:
        code = sweep.run_sweep(spec, sweep.Options(out=out, jobs=2, stream=buf))
    finally:
        bk.prepare = real_prepare  # type: ignore[assignment]
    assert code == 130, buf.getvalue()
    assert "draining (SIGUSR1): 0 running run(s) finish, 4 not started" in buf.getvalue()
    assert states(out) == {}
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


def test_a_drain_during_the_last_run_ends_the_sweep_normally(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing left to start: the sweep is whole, exit 0 and its report, not 130."""
    monkeypatch.setenv("FAKE_MODE", "checkpoint-wait")
    out = tmp_path / "s"
    spec = load_spec(preset="quick", overrides=["axes.policy=excl"])
    buf = io.StringIO()

    def last_running() -> bool:
        return list(_safe_states(out).values()) == ["running"]

    code = _sweep_signalled(out, spec, buf, last_running, signal.SIGUSR1)
    assert code == 0, buf.getvalue()
    assert "draining (SIGUSR1): 1 running run(s) finish, 0 not started" in buf.getvalue()
    assert "rerun the same command" not in buf.getvalue()
    assert set(states(out).values()) == {"done"}


def _safe_states(out: Path) -> dict[str, str]:
    try:
        return states(out)
    except (OSError, ValueError, AttributeError):
        return {}


def _children_alive() -> bool:
    """Any process of ours still sleeping in host_runner (hang mode)?"""
    r = subprocess.run(["pgrep", "-f", "run_all.py worker"], capture_output=True, text=True)
    return bool(r.stdout.strip()) and any(
        str(os.getpid()) in Path(f"/proc/{pid}/stat").read_text().split()[3:4]
        for pid in r.stdout.split()
        if Path(f"/proc/{pid}/stat").exists()
    )


def test_full_disk_stops_before_starting(tmp_path: Path, host_backend: None) -> None:
    out = tmp_path / "s"
    code, text = run(out, 'resources.min_free_disk="1000000GiB"')
    assert code == 3
    assert "missing prerequisite: disk:" in text and "min_free_disk" in text
    assert not (out / "runs").exists()


def test_missing_gem5_is_a_clear_early_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEM5", raising=False)
    monkeypatch.setenv("NUMA_LB_CACHE", str(tmp_path / "cache"))  # no cached gem5 build either
    spec = load_spec(preset="quick", overrides=["sweep.backend=gem5"])
    buf = io.StringIO()
    code = sweep.run_sweep(spec, sweep.Options(out=tmp_path / "s", stream=buf))
    assert code == 3
    assert buf.getvalue().splitlines()[0].startswith("backend: gem5")
    assert "`./run_all.py build-gem5`, set GEM5=/path/to/gem5.fast or pass --gem5" in buf.getvalue()
    assert "the cache holds no finished gem5.fast or gem5.opt" in buf.getvalue()
    with pytest.raises(PrerequisiteError, match="not an executable"):
        bk.prepare("gem5", "release", False, str(tmp_path / "no-gem5"))


def test_dry_run_creates_nothing(tmp_path: Path, host_backend: None) -> None:
    out = tmp_path / "s"
    code, text = run(out, "sweep.repeats=3", dry_run=True)
    assert code == 0 and "to run: 6" in text and text.count("default 4x2") == 3
    assert not out.exists()


def test_stage_only_checks_the_inputs_and_runs_nothing(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "s"
    # the fixture's kernel and image paths do not exist: a clear error, nothing made
    code, text = run(out, stage_only=True)
    assert code == sweep.EXIT_PREREQ, text
    assert "error: staging failed: stage: kernel /nonexistent/bzImage does not exist" in text
    assert not (out / "runs").exists()
    kernel, image = tmp_path / "bzImage", tmp_path / "rootfs.img"
    kernel.write_text("k")
    image.write_text("i")
    prov = Provenance("qemu", "kernel-test", "image-test", {"configs": "t"}, "host runner")
    arts = bk.Artifacts(prov, {"kernel": str(kernel), "image": str(image)})
    monkeypatch.setattr(bk, "prepare", lambda *a, **k: arts)
    code, text = run(out, stage_only=True)
    assert code == 0, text
    assert "stage: 2 run(s) read 2 input file(s), all present" in text
    assert "staged for 2 run(s); nothing run (--stage-only)" in text
    assert not (out / "runs").exists()  # no run directory: the next invocation runs them all
    code, text = run(out)
    assert code == 0 and "to run: 2" in text, text


def test_run_dirs_are_created_just_before_their_run(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "siblings")
    out = tmp_path / "s"
    code, text = run(out, "axes.threads=2,3", jobs=1)
    assert code == 0, text
    seen = sorted(int((d / "siblings").read_text()) for d in (out / "runs").iterdir())
    assert seen == [1, 2, 3, 4]  # run k started when k directories existed, not all 4
    code, text = run(out, "axes.threads=2,3", jobs=1)
    assert code == 0 and "to run: 0; skipped: 4 done" in text  # existing dirs recognised


def test_worker_refuses_done_and_locked_runs(tmp_path: Path, host_backend: None) -> None:
    out = tmp_path / "s"
    assert run(out)[0] == 0
    rd = RunDir(next((out / "runs").iterdir()))
    before = rd.status_file.read_text()
    cmd = [sys.executable, str(ROOT / "run_all.py"), "worker", str(rd.path)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0 and "never rerun" in r.stderr
    assert rd.status_file.read_text() == before
    with rd.lock():
        r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 75 and "another worker" in r.stderr
    # a lock probe (a reconciler's is_locked) held briefly is waited out
    held = threading.Event()

    def probe() -> None:
        with rd.lock():
            held.set()
            time.sleep(0.5)

    t = threading.Thread(target=probe)
    t.start()
    assert held.wait(10)
    assert run_one(rd.path) == 0  # "done; never rerun", not "another worker"
    t.join()
