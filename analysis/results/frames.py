"""Run directories -> tidy pandas frames (written as parquet).

* ``metrics``: one row per run x entity x metric, every spec field as a column
  (backend, policy, sockets, cores_per_socket, numa_factor, link_latency,
  threads, mix, repeat, kernel_variant, sweep, run_id), plus entity_type,
  entity, metric, value. Only runs in state ``done`` contribute rows.
* ``runs``: one row per run directory: state, timings, exit code, error, ids of
  the kernel, image and backend tool, and what the run id is made of: the
  point's own id (``point_id``), the gem5 binary hash, the code revision.
* ``errors``: one row per problem found while reading (run_id, source,
  message): unreadable spec/status, truncated results.jsonl or stats.txt,
  unreadable config.json. Reading never raises on bad run data.

``stats_frame`` gives the raw gem5 statistics (run x dump x stat) for ad-hoc
work; it is not part of the report (it grows with the stat count).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..sweep.atomic import atomic_path
from ..sweep.point import ID_LEN_DIR, canonical_json, point_id
from ..sweep.point import boot_variant as boot_variant_of
from ..sweep.rundir import read_object, status_problem
from .daemons import bridge_host_s_in_roi, daemon_rows
from .gem5stats import (
    StatsError,
    load_config,
    parse_stats_file,
    remote_requests,
    roi_dump,
    roi_dump_index,
)
from .guest import parse_results_file
from .metrics import (
    JOB_OPTION_COLS,
    SPEC_COLS,
    add_speedup,
    gem5_input_problems,
    gem5_metrics,
    guest_metrics,
    nb_scan_label,
    sched_scale_label,
)
from .run_phases import PHASE_COLS, phase_columns

RUN_COLS = [
    "run_id",
    "dir",
    "sweep",
    *SPEC_COLS,
    "state",
    "duration_s",
    "exit_code",
    "error",
    "kernel_build_id",
    "image_id",
    "tool_version",
    "host",
    "executor",
    "attempt",
    "program_kinds",  # the mix's program kinds seen by the guest: workload, parsec, cmd
    "programs",  # what each program of the mix ran: "lft: leader_ft --size=16M; ..." (2026-11-28)
    "gem5_host_s",  # host seconds of the restored gem5 process (logs/host_times.json)
    "gem5_cpu_s",  # its CPU seconds (user + system; recorded since 2026-11-25)
    "checkpoint_key",  # the boot checkpoint it restored
    "boot_variant",  # which of the machine's boot checkpoints (repeat % n; gem5 only)
    "checkpoint_host_s",  # host seconds of that checkpoint's boot (shared)
    "checkpoint_cpu_s",  # CPU seconds of that boot (recorded since 2026-11-25)
    # the run id = point + provenance; these let a run be recognised on a machine
    # whose gem5 binary differs (sweep/kept.py; recorded since 2026-11-26)
    "point_id",  # sha256 of the point alone (sweep/point.py point_id)
    "gem5_sha256",  # the gem5 binary's hash (None on qemu)
    "code_revision",  # canonical JSON of the provenance's code_revision
    # host and CPU seconds per phase of the gem5 process (m5out/phases.json,
    # run_phases.py; recorded since issue 38, NaN before)
    *PHASE_COLS,
]
DERIVED_METRICS = ("speedup", "improvement_pct")  # add_speedup's rows: pairs, not runs


@dataclass
class Frames:
    metrics: pd.DataFrame
    runs: pd.DataFrame
    errors: pd.DataFrame

    def write(self, out: Path) -> dict[str, Path]:
        out.mkdir(parents=True, exist_ok=True)
        paths = {}
        for name in ("metrics", "runs", "errors"):
            p = out / f"{name}.parquet"
            with atomic_path(p) as tmp:  # a concurrent reader never sees half a file
                getattr(self, name).to_parquet(tmp, index=False)
            paths[name] = p
        return paths

    def only(self, run_ids: set[str]) -> Frames:
        """The rows of these runs (a sweep's report takes the kept runs it adopted)."""
        keep = [f[f["run_id"].isin(run_ids)] for f in (self.metrics, self.runs, self.errors)]
        return Frames(*keep)


def kept_rows(d: Path, ids: set[str]) -> Frames:
    """The rows of the adopted runs @ids in the kept frames dir @d; FramesError
    naming the ids that dir no longer holds (a keep or report would lose them)."""
    fr = read_frames(Path(d))
    gone = ids - set(fr.runs["run_id"].astype(str))
    if gone:
        raise FramesError(f"{d}: {len(gone)} adopted run(s) no longer in its runs.parquet "
                          f"({', '.join(sorted(gone)[:3])[:60]}...): they would be lost; "
                          "check out the frames the sweep adopted them from")  # fmt: skip
    return fr.only(ids)


def without_derived(fr: Frames) -> Frames:
    """The runs' own rows only: no add_speedup rows (pairs of runs), as a
    blind keep writes them (keep.py --no-report)."""
    return Frames(fr.metrics[~fr.metrics["metric"].isin(DERIVED_METRICS)], fr.runs, fr.errors)


def with_derived(fr: Frames) -> Frames:
    """The add_speedup rows derived again from the runs' own rows (frames kept
    blind have none)."""
    m = without_derived(fr).metrics.drop(columns=["baseline"], errors="ignore")
    return Frames(add_speedup(tidy_metrics(m)), fr.runs, fr.errors)


class FramesError(ValueError):
    """A frames directory that cannot be read back (missing or corrupt parquet,
    or a parquet file without the columns every reader of the frame uses)."""


# the columns without which a frame cannot be reported or merged (read_frames
# refuses the file); every other column of an older frame is added, empty
REQUIRED_COLS = {
    "metrics": ("run_id", "metric", "value", "entity_type", "entity"),
    "runs": ("run_id", "state"),
    "errors": ("run_id", "source", "message"),
}


def read_frames(d: Path) -> Frames:
    """The frames Frames.write left in ``d``; FramesError naming the file otherwise."""
    got = {}
    for name in ("metrics", "runs", "errors"):
        p = Path(d) / f"{name}.parquet"
        if not p.is_file():
            raise FramesError(f"{p}: no such file (a frames directory holds metrics, runs "
                              "and errors .parquet)")  # fmt: skip
        try:
            got[name] = pd.read_parquet(p)
        except Exception as e:  # pyarrow raises its own types for a corrupt file
            raise FramesError(f"{p}: not a readable parquet file ({e})") from e
        missing = [c for c in REQUIRED_COLS[name] if c not in got[name].columns]
        if missing:
            raise FramesError(f"{p}: not a {name} frame: missing column(s) {', '.join(missing)} "
                              "(frames are written by report or keep)")  # fmt: skip
    # frames kept before a column existed: the column, empty
    for name, cols in (("metrics", SPEC_COLS), ("runs", RUN_COLS)):
        for c in cols:
            if c not in got[name].columns:
                got[name][c] = None
    got["runs"][PHASE_COLS] = got["runs"][PHASE_COLS].astype(float)  # NaN before issue 38
    return Frames(**got)


def plain(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of @df with its categorical columns as plain objects (to compare
    with strings, edit or pivot without the categories getting in the way)."""
    df = df.copy()
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(object)
    return df


def read_plain(d: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The metrics and runs frames of a frames directory, each ``plain``."""
    return (plain(pd.read_parquet(d / "metrics.parquet")),
            plain(pd.read_parquet(d / "runs.parquet")))  # fmt: skip


def read_frames_many(dirs: list[Path]) -> tuple[Frames, list[str]]:
    """Several frames directories as one (merge_frames), and what the merge noticed."""
    return merge_frames([(str(d), read_frames(d)) for d in dirs])


def merge_frames(parts: list[tuple[str, Frames]]) -> tuple[Frames, list[str]]:
    """Frames of several inputs (name, frames) as one, and notes for the user.

    A run id in more than one input is kept once, from the later input (a
    finding re-kept from newer results replaces the older copy). Speedups pair
    runs across inputs (the baseline may have run on another machine), so they
    are derived again from the merged elapsed times.
    """
    if len(parts) == 1:
        return parts[0][1], []
    seen_in: dict[Any, list[int]] = {}
    for i, (_, fr) in enumerate(parts):
        for rid in fr.runs["run_id"].dropna().unique():
            seen_in.setdefault(rid, []).append(i)
    dups = {r: ins for r, ins in seen_in.items() if len(ins) > 1}
    runs, metrics, errors = [], [], []
    for i, (_, fr) in enumerate(parts):
        lost = [r for r, ins in dups.items() if i in ins and ins[-1] != i]  # a later input has it
        m = fr.metrics
        m = m[~m["run_id"].isin(lost) & ~m["metric"].isin(DERIVED_METRICS)]
        metrics.append(m.drop(columns=["baseline"], errors="ignore"))
        runs.append(fr.runs[~fr.runs["run_id"].isin(lost)])
        errors.append(fr.errors[~fr.errors["run_id"].isin(lost)])
    metrics_df = add_speedup(tidy_metrics(_concat(metrics)))
    runs_df = _concat(runs)
    runs_df = runs_df[RUN_COLS + [c for c in runs_df.columns if c not in RUN_COLS]]
    notes = _duplicate_notes(parts, dups) + _build_notes(parts, runs_df)
    return Frames(metrics_df, runs_df, _concat(errors)), notes


# a run's inputs besides its point; merged runs that differ in one are not
# from one build of the study (the gem5 binary hash alone differs between
# builds of one source: gem5_binaries_md in keep.py says so)
BUILD_COLS = ("image_id", "code_revision", "tool_version")


def _build_notes(parts: list[tuple[str, Frames]], runs: pd.DataFrame) -> list[str]:
    """One line when the merged runs come from different builds or configs
    (the pairing is unchanged: a speedup may then compare two builds)."""
    differ = []
    for c in BUILD_COLS:
        vals = sorted(set(runs[c].dropna().astype(str))) if c in runs else []
        if len(vals) > 1:
            differ.append(f"{c} ({len(vals)} values: {', '.join(v[:16] for v in vals[:3])}"
                          f"{', ...' if len(vals) > 3 else ''})")  # fmt: skip
    if not differ:
        return []
    names = ", ".join(n for n, _ in parts)
    return [f"the inputs come from different builds/configs: {'; '.join(differ)} differ "
            f"among the runs of {names}; runs are still paired across them"]  # fmt: skip


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenated rows; empty inputs only lend their columns (pandas warns on
    all-NA pieces, and they would turn typed columns into object)."""
    full = [f for f in frames if len(f)]
    cols = list(dict.fromkeys(c for f in frames for c in f.columns))
    if not full:
        return pd.DataFrame(columns=cols)
    return pd.concat(full, ignore_index=True).reindex(columns=cols)


def _duplicate_notes(parts: list[tuple[str, Frames]], dups: dict[Any, list[int]]) -> list[str]:
    """One line per input that lost runs to a later one (not one per run)."""
    lost: dict[tuple[int, int], list[Any]] = {}
    for rid, ins in dups.items():
        for i in ins[:-1]:
            lost.setdefault((i, ins[-1]), []).append(rid)
    notes = []
    for (i, j), rids in sorted(lost.items()):
        shown = ", ".join(str(r)[:16] for r in sorted(rids, key=str)[:3])
        more = ", ..." if len(rids) > 3 else ""
        notes.append(
            f"{len(rids)} run(s) of {parts[i][0]} are also in {parts[j][0]}; "
            f"kept the later input's copy ({shown}{more})"
        )
    return notes


RUN_FILES = ("spec.json", "status.json")


def find_runs(dirs: Iterable[Path]) -> list[Path]:
    """Run directories under the given paths (a run dir, a sweep dir, or any parent).

    Under a sweep's ``runs/`` every entry is a run (the driver creates nothing
    else there), whatever it holds: one whose spec.json is gone, a file in
    place of a directory, is read as a run in state unknown with the reason
    under the report's input problems, as ``status`` counts it, not left out.
    Elsewhere a directory holding spec.json or status.json is a run.
    """
    found: list[Path] = []
    seen: set[Path] = set()

    def add(p: Path) -> None:
        rp = p.resolve()
        if rp not in seen:
            seen.add(rp)
            found.append(p)

    for d in dirs:
        d = Path(d)
        if any((d / f).exists() for f in RUN_FILES):
            add(d)
        elif (d / "runs").is_dir():
            try:
                with os.scandir(d / "runs") as it:
                    for e in sorted(it, key=lambda e: e.name):
                        add(Path(e.path))
            except OSError as e:
                raise FramesError(f"{d / 'runs'}: cannot list it ({e.strerror or e})") from None
        else:
            for root, subdirs, files in os.walk(d, onerror=_unlistable):
                if any(f in files or f in subdirs for f in RUN_FILES):
                    add(Path(root))
                    subdirs[:] = []  # a run dir holds no further runs
                subdirs[:] = [s for s in subdirs if s not in ("attempts", "m5out", "guest", "logs")]
    return found


def _unlistable(e: OSError) -> None:
    """os.walk's onerror: a directory that cannot be listed may hold runs, and
    leaving them out silently is what the report must not do (a missing one
    holds none: callers check their inputs exist)."""
    if isinstance(e, FileNotFoundError):
        return
    raise FramesError(f"{e.filename}: cannot list it ({e.strerror or e})")


def load_run(
    path: Path,
) -> tuple[dict[str, Any], list[tuple[str, str, str, float]], list[tuple[str, str]]]:
    """(run record, metric rows, errors) for one run directory. Never raises on bad data."""
    errors: list[tuple[str, str]] = []
    rows: list[tuple[str, str, str, float]] = []
    rec: dict[str, Any] = {"dir": str(path)}
    if not path.is_dir():  # an odd entry of runs/: listed, not read
        errors.append(("run directory", "is not a directory"))
        return {**rec, "run_id": path.name, "state": "unknown"}, rows, errors
    spec, point, prov = _read_spec(path, errors)
    if spec is None:
        rec["run_id"] = path.name
        rec["state"] = "unknown"
        return rec, rows, errors
    rec.update({k: point_value(point, k) for k in SPEC_COLS})
    if rec["numa_balancing"] is None:  # points before schema 2: the rule then in force
        rec["numa_balancing"] = 1 if rec["policy"] == "autonuma" else 0
    rec.update(
        run_id=_scalar(spec.get("run_id")) or path.name,
        sweep=_scalar(spec.get("sweep")),
        kernel_build_id=_scalar(prov.get("kernel_build_id")),
        image_id=_scalar(prov.get("image_id")),
        tool_version=_scalar(prov.get("tool_version")),
        **identity_columns(point, prov),
        boot_variant=boot_variant(point),
    )
    st = _read_status(path, errors)
    rec.update(
        state=st["state"],
        duration_s=_number(st.get("duration_s")),
        exit_code=_number(st.get("exit_code")),
        error=None if st.get("error") is None else str(st.get("error")),
        host=_scalar(st.get("host")),
        executor=_scalar(st.get("executor")),
        attempt=_number(st.get("attempt")),
    )
    rec.update(host_times(path, errors))
    rec.update(phase_columns(path / "m5out", rec["gem5_host_s"], rec["gem5_cpu_s"], errors))
    if rec["state"] != "done":
        return rec, rows, errors

    mix = str(point.get("mix"))
    res = path / "guest" / "results.jsonl"
    if res.is_file():
        g = parse_results_file(res)
        errors.extend(("guest/results.jsonl", e) for e in g.errors)
        rows.extend(guest_metrics(g, mix))
        kinds = {str(p.get("kind")) for p in g.programs if isinstance(p, dict)}
        rec["program_kinds"] = ",".join(sorted(kinds)) or None
        rec["programs"] = program_commands(g.programs)
    else:
        errors.append(("guest/results.jsonl", "missing"))
    rows.extend(daemon_rows(path, mix, errors))  # the policy daemon's log, the bridge's record
    stats = path / "m5out" / "stats.txt"
    if point.get("backend") == "gem5" or stats.exists():
        cfg = None
        cfgp = path / "m5out" / "config.json"
        if cfgp.is_file():
            try:
                cfg = load_config(cfgp)
            except (OSError, ValueError) as e:
                errors.append(("m5out/config.json", f"unreadable: {e}"))
        if stats.is_file():
            try:
                # ROI unknown (roi.json missing/corrupt) is an error, never a
                # silent fallback to gem5's exit dump.
                dump = roi_dump(parse_stats_file(stats), roi_dump_index(path / "m5out"))
                rows.extend(
                    gem5_metrics(
                        dump.values,
                        cfg,
                        mix,
                        int(point.get("cores_per_socket") or 1),
                        bridge_host_s_in_roi(path / "m5out"),
                    )  # fmt: skip
                )
                errors.extend(("m5out/stats.txt", e) for e in gem5_input_problems(dump.values))
                rr = remote_requests(dump.values, cfg)
                if rr is not None and not rr["available"]:
                    errors.append(("m5out/stats.txt", f"remote/local split: {rr['reason']}"))
            except (StatsError, OSError) as e:
                errors.append(("m5out/stats.txt", str(e)))
        else:
            errors.append(("m5out/stats.txt", "missing"))
    return rec, rows, errors


def program_commands(programs: list[Any]) -> str | None:
    """The runs frame's ``programs``: each program's name and the command it
    ran (argv with the executable's directory dropped), so a report can say
    what a name such as lft stands for."""
    out = []
    for p in programs:
        if not isinstance(p, dict) or not p.get("name"):
            continue
        argv = p.get("argv") if isinstance(p.get("argv"), list) else []
        cmd = " ".join([Path(str(argv[0])).name, *map(str, argv[1:])]) if argv else "?"
        out.append(f"{p['name']}: {cmd}")
    return "; ".join(out) or None


def boot_variant(point: dict[str, Any]) -> int | None:
    """The boot checkpoint a gem5 run restored, as an index (spec
    machine.boot_checkpoints: repeat % n); None off gem5 or when unreadable."""
    m, r = point.get("machine"), point.get("repeat")
    if point.get("backend") != "gem5" or not isinstance(m, dict) or not isinstance(r, int):
        return None
    n = m.get("boot_checkpoints", 1)
    return boot_variant_of(r, m) if isinstance(n, int) and n >= 1 else None


def identity_columns(point: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    """point_id, gem5_sha256, code_revision: the parts of the run id that tell
    "the same run, another gem5 build" from "another run" (sweep/kept.py)."""
    try:
        pid: str | None = point_id(point)
    except (TypeError, ValueError):  # NaN or a non-JSON value in a hand-edited spec.json
        pid = None
    rev = prov.get("code_revision")
    try:
        rev_text = canonical_json(rev) if isinstance(rev, dict) else None
    except (TypeError, ValueError):
        rev_text = None
    return {"point_id": pid, "gem5_sha256": _scalar(prov.get("gem5_sha256")),
            "code_revision": rev_text}  # fmt: skip


def host_times(path: Path, errors: list[tuple[str, str]]) -> dict[str, Any]:
    """Host seconds of a gem5 run (logs/host_times.json, analysis/sweep/backends.py):
    its own gem5 process, and the boot of the checkpoint it restored (shared by
    every run with the same ``checkpoint_key``)."""
    out: dict[str, Any] = {"gem5_host_s": None, "gem5_cpu_s": None, "checkpoint_key": None,
                           "checkpoint_host_s": None, "checkpoint_cpu_s": None}  # fmt: skip
    f = path / "logs" / "host_times.json"
    if not f.exists():
        return out
    try:
        d = json.loads(f.read_text())
    except (OSError, ValueError) as e:
        errors.append(("logs/host_times.json", f"unreadable: {e}"))
        return out
    if not isinstance(d, dict):
        errors.append(("logs/host_times.json", "not a JSON object"))
        return out
    out["gem5_host_s"] = _number(d.get("gem5_s"))
    out["gem5_cpu_s"] = _number(d.get("gem5_cpu_s"))
    ck = d.get("checkpoint")
    if isinstance(ck, dict):
        out["checkpoint_key"] = _scalar(ck.get("key"))
        out["checkpoint_host_s"] = _number(ck.get("host_s"))
        out["checkpoint_cpu_s"] = _number(ck.get("cpu_s"))
    return out


def _read_spec(
    path: Path, errors: list[tuple[str, str]]
) -> tuple[dict[str, Any] | None, dict[str, Any], dict[str, Any]]:
    """(spec, point, provenance); spec None when unusable (the problem in errors).

    Valid JSON that is not an object ([1,2,3], null, "done") or a point with
    nested values must not crash the report: the run is listed as unknown.
    """
    spec, problem = read_object(path / "spec.json")
    if spec is None:
        errors.append(("spec.json", str(problem)))
        return None, {}, {}
    point, prov = spec.get("point"), spec.get("provenance", {})
    if not isinstance(point, dict) or not isinstance(prov, dict):
        errors.append(("spec.json", "has no point or provenance object"))
        return None, {}, {}
    bad = [k for k in SPEC_COLS if not _fits(k, point_value(point, k))]
    if bad:
        errors.append(("spec.json", f"point fields of the wrong type: {', '.join(bad)}"))
        return None, {}, {}
    return spec, point, prov


_NUMERIC_COLS = {
    "sockets",
    "cores_per_socket",
    "threads",
    "repeat",
    "numa_factor",
    "numa_balancing",
    "warmup_s",
}


def point_value(point: dict[str, Any], col: str) -> Any:
    """A spec column of a point: its field, or its job option (JOB_OPTION_COLS)."""
    jo = point.get("job_options")
    jo = jo if isinstance(jo, dict) else {}
    if col == "sched_scale":  # derived from the job option sched_domain
        return sched_scale_label(jo.get("sched_domain"))
    if col == "nb_scan":  # derived from the job option numa_balancing_scan
        return nb_scan_label(jo.get("numa_balancing_scan"))
    if col == "cpu_roi":  # only gem5 has a ROI CPU model (QEMU runs the guest as it is)
        cpu = point.get("cpu")
        return cpu.get("roi") if point.get("backend") == "gem5" and isinstance(cpu, dict) else None
    if col in JOB_OPTION_COLS:
        return jo.get(col)
    return point.get(col)


def _fits(col: str, v: Any) -> bool:
    """Can v be a cell of the spec column col (numbers where the frames need them)?"""
    if v is None:
        return True
    if col in _NUMERIC_COLS:  # finite: an inf thread count crashed the report's int()
        return _number(v) is not None and math.isfinite(v)
    return isinstance(v, str)


def _read_status(path: Path, errors: list[tuple[str, str]]) -> dict[str, Any]:
    """status.json, or {"state": "unknown"} with the problem in errors."""
    st, problem = read_object(path / "status.json")
    if st is not None:
        problem = status_problem(st)
    if problem:
        errors.append(("status.json", problem))
        return {"state": "unknown"}
    assert st is not None
    return st


def _scalar(v: Any) -> Any:
    """v if it is a JSON scalar (a frame cell), else None."""
    return v if isinstance(v, str | int | float | bool) or v is None else None


def _number(v: Any) -> Any:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def _load_many(paths: list[str]) -> list[Any]:
    return [load_run(Path(p)) for p in paths]


def build_frames(
    dirs: Iterable[Path], run_ids: set[str] | None = None, workers: int | None = None
) -> Frames:
    paths = find_runs(dirs)
    n = len(paths)
    workers = workers if workers is not None else (min(4, os.cpu_count() or 1) if n >= 500 else 1)
    if workers > 1:
        chunks = [[str(p) for p in paths[i :: workers * 4]] for i in range(workers * 4)]
        with ProcessPoolExecutor(workers) as ex:
            loaded = [r for part in ex.map(_load_many, chunks) for r in part]
    else:
        loaded = [load_run(p) for p in paths]

    runs: list[dict[str, Any]] = []
    cols: dict[str, list[Any]] = {
        c: [] for c in ["run_id", "sweep", *SPEC_COLS, "entity_type", "entity", "metric", "value"]
    }
    err_rows: list[dict[str, Any]] = []
    # a run whose spec.json is unusable has its directory name (the run id's
    # first ID_LEN_DIR digits) as run id: it is still one of @run_ids' runs
    prefixes = {r[:ID_LEN_DIR] for r in run_ids} if run_ids is not None else set()
    for rec, rows, errors in loaded:
        rid = rec.get("run_id")
        if run_ids is not None and rid not in run_ids and rid not in prefixes:
            continue
        runs.append(rec)
        for src, msg in errors:
            err_rows.append(
                {"run_id": rec.get("run_id"), "dir": rec.get("dir"), "source": src, "message": msg}
            )
        if not rows:
            continue
        k = len(rows)
        for c in ["run_id", "sweep", *SPEC_COLS]:
            cols[c].extend([rec.get(c)] * k)
        for i, c in enumerate(("entity_type", "entity", "metric", "value")):
            cols[c].extend(r[i] for r in rows)
    metrics = add_speedup(tidy_metrics(pd.DataFrame(cols)))
    runs_df = pd.DataFrame(runs, columns=RUN_COLS)
    runs_df[PHASE_COLS] = runs_df[PHASE_COLS].astype(float)  # NaN where a run has no phases
    errors_df = pd.DataFrame(err_rows, columns=["run_id", "dir", "source", "message"])
    return Frames(metrics, runs_df, errors_df)


def tidy_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    """The metrics frame's column types: categories for the labels (a 10^6-row
    frame stays small), numbers for the numeric spec columns and the value."""
    for c in (
        "run_id",
        "sweep",
        "backend",
        "policy",
        "mix",
        "entity_type",
        "entity",
        "metric",
        "link_latency",
        "kernel_variant",
        "pinning",
        "sched_scale",
        "nb_scan",
        "cpu_roi",
    ):
        metrics[c] = metrics[c].astype("category")
    for c in ("sockets", "cores_per_socket", "threads", "repeat"):
        metrics[c] = pd.to_numeric(metrics[c], downcast="integer")
    metrics["numa_factor"] = pd.to_numeric(metrics["numa_factor"], errors="coerce")
    metrics["warmup_s"] = pd.to_numeric(metrics["warmup_s"], errors="coerce")
    metrics["value"] = metrics["value"].astype(float)
    return metrics


def stats_frame(run_dirs: Iterable[Path]) -> pd.DataFrame:
    """Raw gem5 statistics: run_id, dump, complete, stat, value (every dump)."""
    recs: dict[str, list[Any]] = {"run_id": [], "dump": [], "complete": [], "stat": [], "value": []}
    for p in run_dirs:
        sp = Path(p) / "m5out" / "stats.txt"
        if not sp.is_file():
            continue
        try:
            rid = json.loads((Path(p) / "spec.json").read_text()).get("run_id", Path(p).name)
        except (OSError, ValueError):
            rid = Path(p).name
        for d in parse_stats_file(sp):
            n = len(d.values)
            recs["run_id"] += [rid] * n
            recs["dump"] += [d.index] * n
            recs["complete"] += [d.complete] * n
            recs["stat"] += list(d.values)
            recs["value"] += list(d.values.values())
    df = pd.DataFrame(recs)
    for c in ("run_id", "stat"):
        df[c] = df[c].astype("category")
    return df
