"""analysis/results/keep.py: a finding kept in the repository (frames, report,
provenance) regenerates its report from the frames alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import run_all
from analysis.results import keep
from analysis.results.frames import DERIVED_METRICS

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_keep_writes_frames_report_and_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    shutil.copytree(FIX / "sweep-quick", sweep)
    m = json.loads((sweep / "sweep.json").read_text())
    m["git"] = {"commit": "0123abc", "dirty": True}
    (sweep / "sweep.json").write_text(json.dumps(m))
    dest = tmp_path / "findings" / "quick"
    cmd = "./run_all.py --preset quick --out 'results/x y'"
    assert keep.main([str(sweep), str(dest), "--command", cmd]) == 0
    for f in ("frames/metrics.parquet", "frames/runs.parquet", "frames/errors.parquet",
              "report.md", "PROVENANCE.md"):  # fmt: skip
        assert (dest / f).is_file(), f
    assert not (dest / "report.html").exists()
    prov = (dest / "PROVENANCE.md").read_text()
    assert cmd in prov and "`0123abc` (with local changes)" in prov
    assert m["provenance"]["kernel_build_id"] in prov
    kept = (dest / "report.md").read_text()
    shutil.rmtree(sweep)  # the run directories are gone: the frames suffice
    capsys.readouterr()
    assert run_all.main(["report", "--frames", str(dest / "frames"), "--out", str(dest)]) == 0
    assert (dest / "report.md").read_text().splitlines()[3:] == kept.splitlines()[3:]


def test_keep_refuses_a_directory_that_is_not_a_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert keep.main([str(tmp_path), str(tmp_path / "d"), "--command", "x"]) == 2
    assert "no sweep.json" in capsys.readouterr().err
    (tmp_path / "sweep.json").write_text("[1, 2]")
    assert keep.main([str(tmp_path), str(tmp_path / "d"), "--command", "x"]) == 2
    assert "not a JSON object" in capsys.readouterr().err


def test_keep_refuses_to_drop_runs_the_finding_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keeping a sweep that holds fewer runs into a finding lost the others
    silently (2026-11-27: a pilot's default run, kept from another sweep)."""
    sweep = tmp_path / "sweep"
    shutil.copytree(FIX / "sweep-quick", sweep)
    dest = tmp_path / "findings" / "quick"
    assert keep.main([str(sweep), str(dest), "--command", "x"]) == 0
    before = (dest / "frames" / "runs.parquet").read_bytes()
    fewer = tmp_path / "fewer"
    shutil.copytree(sweep, fewer)
    m = json.loads((fewer / "sweep.json").read_text())
    gone = sorted((fewer / "runs").iterdir())[0]
    shutil.rmtree(gone)
    m["runs"] = [r for r in m["runs"] if gone.name not in json.dumps(r)]
    (fewer / "sweep.json").write_text(json.dumps(m))
    capsys.readouterr()
    assert keep.main([str(fewer), str(dest), "--command", "y"]) == 2
    err = capsys.readouterr().err
    assert "holds 1 run(s) (1 done) the inputs do not" in err and gone.name in err
    assert (dest / "frames" / "runs.parquet").read_bytes() == before
    # with the finding's own frames as an input, nothing is lost
    assert keep.main([str(dest / "frames"), str(fewer), str(dest), "--command", "y"]) == 0
    assert len(keep.read_frames(dest / "frames").runs) == 4


def test_keep_no_report_keeps_frames_and_provenance_blind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage of a pre-registered experiment kept at a session's end, before
    its endpoint may be computed: frames and provenance, no report, and the
    report of an earlier keep of the same finding removed (it would describe
    other frames)."""
    sweep = tmp_path / "sweep"
    shutil.copytree(FIX / "sweep-quick", sweep)
    assert keep.main([str(sweep), str(tmp_path / "findings" / "quick"), "--command", "x"]) == 0
    dest = tmp_path / "findings" / "stage"
    assert keep.main([str(sweep), str(dest), "--command", "x"]) == 0
    assert (dest / "report.md").is_file()
    capsys.readouterr()
    assert keep.main([str(dest / "frames"), str(sweep), str(dest), "--command", "x",
                      "--no-report"]) == 0  # fmt: skip
    assert not (dest / "report.md").exists() and not (dest / "report_files").exists()
    assert (dest / "PROVENANCE.md").is_file()
    assert len(keep.read_frames(dest / "frames").runs) == 4
    fresh = tmp_path / "findings" / "fresh"
    assert keep.main([str(sweep), str(fresh), "--command", "x", "--no-report"]) == 0
    assert sorted(p.name for p in fresh.iterdir()) == ["PROVENANCE.md", "frames"]
    # no contrast between runs is written, nor a way to a report suggested
    derived = set(DERIVED_METRICS)
    full = keep.read_frames(tmp_path / "findings" / "quick" / "frames")
    assert derived & set(full.metrics["metric"])
    blind = keep.read_frames(fresh / "frames")
    assert not derived & set(blind.metrics["metric"])
    assert len(blind.metrics) == (~full.metrics["metric"].isin(derived)).sum()
    prov = (fresh / "PROVENANCE.md").read_text()
    assert "Kept blind" in prov and "Regenerate" not in prov
    # a keep with a report, from the blind frames alone, derives the pairs again
    again = tmp_path / "findings" / "again"
    assert keep.main([str(fresh / "frames"), str(again), "--command", "x"]) == 0
    rows = keep.read_frames(again / "frames").metrics
    assert (rows["metric"].isin(derived)).sum() > 0
    assert "improvement" in (again / "report.md").read_text()
