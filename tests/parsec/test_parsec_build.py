"""PARSEC tier, the build: what build_parsec.py made of $PARSEC_SRC, and the hooks
shim (ROI -> m5 work items of PARSEC_WORK_ID, nothing outside gem5)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import build_parsec
import parsec_catalog as cat
import parsec_tree as pt
import pytest
from conftest import INPUT, simsmall_programs

ROOT = Path(__file__).resolve().parents[2]


def test_every_available_program_is_built_static_with_our_hooks(parsec_build: Path) -> None:
    man = build_parsec.manifest(parsec_build)
    meta = json.loads((parsec_build / "build.json").read_text())
    assert man["work_id"] == cat.PARSEC_WORK_ID and meta["build_id"] == parsec_build.name
    for pkg in simsmall_programs():
        assert INPUT in man["programs"][pkg]["inputs"], pkg
    for pkg, e in man["programs"].items():
        exe = parsec_build / "install" / e["exe"]
        assert build_parsec.is_static(exe), pkg
        assert build_parsec.SHIM_MARK in exe.read_bytes(), pkg
        for size, inp in e["inputs"].items():
            assert inp["source"] == cat.input_source(cat.lookup(pkg), size), (pkg, size)
            for f in inp["files"]:
                assert (parsec_build / "install" / inp["dir"] / f).exists(), (pkg, size, f)
    # PARSEC's own generator reproduces the tree's blackscholes inputs exactly
    assert meta["inputgen_reproduces_tree"] == {"test": True, "simdev": True}


def test_the_build_is_cached_and_keyed_by_its_inputs(parsec_build: Path) -> None:
    sel = build_parsec.Selection.make()
    assert build_parsec.build(sel) == parsec_build  # cached: no rebuild
    assert build_parsec.build_id(sel) == parsec_build.name
    other = build_parsec.Selection.make(sizes=["test"])
    assert build_parsec.build_id(other) != parsec_build.name


def _shim_driver(tmp: Path, stub_m5: bool) -> Path:
    """A program that calls the four hooks, linked with PARSEC's hooks.c (renamed),
    our hooks_m5.c and either our m5ops or a stub recording each m5 call."""
    tree = pt.find_tree(os.environ["PARSEC_SRC"])
    inc = tree / pt.HOOKS_SRC / "include"
    main = tmp / "main.c"
    main.write_text(
        '#include "hooks.h"\n'
        "int main(void) {\n"
        "  __parsec_bench_begin(__parsec_blackscholes);\n"
        "  __parsec_roi_begin();\n  __parsec_roi_end();\n"
        "  __parsec_bench_end();\n  return 0;\n}\n"
    )
    objs = [str(main)]
    if stub_m5:
        stub = tmp / "stub.c"
        stub.write_text(
            '#include <stdio.h>\n#include "m5ops.h"\n'
            'enum m5_probe_result m5_probe(const char **why) { *why = "stub"; return M5_GEM5; }\n'
            "int m5_use_addr(unsigned long b) { (void)b; return 0; }\n"
            'void m5_work_begin(uint64_t w, uint64_t t) { printf("STUB begin %lu %d\\n",'
            " (unsigned long)w, t != 0); }\n"
            'void m5_work_end(uint64_t w, uint64_t t) { printf("STUB end %lu %d\\n",'
            " (unsigned long)w, t != 0); }\n"
        )
        objs.append(str(stub))
    else:
        objs.append(str(ROOT / "workloads/m5ops/m5ops.c"))
    renames = [f"-D{n}=__nls_orig_{n}" for n in build_parsec.HOOK_NAMES]
    hooks_o = tmp / "hooks.o"
    subprocess.run(
        [
            "gcc",
            "-O2",
            "-D_GNU_SOURCE",
            *renames,
            "-I",
            str(inc),
            "-c",
            "-o",
            str(hooks_o),
            str(tree / pt.HOOKS_SRC / "hooks.c"),
        ],
        check=True,
    )
    exe = tmp / "driver"
    subprocess.run(
        [
            "gcc",
            "-O2",
            f"-DNLS_PARSEC_WORK_ID={cat.PARSEC_WORK_ID}",
            "-I",
            str(inc),
            "-I",
            str(ROOT / "workloads/m5ops"),
            "-o",
            str(exe),
            *objs,
            str(ROOT / "workloads/parsec/hooks_m5.c"),
            str(hooks_o),
        ],
        check=True,
    )
    return exe


def test_hooks_issue_parsec_work_items_under_gem5(parsec_build: Path, tmp_path: Path) -> None:
    exe = _shim_driver(tmp_path, stub_m5=True)
    out = subprocess.run(
        [str(exe)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, NUMA_LB_PARSEC_M5="auto"),
    ).stdout
    wid = cat.PARSEC_WORK_ID
    assert [ln for ln in out.splitlines() if ln.startswith("STUB")] == [
        f"STUB begin {wid} 1",
        f"STUB end {wid} 1",
    ]
    assert out.index("Entering ROI") < out.index("STUB begin") < out.index("STUB end")
    assert out.index("STUB end") < out.index("Leaving ROI")
    off = subprocess.run(
        [str(exe)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, NUMA_LB_PARSEC_M5="off"),
    ).stdout
    assert "STUB" not in off and f"(id {wid}): off (NUMA_LB_PARSEC_M5=off)" in off


@pytest.mark.parametrize("mode", ["auto", ""])
def test_hooks_are_noops_outside_gem5(parsec_build: Path, tmp_path: Path, mode: str) -> None:
    exe = _shim_driver(tmp_path, stub_m5=False)  # the real m5ops: 0f 04 faults here
    proc = subprocess.run(
        [str(exe)], capture_output=True, text=True, env=dict(os.environ, NUMA_LB_PARSEC_M5=mode)
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        f"(id {cat.PARSEC_WORK_ID}): off (the 0f 04 pseudo-instruction raised SIGILL" in proc.stdout
    )
    assert "[HOOKS] Total time spent in ROI" in proc.stdout
