"""The sweep tier: real QEMU runs of the quick preset through ./run_all.py.

Needs the kernel (kernel-patches/kbuild.py build) and the image
(disk-image/build_image.py build) already built; otherwise every test is
skipped with ``SKIPPED sweep: <reason>``. About 2 minutes on 2 cores (eight
~12 s QEMU boots).

    python3 -m pytest -q -rs tests/sweep
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_ALL = [sys.executable, str(ROOT / "run_all.py")]


def _built() -> str | None:
    if not _which("qemu-system-x86_64"):
        return "qemu-system-x86_64 not installed (.ci/setup)"
    r = subprocess.run(
        [sys.executable, "kernel-patches/kbuild.py", "path"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    art = Path(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else None
    if art is None or not (art / "build.json").exists():
        return f"kernel not built ({art}; run kernel-patches/kbuild.py build)"
    r = subprocess.run(
        [sys.executable, "disk-image/build_image.py", "path"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        return "image not built (run disk-image/build_image.py build)"
    return None


def _which(exe: str) -> bool:
    return any(os.access(Path(d) / exe, os.X_OK) for d in os.environ.get("PATH", "").split(":"))


WHY = _built()
if WHY:
    print(f"SKIPPED sweep: {WHY}")
    pytest.skip(f"SKIPPED sweep: {WHY}", allow_module_level=True)


def quick(out: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RUN_ALL, "--preset", "quick", "--no-build", "--out", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def statuses(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in (out / "runs").glob("*/status.json")}


def qemu_of(out: Path) -> list[str]:
    r = subprocess.run(
        ["pgrep", "-f", f"qemu-system-x86_64.*{out}"], capture_output=True, text=True
    )
    return r.stdout.split()


def test_quick_sweep_survives_ctrl_c_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "quick"
    args = [*RUN_ALL, "--preset", "quick", "--no-build", "--repeats", "2", "--out", str(out)]
    p = subprocess.Popen(
        args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    t0 = time.monotonic()
    while time.monotonic() - t0 < 300:  # Ctrl-C once a run is done and the next one is booting
        st = statuses(out) if (out / "runs").exists() else {}
        states = [s["state"] for s in st.values()]
        if "done" in states and "running" in states:
            time.sleep(3)
            break
        time.sleep(0.5)
    else:
        p.kill()
        pytest.fail("no run finished within 300 s")
    p.send_signal(signal.SIGINT)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 130, text
    assert text.splitlines()[0].startswith("backend: qemu")
    st = statuses(out)
    states = sorted(s["state"] for s in st.values())
    # the runs that never started have no directory (created just before a run starts)
    assert states.count("interrupted") == 1 and "done" in states and len(states) < 4, states
    assert len(json.loads((out / "sweep.json").read_text())["runs"]) == 4
    assert not qemu_of(out), "QEMU survived the interruption"
    done_before = {k: s["history"] for k, s in st.items() if s["state"] == "done"}

    r = quick(out, "--repeats", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"skipped: {len(done_before)} done" in r.stdout
    st = statuses(out)
    assert all(s["state"] == "done" for s in st.values())
    for k, h in done_before.items():
        assert st[k]["history"] == h, "a finished run was repeated"
    resumed = [s for s in st.values() if "interrupted" in [h["state"] for h in s["history"]]]
    assert len(resumed) == 1 and resumed[0]["attempt"] == 2
    assert (out / "report.html").exists()
    md = (out / "report.md").read_text()
    assert "NOT architectural" in md and "Fig. 11 view" in md
    for s in st.values():  # results from the patched guest kernel
        assert s["guest"]["status"] == "ok" and s["exit_code"] == 0

    r = quick(out, "--repeats", "2")
    assert r.returncode == 0 and "to run: 0; skipped: 4 done" in r.stdout


def test_failing_guest_program_is_recorded_and_rerun_on_request(tmp_path: Path) -> None:
    out = tmp_path / "fail"
    bad = ["--set", 'mixes.tiny.programs=[{name="bad", cmd=["/bin/false"]}]', "--policies", "excl"]
    r = quick(out, *bad)
    assert r.returncode == 1, r.stdout + r.stderr
    (s,) = statuses(out).values()
    assert s["state"] == "failed"
    assert "run_end status 'failed'" in s["error"]
    assert s["exit_code"] == 1 and s["log_tail"]
    r = quick(out, *bad)
    assert "skipped: 1 failed" in r.stdout and "--rerun-failed" in r.stdout
    r = quick(out, *bad, "--rerun-failed")
    (s,) = statuses(out).values()
    assert s["state"] == "failed" and s["attempt"] == 2
    (run,) = (out / "runs").iterdir()
    assert (run / "attempts" / "1" / "guest" / "results.jsonl").exists()


def test_time_limit_kills_qemu_and_records_timeout(tmp_path: Path) -> None:
    out = tmp_path / "slow"
    r = quick(out, "--policies", "default", "--time-limit", "4s")
    assert r.returncode == 1, r.stdout + r.stderr
    (s,) = statuses(out).values()
    assert s["state"] == "timeout", s
    assert "timeout" in s["error"] and s["log_tail"]
    assert not qemu_of(out)
