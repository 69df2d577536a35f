"""Progress of long steps (analysis/progress.py and its users): a line per phase
with what is built and how long it usually takes, then a line at least every
interval while it runs (issue 41, item 2). Real short subprocesses stand in
for make and gem5; nothing here builds a kernel."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from analysis import progress
from analysis.sweep import backends, staging
from analysis.sweep.executors import Progress

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "kernel-patches"))
import kbuild  # noqa: E402

# make-like output: kbuild's "  CC      path" lines with pauses between them
MAKE_LIKE = (
    "for i in 1 2 3 4 5 6; do printf '  CC      kernel/f%s.o\\n' $i; sleep 0.15; done; "
    "echo '  LD      vmlinux'; sleep 0.3; echo 'Kernel: arch/x86/boot/bzImage is ready'"
)


def test_fmt_elapsed() -> None:
    assert progress.fmt_elapsed(5) == "5s"
    assert progress.fmt_elapsed(245) == "4m05s"
    assert progress.fmt_elapsed(3 * 3600 + 120) == "3h02m"


def test_interval_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.ENV_INTERVAL, "2.5")
    assert progress.interval_s() == 2.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv(progress.ENV_INTERVAL, bad)
        assert progress.interval_s() == 60.0
    monkeypatch.delenv(progress.ENV_INTERVAL)
    assert progress.interval_s() == 60.0


def test_heartbeat_while_a_quiet_process_runs() -> None:
    out = io.StringIO()
    with progress.Heartbeat("kbuild", "linking", "usually 1 min", out, interval=0.2) as hb:
        subprocess.run(["sleep", "1.1"], check=True)
    lines = out.getvalue().splitlines()
    assert 4 <= len(lines) <= 6, lines
    assert all(
        re.fullmatch(r"kbuild: still linking, \ds elapsed \(usually 1 min\)", x) for x in lines
    )
    assert hb.beats == len(lines)
    time.sleep(0.5)  # stopped with the block: no line after it
    assert out.getvalue().splitlines() == lines


def test_run_condensed_counts_make_steps(tmp_path: Path) -> None:
    out = io.StringIO()
    logf = tmp_path / "logs" / "build.log"
    rc, tail = progress.run_condensed(
        ["sh", "-c", MAKE_LIKE], "kbuild", "building kernel variant release", logf,
        "a cold build took 494 s", out, interval=0.25,
    )  # fmt: skip
    assert rc == 0
    log = logf.read_text()
    assert log.startswith("$ sh -c ")
    assert "  CC      kernel/f6.o" in log and "bzImage is ready" in log  # the whole output
    assert tail.endswith("Kernel: arch/x86/boot/bzImage is ready")
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3, lines  # ~1.2 s at 0.25 s
    assert all(x.startswith("kbuild: still building kernel variant release, ") for x in lines)
    assert all(x.endswith("(a cold build took 494 s)") for x in lines)
    steps = [int(m.group(1)) for x in lines if (m := re.search(r"; (\d+) step\(s\) done", x))]
    assert steps and steps == sorted(steps) and steps[-1] >= 5, lines
    assert "last: CC kernel/f" in out.getvalue()
    assert "CC      kernel/f1.o" not in out.getvalue()  # condensed: not the raw lines


def test_run_condensed_failure_returns_rc_and_tail(tmp_path: Path) -> None:
    rc, tail = progress.run_condensed(
        ["sh", "-c", "echo '  CC      a.o'; echo 'a.c:1: error: boom' >&2; exit 3"],
        "kbuild", "building", tmp_path / "x.log", out=io.StringIO(), interval=10,
    )  # fmt: skip
    assert rc == 3
    assert tail.splitlines() == ["  CC      a.o", "a.c:1: error: boom"]


def test_kbuild_progress_goes_to_stderr_and_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """stdout is kbuild's answer (run_all.py reads the artifact dir from it)."""
    monkeypatch.setenv("NUMA_LB_CACHE", str(tmp_path))
    monkeypatch.setenv(progress.ENV_INTERVAL, "0.25")
    kbuild.make_with_progress(["sh", "-c", MAKE_LIKE], "building kernel variant x", "b.log", "")
    out, err = capfd.readouterr()
    assert out == ""
    logf = tmp_path / "kernel" / "logs" / "b.log"
    assert f"kbuild: building kernel variant x: make's output goes to {logf}" in err
    assert "kbuild: still building kernel variant x, " in err
    assert "LD      vmlinux" in logf.read_text()
    with pytest.raises(kbuild.BuildError, match=r"failed \(2\); full output .*b\.log:\n.*oops"):
        kbuild.make_with_progress(["sh", "-c", "echo oops; exit 2"], "building", "b.log", "")
    kbuild.log("phase")
    out, err = capfd.readouterr()
    assert out == "" and "kbuild: phase" in err


def test_stage_says_what_it_boots_and_beats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.ENV_INTERVAL, "0.2")
    out = io.StringIO()
    rec = {"paths": {}}

    def make(_: dict) -> Path:
        subprocess.run(["sleep", "0.9"], check=True)
        return Path("/nonexistent")

    staging.stage([rec], out, lambda r: "k4x1", lambda key: False, make)
    text = out.getvalue()
    assert "stage: boot checkpoint k4x1 (1 run(s)) missing: booting it here" in text
    assert "9 min 52 s" in text  # the typical duration, from the README
    assert len(re.findall(r"^stage: still booting checkpoint k4x1 under gem5, ", text, re.M)) >= 3
    assert re.search(r"^stage: boot checkpoint k4x1 made in \d+ s$", text, re.M)


def test_local_progress_beats_when_not_a_tty() -> None:
    out = io.StringIO()
    prog = Progress(total=3, parallel=2, out=out, tty=False, interval=0.2)
    prog.tick(2, lambda: ["run-a quick: 5s"])
    assert out.getvalue() == ""  # not yet
    time.sleep(0.25)
    prog.tick(2, lambda: ["run-a quick: 5s", "run-b quick: 4s, booting"])
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("still running | [") and "running=2" in lines[0]
    assert lines[1:] == ["  run-a quick: 5s", "  run-b quick: 4s, booting"]
    prog.tick(2)
    assert len(out.getvalue().splitlines()) == 3  # the interval starts again
    prog.event("done       run-a", 1)
    time.sleep(0.1)
    prog.tick(1)
    assert len(out.getvalue().splitlines()) == 4  # an event resets it too


def test_checkpoint_activity_from_the_run_log(tmp_path: Path) -> None:
    """The waiting/booting lines are written by staging.build_once's note, as
    backends.ensure_checkpoint passes it, while another process holds the lock."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    assert backends.checkpoint_activity(run) == ""  # no gem5.log yet
    base = tmp_path / "ckpt"
    started, release = threading.Event(), threading.Event()

    def slow(tmp: Path) -> None:
        started.set()
        release.wait(10)

    holder = threading.Thread(target=staging.build_once, args=(base, "k", slow))
    holder.start()
    started.wait(10)
    with open(run / "logs" / "gem5.log", "ab") as log:

        def note(msg: str) -> None:
            log.write(f"{msg}\n".encode())
            log.flush()

        waiter = threading.Thread(
            target=staging.build_once,
            args=(base, "k", slow),
            kwargs={"note": note, "what": "boot checkpoint"},
        )
        waiter.start()
        deadline = time.monotonic() + 10
        while "waiting" not in (run / "logs" / "gem5.log").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert backends.checkpoint_activity(run).startswith("waiting for its boot checkpoint")
        release.set()
        holder.join(10)
        waiter.join(10)
    assert ": lock released after" in (run / "logs" / "gem5.log").read_text()
    assert backends.checkpoint_activity(run) == ""  # released: no longer waiting
    with open(run / "logs" / "gem5.log", "ab") as log:  # ensure_checkpoint's boot line
        log.write(b"boot checkpoint k2: ['gem5.opt', '...']\nsome gem5 output\n")
    assert backends.checkpoint_activity(run).startswith("booting its boot checkpoint")
    (run / "logs" / backends.HOST_TIMES_NAME).write_text("{}\n")  # checkpoint in hand
    assert backends.checkpoint_activity(run) == ""
