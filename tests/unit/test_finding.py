"""analysis/results/finding.py: the positive control, the go/no-go gate, the
improvement per NUMA factor and the conclusion, on small tidy frames."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.results import finding
from analysis.results.guest import parse_results_file
from analysis.results.metrics import (
    add_speedup,
    guest_metrics,
    nb_scan_label,
    sched_scale_label,
)


def row(policy: str, f: float, rep: int, metric: str, value: float, **kw: Any) -> dict[str, Any]:
    return {"backend": "gem5", "sockets": 4, "cores_per_socket": 2, "numa_factor": f,
            "link_latency": None, "threads": 6, "mix": "lb3", "kernel_variant": "release",
            "pinning": "free", "numa_balancing": 0, "repeat": rep, "entity_type": "mix",
            "entity": "lb3", "policy": policy, "metric": metric, "value": value, **kw}  # fmt: skip


def test_positive_control_ratio_and_growth() -> None:
    rows = []
    for f, crossed in ((1.1, 1.02), (1.6, 1.10), (2.5, 1.30)):
        rows.append(row("stock", f, 0, "elapsed_s", 1.0, pinning="direct"))
        rows.append(row("stock", f, 0, "elapsed_s", crossed, pinning="crossed"))
        rows.append(row("stock", f, 0, "remote_ratio", 0.05, pinning="direct"))
        rows.append(row("stock", f, 0, "remote_ratio", 0.9, pinning="crossed"))
    ctl = finding.positive_control(pd.DataFrame(rows))
    assert ctl is not None
    assert ctl["crossed_over_direct"].round(3).tolist() == [1.02, 1.10, 1.30]
    assert finding.control_grows(ctl)
    flat = ctl.assign(crossed_over_direct=[1.1, 1.1, 1.2])
    assert not finding.control_grows(flat)
    # no crossed runs: no control
    assert finding.positive_control(pd.DataFrame(rows[:1])) is None


def test_positive_control_from_categorical_columns() -> None:
    """Frames keep spec columns as categoricals; a control given by factors has
    an all-missing link_latency. Found 2026-11-25: the lft8 control's report
    failed with "Cannot setitem on a Categorical with a new category"."""
    rows = []
    for f, crossed in ((1.1, 1.02), (2.5, 1.30)):
        rows.append(row("stock", f, 0, "elapsed_s", 1.0, pinning="direct"))
        rows.append(row("stock", f, 0, "elapsed_s", crossed, pinning="crossed"))
    df = pd.DataFrame(rows)
    for col in ("link_latency", "pinning", "mix", "policy"):
        df[col] = df[col].astype("category")
    ctl = finding.positive_control(df)
    assert ctl is not None and ctl["machine"].tolist() == ["f=1.1", "f=2.5"]
    assert ctl["crossed_over_direct"].round(3).tolist() == [1.02, 1.30]


def test_positive_control_ignores_free_runs_kept_beside_it() -> None:
    """The finding's frame holds the sweep (pinning free, another mix and time
    scale) and the control. Found 2026-11-25: the free runs became machines of
    their own with ratio "xnan", and the conclusion said the effect "does NOT
    grow with f" although the control grows."""
    rows = []
    for f, crossed in ((1.1, 1.02), (1.6, 1.10), (2.5, 1.30)):
        rows.append(row("stock", f, 0, "elapsed_s", 1.0, pinning="direct", mix="lft8"))
        rows.append(row("stock", f, 0, "elapsed_s", crossed, pinning="crossed", mix="lft8"))
        rows.append(row("stock", f, 0, "elapsed_s", 0.9, mix="lb3", sched_scale="bf=1"))
        rows.append(row("excl", f, 0, "elapsed_s", 0.8, mix="lb3", sched_scale="bf=1"))
    df = pd.DataFrame(rows)
    for col in ("pinning", "mix"):
        df[col] = df[col].astype("category")
    ctl = finding.positive_control(df)
    assert ctl is not None
    assert ctl["machine"].tolist() == ["f=1.1", "f=1.6", "f=2.5"]
    assert ctl["crossed_over_direct"].round(3).tolist() == [1.02, 1.10, 1.30]
    text = " ".join(finding.conclusion(finding.improvement_by_factor(df), None, ctl))
    assert "grows with f" in text and "NOT" not in text and "nan" not in text


def test_positive_control_by_link_latency_orders_links_numerically() -> None:
    # points given by link latency (no requested factor): one row per link, in
    # cycles order (150 after 60, not before as strings would sort)
    rows = []
    for ll, crossed in (("150", 1.30), ("10", 1.02), ("60", 1.10)):
        rows.append(row("stock", float("nan"), 0, "elapsed_s", 1.0, pinning="direct",
                        link_latency=ll))  # fmt: skip
        rows.append(row("stock", float("nan"), 0, "elapsed_s", crossed, pinning="crossed",
                        link_latency=ll))  # fmt: skip
    ctl = finding.positive_control(pd.DataFrame(rows))
    assert ctl is not None
    assert ctl["machine"].tolist() == ["link 10", "link 60", "link 150"]
    assert ctl["crossed_over_direct"].round(3).tolist() == [1.02, 1.10, 1.30]
    assert finding.control_grows(ctl)
    text = " ".join(finding.conclusion(finding.improvement_by_factor(pd.DataFrame(rows)),
                                       None, ctl))  # fmt: skip
    assert "link 60: x1.100" in text and "grows with f" in text
    one = finding.positive_control(pd.DataFrame(rows[:2]))
    assert one is not None and len(one) == 1
    text = " ".join(finding.conclusion(finding.improvement_by_factor(pd.DataFrame(rows[:2])),
                                       None, one))  # fmt: skip
    assert "one machine only" in text and "NOT" not in text


def test_positive_control_keeps_the_roi_cpu_models_apart() -> None:
    # the O3 control pair beside the timing one (issue 14 item 7): one row per
    # machine and CPU model, never averaged together, growth tested per model
    rows = []
    for cpu, ratios in (("timing", (1.10, 1.30)), ("o3", (1.05, 1.12))):
        for ll, crossed in zip(("60", "150"), ratios, strict=True):
            for pin, t in (("direct", 1.0), ("crossed", crossed)):
                rows.append(row("default", float("nan"), 0, "elapsed_s", t, pinning=pin,
                                link_latency=ll, cpu_roi=cpu))  # fmt: skip
    ctl = finding.positive_control(pd.DataFrame(rows))
    assert ctl is not None
    got = dict(zip(ctl["machine"], ctl["crossed_over_direct"].round(3), strict=True))
    assert got == {"link 60 [timing CPU]": 1.10, "link 150 [timing CPU]": 1.30,
                   "link 60 [o3 CPU]": 1.05, "link 150 [o3 CPU]": 1.12}  # fmt: skip
    assert finding.control_grows(ctl)
    # the O3 pair alone flat: the control does not grow, whatever the timing rows do
    flat = ctl.assign(crossed_over_direct=[1.1, 1.05, 1.1, 1.3])
    assert list(flat["variant"]) == ["[o3 CPU]", "[o3 CPU]", "[timing CPU]", "[timing CPU]"]
    assert not finding.control_grows(flat)
    # one model at one link each: nothing tested
    one = finding.positive_control(pd.DataFrame([r for r in rows if r["link_latency"] == "60"]))
    assert one is not None and not finding.control_grows(one)
    # one model only: no label suffix (frames kept before the column read None = timing)
    alone = finding.positive_control(pd.DataFrame([r for r in rows if r["cpu_roi"] == "o3"]))
    assert alone is not None and alone["machine"].tolist() == ["link 60", "link 150"]


def gate_frame(balance: float, taken: float, skipped: float) -> pd.DataFrame:
    rows = []
    for rep in range(2):
        rows.append(row("default", 1.6, rep, "migrations_balance_xnode", balance))
        rows.append(row("default", 1.6, rep, "migrations_active_balance_xnode", 5.0))
        for p in ("mbplus", "excl"):
            rows.append(row(p, 1.6, rep, "lb_taken_leader_dst", taken))
            rows.append(row(p, 1.6, rep, "lb_skipped_leader_src", skipped))
    return pd.DataFrame(rows)


def test_gate_leaves_pinned_runs_out() -> None:
    # the positive control's pinned runs (no balancing possible) beside a passing
    # free scenario: the gate is the free runs' verdict; pinned runs alone: none
    free = gate_frame(45.0, 3.0, 2.0)
    pinned = gate_frame(0.0, 0.0, 0.0).assign(pinning="crossed")
    g = finding.gate(pd.concat([free, pinned], ignore_index=True))
    assert g is not None and g.passed and len(g.rows) == 2 * (1 + 2 * 2)
    assert finding.gate(pinned) is None
    # a calibration's one-program runs (free, under default): no gate either
    one = gate_frame(0.0, 0.0, 0.0).assign(run_id=lambda d: "r" + d["repeat"].astype(str))
    prog = one.drop_duplicates("run_id").assign(entity_type="program", entity="pairs",
                                                metric="elapsed_s", value=1.0)  # fmt: skip
    assert finding.gate(pd.concat([one, prog], ignore_index=True)) is None
    three = pd.concat([prog.assign(entity=e) for e in ("a", "b", "c")], ignore_index=True)
    g3 = finding.gate(pd.concat([one, three], ignore_index=True))
    assert g3 is not None and not g3.passed  # several programs: gated (and failing here)


def test_gate_passes_and_fails_on_each_check() -> None:
    g = finding.gate(gate_frame(45.0, 3.0, 2.0))  # 45 + 5 active = 50
    assert g is not None and g.passed and not g.reasons
    g = finding.gate(gate_frame(44.0, 3.0, 2.0))
    assert g is not None and not g.passed
    assert len(g.reasons) == 2 and "cross-node balancing migrations = 49" in g.reasons[0]
    g = finding.gate(gate_frame(100.0, 3.0, 0.0))
    assert g is not None and not g.passed
    assert all("lb_skipped_leader_src" in r for r in g.reasons)
    # a counter the runs do not have is a failure, not a pass
    no_counters = gate_frame(100.0, 3.0, 2.0)
    no_counters = no_counters[no_counters["metric"] != "lb_taken_leader_dst"]
    g = finding.gate(no_counters)
    assert g is not None and not g.passed
    assert finding.gate(pd.DataFrame([row("stock", 1.6, 0, "elapsed_s", 1.0)])) is None


def test_gate_rows_carry_the_roi_and_the_rate_per_100_ms() -> None:
    fr = gate_frame(25.0, 3.0, 2.0)  # 25 + 5 = 30 per run
    roi = [row("default", 1.6, rep, "sim_seconds", 0.06) for rep in range(2)]
    g = finding.gate(pd.concat([fr, pd.DataFrame(roi)], ignore_index=True))
    assert g is not None and not g.passed
    d = g.rows[g.rows["policy"] == "default"]
    assert d["roi_s"].tolist() == [0.06, 0.06]
    assert [round(v, 6) for v in d["per_100ms"]] == [50.0, 50.0]
    # without the ROI length (qemu runs) the rate is unknown, not zero
    g = finding.gate(fr)
    assert g is not None and g.rows["per_100ms"].isna().all()


def test_improvement_per_factor_is_paired_and_flags_what_clears_its_interval() -> None:
    rows = []
    for rep, (t_stock, t_excl, t_mb) in enumerate(((10.0, 9.0, 10.1), (12.0, 10.8, 11.7),
                                                   (11.0, 9.9, 11.2))):  # fmt: skip
        rows += [row("stock", 1.6, rep, "elapsed_s", t_stock),
                 row("excl", 1.6, rep, "elapsed_s", t_excl),
                 row("mbplus", 1.6, rep, "elapsed_s", t_mb)]  # fmt: skip
    mx = add_speedup(pd.DataFrame(rows))
    imp = finding.improvement_by_factor(mx).set_index("policy")
    assert set(imp.index) == {"excl", "mbplus"}  # the baseline itself is not listed
    assert imp.loc["excl", "differs"] and not imp.loc["mbplus", "differs"]
    assert abs(imp.loc["excl", "mean"] - 100 * (10 / 9 - 1)) < 0.01
    text = finding.conclusion(finding.improvement_by_factor(mx), None, None)
    assert any(t.startswith("excl at f=1.6: +11.1 %") for t in text)
    assert not any(t.startswith("mbplus") for t in text)
    assert text[-1].startswith("Fidelity caveats:")
    qemu = finding.conclusion(finding.improvement_by_factor(mx), None, None, frozenset({"qemu"}))
    assert "NOT architectural" in qemu[-1] and not any("Fidelity" in t for t in qemu)


def test_one_pair_gives_no_interval_and_no_no_difference_claim() -> None:
    """One run per policy: the report says no interval exists, and does not
    claim that no policy differs (found in the 2026-11-25 pilot report)."""
    rows = [row("stock", 1.6, 0, "elapsed_s", 10.0), row("excl", 1.6, 0, "elapsed_s", 9.0)]
    imp = finding.improvement_by_factor(add_speedup(pd.DataFrame(rows)))
    assert imp["n"].tolist() == [1] and not imp["differs"].any()
    text = finding.conclusion(imp, None, None)
    assert any(t.startswith("No 95 % interval for excl at f=1.6") for t in text)
    assert not any("differs from the baseline" in t for t in text)
    # with a second policy that has three pairs, the sentence covers that one only
    for rep, t in enumerate((10.0, 12.0, 11.0)):
        rows += [row("stock", 2.5, rep, "elapsed_s", t), row("tm", 2.5, rep, "elapsed_s", t)]
    text = finding.conclusion(finding.improvement_by_factor(add_speedup(pd.DataFrame(rows))),
                              None, None)  # fmt: skip
    assert any("two or more paired repeats differs" in t for t in text)
    nointerval = next(t for t in text if t.startswith("No 95 % interval"))
    assert "excl at f=1.6" in nointerval and "tm" not in nointerval


def test_a_failed_gate_withholds_conclusions() -> None:
    g = finding.gate(gate_frame(1.0, 0.0, 0.0))
    imp = pd.DataFrame([{"policy": "excl", "numa_factor": 1.6, "mean": 5.0, "ci95_lo": 1.0,
                         "ci95_hi": 9.0, "n": 3, "differs": True}])  # fmt: skip
    text = finding.conclusion(imp, g, None)
    assert any("Gate: FAILED" in t and "not used for conclusions" in t for t in text)
    assert not any(t.startswith("excl at") for t in text)


def test_the_gate_names_machines_given_by_link_latency() -> None:
    """Points given by link latency (no requested factor) are named by the link,
    not as f=nan, and each link is its own machine."""
    rows = []
    for link, bal in (("60", 10.0), ("150", 80.0)):
        for m, v in (("migrations_balance_xnode", bal), ("migrations_active_balance_xnode", 0.0)):
            rows.append({**row("default", math.nan, 0, m, v), "link_latency": link})
    g = finding.gate(pd.DataFrame(rows))
    assert g is not None and not g.passed
    assert g.reasons == ["default link 60 r0: cross-node balancing migrations = 10 (needs >= 50)"]
    assert set(g.rows["machine"]) == {"link 60", "link 150"}


def test_the_gate_counts_each_mix_of_a_sweep_apart() -> None:
    """Two mixes at one machine (a pilot and its variant): each run is checked
    on its own, never summed across mixes."""
    rows = []
    for mix, bal in (("lb3", 26.0), ("lb3-2pass", 25.0)):
        for m, v in (("migrations_balance_xnode", bal), ("migrations_active_balance_xnode", 0.0)):
            rows.append({**row("default", math.nan, 0, m, v), "link_latency": "60", "mix": mix})
    g = finding.gate(pd.DataFrame(rows))
    assert g is not None and not g.passed
    assert sorted(g.rows["value"]) == [25.0, 26.0]
    assert set(g.rows["machine"]) == {"link 60 lb3", "link 60 lb3-2pass"}


def test_improvement_keeps_machines_given_by_link_latency_apart() -> None:
    # points given by link latency have no factor (NaN): grouping by the factor
    # alone merged link 60 and link 150 into one "by link" row
    rows = []
    for ll, gain in (("150", 0.8), ("60", 0.9)):
        for rep, t in enumerate((10.0, 11.0, 12.0)):
            rows += [row("stock", math.nan, rep, "elapsed_s", t, link_latency=ll),
                     row("excl", math.nan, rep, "elapsed_s", t * gain + 0.01 * rep,
                         link_latency=ll)]  # fmt: skip
    imp = finding.improvement_by_factor(add_speedup(pd.DataFrame(rows)))
    assert imp["machine"].tolist() == ["link 60", "link 150"]
    assert imp["n"].tolist() == [3, 3]
    assert abs(imp.iloc[0]["mean"] - 100 * (1 / 0.9 - 1)) < 0.5
    text = finding.conclusion(imp, None, None)
    assert any(t.startswith("excl at link 60: +") for t in text)
    assert any(t.startswith("excl at link 150: +") for t in text)


def test_machine_labels_name_the_mix_only_when_there_are_several() -> None:
    one = pd.DataFrame([{**row("default", math.nan, 0, "ipc", 1.0), "link_latency": "150"}])
    assert finding.machines_with_mix(one) == ["link 150"]
    two = pd.DataFrame(
        [{**row("default", math.nan, 0, "ipc", 1.0), "link_latency": ll, "mix": mx}
         for ll, mx in (("150", "lb3"), ("60", "lb3-block64"))]
    )  # fmt: skip
    labels = finding.machines_with_mix(two)
    assert labels == ["link 150 lb3", "link 60 lb3-block64"]
    # sorted by the link's cycles, not as strings
    assert sorted(labels, key=finding.machine_order) == ["link 60 lb3-block64", "link 150 lb3"]


def test_runs_at_different_balancer_time_scales_are_kept_apart() -> None:
    """The same machine and mix run under two sched_domain settings (kernel
    defaults vs a scaled migration cost): the gate checks each on its own and
    the improvement pairs and averages within one time scale only."""
    scaled = sched_scale_label({"level": "NUMA", "busy_factor": 1, "migration_cost_ns": 50000})
    assert scaled == "NUMA bf=1 mc=0.05ms"
    assert sched_scale_label(None) is None and sched_scale_label({"level": "NUMA"}) is None
    sliced = {"level": "NUMA", "latency_ns": 3000000, "min_granularity_ns": 375000}
    assert sched_scale_label({**sliced, "wakeup_granularity_ns": 500000, "hrtick": True}) == (
        "NUMA lat=3ms gran=0.375ms wake=0.5ms hrtick"
    )
    rows = []
    for sc, bal, gain in ((None, 20.0, 0.9), (scaled, 60.0, 0.5)):
        for m, v in (("migrations_balance_xnode", bal), ("migrations_active_balance_xnode", 0.0)):
            rows.append({**row("default", 1.6, 0, m, v), "sched_scale": sc})
        for rep, t in enumerate((10.0, 11.0, 12.0)):
            excl = row("excl", 1.6, rep, "elapsed_s", t * gain)
            rows += [{**row("stock", 1.6, rep, "elapsed_s", t), "sched_scale": sc},
                     {**excl, "sched_scale": sc}]  # fmt: skip
    mx = add_speedup(pd.DataFrame(rows))
    g = finding.gate(mx)
    assert g is not None
    dflt = g.rows[g.rows["policy"] == "default"]
    assert sorted(dflt["value"]) == [20.0, 60.0]
    assert set(dflt["machine"]) == {"f=1.6 [kernel defaults]", f"f=1.6 [{scaled}]"}
    imp = finding.improvement_by_factor(mx)
    got = dict(zip(imp["machine"], imp["mean"], strict=True))
    assert abs(got["f=1.6 [kernel defaults]"] - 100 * (1 / 0.9 - 1)) < 0.01
    assert abs(got[f"f=1.6 [{scaled}]"] - 100.0) < 0.01


def test_the_conclusion_states_its_resolution_and_the_repeats_a_narrower_one_needs() -> None:
    """'No difference beyond the interval' says little without the interval's
    width: the conclusion gives the median half-width and the paired repeats
    that +/-2 points would take at the measured spread."""
    # n = 3, sd 4.5 points: t(2) = 4.303, half-width 4.303 * 4.5 / sqrt 3 = 11.2
    assert finding.repeats_for(4.5, 11.18) == 3
    assert finding.repeats_for(4.5, 2.0) == 22  # t(21) 2.080 * 4.5 / sqrt 22 = 1.996
    assert finding.repeats_for(4.5, 1.99) == 23
    assert finding.repeats_for(0.0, 2.0) == 2  # repeats that do not vary
    assert finding.repeats_for(float("nan"), 2.0) is None
    rows = []
    for rep, (t_stock, t_excl) in enumerate(((10.0, 10.4), (10.0, 9.6), (10.0, 10.0))):
        rows += [row("stock", 1.6, rep, "elapsed_s", t_stock),
                 row("excl", 1.6, rep, "elapsed_s", t_excl)]  # fmt: skip
    imp = finding.improvement_by_factor(add_speedup(pd.DataFrame(rows)))
    text = " ".join(finding.conclusion(imp, None, None))
    assert "No policy with two or more paired repeats differs" in text
    assert "Resolution: the 95 % intervals are +/-" in text and "3 pairs each" in text
    sd = float(imp["std"].iloc[0])
    assert f"would need about {finding.repeats_for(sd, 2.0)} paired repeats" in text
    # one pair per point: no spread, no resolution sentence
    one = finding.improvement_by_factor(add_speedup(pd.DataFrame(rows[:2])))
    assert "Resolution" not in " ".join(finding.conclusion(one, None, None))


def test_improvement_per_program_is_paired_and_named_in_the_conclusion() -> None:
    """A policy can speed one program of the mix up while the mix's time, to
    its last exit, does not move: the per-program rows are compared too."""
    rows = []
    for rep, (lft_s, lft_x, pft_s, pft_x) in enumerate(((10.0, 9.0, 12.0, 12.5),
                                                        (11.0, 9.9, 12.0, 11.4),
                                                        (10.5, 9.4, 12.0, 12.1))):  # fmt: skip
        for pol, lft, pft in (("stock", lft_s, pft_s), ("excl", lft_x, pft_x)):
            rows.append(row(pol, 1.6, rep, "elapsed_s", max(lft, pft)))
            rows.append(row(pol, 1.6, rep, "elapsed_s", lft, entity_type="program", entity="lft"))
            rows.append(row(pol, 1.6, rep, "elapsed_s", pft, entity_type="program", entity="pft"))
    mx = add_speedup(pd.DataFrame(rows))
    progs = finding.improvement_by_program(mx).set_index("program")
    assert set(progs.index) == {"lft", "pft"} and (progs["n"] == 3).all()
    assert progs.loc["lft", "differs"] and not progs.loc["pft", "differs"]
    mix = finding.improvement_by_factor(mx[mx["entity_type"] == "mix"])
    assert not mix["differs"].any()
    progs_all = finding.improvement_by_program(mx)
    text = " ".join(finding.conclusion(mix, None, None, programs=progs_all))
    assert "Per program, beyond the 95 % interval (exploratory: 2 comparisons, about 0.1" in text
    assert "lft under excl at f=1.6 +11." in text
    assert "pft under" not in text
    # a failed gate withholds the per-program claims as well
    failed = finding.GateResult(pd.DataFrame(), False, ["default f=1.6 r0: ..."])
    text = " ".join(finding.conclusion(mix, failed, None, programs=progs_all))
    assert "Per program" not in text


def test_home_node_summary_per_program_on_two_real_runs() -> None:
    """home_node_by_program over the metrics of two gem5 runs of the finding
    preset (tests/fixtures/finding-b192): excl keeps both leader programs home
    in every sample, default does not; a frame without the metric gives none."""
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "finding-b192"
    rows = []
    for pol in ("default", "excl"):
        for et, ent, metric, v in guest_metrics(
            parse_results_file(fix / pol / "results.jsonl"), "m"
        ):
            rows.append(row(pol, 1.6, 0, metric, v, entity_type=et, entity=ent))
    t = finding.home_node_by_program(pd.DataFrame(rows)).set_index(["policy", "program"])
    assert len(t) == 6 and (t["home_node_share_size"] == 1).all()
    for prog in ("lft-a", "lft-b"):
        assert t.loc[("excl", prog), "home_node_share_min"] == 1.0
        assert t.loc[("excl", prog), "home_node_load_mean"] > 1.1
        assert t.loc[("default", prog), "home_node_share_max"] < 0.5
        # fork placement put every worker of these two runs beside its leader
        assert t.loc[("excl", prog), "start_home_share_min"] == 1.0
    no_home = pd.DataFrame([row("stock", 1.6, 0, "elapsed_s", 1.0, entity_type="program")])
    assert finding.home_node_by_program(no_home).empty


def test_a_failed_take_check_is_explained_when_the_threads_never_left_home() -> None:
    rows = [row("excl", 1.6, 0, "lb_taken_leader_dst", 0.0),
            row("excl", 1.6, 0, "lb_skipped_leader_src", 200.0),
            row("default", 1.6, 0, "migrations_balance_xnode", 99.0),
            row("default", 1.6, 0, "migrations_active_balance_xnode", 0.0)]  # fmt: skip
    g = finding.gate(pd.DataFrame(rows))
    assert g is not None and not g.passed
    imp = pd.DataFrame()
    home = pd.DataFrame([
        {"policy": "excl", "program": "lft-a", "home_node_share_min": 1.0},
        {"policy": "excl", "program": "pft", "home_node_share_min": 0.4},
        {"policy": "default", "program": "lft-a", "home_node_share_min": 0.3},
    ])  # fmt: skip
    text = " ".join(finding.conclusion(imp, g, None, home=home))
    assert "under excl every thread of lft-a was on its home node" in text
    # a program that did leave home explains nothing
    home.loc[0, "home_node_share_min"] = 0.9
    assert "Why the take check failed" not in " ".join(finding.conclusion(imp, g, None, home=home))
    # nor does a failure on default's leg alone
    ok = finding.gate(pd.DataFrame([{**rows[0], "value": 3.0}, *rows[1:]]))
    assert ok is not None and ok.passed
    home.loc[0, "home_node_share_min"] = 1.0
    assert "Why the take check failed" not in " ".join(finding.conclusion(imp, ok, None, home=home))


def test_nb_scan_label_and_machines_at_different_numa_scans_kept_apart() -> None:
    """NUMA balancing's scan settings (job option numa_balancing_scan) in one
    label; runs under two settings are two machines to the finding's tables."""
    full = {"scan_delay_ms": 10, "scan_period_min_ms": 5, "scan_period_max_ms": 20,
            "scan_size_mb": 64}  # fmt: skip
    assert nb_scan_label(full) == "delay=10ms period=5-20ms size=64MB"
    assert nb_scan_label({"scan_period_min_ms": 5}) == "period_min=5ms"
    assert nb_scan_label({"scan_period_max_ms": 20}) == "period_max=20ms"
    assert nb_scan_label(None) is None and nb_scan_label({}) is None
    scaled = nb_scan_label(full)
    rows = []
    for nbs, gain in ((None, 0.9), (scaled, 0.5)):
        for rep, t in enumerate((10.0, 11.0, 12.0)):
            rows += [{**row("stock", 1.6, rep, "elapsed_s", t), "nb_scan": nbs},
                     {**row("excl", 1.6, rep, "elapsed_s", t * gain), "nb_scan": nbs}]  # fmt: skip
    mx = add_speedup(pd.DataFrame(rows))
    imp = finding.improvement_by_factor(mx)
    got = dict(zip(imp["machine"], imp["mean"], strict=True))
    assert abs(got["f=1.6 [kernel scan]"] - 100 * (1 / 0.9 - 1)) < 0.01
    assert abs(got[f"f=1.6 [{scaled}]"] - 100.0) < 0.01
    # one setting only: no mark
    assert finding.machines_with_mix(pd.DataFrame(rows[:2])) == ["f=1.6", "f=1.6"]
