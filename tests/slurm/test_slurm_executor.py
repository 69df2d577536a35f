"""The Slurm executor against a real local slurmctld + slurmd + munge (conftest.py).

* the quick preset on the qemu backend through `run_all.py --executor slurm`:
  real sbatch job arrays, real QEMU boots inside the jobs, status.json written
  by the workers, job ids and final Slurm states recorded, report written, a
  second invocation submits nothing;
* state mapping with the host backend (the real mix runner on this machine,
  through the worker's test hook) to keep it fast: scancel of a running and
  of a pending array task -> interrupted, Slurm's own time limit -> timeout,
  and a resume after both.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "tests" / "unit"
sys.path.insert(0, str(ROOT))

from analysis.sweep import backends as bk  # noqa: E402
from analysis.sweep import driver as sweep  # noqa: E402
from analysis.sweep import slurm as sl  # noqa: E402
from analysis.sweep.point import Provenance  # noqa: E402
from analysis.sweep.rundir import RunDir  # noqa: E402
from analysis.sweep.spec import load_spec  # noqa: E402


def statuses(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/status.json"))]


def artifacts_built() -> str | None:
    for cmd in (["kernel-patches/kbuild.py", "path"], ["disk-image/build_image.py", "path"]):
        r = subprocess.run([sys.executable, *cmd], cwd=ROOT, capture_output=True, text=True)
        path = Path(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else None
        if r.returncode != 0 or path is None or not path.exists():
            return f"`{' '.join(cmd)}` names nothing built yet"
    return None


def test_quick_preset_on_slurm_with_qemu(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    why = artifacts_built()
    if why:
        pytest.skip(f"SKIPPED slurm/qemu: kernel or image not built ({why})")
    env = {**os.environ, **{k: v for k, v in slurm_cluster.items() if k != "dir"}}
    out = tmp_path / "q"
    cmd = [
        sys.executable,
        str(ROOT / "run_all.py"),
        "--preset",
        "quick",
        "--executor",
        "slurm",
        "--out",
        str(out),
        "--poll",
        "2",
        "--no-build",
    ]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith("backend: qemu")
    assert "submitted array job" in r.stdout
    st = statuses(out)
    assert [s["state"] for s in st] == ["done", "done"]
    for s in st:
        assert s["executor"] == "slurm"
        assert s["slurm"]["job_id"] and s["slurm"]["array_job_id"]
        assert s["host"] == os.uname().nodename
    scripts = list((out / "slurm").glob("*.sh"))
    assert len(scripts) == 1 and "#SBATCH --array=0-1" in scripts[0].read_text()
    assert (out / "report.html").exists()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "to run: 0; skipped: 2 done" in r.stdout
    assert "submitted" not in r.stdout


def test_dry_run_prints_the_script(slurm_cluster: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, **{k: v for k, v in slurm_cluster.items() if k != "dir"}}
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "run_all.py"),
            "--preset",
            "paper",
            "--backend",
            "qemu",
            "--allow-qemu-timing",
            "--executor",
            "slurm",
            "--dry-run",
            "--no-build",
            "--out",
            str(tmp_path / "p"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if "missing prerequisite" in r.stdout:
        pytest.skip(f"SKIPPED slurm/dry-run: {r.stdout.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "#SBATCH --array=0-255" in r.stdout and "#SBATCH --array=0-127" in r.stdout
    assert "#SBATCH --mem=24576M" in r.stdout and "#SBATCH --time=7-00:05:00" in r.stdout
    assert not (tmp_path / "p").exists()


# --------------------------------------------------------------- state mapping
@pytest.fixture
def host_slurm(
    slurm_cluster: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for k, v in slurm_cluster.items():
        if k != "dir":
            monkeypatch.setenv(k, v)
    monkeypatch.setenv("NUMA_LB_TEST_RUNNER", "test_sweep_local:host_runner")
    monkeypatch.setenv("PYTHONPATH", f"{UNIT}:{ROOT}")
    # the host runner reads neither; the stage step before sbatch checks they exist
    paths = {"kernel": str(tmp_path / "bzImage"), "image": str(tmp_path / "rootfs.img")}
    for p in paths.values():
        Path(p).write_text("placeholder: the host runner never reads it\n")

    def prepare(
        backend: str, variant: str, build: bool, gem5_flag: str | None, require: bool = True,
        **kw: Any,
    ) -> bk.Artifacts:  # fmt: skip
        prov = Provenance(backend, "kernel-test", "image-test", {"configs": "t"}, "host runner")
        return bk.Artifacts(prov, dict(paths))

    monkeypatch.setattr(bk, "prepare", prepare)


def drive(out: Path, *overrides: str, **opts: Any) -> tuple[int, str]:
    spec = load_spec(preset="quick", overrides=list(overrides))
    buf = io.StringIO()
    code = sweep.run_sweep(
        spec, sweep.Options(out=out, executor="slurm", poll_s=1.0, stream=buf, **opts)
    )
    return code, buf.getvalue()


def wait_for(pred: Any, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_scancel_running_and_pending_map_to_interrupted_then_resume(
    host_slurm: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "hang")
    out = tmp_path / "c"
    # one task at a time: the excl run hangs while running, default never starts
    code, text = drive(
        out,
        "axes.policy=excl,default",
        "resources.max_parallel=1",
        "resources.cpus_per_run=1",
        wait=False,
    )
    assert code == 0, text
    st = statuses(out)
    array = {s["slurm"]["array_job_id"] for s in st}
    assert len(array) == 1
    wait_for(lambda: any(s["state"] == "running" for s in statuses(out)), 60, "a running task")
    subprocess.run(["scancel", array.pop()], check=True)
    runs = [RunDir(p) for p in sorted((out / "runs").iterdir())]
    sl.SlurmExecutor(out, "quick", None, None, None, []).wait(runs, poll_s=1.0, timeout_s=120)
    st = statuses(out)
    assert [s["state"] for s in st] == ["interrupted", "interrupted"]
    by = {s["slurm"]["state"] for s in st}
    assert by == {"CANCELLED"}
    # the never-started one was mapped by the reconciler; the running one by its worker
    errors = sorted(s["error"] for s in st)
    assert any("interrupted by SIGTERM" in e for e in errors)
    assert any("ended CANCELLED" in e for e in errors)
    monkeypatch.setenv("FAKE_MODE", "ok")
    code, text = drive(
        out, "axes.policy=excl,default", "resources.max_parallel=1", "resources.cpus_per_run=1"
    )
    assert code == 0, text
    assert [s["state"] for s in statuses(out)] == ["done", "done"]


def test_slurm_time_limit_maps_to_timeout(
    host_slurm: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "hang")
    monkeypatch.setenv("NUMA_LB_TIMEOUT_GRACE_S", "600")  # the worker must not stop first
    monkeypatch.setattr(sl, "SLURM_MARGIN_S", 0)
    out = tmp_path / "t"
    code, text = drive(
        out, "axes.policy=excl", 'resources.time_limit="1m"', "resources.cpus_per_run=1"
    )
    assert code == 1, text
    (s,) = statuses(out)
    assert s["state"] == "timeout", s
    assert s["slurm"]["state"] == "TIMEOUT"
    assert "time limit" in s["error"].lower()
