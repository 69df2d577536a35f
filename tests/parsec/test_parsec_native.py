"""PARSEC tier, on this host: every program available at simsmall runs with 4 threads
exactly as the mix runner's numa-lb launcher runs it (same manifest, same work
directory set-up), and its output is checked (parsec_checks.CHECKS); the template
programs (barnes, fmm, water_*) likewise at the test size the tree provides."""

from __future__ import annotations

from pathlib import Path

import build_parsec
import parsec_catalog as cat
import parsec_checks
import pytest
from conftest import INPUT, THREADS, record_time, simsmall_programs

TEMPLATE_PROGRAMS = [
    p.package
    for p in cat.PROGRAMS
    if cat.input_source(p, "simsmall") == cat.OFFICIAL and cat.input_source(p, "test") == cat.TREE
]


@pytest.mark.parametrize("package", simsmall_programs())
def test_simsmall_runs_and_is_right(parsec_build: Path, tmp_path: Path, package: str) -> None:
    o = parsec_checks.run_and_check(parsec_build, package, INPUT, THREADS, tmp_path, timeout=900)
    record_time("native", package, seconds=round(o.seconds, 2), input=INPUT)
    assert o.ok, f"{package}: {o.problems} ({parsec_checks.CHECKS[package].what})"


@pytest.mark.parametrize("package", TEMPLATE_PROGRAMS)
def test_template_programs_at_test_size(parsec_build: Path, tmp_path: Path, package: str) -> None:
    man = build_parsec.manifest(parsec_build)
    assert "test" in man["programs"][package]["inputs"]
    o = parsec_checks.run_and_check(parsec_build, package, "test", THREADS, tmp_path, timeout=900)
    record_time("native", package, seconds=round(o.seconds, 2), input="test")
    assert o.ok, f"{package}: {o.problems}"


def test_the_checks_catch_a_wrong_answer(parsec_build: Path, tmp_path: Path) -> None:
    """blackscholes with one price changed, streamcluster with another centre: failed."""
    bs = build_parsec.run_native(
        parsec_build, "parsec.blackscholes", INPUT, THREADS, tmp_path / "b"
    )
    out = parsec_checks.native_out(bs)
    lines = out.files["prices.txt"].decode().split("\n")
    lines[7] = f"{float(lines[7]) * 1.01:.6f}"
    bad = out._replace(files={"prices.txt": "\n".join(lines).encode()})
    inputs = parsec_checks.input_files(parsec_build, "parsec.blackscholes", INPUT)
    assert parsec_checks.check("parsec.blackscholes", out, {}, inputs)[0] == []
    problems = parsec_checks.check("parsec.blackscholes", bad, {}, inputs)[0]
    assert problems and "option 6" in problems[0]
    sc = parsec_checks.RunOut(0, "[HOOKS] Leaving ROI", "", {"output.txt": b"1\n"})
    other = sc._replace(files={"output.txt": b"2\n"})
    assert parsec_checks.check("parsec.streamcluster", sc, {"t1": other})[0]
