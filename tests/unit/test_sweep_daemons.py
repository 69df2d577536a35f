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
    """One program bound to its node (job.pinning direct): imar's and devil's
    shares of a socket's requests need it on gem5 (spec-time check, issue 39)."""
    return {
        "sweep": {"backend": "gem5"},
        "axes": {"policy": policies, "mix": ["m"], "threads": [2], "cores_per_socket": [2]},
        "mixes": MIX,
        "job": {"pinning": "direct", **job},
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
    """The preset runs the daemons at their gem5 periods (daemons/README.md
    "Periods"): no overrides, the daemon's --backend gem5 defaults apply."""
    s = load_spec(preset="daemons")
    assert s.backend == "gem5" and set(DAEMON_POLICIES) < set(s.axes["policy"])
    jobs = {p.policy: guest_job(p, "r") for p in points(s, "gem5")}
    assert all("daemon_params" not in jobs[p] for p in DAEMON_POLICIES)


def test_gem5_period_defaults_decide_what_params_are_valid() -> None:
    # IMAR2's T_min on gem5 is 15.625 ms: a T_max of 10 ms alone is below it
    with pytest.raises(SpecError, match="interval_min_s must be <= interval_max_s") as e:
        validate(doc(["imar2"], daemon_params={"imar2": {"interval_max_s": 0.01}}))
    assert e.value.field == "job.daemon_params.imar2"
    validate(doc(["imar2"], daemon_params={"imar2": {"interval_max_s": 0.1}}))


def topo_doc(policies: list[str], inter_socket: str, sockets: list[int], **job: object) -> dict:
    d = doc(policies, **job)
    d["axes"]["sockets"] = sockets
    d["machine"] = {"inter_socket": inter_socket}
    return d


@pytest.mark.parametrize(
    "policies,inter_socket,sockets,job,field",
    [
        (["default", "imar"], "ring", [4], {}, "axes (policy=imar, sockets=4)"),
        (["imar2"], "ring", [2, 4], {}, "axes (policy=imar2, sockets=4)"),
        (["imar"], "g34", [8], {}, "axes (policy=imar, sockets=8)"),
        (["devil"], "ring", [4], {"daemon_params": {"devil": {"pattern": "counters"}}},
         "axes (policy=devil, sockets=4)"),
    ],
)  # fmt: skip
def test_daemon_formula_on_a_topology_it_does_not_cover_is_refused(
    policies: list[str], inter_socket: str, sockets: list[int], job: dict, field: str
) -> None:
    """IMAR's latency term needs each socket's requests by home node; the
    bridge has them only on fully connected sockets (otherwise it would be
    1.0 for every thread, silently)."""
    with pytest.raises(SpecError, match="needs each socket's requests by home node") as e:
        validate(topo_doc(policies, inter_socket, sockets, **job))
    assert e.value.field == field
    assert "inter_socket 'full', or exclude these points" in str(e.value)


def test_daemon_topologies_that_are_covered_pass() -> None:
    validate(topo_doc(["imar", "imar2"], "full", [4]))
    validate(topo_doc(["imar"], "ring", [2, 3]))  # a ring of 3 links every pair
    validate(topo_doc(["plb", "default"], "ring", [4]))  # plb reads no requests
    validate(topo_doc(["devil"], "ring", [4]))  # devil's auto pattern: pages, said so
    d = topo_doc(["default", "imar"], "ring", [2, 4])
    d["exclude"] = [{"policy": ["imar"], "sockets": [4]}]
    assert len(points(validate(d), "gem5")) == 3


def test_qemu_refuses_daemon_policies(tmp_path: Path) -> None:
    s = validate(doc(["default", "devil"]))
    msg = preflight.daemon_qemu_refusal(s, "qemu", "auto: no gem5 configured")
    assert msg is not None and "policies devil need hardware counters" in msg
    assert "QEMU TCG gives the guest no PMU" in msg
    assert preflight.daemon_qemu_refusal(s, "gem5", "requested") is None
    assert preflight.daemon_qemu_refusal(validate(doc(["default"])), "qemu", "x") is None
    marked = validate(doc(["default"], switch_marks=True))
    msg = preflight.switch_marks_qemu_refusal(marked, "qemu", "requested")
    assert msg is not None and "gem5 only" in msg
    assert preflight.switch_marks_qemu_refusal(marked, "gem5", "requested") is None
    assert preflight.switch_marks_qemu_refusal(s, "qemu", "requested") is None
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


def test_approximate_node_splits_need_programs_on_cpus_of_their_own() -> None:
    """Issue 39: a socket's requests by home node are shared over its tasks by
    their misses (approximate); imar, imar2 and devil (pattern auto or
    counters) run only where each program has its node's CPUs to itself."""
    free = doc(["default", "imar"])
    free["job"]["pinning"] = "free"
    with pytest.raises(SpecError, match="approximate, so its runs need") as e:
        validate(free)
    assert e.value.field == "axes (policy=imar, pinning=free)"
    unbound = doc(["devil"], pin_threads=False)
    with pytest.raises(SpecError, match="devil's reference shares"):
        validate(unbound)
    validate(
        dict(
            doc(["devil"], daemon_params={"devil": {"pattern": "pages"}}),
            job={"pinning": "free", "daemon_params": {"devil": {"pattern": "pages"}}},
        )
    )
    validate(dict(free, axes=dict(free["axes"], policy=["default", "plb"])))  # exact: per core
    # two programs on one node (both named node 1): refused; on nodes 0 and 1: fine
    two = doc(["imar2"])
    two["mixes"] = {"m": {"programs": [{"workload": "leader_ft", "node": 1},
                                       {"workload": "leader_ft", "node": 1}]}}  # fmt: skip
    with pytest.raises(SpecError, match=r"puts 2 programs on nodes \[1, 1\] of 4") as e:
        validate(two)
    assert e.value.field == "axes (policy=imar2, mix=m, sockets=4)"
    two["mixes"]["m"]["programs"][0]["node"] = 0
    validate(two)
    # more programs than sockets, unless those points are excluded
    many = doc(["default", "imar"])
    many["mixes"] = {"m": {"programs": [{"workload": "leader_ft"}] * 5}}
    with pytest.raises(SpecError, match="puts 5 programs on nodes"):
        validate(many)
    many["exclude"] = [{"policy": ["imar"]}]
    validate(many)
    # the qemu backend is refused for daemons anyway (preflight), not here
    qemu = dict(free, sweep={"backend": "qemu"})
    validate(qemu)
