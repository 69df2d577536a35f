"""qemu_check's console parser and checks, on a console captured from a real
boot of the release kernel (kernel-patches/qemu_check.py run --console-out)."""

import re
from pathlib import Path

import pytest
import qemu_check
from numa_lb.qemu import guest_topology, qemu_args
from qemu_check import MIGRATION_KEYS, POLICIES, SYSCTL_WRITES

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures/kernel/qemu-console-release.txt"


@pytest.fixture(scope="module")
def run() -> qemu_check.GuestRun:
    return qemu_check.parse_console(FIXTURE.read_text())


def test_parses_topology_and_sysctl(run: qemu_check.GuestRun) -> None:
    assert run.done
    assert run.online == "0-3"
    assert run.topo[2] == ("4-5", [16, 16, 10, 16])
    assert run.sysctl["invalid"] == "rejected"
    assert run.sysctl["unprivileged"] == "EACCES"
    assert run.kernel.startswith("6.1.")
    for case, want in SYSCTL_WRITES.items():
        assert run.sysctl[f"write_{case}"] == want
    assert run.access["numa_maps"] == {"open": "EACCES", "held": "ok"}
    assert run.access["after_exec"] == {"before": "ok", "after": "EACCES"}
    assert set(run.slab) == {"mm_struct", "signal_cache", "task_struct"}
    assert run.slab["mm_struct"]["slab_size"] >= run.slab["mm_struct"]["object_size"] > 0


def test_stats_rows_and_deltas(run: qemu_check.GuestRun) -> None:
    for p in POLICIES:
        assert set(run.stats_before[p]) == set(POLICIES)
        d = run.delta(p)
        assert d["attempts"] > 0
        # the stock loop either detaches or rejects every task it looks at
        if p == "default":
            assert d["visited"] == d["rejected"] + d["migrated"]
        else:
            verdicts = (
                d["evaluated"]
                + d["taken_leader_dst"]
                + d["skipped_leader"]
                + d["skipped_leader_src"]
                + d["skipped_seen"]
            )
            assert d["visited"] == d["rejected"] + verdicts
        assert d["picked_none"] <= d["attempts"]


def test_zombie_records(run: qemu_check.GuestRun) -> None:
    zombies = run.zombies()
    assert len(zombies) == 5 * len(POLICIES) + 2  # + numabal-0 and acct-0
    assert all(set(MIGRATION_KEYS) <= set(z) for z in zombies)
    assert len(run.zombies("tm-")) == 5 and len(run.zombies("numabal-")) == 1
    assert "vmstat_numa_pages_migrated" in run.numabal


def test_a_clean_run_has_no_problems(run: qemu_check.GuestRun) -> None:
    assert qemu_check.problems(run, list(POLICIES), guest_topology()) == []


def test_every_accounting_path_is_checked(run: qemu_check.GuestRun) -> None:
    assert qemu_check.accounting_problems(run) == []
    # a check that failed or did not run is a problem
    broken = qemu_check.parse_console(FIXTURE.read_text().replace(
        "check=cow_parent", "check=cow_elsewhere"))  # fmt: skip
    assert qemu_check.accounting_problems(broken) == ["accounting check cow_parent not reported"]
    failed = qemu_check.parse_console(
        re.sub(r"(check=migrate_pages .*)ok=1", r"\1ok=0", FIXTURE.read_text())
    )
    assert qemu_check.accounting_problems(failed)[0].startswith(
        "accounting check migrate_pages failed"
    )


def test_selection_policies_count_every_visit(run: qemu_check.GuestRun) -> None:
    # patch 0015: a ranked policy's visits are turned down or classified,
    # and a classified task left for the imbalance is counted as unfit
    for p in POLICIES:
        d = run.delta(p)
        if p != "default":
            assert d["unfit"] <= d["evaluated"] + d["taken_leader_dst"] + d["skipped_seen"]
        assert d["pass_max_ns"] > 0


def test_problems_are_reported(run: qemu_check.GuestRun) -> None:
    text = FIXTURE.read_text()
    broken = qemu_check.parse_console(
        text.replace("SYSCTL invalid=rejected", "SYSCTL invalid=accepted").replace(
            "ok=1", "ok=0", 1
        )
        + "\n[   9.000000] WARNING: CPU: 1 PID: 1 at mm/numa_rss.c:20 mm_numa_rss_check\n"
    )
    bad = "\n".join(qemu_check.problems(broken, list(POLICIES), guest_topology()))
    assert "invalid sysctl write" in bad
    assert "numa_rss invariant failed" in bad
    assert "kernel splat" in bad
    # the old handler accepted "tm\0" and "tm\nx"; a readable file after exec
    broken = qemu_check.parse_console(
        re.sub(
            r"(check=zombie .*) ok=1",
            r"\1 ok=0",
            text.replace("write_nul=EINVAL after_nul=mb", "write_nul=ok after_nul=tm").replace(
                "before=ok after=EACCES", "before=ok after=ok"
            ),
            count=1,
        )
    )
    bad = "\n".join(qemu_check.problems(broken, list(POLICIES), guest_topology()))
    assert "sysctl write nul: ok (want EINVAL), policy after tm" in bad
    assert "numa_lb_migrations across execve" in bad
    assert "numa_lb_migrations of " in bad
    # a different topology is noticed
    assert any("topology" in b for b in qemu_check.problems(run, [], guest_topology(distance=20)))


def test_thread_count_failures_are_reported(run: qemu_check.GuestRun) -> None:
    # /proc/<pid>/numa_lb_threads (patch 0017): a zombie still counting a
    # thread, a storm round whose counts did not return, a program whose
    # counts after the join miss a thread, a missing check, the kernel's
    # teardown warning, and the access rule
    assert qemu_check.thread_count_problems(run) == []
    text = FIXTURE.read_text()
    broken = qemu_check.parse_console(
        re.sub(r"(check=zombie .*)threads_left=0", r"\1threads_left=1", text, count=1)
    )
    assert any("still counts threads: 1" in b for b in qemu_check.thread_count_problems(broken))
    broken = qemu_check.parse_console(
        re.sub(r"(check=threads_storm .*)ok=1", r"\1ok=0", text, count=1)
    )
    assert qemu_check.accounting_problems(broken)[0].startswith(
        "accounting check threads_storm failed"
    )
    broken = qemu_check.parse_console(
        re.sub(r"(check=threads_joined .*)ok=1", r"\1ok=0", text, count=1)
    )
    assert any("after the join" in b for b in qemu_check.thread_count_problems(broken))
    broken = qemu_check.parse_console(text.replace("check=threads_fork", "check=threads_other"))
    assert "accounting check threads_fork not reported" in qemu_check.accounting_problems(broken)
    broken = qemu_check.parse_console(
        text.replace(
            "ACCESS file=numa_lb_threads open=EACCES", "ACCESS file=numa_lb_threads open=opened"
        )
        + "\n[   9.000000] BUG: Bad numa_lb_threads state signal:0000 node:1 threads:1\n"
    )
    bad = "\n".join(qemu_check.problems(broken, list(POLICIES), guest_topology()))
    assert "/proc/1/numa_lb_threads as nobody" in bad
    assert "kernel splat" in bad and "Bad numa_lb_threads" in bad


def test_programs_moving_more_than_the_policy_counted_is_reported() -> None:
    run = qemu_check.parse_console(FIXTURE.read_text())
    (z,) = [z for z in run.zombies("mb-") if z["tag"] == "mb-0"]
    z["balance_xnode"] = str(run.delta("mb")["migrated"] + 1)
    bad = qemu_check.migration_problems(run, ["mb"])
    assert any("policy mb: programs' balance_xnode" in b for b in bad), bad


def test_truncated_console_is_not_done() -> None:
    text = FIXTURE.read_text()
    cut = qemu_check.parse_console(text[: len(text) // 2])
    assert not cut.done
    assert "did not finish" in qemu_check.problems(cut, list(POLICIES), guest_topology())[0]


def test_qemu_arguments_describe_the_topology() -> None:
    args = qemu_args(guest_topology())
    assert args[args.index("-smp") + 1] == "8,sockets=4,cores=2,threads=1"
    assert "node,nodeid=3,cpus=6-7,memdev=m3" in args
    assert sum(a.startswith("dist,") for a in args) == 6
    with pytest.raises(ValueError, match="unknown policy"):
        qemu_check.boot(Path("/nonexistent"), ["firstfit"], "1:1", 1)
    with pytest.raises(ValueError, match="mix must be"):
        qemu_check.boot(Path("/nonexistent"), ["tm"], "1;rm -rf /", 1)


def test_printk_in_the_middle_of_a_line_is_cut_off() -> None:
    # captured from a real bench boot: the kernel's message landed on our line
    line = (
        "STRESS excl_base-11 check=running nodes=4 numa_rss_sum=1233 rss=1232 "
        "ok=1[   81.273204] hrtimer: interrupt took 23892170 ns"
    )
    run = qemu_check.parse_console(line + "\n")
    assert run.stress == [
        {
            "tag": "excl_base-11",
            "check": "running",
            "nodes": "4",
            "numa_rss_sum": "1233",
            "rss": "1232",
            "ok": "1",
        }
    ]


def test_the_rest_of_a_line_cut_by_a_printk_is_joined_back() -> None:
    # captured from a real bench boot: the console put the rest of our line
    # after the kernel's message, on the next line
    text = (
        "STRESS default-11 check=running nodes=4 numa_rss_sum=1216 rss=1045 "
        "min_node=[   16.689815] hrtimer: interrupt took 384540140 ns\r\n"
        "0 ok=1\r\n"
        "[   16.700000] another kernel line\r\n"
        "STRESS default-8 check=running nodes=4 ok=1\r\n"
    )
    run = qemu_check.parse_console(text)
    assert run.stress[0]["min_node"] == "0" and run.stress[0]["ok"] == "1"
    assert [s["tag"] for s in run.stress] == ["default-11", "default-8"]


def test_the_test_guest_skips_the_io_apic_timer_check() -> None:
    # a loaded host made the TCG guest fail the timer check and panic at boot
    append = qemu_check.initramfs_append("numa_lb_test.seconds=3")
    words = append.split()
    assert "no_timer_check" in words and words[-1] == "numa_lb_test.seconds=3"
    assert words[:2] == ["console=ttyS0", "panic=-1"]


def test_idle_hlt_row_is_parsed_and_zero_under_qemu(run: qemu_check.GuestRun) -> None:
    # patch 0025's /proc/interrupts row: QEMU models STI's shadow, so 0 on
    # every CPU of the captured boot, while rescheduling IPIs did arrive
    assert run.irq_rows["HLT"] == [0] * 8
    assert min(run.irq_rows["RES"]) > 0 and min(run.irq_rows["LOC"]) > 0
    assert qemu_check.idle_hlt_problems(run, guest_topology()) == []


def test_a_stepped_over_or_missing_hlt_row_is_a_problem(run: qemu_check.GuestRun) -> None:
    text = FIXTURE.read_text()
    stepped = qemu_check.parse_console(text.replace("IRQROW HLT 0 0 0", "IRQROW HLT 0 3 0", 1))
    assert "stepped over" in " ".join(qemu_check.idle_hlt_problems(stepped, guest_topology()))
    missing = qemu_check.parse_console(text.replace("IRQROW HLT", "IRQROW XLT", 1))
    assert "HLT row: None" in " ".join(qemu_check.idle_hlt_problems(missing, guest_topology()))
