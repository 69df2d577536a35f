"""Sweep spec: presets, overrides, validation messages, matrix expansion, guest jobs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workloads"))

import mixrunner  # noqa: E402

from analysis.sweep.matrix import guest_job, points, resources_for  # noqa: E402
from analysis.sweep.point import point_id  # noqa: E402
from analysis.sweep.spec import (  # noqa: E402
    DAEMON_POLICIES,
    POLICIES,
    STUDY_POLICIES,
    SpecError,
    load_spec,
    parse_bytes,
    parse_duration,
    parse_override,
    preset_names,
    validate,
)


def test_presets_shipped_and_valid() -> None:
    assert {"quick", "paper", "sensitivity"} <= set(preset_names())
    for name in preset_names():
        spec = load_spec(preset=name)
        assert spec.name == name
        assert points(spec, "qemu")


def test_quick_is_tiny_qemu_two_policies_one_mix_one_repeat() -> None:
    s = load_spec(preset="quick")
    assert s.backend == "qemu"
    assert len(s.axes["policy"]) == 2 and len(s.axes["mix"]) == 1 and s.repeats == 1
    assert len(points(s, "qemu")) == 2
    assert s.resources["time_limit_s"] <= 15 * 60


def test_paper_preset_matches_the_paper_setup() -> None:
    s = load_spec(preset="paper")
    # the unmodified kernel and the seven policies, all with NUMA balancing on
    # as on the paper's 3.11 kernel
    paper = [p for p in POLICIES if p != "autonuma" and p not in DAEMON_POLICIES + STUDY_POLICIES]
    assert s.axes["policy"] == paper
    assert s.axes["policy"][0] == "stock"
    assert s.axes["numa_balancing"] == [1]
    assert s.axes["numa_factor"] == [1.6]
    assert s.axes["sockets"] == [4] and s.axes["cores_per_socket"] == [8]
    assert s.axes["threads"] == [1, 2, 4, 8, 16, 32]
    progs = s.mixes[s.axes["mix"][0]]
    assert all("parsec" in p for p in progs)
    pts = points(s, "gem5")
    assert len(pts) == 8 * 6 * s.repeats and {p.numa_balancing for p in pts} == {1}


def test_sensitivity_varies_factor_and_cores() -> None:
    s = load_spec(preset="sensitivity")
    assert min(s.axes["numa_factor"]) == 1.2 and max(s.axes["numa_factor"]) == 3.0
    assert min(s.axes["cores_per_socket"]) == 1 and max(s.axes["cores_per_socket"]) == 8


@pytest.mark.parametrize(
    "override, field, allowed",
    [
        (
            "axes.policy=default,first_fit",
            "axes.policy[1]",
            "default, tm, mb, bce, mbplus, excl_base, excl, autonuma",
        ),
        ("sweep.backend=kvm", "sweep.backend", "auto, qemu, gem5"),
        ("axes.sockets=9", "axes.sockets[0]", "integers 1..8"),
        ("axes.cores_per_socket=0", "axes.cores_per_socket[0]", "integers 1..16"),
        ("axes.numa_factor=1.0", "axes.numa_factor[0]", "(1.0, 10.0]"),
        ("axes.polcy=default", "axes.polcy", "policy, numa_balancing, numa_factor"),
        ("axes.mix=nope", "axes.mix[0]", "tiny"),
        ("job.pinning=everywhere", "job.pinning", "free, direct, interleave, crossed"),
        ("cpu.roi=atomic", "cpu.roi", "timing, o3"),
        ("cpu.post_roi=timing", "cpu.post_roi", "atomic, roi"),
        ('cpu={boot="timing",roi="o3",post_roi="atomic"}', "cpu.post_roi", "needs cpu.boot"),
        ('gem5.args=["--cpu-post-roi", "roi"]', "gem5.args[0]", "[cpu]"),
        ("job.warmup_s=2", "job.warmup_s", "0..1.0"),
        ("job.warmup_s=-0.01", "job.warmup_s", "0..1.0"),
        ("job.warmup_s=true", "job.warmup_s", "a number"),
        ("sweep.kernel_variant=fast", "sweep.kernel_variant", "release, debug"),
        ("machine.inter_socket=mesh", "machine.inter_socket", "full, ring"),
        ('resources.time_limit="soon"', "resources.time_limit", "30m"),
        ('resources.slurm_extra=["--x=1; rm -rf /"]', "resources.slurm_extra[0]", "--name=value"),
        ("bogus.key=1", "bogus", "axes"),
        ("machine.boot_checkpoints=0", "machine.boot_checkpoints", "1..64"),
        ("sweep.first_repeat=-1", "sweep.first_repeat", "0..100000"),
        ("machine.boot_checkpoints=65", "machine.boot_checkpoints", "1..64"),
        ('machine.boot_checkpoints="3"', "machine.boot_checkpoints", "1..64"),
        ("job.numa_balancing_scan=10", "job.numa_balancing_scan", "a table"),
        ("job.numa_balancing_scan={}", "job.numa_balancing_scan", "scan_delay_ms"),
        (
            "job.numa_balancing_scan={scan_delay=10}",
            "job.numa_balancing_scan.scan_delay",
            "scan_delay_ms, scan_period_min_ms, scan_period_max_ms, scan_size_mb",
        ),
        (
            "job.numa_balancing_scan={scan_delay_ms=0}",
            "job.numa_balancing_scan.scan_delay_ms",
            "1..1000000",
        ),
        (
            "job.numa_balancing_scan={scan_size_mb=0}",
            "job.numa_balancing_scan.scan_size_mb",
            "1..65536",
        ),
        (
            "job.numa_balancing_scan={scan_size_mb=65537}",
            "job.numa_balancing_scan.scan_size_mb",
            "1..65536",
        ),
        (
            'job.numa_balancing_scan={scan_period_min_ms="10"}',
            "job.numa_balancing_scan.scan_period_min_ms",
            "an integer",
        ),
        (
            "job.numa_balancing_scan={scan_period_max_ms=1.5}",
            "job.numa_balancing_scan.scan_period_max_ms",
            "an integer",
        ),
        (
            "job.numa_balancing_scan={scan_period_max_ms=true}",
            "job.numa_balancing_scan.scan_period_max_ms",
            "an integer",
        ),
        (
            "job.numa_balancing_scan={scan_period_min_ms=100, scan_period_max_ms=10}",
            "job.numa_balancing_scan.scan_period_min_ms",
            "above scan_period_max_ms",
        ),
        ("job.switch_marks=1", "job.switch_marks", "true or false"),
        ("job.sched_domain={latency_ns=3000000}", "job.sched_domain", "together"),
        (
            "job.sched_domain={latency_ns=3000000, min_granularity_ns=1000000}",
            "job.sched_domain",
            "round up to 8",
        ),
    ],
)
def test_validation_names_field_and_allowed_values(override: str, field: str, allowed: str) -> None:
    with pytest.raises(SpecError) as ei:
        load_spec(preset="quick", overrides=[override])
    assert ei.value.field == field
    assert allowed in str(ei.value)


def test_topology_errors_name_the_axis_combination() -> None:
    with pytest.raises(SpecError) as ei:
        load_spec(preset="quick", overrides=['machine.mem_per_node="100MiB"'])
    assert "sockets=4, cores_per_socket=2, numa_factor=1.6" in ei.value.field
    assert "mem_per_node" in str(ei.value)


def test_mix_errors_come_from_the_guest_validator() -> None:
    doc = {"mixes": {"m": {"programs": [{"name": "a", "workload": "no_such_workload"}]}}}
    with pytest.raises(SpecError) as ei:
        validate(doc)
    assert ei.value.field == "mixes.m.programs"
    assert "unknown workload" in str(ei.value)


def test_paper_catalog_requires_naming_the_excluded_program() -> None:
    with pytest.raises(SpecError) as ei:
        validate({"mixes": {"p": {"catalog": "paper"}}})
    assert ei.value.field == "mixes.p.exclude"
    assert "parsec.canneal" in str(ei.value)
    s = validate({"mixes": {"p": {"catalog": "paper", "exclude": "parsec.vips"}}})
    assert len(s.mixes["p"]) == 29


def test_numa_factor_and_link_latency_are_exclusive() -> None:
    with pytest.raises(SpecError) as ei:
        load_spec(preset="quick", overrides=['axes.link_latency="20ns"'])
    assert ei.value.field == "axes.link_latency"
    s = load_spec(preset="quick", overrides=["axes.numa_factor=[]", 'axes.link_latency="20ns"'])
    p = points(s, "qemu")[0]
    assert p.numa_factor is None and p.link_latency == "20ns"


def test_overrides_parse_toml_values_and_comma_lists() -> None:
    assert parse_override("sweep.repeats=3") == (["sweep", "repeats"], 3)
    assert parse_override("axes.policy=default,excl") == (["axes", "policy"], ["default", "excl"])
    assert parse_override("axes.numa_factor=[1.2, 2.0]") == (["axes", "numa_factor"], [1.2, 2.0])
    assert parse_override('gem5.args=["--a", "b c"]') == (["gem5", "args"], ["--a", "b c"])
    s = load_spec(preset="quick", overrides=["axes.threads=1,2,4", "sweep.repeats=2"])
    assert len(points(s, "qemu")) == 2 * 3 * 2
    with pytest.raises(SpecError):
        parse_override("no_equals_sign")


def test_units() -> None:
    assert parse_bytes("2GiB", "x") == 2 << 30
    assert parse_bytes("1536MiB", "x") == 1536 << 20
    assert parse_duration("1h30m", "x") == 5400
    assert parse_duration("01:30:00", "x") == 5400
    assert parse_duration("1-00:00:00", "x") == 86400
    assert parse_duration(90, "x") == 90
    for bad in ("0", "-5m", "1h 30", "", "x"):
        with pytest.raises(SpecError):
            parse_duration(bad, "x")


def test_expansion_order_repeat_outermost_policy_innermost() -> None:
    s = load_spec(preset="quick", overrides=["axes.threads=2,4", "sweep.repeats=2"])
    pts = points(s, "qemu")
    assert [(p.repeat, p.threads, p.policy) for p in pts] == [
        (r, t, pol) for r in (0, 1) for t in (2, 4) for pol in ("default", "excl")
    ]
    assert all(p.programs[0]["threads"] == p.threads for p in pts)


def test_guest_job_is_a_valid_mixrunner_job_and_autonuma_maps() -> None:
    s = load_spec(preset="quick", overrides=["axes.policy=default,autonuma,excl"])
    for p in points(s, "qemu"):
        job = guest_job(p, "rid")
        norm = mixrunner.load_job(json.loads(json.dumps(job)))
        if p.policy == "autonuma":
            assert (norm["policy"], norm["numa_balancing"]) == ("default", 1)
            assert norm["policy_requested"] == "autonuma" and p.numa_balancing == 1
        else:
            assert (norm["policy"], norm["numa_balancing"]) == (p.policy, 0)
        assert norm["strict_policy"] is True
        # the runner's default restores the sysctls (a run on a host); a guest
        # powers off after the hand-back, so its job does not
        assert norm["restore_sysctls"] is False


def test_numa_balancing_is_an_explicit_axis_recorded_in_every_point() -> None:
    s = load_spec(preset="quick", overrides=["axes.numa_balancing=0,1"])
    pts = points(s, "qemu")
    assert [(p.numa_balancing, p.policy) for p in pts] == [
        (0, "default"),
        (0, "excl"),
        (1, "default"),
        (1, "excl"),
    ]
    assert [guest_job(p, "r")["numa_balancing"] for p in pts] == [0, 0, 1, 1]
    assert all(p.as_columns()["numa_balancing"] == p.numa_balancing for p in pts)
    for bad, match in (
        ("axes.numa_balancing=2", r"axes\.numa_balancing\[0\]"),
        ("axes.numa_balancing=true", r"axes\.numa_balancing\[0\]"),
        ("axes.numa_balancing=[]", "must not be empty"),
    ):
        with pytest.raises(SpecError, match=match):
            load_spec(preset="quick", overrides=[bad])
    with pytest.raises(SpecError, match="autonuma is default with numa_balancing=1"):
        load_spec(preset="quick", overrides=["axes.policy=default,autonuma",
                                             "axes.numa_balancing=1"])  # fmt: skip


def test_resource_overrides_match_point_fields() -> None:
    s = load_spec(preset="paper")
    by_t = {p.threads: resources_for(s, p) for p in points(s, "gem5") if p.repeat == 0}
    assert by_t[32].mem_bytes == 24 << 30 and by_t[8].mem_bytes == 16 << 30


def test_ruby_randomization_is_refused_for_study_runs() -> None:
    """--perturb replaces every Ruby delay by 1-4 random ticks: the NUMA factor is gone."""
    for arg in ("--perturb", "--perturb=1"):
        with pytest.raises(SpecError, match=r"gem5\.args\[1\]: --perturb is refused"):
            load_spec(preset="gem5-small", overrides=[f'gem5.args=["--seed", "{arg}"]'])


def test_exclude_rules_drop_points_and_keep_the_count_exact() -> None:
    from analysis.sweep.matrix import run_count  # noqa: PLC0415

    over = [
        "axes.policy=stock,default,excl",
        "axes.numa_factor=1.1,1.6,2.5",
        'exclude=[{policy = ["default"], numa_factor = [1.1, 2.5]}]',
    ]
    s = load_spec(preset="quick", overrides=over)
    pts = points(s, "qemu")
    assert len(pts) == run_count(s) == (9 - 2) * s.repeats * len(s.axes["mix"])
    assert not [p for p in pts if p.policy == "default" and p.numa_factor != 1.6]
    assert {p.numa_factor for p in pts if p.policy == "stock"} == {1.1, 1.6, 2.5}


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ('[{policy = ["tm"]}]', "not a value of axes.policy"),
        ('[{colour = ["red"]}]', "unknown axis"),
        ('[{policy = ["default"]}, {policy = ["default", "excl"]}]', "overlaps exclude"),
        ('[{policy = ["stock", "default", "excl"]}]', "exclude every point"),
        ('"default"', "list of tables"),
    ],
)
def test_bad_exclude_rules_are_refused(rules: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_spec(preset="quick", overrides=["axes.policy=stock,default,excl", f"exclude={rules}"])


def test_narrowing_an_axis_on_the_command_line_narrows_the_presets_exclude_rules() -> None:
    """`--policies default,excl,mbplus --numa-factors 1.6` on `finding` (whose rule
    names tm, mb, ...) runs those 9 points; it used to fail on the rule."""
    s = load_spec(preset="finding", overrides=["axes.policy=default,excl,mbplus",
                                               "axes.numa_factor=1.6"])  # fmt: skip
    pts = points(s, "gem5")
    assert len(pts) == 9 and {p.numa_factor for p in pts} == {1.6}
    # the rule survives, narrowed, where it still excludes something
    s = load_spec(preset="finding", overrides=["axes.policy=stock,default"])
    assert s.exclude == [{"policy": ["default"], "numa_factor": [1.1, 2.5]}]
    assert {(p.policy, p.numa_factor) for p in points(s, "gem5") if p.repeat == 0} == {
        ("stock", 1.1),
        ("stock", 1.6),
        ("stock", 2.5),
        ("default", 1.6),
    }
    # a misspelt value in a rule the file gives is still refused for an axis not overridden
    with pytest.raises(SpecError, match="not a value of axes.policy"):
        load_spec(preset="quick", overrides=["axes.numa_factor=1.6",
                                             'exclude=[{policy = ["tm"]}]'])  # fmt: skip


def test_numa_balancing_scan_reaches_the_job_and_is_absent_otherwise() -> None:
    """job.numa_balancing_scan: in the points and the guest job when set; absent
    from both (not null) when not, so the run ids of sweeps without it stay."""
    s = load_spec(preset="quick")
    assert "numa_balancing_scan" not in s.job
    p = points(s, "qemu")[0]
    assert "numa_balancing_scan" not in p.job_options
    assert "numa_balancing_scan" not in guest_job(p, "rid")
    scan = "{scan_delay_ms=10, scan_period_min_ms=10, scan_period_max_ms=100, scan_size_mb=16}"
    s = load_spec(preset="quick", overrides=[f"job.numa_balancing_scan={scan}"])
    want = {"scan_delay_ms": 10, "scan_period_min_ms": 10, "scan_period_max_ms": 100,
            "scan_size_mb": 16}  # fmt: skip
    p = points(s, "qemu")[0]
    assert p.job_options["numa_balancing_scan"] == want
    job = guest_job(p, "rid")
    assert job["numa_balancing_scan"] == want
    # the guest's own validator takes the job as it is
    assert mixrunner.load_job(job)["numa_balancing_scan"] == want


def test_switch_marks_reach_the_job_only_when_asked() -> None:
    """job.switch_marks (kernel patch 0024's context-switch marks) is in a
    run's job only when true, so the run ids of sweeps without it stay; the
    stock kernel has no such sysctl and is refused before anything runs."""
    plain = points(load_spec(preset="quick"), "gem5")[0]
    marked = points(load_spec(preset="quick", overrides=["job.switch_marks=true"]), "gem5")[0]
    assert "switch_marks" not in plain.job_options and marked.job_options["switch_marks"]
    assert "switch_marks" not in guest_job(plain, "r")
    assert guest_job(marked, "r")["switch_marks"] is True
    assert point_id(plain) != point_id(marked)
    with pytest.raises(SpecError, match="patch 0024") as ei:
        load_spec(
            preset="quick", overrides=["job.switch_marks=true", 'axes.policy=["stock","default"]']
        )
    assert ei.value.field == "job.switch_marks"
