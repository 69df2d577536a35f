"""The user-level policies in sweeps: policy values, job.daemon_params (checked
by the daemon's own parameter rules), the jobs the matrix writes, the
``daemons`` preset, and the refusal on qemu (through run_all.py, a process).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from analysis.sweep import preflight  # noqa: E402
from analysis.sweep.matrix import guest_job, points  # noqa: E402
from analysis.sweep.spec import (  # noqa: E402
    DAEMON_POLICIES,
    POLICIES,
    SpecError,
    load_spec,
    validate,
)

MIX = {"m": {"programs": [{"workload": "leader_ft"}]}}


def doc(policies: list[str], **job: object) -> dict:
    return {
        "sweep": {"backend": "gem5"},
        "axes": {"policy": policies, "mix": ["m"], "threads": [2], "cores_per_socket": [2]},
        "mixes": MIX,
        "job": dict(job),
    }


def test_the_four_names_are_policy_values() -> None:
    assert set(DAEMON_POLICIES) <= set(POLICIES)
    assert DAEMON_POLICIES == ("imar", "imar2", "devil", "plb")
    s = validate(doc(["default", *DAEMON_POLICIES]))
    assert s.axes["policy"] == ["default", *DAEMON_POLICIES]


def test_daemon_params_reach_only_their_policys_job() -> None:
    s = validate(doc(["default", "imar", "plb"], daemon_params={"imar": {"interval_s": 0.005}}))
    jobs = {p.policy: guest_job(p, "r") for p in points(s, "gem5")}
    assert jobs["imar"]["daemon_params"] == {"interval_s": 0.005}
    assert jobs["imar"]["policy"] == "imar"  # the guest maps it to sysctl default + daemon
    assert "daemon_params" not in jobs["default"] and "daemon_params" not in jobs["plb"]


@pytest.mark.parametrize(
    "params,field,match",
    [
        ({"excl": {}}, "job.daemon_params", "allowed: imar, imar2, devil, plb"),
        ({"imar": {"interval": 1}}, "job.daemon_params.imar", "unknown parameter 'interval'"),
        ({"imar2": {"rho": 2}}, "job.daemon_params.imar2", "rho must be <= 1"),
        ({"plb": {"domain": "llc"}}, "job.daemon_params.plb", "domain must be one of"),
        ([1], "job.daemon_params", "a table per daemon policy"),
    ],
)
def test_bad_daemon_params_are_named(params: object, field: str, match: str) -> None:
    with pytest.raises(SpecError, match=match) as e:
        validate(doc(["imar"], daemon_params=params))
    assert e.value.field == field


def test_daemons_preset() -> None:
    s = load_spec(preset="daemons")
    assert s.backend == "gem5" and set(DAEMON_POLICIES) < set(s.axes["policy"])
    jobs = {p.policy: guest_job(p, "r") for p in points(s, "gem5")}
    assert all(jobs[p]["daemon_params"]["interval_s"] < 0.01 for p in DAEMON_POLICIES)


def test_qemu_refuses_daemon_policies(tmp_path: Path) -> None:
    s = validate(doc(["default", "devil"]))
    msg = preflight.daemon_qemu_refusal(s, "qemu", "auto: no gem5 configured")
    assert msg is not None and "policies devil need hardware counters" in msg
    assert "QEMU TCG gives the guest no PMU" in msg
    assert preflight.daemon_qemu_refusal(s, "gem5", "requested") is None
    assert preflight.daemon_qemu_refusal(validate(doc(["default"])), "qemu", "x") is None
    p = subprocess.run(
        [sys.executable, str(ROOT / "run_all.py"), "--preset", "daemons", "--backend", "qemu",
         "--out", str(tmp_path / "out"), "--dry-run"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    assert "error: refused: policies imar, imar2, devil, plb need hardware counters" in (
        p.stdout + p.stderr
    )
    assert not (tmp_path / "out").exists()  # nothing was created
