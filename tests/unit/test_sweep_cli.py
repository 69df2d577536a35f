"""run_all.py's command line refuses bad numbers and empty inputs (issue 13, items 13, 17).

Each case is the exact bad input of the issue (or its sibling option): argparse
exits 2 with a message naming the option and what is allowed; `report` and
`status` exit 2 when there is nothing to read instead of writing an empty report.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import run_all
from analysis.sweep.executors import LocalExecutor, pool_size

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as ei:
        run_all.main(argv)
    assert ei.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "option", "allowed"),
    [
        (["run", "--preset", "quick", "--jobs", "-1"], "--jobs", "1..1024"),
        (["run", "--preset", "quick", "--jobs", "0"], "--jobs", "1..1024"),
        (["run", "--preset", "quick", "-j", "-1"], "--jobs", "1..1024"),
        (["run", "--preset", "quick", "--jobs", "100000"], "--jobs", "1..1024"),
        (["run", "--preset", "quick", "--jobs", "two"], "--jobs", "1..1024"),
        (["run", "--preset", "quick", "--repeats", "0"], "--repeats", ">= 1"),
        (["run", "--preset", "quick", "--repeats", "-3"], "--repeats", ">= 1"),
        (["run", "--preset", "quick", "--poll", "0"], "--poll", "> 0"),
        (["run", "--preset", "quick", "--poll", "-1"], "--poll", "> 0"),
        (["run", "--preset", "quick", "--poll", "nan"], "--poll", "> 0"),
        (["bench", "--runs", "0"], "--runs", ">= 1"),
        (["bench", "--runs", "-5"], "--runs", ">= 1"),
        (["bench-machine", "--cores", "0"], "--cores", ">= 1"),
        (["bench-machine", "--cores", "1,-2"], "--cores", ">= 1"),
        (["bench-machine", "--cores", ","], "--cores", ">= 1"),
    ],
)
def test_nonsensical_numbers_are_refused(
    argv: list[str], option: str, allowed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = usage_error(argv, capsys)
    assert option in err and allowed in err, err


def test_default_command_refuses_negative_jobs_too(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["--preset", "quick", "--jobs", "-1"], capsys)
    assert "--jobs" in err and "got -1" in err


def test_pool_and_executor_refuse_a_pool_below_one() -> None:
    # The API path: a pool of -1 used to make the executor loop forever.
    with pytest.raises(ValueError, match="jobs must be >= 1, got -1"):
        pool_size(2, 1 << 30, -1)
    with pytest.raises(ValueError, match="jobs must be >= 1, got 0"):
        pool_size(2, 1 << 30, 0)
    with pytest.raises(ValueError, match="parallel must be >= 1"):
        LocalExecutor(0, 1 << 30)
    assert pool_size(2, 1 << 30, 3) == (3, "--jobs 3")


def test_report_on_a_missing_directory_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-sweep"
    assert run_all.main(["report", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and str(missing) in err
    assert not missing.exists()  # no empty report written


def test_report_on_a_directory_without_runs_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    (empty / "runs").mkdir(parents=True)
    assert run_all.main(["report", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no run directories under" in err and str(empty) in err
    assert not (empty / "report.md").exists()


def test_report_still_works_on_real_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "t"
    shutil.copytree(FIX / "sweep-quick", tree)
    assert run_all.main(["report", str(tree)]) == 0
    assert (tree / "report.md").exists()


def test_report_regenerates_from_its_frames_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a finding keeps frames + report, not run dirs: the same report from the frames
    tree = tmp_path / "t"
    shutil.copytree(FIX / "sweep-quick", tree)
    assert run_all.main(["report", str(tree)]) == 0
    kept = tmp_path / "finding"
    shutil.copytree(tree / "frames", kept / "frames")
    shutil.rmtree(tree)
    assert run_all.main(["report", "--frames", str(kept / "frames")]) == 0
    capsys.readouterr()
    again = (kept / "report.md").read_text()
    assert "Improvement" in again or "improvement" in again

    # the same sections and tables as the report from the run directories
    def body(md: str) -> list[str]:
        return [x for x in md.splitlines() if not x.startswith("Generated ")]

    shutil.copytree(FIX / "sweep-quick", tree)
    assert run_all.main(["report", str(tree)]) == 0
    assert body(again) == body((tree / "report.md").read_text())


def test_report_from_frames_refuses_a_missing_or_corrupt_frame(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fr = tmp_path / "frames"
    fr.mkdir()
    assert run_all.main(["report", "--frames", str(fr)]) == 2
    assert "metrics.parquet: no such file" in capsys.readouterr().err
    for name in ("metrics", "runs", "errors"):
        (fr / f"{name}.parquet").write_bytes(b"PAR1 truncated")
    assert run_all.main(["report", "--frames", str(fr)]) == 2
    assert "not a readable parquet file" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()
    assert run_all.main(["report"]) == 2  # neither dirs nor --frames
    assert run_all.main(["report", str(tmp_path), "--frames", str(fr)]) == 2  # both


def test_status_on_a_missing_or_foreign_directory_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_all.main(["status", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert run_all.main(["status", str(tmp_path)]) == 2
    assert "not a sweep output directory" in capsys.readouterr().err


def test_status_lists_not_started_runs_of_the_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"runs": ["a" * 64, "b" * 64]}))
    assert run_all.main(["status", str(out)]) == 0
    assert "2 run(s) of sweep.json not started" in capsys.readouterr().out
