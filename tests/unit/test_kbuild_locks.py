"""Two kbuild invocations on one cache: extraction and builds are serialised.

Runs the real kbuild code in separate processes against a small kernel-shaped
tarball made here (the locking does not depend on what the source contains).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "kernel-patches"))

import kbuild  # noqa: E402

MAKEFILE = "VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 999\nEXTRAVERSION =\n"


def _tarball(tmp: Path, files: int = 400) -> Path:
    src = tmp / "linux-source-6.1"
    (src / "kernel").mkdir(parents=True)
    (src / "Makefile").write_text(MAKEFILE)
    for i in range(files):  # enough work that two extractions would overlap
        (src / "kernel" / f"f{i}.c").write_text(f"int f{i}(void) {{ return {i}; }}\n" * 50)
    tar = tmp / "linux.tar.xz"
    with tarfile.open(tar, "w:xz") as t:
        t.add(src, arcname="linux-source-6.1")
    return tar


def _pristine(cache: Path, tar: Path) -> subprocess.Popen[str]:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import kbuild;"
        "print(kbuild.ensure_pristine(kbuild.find_source(sys.argv[2])))"
    )
    env = dict(os.environ, NUMA_LB_CACHE=str(cache))
    return subprocess.Popen(
        [sys.executable, "-c", code, str(ROOT / "kernel-patches"), str(tar)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_two_extractions_on_an_empty_cache_extract_once(tmp_path: Path) -> None:
    tar = _tarball(tmp_path)
    cache = tmp_path / "cache"
    procs = [_pristine(cache, tar) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sum(o.count("extracting") for o in outs) == 1, outs
    dests = {o.strip().splitlines()[-1] for o in outs}
    assert len(dests) == 1
    dest = Path(dests.pop())
    assert (dest / ".extracted").read_text().strip() == "6.1.999"
    assert len(list((dest / "kernel").iterdir())) == 400
    assert not list(dest.parent.glob("*.tmp-*")), "no temporary directory left behind"


def test_an_interrupted_extraction_is_never_taken_for_a_finished_one(
    tmp_path: Path, monkeypatch
) -> None:
    tar = _tarball(tmp_path, files=3)
    monkeypatch.setenv("NUMA_LB_CACHE", str(tmp_path / "cache"))
    src = kbuild.find_source(str(tar))
    # what a killed extraction leaves: a half-filled temporary dir and a partial dest
    stale = src.pristine.with_name(f"{src.pristine.name}.tmp-999999")
    stale.mkdir(parents=True)
    (src.pristine / "kernel").mkdir(parents=True)
    dest = kbuild.ensure_pristine(src)
    assert (dest / ".extracted").exists() and (dest / "Makefile").exists()
    assert not stale.exists()


def test_the_tree_lock_serialises_two_processes(tmp_path: Path) -> None:
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); import kbuild\n"
        "with kbuild.locked('tree-x'):\n"
        "    print('in', time.monotonic(), flush=True); time.sleep(1.0)\n"
        "    print('out', time.monotonic(), flush=True)\n"
    )
    env = dict(os.environ, NUMA_LB_CACHE=str(tmp_path))
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(ROOT / "kernel-patches")],
                         env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    spans = []
    for p in procs:
        out = p.communicate(timeout=60)[0].split()
        spans.append((float(out[1]), float(out[3])))
    (a_in, a_out), (b_in, b_out) = sorted(spans)
    assert b_in >= a_out, f"both held the lock at once: {spans}"
