"""Runs kept in git as frames, adopted on another machine (analysis/sweep/kept.py,
run_all.py run --kept), reports of several frames dirs, and keep from kept
frames + a sweep dir (analysis/results/frames.py merge_frames, keep.py).

A gem5 rebuilt from the same source has another binary hash, so the same
points get other run ids; the frames' point_id finds them again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import run_all
from analysis.results import keep
from analysis.results.frames import FramesError, build_frames, merge_frames, read_frames
from analysis.sweep import backends as bk
from analysis.sweep import driver
from analysis.sweep.kept import load_kept, repeat_group
from analysis.sweep.matrix import Run, iter_runs, points
from analysis.sweep.point import PointIds, Provenance, canonical_json, point_id
from analysis.sweep.rundir import RunDir, State
from analysis.sweep.spec import load_spec
from tests.unit.test_sweep_local import host_backend as host_backend  # a fixture
from tests.unit.test_sweep_local import run

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
OLD_FRAMES = ROOT / "findings" / "2026-11-25-finding-b128-sweep-r0" / "frames"
PROV = Provenance(
    backend="gem5",
    kernel_build_id="k" * 16,
    image_id="i" * 16,
    code_revision={"configs": "c" * 64},
    tool_version="gem5 version 24.0.0.1",
    gem5_sha256="a" * 64,
)
REBUILT = dataclasses.replace(PROV, gem5_sha256="b" * 64)  # same source, another build


def spec_runs(prov: Provenance) -> list[Run]:
    spec = load_spec(preset="quick", overrides=["sweep.repeats=2"])
    return list(iter_runs(spec, "gem5", prov, {"release": prov.kernel_build_id}))


def finished(out: Path, runs: list[Run], prov: Provenance, state: State = State.DONE) -> None:
    """Run directories as a sweep leaves them (spec.json: point + provenance)."""
    for r in runs:
        rd = RunDir(r.path(out))
        rec = {"run_id": r.run_id, "label": r.point.label(), "sweep": "quick",
               "point": r.point.to_dict(), "provenance": prov.to_dict()}  # fmt: skip
        rd.create(rec, {})
        rd.transition(State.RUNNING)
        rd.transition(state, **({"error": "boom"} if state != State.DONE else {}))


def kept_frames(tmp: Path, prov: Provenance = PROV, state: State = State.DONE) -> Path:
    """The frames a finished sweep on the old machine leaves in git."""
    old = tmp / "old-machine"
    finished(old, spec_runs(prov), prov, state)
    build_frames([old]).write(tmp / "kept" / "frames")
    return tmp / "kept" / "frames"


def plan_with(kept_dirs: list[Path], prov: Provenance, out: Path) -> driver.Plan:
    kept = load_kept(kept_dirs)
    adopt = driver.kept_adopter(kept, bk.Artifacts(prov, {}))
    plan = driver.make_plan(spec_runs(prov), out, rerun_failed=False, adopt=adopt)
    plan.notes.extend(kept.notes())
    return plan


# ------------------------------------------------------------------ point ids
def test_point_id_is_the_point_alone_and_fast_ids_agree() -> None:
    pts = points(load_spec(preset="quick", overrides=["sweep.repeats=3"]), "gem5")
    ids = PointIds()
    assert [ids(p) for p in pts] == [point_id(p) for p in pts]
    assert point_id(pts[0]) == hashlib.sha256(canonical_json(pts[0].to_dict()).encode()).hexdigest()
    assert point_id(pts[0].to_dict()) == point_id(pts[0])  # as spec.json stores it


def test_frames_record_point_id_gem5_hash_and_code_revision(tmp_path: Path) -> None:
    runs = spec_runs(PROV)
    finished(tmp_path, runs, PROV)
    fr = build_frames([tmp_path]).runs.set_index("run_id")
    for r in runs:
        row = fr.loc[r.run_id]
        assert row["point_id"] == point_id(r.point)
        assert row["gem5_sha256"] == "a" * 64
        assert json.loads(row["code_revision"]) == {"configs": "c" * 64}


# ------------------------------------------------------------------ adoption
def test_runs_of_another_gem5_build_are_adopted_by_point_id(tmp_path: Path) -> None:
    frames = kept_frames(tmp_path)
    out = tmp_path / "new-machine"
    plan = plan_with([frames], REBUILT, out)
    assert not plan.to_run and plan.skipped == {"kept": 4}
    assert plan.kept == {r.run_id for r in spec_runs(REBUILT)}  # the new ids
    assert any("4 run(s) adopted from another gem5 binary (kept aaaaaaaaaaaaaaaa..., here bbbb"
               in n for n in plan.notes)  # fmt: skip
    assert driver.final_states(out, plan.run_ids, plan.kept) == {"kept": 4}
    assert not out.exists()  # planning writes nothing


@pytest.mark.parametrize(
    "field,value",
    [
        ("kernel_build_id", "x" * 16),
        ("image_id", "y" * 16),
        ("code_revision", {"configs": "d" * 64}),
        ("tool_version", "gem5 version 24.0.0.2"),
    ],
)
def test_a_kept_run_with_other_inputs_is_not_adopted(
    tmp_path: Path, field: str, value: object
) -> None:
    frames = kept_frames(tmp_path)
    other = dataclasses.replace(REBUILT, **{field: value})
    plan = plan_with([frames], other, tmp_path / "new")
    assert len(plan.to_run) == 4 and not plan.kept and not plan.skipped
    said = [n for n in plan.notes if "not adopted" in n]
    assert len(said) == 1 and f"4 run(s) of a planned point not adopted: {field} differs" in said[0]


def test_a_kept_run_that_is_not_done_is_not_adopted(tmp_path: Path) -> None:
    frames = kept_frames(tmp_path, state=State.FAILED)
    plan = plan_with([frames], REBUILT, tmp_path / "new")
    assert len(plan.to_run) == 4 and not plan.kept
    assert any("match only kept runs that are not done (4 failed)" in n for n in plan.notes)


def test_a_run_done_here_stays_done_and_a_failed_one_is_replaced(tmp_path: Path) -> None:
    frames = kept_frames(tmp_path)
    out = tmp_path / "new"
    runs = spec_runs(REBUILT)
    finished(out, runs[:1], REBUILT)
    finished(out, runs[1:2], REBUILT, State.FAILED)
    plan = plan_with([frames], REBUILT, out)
    assert plan.skipped == {"done": 1, "kept": 3} and not plan.to_run
    # the same point done on the other build but failed on this one: worth a look
    assert (
        "kept: 1 run(s) that failed here were replaced by kept runs; a failure on this "
        f"build is worth a look: {runs[1].path(out)}"
    ) in plan.notes


def test_no_replaced_note_when_nothing_failed_here(tmp_path: Path) -> None:
    plan = plan_with([kept_frames(tmp_path)], REBUILT, tmp_path / "new")
    assert plan.skipped == {"kept": 4}
    assert not [n for n in plan.notes if "failed here" in n]


# ---------------------------------------------------------- whole repeats only
def _kept_each(tmp: Path, provs: list[Provenance | None], failed: int | None = None) -> Path:
    """Frames of the quick spec's 4 runs (2 policies x repeats 0-1), run i
    (spec_runs order) finished on binary provs[i] (failed where i == @failed),
    or missing where None."""
    old = tmp / "old-machine"
    for i, prov in enumerate(provs):
        if prov is not None:
            finished(old, [spec_runs(prov)[i]], prov, State.FAILED if i == failed else State.DONE)
    build_frames([old]).write(tmp / "kept" / "frames")
    return tmp / "kept" / "frames"


def whole_plan(kept_dirs: list[Path], prov: Provenance, out: Path) -> driver.Plan:
    kept = load_kept(kept_dirs)
    art = bk.Artifacts(prov, {})
    kept.whole_repeats(driver.whole_repeat_input(spec_runs(prov), out, art))
    plan = driver.make_plan(spec_runs(prov), out, rerun_failed=False,
                            adopt=driver.kept_adopter(kept, art))  # fmt: skip
    plan.notes.extend(kept.notes())
    return plan


REPS = [r.point.repeat for r in spec_runs(PROV)]
R1 = [i for i, r in enumerate(REPS) if r == 1]


def test_whole_repeats_adopt_a_repeat_only_when_all_its_runs_are_kept(tmp_path: Path) -> None:
    """A pre-registered design whose pairs never span two gem5 builds: a repeat
    kept in part (the machine was lost mid-repeat) runs whole on the new one."""
    frames = _kept_each(tmp_path, [None if i == R1[-1] else PROV for i in range(len(REPS))])
    plan = whole_plan([frames], REBUILT, tmp_path / "new")
    assert plan.skipped == {"kept": 2}
    assert {run.point.repeat for run, _ in plan.to_run} == {1} and len(plan.to_run) == 2
    assert ("kept: 1 planned run(s) of 1 repeat group(s) (1; group = repeat // boot "
            "checkpoints) not adopted (--kept-whole-repeats: a group is adopted whole from one "
            "gem5 binary or runs here whole)") in plan.notes  # fmt: skip
    # without the flag the kept run of repeat 1 is adopted and only its pair runs here
    plain = plan_with([frames], REBUILT, tmp_path / "new2")
    assert plain.skipped == {"kept": 3} and len(plain.to_run) == 1


def test_whole_repeats_refuse_a_repeat_kept_on_two_binaries(tmp_path: Path) -> None:
    third = dataclasses.replace(PROV, gem5_sha256="c" * 64)
    frames = _kept_each(tmp_path, [third if i == R1[0] else PROV for i in range(len(REPS))])
    plan = whole_plan([frames], REBUILT, tmp_path / "new")
    assert plan.skipped == {"kept": 2}
    assert {run.point.repeat for run, _ in plan.to_run} == {1} and len(plan.to_run) == 2
    assert any(n.startswith("kept: 2 planned run(s) of 1 repeat group(s) (1;")
               for n in plan.notes)  # fmt: skip


def test_whole_repeats_choose_the_binary_that_holds_the_whole_group(tmp_path: Path) -> None:
    """Frames that hold a group twice (its partial copy on one build, its whole
    copy on another) adopt the whole copy, whatever the rows' order."""
    third = dataclasses.replace(PROV, gem5_sha256="c" * 64)
    part = _kept_each(tmp_path / "a", [PROV if i == R1[0] else None for i in range(len(REPS))])
    whole = _kept_each(tmp_path / "c", [third] * len(REPS))
    for dirs in ([part, whole], [whole, part]):
        kept = load_kept(dirs)
        plan = whole_plan(dirs, REBUILT, tmp_path / "new")
        assert plan.skipped == {"kept": 4} and not plan.to_run
        kept.whole_repeats(driver.whole_repeat_input(spec_runs(REBUILT), tmp_path / "new",
                                                     bk.Artifacts(REBUILT, {})))  # fmt: skip
        for r in spec_runs(REBUILT):
            assert kept.adopt(r.point, r.run_id, REBUILT)
        assert {k.gem5_sha256 for k in kept.adopted.values()} == {"c" * 64}


def test_whole_repeats_adopt_a_failure_as_a_failure(tmp_path: Path) -> None:
    """A run that failed in the guest on the old build is not run again on the
    new one (it is deterministic for its inputs, and the failure is a result)."""
    frames = _kept_each(tmp_path, [PROV] * len(REPS), failed=R1[0])
    plan = whole_plan([frames], REBUILT, tmp_path / "new")
    assert plan.skipped == {"kept": 4} and not plan.to_run
    assert ("kept: 1 kept run(s) adopted as failed (--kept-whole-repeats: a failure on "
            "another build is not run again here)") in plan.notes  # fmt: skip
    plain = plan_with([frames], REBUILT, tmp_path / "new2")  # without: the failure runs here
    assert plain.skipped == {"kept": 3} and len(plain.to_run) == 1


def test_whole_repeats_leave_a_group_that_finished_a_run_here_to_this_build(
    tmp_path: Path,
) -> None:
    frames = _kept_each(tmp_path, [PROV] * len(REPS))
    out = tmp_path / "new"
    finished(out, [spec_runs(REBUILT)[R1[0]]], REBUILT)
    plan = whole_plan([frames], REBUILT, out)
    assert plan.skipped == {"kept": 2, "done": 1}
    assert [run.point.repeat for run, _ in plan.to_run] == [1]


def test_whole_repeats_never_adopt_gem5_runs_of_an_unknown_binary(tmp_path: Path) -> None:
    """Frames kept before runs recorded their gem5 hash cannot say which
    build a run came from, so they form no block."""
    unknown = dataclasses.replace(PROV, gem5_sha256=None)
    frames = _kept_each(tmp_path, [unknown] * len(REPS))
    plan = whole_plan([frames], REBUILT, tmp_path / "new")
    assert len(plan.to_run) == 4 and not plan.skipped
    assert plan_with([frames], REBUILT, tmp_path / "new2").skipped == {"kept": 4}


def test_whole_repeats_leave_a_group_with_a_run_started_here_to_this_build(
    tmp_path: Path,
) -> None:
    """A run left running here (its worker gone: stale; or live elsewhere) is
    this build's: its group is not adopted, or it would mix two builds."""
    frames = _kept_each(tmp_path, [PROV] * len(REPS))
    out = tmp_path / "new"
    rd = RunDir(spec_runs(REBUILT)[R1[0]].path(out))
    r = spec_runs(REBUILT)[R1[0]]
    rd.create({"run_id": r.run_id, "label": r.point.label(), "point": r.point.to_dict(),
               "provenance": REBUILT.to_dict()}, {})  # fmt: skip
    rd.transition(State.RUNNING)  # no live worker: stale
    plan = whole_plan([frames], REBUILT, out)
    assert plan.skipped == {"kept": 2} and sorted(rr.point.repeat for rr, _ in plan.to_run) == [
        1,
        1,
    ]
    # planning marked it interrupted (no live worker): no result here, so adopted now
    assert whole_plan([frames], REBUILT, out).skipped == {"kept": 4}


def test_whole_repeats_with_rerun_failed_run_a_group_with_a_failure_here(tmp_path: Path) -> None:
    """--rerun-failed: a kept failure (a host-side one owed its re-run) is not
    adopted, and its group runs here whole."""
    frames = _kept_each(tmp_path, [PROV] * len(REPS), failed=R1[0])
    kept = load_kept([frames])
    art = bk.Artifacts(REBUILT, {})
    out = tmp_path / "new"
    kept.whole_repeats(driver.whole_repeat_input(spec_runs(REBUILT), out, art), True)
    plan = driver.make_plan(spec_runs(REBUILT), out, rerun_failed=True,
                            adopt=driver.kept_adopter(kept, art))  # fmt: skip
    assert plan.skipped == {"kept": 2} and len(plan.to_run) == 2


def test_an_adopted_failure_counts_as_kept_failed(tmp_path: Path) -> None:
    frames = _kept_each(tmp_path, [PROV] * len(REPS), failed=R1[0])
    kept = load_kept([frames])
    art = bk.Artifacts(REBUILT, {})
    out = tmp_path / "new"
    kept.whole_repeats(driver.whole_repeat_input(spec_runs(REBUILT), out, art))
    plan = driver.make_plan(spec_runs(REBUILT), out, False, adopt=driver.kept_adopter(kept, art))
    final = driver.final_states(out, plan.run_ids, driver.kept_states(kept, plan.kept))
    assert final == {"kept": 3, "kept failed": 1}
    rec = driver.kept_record(kept)
    assert sorted(v["state"] for v in rec.values()) == ["done", "done", "done", "failed"]


def test_whole_repeats_group_the_repeats_of_one_checkpoint_cycle(tmp_path: Path) -> None:
    """machine.boot_checkpoints = 3: repeats 0-2 are one group, 3 the next."""

    def runs_of(prov: Provenance) -> list[Run]:
        spec = load_spec(preset="quick",
                         overrides=["sweep.repeats=4", "machine.boot_checkpoints=3"])  # fmt: skip
        return list(iter_runs(spec, "gem5", prov, {"release": prov.kernel_build_id}))

    old = tmp_path / "old"
    first = runs_of(PROV)
    lost = next(i for i, r in enumerate(first) if r.point.repeat == 2)
    finished(old, [r for i, r in enumerate(first) if i != lost], PROV)
    build_frames([old]).write(tmp_path / "kept")
    kept = load_kept([tmp_path / "kept"])
    art = bk.Artifacts(REBUILT, {})
    out = tmp_path / "new"
    kept.whole_repeats(driver.whole_repeat_input(runs_of(REBUILT), out, art))
    plan = driver.make_plan(runs_of(REBUILT), out, False, adopt=driver.kept_adopter(kept, art))
    plan.notes.extend(kept.notes())
    assert sorted({r.point.repeat for r, _ in plan.to_run}) == [0, 1, 2]
    assert plan.skipped == {"kept": 2}  # repeat 3's two runs
    assert any("(0; group = repeat // boot checkpoints)" in n for n in plan.notes)


def test_a_repeat_group_is_one_cycle_of_the_boot_checkpoints() -> None:
    p = spec_runs(PROV)[0].point
    groups = [repeat_group(dataclasses.replace(p, repeat=r, machine={"boot_checkpoints": 3}))
              for r in range(100, 106)]  # fmt: skip
    assert groups == [33, 33, 34, 34, 34, 35]
    assert [repeat_group(dataclasses.replace(p, repeat=r)) for r in (0, 1, 2)] == [0, 1, 2]


def test_kept_whole_repeats_needs_kept(tmp_path: Path) -> None:
    code, text = run(tmp_path / "s", 'sweep.backend="qemu"', kept_whole_repeats=True)
    assert code == 2 and "--kept-whole-repeats needs --kept FRAMES_DIR" in text
    assert not (tmp_path / "s").exists()
    a = run_all.parser().parse_args(["run", "--preset", "quick", "--kept", "A",
                                     "--kept-whole-repeats"])  # fmt: skip
    assert a.kept_whole_repeats


# ------------------------------------------------------------- bad --kept dirs
def _run_kept(tmp_path: Path, kept: Path) -> tuple[int, str]:
    out = tmp_path / "s"
    code, text = run(out, 'sweep.backend="qemu"', kept=[kept])
    assert not out.exists()  # refused before anything is written
    return code, text


def test_bad_kept_directories_are_clear_usage_errors(tmp_path: Path) -> None:
    code, text = _run_kept(tmp_path, tmp_path / "nope")
    assert code == 2 and f"--kept: {tmp_path / 'nope'}: no such directory" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    code, text = _run_kept(tmp_path, empty)
    assert code == 2 and f"{empty}: no runs.parquet" in text
    corrupt = tmp_path / "corrupt"
    shutil.copytree(kept_frames(tmp_path), corrupt)
    (corrupt / "runs.parquet").write_bytes(b"PAR1 truncated")
    code, text = _run_kept(tmp_path, corrupt)
    assert code == 2 and f"{corrupt / 'runs.parquet'}: not a readable parquet file" in text
    old = tmp_path / "old"
    shutil.copytree(OLD_FRAMES, old)  # kept before runs recorded their point id
    code, text = _run_kept(tmp_path, old)
    assert code == 2 and f"{old / 'runs.parquet'}: no run has a point id" in text
    assert (old / "runs.parquet").read_bytes() == (OLD_FRAMES / "runs.parquet").read_bytes()


@pytest.mark.parametrize("damage", ["missing", "corrupt", "no value column"])
def test_a_kept_dir_with_a_bad_metrics_or_errors_file_is_refused_up_front(
    tmp_path: Path, damage: str
) -> None:
    """The sweep's final report reads all three frames files: a bad metrics.parquet
    must stop the sweep before anything runs, not fail its report at the end."""
    frames = tmp_path / "bad"
    shutil.copytree(kept_frames(tmp_path), frames)
    m = frames / "metrics.parquet"
    if damage == "missing":
        m.unlink()
    elif damage == "corrupt":
        m.write_bytes(b"PAR1 truncated")
    else:
        pd.read_parquet(m).drop(columns=["value"]).to_parquet(m)
    code, text = _run_kept(tmp_path, frames)
    want = {"missing": "no such file", "corrupt": "not a readable parquet file",
            "no value column": "not a metrics frame: missing column(s) value"}[damage]  # fmt: skip
    assert code == 2 and f"error: --kept: {m}: {want}" in text


def test_kept_runs_without_a_point_id_are_counted_in_the_notes(tmp_path: Path) -> None:
    """Old frames merged with new ones: the old rows cannot be adopted, and say so."""
    mixed, _ = merge_frames([("old", read_frames(OLD_FRAMES)),
                             ("new", read_frames(kept_frames(tmp_path)))])  # fmt: skip
    mixed.write(tmp_path / "mixed")
    plan = plan_with([tmp_path / "mixed"], REBUILT, tmp_path / "new")
    assert plan.skipped == {"kept": 4}
    mixed = (tmp_path / "mixed").resolve()
    assert f"kept: 16 run(s) in {mixed} have no point id and cannot be adopted" in plan.notes


def test_run_all_takes_repeated_kept_flags() -> None:
    a = run_all.parser().parse_args(["run", "--preset", "quick", "--kept", "A", "--kept", "B"])
    assert a.kept == [Path("A"), Path("B")]


# ------------------------------------------------------- the sweep, end to end
def test_sweep_with_kept_runs_is_complete_and_reports_them(
    tmp_path: Path,
    host_backend: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = tmp_path / "first"
    code, text = run(first, "sweep.repeats=1")
    assert code == 0, text
    dest = tmp_path / "findings" / "partial"
    assert keep.main([str(first), str(dest), "--command", "x"]) == 0
    # the new machine: the same inputs, another gem5 build (other run ids)
    prepare = bk.prepare

    def rebuilt(*a: object, **k: object) -> bk.Artifacts:
        art = prepare(*a, **k)  # type: ignore[arg-type]
        prov = dataclasses.replace(art.provenance, gem5_sha256="b" * 64)
        return dataclasses.replace(art, provenance=prov)

    monkeypatch.setattr(bk, "prepare", rebuilt)
    out = tmp_path / "second"
    code, text = run(out, "sweep.repeats=2", kept=[dest / "frames"])
    assert code == 0, text
    assert "to run: 2; skipped: 2 kept" in text
    assert "sweep quick: 2 done, 2 kept" in text
    assert len(list((out / "runs").iterdir())) == 2  # only the new repeat ran here
    reported = read_frames(out / "frames").runs
    assert len(reported) == 4 and set(reported["gem5_sha256"].dropna()) == {"b" * 64}
    assert "from 4 runs" in (out / "report.md").read_text()
    assert "2 run(s) of sweep.json kept" in driver.status_table(out)
    # `report DIR` of that sweep reports its kept runs too, as its own report did
    again = tmp_path / "again"
    assert run_all.main(["report", str(out), "--out", str(again)]) == 0
    assert len(read_frames(again / "frames").runs) == 4
    assert "from 4 runs" in (again / "report.md").read_text()
    capsys.readouterr()
    # not over the kept frames themselves; and not without them
    assert run_all.main(["report", str(out), "--out", str(dest)]) == 2
    assert "holds kept runs a sweep adopted" in capsys.readouterr().err
    shutil.move(dest, tmp_path / "moved")
    assert run_all.main(["report", str(out), "--out", str(again)]) == 2
    assert "which no longer exists" in capsys.readouterr().err
    shutil.move(tmp_path / "moved", dest)
    # --kept-whole-repeats: repeat 0 is kept whole, so the same two are adopted
    whole = tmp_path / "whole"
    code, text = run(whole, "sweep.repeats=2", kept=[dest / "frames"], kept_whole_repeats=True)
    assert code == 0 and "to run: 2; skipped: 2 kept" in text, text
    # the final finding: the kept frames + this machine's sweep
    final = tmp_path / "findings" / "final"
    assert keep.main([str(dest / "frames"), str(out), str(final), "--command", "y"]) == 0
    assert len(read_frames(final / "frames").runs) == 4


def test_keep_of_a_sweep_keeps_the_runs_it_adopted_across_three_machines(
    tmp_path: Path, host_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's sessions: each ends with keep results/finding findings/partial,
    the next machine runs with --kept findings/partial/frames. Keeping the second
    machine's sweep must keep the first machine's runs it adopted, or the third
    machine would run them again (and the finding would lose them)."""
    prepare = bk.prepare

    def machine(sha: str) -> None:  # the same inputs, another gem5 build (other run ids)
        def rebuilt(*a: object, **k: object) -> bk.Artifacts:
            art = prepare(*a, **k)  # type: ignore[arg-type]
            prov = dataclasses.replace(art.provenance, gem5_sha256=sha)
            return dataclasses.replace(art, provenance=prov)

        monkeypatch.setattr(bk, "prepare", rebuilt)

    monkeypatch.chdir(tmp_path)  # paths as typed: relative, as in the README
    partial = Path("findings") / "partial"
    machine("a" * 64)
    code, text = run(Path("m1"), "sweep.repeats=1")
    assert code == 0, text
    assert keep.main(["m1", str(partial), "--command", "m1"]) == 0
    machine("b" * 64)
    code, text = run(Path("m2"), "sweep.repeats=2", kept=[partial / "frames"])
    assert code == 0 and "to run: 2; skipped: 2 kept" in text, text
    recorded = {v["frames"] for v in json.loads(Path("m2/sweep.json").read_text())["kept"].values()}
    assert recorded == {str((partial / "frames").resolve())}  # valid from any cwd
    assert keep.main(["m2", str(partial), "--command", "m2"]) == 0  # into the same finding
    runs = read_frames(partial / "frames").runs
    assert len(runs) == 4 and runs["gem5_sha256"].value_counts().to_dict() == {
        "a" * 64: 2,
        "b" * 64: 2,
    }
    prov = (partial / "PROVENANCE.md").read_text()
    assert "adopted by the sweep `m2`" in prov and "> ```sh" in prov and "> m1" in prov
    machine("c" * 64)
    code, text = run(Path("m3"), "sweep.repeats=3", kept=[partial / "frames"])
    assert code == 0 and "to run: 2; skipped: 4 kept" in text, text
    assert "sweep quick: 2 done, 4 kept" in text
    # the finding the README keeps at the end: all six runs, three binaries
    assert keep.main(["m3", "findings/final", "--command", "m3"]) == 0
    final = read_frames(Path("findings/final/frames")).runs
    assert sorted(final["gem5_sha256"].value_counts()) == [2, 2, 2]
    # the frames dir a sweep adopted from is gone: a clear error, not lost runs
    shutil.move(partial, "elsewhere")
    with pytest.raises(ValueError, match=r"2 run\(s\) adopted with --kept from .*partial/frames"):
        keep.read_input(Path("m2"))
    assert keep.main(["m2", "findings/again", "--command", "x"]) == 2
    assert not Path("findings/again").exists()


# ------------------------------------------------- merged frames and reports
def _quick_frames(tmp_path: Path) -> Path:
    tree = tmp_path / "quick"
    shutil.copytree(FIX / "sweep-quick", tree)
    build_frames([tree]).write(tmp_path / "quick-frames")
    return tmp_path / "quick-frames"


def _quick_policy(tmp_path: Path, policy: str) -> Path:
    """The quick fixture's runs of one policy (as if run on a machine of its own)."""
    tree = tmp_path / policy
    shutil.copytree(FIX / "sweep-quick", tree)
    for sp in (tree / "runs").glob("*/spec.json"):
        if json.loads(sp.read_text())["point"]["policy"] != policy:
            shutil.rmtree(sp.parent)
    return tree


def test_merge_takes_the_later_copy_and_pairs_across_inputs(tmp_path: Path) -> None:
    whole = build_frames([FIX / "sweep-quick"])
    a = build_frames([_quick_policy(tmp_path, "default")])
    b = build_frames([_quick_policy(tmp_path, "excl")])
    first = next(a.runs.itertuples())
    c = build_frames([Path(first.dir)])  # one of A's runs again
    a.runs.loc[a.runs["run_id"] == first.run_id, "host"] = "old-host"
    assert not (b.metrics["metric"] == "improvement_pct").any()  # excl lacks its partner
    merged, notes = merge_frames([("A", a), ("B", b), ("C", c)])
    assert len(merged.runs) == 4
    assert merged.runs.set_index("run_id").loc[first.run_id, "host"] != "old-host"  # C's
    assert notes == [
        f"1 run(s) of A are also in C; kept the later input's copy ({first.run_id[:16]})"
    ]
    # excl (B) paired with default (A, C): the improvements of the whole sweep
    imp = merged.metrics[merged.metrics["metric"] == "improvement_pct"]
    want = whole.metrics[whole.metrics["metric"] == "improvement_pct"]
    excl = set(whole.runs.loc[whole.runs["policy"] == "excl", "run_id"])
    assert excl <= set(imp["run_id"]) == set(want["run_id"])
    assert sorted(imp["value"]) == pytest.approx(sorted(want["value"]))


def test_report_of_old_and_new_frames_with_an_overlapping_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = _quick_frames(tmp_path)
    again = tmp_path / "again"
    shutil.copytree(new, again)
    out = tmp_path / "out"
    args = ["report", "--frames", str(OLD_FRAMES), "--frames", str(new), "--frames", str(again)]
    assert run_all.main([*args, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"4 run(s) of {new} are also in {again}; kept the later input's copy" in err
    assert "from 20 runs" in (out / "report.md").read_text()  # 16 old + 4 new, once each
    merged = read_frames(OLD_FRAMES)
    assert merged.runs["point_id"].isna().all()  # old frames: the new columns, empty


def _sweep_of_binary(tmp_path: Path, name: str, sha: str) -> Path:
    """The quick fixture as if run by a gem5 binary with hash @sha (other run ids)."""
    tree = tmp_path / name
    shutil.copytree(FIX / "sweep-quick", tree)
    for sp in (tree / "runs").glob("*/spec.json"):
        d = json.loads(sp.read_text())
        d["provenance"]["gem5_sha256"] = sha
        d["run_id"] = hashlib.sha256((d["run_id"] + sha).encode()).hexdigest()
        sp.write_text(json.dumps(d))
    return tree


def test_keep_from_kept_frames_and_a_sweep_lists_both_binaries(tmp_path: Path) -> None:
    partial = tmp_path / "findings" / "partial"
    assert keep.main([str(_sweep_of_binary(tmp_path, "s1", "a" * 64)), str(partial),
                      "--command", "first"]) == 0  # fmt: skip
    second = _sweep_of_binary(tmp_path, "s2", "b" * 64)
    final = tmp_path / "findings" / "final"
    assert keep.main([str(partial / "frames"), str(second), str(final), "--command", "c"]) == 0
    prov = (final / "PROVENANCE.md").read_text()
    assert f"- `{'a' * 64}`: 4 run(s)" in prov and f"- `{'b' * 64}`: 4 run(s)" in prov
    assert (
        "4 runs on binary `aaaaaaaaaaaaaaaa`, 4 runs on binary `bbbbbbbbbbbbbbbb`, same version"
        in prov
    )
    assert f"Provenance of kept frames `{partial / 'frames'}`" in prov
    assert len(pd.read_parquet(final / "frames" / "runs.parquet")) == 8


def test_keep_merges_old_frames_without_the_new_columns(tmp_path: Path) -> None:
    final = tmp_path / "final"
    tree = tmp_path / "quick"
    shutil.copytree(FIX / "sweep-quick", tree)
    assert keep.main([str(OLD_FRAMES), str(tree), str(final), "--command", "c"]) == 0
    runs = read_frames(final / "frames").runs
    assert len(runs) == 20 and runs["point_id"].notna().sum() == 4
    assert (
        "not recorded (frames kept before runs recorded it): 16 run(s)"
        in (final / "PROVENANCE.md").read_text()
    )


def test_keep_again_into_the_same_finding_copies_its_earlier_provenance(tmp_path: Path) -> None:
    partial = tmp_path / "findings" / "partial"
    s1 = _sweep_of_binary(tmp_path, "s1", "a" * 64)
    assert keep.main([str(s1), str(partial), "--command", "the first command"]) == 0
    first = (partial / "PROVENANCE.md").read_text()
    second = _sweep_of_binary(tmp_path, "s2", "b" * 64)
    assert keep.main([str(partial / "frames"), str(second), str(partial), "--command", "c"]) == 0
    prov = (partial / "PROVENANCE.md").read_text()
    assert f"their provenance when kept (`{partial / 'PROVENANCE.md'}`, copied)" in prov
    assert "\n".join(f"> {x}".rstrip() for x in first.rstrip("\n").splitlines()) in prov
    assert "> the first command" in prov  # the old file is gone: its text is not


def test_frames_without_required_columns_are_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(_quick_frames(tmp_path), bad)
    runs = bad / "runs.parquet"
    pd.read_parquet(runs).drop(columns=["state"]).to_parquet(runs)
    with pytest.raises(
        FramesError, match=r"runs.parquet: not a runs frame: missing column\(s\) state"
    ):
        read_frames(bad)
    assert run_all.main(["report", "--frames", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert (
        f"error: report: {runs}: not a runs frame: missing column(s) state"
        in capsys.readouterr().err
    )
    assert keep.main([str(bad), str(tmp_path / "f"), "--command", "c"]) == 2
    assert f"keep: {runs}: not a runs frame: missing column(s) state" in capsys.readouterr().err
    m = bad / "metrics.parquet"
    shutil.copy(tmp_path / "quick-frames" / "runs.parquet", runs)
    pd.read_parquet(m).drop(columns=["metric", "entity"]).to_parquet(m)
    with pytest.raises(FramesError, match=r"metrics frame: missing column\(s\) metric, entity"):
        read_frames(bad)


def test_report_of_several_frames_needs_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default --out, the first input's dir, is a committed finding's report."""
    a = _quick_frames(tmp_path)
    b = tmp_path / "b" / "frames"
    shutil.copytree(a, b)
    assert run_all.main(["report", "--frames", str(a), "--frames", str(b)]) == 2
    assert "several --frames need --out DIR" in capsys.readouterr().err
    assert not (a.parent / "report.md").exists() and not (b.parent / "report.md").exists()
    assert run_all.main(["report", "--frames", str(a)]) == 0  # one: beside it, as before
    assert (a.parent / "report.md").exists()


def test_merging_runs_of_different_builds_says_so_and_pairs_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = build_frames([_quick_policy(tmp_path, "default")])
    b = build_frames([_quick_policy(tmp_path, "excl")])
    _, same = merge_frames([("A", a), ("B", b)])
    assert not [n for n in same if "different builds" in n]
    paired, _ = merge_frames([("A", a), ("B", b)])
    b.runs["image_id"] = "another-image"
    merged, notes = merge_frames([("A", a), ("B", b)])
    said = [n for n in notes if "different builds/configs" in n]
    assert len(said) == 1 and "image_id (2 values" in said[0] and "A, B" in said[0]
    assert "tool_version" not in said[0] and "code_revision" not in said[0]
    imp = merged.metrics[merged.metrics["metric"] == "improvement_pct"]
    want = paired.metrics[paired.metrics["metric"] == "improvement_pct"]
    assert len(imp) and sorted(imp["value"]) == pytest.approx(sorted(want["value"]))
    # report --frames: on stderr and in the report's input problems
    a.write(tmp_path / "fa")
    b.write(tmp_path / "fb")
    out = tmp_path / "out"
    args = ["report", "--frames", str(tmp_path / "fa"), "--frames", str(tmp_path / "fb")]
    assert run_all.main([*args, "--out", str(out)]) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if "different builds" in x]
    assert len(err) == 1 and err[0].startswith("report: the inputs come from different builds")
    md = (out / "report.md").read_text()
    assert "different builds/configs" in md.split("## Input problems")[1]
