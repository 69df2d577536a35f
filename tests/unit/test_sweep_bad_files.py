"""spec.json / status.json that are valid JSON but not what they should be
(issue 13, item 15): the report, `status` and the driver list such a run as
unknown (or failed, for the driver's state machine) with the reason, and go on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.results.frames import build_frames, load_run
from analysis.results.report import write_report
from analysis.sweep import driver
from analysis.sweep.matrix import iter_runs
from analysis.sweep.rundir import RunDir, State, StatusError
from analysis.sweep.spec import load_spec
from tests.unit.test_sweep_ids import PROV

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep-quick"
# the inputs, plus an unknown state and a history that is not a list
BAD_JSON = ["[1,2,3]", "null", '"done"', '{"state": ["done"]}']
BAD_STATUS = [*BAD_JSON, '{"state": "bogus"}', '{"state": "done", "history": 5}']


def done_run(path: Path, run_id: str = "a" * 64, label: str = "default t=1") -> RunDir:
    rd = RunDir(path)
    rd.create({"run_id": run_id, "label": label}, {})
    rd.transition(State.RUNNING)
    rd.transition(State.DONE)
    return rd


# ------------------------------------------------------------------ rundir
@pytest.mark.parametrize("text", BAD_STATUS)
def test_status_that_is_not_a_status_reads_as_failed_with_the_reason(
    tmp_path: Path, text: str
) -> None:
    rd = done_run(tmp_path / "r")
    rd.status_file.write_text(text)
    st = rd.status()
    assert st is not None and st["state"] == "failed"
    assert st["error"].startswith("status.json ") and st["history"] == []
    assert rd.state() == State.FAILED


@pytest.mark.parametrize("text", BAD_JSON[:3])
def test_spec_that_is_not_an_object_is_a_clear_error(tmp_path: Path, text: str) -> None:
    rd = done_run(tmp_path / "r")
    rd.spec_file.write_text(text)
    with pytest.raises(StatusError, match="spec.json is not a JSON object"):
        rd.spec()


# ------------------------------------------------------------------ status
def test_status_lists_bad_and_incomplete_run_dirs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done_run(runs / "0good")
    for i, text in enumerate(BAD_JSON):
        done_run(runs / f"1spec{i}").spec_file.write_text(text)
    for i, text in enumerate(BAD_STATUS):
        done_run(runs / f"2status{i}").status_file.write_text(text)
    (runs / "3nostatus").mkdir()
    (runs / "3nostatus" / "spec.json").write_text(json.dumps({"label": "excl t=2"}))
    table = driver.status_table(tmp_path)
    lines = {ln.split()[0]: ln for ln in table.splitlines()[:-1]}
    assert "done" in lines["0good"] and "default t=1" in lines["0good"]
    for i in range(3):
        assert lines[f"1spec{i}"].split()[1:3] == ["done", "?"]
        assert "(spec.json is not a JSON object" in lines[f"1spec{i}"]
    assert lines["1spec3"] == "1spec3 done"  # an object without a label: nothing to add
    for i in range(len(BAD_STATUS)):
        assert lines[f"2status{i}"].split()[1] == "unknown"
        assert "(status.json " in lines[f"2status{i}"]
    assert lines["3nostatus"].split()[1] == "missing" and "(no status.json)" in lines["3nostatus"]
    assert "excl t=2" in lines["3nostatus"]
    assert table.splitlines()[-1] == "5 done, 1 missing, 6 unknown"


# ------------------------------------------------------------- frames/report
@pytest.mark.parametrize("text", BAD_JSON)
def test_report_lists_a_run_with_a_bad_spec_as_unknown(tmp_path: Path, text: str) -> None:
    tree = tmp_path / "t"
    shutil.copytree(SWEEP, tree)
    bad = sorted((tree / "runs").iterdir())[0]
    (bad / "spec.json").write_text(text)
    fr = build_frames([tree])
    assert len(fr.runs) == 4
    row = fr.runs[fr.runs["dir"] == str(bad)].iloc[0]
    assert row["state"] == "unknown" and row["run_id"] == bad.name
    (msg,) = fr.errors[fr.errors["dir"] == str(bad)]["message"]
    want = "has no point" if text.startswith("{") else "is not a JSON object"
    assert want in msg
    md = write_report([tree], tmp_path / "rep")["md"].read_text()
    assert "## Input problems" in md and want in md.split("## Input problems")[1]


@pytest.mark.parametrize("text", BAD_STATUS)
def test_report_lists_a_run_with_a_bad_status_as_unknown(tmp_path: Path, text: str) -> None:
    tree = tmp_path / "t"
    shutil.copytree(SWEEP, tree)
    bad = sorted((tree / "runs").iterdir())[1]
    (bad / "status.json").write_text(text)
    fr = build_frames([tree])
    row = fr.runs[fr.runs["dir"] == str(bad)].iloc[0]
    assert row["state"] == "unknown"
    assert not fr.metrics["run_id"].astype(str).eq(row["run_id"]).any()  # no metrics from it
    (msg,) = fr.errors[fr.errors["dir"] == str(bad)]["message"]
    assert msg.startswith(("is not a JSON object", "has state", "has a history"))
    md = write_report([tree], tmp_path / "rep")["md"].read_text()
    assert "| unknown | 1 |" in md and "## Input problems" in md


def test_point_fields_of_the_wrong_type_do_not_reach_the_frames(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(SWEEP, tree)
    bad = sorted((tree / "runs").iterdir())[2]
    spec = json.loads((bad / "spec.json").read_text())
    spec["point"]["policy"] = ["excl"]
    spec["point"]["threads"] = "three"
    (bad / "spec.json").write_text(json.dumps(spec))
    rec, rows, errors = load_run(bad)
    assert rec["state"] == "unknown" and rows == []
    assert errors == [("spec.json", "point fields of the wrong type: policy, threads")]
    write_report([tree], tmp_path / "rep")  # and the report does not crash


# ------------------------------------------------------------------ driver
def test_driver_keeps_a_bad_status_as_failed_and_reruns_it_on_request(tmp_path: Path) -> None:
    spec = load_spec(preset="quick")
    out = tmp_path / "s"
    run, rd = driver.make_plan(iter_runs(spec, "qemu", PROV), out, False).to_run[0]
    art = driver.bk.Artifacts(PROV, {"kernel": "/k", "image": "/i"})
    assert driver.ensure_run_dir(spec, art, run, rd) is None
    rd.status_file.write_text('{"state": ["done"]}')
    plan = driver.make_plan(iter_runs(spec, "qemu", PROV), out, rerun_failed=False)
    assert plan.skipped == {"failed": 1} and len(plan.to_run) == 1
    plan = driver.make_plan(iter_runs(spec, "qemu", PROV), out, rerun_failed=True)
    assert len(plan.to_run) == 2
    assert driver.ensure_run_dir(spec, art, run, rd) is None
    rd.reset_for_rerun()
    assert rd.state() == State.PENDING
    assert (rd.path / "attempts" / "1" / "status.json").read_text() == '{"state": ["done"]}'
