"""Boot the patched kernel as a 4-node QEMU guest and check it end to end.

One boot per kernel variant (module fixture); each test asserts one of the
checks of kernel-patches/qemu_check.py so a failure names what broke.
"""

import pytest
import qemu_check
from numa_lb.qemu import cpulist, guest_topology
from qemu_check import POLICIES

TOPO = guest_topology()


def _boot(variant: str) -> qemu_check.GuestRun:
    kdir = qemu_check.kernel_dir(variant)
    # The debug kernel (KASAN, lockdep) is several times slower under TCG.
    seconds = 3 if variant == "release" else 4
    return qemu_check.boot(
        kdir / "bzImage", list(POLICIES), "6:16,4:16,3:8,1:4,1:4", seconds, TOPO, timeout=1500
    )


@pytest.fixture(
    scope="module",
    params=[
        "release",
        pytest.param("debug", marks=pytest.mark.debug),
    ],
)
def guest(request: pytest.FixtureRequest) -> qemu_check.GuestRun:
    run = _boot(request.param)
    assert run.done, f"guest did not finish (rc {run.returncode}):\n{run.console[-4000:]}"
    return run


def test_guest_sees_four_nodes_with_cpus_and_distances(guest: qemu_check.GuestRun) -> None:
    assert guest.online == "0-3"
    for node in range(TOPO.sockets):
        assert guest.topo[node] == (cpulist(TOPO, node), TOPO.slit()[node])


def test_kernel_is_the_patched_one(guest: qemu_check.GuestRun) -> None:
    assert "-numalb" in guest.kernel
    assert guest.sysctl["initial"] == "default"
    assert guest.sysctl["mode"] == "644"


def test_invalid_policy_is_rejected_and_changes_nothing(guest: qemu_check.GuestRun) -> None:
    assert guest.sysctl["invalid"] == "rejected"
    assert guest.sysctl["after"] == "default"


def test_unprivileged_write_is_denied(guest: qemu_check.GuestRun) -> None:
    assert guest.sysctl["unprivileged"] == "EACCES"


@pytest.mark.parametrize("policy", POLICIES)
def test_policy_switches_and_selects_across_nodes(guest: qemu_check.GuestRun, policy: str) -> None:
    assert guest.policy_set[policy] == policy
    d = guest.delta(policy)
    assert d["attempts"] > 0 and d["migrated"] > 0, d
    assert d["select_ns"] > 0 and d["detach_ns"] > 0, d
    assert d["picked_none"] <= d["attempts"], d
    assert d["active_leader"] <= d["active_moved"], d
    if policy != "default":
        assert d["evaluated"] + d["taken_leader_dst"] > 0, d
    if policy in ("tm", "mb", "bce", "excl_base"):
        # no leader rules: nothing is skipped by them
        assert d["skipped_leader"] == d["skipped_leader_src"] == d["skipped_seen"] == 0, d
    # only the policy in force counts
    for other in POLICIES:
        if other != policy:
            before = guest.stats_before[policy][other]["attempts"]
            assert guest.stats_after[policy][other]["attempts"] == before


def test_numa_rss_invariants_hold_during_the_run(guest: qemu_check.GuestRun) -> None:
    checks = [s for s in guest.stress if s.get("check") in ("touched", "running", "joined")]
    assert len(checks) >= 3 * len(POLICIES)
    assert all(s["nodes"] == "4" for s in checks)
    bad = [s for s in checks if s["ok"] != "1"]
    assert not bad, bad


def test_numa_rss_drops_by_what_was_unmapped(guest: qemu_check.GuestRun) -> None:
    unmaps = [s for s in guest.stress if s.get("check") == "munmap"]
    assert len(unmaps) == 5 * len(POLICIES)
    assert all(s["ok"] == "1" for s in unmaps), unmaps


def test_every_stress_program_finished_clean(guest: qemu_check.GuestRun) -> None:
    done = [s for s in guest.stress if "done" in s]
    assert len(done) == 5 * len(POLICIES)
    assert all(s["bad"] == "0" for s in done), done


def test_dmesg_is_clean(guest: qemu_check.GuestRun) -> None:
    # release: no WARN/BUG (incl. the teardown check that numa_rss returned
    # to zero); debug: also no lockdep, KASAN or DEBUG_VM splat
    assert guest.dmesg, "no dmesg captured"
    assert not guest.splats(), "\n".join(guest.splats())
