"""The known-answer checks of tests/gem5/test_attribution_gem5.py on records
made by the real classes: a CounterBridge over scripted statistic values
(tests/unit/test_daemon_attribution.py's Machine: a unit test of our
arithmetic, not a gem5 output), its TaskLedger charged by switch marks, its
end record (``close``) as counter_bridge.json carries it; the daemon's
interval record with IMAR's per-thread terms; the gem5 test's jobs through
the mix runner's own validation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workloads"))

import mix_job  # noqa: E402

from tests.gem5 import attribution_checks as ak  # noqa: E402
from tests.gem5 import test_attribution_gem5 as tg  # noqa: E402
from tests.unit.test_daemon_attribution import (  # noqa: E402
    Machine,
    daemon,
    records,
    scripted,
    views_of,
)


def end_record(m: Machine) -> dict:
    """counter_bridge.json's ``final`` as written (through JSON)."""
    m.bridge.close()
    m.bridge.write_record()
    return json.loads((m.bridge.outdir / "counter_bridge.json").read_text())["final"]


def time_shared(tmp: Path) -> tuple[Machine, dict]:
    """CPU 3 (socket 1) time-shared by task 11 (compute: 1000 insts per slice,
    1 miss) and task 22 (chaser: 100 insts, 40 misses); CPU 0 runs 5 (the
    runner) and idle; CPU 2 never marks.

    CPU 3: 50 insts before any mark, then 11, 22, 11, 22, idle:
    11: 2000 insts, 2 misses, 3000 cycles; 22: 200, 80, 4000.
    """
    m = Machine(tmp)
    m.run(3, 50, 3, 70)
    m.run(0, 9, 0, 9)
    m.run(2, 123, 4, 200)  # CPU 2: no mark ever (counted, charged to nobody)
    m.mark(0, 5)
    m.mark(3, 11)
    for pid, (i, mi, c) in ((22, (1000, 1, 1500)), (11, (100, 40, 2000)),
                            (22, (1000, 1, 1500)), (0, (100, 40, 2000))):  # fmt: skip
        m.run(3, i, mi, c)  # the task running since the last mark
        m.mark(3, pid)  # then the switch to PID
    m.run(0, 30, 2, 40)  # task 5 still running at the end
    m.run(3, 7, 0, 11)  # idle, still running at the end
    # socket 1 sent 79 requests: 1 homed at node 1 (its own), 78 at node 0
    m.bridge.reply(1)
    return m, end_record_with(m, [[3, 0], [78, 1]])


def end_record_with(m: Machine, mem: list[list[float]]) -> dict:
    """The end record with a request matrix (gem5: the link throttles, not
    scripted here; as test_daemon_attribution gives it to the replies)."""
    rec = end_record(m)
    rec.update(mem_requests=mem, mem_consistent=True)
    rec.pop("mem_reason", None)
    return rec


def test_the_books_balance_per_cpu_and_a_wrong_charge_shows(tmp_path: Path) -> None:
    _, final = time_shared(tmp_path)
    pc = final["per_cpu"]
    assert pc["2"]["marked"] is False and pc["2"]["tasks"] == {}
    assert pc["3"]["unattributed"] == {"insts": 50, "llc_misses": 3, "busy_cycles": 70}
    assert pc["3"]["tasks"]["11"] == {"insts": 2000, "llc_misses": 2, "busy_cycles": 3000}
    assert pc["3"]["tasks"]["22"] == {"insts": 200, "llc_misses": 80, "busy_cycles": 4000}
    assert pc["3"]["tasks"]["0"] == {"insts": 7, "llc_misses": 0, "busy_cycles": 11}
    assert pc["0"]["tasks"]["5"]["insts"] == 30  # running: charged up to the end
    # CPUs 1 and 2 never marked: no books to balance there
    assert ak.identity_gaps(final) == {c: {k: 0 for k in ak.COUNTERS} for c in (0, 3)}
    assert ak.identity_problems(final) == []
    # the whole-machine view agrees with the per-CPU one
    assert ak.attributed(final, [11, 22]) == ak.attributed(final, [11, 22], cpu=3)
    bad = json.loads(json.dumps(final))
    bad["per_cpu"]["3"]["tasks"]["22"]["insts"] += 1
    assert ak.identity_problems(bad) == ["cpu 3 insts: totals 2257.0 - charged = -1.0"]
    # rounding is not a gap: busy cycles off by less than the record's 3 decimals
    bad = json.loads(json.dumps(final))
    bad["per_cpu"]["3"]["tasks"]["22"]["busy_cycles"] += 0.0004
    assert ak.identity_problems(bad) == []


def test_each_tasks_counts_mpki_and_the_node_split(tmp_path: Path) -> None:
    _, final = time_shared(tmp_path)
    comp, chase = ak.attributed(final, [11]), ak.attributed(final, [22])
    assert ak.mpki(comp) == 1.0 and ak.mpki(chase) == 400.0
    # socket 1's misses: CPU 2's 4 and CPU 3's 3 + 2 + 80 = 89; 22 had 80:
    # 80/89 of the row [78, 1]; 11: 2/89
    req = ak.requests_by_node(final, [22])
    assert req == pytest.approx({0: 78 * 80 / 89, 1: 80 / 89})
    assert ak.remote_share(req, 1) == pytest.approx(78 / 79)
    assert ak.requests_by_node(final, [22], socket=1) == req
    assert ak.requests_by_node(final, [22], socket=0) == {}
    # the compute task gets the socket's mix too (approximate split), but few requests
    assert ak.remote_share(ak.requests_by_node(final, [11]), 1) == pytest.approx(78 / 79)
    assert sum(ak.requests_by_node(final, [11]).values()) == pytest.approx(79 * 2 / 89)
    assert ak.purity(final, [22]) == pytest.approx(80 / 89)
    assert ak.remote_share({}, 1) is None and ak.purity(final, [999]) is None
    assert ak.relative_error(105.0, 100.0) == pytest.approx(0.05)
    assert ak.median([3.0, 1.0, 2.0]) == 2.0 and ak.median([1.0, 2.0, 4.0, 3.0]) == 2.5


def test_program_tids_are_the_process_and_its_workers() -> None:
    prog = {"pid": 300, "result": {"thread_records": [{"tid": 301}, {"tid": 302}]}}
    assert ak.program_tids(prog) == [300, 301, 302]
    assert ak.program_tids({"pid": 7, "result": None}) == [7]


def test_imars_interval_logs_each_threads_latency_term(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, a, b = scripted(tmp_path)
    _, prev, cur = views_of(tmp_path / "v")
    for policy in ("imar", "imar2"):
        d = daemon(tmp_path / policy, policy, monkeypatch)
        d.interval(a, b, prev, cur)
        d.log.close()
        log = records(tmp_path / policy)
        # test_daemon_attribution's worked figures: 101 at 1.15, 201 at 22.4 / 20
        assert ak.latency_terms(log, 101) == [1.15]
        assert ak.latency_terms(log, 201) == [round(22.4 / 20, 4)]
        assert ak.latency_terms(log, 999) == []
        (iv,) = [r for r in log if r["type"] == "interval"]
        assert set(iv["terms"]["101"]) == {"gips", "instB", "lat", "P"}


def test_the_gem5_tests_jobs_are_valid_jobs() -> None:
    assert len(tg.RUNS) == 4  # the count the module's docstring states
    for name, (link, job) in tg.RUNS.items():
        full = {"run_id": f"attr-{name}", "seed": 1, "timeout_s": 3000, "numa_balancing": 0,
                "pinning": "free", "switch_marks": True, **job}  # fmt: skip
        got = mix_job.load_job(full)
        assert got["switch_marks"] is True and link in tg.FACTORS
        for q in got["programs"]:
            assert q["kind"] == "cmd" and q["cmd"][:2] == ["numactl", f"--physcpubind={tg.CPU}"]
    # the factors are the calibration table's rows at those link latencies
    rows = {}
    for line in (ROOT / "configs/numa_lb/calibration" / tg.CALIBRATION).read_text().splitlines():
        if line and line[0].isdigit():
            k, v = line.split(",")
            rows[int(k)] = float(v)
    assert {k: rows[k] for k in tg.FACTORS} == tg.FACTORS
