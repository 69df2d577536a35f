"""Run directory state machine, locking, attempts and the worker's guest verdict."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest

from analysis.sweep.rundir import RunDir, State, StatusError, is_stale_running
from analysis.sweep.worker import guest_verdict

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).resolve().parents[1] / "fixtures"


def make(tmp_path: Path) -> RunDir:
    rd = RunDir(tmp_path / "runs" / "abc")
    assert rd.create({"run_id": "abc" + "0" * 61, "point": {}}, {"programs": []})
    return rd


def test_create_is_idempotent_and_detects_prefix_collisions(tmp_path: Path) -> None:
    rd = make(tmp_path)
    assert rd.state() == State.PENDING
    assert not rd.create({"run_id": "abc" + "0" * 61}, {})
    with pytest.raises(StatusError, match="collision"):
        rd.create({"run_id": "abc" + "1" * 61}, {})


def test_transitions_are_recorded_and_checked(tmp_path: Path) -> None:
    rd = make(tmp_path)
    rd.transition(State.RUNNING, host="h", pid=1)
    st = rd.transition(State.DONE, exit_code=0)
    assert [h["state"] for h in st["history"]] == ["pending", "running", "done"]
    assert json.loads(rd.status_file.read_text())["state"] == "done"
    for bad in (State.RUNNING, State.PENDING, State.FAILED):
        with pytest.raises(StatusError):
            rd.transition(bad)
    with pytest.raises(StatusError, match="never modified"):
        rd.update(x=1)
    with pytest.raises(StatusError, match="never rerun"):
        rd.reset_for_rerun()


def test_rerun_moves_the_failed_attempt_aside(tmp_path: Path) -> None:
    rd = make(tmp_path)
    rd.transition(State.RUNNING, attempt=1)
    rd.logs.mkdir()
    (rd.logs / "backend.log").write_text("boom\n")
    rd.guest.mkdir()
    (rd.guest / "results.jsonl").write_text("{}\n")
    rd.transition(State.FAILED, exit_code=3, error="boom")
    n = rd.reset_for_rerun()
    assert n == 1
    assert (rd.path / "attempts/1/logs/backend.log").read_text() == "boom\n"
    assert (rd.path / "attempts/1/guest/results.jsonl").exists()
    assert json.loads((rd.path / "attempts/1/status.json").read_text())["state"] == "failed"
    st = rd.status()
    assert st["state"] == "pending" and st["previous"]["error"] == "boom"
    assert not rd.logs.exists() and not rd.guest.exists()


def _hold(path: str, q: mp.Queue) -> None:
    with RunDir(Path(path)).lock() as got:
        q.put(got)
        q.get()


def test_lock_is_exclusive_across_processes(tmp_path: Path) -> None:
    rd = make(tmp_path)
    ctx = mp.get_context("fork")
    q: mp.Queue = ctx.Queue()
    p = ctx.Process(target=_hold, args=(str(rd.path), q))
    p.start()
    assert q.get(timeout=10) is True
    with rd.lock() as got:
        assert got is False
    assert rd.is_locked()
    q.put("release")
    p.join(10)
    with rd.lock() as got:
        assert got is True


def _hold_status(path: str, q: mp.Queue) -> None:
    with RunDir(Path(path)).status_lock():
        q.put("held")
        q.get()


def test_status_lock_serialises_rewrites_across_processes(tmp_path: Path) -> None:
    rd = make(tmp_path)
    with rd.status_lock(), rd.status_lock():  # reentrant in one thread
        rd.update(x=1)
    ctx = mp.get_context("fork")
    q: mp.Queue = ctx.Queue()
    p = ctx.Process(target=_hold_status, args=(str(rd.path), q))
    p.start()
    assert q.get(timeout=10) == "held"
    done = threading.Event()
    t = threading.Thread(target=lambda: (rd.update(y=2), done.set()))
    t.start()
    assert not done.wait(0.3)  # blocked while the other process holds the lock
    q.put("release")
    assert done.wait(10)
    t.join()
    p.join(10)
    assert rd.status()["x"] == 1 and rd.status()["y"] == 2


def test_stale_running_detection(tmp_path: Path) -> None:
    rd = make(tmp_path)
    rd.transition(State.RUNNING, host=socket.gethostname(), pid=os.getpid())
    assert not is_stale_running(rd)  # this process is alive
    rd2 = RunDir(tmp_path / "runs" / "def")
    rd2.create({"run_id": "def" + "0" * 61}, {})
    ctx = mp.get_context("fork")
    p = ctx.Process(target=os._exit, args=(0,))
    p.start()
    p.join()
    rd2.transition(State.RUNNING, host=socket.gethostname(), pid=p.pid)
    assert is_stale_running(rd2)


def test_guest_verdict_on_real_results(tmp_path: Path) -> None:
    ok, err, summary = guest_verdict(FIX / "qemu-run")
    assert ok and err is None and summary["status"] == "ok"
    g = tmp_path / "guest"
    g.mkdir()
    text = (FIX / "qemu-run" / "results.jsonl").read_text()
    (g / "results.jsonl").write_text(text[: len(text) // 2])  # cut mid-line: a dead guest
    ok, err, _ = guest_verdict(g)
    assert not ok and "not JSON" in err
    lines = text.splitlines(keepends=True)
    (g / "results.jsonl").write_text("".join(lines[:-1]))  # whole lines, no run_end
    ok, err, summary = guest_verdict(g)
    assert not ok and "no run_end" in err and summary["records"] == len(lines) - 1
    shutil.rmtree(g)
    ok, err, _ = guest_verdict(g)
    assert not ok and "missing" in err


def _with_clock(tmp: Path, src: Path, clock: dict | None) -> Path:
    """A copy of a real guest result set whose run record carries CLOCK."""
    g = tmp / "guest-clock"
    g.mkdir(exist_ok=True)
    out = []
    for line in (src / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "run":
            rec.pop("clock", None)
            if clock is not None:
                rec["clock"] = clock
        out.append(json.dumps(rec))
    (g / "results.jsonl").write_text("\n".join(out) + "\n")
    return g


def test_a_run_not_timed_on_a_fine_clock_fails(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "workloads"))
    from mix_metrics import clock_info  # noqa: PLC0415

    here = clock_info()  # this host's real clock, as the guest records its own
    assert here["resolution_s"] <= 1e-6 and here["step_s"] is not None
    qemu = FIX / "qemu-run"
    assert guest_verdict(_with_clock(tmp_path, qemu, here), "qemu")[0]
    # the gem5 fixture's guest ran on refined-jiffies (its dmesg: "Switched to
    # clocksource refined-jiffies"): 4 ms resolution at HZ=250
    jiffies = {"clock": "CLOCK_MONOTONIC", "clocksource": "refined-jiffies",
               "resolution_s": 0.004, "step_s": 0.004}  # fmt: skip
    assert (
        "Switched to clocksource refined-jiffies"
        in (FIX / "gem5-run" / "guest" / "dmesg.txt").read_text()
    )
    ok, err, summary = guest_verdict(_with_clock(tmp_path, qemu, jiffies), "gem5")
    assert not ok and "not the TSC" in err and summary["clock"]["resolution_s"] == 0.004
    ok, err, _ = guest_verdict(_with_clock(tmp_path, qemu, jiffies), "qemu")
    assert not ok and "coarser than 1 us" in err
    tsc = dict(here, clocksource="tsc")
    assert guest_verdict(_with_clock(tmp_path, qemu, tsc), "gem5")[0]
    # a gem5 guest restored at ~0.8 s of uptime is still on tsc-early (the first
    # 4x2 calibration run, 2026-11-24: "clocksource": "tsc-early", 1 ns resolution)
    early = {"clock": "CLOCK_MONOTONIC", "clocksource": "tsc-early",
             "resolution_s": 1e-09, "step_s": 1.6210000000072e-06}  # fmt: skip
    assert guest_verdict(_with_clock(tmp_path, qemu, early), "gem5")[0]
    # a guest that recorded nothing (the mix runner before this check)
    ok, err, _ = guest_verdict(_with_clock(tmp_path, qemu, None), "gem5")
    assert not ok and "no clocksource" in err
    assert guest_verdict(_with_clock(tmp_path, qemu, None))[0]  # no backend: not checked
