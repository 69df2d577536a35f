"""The gem5 fixture re-captured after the measurement fixes (issue 13).

tests/fixtures/gem5-run-4x2/ is a real run directory, never hand-written: the
`faultbench` preset's patched-kernel run (`./run_all.py --preset faultbench
--set 'axes.numa_factor=[]' --set 'axes.link_latency=[60]' --set
'axes.mix=["fb8"]'`, policy default, 4 sockets x 2 cores, HT3 links of 60
cycles, gem5 v24.0.0.1 X86 MOESI_hammer, 17-patch release kernel
0021849326a00783, image 2ff4ea97485a9cfb), 2026-11-24 on the 2-core
development machine. Its m5out/stats.txt and config.json are xz-compressed.
The older 4 x 1 fixture (tests/fixtures/gem5-run, before the fixes) keeps the
"before" figures in test_analysis_gem5stats.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import lzma
import math
import shutil
import tempfile
from pathlib import Path

from analysis.results.frames import build_frames, load_run
from analysis.results.gem5stats import core_counters, parse_stats_file, roi_dump, roi_dump_index
from analysis.results.projection import measure
from analysis.sweep.worker import TSC_CLOCKSOURCES, guest_verdict

SRC = Path(__file__).resolve().parents[1] / "fixtures" / "gem5-run-4x2"


def _unpack() -> Path:
    dst = Path(tempfile.mkdtemp(prefix="gem5-run-4x2-")) / "runs" / "af1986f7454eed45"
    shutil.copytree(SRC, dst)
    for xz in dst.rglob("*.xz"):
        xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
        xz.unlink()
    return dst


RUN = _unpack()


def _rows() -> dict[tuple[str, str, str], float]:
    rec, rows, errors = load_run(RUN)
    assert rec["state"] == "done" and not errors, errors
    return {(t, e, m): v for t, e, m, v in rows}


def _guest_program() -> dict:
    for line in (RUN / "guest" / "results.jsonl").read_text().splitlines():
        d = json.loads(line)
        if d.get("type") == "program":
            return d
    raise AssertionError("no program record")


def test_task_migrations_are_the_kernels_per_process_counts() -> None:
    # fault_bench pins each of its 8 threads: 6 moves, 5 across nodes, all "other"
    # (affinity), counted by the kernel for the thread group (exited threads too)
    kernel = _guest_program()["kernel_migrations"]
    rows = _rows()
    assert rows[("program", "fb", "task_migrations")] == kernel["migrations"] == 6
    assert rows[("program", "fb", "cross_node_migrations")] == kernel["migrations_xnode"] == 5
    assert kernel["other"] == 6 and kernel["balance"] == 0


def test_ipc_is_on_busy_cycles_and_busy_cycles_are_gem5s() -> None:
    values = roi_dump(parse_stats_file(RUN / "m5out" / "stats.txt"),
                      roi_dump_index(RUN / "m5out")).values  # fmt: skip
    c = core_counters(values)
    assert len(c["busy_cycles"]) == 8
    for i, busy in c["busy_cycles"].items():
        assert busy == values[f"board.processor.switch{i}.core.exec_context.thread_0.numBusyCycles"]
    rows = _rows()
    ins = rows[("mix", "fb8", "instructions")]
    busy = rows[("mix", "fb8", "busy_cycles")]
    assert math.isclose(rows[("mix", "fb8", "ipc")], ins / busy)
    # all-cycle IPC (the old definition) is lower: halted cycles dilute it
    assert ins / rows[("mix", "fb8", "cycles")] < rows[("mix", "fb8", "ipc")]


def test_the_guest_timed_on_the_tsc_at_nanosecond_resolution() -> None:
    run = json.loads((RUN / "guest" / "results.jsonl").read_text().splitlines()[0])
    clock = run["clock"]
    assert clock["clocksource"] in TSC_CLOCKSOURCES  # tsc-early: restored at 0.78 s uptime
    assert clock["resolution_s"] <= 1e-6 and clock["step_s"] <= 1e-5
    ok, err, _ = guest_verdict(RUN / "guest", "gem5")
    assert ok, err


def test_the_roi_is_warm_and_closed_by_the_runners_work_item() -> None:
    roi = json.loads((RUN / "m5out" / "roi.json").read_text())
    events = [e["event"] for e in roi["events"]]
    assert events[:3] == ["warmup", "workbegin", "workend"]
    assert roi["roi"]["warmup_ticks"] > 10e9  # >= warmup_s = 10 ms of simulated time
    assert roi["roi"]["stats_dump_index"] == 0


def test_host_costs_are_recorded_and_project() -> None:
    fr = build_frames([RUN.parents[1]])
    r = fr.runs.iloc[0]
    assert r["gem5_host_s"] > 0 and r["checkpoint_host_s"] > 0
    m = measure([RUN.parents[1]])
    assert m.runs == 1 and m.ips > 0 and m.outside_s > 0
    assert math.isclose(m.boot_s_per_cpu, r["checkpoint_host_s"] / 8)


def test_the_projection_reads_a_kept_findings_frames(tmp_path: Path) -> None:
    """A finding keeps frames/, not run directories: its cost projects again from
    the repository alone, with the figures the run directory gave."""
    build_frames([RUN.parents[1]]).write(tmp_path / "frames")
    assert measure([tmp_path / "frames"]) == measure([RUN.parents[1]])


def test_the_projection_takes_cpu_time_where_a_run_recorded_it() -> None:
    """A run that shared its cores has a wall time above its CPU time; since
    2026-11-25 the worker records both, and the projection uses the CPU share.
    The fixture's run predates that: its host_times get CPU seconds here (half
    the wall time, as if it had shared one core with another run)."""
    wall = measure([RUN.parents[1]])
    assert wall.cpu_runs == 0
    dst = Path(tempfile.mkdtemp(prefix="gem5-run-cpu-")) / "runs" / RUN.name
    shutil.copytree(RUN, dst)
    ht = dst / "logs" / "host_times.json"
    d = json.loads(ht.read_text())
    d["gem5_cpu_s"] = d["gem5_s"] / 2
    d["checkpoint"]["cpu_s"] = d["checkpoint"]["host_s"] / 4
    ht.write_text(json.dumps(d))
    r = build_frames([dst.parents[0]]).runs.iloc[0]
    assert r["gem5_cpu_s"] == d["gem5_s"] / 2 and r["checkpoint_cpu_s"] == d["checkpoint"]["cpu_s"]
    cpu = measure([dst.parents[0]])
    assert (cpu.cpu_runs, cpu.boots, cpu.cpu_boots) == (1, 1, 1)
    assert math.isclose(cpu.ips, 2 * wall.ips)
    assert math.isclose(cpu.outside_s, wall.outside_s / 2)
    assert math.isclose(cpu.boot_s_per_cpu, wall.boot_s_per_cpu / 4)
    again = measure([dst.parents[0]], cpu=False)  # the wall clock's view, as before
    assert (again.cpu_runs, again.cpu_boots) == (0, 0) and math.isclose(again.ips, wall.ips)
    # the tool prints both: a cluster slot is billed by the wall clock
    from analysis.results.projection import main  # noqa: PLC0415

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([str(dst.parents[0]), "--preset", "finding",
                     "--roi-instructions", "lb3-block192=1e9"]) == 0  # fmt: skip
    out = buf.getvalue()
    assert "CPU time of 1 run(s) and 1 boot(s)" in out
    assert "wall time of every run and boot" in out and out.count("finding: 45 runs") == 2


def test_projection_counts_the_presets_runs_and_boots() -> None:
    from analysis.results.projection import project  # noqa: PLC0415
    from analysis.sweep.matrix import run_count  # noqa: PLC0415
    from analysis.sweep.spec import load_spec  # noqa: PLC0415

    m = measure([RUN.parents[1]])
    p = project("finding", m, {}, nodes=100, slots_per_node=32)
    assert p.runs == run_count(load_spec(preset="finding")) == 45
    assert p.boots == 2 and p.unknown == 45 and p.run_h == 0  # stock + release; no estimate
    p = project("finding", m, {"lb3-block192": 1e9}, nodes=100, slots_per_node=32)
    assert p.unknown == 0
    assert math.isclose(p.run_h, 45 * (m.outside_s + 1e9 / m.ips) / 3600)
    # 100 nodes x 32 one-CPU slots: the boots in parallel, then one wave of runs
    one_run = m.outside_s + 1e9 / m.ips
    assert p.slots == 3200 and math.isclose(p.wall_h, (8 * m.boot_s_per_cpu + one_run) / 3600)


def test_throttles_that_carried_the_warm_up_withhold_the_remote_split() -> None:
    # this run predates configs/numa_lb/ruby_stats.py: gem5's stats reset left
    # the routers' throttle counts running through the warm-up, so directory 2's
    # throttle saw 98 435 more messages than the directory received in the ROI;
    # the split is withheld, never reported with the warm-up in it
    from analysis.results.gem5stats import load_config, remote_requests  # noqa: PLC0415

    values = roi_dump(parse_stats_file(RUN / "m5out" / "stats.txt"),
                      roi_dump_index(RUN / "m5out")).values  # fmt: skip
    rr = remote_requests(values, load_config(RUN / "m5out" / "config.json"))
    assert rr is not None and rr["available"] and not rr["consistent"]
    assert rr["dir_requests"][2] == 154408
    assert ("mix", "fb8", "remote_ratio") not in _rows()


def test_after_the_throttle_fix_the_remote_split_is_consistent(tmp_path: Path) -> None:
    # tests/fixtures/gem5-run-4x2-remote: a calibration run (ptrchase pair, link
    # 60, 4x2, warm ROI) made after configs/numa_lb/ruby_stats.py, 2026-11-24
    from analysis.results.gem5stats import load_config, remote_requests  # noqa: PLC0415

    src = SRC.parent / "gem5-run-4x2-remote"
    run = tmp_path / "runs" / "90174233904b333c"
    shutil.copytree(src, run)
    for xz in run.rglob("*.xz"):
        xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
        xz.unlink()
    values = roi_dump(parse_stats_file(run / "m5out" / "stats.txt"),
                      roi_dump_index(run / "m5out")).values  # fmt: skip
    rr = remote_requests(values, load_config(run / "m5out" / "config.json"))
    assert rr is not None and rr["consistent"]
    # local then one-hop-remote chase of equal length: about half the requests remote
    assert 0.4 < rr["requests"]["remote_ratio"] < 0.5
    rec, rows, errors = load_run(run)
    assert rec["state"] == "done" and not errors, errors
    got = {(t, m): v for t, _, m, v in rows}
    assert math.isclose(got[("mix", "remote_ratio")], rr["requests"]["remote_ratio"])
