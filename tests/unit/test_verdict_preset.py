"""The verdict preset (analysis/sweep/presets/verdict.toml, issue 44 item 1):
it loads and expands, and each mix has the regime's shape as far as it can be
read from the spec (the regime itself is measured per run: the pilot's gate)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from analysis.sweep.matrix import points, run_count
from analysis.sweep.spec import load_spec, parse_bytes

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workloads"))
import parsec_catalog  # noqa: E402

MIXES = ("verdict-a", "verdict-b")
# Table 2 program -> (allocation class, synthetic stand-in), from the catalog
TABLE2 = {p.name: (p.allocation, p.synthetic) for p in parsec_catalog.PROGRAMS}


def spec():  # type: ignore[no-untyped-def]
    return load_spec(preset="verdict")


def test_the_preset_loads_and_expands_to_every_policy_and_mix() -> None:
    s = spec()
    assert s.backend == "gem5"
    assert s.axes["policy"] == ["default", "excl", "excl_ff", "mbplus", "mbplus_ff", "null"]
    assert (s.axes["sockets"], s.axes["cores_per_socket"]) == ([4], [2])
    assert s.axes["numa_factor"] == [1.6] and s.axes["numa_balancing"] == [0]
    assert tuple(s.axes["mix"]) == MIXES
    assert run_count(s) == 6 * 2 * s.repeats
    assert {p.policy for p in points(s, "gem5")} == set(s.axes["policy"])
    # the repeats are the pre-registration's to set: the file says so
    assert "PLACEHOLDER" in (REPO / "analysis/sweep/presets/verdict.toml").read_text()


@pytest.mark.parametrize("mix", MIXES)
def test_each_mix_has_the_papers_shape(mix: str) -> None:
    s = spec()
    progs = s.mixes[mix]
    cpus = s.axes["sockets"][0] * s.axes["cores_per_socket"][0]
    assert len(progs) >= 8
    workers = sum(p.get("threads", s.axes["threads"][0]) for p in progs)
    assert workers >= 3 * cpus  # >= 3 runnable threads per CPU while all run
    leader = 0
    for p in progs:
        # each program stands for a Table 2 program whose stand-in it is
        table2 = p["name"].split("-", 1)[1]
        alloc, synthetic = TABLE2[table2]
        assert p["workload"] == synthetic, p
        leader += alloc == parsec_catalog.LEADER
        # no sleeping: the busy fraction must come from the load
        assert not any(a.startswith(("--sleep-us", "--bursts")) for a in p["args"]), p
    assert leader / len(progs) == pytest.approx(22 / 30, abs=0.05)  # about 3/4
    # lengths differ: no two programs of one workload have the same size and passes
    work = [(p["workload"], *sorted(a for a in p["args"] if a != "--start-away")) for p in progs]
    assert len(set(work)) == len(work)


def test_the_two_candidates_differ_only_in_the_displaced_start() -> None:
    s = spec()
    a, b = s.mixes["verdict-a"], s.mixes["verdict-b"]
    strip = [{**p, "args": [x for x in p["args"] if x != "--start-away"]} for p in a]
    assert strip == b
    away = [p["name"] for p in a if "--start-away" in p["args"]]
    assert away and all(p["workload"] == "leader_ft" for p in a if p["name"] in away)
    assert not any("--start-away" in p["args"] for p in b)


def test_the_data_exceed_the_caches() -> None:
    """Memory matters only if the mix's data do not fit the 8 x 1 MiB of L2."""
    s = spec()
    for mix in MIXES:
        total = 0
        for p in s.mixes[mix]:
            size = parse_bytes(next(a for a in p["args"] if a.startswith("--size="))[7:], "size")
            threads = p.get("threads", s.axes["threads"][0])
            total += size * threads if p["workload"] == "perthread_ft" else size
        assert total > 8 << 20
