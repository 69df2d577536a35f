"""Unit tests for workloads/parsec_catalog.py (the PARSEC 3.0 programs of [Chiang21] Table 2)."""

from __future__ import annotations

import ast
import glob
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workloads"))
import parsec_catalog as cat  # noqa: E402

# The text of Chiang & Su [Chiang21] is not part of the repository: the one test that
# compares the catalog with the paper's Table 2 reads it from NUMA_LB_SEEDS (a
# directory holding the paper texts, 003_*.txt) or, by default, ../shared/seeds next to
# the repository, and skips with the reason when it is not there.
SEEDS = Path(os.environ.get("NUMA_LB_SEEDS") or REPO.parent / "shared" / "seeds").expanduser()
PAPER_GLOB = "003_*.txt"
TABLE2_START, TABLE2_END = "Table 2. The characteristics", "Figure 5."


def paper_text() -> tuple[Path, str]:
    """[Chiang21]'s text, or skip (with where it was looked for and why it is not usable)."""
    try:
        found = sorted(SEEDS.glob(PAPER_GLOB)) if SEEDS.is_dir() else []
        if not found:
            raise FileNotFoundError("no such file")
        text = found[0].read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        pytest.skip(
            f"paper text not found at {SEEDS / PAPER_GLOB}: {exc} "
            "(set NUMA_LB_SEEDS to the directory holding the paper texts)"
        )
    if TABLE2_START not in text or TABLE2_END not in text.split(TABLE2_START, 1)[1]:
        pytest.skip(
            f"paper text at {found[0]}: no Table 2 block ({TABLE2_START!r} .. {TABLE2_END!r})"
        )
    return found[0], text


def python36() -> str | None:
    """A Python 3.6 interpreter (the x86-parsec image's version), if this host has one."""
    cand = [os.environ.get("PYTHON36", "")]
    cand += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6")))
    for c in cand:
        if c and os.access(c, os.X_OK):
            return c
    return None


def test_table2_counts() -> None:
    progs = cat.table2()
    assert len(progs) == 30
    assert len({p.package for p in progs}) == 30
    # "22 of 30 applications allocate and initialize ... in the initializing thread"
    assert sum(p.allocation == cat.LEADER for p in progs) == 22
    assert sum(p.allocation == cat.INDIVIDUAL for p in progs) == 8
    by_suite: dict[str, int] = {}
    for p in progs:
        by_suite[p.suite] = by_suite.get(p.suite, 0) + 1
    # "13 programs from PARSEC 2.0, 14 programs from the SPLASH ..., and three network"
    assert by_suite == {"PARSEC 2.0": 13, "SPLASH-2x": 14, "Network": 3}


def test_table2_matches_the_paper_text() -> None:
    _, text = paper_text()
    start = text.index(TABLE2_START)
    block = text[start : text.index(TABLE2_END, start)]
    suite = ""
    expect: dict[str, str] = {}
    for line in block.splitlines()[2:]:
        cols = line.split("\t")
        if len(cols) != 3 or cols[0].startswith("Benchmark Suite"):
            continue
        suite = cols[0].strip() or suite
        alloc = cat.LEADER if "leader" in cols[2] else cat.INDIVIDUAL
        prefix = {"PARSEC 2.0": "parsec", "SPLASH-2x": "splash2x", "Network": "parsec"}[suite]
        for name in re.split(r",\s*", cols[1].strip()):
            expect[f"{prefix}.{name}"] = alloc
    assert len(expect) == 30
    assert {p.package: p.allocation for p in cat.PROGRAMS} == expect


def test_paper_mix_needs_an_explicit_exclusion() -> None:
    mix = cat.paper_mix("parsec.netferret")
    assert len(mix) == cat.PAPER_MIX_SIZE == 29
    assert "parsec.netferret" not in {p.package for p in mix}
    with pytest.raises(TypeError):
        cat.paper_mix()  # type: ignore[call-arg]
    with pytest.raises(KeyError):
        cat.paper_mix("nonesuch")


def test_lookup() -> None:
    assert cat.lookup("canneal").package == "parsec.canneal"
    assert cat.lookup("splash2x.fmm").allocation == cat.INDIVIDUAL
    with pytest.raises(KeyError, match="ambiguous"):
        cat.lookup("raytrace")
    assert cat.lookup("splash2x.raytrace").suite == "SPLASH-2x"


def test_gem5_image_has_the_13_parsec_programs() -> None:
    # gem5-resources src/parsec builds exactly the 13 PARSEC 2.0 programs
    img = {p.package for p in cat.PROGRAMS if p.in_gem5_image}
    assert img == {p.package for p in cat.PROGRAMS if p.suite == "PARSEC 2.0"}
    assert cat.GEM5_PARSEC_CONFIG == "gcc-hooks"
    assert cat.lookup("freqmine").paper_config == "gcc-openmp"


def test_synthetic_mapping_keeps_the_allocation_class() -> None:
    for p in cat.PROGRAMS:
        s = cat.synthetic_for(p)
        assert s.allocation == p.allocation, p.package
    assert cat.lookup("streamcluster").synthetic == "master_clients"
    assert cat.lookup("blackscholes").synthetic == "compute_small"
    # every synthetic name is a program the workloads Makefile builds
    mk = (REPO / "workloads" / "src" / "Makefile").read_text()
    for name in cat.SYNTHETIC:
        assert name in mk


def test_parsecmgmt_command() -> None:
    argv = cat.parsecmgmt_command(cat.lookup("fmm"), "simsmall", 16, "/opt/parsec")
    assert argv == [
        "/opt/parsec/bin/parsecmgmt", "-a", "run", "-p", "splash2x.fmm",
        "-c", "gcc-pthreads", "-i", "simsmall", "-n", "16",
    ]  # fmt: skip
    argv = cat.parsecmgmt_command(cat.lookup("canneal"), "native", 4, config="gcc-hooks")
    assert argv[0] == "/home/gem5/parsec-benchmark/bin/parsecmgmt"
    assert argv[argv.index("-c") + 1] == "gcc-hooks"
    with pytest.raises(ValueError):
        cat.parsecmgmt_command(cat.lookup("canneal"), "huge", 4)
    with pytest.raises(ValueError):
        cat.parsecmgmt_command(cat.lookup("canneal"), "simsmall", 0)
    env = cat.parsec_env("/opt/parsec", {"PATH": "/usr/bin"})
    assert env["PARSECDIR"] == "/opt/parsec" and env["PATH"] == "/opt/parsec/bin:/usr/bin"


def _fake_pkg(root: Path, pkg_dir: str, runconf: str) -> None:
    pkg = root / pkg_dir
    (pkg / "parsec").mkdir(parents=True)
    (pkg / "parsec" / "simsmall.runconf").write_text(runconf)
    (pkg / "inputs").mkdir()
    src = root / "in.nets"
    src.write_text("x")
    with tarfile.open(pkg / "inputs" / "input_simsmall.tar", "w") as tf:
        tf.add(src, arcname="100000.nets")


def test_direct_command_from_runconf(tmp_path: Path) -> None:
    conf = (
        "#!/bin/bash\n# comment\n"
        'run_exec="bin/canneal"\n'
        'run_args="${NTHREADS} 10000 2000 100000.nets 32"\n'
    )
    assert cat.parse_runconf(conf) == {
        "run_exec": "bin/canneal",
        "run_args": "${NTHREADS} 10000 2000 100000.nets 32",
    }
    _fake_pkg(tmp_path, "pkgs/kernels/canneal", conf)
    d = cat.direct_command(cat.lookup("canneal"), "simsmall", 8, str(tmp_path), "gcc-hooks")
    inst = tmp_path / "pkgs/kernels/canneal/inst" / f"{cat.parsec_platform()}.gcc-hooks"
    assert d.argv == [str(inst / "bin/canneal"), "8", "10000", "2000", "100000.nets", "32"]
    assert d.cwd == str(tmp_path / "pkgs/kernels/canneal/run")
    assert d.input_tar and d.input_tar.endswith("input_simsmall.tar")


def test_direct_command_shell_syntax(tmp_path: Path) -> None:
    conf = 'run_exec="bin/fmm"\nrun_args="${NTHREADS} < input_${NTHREADS}"\n'
    _fake_pkg(tmp_path, "ext/splash2x/apps/fmm", conf)
    d = cat.direct_command(cat.lookup("fmm"), "simsmall", 4, str(tmp_path))
    assert d.argv[:2] == ["/bin/sh", "-c"]
    assert d.argv[2].startswith("exec ") and d.argv[2].endswith("4 < input_4")


@pytest.mark.parametrize("name", ["parsec_catalog.py", "mixrunner.py"])
def test_guest_python_is_36_compatible(name: str) -> None:
    src = (REPO / "workloads" / name).read_text()
    # syntax level, on any host
    ast.parse(src, feature_version=(3, 6))
    py36 = python36()
    if py36 is None:
        pytest.skip("SKIPPED py36-import: no Python 3.6 interpreter on this host")
    mod = name[:-3]
    code = f"import sys; sys.path.insert(0, {str(REPO / 'workloads')!r}); import {mod}"
    p = subprocess.run([py36, "-c", code], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
