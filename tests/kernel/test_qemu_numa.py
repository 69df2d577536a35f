"""Boot the patched kernel as a 4-node QEMU guest and check it end to end.

One boot per kernel variant (module fixture); each test asserts one of the
checks of kernel-patches/qemu_check.py so a failure names what broke.
"""

import pytest
import qemu_check
from numa_lb.qemu import cpulist, guest_topology
from qemu_check import MIGRATION_KEYS, POLICIES, SYSCTL_WRITES

TOPO = guest_topology()
# the stock loop, the policy pass as first fit, and a policy with leader rules
CROWD = ("default", "null", "excl")


def _boot(variant: str) -> qemu_check.GuestRun:
    kdir = qemu_check.kernel_dir(variant)
    # The debug kernel (KASAN, lockdep) is several times slower under TCG.
    seconds = 3 if variant == "release" else 4
    return qemu_check.boot(
        kdir / "bzImage",
        list(POLICIES),
        "6:16,4:16,3:8,1:4,1:4",
        seconds,
        TOPO,
        timeout=1500,
        crowd=CROWD,
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


def test_per_process_slab_objects_are_reported(guest: qemu_check.GuestRun) -> None:
    # mm_struct carries numa_rss, signal_cache the thread counts and the
    # group's migration counts; their sizes are the per-process cost
    for cache in ("mm_struct", "signal_cache", "task_struct"):
        assert guest.slab[cache]["object_size"] > 0, guest.slab


def test_invalid_policy_is_rejected_and_changes_nothing(guest: qemu_check.GuestRun) -> None:
    assert guest.sysctl["invalid"] == "rejected"
    assert guest.sysctl["after"] == "default"


@pytest.mark.parametrize("case", SYSCTL_WRITES)
def test_sysctl_write_gets_its_documented_result(guest: qemu_check.GuestRun, case: str) -> None:
    # written while the policy is mb: malformed writes leave it there
    assert guest.sysctl[f"write_{case}"] == SYSCTL_WRITES[case]
    assert guest.sysctl[f"after_{case}"] == ("excl" if case == "newline" else "mb")


def test_unprivileged_write_is_denied(guest: qemu_check.GuestRun) -> None:
    assert guest.sysctl["unprivileged"] == "EACCES"
    assert guest.sysctl["after_unprivileged"] == "mb"
    assert guest.sysctl["reset"] == "default"


@pytest.mark.parametrize("name", ["numa_lb_migrations", "numa_lb_threads", "numa_maps"])
def test_migrations_file_is_checked_at_open_like_numa_maps(
    guest: qemu_check.GuestRun, name: str
) -> None:
    # nobody may not open init's file; a file root opened stays readable
    assert guest.access[name] == {"open": "EACCES", "held": "ok"}


def test_migrations_file_does_not_follow_an_execve(guest: qemu_check.GuestRun) -> None:
    assert guest.access["after_exec"] == {"before": "ok", "after": "EACCES"}


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
    if policy in ("tm", "mb", "bce", "excl_base", "null"):
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


def test_group_migrations_are_the_threads_nr_migrations(guest: qemu_check.GuestRun) -> None:
    # with every thread alive: file total <= sum of se.nr_migrations <= file total
    live = [s for s in guest.stress if s.get("check") == "migrations"]
    assert len(live) == 5 * len(POLICIES)
    assert all(s["ok"] == "1" for s in live), [s for s in live if s["ok"] != "1"]
    assert sum(int(s["after"]) for s in live) > 0


def test_group_migrations_outlive_their_threads(guest: qemu_check.GuestRun) -> None:
    kept = [s for s in guest.stress if s.get("check") == "cumulative"]
    assert len(kept) == 5 * len(POLICIES)
    assert all(s["ok"] == "1" for s in kept), [s for s in kept if s["ok"] != "1"]


def test_zombie_migrations_are_complete_and_consistent(guest: qemu_check.GuestRun) -> None:
    zombies = guest.zombies()
    assert len(zombies) == 5 * len(POLICIES) + 2  # + numabal-0 and acct-0
    for z in zombies:
        assert z["ok"] == "1", z
        v = {k: int(z[k]) for k in MIGRATION_KEYS}
        causes = MIGRATION_KEYS[2:-1]
        assert v["migrations"] == sum(v[k] for k in causes[0::2])
        assert v["migrations_xnode"] == sum(v[k] for k in causes[1::2])
        assert all(v[k + "_xnode"] <= v[k] for k in causes[0::2])
    # the mix moves tasks across nodes by load balancing and on wakeup
    total = {k: sum(int(z[k]) for z in zombies) for k in MIGRATION_KEYS}
    assert total["balance_xnode"] > 0 and total["wakeup"] > 0, total


@pytest.mark.parametrize("policy", POLICIES)
def test_programs_cross_node_moves_are_within_the_policy_counters(
    guest: qemu_check.GuestRun, policy: str
) -> None:
    # every cross-node detach or active move of a program under @policy is
    # one of the row's migrated / active_moved (other tasks make the rest)
    d = guest.delta(policy)
    zs = guest.zombies(f"{policy}-")
    assert len(zs) == 5
    assert sum(int(z["balance_xnode"]) for z in zs) <= d["migrated"]
    assert sum(int(z["active_balance_xnode"]) for z in zs) <= d["active_moved"]


def test_numa_balancing_page_migrations_are_counted(guest: qemu_check.GuestRun) -> None:
    (z,) = guest.zombies("numabal-")
    (pinned,) = [s for s in guest.stress if s.get("check") == "numa_pages"]
    assert pinned["ok"] == "1", pinned
    # pinning itself to a CPU of another node was an "other" cross-node move
    # (unless the balancer had already put it on that node)
    if pinned.get("pin_moved") == "1":
        assert int(z["other_xnode"]) >= 1, z
    vm = int(guest.numabal["vmstat_numa_pages_migrated"])
    mine = int(z["numa_pages_migrated"])
    assert vm > 0, "NUMA balancing migrated no page: nothing was checked"
    assert 0 < mine <= vm, (mine, vm)


def test_every_stress_program_finished_clean(guest: qemu_check.GuestRun) -> None:
    done = [s for s in guest.stress if "done" in s]
    assert len(done) == 5 * len(POLICIES) + 1  # + the accounting program
    assert all(s["bad"] == "0" for s in done), done
    assert qemu_check.migration_problems(guest, list(POLICIES)) == []


def test_dmesg_is_clean(guest: qemu_check.GuestRun) -> None:
    # release: no WARN/BUG (incl. the teardown check that numa_rss returned
    # to zero); debug: also no lockdep, KASAN or DEBUG_VM splat
    assert guest.dmesg, "no dmesg captured"
    assert not guest.splats(), "\n".join(guest.splats())


def test_every_accounting_path_keeps_numa_rss_right(guest: qemu_check.GuestRun) -> None:
    # move_pages, migrate_pages, copy-on-write, fork/thread storm, THP fault/
    # split/move, KSM merge/unmerge (debug variant), munmap
    assert qemu_check.accounting_problems(guest) == []
    got = {s["check"]: s for s in guest.stress if s.get("tag") == "acct-0" and "check" in s}
    assert int(got["thp"]["huge_kb"]) > 0, got["thp"]
    if "-debug" in guest.kernel:
        assert int(got["ksm"]["pages_sharing"]) > 0, got["ksm"]


def test_thread_counts_return_exactly_in_the_storm_and_the_forks(
    guest: qemu_check.GuestRun,
) -> None:
    # /proc/<pid>/numa_lb_threads (patch 0017): four threads pinned one per
    # node are counted exactly, by their real nodes, while they wait; once
    # joined the counts are exactly what they were; each forked child does
    # the same in its group, its zombie counts zero, the parent's counts are
    # untouched by the fork
    got = {s["check"]: s for s in guest.stress if s.get("tag") == "acct-0" and "check" in s}
    storm, fork = got["threads_storm"], got["threads_fork"]
    assert storm["ok"] == "1" and storm["ok_rounds"] == storm["rounds"] == "20", storm
    prior = [int(f.split("=")[1]) for f in storm["prior"].split(",")]
    during = [int(f.split("=")[1]) for f in storm["during"].split(",")]
    assert sum(prior) == 1 and len(prior) == TOPO.sockets, storm
    # one storm thread on each node, on top of the pinned main thread
    assert [d - p for d, p in zip(during, prior, strict=True)] == [1] * TOPO.sockets, storm
    assert fork["ok"] == "1", fork
    for key in ("child_ok", "zombie_zero", "parent_unchanged"):
        assert fork[key] == "20", fork


def test_thread_counts_are_zero_at_exit_and_right_after_a_join(
    guest: qemu_check.GuestRun,
) -> None:
    # every zombie a parent reads counts no thread; every stress program's
    # counts after joining its workers are its one thread, on its node
    # (and the kernel's teardown check, CONFIG_SCHED_DEBUG, stays silent:
    # test_dmesg_is_clean)
    assert qemu_check.thread_count_problems(guest) == []
    zombies = guest.zombies()
    assert zombies and all(z["threads_left"] == "0" for z in zombies)
    joined = [s for s in guest.stress if s.get("check") == "threads_joined"]
    assert len(joined) == 5 * len(POLICIES)
    assert all(s["file"] == s["real"] for s in joined), joined


def test_crowd_larger_than_the_window_ends_every_pass(guest: qemu_check.GuestRun) -> None:
    """48 tasks pinned to CPU 0 (nothing movable: each pass must end at loop_max)
    and 72 free ones with sched/nr_migrate 64 (two chunks a pass): the guest
    keeps running, the free ones spread, and the policy passes look at no more
    than nr_migrate tasks each."""
    assert qemu_check.crowd_problems(guest, list(CROWD)) == []
    for p in CROWD:
        for phase, window in (("pinned", 32), ("free", 64)):
            under = f"crowd-{phase}-{p}"
            b, a = guest.stats_before[under][p], guest.stats_after[under][p]
            d = {k: a[k] - b[k] for k in ("attempts", "visited", "migrated")}
            # looks per cross-node pass: at most the window (sched/nr_migrate)
            assert d["attempts"] > 0 and d["visited"] <= window * d["attempts"], (under, d)
            if phase == "pinned":  # nothing may move off CPU 0 but kernel threads
                assert d["visited"] >= d["attempts"], (under, d)


def test_idle_hlt_is_never_stepped_over_where_sti_shadows(guest: qemu_check.GuestRun) -> None:
    # patch 0025: QEMU models STI's interrupt shadow, so no interrupt is
    # ever taken on the idle HLT; gem5 v24 does not (findings/2026-11-28-idle-hlt)
    assert qemu_check.idle_hlt_problems(guest, TOPO) == []
