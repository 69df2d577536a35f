"""Bad inputs give one line and exit 2, before anything expensive (issue 42 items 5, 6, 8).

Each class of the issue has its cases here: spec loading (an empty preset
name, a file that is not UTF-8, inf/nan anywhere, an empty axis), the Slurm
resources of the spec and of every override, the paths a command names
(files where directories belong, read-only and unreachable directories), and
odd files in a run directory (listed under the report's input problems).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import run_all
from analysis.results.frames import build_frames, find_runs, load_run
from analysis.results.report import write_report
from analysis.sweep import driver
from analysis.sweep.cli_paths import (
    UsageError,
    input_dir,
    output_dir,
    output_file,
    sweep_dir_in,
    sweep_dir_out,
)
from analysis.sweep.spec import (
    MAX_TIME_LIMIT_S,
    SpecError,
    load_spec,
    nonfinite,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SWEEP = FIX / "sweep-quick"


def one_line_exit_2(argv: list[str], capfd: pytest.CaptureFixture[str]) -> str:
    """run_all.main(argv) exits 2 with exactly one error line and no traceback."""
    assert run_all.main(argv) == 2
    out, err = capfd.readouterr()
    lines = [ln for ln in (out + err).splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, out + err
    assert "Traceback" not in out + err
    return lines[0]


# ------------------------------------------------------------ spec loading
def test_an_empty_preset_name_is_refused_with_the_names(
    capfd: pytest.CaptureFixture[str],
) -> None:
    line = one_line_exit_2(["run", "--preset", "", "--dry-run"], capfd)
    assert "no preset named ''" in line and "quick" in line


def test_a_spec_file_that_is_not_utf8_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "latin1.toml"
    spec.write_bytes('[sweep]\ndescription = "caf\xe9"\n'.encode("latin-1"))
    line = one_line_exit_2(["run", str(spec), "--dry-run"], capfd)
    assert str(spec) in line and "is not UTF-8 text (byte 26 is 0xe9)" in line


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("job.timeout_s=inf", "job.timeout_s"),  # the case: crashed the run id
        ("job.timeout_s=-inf", "job.timeout_s"),
        ("job.sample_interval_s=inf", "job.sample_interval_s"),
        ("job.warmup_s=nan", "job.warmup_s"),
        ("machine.link_bandwidth=inf", "machine.link_bandwidth"),
        ("axes.numa_factor=[1.6,inf]", "axes.numa_factor[1]"),
        ("job.daemon_params={imar={interval_s=inf}}", "job.daemon_params.imar.interval_s"),
    ],
)
def test_inf_and_nan_are_refused_wherever_they_are(
    override: str, field: str, capfd: pytest.CaptureFixture[str]
) -> None:
    line = one_line_exit_2(["run", "--preset", "quick", "--dry-run", "--set", override], capfd)
    assert f"{field}: inf and nan are not allowed" in line


def test_inf_written_in_a_spec_file_is_refused_too(tmp_path: Path) -> None:
    quick = Path(run_all.__file__).parent / "analysis" / "sweep" / "presets" / "quick.toml"
    spec = tmp_path / "s.toml"
    spec.write_text(quick.read_text().replace("timeout_s = 240", "timeout_s = nan"))
    with pytest.raises(SpecError, match=r"job\.timeout_s: inf and nan"):
        load_spec(spec)


def test_nonfinite_names_the_dotted_path() -> None:
    assert nonfinite({"a": [1.0, {"b": float("nan")}]}) == "a[1].b"
    assert nonfinite({"a": [1.0, {"b": 2}], "c": "inf"}) is None  # the string is no float


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (["axes.numa_factor=[]"], "axes.numa_factor"),  # used to run f = 1.6 silently
        (["axes.link_latency=[]", "axes.numa_factor=[]"], "axes.numa_factor"),
        (["axes.mix=[]"], "axes.mix"),  # used to run every mix
        (["axes.pinning=[]"], "axes.pinning"),  # used to run job.pinning
    ],
)
def test_an_empty_axis_is_refused_not_replaced_by_its_default(
    overrides: list[str], field: str
) -> None:
    with pytest.raises(SpecError, match=rf"^{field}: is empty"):
        load_spec(preset="quick", overrides=overrides)


def test_clearing_the_latency_axis_not_in_use_is_allowed() -> None:
    sp = load_spec(preset="quick", overrides=["axes.numa_factor=[]", "axes.link_latency=20"])
    assert sp.axes["numa_factor"] == [] and sp.axes["link_latency"] == ["20"]
    assert load_spec(preset="quick").axes["numa_factor"] == [1.6]  # left out: the default


# --------------------------------------------------------- Slurm resources
@pytest.mark.parametrize(
    ("override", "field", "why"),
    [
        ("resources.cpus_per_run=-4", "resources.cpus_per_run", "1..1024, got -4"),
        ("resources.cpus_per_run=0", "resources.cpus_per_run", "1..1024, got 0"),
        ("resources.cpus_per_run=5000", "resources.cpus_per_run", "1..1024, got 5000"),
        ('resources.mem_per_run="0"', "resources.mem_per_run", "outside 64 MiB..64 TiB"),
        ('resources.mem_per_run="1KiB"', "resources.mem_per_run", "outside 64 MiB"),
        ('resources.mem_per_run="100TiB"', "resources.mem_per_run", "outside 64 MiB"),
        ('resources.time_limit="99999999999d"', "resources.time_limit", "more than 365 days"),
        (
            'resources.override=[{match={policy="excl"},cpus_per_run=-4}]',
            "resources.override[0].cpus_per_run",
            "1..1024, got -4",
        ),
        (
            'resources.override=[{match={policy="excl"},mem_per_run=0}]',
            "resources.override[0].mem_per_run",
            "outside 64 MiB",
        ),
        (
            'resources.override=[{match={policy="excl"},time_limit="400d"}]',
            "resources.override[0].time_limit",
            "more than 365 days",
        ),
    ],
)
def test_slurm_values_are_checked_with_the_spec(override: str, field: str, why: str) -> None:
    with pytest.raises(SpecError) as ei:
        load_spec(preset="quick", overrides=[override])
    assert str(ei.value).startswith(f"{field}: ") and why in str(ei.value)


def test_the_time_limit_option_is_checked_before_any_build(
    capfd: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", "--preset", "quick", "--dry-run", "--time-limit", "99999999999d"]
    line = one_line_exit_2(argv, capfd)
    assert "resources.time_limit: '99999999999d' is more than 365 days" in line


def test_the_largest_allowed_values_pass() -> None:
    sp = load_spec(
        preset="quick",
        overrides=['resources.time_limit="365d"', "resources.cpus_per_run=1024",
                   'resources.mem_per_run="64MiB"'],
    )  # fmt: skip
    assert sp.resources["time_limit_s"] == MAX_TIME_LIMIT_S
    assert sp.resources["cpus_per_run"] == 1024 and sp.resources["mem_per_run_bytes"] == 64 << 20


# ------------------------------------------------------------------ paths
@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    f = tmp_path / "a-file"
    f.write_text("x")
    return f


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["run", "--preset", "quick", "--dry-run", "--out", "{f}"], "--out: {f} is a file"),
        (["run", "--preset", "quick", "--out", "{f}"], "--out: {f} is a file"),
        (["run", "--preset", "quick", "--dry-run", "--out", "{f}/sub"], "cannot create {f}/sub"),
        (["run", "{f}.toml", "--dry-run"], "spec file: no such file: {f}.toml"),
        (["run", "{d}", "--dry-run"], "spec file: {d} is a directory, not a file"),
        (["run", "--preset", "quick", "--dry-run", "--kept", "{f}"], "--kept: {f} is a file"),
        (["status", "{f}"], "status: {f} is a file, not a directory"),
        (["report", "{f}"], "report: {f} is a file, not a directory"),
        (["report", "{sweep}", "--out", "{f}"], "report: --out: {f} is a file"),
        (["report", "--frames", "{f}", "--out", "{d}/r"], "--frames: {f} is a file"),
        (["report", "--frames", "{frames}", "--out", "{f}"], "report: --out: {f} is a file"),
        (["bench", "--from", "{f}"], "bench: --from: {f} is a file"),
        (["bench", "--workdir", "{f}"], "bench: --workdir: {f} is a file"),
        (["bench-machine", "--out", "{f}"], "bench-machine: --out: {f} is a file"),
        (["calibrate", "{f}"], "calibrate: {f} is a file, not a directory"),
        (["calibrate", "{sweep}", "--idle", "{f}"], "calibrate: --idle: {f} is a file"),
        (["calibrate", "{sweep}", "--write", "{d}"], "calibrate: --write: {d} is a directory"),
    ],
)
def test_a_path_of_the_wrong_kind_is_one_line_before_anything_runs(
    argv: list[str],
    want: str,
    a_file: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    sweep = tmp_path / "sweep"
    shutil.copytree(SWEEP, sweep)
    frames = Path(run_all.__file__).parent / "findings" / "2026-11-24-control" / "frames"
    names = {"f": a_file, "d": tmp_path, "sweep": sweep, "frames": frames}
    line = one_line_exit_2([a.format(**names) for a in argv], capfd)
    assert want.format(**names) in line, line
    # before the backend is even named: nothing was built, nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "sweep"]
    assert a_file.read_text() == "x"


def as_unprivileged(fn: Callable[[], object]) -> str:
    """fn() in a child process without root's bypass of permissions (uid
    nobody when run as root): 'ok' or the UsageError's text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.close(r)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            try:
                fn()
                msg = "ok"
            except UsageError as e:
                msg = f"UsageError: {e}"
            os.write(w, msg.encode())
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(w, f"child failed: {e!r}".encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read().decode()
    os.waitpid(pid, 0)
    return got


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory the unprivileged child can reach (pytest's tmp_path is 0700 root's)."""
    d = Path(tempfile.mkdtemp(prefix="numa-lb-inputs-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in [d, *d.rglob("*")]:
            p.chmod(0o755)
        shutil.rmtree(d)


def test_a_read_only_output_directory_is_refused(shared_tmp: Path) -> None:
    ro = shared_tmp / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    got = as_unprivileged(lambda: output_dir(ro, "--out"))
    assert got == f"UsageError: --out: {ro} is not writable", got
    got = as_unprivileged(lambda: output_dir(ro / "a" / "b", "--out"))
    assert got == (
        f"UsageError: --out: {ro}/a/b is not writable ({ro}, where it would be created, is not)"
    )
    got = as_unprivileged(lambda: output_file(ro / "table.csv", "--write"))
    assert got.startswith(f"UsageError: --write: {ro} is not writable"), got
    # a writable one passes (the check itself is not what refuses)
    rw = shared_tmp / "rw"
    rw.mkdir()
    rw.chmod(0o777)
    assert as_unprivileged(lambda: output_dir(rw / "new", "--out")) == "ok"


def test_a_sweep_whose_runs_dir_cannot_be_written_or_read_is_refused(shared_tmp: Path) -> None:
    out = shared_tmp / "sweep"
    (out / "runs").mkdir(parents=True)
    out.chmod(0o777)
    (out / "runs").chmod(0o555)
    got = as_unprivileged(lambda: sweep_dir_out(out, "--out"))
    assert got == f"UsageError: --out: {out}/runs is not writable", got
    assert as_unprivileged(lambda: sweep_dir_in(out, "")) == "ok"
    (out / "runs").chmod(0o000)
    assert (
        as_unprivileged(lambda: sweep_dir_in(out, "")) == f"UsageError: {out}/runs is not readable"
    )


def test_an_unreadable_or_unreachable_input_directory_is_refused(shared_tmp: Path) -> None:
    closed = shared_tmp / "closed"
    (closed / "inside").mkdir(parents=True)
    closed.chmod(0o000)
    assert as_unprivileged(lambda: input_dir(closed, "--frames")) == (
        f"UsageError: --frames: {closed} is not readable"
    )
    got = as_unprivileged(lambda: input_dir(closed / "inside", "--frames"))
    assert got == f"UsageError: --frames: cannot reach {closed}/inside: Permission denied", got


# ----------------------------------------------------- odd run directories
def done_sweep(tmp_path: Path) -> tuple[Path, Path]:
    tree = tmp_path / "t"
    shutil.copytree(SWEEP, tree)
    return tree, sorted((tree / "runs").iterdir())[0]


def _rm_spec(r: Path) -> None:
    (r / "spec.json").unlink()


def _spec_dir(r: Path) -> None:
    (r / "spec.json").unlink()
    (r / "spec.json").mkdir()


def _spec_not_utf8(r: Path) -> None:
    (r / "spec.json").write_bytes(b'{"run_id": "\xff"}')


def _status_dir(r: Path) -> None:
    (r / "status.json").unlink()
    (r / "status.json").mkdir()


def _inf_threads(r: Path) -> None:  # 1e400 is valid JSON and reads as inf
    spec = json.loads((r / "spec.json").read_text())
    spec["point"]["threads"] = "@"
    (r / "spec.json").write_text(json.dumps(spec).replace('"@"', "1e400"))


def _nan_factor(r: Path) -> None:
    spec = json.loads((r / "spec.json").read_text())
    spec["point"]["numa_factor"] = float("nan")
    (r / "spec.json").write_text(json.dumps(spec))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (_rm_spec, "missing"),  # the case: dropped silently, `status` said done
        (_spec_dir, "unreadable: [Errno 21] Is a directory"),
        (_spec_not_utf8, "unreadable: 'utf-8' codec can't decode"),
        (_status_dir, "unreadable: [Errno 21] Is a directory"),
        (_inf_threads, "point fields of the wrong type: threads"),  # crashed the report
        (_nan_factor, "point fields of the wrong type: numa_factor"),
    ],
)
def test_an_odd_file_in_a_run_dir_is_an_input_problem_of_the_report(
    damage: Callable[[Path], None], problem: str, tmp_path: Path
) -> None:
    tree, bad = done_sweep(tmp_path)
    damage(bad)
    fr = build_frames([tree])
    assert len(fr.runs) == 4  # listed, not left out
    row = fr.runs[fr.runs["dir"] == str(bad)].iloc[0]
    assert row["state"] == "unknown"
    msgs = fr.errors[fr.errors["dir"] == str(bad)]["message"].tolist()
    assert any(m.startswith(problem) for m in msgs), msgs
    md = write_report([tree], tmp_path / "rep")["md"].read_text()
    assert "| unknown | 1 |" in md
    assert bad.name in md.split("## Input problems")[1]


def test_a_file_among_the_run_dirs_is_listed_too(tmp_path: Path) -> None:
    tree, _ = done_sweep(tmp_path)
    (tree / "runs" / "stray.txt").write_text("x")
    assert len(find_runs([tree])) == 5
    rec, rows, errors = load_run(tree / "runs" / "stray.txt")
    assert rec["state"] == "unknown" and rows == []
    assert errors == [("run directory", "is not a directory")]
    assert driver.status_table(tree).splitlines()[-1] == "4 done, 1 unknown"


def test_a_sweeps_own_report_keeps_its_run_without_spec_json(tmp_path: Path) -> None:
    # the sweep's report filters by its full run ids; a spec-less run has only
    # its directory name (the id's first 16 digits) and must stay in
    tree, bad = done_sweep(tmp_path)
    ids = {json.loads((r / "spec.json").read_text())["run_id"] for r in (tree / "runs").iterdir()}
    (bad / "spec.json").unlink()
    fr = build_frames([tree], run_ids=ids)
    assert len(fr.runs) == 4 and (fr.runs["run_id"] == bad.name).any()
    other = {i for i in ids if not i.startswith(bad.name)}
    assert len(build_frames([tree], run_ids=other).runs) == 3  # another sweep's: left out


def test_report_of_a_run_dir_without_spec_json_names_it(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    tree, bad = done_sweep(tmp_path)
    (bad / "spec.json").unlink()
    assert run_all.main(["report", str(tree)]) == 0
    capfd.readouterr()
    md = (tree / "report.md").read_text()
    assert f"| {bad.name} | spec.json | missing |" in md


# ---------------------------------------------------------------- presets
PRESETS = Path(run_all.__file__).parent / "analysis" / "sweep" / "presets"
MAX_PRESET_COMMENT_LINES = 25  # what it runs and why; the history lives in findings/


@pytest.mark.parametrize("preset", sorted(p.name for p in PRESETS.glob("*.toml")))
def test_a_preset_says_what_it_runs_in_a_few_lines(preset: str) -> None:
    lines = (PRESETS / preset).read_text().splitlines()
    comments = [ln for ln in lines if ln.lstrip().startswith("#")]
    assert len(comments) <= MAX_PRESET_COMMENT_LINES, (
        f"{preset}: {len(comments)} comment lines; move the history to findings/README.md "
        "or docs/DESIGN.md and keep what the preset runs and why"
    )
    assert lines[0].startswith(f"# {preset.removesuffix('.toml')}:"), "a header naming it"


def test_the_finding_presets_history_moved_to_the_findings_readme() -> None:
    head = (PRESETS / "finding.toml").read_text().split("[sweep]")[0]
    assert 'findings/README.md "The finding preset\'s history"' in head.replace("\n# ", " ")
    history = (PRESETS.parents[2] / "findings" / "README.md").read_text()
    history = history.split("## The finding preset's history", 1)[1]
    for pilot in (  # every pilot and sweep the header recorded, with its numbers
        "findings/2026-11-24-finding-pilot",
        "findings/2026-11-24-finding-arrivals",
        "findings/2026-11-24-finding-blocking",
        "findings/2026-11-25-finding-b128-mc50k",
        "findings/2026-11-25-finding-b128-sweep-r0",
        "findings/2026-11-26-finding-b192-r0",
        "0.5 s estimate above is withdrawn",
        "findings/2026-11-27-finding-away-gem5",
    ):
        assert pilot in history.replace("\n", " ")


def test_a_directory_that_cannot_be_listed_is_one_line_not_left_out(shared_tmp: Path) -> None:
    # under a parent of several sweeps, a sub-directory that cannot be listed
    # used to be skipped by os.walk without a word
    shutil.copytree(SWEEP, shared_tmp / "a")
    shutil.copytree(SWEEP, shared_tmp / "b" / "c")
    (shared_tmp / "b").chmod(0o311)  # searchable, not listable

    def report_parent() -> None:
        problem = run_all._no_runs([shared_tmp])
        raise UsageError("", str(problem))

    got = as_unprivileged(report_parent)
    assert got == f"UsageError: {shared_tmp}/b: cannot list it (Permission denied)", got


def test_a_status_json_that_cannot_be_read_is_a_failed_run_with_the_reason(
    shared_tmp: Path,
) -> None:
    from analysis.sweep.rundir import RunDir

    run = shared_tmp / "runs" / "r"
    shutil.copytree(sorted((SWEEP / "runs").iterdir())[0], run)
    (run / "status.json").chmod(0o000)

    def state() -> None:
        st = RunDir(run).status() or {}
        raise UsageError("", f"{st.get('state')}: {st.get('error')}")

    got = as_unprivileged(state)
    assert got == "UsageError: failed: status.json unreadable (Permission denied)", got
