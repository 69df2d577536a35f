"""The guest init and the policy daemons: the init starts the daemon its job's
policy names and, on QEMU, the daemon refuses before any program starts, with
the one-line reason in status.json (the init run as an ordinary process with
--host on the files make install stages, as tests/unit/test_disk_image_init.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "disk-image"))
sys.path.insert(0, str(ROOT / "daemons"))

import build_image  # noqa: E402
import counters  # noqa: E402
import numa_lb_daemon  # noqa: E402
import qemu_boot  # noqa: E402

init = qemu_boot.init
sys.path.insert(0, str(ROOT / "disk-image" / "init"))
sys.path.insert(0, str(ROOT / "workloads"))
import init_run  # noqa: E402
import mix_job  # noqa: E402

from analysis.results import daemons as results_daemons  # noqa: E402


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("stage")
    root = build_image.stage_files(tmp, {"kind": "numa-lb-test"})
    return root / "opt" / "numa-lb"


def test_the_image_has_the_daemons(prefix: Path) -> None:
    for name in ("numa_lb_daemon.py", "counters.py", "daemon_proc.py", "policy_imar.py",
                 "policy_devil.py", "policy_plb.py"):  # fmt: skip
        assert (prefix / "bin" / name).is_file(), name
    assert (prefix / "lib" / "libnlbctr.so").is_file()
    keys = build_image.input_files()
    assert "daemons/nlbctr.c" in keys and "daemons/numa_lb_daemon.py" in keys


def test_one_vocabulary() -> None:
    assert init_run.DAEMON_POLICIES == numa_lb_daemon.POLICIES == mix_job.DAEMON_POLICIES
    assert results_daemons.DAEMON_POLICIES == numa_lb_daemon.POLICIES


def test_the_job_format_takes_daemon_policies() -> None:
    prog = [{"workload": "leader_ft"}]
    job = mix_job.load_job({"policy": "imar2", "programs": prog,
                            "daemon_params": {"interval_min_s": 0.001}})  # fmt: skip
    # the kernel runs its stock selection; the init starts the daemon
    assert job["policy"] == "default" and job["policy_requested"] == "imar2"
    assert job["daemon_params"] == {"interval_min_s": 0.001}
    assert mix_job.load_job({"policy": "plb", "programs": prog})["daemon_params"] is None
    with pytest.raises(mix_job.JobError, match="policy 'excl' has no daemon"):
        mix_job.load_job({"policy": "excl", "programs": prog, "daemon_params": {}})
    with pytest.raises(mix_job.JobError, match="daemon_params"):
        mix_job.load_job({"policy": "plb", "programs": prog, "daemon_params": [1]})


def test_daemon_argv() -> None:
    job = {"policy": "imar2", "seed": 3, "daemon_params": {"interval_min_s": 0.001}}
    argv = init_run.daemon_argv("/usr/bin/python3", "/opt/numa-lb", job, "/run/out", "gem5", True)
    assert argv == [
        "/usr/bin/python3", "/opt/numa-lb/bin/numa_lb_daemon.py", "imar2",
        "--log", "/run/out/daemon-imar2.jsonl", "--parent-from-stdin", "--backend", "gem5",
        "--params", '{"interval_min_s": 0.001}', "--seed", "3", "--m5-addr", "0xFFFF0000",
    ]  # fmt: skip
    # a job with the guest's switch marks on: the daemon decides from per-task counts
    marks = init_run.daemon_argv("p", "/x", dict(job, switch_marks=True), "/o", "gem5", False)
    assert marks[-1] == "--switch-marks" and "--switch-marks" not in argv
    with pytest.raises(init.JobError, match="daemon_params must be a JSON object"):
        init_run.daemon_argv("p", "/x", {"policy": "plb", "daemon_params": [1]}, "/o", "gem5", 0)


@pytest.mark.parametrize("policy", ["imar", "devil"])
def test_qemu_refuses_a_counter_policy_before_the_mix(
    prefix: Path, tmp_path: Path, policy: str
) -> None:
    job = {"run_id": "q", "policy": policy, "timeout_s": 60,
           "programs": [{"name": "lft", "workload": "leader_ft", "threads": 2,
                         "args": ["--size=1M", "--iters=1"]}]}  # fmt: skip
    data = init.pack_job(job, {"watchdog_s": 90})
    jd = tmp_path / "job.img"
    jd.write_bytes(data + bytes(-len(data) % 65536))
    rd = tmp_path / "res.img"
    rd.write_bytes(init.blank_results(1 << 20))
    import subprocess  # noqa: PLC0415

    p = subprocess.run(
        [sys.executable, str(build_image.INIT), "--host", "--prefix", str(prefix),
         "--rundir", str(tmp_path / "run"), "--disk", str(rd), "--disk", str(jd),
         "--disk-wait", "1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 1, p.stdout + p.stderr
    with open(rd, "rb") as f:
        files = init.read_results(f)
    st = json.loads(files["status.json"])
    assert st["backend"] == "qemu" and st["status"] == "invalid-job"
    assert st["error"] == f"daemon {policy} (exit 3): numa-lb-daemon: policy {policy} cannot " \
        f"run here: {counters.QEMU_REFUSAL}"  # fmt: skip
    assert st["mixrunner_exit"] is None and "results.jsonl" not in files  # nothing ran
    log = json.loads(files[f"daemon-{policy}.jsonl"].decode().splitlines()[0])
    assert log["type"] == "error" and log["fatal"]
