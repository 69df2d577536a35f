"""Unit tests for workloads/mixrunner.py: job parsing, formatting helpers, and
real small runs on this host (as a normal process).

The host kernel has no kernel.sched_numa_lb_policy, so the real-/proc run
checks that the runner records it as absent and carries on. Writes to
sysctls are only ever made into a fake /proc/sys tree under tmp_path: a test
must never change the host's numa_balancing.
"""

from __future__ import annotations

import json
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
sys.path.insert(0, str(WL))
import mixrunner as mr  # noqa: E402

# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def bindir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None or shutil.which("make") is None:
        pytest.skip("SKIPPED unit-c: gcc/make not found")
    out = tmp_path_factory.mktemp("mixbin")
    p = subprocess.run(
        ["make", "-C", str(WL / "src"), f"O={out}"], capture_output=True, text=True, timeout=180
    )
    assert p.returncode == 0, p.stderr
    return out


@pytest.fixture()
def fake_sysctl(tmp_path: Path) -> Path:
    root = tmp_path / "sys"
    (root / "kernel").mkdir(parents=True)
    (root / "kernel" / "sched_numa_lb_policy").write_text("default\n")
    (root / "kernel" / "numa_balancing").write_text("0\n")
    return root


def records(outdir: Path) -> list[dict[str, Any]]:
    lines = (outdir / "results.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines]


def by_type(recs: list[dict[str, Any]], t: str) -> list[dict[str, Any]]:
    return [r for r in recs if r["type"] == t]


def small_job(**kw: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "run_id": "unit",
        "sample_interval_s": 0.01,
        "timeout_s": 60,
        "programs": [
            {
                "name": "lft",
                "workload": "leader_ft",
                "threads": 2,
                # the sleeps keep the workers alive >= 160 ms however fast
                # the host, so the 10 ms sampler sees them even under load (a
                # 43 ms run was missed on a loaded host, 2026-11-24)
                "args": ["--size=4M", "--iters=40", "--sleep-us=2000"],
            },
            {
                "name": "mc",
                "workload": "master_clients",
                "threads": 2,
                "args": ["--size=2M", "--iters=400"],  # ~170 ms on an idle host
            },
        ],
    }
    job.update(kw)
    return job


# ------------------------------------------------------------- job parsing


def test_load_job_defaults() -> None:
    j = mr.load_job({"programs": [{"workload": "leader_ft"}]})
    assert j["policy"] is None and j["numa_balancing"] is None
    assert j["pinning"] == "free" and j["pin_threads"] is True
    assert j["strict_policy"] is False and j["restore_sysctls"] is True
    p = j["programs"][0]
    assert p["name"] == "0-leader_ft" and p["threads"] == 1 and p["args"] == []
    assert j["parsec"] == {
        "root": "/home/gem5/parsec-benchmark",
        "config": "gcc-hooks",
        "launcher": "parsecmgmt",
    }


def test_autonuma_is_default_plus_numa_balancing() -> None:
    j = mr.load_job({"policy": "autonuma", "programs": [{"cmd": ["true"]}]})
    assert (j["policy"], j["numa_balancing"], j["policy_requested"]) == ("default", 1, "autonuma")
    with pytest.raises(mr.JobError):
        mr.load_job({"policy": "autonuma", "numa_balancing": 0, "programs": [{"cmd": ["x"]}]})


def test_parsec_program_normalised() -> None:
    j = mr.load_job({"programs": [{"parsec": "fmm", "threads": 8}]})
    p = j["programs"][0]
    assert p["parsec"] == "splash2x.fmm" and p["input"] == "simsmall"
    assert p["name"] == "0-splash2x.fmm"


@pytest.mark.parametrize(
    "job",
    [
        [],
        {},
        {"programs": []},
        {"programs": [{"workload": "nope"}]},
        {"programs": [{"workload": "leader_ft", "cmd": ["x"]}]},
        {"programs": [{"cmd": []}]},
        {"programs": [{"cmd": ["x"], "threads": 0}]},
        {"programs": [{"cmd": ["x"], "threads": True}]},
        {"programs": [{"cmd": ["x"], "args": [1]}]},
        {"programs": [{"cmd": ["x"], "colour": "red"}]},
        {"programs": [{"cmd": ["x"], "name": "a b"}]},
        {"programs": [{"cmd": ["x"], "name": "a"}, {"cmd": ["y"], "name": "a"}]},
        {"programs": [{"parsec": "raytrace"}]},
        {"programs": [{"parsec": "canneal", "input": "huge"}]},
        {"programs": [{"parsec": "canneal", "args": ["-x"]}]},
        {"programs": [{"cmd": ["x"]}], "pinning": "sideways"},
        {"programs": [{"cmd": ["x"]}], "numa_balancing": 2},
        {"programs": [{"cmd": ["x"]}], "policy": "MB; rm -rf /"},
        {"programs": [{"cmd": ["x"]}], "sample_interval_s": 0},
        {"programs": [{"cmd": ["x"]}], "timeout_s": -1},
        {"programs": [{"cmd": ["x"]}], "schema": 2},
        {"programs": [{"cmd": ["x"]}], "surprise": 1},
        {"programs": [{"cmd": ["x"]}], "parsec": {"launcher": "magic"}},
    ],
)
def test_bad_jobs_rejected(job: Any) -> None:
    with pytest.raises(mr.JobError):
        mr.load_job(job)


def test_cli_invalid_job_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = subprocess.run(
        [sys.executable, str(WL / "mixrunner.py"), str(bad), "--outdir", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert p.returncode == 2 and "invalid job" in p.stderr
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- parsing


def test_parse_list_and_topology(tmp_path: Path) -> None:
    assert mr.parse_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert mr.parse_list("") == []
    base = tmp_path / "devices/system/node"
    for n, cpus in ((0, "0-1"), (1, "2-3"), (2, "")):
        (base / f"node{n}").mkdir(parents=True)
        (base / f"node{n}" / "cpulist").write_text(cpus + "\n")
        (base / f"node{n}" / "numastat").write_text(f"numa_hit {100 + n}\nnuma_miss {n}\n")
    (base / "online").write_text("0-2\n")
    assert mr.node_cpus(str(tmp_path)) == {0: [0, 1], 1: [2, 3], 2: []}
    ns = mr.numastat(str(tmp_path))
    assert ns["1"] == {"numa_hit": 101, "numa_miss": 1}


def test_parse_kv_and_delta() -> None:
    a = mr.parse_kv_numbers("nr_free 10\npgmigrate_success 3\nbogus line here\n")
    b = mr.parse_kv_numbers("nr_free 7\npgmigrate_success 9\nnew_key 1\n")
    assert a == {"nr_free": 10, "pgmigrate_success": 3}
    assert mr.delta(a, b) == {"nr_free": -3, "pgmigrate_success": 6}
    assert mr.delta({"0": a}, {"0": b}) == {"0": {"nr_free": -3, "pgmigrate_success": 6}}
    assert mr.delta([1, 2], [4, 6]) == [3, 4]
    assert mr.delta("x", "y") is None


def test_parse_lb_stats_formats() -> None:
    assert mr.parse_lb_stats(None) is None
    # key: value lines
    kv = mr.parse_lb_stats("attempts: 12\nevaluated 40\nselect_ns: 999\n")
    assert kv == {"attempts": 12, "evaluated": 40, "select_ns": 999}
    # a table: header of column names, one row per policy
    table = mr.parse_lb_stats("policy attempts evaluated migrated\ndefault 5 9 3\nmb 7 11 4\n")
    assert table == {
        "default": {"attempts": 5, "evaluated": 9, "migrated": 3},
        "mb": {"attempts": 7, "evaluated": 11, "migrated": 4},
    }
    # rows without a header
    rows = mr.parse_lb_stats("default 1 2 3\nmb 4 5 6\n")
    assert rows == {"default": [1, 2, 3], "mb": [4, 5, 6]}
    after = mr.parse_lb_stats("policy attempts evaluated migrated\ndefault 6 9 5\nmb 7 20 4\n")
    assert mr.delta(table, after) == {
        "default": {"attempts": 1, "evaluated": 0, "migrated": 2},
        "mb": {"attempts": 0, "evaluated": 9, "migrated": 0},
    }


def test_workload_result_and_roi() -> None:
    out = 'noise\n{"workload":"leader_ft","verified":true}\n{"other":1}\ntrailer\n'
    assert mr.workload_result(out) == {"workload": "leader_ft", "verified": True}
    assert mr.workload_result("nothing here") is None
    m = mr._ROI_RE.findall("[HOOKS] Entering ROI\n[HOOKS] Total time spent in ROI: 12.345s\n")
    assert m == ["12.345"]


def test_read_stat_handles_odd_comm(tmp_path: Path) -> None:
    f = tmp_path / "stat"
    fields = " ".join(str(i) for i in range(3, 53))
    f.write_text(f"42 (we ird) name)) R {fields}\n")
    st = mr.read_stat(str(f))
    assert st is not None
    comm, rest = st
    assert comm == "we ird) name)"
    assert rest[0] == "R"
    assert rest[mr.F_PROCESSOR] == "38"  # field 39 of proc(5), value i-1 here
    assert rest[mr.F_MINFLT] == "9" and rest[mr.F_NUM_THREADS] == "19"


# ----------------------------------------------------------- sysctl writes


def test_set_sysctl_fake_root(fake_sysctl: Path) -> None:
    r = mr.set_sysctl(str(fake_sysctl), mr.POLICY_SYSCTL, "mb")
    assert r["status"] == "set" and r["before"] == "default" and r["in_force"] == "mb"
    assert (fake_sysctl / "kernel/sched_numa_lb_policy").read_text() == "mb\n"
    r = mr.set_sysctl(str(fake_sysctl), mr.NUMAB_SYSCTL, None)
    assert r["status"] == "untouched" and r["in_force"] == "0"
    r = mr.set_sysctl(str(fake_sysctl), "kernel/not_there", "1")
    assert r["status"] == "absent" and r["in_force"] is None
    (fake_sysctl / "kernel/dir_not_file").mkdir()
    r = mr.set_sysctl(str(fake_sysctl), "kernel/dir_not_file", "1")
    assert r["status"] == "error" and "IsADirectoryError" in r["error"]


# ----------------------------------------------------------------- pinning


def test_pin_prefix_scenarios() -> None:
    nodes = [0, 1, 2, 3]
    assert mr.pin_prefix("free", 2, nodes, True) == ([], {"scenario": "free", "cpu_node": None,
                                                          "mem": None})  # fmt: skip
    pre, info = mr.pin_prefix("direct", 2, nodes, True)
    assert pre == ["numactl", "--cpunodebind=2", "--preferred=2"] and info["mem"] == 2
    pre, _ = mr.pin_prefix("interleave", 1, nodes, True)
    assert pre == ["numactl", "--cpunodebind=1", "--interleave=all"]
    # crossed as in [Lorenzo18]: 0<->1, 2<->3
    assert [mr.pin_prefix("crossed", n, nodes, True)[1]["mem"] for n in nodes] == [1, 0, 3, 2]
    pre, info = mr.pin_prefix("direct", 3, nodes, False)  # memory only ("OS" variant)
    assert pre == ["numactl", "--preferred=3"] and info["cpu_node"] is None
    _, info = mr.pin_prefix("crossed", 0, [0], True)
    assert info["mem"] == 0 and "only one node" in info["note"]
    assert mr.pin_prefix("crossed", 2, [0, 1, 2], True)[1]["mem"] == 0  # odd count wraps


def test_dry_run_parsec_plan_with_pinning(tmp_path: Path) -> None:
    if shutil.which("numactl") is None:
        pytest.skip("SKIPPED mixrunner-pinning: numactl not installed")
    job = {
        "pinning": "direct",
        "parsec": {"root": "/opt/parsec", "config": "gcc-pthreads"},
        "programs": [
            {"parsec": "canneal", "threads": 4, "input": "simlarge", "node": 0},
            {"parsec": "freqmine", "threads": 2},
        ],
    }
    jf = tmp_path / "job.json"
    jf.write_text(json.dumps(job))
    p = subprocess.run(
        [sys.executable, str(WL / "mixrunner.py"), str(jf), "--dry-run"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    plans = [json.loads(x) for x in p.stdout.splitlines()]
    assert plans[0]["argv"] == [
        "numactl", "--cpunodebind=0", "--preferred=0",
        "/opt/parsec/bin/parsecmgmt", "-a", "run", "-p", "parsec.canneal",
        "-c", "gcc-pthreads", "-i", "simlarge", "-n", "4",
    ]  # fmt: skip
    assert plans[0]["parsec"]["allocation"] == "leader"
    assert plans[1]["parsec"]["package"] == "parsec.freqmine"
    assert plans[1]["placement"]["scenario"] == "direct"


# --------------------------------------------------------------- real runs


def test_run_two_synthetic_workloads_fake_sysctls(
    bindir: Path, fake_sysctl: Path, tmp_path: Path
) -> None:
    lb = tmp_path / "lbstats"
    lb.write_text("policy attempts migrated\ndefault 0 0\nmb 3 1\n")
    out = tmp_path / "out"
    job = mr.load_job(small_job(policy="mb", numa_balancing=1))
    rc = mr.run_mix(job, str(out), str(fake_sysctl), str(lb), bin_dirs=[str(bindir)])
    recs = records(out)
    assert rc == 0, recs[-1]
    run, end = by_type(recs, "run")[0], by_type(recs, "run_end")[0]
    assert recs[0]["type"] == "run" and recs[-1]["type"] == "run_end"

    # policy and numa_balancing: written, read back, then restored
    assert run["policy"]["status"] == "set" and run["policy"]["in_force"] == "mb"
    assert run["numa_balancing"]["in_force"] == "1"
    assert end["policy_at_end"] == "mb"
    assert end["sysctls_restored"] == {
        "kernel.sched_numa_lb_policy": "set",
        "kernel.numa_balancing": "set",
    }
    assert (fake_sysctl / "kernel/sched_numa_lb_policy").read_text() == "default\n"
    assert run["kernel"]["release"] == os.uname().release

    progs = by_type(recs, "program")
    assert [p["name"] for p in progs] == ["lft", "mc"]
    for p in progs:
        assert p["exit_code"] == 0 and p["signal"] is None and not p["timed_out"]
        assert p["elapsed_s"] > 0 and p["rusage"]["minflt"] > 0
        assert p["result"]["verified"] is True and p["result"]["threads"] == 2
        assert p["threads_max"] == 3  # main + 2 workers, seen from outside
        assert (out / p["stdout"]).exists()

    tgs = by_type(recs, "thread_group")
    assert {t["program"] for t in tgs} == {"lft", "mc"}
    for t in tgs:
        assert t["root"] and t["samples"] >= 1
        assert t["migrations_sampled"] >= 0 and t["cross_node_migrations_sampled"] >= 0
        assert t["nr_migrations"] is None or t["nr_migrations"] >= 0
        assert t["minflt"] > 0 and t["tasks_seen"] >= 1
        assert sum(t["node_samples"].values()) >= t["samples"]

    assert end["status"] == "ok" and end["errors"] == []
    assert end["elapsed_s"] >= max(p["elapsed_s"] for p in progs)
    assert isinstance(end["vmstat_delta"], dict) and "pgfault" in end["vmstat_delta"]
    assert end["vmstat_delta"]["pgfault"] > 0
    lbr = end["sched_numa_lb_stats"]
    assert lbr["status"] == "present" and lbr["before"]["mb"] == {"attempts": 3, "migrated": 1}
    assert lbr["delta"]["mb"] == {"attempts": 0, "migrated": 0}


def test_run_on_real_proc_policy_absent(bindir: Path, tmp_path: Path) -> None:
    if os.path.exists("/proc/sys/kernel/sched_numa_lb_policy"):
        pytest.skip("SKIPPED policy-absent: this kernel has the policy sysctl")
    out = tmp_path / "out"
    # numa_balancing left unset: the host's value must not be touched
    job = mr.load_job(small_job(policy="excl"))
    before = Path("/proc/sys/kernel/numa_balancing").read_text()
    rc = mr.run_mix(job, str(out), bin_dirs=[str(bindir)])
    recs = records(out)
    assert rc == 0, recs[-1]
    run, end = recs[0], recs[-1]
    assert run["policy"]["status"] == "absent" and run["policy"]["in_force"] is None
    assert run["policy"]["requested"] == "excl"
    assert run["numa_balancing"]["status"] in ("untouched", "absent")
    assert end["sched_numa_lb_stats"]["status"] == "absent"
    assert end["status"] == "ok" and end["policy_at_end"] is None
    assert Path("/proc/sys/kernel/numa_balancing").read_text() == before
    assert len(by_type(recs, "program")) == 2


def test_strict_policy_absent_fails_without_running(bindir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    job = mr.load_job(small_job(policy="mb", strict_policy=True))
    rc = mr.run_mix(job, str(out), str(tmp_path / "nosys"), bin_dirs=[str(bindir)])
    recs = records(out)
    assert rc == 1
    assert [r["type"] for r in recs] == ["run", "run_end"]
    assert recs[-1]["status"] == "failed" and "strict_policy" in recs[-1]["errors"][0]


def test_rejected_policy_is_an_error(bindir: Path, fake_sysctl: Path, tmp_path: Path) -> None:
    # a policy file the runner cannot write (a directory here, EINVAL on the
    # real kernel) must stop the run: results under the wrong policy are worse
    # than no results
    pol = fake_sysctl / "kernel/sched_numa_lb_policy"
    pol.unlink()
    pol.mkdir()
    out = tmp_path / "out"
    rc = mr.run_mix(mr.load_job(small_job(policy="mb")), str(out), str(fake_sysctl),
                    bin_dirs=[str(bindir)])  # fmt: skip
    recs = records(out)
    assert rc == 1 and recs[-1]["status"] == "failed"
    assert not by_type(recs, "program")


def test_stock_writes_no_policy_and_refuses_a_patched_kernel(
    bindir: Path, fake_sysctl: Path, tmp_path: Path
) -> None:
    j = mr.load_job(small_job(policy="stock", numa_balancing=0))
    assert (j["policy"], j["policy_requested"]) == (None, "stock")
    # the patched kernel booted where the stock one was asked for: no results
    out = tmp_path / "patched"
    rc = mr.run_mix(j, str(out), str(fake_sysctl), bin_dirs=[str(bindir)])
    recs = records(out)
    assert rc == 1 and recs[-1]["status"] == "failed" and not by_type(recs, "program")
    assert "policy stock needs the unmodified kernel" in recs[-1]["errors"][0]
    assert (fake_sysctl / "kernel/sched_numa_lb_policy").read_text() == "default\n"
    # the stock kernel has no policy sysctl: the mix runs
    (fake_sysctl / "kernel/sched_numa_lb_policy").unlink()
    out = tmp_path / "stock"
    rc = mr.run_mix(j, str(out), str(fake_sysctl), bin_dirs=[str(bindir)])
    recs = records(out)
    assert rc == 0, recs[-1]
    assert recs[0]["policy"]["status"] == "absent"
    assert recs[0]["policy"]["requested_name"] == "stock"
    assert len(by_type(recs, "program")) == 2


def test_failures_and_timeout(tmp_path: Path, fake_sysctl: Path) -> None:
    job = mr.load_job(
        {
            "timeout_s": 3.0,  # generous: the CI machine is shared with builds
            "sample_interval_s": 0.05,
            "programs": [
                {"name": "fails", "cmd": ["/bin/sh", "-c", "echo oops >&2; exit 3"]},
                {"name": "hangs", "cmd": ["/bin/sh", "-c", "sleep 30"]},
                {"name": "ok", "cmd": ["/bin/sh", "-c", "sleep 0.2; echo done"]},
            ],
        }
    )
    out = tmp_path / "out"
    rc = mr.run_mix(job, str(out), str(fake_sysctl))
    recs = records(out)
    assert rc == 1
    progs = {p["name"]: p for p in by_type(recs, "program")}
    assert progs["fails"]["exit_code"] == 3
    assert (out / progs["fails"]["stderr"]).read_text() == "oops\n"
    assert progs["hangs"]["timed_out"] and progs["hangs"]["signal"] == 9
    assert progs["ok"]["exit_code"] == 0 and 0.15 < progs["ok"]["elapsed_s"] < 3.0
    assert (out / progs["ok"]["stdout"]).read_text() == "done\n"
    end = recs[-1]
    assert end["timed_out"] and sorted(end["programs_failed"]) == ["fails", "hangs"]
    assert 3.0 <= end["elapsed_s"] < 15
    # the shell's child (sleep) is a thread group of its own, found via children
    assert any(t["comm"] == "sleep" and not t["root"] for t in by_type(recs, "thread_group"))


def test_missing_binary_fails_cleanly(tmp_path: Path, fake_sysctl: Path) -> None:
    out = tmp_path / "out"
    rc = mr.run_mix(mr.load_job(small_job()), str(out), str(fake_sysctl),
                    bin_dirs=[str(tmp_path / "empty")])  # fmt: skip
    recs = records(out)
    assert rc == 1 and "not found" in recs[-1]["errors"][0]


def test_cli_end_to_end(bindir: Path, tmp_path: Path, fake_sysctl: Path) -> None:
    jf = tmp_path / "job.json"
    jf.write_text(json.dumps(small_job(policy="tm")))
    out = tmp_path / "out"
    p = subprocess.run(
        [sys.executable, str(WL / "mixrunner.py"), str(jf), "--outdir", str(out),
         "--sysctl-root", str(fake_sysctl), "--bin-dir", str(bindir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    recs = records(out)
    assert recs[0]["policy"]["in_force"] == "tm"
    assert recs[-1]["status"] == "ok"


def test_runs_under_python36(tmp_path: Path, fake_sysctl: Path) -> None:
    """The x86-parsec image is Ubuntu 18.04: the runner must work on Python 3.6."""
    from test_mix_catalog import python36

    py36 = python36()
    if py36 is None:
        pytest.skip("SKIPPED py36-run: no Python 3.6 interpreter on this host")
    jf = tmp_path / "job.json"
    jf.write_text(json.dumps({"policy": "mb", "programs": [{"cmd": ["/bin/sh", "-c", "exit 0"]}]}))
    out = tmp_path / "out"
    p = subprocess.run(
        [py36, str(WL / "mixrunner.py"), str(jf), "--outdir", str(out),
         "--sysctl-root", str(fake_sysctl)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    recs = records(out)
    assert recs[0]["python"].startswith("3.6") and recs[-1]["status"] == "ok"


def fake_m5(tmp_path: Path) -> tuple[Path, Path]:
    """An m5 stand-in that logs its arguments and the time of each call."""
    log = tmp_path / "roi.log"
    m5 = tmp_path / "m5"
    m5.write_text(f'#!/bin/sh\necho "$* $(date +%s.%N)" >> {log}\n')
    m5.chmod(0o755)
    return m5, log


def test_roi_brackets_only_the_programs(tmp_path: Path) -> None:
    """--roi: workbegin right before the gate opens, workend after the last reap."""
    m5, log = fake_m5(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    job = mr.load_job(
        {"run_id": "roi", "programs": [{"name": "s", "cmd": ["sh", "-c", "sleep 0.3"]}]}
    )
    out = tmp_path / "out"
    rc = mr.run_mix(job, str(out), str(tmp_path / "nosys"), bin_dirs=[str(bindir)],
                    roi=[str(m5), "--addr", "7"])  # fmt: skip
    calls = [ln.split() for ln in log.read_text().splitlines()]
    assert [c[:4] for c in calls] == [["--addr", "workbegin", "7", "0"],
                                      ["--addr", "workend", "7", "0"]]  # fmt: skip
    assert float(calls[1][4]) - float(calls[0][4]) >= 0.3  # the program ran in between
    end = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()][-1]
    assert end["type"] == "run_end" and end["roi"] == {"warmup": None, "begin": 0, "end": 0}
    assert rc in (0, 1)


def test_run_end_stamps_split_the_time_after_the_roi(tmp_path: Path) -> None:
    """run_end.monotonic_s: where a gem5 run's post-ROI (hand-back) guest time goes."""
    m5, _ = fake_m5(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    job = mr.load_job(
        {"run_id": "stamps", "programs": [{"name": "s", "cmd": ["sh", "-c", "sleep 0.2"]}]}
    )
    out = tmp_path / "out"
    before = time.monotonic()
    mr.run_mix(job, str(out), str(tmp_path / "nosys"), bin_dirs=[str(bindir)],
               roi=[str(m5), "7"])  # fmt: skip
    after = time.monotonic()
    end = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()][-1]
    st = end["monotonic_s"]
    order = ["release", "reaped", "workend", "records_completed", "counters_read", "restored",
             "record"]  # fmt: skip
    assert sorted(st) == sorted(order)
    assert [st[k] for k in order] == sorted(st[k] for k in order)
    assert before <= st["release"] and st["record"] <= after  # CLOCK_MONOTONIC, as the init's
    assert st["reaped"] - st["release"] == pytest.approx(end["elapsed_s"], abs=1e-5)
    assert st["reaped"] - st["release"] >= 0.2


def test_a_warm_up_moves_to_the_roi_cpu_before_the_programs_start(tmp_path: Path) -> None:
    """warmup_s > 0: work item 4 before the forks, then warmup_s, then the ROI."""
    m5, log = fake_m5(tmp_path)
    job = mr.load_job(
        {"run_id": "w", "warmup_s": 0.25,
         "programs": [{"name": "s", "cmd": ["sh", "-c", "sleep 0.1"]}]}
    )  # fmt: skip
    out = tmp_path / "out"
    mr.run_mix(job, str(out), str(tmp_path / "nosys"), bin_dirs=[str(tmp_path)],
               roi=[str(m5), "1"])  # fmt: skip
    calls = [ln.split() for ln in log.read_text().splitlines()]
    assert [c[:3] for c in calls] == [["workbegin", "4", "0"], ["workbegin", "1", "0"],
                                      ["workend", "1", "0"]]  # fmt: skip
    assert float(calls[1][3]) - float(calls[0][3]) >= 0.25  # the warm-up interval
    end = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()][-1]
    assert end["roi"] == {"warmup": 0, "begin": 0, "end": 0}


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.1", True])
def test_a_bad_warm_up_is_refused(bad: object) -> None:
    with pytest.raises(mr.JobError, match="warmup_s"):
        mr.load_job({"run_id": "w", "warmup_s": bad, "programs": []})


def test_programs_start_without_a_shell_and_a_seed_varies_the_start(
    bindir: Path, fake_sysctl: Path, tmp_path: Path
) -> None:
    """The sampled pid is the workload's from the first sample (no 'sh' wrapper),
    and a repeat's seed sets the pre-ROI delay, per-program offsets and data seeds."""
    from mix_run import PRE_GATE_MAX_S, START_OFFSET_MAX_S, start_jitter  # noqa: PLC0415

    a, b = start_jitter(7, [0, 1]), start_jitter(7, [0, 1])
    assert a == b and a != start_jitter(8, [0, 1])  # reproducible, and per seed
    assert 0 <= a["pre_gate_s"] <= PRE_GATE_MAX_S
    assert all(0 <= v <= START_OFFSET_MAX_S for v in a["offsets_s"].values())
    assert start_jitter(None, [0, 1]) == {"seed": None, "pre_gate_s": 0.0,
                                         "offsets_s": {0: 0.0, 1: 0.0}}  # fmt: skip

    out = tmp_path / "out"
    job = mr.load_job(small_job(seed=7))
    rc = mr.run_mix(job, str(out), str(fake_sysctl), str(tmp_path / "nolb"),
                    bin_dirs=[str(bindir)])  # fmt: skip
    recs = records(out)
    assert rc == 0, recs[-1]
    end = by_type(recs, "run_end")[0]
    assert end["start_jitter"]["seed"] == 7
    assert end["start_jitter"]["offsets_s"] == {str(k): v for k, v in a["offsets_s"].items()}
    progs = by_type(recs, "program")
    for i, p in enumerate(progs):
        assert p["argv"][-2:] == ["--seed", str(7 * 1000 + i)]
        assert p["result"]["seed"] == 7 * 1000 + i  # the workload saw it
        assert p["start_offset_s"] == a["offsets_s"][i]
    for t in by_type(recs, "thread_group"):
        assert t["comm"] in ("leader_ft", "master_clients"), t["comm"]  # never "sh"
    with pytest.raises(mr.JobError, match="seed"):
        mr.load_job(small_job(seed=-1))


def test_a_program_that_cannot_be_executed_exits_127(fake_sysctl: Path, tmp_path: Path) -> None:
    job = mr.load_job({"run_id": "x", "timeout_s": 30, "programs": [
        {"name": "nope", "cmd": ["/nonexistent/program"]},
        {"name": "ok", "cmd": ["true"]},
    ]})  # fmt: skip
    rc = mr.run_mix(job, str(tmp_path / "o"), str(fake_sysctl), str(tmp_path / "nolb"))
    progs = {p["name"]: p for p in by_type(records(tmp_path / "o"), "program")}
    assert progs["nope"]["exit_code"] == 127 and progs["ok"]["exit_code"] == 0
    err = (tmp_path / "o" / progs["nope"]["stderr"]).read_text()
    assert "mix-gate: /nonexistent/program" in err
    assert rc != 0


def fake_domains(root: Path, cpus: int = 2) -> Path:
    """A /sys tree with the 6.1 debugfs layout: cpuN/domain0 = MC, domain1 = NUMA."""
    for c in range(cpus):
        for d, (name, interval) in enumerate((("MC", 2), ("NUMA", 8))):
            dd = root / "kernel/debug/sched/domains" / f"cpu{c}" / f"domain{d}"
            dd.mkdir(parents=True)
            (dd / "name").write_text(name + "\n")
            for knob, v in (
                ("busy_factor", 16),
                ("min_interval", interval),
                ("max_interval", 2 * interval),
                ("imbalance_pct", 117),
            ):
                (dd / knob).write_text(f"{v}\n")  # fmt: skip
    (root / "kernel/debug/sched/migration_cost_ns").write_text("500000\n")
    # 6.1's CFS slice on 8 CPUs (defaults x (1 + ilog2(8)))
    for knob, v in (
        ("latency_ns", 24000000),
        ("min_granularity_ns", 3000000),
        ("wakeup_granularity_ns", 4000000),
    ):
        (root / "kernel/debug/sched" / knob).write_text(f"{v}\n")
    # 6.1's features file lists every feature, NO_ for the disabled ones; this
    # plain file is no kernel file: a write replaces it (the test reads states)
    (root / "kernel/debug/sched/features").write_text(
        "GENTLE_FAIR_SLEEPERS START_DEBIT NO_NEXT_BUDDY LAST_BUDDY CACHE_HOT_BUDDY "
        "WAKEUP_PREEMPTION NO_HRTICK NO_HRTICK_DL NO_DOUBLE_TICK NONTASK_CAPACITY\n"
    )
    return root


def test_sched_domain_knobs_set_on_one_level_and_restored(tmp_path: Path) -> None:
    from mix_sysctl import restore_sched_domain, set_sched_domain  # noqa: PLC0415

    sysr = fake_domains(tmp_path / "sys")
    want = {"level": "NUMA", "busy_factor": 1, "min_interval": 1, "max_interval": 2}
    rec = set_sched_domain(str(sysr), want)
    assert rec["status"] == "set" and rec["domains"] == 2
    assert rec["in_force"] == {"busy_factor": ["1"], "min_interval": ["1"], "max_interval": ["2"]}
    numa = sysr / "kernel/debug/sched/domains/cpu1/domain1"
    mc = sysr / "kernel/debug/sched/domains/cpu1/domain0"
    assert (numa / "busy_factor").read_text() == "1\n"
    assert (mc / "busy_factor").read_text() == "16\n"  # other levels untouched
    assert restore_sched_domain(rec) == "restored"
    assert (numa / "busy_factor").read_text() == "16\n"
    assert (numa / "max_interval").read_text() == "16\n"
    # no such level (or no debugfs): absent, and the runner refuses to go on
    assert set_sched_domain(str(sysr), {**want, "level": "PKG"})["status"] == "absent"
    assert set_sched_domain(str(sysr), None)["status"] == "untouched"


def test_migration_cost_set_beside_the_domain_knobs_and_restored(tmp_path: Path) -> None:
    from mix_sysctl import restore_sched_domain, set_sched_domain  # noqa: PLC0415

    sysr = fake_domains(tmp_path / "sys")
    cost = sysr / "kernel/debug/sched/migration_cost_ns"
    rec = set_sched_domain(str(sysr), {"level": "NUMA", "busy_factor": 1, "migration_cost_ns": 0})
    assert rec["status"] == "set", rec
    assert rec["in_force"] == {"busy_factor": ["1"], "migration_cost_ns": ["0"]}
    assert cost.read_text() == "0\n"
    assert restore_sched_domain(rec) == "restored"
    assert cost.read_text() == "500000\n"
    # the global knob alone needs no domain directory
    only = {"level": "NUMA", "migration_cost_ns": 50000}
    rec = set_sched_domain(str(sysr), only)
    assert rec["status"] == "set" and "domains" not in rec
    restore_sched_domain(rec)
    # a kernel without the file (no CONFIG_SCHED_DEBUG): an error, nothing half-set
    cost.unlink()
    rec = set_sched_domain(str(sysr), {"level": "NUMA", "migration_cost_ns": 50000})
    assert rec["status"] == "error" and "absent" in rec["errors"][0]
    assert not cost.exists()


def test_cfs_slice_scaled_with_the_balancer_and_restored(tmp_path: Path) -> None:
    from mix_sysctl import restore_sched_domain, set_sched_domain  # noqa: PLC0415

    sysr = fake_domains(tmp_path / "sys")
    sched = sysr / "kernel/debug/sched"
    want = mr.load_job(
        {
            "sched_domain": {
                "busy_factor": 1,
                "latency_ns": 3000000,
                "min_granularity_ns": 375000,
                "wakeup_granularity_ns": 500000,
            },
            "programs": [{"cmd": ["true"]}],
        }
    )["sched_domain"]
    rec = set_sched_domain(str(sysr), want)
    assert rec["status"] == "set", rec
    assert rec["in_force"]["latency_ns"] == ["3000000"]
    assert (sched / "min_granularity_ns").read_text() == "375000\n"
    assert (sched / "wakeup_granularity_ns").read_text() == "500000\n"
    assert restore_sched_domain(rec) == "restored"
    assert (sched / "latency_ns").read_text() == "24000000\n"
    assert (sched / "min_granularity_ns").read_text() == "3000000\n"
    assert (sched / "wakeup_granularity_ns").read_text() == "4000000\n"


def test_hrtick_switched_on_for_the_run_and_back(tmp_path: Path) -> None:
    from mix_sysctl import feature_state, restore_sched_domain, set_sched_domain  # noqa: PLC0415

    sysr = fake_domains(tmp_path / "sys")
    feat = sysr / "kernel/debug/sched/features"
    assert feature_state(str(feat), "HRTICK") == "NO_HRTICK"
    assert feature_state(str(feat), "NO_SUCH") is None
    rec = set_sched_domain(str(sysr), {"level": "NUMA", "hrtick": True})
    assert rec["status"] == "set", rec
    assert rec["in_force"] == {"features": ["HRTICK"]}
    assert rec["before"][str(sysr / "kernel/debug/sched")] == {"features": "NO_HRTICK"}
    assert feature_state(str(feat), "HRTICK") == "HRTICK"
    assert restore_sched_domain(rec) == "restored"
    assert feature_state(str(feat), "HRTICK") == "NO_HRTICK"
    # a kernel without the feature (no CONFIG_SCHED_HRTICK): refused, said so
    feat.write_text("GENTLE_FAIR_SLEEPERS START_DEBIT\n")
    rec = set_sched_domain(str(sysr), {"level": "NUMA", "hrtick": True})
    assert rec["status"] == "error" and "without HRTICK" in rec["errors"][0]
    assert feat.read_text() == "GENTLE_FAIR_SLEEPERS START_DEBIT\n"


def test_migration_cost_is_loaded_from_a_job() -> None:
    sd = {"migration_cost_ns": 50000}
    job = mr.load_job({"sched_domain": sd, "programs": [{"cmd": ["true"]}]})
    assert job["sched_domain"] == {"level": "NUMA", "migration_cost_ns": 50000}


@pytest.mark.parametrize(
    "bad",
    [
        {"busy_factor": 0},
        {"busy_factor": True},
        {"min_interval": 5, "max_interval": 2},
        {"level": "numa; rm -rf /", "busy_factor": 1},
        {"level": "NUMA"},
        {"balance_interval": 1},
        {"migration_cost_ns": -1},
        {"migration_cost_ns": 500000001},
        {"migration_cost_ns": "0; reboot"},
        {"migration_cost_ns": 1.5},
        {"latency_ns": 3000000},  # without min_granularity_ns
        {"min_granularity_ns": 375000},
        {"latency_ns": 3000000, "min_granularity_ns": 1000000},  # sched_nr_latency 3, not 8
        {"latency_ns": 800000, "min_granularity_ns": 99999},  # below 0.1 ms
        {"latency_ns": 8000000000, "min_granularity_ns": 1000000000},
        {"wakeup_granularity_ns": -1},
        {"wakeup_granularity_ns": "1; reboot"},
        {"hrtick": 1},
        {"hrtick": "HRTICK"},
    ],
)
def test_bad_sched_domain_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(mr.JobError, match="sched_domain"):
        mr.load_job({"sched_domain": bad, "programs": [{"cmd": ["true"]}]})


def test_sched_domain_not_applied_fails_the_run(
    bindir: Path, fake_sysctl: Path, tmp_path: Path
) -> None:
    job = mr.load_job(small_job(policy="mb", sched_domain={"busy_factor": 1}))
    out = tmp_path / "out"
    rc = mr.run_mix(job, str(out), str(fake_sysctl), sys_root=str(tmp_path / "nosys"),
                    bin_dirs=[str(bindir)])  # fmt: skip
    recs = records(out)
    assert rc == 1 and not by_type(recs, "program")
    assert "sched_domain" in recs[-1]["errors"][0] and "absent" in recs[-1]["errors"][0]
    sysr = fake_domains(tmp_path / "sys")
    out = tmp_path / "out2"
    rc = mr.run_mix(job, str(out), str(fake_sysctl), sys_root=str(sysr), bin_dirs=[str(bindir)])
    recs = records(out)
    assert rc == 0, recs[-1]
    assert recs[0]["sched_domain"]["status"] == "set"
    assert recs[-1]["sysctls_restored"]["sched_domain"] == "restored"
    numa = sysr / "kernel/debug/sched/domains/cpu0/domain1/busy_factor"
    assert numa.read_text() == "16\n"


def test_switch_marks_on_for_the_run_then_restored(
    bindir: Path, fake_sysctl: Path, tmp_path: Path
) -> None:
    """job.switch_marks turns kernel.numa_lb_m5_switch on for the run (kernel
    patch 0024) and back off; a kernel without the file fails the run before
    any program starts, with the reason."""
    job = mr.load_job(small_job(policy="default", switch_marks=True))
    out = tmp_path / "out"
    rc = mr.run_mix(job, str(out), str(fake_sysctl), bin_dirs=[str(bindir)])
    recs = records(out)
    assert rc == 1 and not by_type(recs, "program")
    assert "switch_marks" in recs[-1]["errors"][0] and "patch 0024" in recs[-1]["errors"][0]
    marks = fake_sysctl / "kernel" / "numa_lb_m5_switch"
    marks.write_text("0\n")
    out = tmp_path / "out2"
    rc = mr.run_mix(job, str(out), str(fake_sysctl), bin_dirs=[str(bindir)])
    recs = records(out)
    assert rc == 0, recs[-1]
    assert recs[0]["switch_marks"]["status"] == "set"
    assert recs[0]["switch_marks"]["in_force"] == "1"
    assert recs[-1]["sysctls_restored"]["kernel.numa_lb_m5_switch"] == "set"
    assert marks.read_text() == "0\n"
    # not asked: the file is left alone
    out = tmp_path / "out3"
    job = mr.load_job(small_job(policy="default"))
    assert job["switch_marks"] is False
    assert mr.run_mix(job, str(out), str(fake_sysctl), bin_dirs=[str(bindir)]) == 0
    assert records(out)[0]["switch_marks"]["status"] == "untouched"


@pytest.mark.parametrize("bad", [1, "yes", [True]])
def test_bad_switch_marks_rejected(bad: Any) -> None:
    with pytest.raises(mr.JobError, match="switch_marks"):
        mr.load_job(small_job(policy="default", switch_marks=bad))


def fake_numa_scan(root: Path) -> Path:
    """A /sys tree with 6.1's debugfs numa_balancing directory, the kernel's defaults."""
    d = root / "kernel/debug/sched/numa_balancing"
    d.mkdir(parents=True)
    for knob, v in (("scan_delay_ms", 1000), ("scan_period_min_ms", 1000),
                    ("scan_period_max_ms", 60000), ("scan_size_mb", 256),
                    ("hot_threshold_ms", 1000)):  # fmt: skip
        (d / knob).write_text(f"{v}\n")
    return root


SCAN = {"scan_delay_ms": 10, "scan_period_min_ms": 10, "scan_period_max_ms": 100}


def test_numa_scan_knobs_set_read_back_and_restored(tmp_path: Path) -> None:
    from mix_sysctl import restore_numa_scan, set_numa_scan  # noqa: PLC0415

    sysr = fake_numa_scan(tmp_path / "sys")
    d = sysr / "kernel/debug/sched/numa_balancing"
    rec = set_numa_scan(str(sysr), SCAN)
    assert rec["status"] == "set", rec
    assert rec["before"] == {"scan_delay_ms": "1000", "scan_period_min_ms": "1000",
                             "scan_period_max_ms": "60000"}  # fmt: skip
    assert rec["in_force"] == {k: str(v) for k, v in SCAN.items()}
    assert (d / "scan_delay_ms").read_text() == "10\n"
    assert (d / "scan_size_mb").read_text() == "256\n"  # not asked for: untouched
    assert restore_numa_scan(rec) == "restored"
    assert (d / "scan_delay_ms").read_text() == "1000\n"
    assert (d / "scan_period_max_ms").read_text() == "60000\n"
    assert set_numa_scan(str(sysr), None)["status"] == "untouched"
    assert restore_numa_scan(set_numa_scan(str(sysr), None)) == "untouched"
    # no debugfs (or no CONFIG_NUMA_BALANCING): absent, nothing written
    assert set_numa_scan(str(tmp_path / "nosys"), SCAN)["status"] == "absent"
    # one file missing: an error naming it; what was written is put back
    (d / "scan_size_mb").unlink()
    rec = set_numa_scan(str(sysr), {**SCAN, "scan_size_mb": 16})
    assert rec["status"] == "error" and "scan_size_mb: absent" in rec["errors"][0]
    assert restore_numa_scan(rec) == "restored"
    assert (d / "scan_delay_ms").read_text() == "1000\n"


def test_numa_scan_is_loaded_from_a_job() -> None:
    job = mr.load_job({"numa_balancing_scan": {"scan_size_mb": 16}, "programs": [{"cmd": ["x"]}]})
    assert job["numa_balancing_scan"] == {"scan_size_mb": 16}
    assert mr.load_job({"programs": [{"cmd": ["x"]}]})["numa_balancing_scan"] is None


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"scan_delay": 10},
        {"scan_delay_ms": 0},
        {"scan_delay_ms": True},
        {"scan_delay_ms": "10; reboot"},
        {"scan_period_min_ms": 1.5},
        {"scan_period_max_ms": 1000001},
        {"scan_size_mb": 0},
        {"scan_size_mb": 65537},
        {"scan_period_min_ms": 100, "scan_period_max_ms": 10},
        {"hot_threshold_ms": 10},  # a 6.1 file, but not a time constant of the scan
        [10],
    ],
)
def test_bad_numa_scan_rejected(bad: Any) -> None:
    with pytest.raises(mr.JobError, match="numa_balancing_scan"):
        mr.load_job({"numa_balancing_scan": bad, "programs": [{"cmd": ["true"]}]})


def test_numa_scan_not_applied_fails_the_run(fake_sysctl: Path, tmp_path: Path) -> None:
    job = mr.load_job({"run_id": "nbs", "policy": "default", "numa_balancing": 1,
                       "numa_balancing_scan": SCAN, "timeout_s": 30,
                       "programs": [{"name": "t", "cmd": ["true"]}]})  # fmt: skip
    out = tmp_path / "out"
    rc = mr.run_mix(job, str(out), str(fake_sysctl), str(tmp_path / "nolb"),
                    sys_root=str(tmp_path / "nosys"))  # fmt: skip
    recs = records(out)
    assert rc == 1 and not by_type(recs, "program")
    err = recs[-1]["errors"][0]
    assert "numa_balancing_scan" in err and "absent" in err and "debugfs" in err, err
    assert recs[0]["numa_balancing_scan"]["status"] == "absent"
    sysr = fake_numa_scan(tmp_path / "sys")
    out = tmp_path / "out2"
    rc = mr.run_mix(job, str(out), str(fake_sysctl), str(tmp_path / "nolb"), sys_root=str(sysr))
    recs = records(out)
    assert rc == 0, recs[-1]
    nbs = recs[0]["numa_balancing_scan"]
    assert nbs["status"] == "set" and nbs["requested"] == SCAN
    assert nbs["before"]["scan_delay_ms"] == "1000" and nbs["in_force"]["scan_delay_ms"] == "10"
    assert recs[-1]["sysctls_restored"]["numa_balancing_scan"] == "restored"
    d = sysr / "kernel/debug/sched/numa_balancing"
    assert (d / "scan_delay_ms").read_text() == "1000\n"
    # a job without it leaves the files alone and restores nothing
    job = mr.load_job({"run_id": "x", "programs": [{"name": "t", "cmd": ["true"]}]})
    out = tmp_path / "out3"
    rc = mr.run_mix(job, str(out), str(fake_sysctl), str(tmp_path / "nolb"), sys_root=str(sysr))
    recs = records(out)
    assert rc == 0 and recs[0]["numa_balancing_scan"] == {"requested": None, "status": "untouched"}
    assert "numa_balancing_scan" not in recs[-1]["sysctls_restored"]


def test_a_background_program_is_stopped_when_the_others_end(tmp_path: Path) -> None:
    """background: load for the others; the mix ends with its foreground programs,
    the ROI closes before the background one is stopped, and that stop is no failure."""
    m5, log = fake_m5(tmp_path)
    job = mr.load_job(
        {"run_id": "bg", "programs": [
            {"name": "fg", "cmd": ["sh", "-c", "sleep 0.3"]},
            {"name": "load", "cmd": ["sleep", "60"], "background": True},
        ]}
    )  # fmt: skip
    out = tmp_path / "out"
    t = time.monotonic()
    rc = mr.run_mix(job, str(out), str(tmp_path / "nosys"), bin_dirs=[str(tmp_path)],
                    roi=[str(m5), "1"])  # fmt: skip
    assert time.monotonic() - t < 30  # the 60 s background program did not hold the mix
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    progs = {r["name"]: r for r in recs if r["type"] == "program"}
    assert progs["fg"]["exit_code"] == 0 and not progs["fg"]["background"]
    assert progs["load"]["background"] and progs["load"]["stopped_by_runner"]
    assert progs["load"]["signal"] == 15
    end = recs[-1]
    assert end["programs_failed"] == [] and 0.3 <= end["elapsed_s"] < 30
    assert rc in (0, 1)  # no sysctls here: the run may fail for that reason only
    assert all("load" not in e for e in end["errors"])


def test_a_mix_of_background_programs_only_is_refused() -> None:
    with pytest.raises(mr.JobError, match="background"):
        mr.load_job({"run_id": "bg", "programs": [
            {"name": "load", "cmd": ["sleep", "1"], "background": True}]})  # fmt: skip


def test_schedstat_cpu_windows_and_per_thread_run_delay(
    bindir: Path, fake_sysctl: Path, tmp_path: Path
) -> None:
    """The runner reads the run queues' counters at the release, at the first
    exit and after the last reap, and each task's schedstat at every sample.
    This host has no /proc/schedstat (no CONFIG_SCHEDSTATS), so the reads go to
    a real capture (tests/fixtures/schedstat/after.txt): a file that does not
    change, so every delta is 0 and what is checked is where and when the runner
    reads; the per-task files are this host's own."""
    from analysis.results.guest import parse_results_text
    from analysis.results.metrics import guest_metrics

    cap = REPO / "tests/fixtures/schedstat/after.txt"
    out = tmp_path / "out"
    job = mr.load_job(small_job())
    rc = mr.run_mix(job, str(out), str(fake_sysctl), bin_dirs=[str(bindir)], schedstat=str(cap))
    recs = records(out)
    assert rc == 0, recs[-1]
    end = by_type(recs, "run_end")[0]
    cpu = end["schedstat"]["cpu"]
    assert end["schedstat"]["status"] == "present"  # the whole-run domain record as before
    assert cpu["begin_s"] <= 0 < cpu["first_exit_s"] <= cpu["end_s"]
    # the release-to-last-reap window is the mix's elapsed time plus the reads
    assert cpu["end_s"] == pytest.approx(end["elapsed_s"], abs=0.05)
    assert cpu["begin_raw"] == cpu["end_raw"] == cap.read_text()
    for key, upto in (("roi", "end_s"), ("all_running", "first_exit_s")):
        w = cpu[key]
        assert w["status"] == "present" and w["cpus"] == 8
        assert w["window_s"] == pytest.approx(cpu[upto] - cpu["begin_s"], abs=1e-5)
        assert all(v == 0 for c in w["delta"].values() for v in c.values())
    progs = {p["name"]: p for p in by_type(recs, "program")}
    assert cpu["first_exit_s"] <= min(p["elapsed_s"] for p in progs.values()) + 0.05
    # /proc/interrupts read at the same three points (this host's own, real)
    irq = end["interrupts"]
    assert irq["path"] == "/proc/interrupts"
    assert irq["roi"]["status"] == irq["all_running"]["status"] == "present"
    assert irq["begin_raw"].split()[0] == "CPU0" and irq["end_raw"] and irq["first_exit_raw"]
    assert sum(irq["roi"]["delta"]["LOC"]) > 0  # the mix ran for a while: timer ticks

    tgs = by_type(recs, "thread_group")
    own = Path("/proc/self/schedstat").exists()
    for t in tgs:
        if not own:
            assert t["schedstat_tasks"] == 0 and t["run_delay_ns"] is None
            continue
        # main + 2 workers, each read at least once; they ran, so run_ns > 0
        assert t["schedstat_tasks"] == t["tasks_seen"] >= 1
        assert t["run_ns"] > 0 and t["run_delay_ns"] >= 0 and t["timeslices"] >= 1
    if not own:
        return
    g = parse_results_text((out / "results.jsonl").read_text())
    rows = {(e, n, m): v for e, n, m, v in guest_metrics(g, "mix")}
    assert rows[("mix", "mix", "sched_busy_fraction")] == 0.0  # the unchanging capture
    assert rows[("mix", "mix", "sched_runnable_per_cpu")] == 0.0
    # synthetic programs: from each worker's own read at its end (exact)
    total, n = 0, 0
    for name, p in progs.items():
        recs = p["result"]["thread_records"]
        want = sum(r["run_delay_ns"] for r in recs) / len(recs)
        assert rows[("program", name, "run_delay_ms_per_thread")] == pytest.approx(want / 1e6)
        total, n = total + sum(r["run_delay_ns"] for r in recs), n + len(recs)
    assert rows[("mix", "mix", "run_delay_ms_per_thread")] == pytest.approx(total / n / 1e6)
    # without them (a PARSEC or cmd program) the runner's samples are used
    from analysis.results.metrics import run_delay

    lft = [t for t in tgs if t["program"] == "lft"]
    assert run_delay(None, lft) == (sum(t["run_delay_ns"] for t in lft),
                                    sum(t["schedstat_tasks"] for t in lft))  # fmt: skip
    drop = ("schedstat_tasks", "run_delay_ns")  # a runner before the per-task reads
    old = [{k: v for k, v in t.items() if k not in drop} for t in lft]
    assert run_delay({"thread_records": [{"run_delay_ns": -1}]}, old) is None


# ------------------------------------------------------------------ --serve


def serve(
    rundir: Path, request: bytes | None, python: str = sys.executable
) -> tuple[int, bytes, str]:
    """Start ``mixrunner.py --serve`` as the guest init does (a socketpair),
    wait for "ready", send REQUEST (None: close the socket); (exit, answer, stderr)."""
    import socket  # noqa: PLC0415

    ours, theirs = socket.socketpair()
    ours.settimeout(60)
    p = subprocess.Popen(
        [python, str(WL / "mixrunner.py"), "--serve", str(theirs.fileno()),
         "--rundir", str(rundir)],
        pass_fds=(theirs.fileno(),), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )  # fmt: skip
    theirs.close()
    f = ours.makefile("rb")
    assert f.readline() == b"ready\n"
    if request is None:
        ours.shutdown(socket.SHUT_WR)
    else:
        ours.sendall(request)
    answer = f.readline()
    f.close()
    ours.close()
    _, err = p.communicate(timeout=60)
    return p.returncode, answer, err.decode()


def request(argv: list[str], **extra: Any) -> bytes:
    return (json.dumps(dict(argv=argv, **extra)) + "\n").encode()


def test_serve_runs_a_request_as_the_direct_invocation_does(
    bindir: Path, tmp_path: Path, fake_sysctl: Path
) -> None:
    """The same job, once with its arguments, once through --serve: the same
    records (types, keys, the run's settings, the outcome), plus "prestart"."""
    run = tmp_path / "run"
    run.mkdir()
    jf = run / "job.json"
    jf.write_text(json.dumps(small_job(policy="tm")))
    args = ["--sysctl-root", str(fake_sysctl), "--bin-dir", str(bindir)]
    p = subprocess.run(
        [sys.executable, str(WL / "mixrunner.py"), str(jf), "--outdir", str(run / "direct"),
         *args], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    before = time.monotonic()
    rc, answer, err = serve(run, request([str(jf), "--outdir", str(run / "served"), *args]))
    assert (rc, answer) == (0, b"ok\n"), err
    direct, served = records(run / "direct"), records(run / "served")
    assert [r["type"] for r in direct] == [r["type"] for r in served]
    assert [sorted(r) for r in direct] == [sorted(r) for r in served]
    volatile = {"time_unix", "monotonic_s", "clock", "prestart"}
    assert {k: v for k, v in direct[0].items() if k not in volatile} == {
        k: v for k, v in served[0].items() if k not in volatile
    }
    assert direct[0]["prestart"] is None
    pre = served[0]["prestart"]
    # imports, then ready, then the request (the test sent it after "ready")
    assert served[0]["monotonic_s"]["imported"] <= pre["ready"] <= pre["request"]
    assert before <= pre["request"] <= served[0]["monotonic_s"]["run_record"]
    for d, s in zip(by_type(direct, "program"), by_type(served, "program"), strict=True):
        for k in ("index", "name", "kind", "argv", "exit_code", "signal"):
            assert d[k] == s[k], k
    same = ("status", "errors", "programs_failed", "timed_out", "policy_at_end",
            "sysctls_restored")  # fmt: skip
    assert {k: direct[-1][k] for k in same} == {k: served[-1][k] for k in same}
    assert served[-1]["status"] == "ok"


@pytest.mark.parametrize(
    ("req", "why"),
    [
        (b"job.json --outdir out\n", "not JSON"),
        (b'["job.json"]\n', "not a JSON object: list"),
        ("unknown", "unknown keys ['roi']"),
        ("outside", "--outdir '/tmp' is outside the run directory"),
        ("dotdot", "the job '{run}/../job.json' is outside the run directory"),
        ("meta", "argument '/x;reboot': shell metacharacter ';'"),
        ("dollar", "argument '$HOME': shell metacharacter '$'"),
        ("help", "--help is not a run"),
        ("noargs", "argv must be a non-empty list of strings"),
        ("badopt", "bad arguments"),
        (None, "no request (end of file)"),
    ],
)
def test_serve_refuses_a_bad_request_and_runs_nothing(
    tmp_path: Path, req: bytes | str | None, why: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    job, out = str(run / "job.json"), str(run / "out")
    Path(job).write_text(json.dumps({"programs": [{"cmd": ["sh", "-c", "exit 0"]}]}))
    reqs = {
        "unknown": request([job, "--outdir", out], roi=["m5", "1"]),
        "outside": request([job, "--outdir", "/tmp"]),
        "dotdot": request([f"{run}/../job.json", "--outdir", out]),
        "meta": request([job, "--outdir", out, "--lb-stats", "/x;reboot"]),
        "dollar": request([job, "--outdir", out, "--sys-root", "$HOME"]),
        "help": request([job, "--outdir", out, "--help"]),
        "noargs": request([]),
        "badopt": request([job, "--outdir", out, "--no-such-option"]),
    }
    rc, answer, err = serve(run, reqs[req] if isinstance(req, str) else req)
    why = why.format(run=run)
    assert rc == mr.SERVE_EXIT == 3
    assert answer.decode().startswith("refused: ") and why in answer.decode(), answer
    assert f"mixrunner: request refused: {why}" in err
    assert not (run / "out").exists()  # nothing ran


def test_a_run_after_preload_imports_nothing(tmp_path: Path, fake_sysctl: Path) -> None:
    """--serve imports before the checkpoint what the run path imports lazily
    (LAZY_MODULES): the run itself, ROI marks included, imports no module."""
    m5, _ = fake_m5(tmp_path)
    jf = tmp_path / "job.json"
    jf.write_text(json.dumps({"run_id": "pre", "warmup_s": 0.01, "programs": [
        {"name": "a", "cmd": ["sh", "-c", "exit 0"]}, {"name": "b", "cmd": ["sh", "-c", "exit 3"]},
    ]}))  # fmt: skip
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import mixrunner;"
        "mixrunner.preload(); b = set(sys.modules); rc = mixrunner.main(sys.argv[2:]);"
        "print(json.dumps([rc, sorted(set(sys.modules) - b)]))"
    )
    p = subprocess.run(
        [sys.executable, "-c", script, str(WL), str(jf), "--outdir", str(tmp_path / "out"),
         "--sysctl-root", str(fake_sysctl), "--roi", str(m5), "7"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rc, late = json.loads(p.stdout.splitlines()[-1])
    assert rc == 1 and late == []  # program b exits 3: the run ran to its end


def test_serve_under_python36(tmp_path: Path, fake_sysctl: Path) -> None:
    from test_mix_catalog import python36

    py36 = python36()
    if py36 is None:
        pytest.skip("SKIPPED py36-serve: no Python 3.6 interpreter on this host")
    run = tmp_path / "run"
    run.mkdir()
    jf = run / "job.json"
    jf.write_text(json.dumps({"policy": "mb", "programs": [{"cmd": ["/bin/sh", "-c", "exit 0"]}]}))
    req = request([str(jf), "--outdir", str(run / "out"), "--sysctl-root", str(fake_sysctl)])
    rc, answer, err = serve(run, req, py36)
    assert (rc, answer) == (0, b"ok\n"), err
    recs = records(run / "out")
    assert recs[0]["python"].startswith("3.6") and recs[-1]["status"] == "ok"
    assert set(recs[0]["prestart"]) == {"ready", "request"}
