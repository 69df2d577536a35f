"""PARSEC tier, instruction counts: workloads/parsec/instructions.py runs a program
natively and under valgrind's callgrind and reports its user-level instructions.
blackscholes at simsmall counts a positive integer, and 4 threads count nearly
what 1 thread does (same work: valgrind serialises the threads)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import instructions
import pytest
from conftest import INPUT

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "workloads" / "parsec" / "instructions.py"


def _run_tool(build: Path, threads: int, out: Path, workdir: Path) -> dict[str, str]:
    cmd = [
        sys.executable, str(TOOL), "--build", str(build), "--input", INPUT,
        "--threads", str(threads), "--programs", "blackscholes", "--out", str(out),
        "--workdir", str(workdir), "--timeout", "600",
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1, (p.returncode, p.stdout, p.stderr)
    assert p.returncode == 0, (rows[0], p.stderr)
    return rows[0]


def test_blackscholes_counts_the_same_work_at_4_and_1_threads(
    parsec_build: Path, tmp_path: Path
) -> None:
    if not shutil.which("valgrind"):
        pytest.skip("SKIPPED parsec: valgrind is not installed")
    r4 = _run_tool(parsec_build, 4, tmp_path / "t4.csv", tmp_path / "w4")
    r1 = _run_tool(parsec_build, 1, tmp_path / "t1.csv", tmp_path / "w1")
    for r, t in ((r4, 4), (r1, 1)):
        assert r["program"] == "parsec.blackscholes" and r["input"] == INPUT
        assert r["threads"] == str(t) and r["status"] == "ok", r
        assert r["instructions"].isdigit() and int(r["instructions"]) > 0, r
        assert r["native_exit"] == "0" and r["valgrind_exit"] == "0", r
        assert float(r["native_s"]) > 0 and float(r["valgrind_s"]) > 0, r
    n4, n1 = int(r4["instructions"]), int(r1["instructions"])
    assert abs(n4 - n1) / min(n4, n1) < 0.30, (n4, n1)


def test_valgrind_goes_after_the_stdin_shell_and_the_count_is_parsed() -> None:
    log = Path("/tmp/x.log")
    plain = instructions.valgrind_argv(["/b/fft", "-p4"], log)
    assert plain[0] == "valgrind" and plain[-2:] == ["/b/fft", "-p4"]
    sh = ["/bin/sh", "-c", 'exec "$@" <"$0"', "input_4", "/b/barnes", "4"]
    wrapped = instructions.valgrind_argv(sh, log)
    assert wrapped[:4] == sh[:4] and wrapped[4] == "valgrind" and wrapped[-2:] == sh[-2:]
    text = "==7== Events    : Ir\n==7== Collected : 175065972\n==7==\n"
    assert instructions.parse_collected(text) == 175065972
    assert instructions.parse_collected("==7== nothing\n") is None
