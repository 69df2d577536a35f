"""Large sweeps: cheap expansion, a confirmation above 10,000 runs, and a dry
run that builds, extracts and writes nothing (issue 13, items 12 and 14).

The fast run ids (``RunIds``) must be byte-identical to ``run_id``: a
difference would orphan every existing result, so they are compared on every
preset, on unshared points and on the memo's fallback path.
"""

from __future__ import annotations

import dataclasses
import io
import json
import lzma
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import kbuild
import pytest

from analysis.sweep import backends as bk
from analysis.sweep import driver
from analysis.sweep.matrix import build_runs, iter_runs, points, run_count
from analysis.sweep.point import Provenance, RunIds, SweepPoint, run_id
from analysis.sweep.rundir import RunDir, State
from analysis.sweep.spec import load_spec, preset_names
from tests.unit.test_sweep_ids import PROV, point

ROOT = Path(__file__).resolve().parents[2]
GEM5_PROV = dataclasses.replace(PROV, backend="gem5", gem5_sha256="e" * 64)


# ------------------------------------------------------------------ run ids
def test_fast_ids_match_run_id_on_every_preset() -> None:
    for name in preset_names():
        spec = load_spec(preset=name)
        for backend, prov in (("qemu", PROV), ("gem5", GEM5_PROV)):
            pts = points(spec, backend)
            ids = RunIds(prov)
            assert [ids(p) for p in pts] == [run_id(p, prov) for p in pts], (name, backend)
            assert run_count(spec) == len(pts)


def test_fast_ids_match_on_link_latency_and_unshared_points() -> None:
    spec = load_spec(
        preset="quick", overrides=['axes.link_latency=[20, "25ns"]', "axes.numa_factor=[]"]
    )
    pts = points(spec, "qemu")
    assert {p.link_latency for p in pts} == {"20", "25ns"}
    # points read back from JSON share nothing with each other
    copies = [SweepPoint.from_dict(json.loads(json.dumps(p.to_dict()))) for p in pts]
    ids = RunIds(PROV)
    assert [ids(p) for p in copies] == [run_id(p, PROV) for p in pts]


def test_fast_ids_fallback_when_the_memo_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RunIds, "MEMO_MAX", 0)
    pts = points(load_spec(preset="quick", overrides=["sweep.repeats=3"]), "qemu")
    ids = RunIds(PROV)
    assert [ids(p) for p in pts] == [run_id(p, PROV) for p in pts]


def test_fast_ids_follow_the_pinned_function() -> None:
    # test_sweep_ids pins run_id itself; the fast path must never drift from it
    p = point()
    assert RunIds(PROV)(p) == run_id(p, PROV)
    assert RunIds(PROV)(dataclasses.replace(p, repeat=7)) == run_id(
        dataclasses.replace(p, repeat=7), PROV
    )


def test_build_runs_uses_the_same_ids() -> None:
    spec = load_spec(preset="sensitivity")
    runs = build_runs(spec, "gem5", GEM5_PROV)
    assert [r.run_id for r in runs] == [run_id(p, GEM5_PROV) for p in points(spec, "gem5")]


# ------------------------------------------------------- confirmation flag
@pytest.fixture
def no_prepare(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Artifacts without building anything; records whether prepare ran."""
    called: list[bool] = []

    def prepare(
        backend: str,
        variant: str,
        build: bool,
        gem5_flag: str | None,
        require: bool = True,
        extra_variants: tuple[str, ...] = (),
    ) -> bk.Artifacts:
        called.append(True)
        prov = Provenance(backend, "kernel-test", "image-test", {"configs": "t"}, "test")
        return bk.Artifacts(prov, {"kernel": "/nonexistent/bzImage", "image": "/nonexistent/img"})

    monkeypatch.setattr(bk, "prepare", prepare)
    return called


def sweep(out: Path, *overrides: str, **opts: Any) -> tuple[int, str]:
    spec = load_spec(preset="quick", overrides=list(overrides))
    buf = io.StringIO()
    code = driver.run_sweep(spec, driver.Options(out=out, stream=buf, **opts))
    return code, buf.getvalue()


def test_a_million_runs_need_allow_large(tmp_path: Path, no_prepare: list[bool]) -> None:
    # the spec: 2 policies x 500000 repeats = 10^6 runs
    code, text = sweep(tmp_path / "s", "sweep.repeats=500000", dry_run=True)
    assert code == 2
    assert "1,000,000 runs" in text and "--allow-large" in text
    assert not no_prepare and not (tmp_path / "s").exists()  # refused before anything
    code, text = sweep(tmp_path / "s", "sweep.repeats=5001")  # 10,002: a real run too
    assert code == 2 and "10,002 runs" in text


def test_ten_thousand_runs_need_no_flag(tmp_path: Path, no_prepare: list[bool]) -> None:
    code, text = sweep(tmp_path / "s", "sweep.repeats=5000", dry_run=True)
    assert code == 0 and "to run: 10000" in text
    assert not (tmp_path / "s").exists()


def test_dry_run_with_allow_large_streams_every_run(tmp_path: Path, no_prepare: list[bool]) -> None:
    code, text = sweep(tmp_path / "s", "sweep.repeats=10001", dry_run=True, allow_large=True)
    assert code == 0 and "to run: 20002" in text
    listed = [ln for ln in text.splitlines() if ln.startswith("  ") and " tiny r" in ln]
    assert len(listed) == 20002 and listed[-1].endswith("tiny r10000")
    assert not (tmp_path / "s").exists()


# ----------------------------------------------------------- lazy planning
def test_planning_writes_nothing_and_recognises_existing_runs(tmp_path: Path) -> None:
    spec = load_spec(preset="quick", overrides=["sweep.repeats=5000"])
    out = tmp_path / "s"
    plan = driver.make_plan(iter_runs(spec, "qemu", PROV), out, rerun_failed=False)
    assert len(plan.to_run) == len(plan.run_ids) == 10000
    assert not out.exists()  # no run directory before its run starts
    # resume: directories that exist are recognised by their state
    (run0, rd0), (run1, rd1) = plan.to_run[:2]
    rd0.create({"run_id": run0.run_id}, {})
    rd0.transition(State.RUNNING)
    rd0.transition(State.DONE)
    rd1.create({"run_id": run1.run_id}, {})
    plan = driver.make_plan(iter_runs(spec, "qemu", PROV), out, rerun_failed=False)
    assert plan.skipped == {"done": 1} and len(plan.to_run) == 9999
    assert plan.to_run[0][0].run_id == run1.run_id  # the pending one is run


def test_final_states_count_runs_without_a_directory_as_pending(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "runs" / ("a" * 16))
    rd.create({"run_id": "a" * 64}, {})
    rd.transition(State.RUNNING)
    rd.transition(State.DONE)
    assert driver.final_states(tmp_path, ["a" * 64, "b" * 64]) == {"done": 1, "pending": 1}


# ------------------------------------------------ dry run: builds nothing
def fake_kernel_tarball(path: Path, sublevel: int) -> Path:
    """A tiny linux tarball: a nested Makefile first, then the top-level one."""
    stage = path.parent / "stage"
    (stage / "linux-6.1.x" / "scripts").mkdir(parents=True)
    (stage / "linux-6.1.x" / "scripts" / "Makefile").write_text("VERSION = 99\n")
    (stage / "linux-6.1.x" / "Makefile").write_text(
        f"# SPDX\nVERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = {sublevel}\nEXTRAVERSION =\n"
    )
    with lzma.open(path, "wb") as xz, tarfile.open(fileobj=xz, mode="w") as tar:
        tar.add(stage / "linux-6.1.x" / "scripts", arcname="linux-6.1.x/scripts")
        tar.add(stage / "linux-6.1.x" / "Makefile", arcname="linux-6.1.x/Makefile")
    shutil.rmtree(stage)
    return path


def tree_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_kbuild_path_never_extracts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tarball = fake_kernel_tarball(tmp_path / "linux.tar.xz", 192)
    cache = tmp_path / "cache"
    monkeypatch.setenv("NUMA_LB_CACHE", str(cache))
    assert kbuild.main(["path", "--tarball", str(tarball)]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert tree_files(cache) == []  # nothing extracted, nothing written
    # the same artifact dir as after a real extraction
    src = kbuild.find_source(str(tarball))
    assert kbuild.kernel_version(kbuild.ensure_pristine(src)) == "6.1.192"
    assert kbuild.source_version(src) == "6.1.192"
    bid = kbuild.build_id("6.1.192", kbuild.series(), kbuild.config_fragments("release"), "release")
    assert printed == kbuild.artifact_dir(bid)


def test_kbuild_path_names_an_unreadable_tarball(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "linux.tar.xz"
    bad.write_bytes(b"not a tarball")
    monkeypatch.setenv("NUMA_LB_CACHE", str(tmp_path / "cache"))
    assert kbuild.main(["path", "--tarball", str(bad)]) == 2
    assert "without extracting it" in capsys.readouterr().err
    assert tree_files(tmp_path / "cache") == []


def test_would_build_names_the_missing_kernel_and_image(tmp_path: Path) -> None:
    need = bk.would_build(tmp_path / "artifacts" / "abc", Path("unbuilt-image-123"), "debug")
    assert len(need) == 2
    assert "kbuild.py build --variant debug" in need[0] and "build_image.py build" in need[1]
    (tmp_path / "artifacts" / "abc").mkdir(parents=True)
    (tmp_path / "artifacts" / "abc" / "build.json").write_text("{}")
    (tmp_path / "img").write_bytes(b"")
    assert bk.would_build(tmp_path / "artifacts" / "abc", tmp_path / "img", "release") == []


@pytest.mark.skipif(
    not (kbuild.DEBIAN_TARBALL.exists() and shutil.which("qemu-system-x86_64")),
    reason="needs linux-source-6.1 and QEMU (.ci/setup)",
)
def test_dry_run_on_an_empty_cache_writes_nothing(tmp_path: Path) -> None:
    cache, out = tmp_path / "cache", tmp_path / "out"
    env = {**os.environ, "NUMA_LB_CACHE": str(cache)}
    r = subprocess.run(
        [str(ROOT / "run_all.py"), "--preset", "quick", "--dry-run", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "will build kernel: `kernel-patches/kbuild.py build" in r.stdout
    assert "will build disk image: `disk-image/build_image.py build`" in r.stdout
    # issue 42 item 8: the image tool's "no image ... run build" note read like an error
    assert "build_image" not in r.stderr, r.stderr
    assert "to run: 2" in r.stdout
    assert tree_files(cache) == [] and not out.exists()
