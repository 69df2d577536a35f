"""analysis/results/keep.py: a finding kept in the repository (frames, report,
provenance) regenerates its report from the frames alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import run_all
from analysis.results import keep

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
