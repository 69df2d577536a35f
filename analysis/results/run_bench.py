"""One short gem5 point run two ways from one boot checkpoint: host seconds per phase.

    ./run_all.py bench-run --from RUN_DIR [--old GEM5_A] [--new GEM5_B] \\
        [--old-args "..."] [--new-args "..."] [--checkpoint CPT] [--out DIR]

The point is the one a sweep already ran in RUN_DIR (a gem5 run directory:
``logs/gem5.cmd.json``, ``job.json``): its command is run again, once with
the old and once with the new gem5 binary (``--old``/``--new``, each
defaulting to ``$GEM5``), each optionally with extra arguments for the run
script (``--old-args``/``--new-args``, split like a shell would but never
given to one, e.g. ``--new-args "--cpu-post-roi atomic"``). Both runs use this
checkout's ``configs/numa_run.py``, the run directory's job, and the same
boot checkpoint (``--checkpoint``, default: the one the command restored), one
after the other, in ``--out`` (default: a temporary directory).

It prints, per phase (``phases.json``: configs/numa_lb/phases.py), the old and
the new host seconds and new/old; then the ROI's host seconds per simulated
millisecond, the outside-ROI seconds, the gem5 process's wall and CPU seconds
measured from outside, and each run's ROI simulated milliseconds (two binaries
need not simulate the same ROI). ``bench-run.json`` in the work directory holds
the same. A short point (the quick preset's, or the faultbench fb8) keeps it in
the tens of minutes; a benchmark, not a test.

Exit status: 0 both runs exited 0; 1 a run failed (the table holds what it
measured); 2 refused before running anything: no gem5, a gem5 that is not an
executable file, no RUN_DIR command, no checkpoint (``m5.cpt``), or a kernel,
disk image or job that does not exist here, each said in one line.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.cache import default_gem5

from .machine_bench import RUN_SCRIPT, gem5_process
from .run_phases import PHASES, phase_columns

EXIT_REFUSED = 2
CMD_NAME = "logs/gem5.cmd.json"  # the run's gem5 command (analysis/sweep/backends.py)


class Refused(Exception):
    """bench-run cannot start; the message is one line for the user."""


@dataclass(frozen=True)
class Variant:
    label: str  # "old" or "new"
    gem5: str
    extra: list[str]


def template_args(run_dir: Path) -> list[str]:
    """The arguments after the run script in RUN_DIR's gem5 command."""
    path = run_dir / CMD_NAME
    try:
        cmd = json.loads(path.read_text())
    except FileNotFoundError:
        raise Refused(f"{run_dir}: no {CMD_NAME} (give a gem5 run directory of a sweep)") from None
    except (OSError, ValueError) as e:
        raise Refused(f"{path}: unreadable ({e})") from None
    if not (isinstance(cmd, list) and len(cmd) >= 3 and all(isinstance(x, str) for x in cmd)):
        raise Refused(f"{path}: not a gem5 command (a JSON list of strings)")
    if Path(cmd[2]).name != RUN_SCRIPT.name:
        raise Refused(f"{path}: runs {Path(cmd[2]).name}, not {RUN_SCRIPT.name}")
    return cmd[3:]


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args[:-1] else None


def _replace(args: list[str], flag: str, value: str) -> list[str]:
    """args with ``flag``'s value replaced (appended when absent)."""
    if flag not in args[:-1]:
        return [*args, flag, value]
    i = args.index(flag)
    return [*args[: i + 1], value, *args[i + 2 :]]


def point_args(run_dir: Path, checkpoint: Path | None) -> tuple[list[str], Path]:
    """The point's run-script arguments, restoring ``checkpoint`` (default: the
    command's), with RUN_DIR's job; Refused when an input is missing here."""
    args = template_args(run_dir)
    cpt = checkpoint or (Path(v) if (v := _value(args, "--restore-checkpoint")) else None)
    if cpt is None:
        raise Refused(f"{run_dir}: its command restores no checkpoint; give --checkpoint DIR")
    if not (cpt / "m5.cpt").is_file():
        raise Refused(f"checkpoint {cpt}: no m5.cpt there (a boot checkpoint's cpt/ directory)")
    job = run_dir / "job.json"
    if not job.is_file():
        raise Refused(f"{run_dir}: no job.json")
    for flag in ("--kernel", "--disk-image"):
        v = _value(args, flag)
        if v is None or not Path(v).is_file():
            raise Refused(f"{run_dir}: {flag} {v} does not exist on this machine")
    args = _replace(_replace(args, "--restore-checkpoint", str(cpt)), "--job", str(job))
    return args, cpt


def variants(old: str | None, new: str | None, old_args: str, new_args: str) -> list[Variant]:
    """The two ways to run; Refused without a usable gem5."""
    env, why = default_gem5()
    out = []
    for label, given, extra in (("old", old, old_args), ("new", new, new_args)):
        gem5 = given or env
        if not gem5:
            raise Refused(f"needs gem5: --{label} GEM5, $GEM5 or a cached build ({why})")
        if not (Path(gem5).is_file() and os.access(gem5, os.X_OK)):
            raise Refused(f"--{label} gem5 {gem5}: not an executable file")
        try:
            out.append(Variant(label, gem5, shlex.split(extra)))
        except ValueError as e:
            raise Refused(f"--{label}-args {extra!r}: {e}") from None
    return out


def measure(v: Variant, args: list[str], work: Path) -> dict[str, Any]:
    """Run one variant; its exit code, outside seconds and phase columns."""
    outdir = work / v.label / "m5out"
    outdir.mkdir(parents=True, exist_ok=True)
    rc, wall, cpu = gem5_process(v.gem5, outdir, [*args, *v.extra], work / v.label / "gem5.log")
    errors: list[tuple[str, str]] = []
    row: dict[str, Any] = {"variant": v.label, "gem5": v.gem5, "extra_args": v.extra,
                           "exit_code": rc, "gem5_host_s": wall, "gem5_cpu_s": cpu}  # fmt: skip
    row.update(phase_columns(outdir, wall, cpu, errors))
    row["phase_errors"] = [msg for _, msg in errors]
    try:
        roi = json.loads((outdir / "roi.json").read_text()).get("roi") or {}
        row["roi_sim_ms"] = roi["sim_seconds"] * 1e3
    except (OSError, ValueError, KeyError, TypeError):
        row["roi_sim_ms"] = None
    return row


TABLE_ROWS = [
    *((f"phase {p}", f"phase_{p}_host_s") for p in PHASES),
    ("outside the ROI (phases)", "nonroi_host_s"),
    ("ROI host s per simulated ms", "roi_host_s_per_sim_ms"),
    ("gem5 process, wall (outside)", "gem5_host_s"),
    ("gem5 process, CPU (outside)", "gem5_cpu_s"),
    ("ROI simulated ms", "roi_sim_ms"),
]


def table(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """(what, old, new, new/old) per TABLE_ROWS; None where unknown."""
    out = []
    for what, key in TABLE_ROWS:
        a, b = _num(old.get(key)), _num(new.get(key))
        ratio = b / a if a is not None and b is not None and a > 0 else None
        out.append((what, a, b, ratio))
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def format_table(rows: list[tuple[str, Any, Any, Any]]) -> str:
    def f(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    lines = [f"{'host seconds':32s} {'old':>10s} {'new':>10s} {'new/old':>8s}"]
    lines += [f"{w:32s} {f(a, '10.2f')} {f(b, '10.2f')} {f(r, '8.3f')}" for w, a, b, r in rows]
    return "\n".join(lines)


def main(
    run_dir: Path | None,
    old: str | None,
    new: str | None,
    old_args: str = "",
    new_args: str = "",
    checkpoint: Path | None = None,
    out: Path | None = None,
) -> int:
    try:
        if run_dir is None:
            raise Refused("needs --from RUN_DIR (a gem5 run directory of a sweep: the point)")
        vs = variants(old, new, old_args, new_args)
        args, cpt = point_args(run_dir, checkpoint)
    except Refused as e:
        print(f"bench-run: {e}", file=sys.stderr)
        return EXIT_REFUSED
    work = out or Path(tempfile.mkdtemp(prefix="bench-run-"))
    print(f"bench-run: {run_dir} from {cpt}, old then new, in {work}", flush=True)
    rows = [measure(v, args, work) for v in vs]
    result = {"run_dir": str(run_dir), "checkpoint": str(cpt), "args": args, "runs": rows,
              "table": table(*rows)}  # fmt: skip
    (work / "bench-run.json").write_text(json.dumps(result, indent=1) + "\n")
    print(format_table(result["table"]))
    failed = [r for r in rows if r["exit_code"] != 0]
    for r in rows:
        if r["phase_errors"] or r.get("phase_roi_host_s") is None:
            print(f"bench-run: {r['variant']}: phases incomplete "
                  f"({'; '.join(r['phase_errors']) or 'no ROI phase'})")  # fmt: skip
    for r in failed:
        print(f"bench-run: {r['variant']} failed (gem5 exit {r['exit_code']}), see "
              f"{work / r['variant'] / 'gem5.log'}")  # fmt: skip
    return 1 if failed else 0
