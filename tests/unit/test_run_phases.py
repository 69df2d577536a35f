"""Every phase of a gem5 run timed (issue 38 item 3): phases.json, its reader, the
frame's phase columns, the cost table and the projection.

gem5 cannot run in the unit tier, so the phases.json of the frame tests is
CONSTRUCTED, not captured: it is written by the real writer (PhaseClock) with
its clocks replaying a timeline made consistent with the real run fixture
tests/fixtures/gem5-run-4x2 (its roi.json event ticks and host times, its ROI
dump's hostSeconds, its worker-measured gem5 seconds). The split of the 1435.7
host seconds before the warm-up into restore and startup is made up (40 s
restore), and the CPU seconds are made up (97 % of the host seconds). The lead
replaces it with a captured phases.json once a gem5 run has made one.
"""

from __future__ import annotations

import io
import json
import lzma
import math
import shutil
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "configs"))

from numa_lb.phases import (  # noqa: E402
    END,
    PHASES,
    PHASES_NAME,
    PhaseClock,
    PhasesError,
    process_age_s,
    read_phases,
)
from numa_lb.roi import ROI_WORK_ID, WARM_WORK_ID, RoiProtocol  # noqa: E402

from analysis.results import projection, run_cost  # noqa: E402
from analysis.results.frames import RUN_COLS, build_frames, read_frames  # noqa: E402
from analysis.results.gem5stats import parse_stats_file, roi_dump, roi_dump_index  # noqa: E402
from analysis.results.run_phases import PHASE_COLS, phase_columns  # noqa: E402
from analysis.results.sections import cost_section  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
SRC = FIXTURES / "gem5-run-4x2"
KEPT_FRAMES = ROOT / "findings" / "2026-11-26-finding-b192" / "frames"
T_IMPORT = time.monotonic()  # this process is older than this


class Replay:
    """Clocks that return a fixed timeline, one value per call (the writer's clocks
    are passed in; the real ones are tested in test_the_real_clocks_...)."""

    def __init__(self, host: list[float], cpu: list[float], ticks: list[int | None]) -> None:
        self.host, self.cpu, self.ticks = list(host), list(cpu), list(ticks)

    def clock(self, outdir: Path, age: float | None) -> PhaseClock:
        return PhaseClock(outdir, tick=lambda: self.ticks.pop(0), host=lambda: self.host.pop(0),
                          cpu=lambda: self.cpu.pop(0), process_age=lambda: age)  # fmt: skip


# ---------------------------------------------- the constructed 4x2 timeline
# host seconds since the gem5 process started: it started at the worker's
# "running" time + the checkpoint wait (status.json, host_times.json); the
# marks from roi.json's host_time_unix, the ROI from the ROI dump's hostSeconds
GEM5_S = 2188.719  # logs/host_times.json gem5_s (the worker's outside measure)
START_UNIX = 1795512245.342674 + 0.042
WARM_UNIX, ROI_UNIX, EXIT_UNIX = 1795513681.095, 1795513771.657, 1795514432.893
ROI_HOST_S = 270.49  # hostSeconds of the ROI dump (stats dump 0)
RESTORE_S = 40.0  # made up: the split before the warm-up is unknown
CKPT_TICK = 775898569593  # gem5.log: "Entering event queue @ 775898569593" after the restore
TICKS = [CKPT_TICK, 949537245972, 970360418727, 984453788052, 1056800202549, 1056800202549]
MARKS = ["startup", "warmup", "roi", "handback", "exit", END]
HOST = [
    RESTORE_S,
    WARM_UNIX - START_UNIX,
    ROI_UNIX - START_UNIX,
    ROI_UNIX - START_UNIX + ROI_HOST_S,
    EXIT_UNIX - START_UNIX,
    GEM5_S - 0.2,  # the end mark; 0.2 s teardown after it (made up)
]
CPU = [round(0.97 * h, 3) for h in HOST]


def _timeline() -> Replay:
    # the clock's own creation reads host once (its t0: 0 here, age 0) and cpu never
    return Replay([0.0, *HOST], CPU, TICKS)


def _unpack(dst: Path, src: Path = SRC) -> Path:
    run = dst / "runs" / "af1986f7454eed45"
    shutil.copytree(src, run)
    for xz in run.rglob("*.xz"):
        xz.with_suffix("").write_bytes(lzma.decompress(xz.read_bytes()))
        xz.unlink()
    return run


def _with_phases(tmp: Path, marks: list[str] = MARKS) -> Path:
    run = _unpack(tmp)
    clock = _timeline().clock(run / "m5out", age=0.0)
    for name in marks:
        clock.mark(name)
    return run


# ------------------------------------------------------------ writer, reader
def test_the_clock_opens_a_phase_at_every_mark_and_rewrites_the_file(tmp_path: Path) -> None:
    clock = _timeline().clock(tmp_path, age=0.0)
    assert read_phases(tmp_path).open == ("restore", 0.0, 0.0)
    for i, name in enumerate(MARKS):
        clock.mark(name)
        ph = read_phases(tmp_path)
        assert list(ph.closed) == ["restore", *MARKS[:i]]  # every phase before this mark
        assert ph.open == (None if name == END else (name, round(HOST[i], 3), CPU[i]))
        assert not list(tmp_path.glob("*.tmp"))  # written by rename
    ph = read_phases(tmp_path).closed
    assert list(ph) == list(PHASES)
    assert ph["restore"].sim_ticks is None  # no simulation yet at the process's start
    assert ph["roi"].sim_ticks == 984453788052 - 970360418727  # = roi.json's ROI ticks
    assert math.isclose(ph["roi"].host_s, ROI_HOST_S, abs_tol=1e-3)
    assert math.isclose(sum(p.host_s for p in ph.values()), GEM5_S - 0.2, abs_tol=1e-3)
    on_disk = json.loads((tmp_path / PHASES_NAME).read_text())
    assert on_disk["process_start"] == "proc" and on_disk["phases"]["roi"][
        "host_s"
    ] == pytest.approx(ROI_HOST_S, abs=1e-3)


def test_a_killed_run_keeps_the_phases_it_reached(tmp_path: Path) -> None:
    clock = _timeline().clock(tmp_path, age=0.0)
    for name in MARKS[:3]:  # killed in the ROI
        clock.mark(name)
    ph = read_phases(tmp_path)
    assert list(ph.closed) == ["restore", "startup", "warmup"] and ph.open[0] == "roi"
    cols = phase_columns(tmp_path, GEM5_S, None, errors := [])
    assert not errors and cols["phase_warmup_host_s"] == pytest.approx(HOST[2] - HOST[1])
    # the ROI and everything after it unknown; no outside-ROI sum that would understate
    assert cols["phase_roi_host_s"] is None and cols["nonroi_host_s"] is None
    assert cols["roi_host_s_per_sim_ms"] is None


def test_the_end_mark_comes_once_and_never_raises(tmp_path: Path, capsys) -> None:
    (tmp_path / "a").mkdir()
    clock = _timeline().clock(tmp_path / "a", age=0.0)
    clock.finish()
    clock.finish()  # atexit after an explicit finish: no second end
    marks = json.loads((tmp_path / "a" / PHASES_NAME).read_text())["marks"]
    assert [m["mark"] for m in marks] == ["restore", END]
    gone = tmp_path / "b"
    gone.mkdir()
    clock = _timeline().clock(gone, age=0.0)
    shutil.rmtree(gone)
    clock.finish()  # an atexit handler: a message, the exit status stays gem5's
    assert "no end mark" in capsys.readouterr().out


def test_the_real_clocks_start_the_restore_phase_at_the_process_start(tmp_path: Path) -> None:
    age = process_age_s()
    assert age is not None  # Linux: /proc/self/stat
    assert time.monotonic() - T_IMPORT <= age < 86400  # older than this module's import
    clock = PhaseClock(tmp_path)
    time.sleep(0.05)
    clock.mark("startup")
    rec = json.loads((tmp_path / PHASES_NAME).read_text())
    assert rec["process_start"] == "proc"
    restore = rec["phases"]["restore"]
    assert restore["host_s"] >= age and 0 < restore["cpu_s"] <= time.process_time()


@pytest.mark.parametrize(
    "text, why",
    [
        ("{", "not JSON"),
        ("[1, 2]", "no list of marks"),
        ('{"marks": [{"mark": "restore", "host_s": 0, "cpu_s": 0}, {"host_s": 1}]}', "mark 1"),
        ('{"marks": [{"mark": "restore", "host_s": NaN, "cpu_s": 0}]}', "not a number"),
        ('{"marks": [{"mark": "restore", "host_s": "1", "cpu_s": 0}]}', "not a number"),
        ('{"marks": [{"mark": "a", "host_s": 5, "cpu_s": 0}, {"mark": "b", "host_s": 4, '
         '"cpu_s": 0}]}', "earlier"),
        ('{"marks": [{"mark": "end", "host_s": 1, "cpu_s": 0}, {"mark": "b", "host_s": 4, '
         '"cpu_s": 0}]}', "after the end"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_an_error_naming_the_problem(
    tmp_path: Path, text: str, why: str
) -> None:
    (tmp_path / PHASES_NAME).write_text(text)
    with pytest.raises(PhasesError, match=why):
        read_phases(tmp_path)
    errors: list[tuple[str, str]] = []
    assert phase_columns(tmp_path, 1.0, 1.0, errors) == dict.fromkeys(PHASE_COLS)
    assert errors and errors[0][0] == "m5out/phases.json"


def test_no_file_is_no_phases(tmp_path: Path) -> None:
    assert read_phases(tmp_path) is None


# ------------------------------------------------------------------ protocol
def _protocol(tmp: Path, calls: list[str], phase=None) -> dict:
    state = {"tick": 0, "wid": ROI_WORK_ID}
    proto = RoiProtocol(
        outdir=tmp,
        tick=lambda: state["tick"],
        reset_stats=lambda: calls.append("reset"),
        dump_stats=lambda: calls.append("dump"),
        switch_cpus=lambda: calls.append("switch"),
        save_checkpoint=lambda p: None,
        take_checkpoint=None,
        work_id=lambda: state["wid"],
        phase=phase or (lambda name: calls.append(f"phase {name}")),
    )
    return {"table": proto.handlers(_Events), "state": state, "proto": proto}


class _Events:
    CHECKPOINT, WORKBEGIN, WORKEND, EXIT = "checkpoint", "workbegin", "workend", "exit"
    MAX_TICK, KERNEL_PANIC, KERNEL_OOPS, FAIL = "max tick", "panic", "oops", "fail"


def test_the_protocol_marks_phases_where_the_roi_is_reset_and_dumped(tmp_path: Path) -> None:
    """The ROI phase runs from after the reset to before the dump (the ROI dump's
    hostSeconds span); the warm-up after the switch; other work items mark nothing."""
    calls: list[str] = []
    p = _protocol(tmp_path, calls)
    t, st = p["table"], p["state"]
    st["wid"] = WARM_WORK_ID
    next(t["workbegin"])
    st["wid"] = 7  # a program's own work item
    next(t["workbegin"])
    st["wid"] = ROI_WORK_ID
    next(t["workbegin"])
    next(t["workend"])
    assert next(t["exit"]) is True
    assert calls == ["switch", "phase warmup", "reset", "phase roi", "phase handback", "dump"]
    calls.clear()
    (tmp_path / "nowarm").mkdir()
    p = _protocol(tmp_path / "nowarm", calls)
    next(p["table"]["workbegin"])
    assert calls == ["switch", "reset", "phase roi"]  # no warm-up: startup runs to the ROI


def test_a_failing_phase_clock_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    def broken(name: str) -> None:
        raise OSError("disk full")

    calls: list[str] = []
    p = _protocol(tmp_path, calls, phase=broken)
    assert next(p["table"]["workbegin"]) is False
    assert calls == ["switch", "reset"] and p["proto"].state.value == "roi"
    ev = p["proto"].record["events"]
    assert ev[0]["event"] == "phase_error" and "disk full" in ev[0]["error"]


# -------------------------------------------------------------------- frames
def test_the_frame_carries_every_phase_of_the_run(tmp_path: Path) -> None:
    run = _with_phases(tmp_path)
    fr = build_frames([tmp_path])
    assert fr.errors.empty, fr.errors
    r = fr.runs.iloc[0]
    for i, name in enumerate(PHASES[1:], start=1):
        host = HOST[i] - HOST[i - 1] if i < len(HOST) else None
        assert r[f"phase_{name}_host_s"] == pytest.approx(host, abs=2e-3), name
        assert r[f"phase_{name}_cpu_s"] == pytest.approx(CPU[i] - CPU[i - 1], abs=2e-3), name
    assert r["phase_restore_host_s"] == pytest.approx(RESTORE_S)
    assert r["phase_restore_cpu_s"] == pytest.approx(CPU[0])  # CPU counts from the start
    # the constructed ROI phase matches the run's ROI dump and roi.json
    dump = roi_dump(parse_stats_file(run / "m5out" / "stats.txt"), roi_dump_index(run / "m5out"))
    assert r["phase_roi_host_s"] == pytest.approx(dump.values["hostSeconds"], abs=2e-3)
    sim_ms = json.loads((run / "m5out" / "roi.json").read_text())["roi"]["sim_seconds"] * 1e3
    assert r["roi_host_s_per_sim_ms"] == pytest.approx(ROI_HOST_S / sim_ms, rel=1e-5)
    assert r["nonroi_host_s"] == pytest.approx(HOST[-1] - ROI_HOST_S, abs=2e-3)
    assert r["nonroi_cpu_s"] == pytest.approx(CPU[-1] - (CPU[3] - CPU[2]), abs=2e-3)
    # read back from parquet (a finding's frames/) unchanged
    fr.write(tmp_path / "frames")
    back = read_frames(tmp_path / "frames").runs.iloc[0]
    assert all(back[c] == pytest.approx(r[c]) for c in PHASE_COLS)


def test_an_exit_phase_without_its_end_mark_is_the_workers_total_minus_the_rest(
    tmp_path: Path,
) -> None:
    """gem5 ended without its Python exit handlers: the exit phase is measured from
    outside, as the worker's gem5 seconds minus the exit phase's start."""
    _with_phases(tmp_path, MARKS[:-1])
    r = build_frames([tmp_path]).runs.iloc[0]
    assert r["phase_exit_host_s"] == pytest.approx(GEM5_S - HOST[4], abs=2e-3)
    assert math.isnan(r["phase_exit_cpu_s"])  # the fixture's worker predates gem5_cpu_s
    assert r["nonroi_host_s"] == pytest.approx(GEM5_S - ROI_HOST_S, abs=2e-3)
    assert math.isnan(r["nonroi_cpu_s"])


@pytest.mark.parametrize("fixture", ["gem5-run", "gem5-run-4x2", "gem5-run-4x2-remote"])
def test_run_dirs_before_phases_json_stay_valid_with_empty_columns(
    tmp_path: Path, fixture: str
) -> None:
    _unpack(tmp_path, FIXTURES / fixture)
    fr = build_frames([tmp_path])
    r = fr.runs.iloc[0]
    assert r["state"] == "done" and not fr.metrics.empty
    assert not fr.errors["source"].eq("m5out/phases.json").any()
    assert all(pd.isna(r[c]) for c in PHASE_COLS)


def test_a_corrupt_phases_json_is_an_error_row_and_the_run_still_loads(tmp_path: Path) -> None:
    run = _unpack(tmp_path)
    (run / "m5out" / PHASES_NAME).write_text('{"marks": [{"mark": "restore"}]}')
    fr = build_frames([tmp_path])
    assert fr.runs.iloc[0]["state"] == "done" and not fr.metrics.empty
    bad = fr.errors[fr.errors["source"] == "m5out/phases.json"]
    assert len(bad) == 1 and "not a number" in bad.iloc[0]["message"]


def test_kept_frames_from_before_the_phases_read_back_with_empty_columns() -> None:
    fr = read_frames(KEPT_FRAMES)
    assert set(PHASE_COLS) <= set(fr.runs.columns) and set(PHASE_COLS) <= set(RUN_COLS)
    assert fr.runs[PHASE_COLS].isna().all().all()
    note = run_cost.phases_note(fr.runs)
    assert note.startswith("No run recorded its phases") and "estimated" in note
    assert run_cost.roi_rate(fr.runs) is None


# -------------------------------------------------------- cost and projection
def test_the_cost_table_shows_the_phases_and_the_roi_rate(tmp_path: Path) -> None:
    _with_phases(tmp_path)
    fr = build_frames([tmp_path])
    rows = {r.what: r for r in run_cost.summary(fr.runs, fr.metrics)}
    assert rows[run_cost.PHASE_LABELS["warmup"]].median == pytest.approx(HOST[2] - HOST[1])
    assert rows[run_cost.NONROI_LABEL].median == pytest.approx(HOST[-1] - ROI_HOST_S, abs=2e-3)
    assert not any(w.startswith("outside the ROI (restore") for w in rows)  # no estimate
    rate = run_cost.roi_rate(fr.runs)
    assert rate.n == 1 and rate.median == pytest.approx(fr.runs.iloc[0]["roi_host_s_per_sim_ms"])
    assert run_cost.phases_note(fr.runs).startswith("All 1 done runs recorded")
    sec = cost_section(fr.runs, fr.metrics)
    table = sec.items[0].rows
    assert any(r[0] == rate.what for r in table)
    assert any("recorded their phases" in p for p in sec.paras)
    # beside a run without phases: that one keeps the estimate, labelled so
    mixed = fr.runs.assign(run_id="p")
    plain = fr.runs.assign(run_id="q", **{c: None for c in PHASE_COLS})
    runs = pd.concat([mixed, plain], ignore_index=True)
    mx = pd.concat([fr.metrics.assign(run_id=x) for x in ("p", "q")], ignore_index=True)
    rows = {r.what: r for r in run_cost.summary(runs, mx)}
    est = [w for w in rows if w.endswith("estimated for runs without phases.json")]
    assert len(est) == 1 and rows[est[0]].n == 1 and rows[run_cost.NONROI_LABEL].n == 1
    assert run_cost.phases_note(runs).startswith("1 of 2 done runs")


def test_the_projection_uses_the_measured_phases(tmp_path: Path) -> None:
    _with_phases(tmp_path)
    fr = build_frames([tmp_path])
    r = fr.runs.iloc[0]
    ins = fr.metrics[
        (fr.metrics["metric"] == "instructions") & (fr.metrics["entity_type"] == "mix")
    ]
    ins = float(ins["value"].sum())
    m = projection.measure([tmp_path], cpu=False)  # the fixture's worker recorded no CPU time
    assert m.phase_runs == 1 and m.runs == 1
    assert m.outside_s == pytest.approx(r["nonroi_host_s"])
    assert m.ips == pytest.approx(ins / r["phase_roi_host_s"])
    assert m.roi_s_per_sim_ms == pytest.approx(r["roi_host_s_per_sim_ms"])
    assert dict(m.phase_s)["warmup"] == pytest.approx(HOST[2] - HOST[1])
    # with the worker's CPU seconds, the CPU basis takes the phases' CPU seconds
    ht = next(tmp_path.rglob("host_times.json"))
    d = json.loads(ht.read_text())
    ht.write_text(json.dumps({**d, "gem5_cpu_s": CPU[-1] + 0.1}))
    c = projection.measure([tmp_path])
    rc = build_frames([tmp_path]).runs.iloc[0]
    assert c.outside_s == pytest.approx(rc["nonroi_cpu_s"])
    assert c.ips == pytest.approx(ins / rc["phase_roi_cpu_s"])
    assert c.roi_s_per_sim_ms == pytest.approx(m.roi_s_per_sim_ms * 0.97, rel=1e-3)
    out = io.StringIO()
    with redirect_stdout(out):
        assert projection.main([str(tmp_path), "--preset", "quick"]) == 0
    lines = out.getvalue().splitlines()
    assert any(x.strip().startswith("phases (1 of 1 runs, median CPU s): ROI ") for x in lines)
    assert any(x.strip().startswith("phases (1 of 1 runs, median host s): ROI ") for x in lines)


def test_the_projection_says_when_it_falls_back(tmp_path: Path) -> None:
    _unpack(tmp_path)
    m = projection.measure([tmp_path])
    assert m.phase_runs == 0 and m.roi_s_per_sim_ms is None and m.phase_s == ()
    line = projection.phases_line(m, "CPU")
    assert line.startswith("phases: no run recorded them") and "instruction rate" in line
    kept = projection.measure([KEPT_FRAMES])
    assert kept.phase_runs == 0 and kept.runs > 0
