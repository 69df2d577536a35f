"""Frames and report files are written whole or not at all (issue 42 item 7).

`report` used to write its parquet, HTML, Markdown and figures in place: a
concurrent `report --frames`, `keep` or `run --kept` read half-written
parquet (14 of 638 reads in a trial), and a killed report left one behind.
Every writer now writes a temporary file beside the target and renames it
(analysis/sweep/atomic.py).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from analysis.results.calibration import CalibrationTable, write_csv
from analysis.results.frames import Frames, build_frames, read_frames
from analysis.results.report import write_report, write_report_from_frames
from analysis.sweep.atomic import atomic_path, write_json_atomic, write_text_atomic

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_atomic_path_replaces_on_success_and_keeps_the_old_file_on_failure(
    tmp_path: Path,
) -> None:
    target = tmp_path / "report.md"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.name.startswith(".report.md.")
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]  # no temp left
    write_text_atomic(target, "new")
    assert target.read_text() == "new"
    write_json_atomic(tmp_path / "s.json", {"b": 1, "a": [1]})
    assert (tmp_path / "s.json").read_text() == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "s.json"]


def test_a_frame_that_fails_to_write_leaves_the_old_one(tmp_path: Path) -> None:
    fr = build_frames([FIX / "sweep-quick"])
    out = tmp_path / "frames"
    fr.write(out)
    before = (out / "runs.parquet").read_bytes()
    # pyarrow refuses a column of mixed objects: the write dies half-way
    bad = Frames(fr.metrics, fr.runs.assign(host=[object()] * len(fr.runs)), fr.errors)
    with pytest.raises(Exception, match="object"):
        bad.write(out)
    assert (out / "runs.parquet").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == [
        "errors.parquet",
        "metrics.parquet",
        "runs.parquet",
    ]
    read_frames(out)  # still whole


def opened_before(paths: list[Path]) -> dict[Path, tuple[int, bytes, object]]:
    """Each file's inode and bytes, and a reader that opened it before a rewrite."""
    return {p: (p.stat().st_ino, p.read_bytes(), p.open("rb")) for p in paths}


def assert_replaced_whole(before: dict[Path, tuple[int, bytes, object]]) -> None:
    """Written to a new file and renamed: a reader that had the old file open
    still reads all of the old bytes (in place, it read the new or a cut one)."""
    for p, (ino, old, f) in before.items():
        assert p.stat().st_ino != ino, f"{p.name} was rewritten in place"
        assert f.read() == old, f"{p.name}: an open reader saw the rewrite"  # type: ignore[attr-defined]
        f.close()  # type: ignore[attr-defined]
    left = [q for p in before for q in p.parent.glob(".*.tmp")]
    assert left == [], left


def test_report_and_its_frames_are_replaced_never_rewritten_in_place(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(FIX / "sweep-quick", tree)
    write_report([tree], tree)
    files = [tree / "report.md", tree / "report.html", *sorted((tree / "frames").iterdir())]
    files += sorted((tree / "report_files").glob("*.png"))
    assert len(files) > 5  # figures too
    before = opened_before(files)
    write_report([tree], tree, title="again")  # a concurrent reader holds the old files
    assert_replaced_whole(before)
    # from frames alone (report --frames): the report files again
    files = [tree / "report.md", tree / "report.html"]
    before = opened_before(files)
    write_report_from_frames(tree / "frames", tree, title="from frames")
    assert_replaced_whole(before)


def test_keep_replaces_a_findings_files_whole(tmp_path: Path) -> None:
    from analysis.results.keep import keep

    tree = tmp_path / "t"
    shutil.copytree(FIX / "sweep-quick", tree)
    dest = tmp_path / "finding"
    keep([tree], dest, "./run_all.py --preset quick")
    files = [dest / "PROVENANCE.md", dest / "report.md", *sorted((dest / "frames").iterdir())]
    before = opened_before(files)
    keep([tree], dest, "./run_all.py --preset quick")  # kept again: the same runs
    assert_replaced_whole(before)
    assert sorted(p.name for p in (dest / "frames").iterdir()) == [
        "errors.parquet",
        "metrics.parquet",
        "runs.parquet",
    ]


def test_the_calibration_table_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_text("old\n")
    before = opened_before([path])
    cal = CalibrationTable(((20, 1.31), (40, 1.62)), "measurement", (("sockets", "4"),))
    write_csv(cal, path, "a note")
    assert_replaced_whole(before)
    assert path.read_text().startswith("# a note\n") and "40,1.6200" in path.read_text()


def test_a_killed_writer_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "runs.parquet"
    target.write_bytes(b"old and whole")
    ready = mp.get_context("fork").Event()

    def writer() -> None:
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half of the new")
            ready.set()
            time.sleep(60)  # killed here

    p = mp.get_context("fork").Process(target=writer)
    p.start()
    assert ready.wait(30)
    os.kill(p.pid, signal.SIGKILL)  # type: ignore[arg-type]
    p.join(30)
    assert target.read_bytes() == b"old and whole"
    (left,) = tmp_path.glob(".runs.parquet.*.tmp")  # hidden, named after its target
    assert left.read_bytes() == b"half of the new"
