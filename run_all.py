#!/usr/bin/env python3
"""numa-lb-study: sweep spec -> run matrix -> executor (local | Slurm) -> results -> report.

    ./run_all.py --preset quick                      # = ./run_all.py run --preset quick
    ./run_all.py run SPEC.toml --set axes.threads=4,8 --executor slurm
    ./run_all.py run --preset paper --dry-run --executor slurm   # print the sbatch script
    ./run_all.py run --preset finding --stage-only   # kernel, image, boot checkpoints; no run
    ./run_all.py status results/quick
    ./run_all.py report results/quick [more dirs...] [--out DIR]
    ./run_all.py report --frames findings/NAME/frames    # again, from a kept frame alone
    ./run_all.py report --frames A/frames --frames B/frames --out DIR   # several as one
    ./run_all.py run --preset finding --kept findings/NAME/frames   # adopt runs done elsewhere
    ./run_all.py bench [--runs 10000] [--from RUN_DIR]
    ./run_all.py calibrate results/calibration [--check]   # NUMA-factor table (gem5)
    ./run_all.py bench-machine [--cores 1,2,4]   # gem5 boot s and ROI speed vs one socket
    ./run_all.py bench-run --from RUN_DIR --old GEM5_A --new GEM5_B   # per-phase host s
    ./run_all.py presets
    ./run_all.py build-gem5 [--src PATH] [--variant fast|opt]   # gem5 into the cache

The first line of `run` names the backend. Exit codes of `run`: 0 every run
done, 1 some run failed or timed out, 2 bad spec/usage (also: more than 10,000
runs without --allow-large; the paper/sensitivity presets on qemu without
--allow-qemu-timing), 3 missing prerequisite (also: an image that lacks a
program of the sweep's mixes) or stopped early (disk), 130
interrupted (rerun the same command to resume). `status` and `report` exit 2
when a directory does not exist or holds no runs (`report`: also unreadable
frames, several --frames without --out). `build-gem5`: see README, gem5, and
analysis/gem5_build.py (0 built, 1 SCons failed, 2 not gem5 v24.0.0.1, 3
missing prerequisite, 130 interrupted: rerun to resume). See analysis/README.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

COMMANDS = (
    "run",
    "status",
    "report",
    "bench",
    "bench-machine",
    "bench-run",
    "calibrate",
    "presets",
    "build-gem5",
    "worker",
)
GEM5_HELP = "gem5 binary (default: $GEM5, else the cached build-gem5 build: README, gem5)"
EXIT_USAGE = 2
MAX_JOBS = 1024


def int_in(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi]; argparse names the option on error.

    A count of 0 or below is never meaningful here (--jobs -1 used to loop forever).
    """

    def parse(text: str) -> int:
        want = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"must be {want}, got {v}")
        return v

    return parse


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}") from None
    if not v > 0 or v == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return v


def int_list(text: str) -> list[int]:
    """1,2,4 -> [1, 2, 4]; every item an integer >= 1."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"must be a list of integers >= 1, got {text!r}")
    return [int_in(1)(x) for x in items]


def _shortcut_overrides(a: argparse.Namespace) -> list[str]:
    ov = []
    for flag, key in (
        ("policies", "axes.policy"),
        ("numa_factors", "axes.numa_factor"),
        ("threads", "axes.threads"),
        ("sockets", "axes.sockets"),
        ("cores_per_socket", "axes.cores_per_socket"),
        ("mixes", "axes.mix"),
    ):
        v = getattr(a, flag)
        if v is not None:
            ov.append(f"{key}={v}")
    if a.repeats is not None:
        ov.append(f"sweep.repeats={a.repeats}")
    if a.backend is not None:
        ov.append(f"sweep.backend={a.backend!r}".replace("'", '"'))
    if a.time_limit is not None:
        ov.append(f'resources.time_limit="{a.time_limit}"')
    return ov + list(a.set or [])


def _backend_origin(a: argparse.Namespace) -> str | None:
    """Which option set sweep.backend (the last one wins), or None: the spec did."""
    if any(x.split("=", 1)[0].strip() == "sweep.backend" for x in a.set or []):
        return "--set sweep.backend"
    return "--backend" if a.backend is not None else None


def _no_runs(dirs: list[Path]) -> str | None:
    """Why `status`/`report` has nothing to read (missing dir, no run dirs), or None."""
    from analysis.results.frames import FramesError, find_runs

    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        return f"no such directory: {', '.join(missing)}"
    try:
        found = find_runs(dirs)
    except FramesError as e:  # a directory on the way cannot be listed
        return str(e)
    if not found:
        return (
            f"no run directories under {', '.join(str(d) for d in dirs)} (a sweep's output "
            "directory holds runs/<id>/spec.json; give that directory or a run directory)"
        )
    return None


def _no_sweep(out: Path) -> str | None:
    """Why `status` has nothing to list, or None (runs without spec.json are listed)."""
    if not out.is_dir():
        return f"no such directory: {out}"
    if not ((out / "runs").is_dir() or (out / "sweep.json").is_file()):
        return f"{out} is not a sweep output directory (no runs/, no sweep.json)"
    return None


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a sweep (the default command)")
    r.add_argument("spec", nargs="?", type=Path, help="a sweep spec TOML file")
    r.add_argument("--preset", help="a preset of analysis/sweep/presets (quick, paper, ...)")
    r.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a spec value, e.g. --set axes.policy=default,excl",
    )
    r.add_argument("--policies", help="= --set axes.policy=...")
    r.add_argument("--numa-factors", dest="numa_factors", help="= --set axes.numa_factor=...")
    r.add_argument("--threads", help="= --set axes.threads=...")
    r.add_argument("--sockets", help="= --set axes.sockets=...")
    r.add_argument(
        "--cores-per-socket", dest="cores_per_socket", help="= --set axes.cores_per_socket=..."
    )
    r.add_argument("--mixes", help="= --set axes.mix=...")
    r.add_argument("--repeats", type=int_in(1), help="= --set sweep.repeats=N (runs per point)")
    r.add_argument(
        "--backend",
        choices=["auto", "qemu", "gem5"],
        help="= --set sweep.backend=...; auto: gem5 when GEM5/--gem5 names a binary, else "
        "qemu (default: the spec's; the quick preset says qemu, the gem5 presets gem5)",
    )
    r.add_argument("--time-limit", dest="time_limit", help="per run, e.g. 30m")
    r.add_argument("--out", type=Path, help="output directory (default results/<sweep name>)")
    r.add_argument(
        "--executor",
        choices=["local", "slurm"],
        default="local",
        help="local: runs on this host (default); slurm: sbatch job arrays (README, Slurm)",
    )
    r.add_argument(
        "--jobs",
        "-j",
        type=int_in(1, MAX_JOBS),
        help=f"local: parallel runs, 1..{MAX_JOBS} (default: cores and memory)",
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="list the runs (and with --executor slurm print the script); run nothing",
    )
    r.add_argument(
        "--stage-only",
        action="store_true",
        help="build the kernel and image and make the boot checkpoints the runs still to run "
        "need (as the Slurm executor does before it submits), then stop: no run is started "
        "or created",
    )
    r.add_argument("--rerun-failed", action="store_true", help="run failed/timed-out runs again")
    r.add_argument(
        "--kept",
        type=Path,
        action="append",
        metavar="FRAMES_DIR",
        help="a kept finding's frames dir (findings/NAME/frames): skip the runs it holds done "
        "(same point, same provenance but for the gem5 binary hash); repeatable",
    )
    r.add_argument(
        "--kept-whole-repeats",
        action="store_true",
        help="with --kept: adopt a kept run only when every planned run of its repeat is kept "
        "done on one gem5 binary (pairs never span builds); a repeat kept in part runs here whole",
    )
    r.add_argument(
        "--allow-large",
        dest="allow_large",
        action="store_true",
        help="confirm a sweep of more than 10,000 runs (refused without it)",
    )
    r.add_argument(
        "--allow-qemu-timing",
        dest="allow_qemu_timing",
        action="store_true",
        help="run the paper/sensitivity presets on the qemu backend anyway (refused without "
        "it: qemu timing is functional emulation, not architectural performance)",
    )
    r.add_argument(
        "--no-build",
        dest="build",
        action="store_false",
        help="do not build the kernel/image; fail if they are missing",
    )
    r.add_argument("--gem5", help=GEM5_HELP)
    r.add_argument(
        "--no-report",
        dest="report",
        action="store_false",
        help="do not write report.html/report.md at the end (`report DIR` writes them later)",
    )
    r.add_argument("--no-wait", dest="wait", action="store_false", help="slurm: submit and return")
    r.add_argument("--poll", type=positive_float, default=5.0, help="slurm: seconds between polls")

    s = sub.add_parser("status", help="list the runs of an output directory")
    s.add_argument("out", type=Path, help="a sweep's output directory (e.g. results/quick)")

    rep = sub.add_parser("report", help="frames (parquet) + report.html + report.md from run dirs")
    rep.add_argument("dirs", nargs="*", type=Path, help="sweep output dirs or run dirs")
    rep.add_argument(
        "--frames",
        type=Path,
        action="append",
        help="instead of run dirs: a frames dir (metrics/runs/errors.parquet) to report from; "
        "repeat it to report several as one (a run id in two: the later --frames wins)",
    )
    rep.add_argument(
        "--out",
        type=Path,
        help="where to write (default: the dir, or the frames dir's parent; "
        "required with several --frames)",
    )
    rep.add_argument("--title", default=None, help="the report's title (default: from the runs)")

    b = sub.add_parser("bench", help="time frame + report on a synthetic tree of N runs")
    b.add_argument(
        "--runs", type=int_in(1), default=10000, help="runs in the synthetic tree (default 10000)"
    )
    b.add_argument(
        "--from",
        dest="src",
        type=Path,
        help="a real run directory to clone (default: tests/fixtures' real run)",
    )
    b.add_argument("--workdir", type=Path, help="where to build the tree (default: a temp dir)")
    b.add_argument("--keep", action="store_true", help="keep the generated tree (print its path)")

    bm = sub.add_parser("bench-machine", help="gem5: boot time and ROI speed vs one socket")
    bm.add_argument(
        "--cores",
        type=int_list,
        default=[1, 2, 4],
        help="cores per socket to measure, e.g. 1,2,4 (4 sockets)",
    )
    bm.add_argument(
        "--no-probe-filter-too",
        dest="pf_off",
        action="store_true",
        help="also measure each 4-socket machine with the probe filter off",
    )
    bm.add_argument("--gem5", help=GEM5_HELP)
    bm.add_argument("--out", type=Path, help="work directory (default: a temp dir)")

    br = sub.add_parser(
        "bench-run", help="gem5: one run's point two ways from one checkpoint, host s per phase"
    )
    br.add_argument("--from", dest="run_dir", type=Path, help="a gem5 run dir: the point")
    br.add_argument("--old", help="old " + GEM5_HELP)
    br.add_argument("--new", help="new " + GEM5_HELP)
    br.add_argument("--old-args", default="", help="extra run-script arguments, old run")
    br.add_argument("--new-args", default="", help="extra run-script arguments, new run")
    br.add_argument("--checkpoint", type=Path, help="boot checkpoint (default: the run's)")
    br.add_argument("--out", type=Path, help="work directory (default: a temp dir)")

    c = sub.add_parser("calibrate", help="link latency -> NUMA factor table from a gem5 sweep")
    c.add_argument("out", type=Path, help="output dir of the calibration (or -check) preset")
    c.add_argument("--check", action="store_true", help="requested vs measured factor, +-5 %%")
    c.add_argument("--write", type=Path, help="CSV to write (default configs/numa_lb/...)")
    c.add_argument(
        "--idle", type=Path, help="OUT is a loaded calibration: compare it with this idle one"
    )

    sub.add_parser("presets", help="list the shipped presets")
    # listed here for --help; its arguments are analysis/gem5_build.py's own
    sub.add_parser("build-gem5", help="build gem5 v24.0.0.1 (X86, MOESI_hammer) into the cache")

    wk = sub.add_parser("worker", help="(internal) execute one run directory")
    wk.add_argument("run_dir", type=Path, help="a run directory (runs/<id>) with its spec.json")
    wk.add_argument(
        "--executor", default="local", help="the executor that started it: local or slurm"
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv.insert(0, "run")
    if argv[0] == "build-gem5":
        from analysis.gem5_build import main as build_gem5_main

        return build_gem5_main(argv[1:])
    a = parser().parse_args(argv)
    from analysis.sweep.cli_paths import UsageError, check_args

    try:  # every path argument, before anything runs (cli_paths.py)
        check_args(a)
    except UsageError as e:
        print(f"error: {a.command}: {e}", file=sys.stderr)
        return EXIT_USAGE

    if a.command == "worker":
        from analysis.sweep.worker import run_one

        return run_one(a.run_dir, a.executor)
    if a.command == "presets":
        from analysis.sweep.spec import load_spec, preset_names

        for n in preset_names():
            sp = load_spec(preset=n)
            print(f"{n:12s} {sp.description}")
        return 0
    if a.command == "status":
        from analysis.sweep.driver import status_table

        problem = _no_sweep(a.out)
        if problem:
            print(f"error: status: {problem}", file=sys.stderr)
            return EXIT_USAGE
        print(status_table(a.out))
        return 0
    if a.command == "report":
        from analysis.results.frames import FramesError
        from analysis.results.keep import sweeps_with_kept
        from analysis.results.report import write_report, write_report_from_frames

        if (a.frames is None) == (not a.dirs):
            print("error: report: give run/sweep dirs or --frames DIR", file=sys.stderr)
            return EXIT_USAGE
        if a.frames is not None and len(a.frames) > 1 and a.out is None:
            # the default, the first input's dir, may be a committed finding's
            print("error: report: several --frames need --out DIR (the merged report would "
                  f"overwrite the report beside {a.frames[0]})", file=sys.stderr)  # fmt: skip
            return EXIT_USAGE
        if a.frames is not None:
            notes: list[str] = []
            try:
                paths = write_report_from_frames(
                    a.frames, a.out or a.frames[0].parent, a.title, notes
                )
            except FramesError as e:
                print(f"error: report: {e}", file=sys.stderr)
                return EXIT_USAGE
            for n in notes:
                print(f"report: {n}", file=sys.stderr)
            for k in ("html", "md"):
                print(f"{k}: {paths[k]}")
            return 0
        problem = _no_runs(a.dirs)
        if problem:
            print(f"error: report: {problem}", file=sys.stderr)
            return EXIT_USAGE
        out = a.out or a.dirs[0]
        try:  # a sweep that adopted kept runs (--kept) is reported with them
            with_kept = sweeps_with_kept(a.dirs, out)
        except (OSError, ValueError, FramesError) as e:
            print(f"error: report: {e}", file=sys.stderr)
            return EXIT_USAGE
        if with_kept is None:
            paths = write_report(a.dirs, out, title=a.title)
        else:
            fr, merged = with_kept
            fr.write(out / "frames")
            paths = write_report_from_frames(out / "frames", out, a.title, merged)
            for n in merged:
                print(f"report: {n}", file=sys.stderr)
        for k in ("html", "md", "frame"):
            print(f"{k}: {paths[k]}")
        return 0
    if a.command == "bench-machine":
        from analysis.results.machine_bench import main as machine_bench_main

        return machine_bench_main(a.gem5, a.cores, a.pf_off, a.out)
    if a.command == "bench-run":
        from analysis.results.run_bench import main as bench_run_main

        return bench_run_main(a.run_dir, a.old, a.new, a.old_args, a.new_args, a.checkpoint, a.out)
    if a.command == "calibrate":
        from analysis.results.calibration import main as calibrate_main

        return calibrate_main(a.out, a.check, a.write, a.idle)
    if a.command == "bench":
        from analysis.results.bench import main as bench_main

        return bench_main(a.runs, a.src, a.workdir, a.keep)

    from analysis.cache import export_parsec_default
    from analysis.sweep.driver import Options, run_sweep
    from analysis.sweep.spec import SpecError, load_spec, needs_parsec_build

    if (a.spec is None) == (a.preset is None):
        print(
            "error: give a spec file or --preset NAME (see `run_all.py presets`)", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        spec = load_spec(a.spec, a.preset, _shortcut_overrides(a))
    except SpecError as e:
        print(f"error: invalid sweep spec: {e}", file=sys.stderr)
        return EXIT_USAGE
    if needs_parsec_build(spec):
        export_parsec_default()  # PARSEC_SRC unset: the cache's PARSEC tree, when it is there
    opt = Options(
        out=a.out,
        executor=a.executor,
        jobs=a.jobs,
        dry_run=a.dry_run,
        stage_only=a.stage_only,
        rerun_failed=a.rerun_failed,
        build=a.build,
        gem5=a.gem5,
        report=a.report,
        wait=a.wait,
        poll_s=a.poll,
        allow_large=a.allow_large,
        allow_qemu_timing=a.allow_qemu_timing,
        kept=a.kept or [],
        kept_whole_repeats=a.kept_whole_repeats,
        backend_origin=_backend_origin(a),
    )
    return run_sweep(spec, opt)


if __name__ == "__main__":
    from analysis.project_python import reexec

    reexec(__file__, sys.argv[1:])  # the clone's .venv (made by .ci/setup), if not running it
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print(
            "\ninterrupted; finished runs are intact, rerun the same command to resume",
            file=sys.stderr,
        )
        sys.exit(130)
