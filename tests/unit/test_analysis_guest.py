"""Guest result parser and guest-side metrics, on result files captured from real runs.

Fixtures: tests/fixtures/qemu-run (a 4-node QEMU boot of our kernel, made by the
disk-image tier), tests/fixtures/sweep-quick (the quick preset on QEMU) and
tests/fixtures/host-mixrunner (the mix runner on this 1-node host, scratch
sysctls). Expected values are recomputed here from the raw JSON lines, with
plain loops, not with the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.results.guest import parse_results_file, parse_results_text
from analysis.results.metrics import guest_metrics, lb_counters, start_home_share

FIX = Path(__file__).resolve().parents[1] / "fixtures"
QEMU = FIX / "qemu-run" / "results.jsonl"
SWEEP = sorted((FIX / "sweep-quick" / "runs").glob("*/guest/results.jsonl"))
VMSTAT = sorted((FIX / "sweep-quick-vmstat" / "runs").glob("*/guest/results.jsonl"))
HOST = sorted((FIX / "host-mixrunner").glob("*/results.jsonl"))
FINDING = FIX / "finding-b192"  # two gem5 runs of the finding preset (its README)
ALL = [QEMU, *SWEEP, *VMSTAT, *HOST]


def raw(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_fixtures_exist() -> None:
    assert QEMU.exists() and len(SWEEP) == 4 and len(VMSTAT) == 2 and len(HOST) == 2
    # both guest kernels are covered: without and with VM event counters
    assert not any("pgfault" in raw(p)[-1]["vmstat_delta"] for p in SWEEP)
    assert all("pgfault" in raw(p)[-1]["vmstat_delta"] for p in VMSTAT)


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(FIX)))
def test_records_are_split_by_type(path: Path) -> None:
    recs = raw(path)
    g = parse_results_file(path)
    assert g.complete and not g.errors
    assert g.run == next(r for r in recs if r["type"] == "run")
    assert g.run_end == recs[-1] and recs[-1]["type"] == "run_end"
    assert [p["name"] for p in g.programs] == [r["name"] for r in recs if r["type"] == "program"]
    assert len(g.thread_groups) == sum(r["type"] == "thread_group" for r in recs)


def rows_dict(rows: list[tuple]) -> dict[tuple[str, str, str], float]:
    d = {}
    for et, e, m, v in rows:
        assert (et, e, m) not in d, f"duplicate {(et, e, m)}"
        d[(et, e, m)] = v
    return d


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(FIX)))
def test_guest_metrics_recomputed_from_raw(path: Path) -> None:
    recs = raw(path)
    end = recs[-1]
    progs = [r for r in recs if r["type"] == "program"]
    tgs = [r for r in recs if r["type"] == "thread_group"]
    m = rows_dict(guest_metrics(parse_results_file(path), "mix"))
    assert m[("mix", "mix", "elapsed_s")] == end["elapsed_s"]
    for p in progs:
        n = p["name"]
        assert m[("program", n, "elapsed_s")] == p["elapsed_s"]
        assert m[("program", n, "page_faults")] == p["rusage"]["minflt"] + p["rusage"]["majflt"]
        mine = [t for t in tgs if t["program"] == n]
        km = p.get("kernel_migrations")
        if km is not None:  # the kernel's count at program end
            assert m[("program", n, "task_migrations")] == km["migrations"]
            assert m[("program", n, "cross_node_migrations")] == km["migrations_xnode"]
            # the sampled sum only sees threads alive at the last sample: a lower bound
            sampled = [t["nr_migrations"] for t in mine if t["nr_migrations"] is not None]
            assert sum(sampled) <= km["migrations"]
        elif mine and all(t["nr_migrations"] is not None for t in mine):
            # captured before the kernel counted per thread group: sampled, named so
            assert ("program", n, "task_migrations") not in m
            assert m[("program", n, "task_migrations_sampled")] == sum(
                t["nr_migrations"] for t in mine
            )
    assert m[("mix", "mix", "programs_failed")] == sum(p["exit_code"] != 0 for p in progs)
    vm = end["vmstat_delta"]
    if "pgfault" in vm:
        assert m[("mix", "mix", "page_faults")] == vm["pgfault"]
    else:  # tinyconfig guest without VM event counters: the programs' own faults
        assert m[("mix", "mix", "page_faults")] == sum(
            p["rusage"]["minflt"] + p["rusage"]["majflt"] for p in progs
        )
    if "pgmigrate_success" in vm:
        assert m[("mix", "mix", "page_migrations")] == vm["pgmigrate_success"]
    else:
        assert ("mix", "mix", "page_migrations") not in m or "numa_pages_migrated" in vm
    # NUMA balancing at work (its scan, the faults it caused): the kernel's counts
    for k in ("numa_pte_updates", "numa_hint_faults"):
        assert m.get(("mix", "mix", k)) == vm.get(k)


def test_guest_remote_ratio_by_hand_on_the_qemu_run() -> None:
    """kMLB view: share of a thread group's pages not on the node its tasks ran on."""
    tgs = [r for r in raw(QEMU) if r["type"] == "thread_group" and r["numa_rss_last"]]
    assert tgs, "the QEMU fixture carries numa_rss (the patched kernel)"
    num = den = 0.0
    for t in tgs:
        rss = t["numa_rss_last"]
        samples = t["node_samples"]
        tot_rss = sum(rss.values())
        tot_s = sum(samples.values())
        if not tot_rss or not tot_s:
            continue
        remote = 0.0
        for node, s in samples.items():
            remote += s / tot_s * (tot_rss - rss.get(node, 0)) / tot_rss
        num += remote * tot_s
        den += tot_s
    m = rows_dict(guest_metrics(parse_results_file(QEMU), "mix"))
    assert m[("mix", "mix", "remote_ratio_guest")] == pytest.approx(num / den)
    assert 0.0 <= num / den <= 1.0


def test_host_run_without_numa_rss_has_no_guest_remote_ratio() -> None:
    for p in HOST:
        m = rows_dict(guest_metrics(parse_results_file(p), "mix"))
        assert not any(k[2] in ("remote_ratio_guest", "home_node_share") for k in m)


def _home_by_hand(path: Path) -> dict[str, tuple[float, float]]:
    """program -> (home_node_share, home_node_load), with plain loops."""
    recs = raw(path)
    tgs = [r for r in recs if r["type"] == "thread_group"]
    every: dict[str, float] = {}
    for t in tgs:
        for n, c in (t["node_samples"] or {}).items():
            every[n] = every.get(n, 0) + c
    # the SLIT's node count; an older run record without it: the nodes seen
    nodes = len(next(r for r in recs if r["type"] == "run").get("distances") or every)
    out = {}
    for prog in sorted({t["program"] for t in tgs}):
        rss: dict[str, float] = {}
        ns: dict[str, float] = {}
        for t in tgs:
            if t["program"] == prog:
                for n, v in (t["numa_rss_last"] or {}).items():
                    rss[n] = rss.get(n, 0) + v
                for n, v in (t["node_samples"] or {}).items():
                    ns[n] = ns.get(n, 0) + v
        if not sum(rss.values()) or not sum(ns.values()):
            continue
        best = max(rss.values())
        home = sorted(n for n in rss if rss[n] == best)[0]
        out[prog] = (
            ns.get(home, 0) / sum(ns.values()),
            every.get(home, 0) / (sum(every.values()) / nodes),
        )
    return out


@pytest.mark.parametrize("path", [QEMU, FINDING / "default" / "results.jsonl"])
def test_home_node_share_and_load_by_hand(path: Path) -> None:
    want = _home_by_hand(path)
    assert want, "the fixture carries numa_rss (the patched kernel)"
    m = rows_dict(guest_metrics(parse_results_file(path), "mix"))
    for prog, (share, load) in want.items():
        assert m[("program", prog, "home_node_share")] == pytest.approx(share)
        assert m[("program", prog, "home_node_load")] == pytest.approx(load)
    assert not any(k[0] == "mix" and k[2].startswith("home_node") for k in m)


@pytest.mark.parametrize(
    "path", sorted(FINDING.glob("*/results.jsonl")), ids=lambda p: p.parent.name
)
def test_start_home_share_by_hand(path: Path) -> None:
    """Share of leader_ft workers whose first node was the leader's."""
    m = rows_dict(guest_metrics(parse_results_file(path), "mix"))
    progs = [r for r in raw(path) if r["type"] == "program"]
    for p in progs:
        res = p["result"]
        key = ("program", p["name"], "start_home_share")
        if "leader_node" not in res:
            assert key not in m  # perthread_ft has no leader's node
            continue
        recs = res["thread_records"]
        want = sum(1 for r in recs if r["node_start"] == res["leader_node"]) / len(recs)
        assert m[key] == pytest.approx(want)


def test_start_home_share_refuses_incomplete_records() -> None:
    recs = [{"node_start": 1}, {"node_start": 2}]
    assert start_home_share({"leader_node": 1, "thread_records": recs}) == 0.5
    assert start_home_share({"leader_node": -1, "thread_records": recs}) is None
    assert start_home_share({"leader_node": True, "thread_records": recs}) is None
    assert start_home_share({"leader_node": 1, "thread_records": []}) is None
    assert start_home_share({"leader_node": 1, "thread_records": [{"node_start": -1}]}) is None
    assert start_home_share({"thread_records": recs}) is None


def test_start_away_moved_each_worker_round_robin_off_the_leaders_node() -> None:
    """leader_ft --start-away on a real 4-node guest (QEMU): worker i went to
    the (i mod 3)-th node after its leader's, and said so."""
    progs = [
        r for r in raw(FINDING / "qemu-away-excl" / "results.jsonl")
        if r["type"] == "program" and r["result"].get("start_away")
    ]  # fmt: skip
    assert len(progs) == 2
    for p in progs:
        lead = p["result"]["leader_node"]
        got = [r["node_away"] for r in p["result"]["thread_records"]]
        assert got == [(lead + 1 + i % 3) % 4 for i in range(6)]


def test_excl_keeps_every_leader_thread_on_its_home_node() -> None:
    """The finding sweep's mechanism (findings/2026-11-26-finding-b192): under
    excl the leader-first-touch programs never leave their home node, which holds
    more than the mean number of threads; under default they roam."""
    excl = rows_dict(guest_metrics(parse_results_file(FINDING / "excl" / "results.jsonl"), "m"))
    dflt = rows_dict(guest_metrics(parse_results_file(FINDING / "default" / "results.jsonl"), "m"))
    for prog in ("lft-a", "lft-b"):
        assert excl[("program", prog, "home_node_share")] == 1.0
        assert excl[("program", prog, "home_node_load")] > 1.1
        assert dflt[("program", prog, "home_node_share")] < 0.5


def test_patch_counters_from_the_raw_file_text() -> None:
    for path in [QEMU, *SWEEP, *VMSTAT]:
        lb = raw(path)[-1]["sched_numa_lb_stats"]
        assert lb["status"] == "present"

        def table(text: str) -> dict[str, dict[str, int]]:
            lines = [x.split() for x in text.splitlines() if x.strip() and not x.startswith("#")]
            head = lines[0][1:]
            return {row[0]: dict(zip(head, map(int, row[1:]), strict=True)) for row in lines[1:]}

        before, after = table(lb["before_raw"]), table(lb["after_raw"])
        want = {k: sum(after[p][k] - before[p][k] for p in after) for k in after["default"]}
        assert lb_counters(lb) == {k: float(v) for k, v in want.items()}
        m = rows_dict(guest_metrics(parse_results_file(path), "mix"))
        assert m[("mix", "mix", "lb_migrated")] == want["migrated"]


def test_truncated_results_keep_earlier_records_and_report_an_error() -> None:
    text = QEMU.read_text()
    lines = text.splitlines(keepends=True)
    cut = "".join(lines[:3]) + lines[3][: len(lines[3]) // 2]
    g = parse_results_text(cut)
    assert not g.complete
    assert g.run is not None and len(g.programs) == 2
    assert g.errors and "line 4: not JSON" in g.errors[0]
    g = parse_results_text("".join(lines[:-1]))
    assert not g.complete and "no 'run_end'" in g.errors[0]
    g = parse_results_text("")
    assert g.errors and g.run is None
    # metrics of an incomplete file: what is there, no crash
    rows = rows_dict(guest_metrics(parse_results_text("".join(lines[:-1])), "mix"))
    assert ("mix", "mix", "elapsed_s") not in rows and ("program", "lft", "elapsed_s") in rows


BLOCKING = FIX / "qemu-blocking" / "results.jsonl"


def test_thread_refusals_are_the_workers_kernel_counts_summed() -> None:
    """lb3-block128 on QEMU: each worker's /proc/thread-self/sched counts
    (schedstats on) summed per program and per mix, recomputed by hand."""
    recs = raw(BLOCKING)
    progs = [r for r in recs if r.get("type") == "program"]
    want: dict[str, dict[str, float]] = {}
    for p in progs:
        for t in p["result"]["thread_records"]:
            for key in ("failed_hot", "failed_running", "failed_affine", "forced"):
                assert t[key] >= 0  # printed: the runner switched schedstats on
                d = want.setdefault(p["name"], {})
                d[key] = d.get(key, 0) + t[key]
    rows = guest_metrics(parse_results_file(BLOCKING), "lb3-block128")
    got = {(e, m): v for kind, e, m, v in rows}
    names = {"failed_hot": "thread_refused_hot", "failed_running": "thread_refused_running",
             "failed_affine": "thread_refused_affine", "forced": "thread_forced_hot"}  # fmt: skip
    for prog, counts in want.items():
        for key, metric in names.items():
            assert got[(prog, metric)] == counts[key]
    for key, metric in names.items():
        assert got[("lb3-block128", metric)] == sum(c[key] for c in want.values())
    assert got[("lb3-block128", "thread_refused_running")] > 0  # this run refused some
    # records from before the counters (or a kernel that printed none: -1) give no rows
    for path in (QEMU, *HOST):
        mix = raw(path)[0].get("job", {}).get("mix") or "mix"
        assert not [r for r in guest_metrics(parse_results_file(path), mix) if "thread_" in r[2]]
