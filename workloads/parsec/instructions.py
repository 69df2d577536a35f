#!/usr/bin/env python3
"""Count the user-level instructions our PARSEC programs execute (valgrind callgrind).

    PARSEC_SRC=~/parsec-3.0 python3 workloads/parsec/instructions.py \\
        --input simsmall --threads 4 [--programs a,b,...] [--out FILE.csv] [--append]

For each program of our PARSEC build available at --input (or those --programs
names), this prepares its work directory exactly as the parsec test tier and the
mix runner's numa-lb launcher do (parsec_native.run_native: the manifest's argv,
parsec_catalog.installed_command + prepare_workdir), runs it once natively (wall
time) and once under `valgrind --tool=callgrind`, and prints (and with --out
writes) one CSV row per program:

    program,input,threads,instructions,native_s,valgrind_s,native_exit,valgrind_exit,status,note

status is "ok", or says what went wrong ("native-failed", "native-timeout",
"valgrind-failed", "valgrind-timeout", "no-count", "not-available"); a program
that fails or times out always gets a row. instructions is empty unless callgrind
reported a count ("Collected : N" in its log).

What is counted, and the caveats:
- **User-level instructions only** (callgrind's Ir event): the instructions the
  program's own code and its statically linked libc execute. Nothing of the
  kernel (system calls, page faults, scheduling) is counted. Under gem5 full
  system the guest kernel's instructions come on top.
- **The whole program**, from the first instruction to exit (input parsing,
  thread start-up, the region of interest and the output), not the ROI alone.
  For the PARSEC programs the ROI is most of it at simsmall; for gem5 cost this
  is the right figure when the whole program is simulated in detail.
- **All threads, summed.** Valgrind runs one thread at a time (it serialises
  them), so the count is of the program's work, not of its timing, and
  valgrind_s says nothing about parallel speed. Work that depends on the
  interleaving (spin-waiting, work stealing) is counted as valgrind's schedule
  makes it happen, which can differ from a real parallel run; our programs
  block on pthread mutexes/condition variables (glibc's default mutex does not
  spin), so 1 and 4 threads should count nearly the same (the unit test checks
  blackscholes within 30 %).
- The PARSEC hooks' m5 calls are switched off under valgrind
  (NUMA_LB_PARSEC_M5=off: valgrind does not decode gem5's 0f 04 opcode); outside
  gem5 they are no-ops anyway. The native run uses the tier's default ("auto").
- native_s is one wall-clock run on this host, including process start; on a
  shared or small machine it is inflated. It is only a sanity figure.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE.parent
for _p in (HERE, WORKLOADS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))
import build_parsec as bp  # noqa: E402
import parsec_catalog as cat  # noqa: E402
import parsec_native as pn  # noqa: E402

DEFAULT_TIMEOUT = 900.0  # seconds per program under valgrind
COLLECTED = re.compile(r"^==\d+==\s+Collected\s*:\s*(\d+)\s*$", re.MULTILINE)


@dataclass
class Row:
    program: str
    input: str
    threads: int
    instructions: int | None = None
    native_s: float | None = None
    valgrind_s: float | None = None
    native_exit: int | None = None
    valgrind_exit: int | None = None
    status: str = "ok"
    note: str = ""


COLUMNS = [f.name for f in fields(Row)]


def valgrind_argv(argv: list[str], log: Path) -> list[str]:
    """ARGV (a manifest command) under callgrind. A command that reads stdin is
    `/bin/sh -c 'exec "$@" <"$0"' STDIN PROG ARGS...`: valgrind goes after the
    shell, so it runs the program itself (not the shell, which would exec it)."""
    vg = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        f"--log-file={log}",
    ]
    if len(argv) >= 4 and argv[0] == "/bin/sh" and argv[1] == "-c" and "exec" in argv[2]:
        return argv[:4] + vg + argv[4:]
    return vg + argv


def parse_collected(text: str) -> int | None:
    """The instruction count in a callgrind log ("==PID== Collected : N")."""
    hits = COLLECTED.findall(text)
    return int(hits[-1]) if hits else None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def run_group(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int | None, float, str, str]:
    """Run ARGV in its own session; on timeout kill the whole process group.
    Returns (exit code or None on timeout, seconds, stdout, stderr)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        code = None
    return code, time.monotonic() - t0, out, err


def measure(
    build: Path,
    package: str,
    input_set: str,
    threads: int,
    workdir: Path,
    timeout: float = DEFAULT_TIMEOUT,
    native_timeout: float = DEFAULT_TIMEOUT,
    native: bool = True,
) -> Row:
    """One program: a native run (unless NATIVE is false), then a callgrind run."""
    row = Row(package, input_set, threads)
    man = pn.manifest(build)
    if input_set not in man["programs"].get(package, {}).get("inputs", {}):
        row.status = "not-available"
        row.note = f"the build {build.name} has no {input_set} input for {package}"
        return row
    notes = []
    if native:
        try:
            n = pn.run_native(
                build, package, input_set, threads, workdir / "native", timeout=native_timeout
            )
            row.native_s = round(n.seconds, 3)
            row.native_exit = n.exit_code
            if n.exit_code != 0:
                row.status = "native-failed"
                notes.append(f"native exit {n.exit_code}: {_last_line(n.stderr or n.stdout)}")
        except subprocess.TimeoutExpired:
            row.status = "native-timeout"
            notes.append(f"native run exceeded {native_timeout:g} s")
    # the callgrind run: the same command and work directory set-up as run_native
    vdir = workdir / "valgrind"
    if vdir.exists():
        shutil.rmtree(vdir)
    r = cat.installed_command(
        cat.lookup(package), input_set, threads, str(vdir), str(build / "install")
    )
    cat.prepare_workdir(r)
    log = vdir / "callgrind.log"
    env = dict(os.environ, NUMA_LB_PARSEC_M5="off")
    code, secs, out, err = run_group(valgrind_argv(r.argv, log), vdir, env, timeout)
    (vdir / "stdout.txt").write_text(out)
    (vdir / "stderr.txt").write_text(err)
    row.valgrind_s = round(secs, 3)
    row.valgrind_exit = code
    text = log.read_text(errors="replace") if log.exists() else ""
    if code is None:
        notes.append(f"callgrind run exceeded the timeout of {timeout:g} s (killed)")
        row.status = "valgrind-timeout" if row.status == "ok" else row.status
    else:
        row.instructions = parse_collected(text)
        if code != 0:
            notes.append(f"valgrind exit {code}: {_last_line(err or text)}")
            row.status = "valgrind-failed" if row.status == "ok" else row.status
        elif row.instructions is None:
            notes.append("no 'Collected :' line in the callgrind log")
            row.status = "no-count" if row.status == "ok" else row.status
    row.note = "; ".join(notes)
    return row


def find_build(build_arg: str | None) -> Path:
    """--build DIR, else our cached build of $PARSEC_SRC (built if missing, as the
    parsec tier does)."""
    if build_arg:
        b = Path(build_arg).expanduser().resolve()
        if not (b / "install" / cat.MANIFEST_NAME).exists():
            raise bp.BuildError(f"{b} is not a PARSEC build (no install/{cat.MANIFEST_NAME})")
        return b
    return bp.build(bp.Selection.make())


def select(build: Path, input_set: str, programs: list[str] | None) -> list[str]:
    """The packages to measure: PROGRAMS (short or package names), else every
    program available at INPUT_SET that the build has, in Table 2 order."""
    if programs:
        return [cat.lookup(p).package for p in programs]
    have = pn.manifest(build)["programs"]
    return [
        p.package
        for p in cat.available_programs(input_set)
        if input_set in have.get(p.package, {}).get("inputs", {})
    ]


def to_csv(rows: list[Row], header: bool = True) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    if header:
        w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in asdict(r).items()})
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--input", default="simsmall", choices=cat.INPUTS)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--programs", help="comma-separated (default: all available at --input)")
    ap.add_argument("--out", help="also write the CSV here")
    ap.add_argument("--append", action="store_true", help="append rows to --out (header once)")
    ap.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT,
        help=f"seconds per program under valgrind (default {DEFAULT_TIMEOUT:g})",
    )  # fmt: skip
    ap.add_argument(
        "--native-timeout", type=float, default=DEFAULT_TIMEOUT,
        help=f"seconds per native run (default {DEFAULT_TIMEOUT:g})",
    )  # fmt: skip
    ap.add_argument("--no-native", action="store_true", help="skip the native run")
    ap.add_argument("--build", help="a PARSEC build directory (default: ours of $PARSEC_SRC)")
    ap.add_argument("--workdir", help="keep the work directories here (default: a temp dir)")
    a = ap.parse_args(argv)
    if not shutil.which("valgrind"):
        print("instructions.py: valgrind is not installed", file=sys.stderr)
        return 2
    try:
        build = find_build(a.build)
        pkgs = select(build, a.input, a.programs.split(",") if a.programs else None)
    except (bp.BuildError, KeyError, FileNotFoundError) as e:
        print(f"instructions.py: {e}", file=sys.stderr)
        return 2
    print(f"# PARSEC build {build.name}, input {a.input}, {a.threads} threads", file=sys.stderr)
    out = Path(a.out) if a.out else None
    header = not (a.append and out is not None and out.exists() and out.stat().st_size > 0)
    if out is not None and not a.append:
        out.write_text(to_csv([], header=True))
        header = False
    print(to_csv([], header=True), end="", flush=True)
    tmp = None if a.workdir else tempfile.TemporaryDirectory(prefix="numa-lb-instr-")
    base = Path(a.workdir) if a.workdir else Path(tmp.name)  # type: ignore[union-attr]
    rows = []
    try:
        for pkg in pkgs:
            print(f"# {pkg} ...", file=sys.stderr, flush=True)
            wd = base / f"{cat.lookup(pkg).name}-{a.input}-t{a.threads}"
            try:
                row = measure(
                    build, pkg, a.input, a.threads, wd, a.timeout, a.native_timeout,
                    native=not a.no_native,
                )  # fmt: skip
            except (ValueError, OSError) as e:
                row = Row(pkg, a.input, a.threads, status="error", note=str(e)[:200])
            rows.append(row)
            line = to_csv([row], header=False)
            print(line, end="", flush=True)
            if out is not None:
                with out.open("a") as f:
                    if header:
                        f.write(to_csv([], header=True))
                        header = False
                    f.write(line)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0 if all(r.status == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
