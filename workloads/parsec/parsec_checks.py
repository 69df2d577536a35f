"""Is a PARSEC run's output right? One check per program of our build.

A check sees the main run (the program as the mix runs it) and the runs of
its variants: the same program with one of its own self-test switches
(SPLASH-2x ``-t``, ocean's ``-o``) or with 1 thread, for the programs whose
result must not depend on the thread count. Where each run happened (this
host, the QEMU guest) is the caller's business (``build_parsec.py check``,
tests/parsec). blackscholes is checked against prices computed here, in
Python, from the same option file: nothing of PARSEC's own code.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import parsec_catalog as cat
import parsec_native as pn


class RunOut(NamedTuple):
    exit_code: int | None
    stdout: str
    stderr: str
    files: dict[str, bytes]  # outputs collected from the run directory


@dataclass(frozen=True)
class Variant:
    name: str
    extra_args: tuple[str, ...] = ()
    threads: int | None = None  # None: as many as the main run


@dataclass(frozen=True)
class Check:
    what: str  # one line for reports: what is compared with what
    variants: tuple[Variant, ...] = ()
    files: tuple[str, ...] = ()  # outputs the check reads (besides stdout/stderr)


ONE = Variant("t1", threads=1)
SELFTEST = Variant("selftest", ("-t",))
CHECKS: dict[str, Check] = {
    "parsec.blackscholes": Check(
        "every price vs an independent Python Black-Scholes (exact normal CDF, double) on the "
        "same option file, and vs the file's DerivaGem reference values",
        files=("prices.txt",),
    ),
    "parsec.streamcluster": Check(
        "output.txt (cluster centres) identical to a 1-thread run", (ONE,), ("output.txt",)
    ),
    "parsec.swaptions": Check(
        "every swaption's price and error identical to a 1-thread run", (ONE,)
    ),
    "splash2x.fft": Check("its own -t test (FFT + inverse FFT): TEST PASSED", (SELFTEST,)),
    "splash2x.lu_cb": Check("its own -t test (solves with the factors): TEST PASSED", (SELFTEST,)),
    "splash2x.lu_ncb": Check("its own -t test (solves with the factors): TEST PASSED", (SELFTEST,)),
    "splash2x.radix": Check("its own -t test: every key in place", (SELFTEST,)),
    "splash2x.ocean_cp": Check(
        "-o multigrid residuals: same iterations as a 1-thread run, norms within 1e-6 "
        "relative, all below the tolerance",
        (Variant("residuals", ("-o",)), Variant("residuals1", ("-o",), 1)),
    ),
    "splash2x.ocean_ncp": Check(
        "-o multigrid residuals: same iterations as a 1-thread run, norms within 1e-6 "
        "relative, all below the tolerance",
        (Variant("residuals", ("-o",)), Variant("residuals1", ("-o",), 1)),
    ),
    "splash2x.radiosity": Check(
        "same patches as a 1-thread run, elements and interactions within 5 % (its task "
        "stealing makes the refinement depend on the thread count)",
        (ONE,),
    ),
    "splash2x.volrend": Check(
        "renders every frame (count and TIFF headers) like a 1-thread run, when the frames "
        "are at hand; otherwise the rendering phase completes",
        (ONE,),
    ),
    "splash2x.barnes": Check("completes its ROI"),
    "splash2x.fmm": Check("completes its ROI"),
    "splash2x.water_nsquared": Check("energies identical to a 1-thread run", (ONE,)),
    "splash2x.water_spatial": Check("energies identical to a 1-thread run", (ONE,)),
}


# ------------------------------------------------------------------ blackscholes


def cnd(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def black_scholes(s: float, k: float, r: float, v: float, t: float, call: bool) -> float:
    """European option without dividends (what PARSEC's blackscholes prices)."""
    d1 = (math.log(s / k) + (r + 0.5 * v * v) * t) / (v * math.sqrt(t))
    d2 = d1 - v * math.sqrt(t)
    disc = k * math.exp(-r * t)
    if call:
        return s * cnd(d1) - disc * cnd(d2)
    return disc * cnd(-d2) - s * cnd(-d1)


def read_options(text: str) -> list[tuple[float, float, float, float, float, bool, float]]:
    """(S, K, r, v, T, call, DerivaGem reference) per option of an option file."""
    lines = text.split("\n")
    n = int(lines[0])
    out = []
    for ln in lines[1 : n + 1]:
        f = ln.split()
        out.append(
            (
                float(f[0]),
                float(f[1]),
                float(f[2]),
                float(f[4]),
                float(f[5]),
                f[6] == "C",
                float(f[8]),
            )
        )
    if len(out) != n:
        raise ValueError(f"option file: {len(out)} options, header says {n}")
    return out


# Single precision (PARSEC's default build, NCO=4 with fptype float) and its
# polynomial normal CDF: a few 1e-5 absolute on prices up to ~100.
BS_ABS, BS_REL = 5e-4, 1e-4


def check_blackscholes(options_text: str, prices_text: str) -> tuple[list[str], dict[str, float]]:
    opts = read_options(options_text)
    lines = prices_text.split()
    problems = []
    if not lines or int(lines[0]) != len(opts) or len(lines) != len(opts) + 1:
        return [f"prices.txt: {len(lines) - 1} prices for {len(opts)} options"], {}
    worst_ref = worst_dg = 0.0
    bad = 0
    for i, (o, p) in enumerate(zip(opts, lines[1:], strict=True)):
        price = float(p)
        ref = black_scholes(o[0], o[1], o[2], o[3], o[4], o[5])
        err = abs(price - ref)
        worst_ref = max(worst_ref, err)
        worst_dg = max(worst_dg, abs(price - o[6]))
        if not err <= BS_ABS + BS_REL * abs(ref):
            bad += 1
            if bad <= 3:
                problems.append(f"option {i}: price {price} vs reference {ref}")
    if bad:
        problems.append(f"{bad} of {len(opts)} prices off by more than {BS_ABS} + {BS_REL} rel")
    return problems, {"max_abs_err_vs_python": worst_ref, "max_abs_err_vs_derivagem": worst_dg}


# ------------------------------------------------------------------ the others

_SWAPTION = re.compile(r"Swaption (\d+): \[SwaptionPrice: (\S+) StdError: (\S+)\]")
_RESIDUAL = re.compile(r"iter (\d+), level \d+, residual norm (\S+), work")
_RAD = re.compile(
    r"(Number of patches|Total number of elements|Total number of interactions):\s+(\d+)"
)
_WATER = re.compile(
    r"^\s+\d+\s+[-0-9.]+\s+[-0-9.]+\s+[-0-9.]+.*$|^\s+[-0-9.]+\s+[-0-9.]+\s+[-0-9.]+\s*$", re.M
)
_FRAME = re.compile(r"^.+_\d{4}$")


def _ratio_ok(a: int, b: int, rel: float) -> bool:
    return abs(a - b) <= rel * max(a, b)


def check(
    package: str, main: RunOut, variants: dict[str, RunOut], inputs: dict[str, Path] | None = None
) -> tuple[list[str], dict[str, float]]:
    """Problems found (empty: the run is right) and any figures measured."""
    problems: list[str] = []
    figures: dict[str, float] = {}
    spec = CHECKS[package]
    runs = {"main": main, **variants}
    for name, r in runs.items():
        if r.exit_code != 0:
            problems.append(f"{name} run: exit {r.exit_code}")
    if "[HOOKS] Leaving ROI" not in main.stdout:
        problems.append("main run: no '[HOOKS] Leaving ROI' (the ROI did not complete)")
    for v in spec.variants:
        if v.name not in variants:
            problems.append(f"variant {v.name} was not run")
    if problems:
        return problems, figures
    if package == "parsec.blackscholes":
        opt_file = next((p for n, p in (inputs or {}).items() if n.startswith("in_")), None)
        if opt_file is None or "prices.txt" not in main.files:
            return ["blackscholes: needs the option file and prices.txt"], figures
        p, figures = check_blackscholes(opt_file.read_text(), main.files["prices.txt"].decode())
        problems += p
    elif package == "parsec.streamcluster":
        a, b = main.files.get("output.txt"), variants["t1"].files.get("output.txt")
        if a is None or b is None or a != b or not a.strip():
            problems.append("output.txt differs from the 1-thread run's (or is missing)")
    elif package == "parsec.swaptions":
        a = _SWAPTION.findall(main.stderr + main.stdout)
        b = _SWAPTION.findall(variants["t1"].stderr + variants["t1"].stdout)
        if not a or a != b:
            problems.append(f"swaption prices differ from the 1-thread run ({len(a)} vs {len(b)})")
        figures["swaptions"] = len(a)
    elif package in ("splash2x.fft", "splash2x.lu_cb", "splash2x.lu_ncb"):
        out = variants["selftest"].stdout
        if "TEST PASSED" not in out or "TEST FAILED" in out:
            problems.append("-t: no 'TEST PASSED'")
    elif package == "splash2x.radix":
        if "PASSED: All keys in place." not in variants["selftest"].stdout:
            problems.append("-t: not 'PASSED: All keys in place.'")
    elif package in ("splash2x.ocean_cp", "splash2x.ocean_ncp"):
        a = _RESIDUAL.findall(variants["residuals"].stdout)
        b = _RESIDUAL.findall(variants["residuals1"].stdout)
        if not a or [x[0] for x in a] != [x[0] for x in b]:
            problems.append(
                f"-o: iterations differ from the 1-thread run ({len(a)}/{len(b)} steps)"
            )
        else:
            pairs = zip(a, b, strict=True)
            worst = max(abs(float(x[1]) - float(y[1])) / float(y[1]) for x, y in pairs)
            figures["max_rel_residual_diff"] = worst
            if worst > 1e-6 or max(float(x[1]) for x in a) >= 1e-7:
                problems.append(f"-o: residuals off (max rel diff {worst:.3g})")
    elif package == "splash2x.radiosity":
        a = dict(_RAD.findall(main.stdout))
        b = dict(_RAD.findall(variants["t1"].stdout))
        if len(a) != 3 or len(b) != 3:
            problems.append("no resource-usage statistics")
        elif a["Number of patches"] != b["Number of patches"] or not all(
            _ratio_ok(int(a[k]), int(b[k]), 0.05)
            for k in ("Total number of elements", "Total number of interactions")
        ):
            problems.append(f"statistics {a} vs 1-thread {b}")
        else:
            figures.update({k: int(v) for k, v in a.items()})
    elif package == "splash2x.volrend":
        fa = sorted(n for n in main.files if _FRAME.match(n))
        fb = sorted(n for n in variants["t1"].files if _FRAME.match(n))
        if "Rendering..." not in main.stdout:
            problems.append("no 'Rendering...'")
        if fa:  # the frames came back (the guest hands them back as outputs)
            if fa != fb or not all(main.files[n][:4] in (b"II*\0", b"MM\0*") for n in fa):
                problems.append(f"frames: {len(fa)} vs 1-thread {len(fb)}, or not TIFF")
            figures["frames"] = len(fa)
    elif package in ("splash2x.water_nsquared", "splash2x.water_spatial"):
        a, b = _WATER.findall(main.stdout), _WATER.findall(variants["t1"].stdout)
        if not a or a != b:
            problems.append("energies differ from the 1-thread run")
    return problems, figures


# ------------------------------------------------------------------ native driver


@dataclass
class Outcome:
    package: str
    input_set: str
    threads: int
    seconds: float
    problems: list[str]
    figures: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def native_out(r: pn.NativeRun) -> RunOut:
    files = {}
    for p in sorted(r.workdir.iterdir()):
        if p.is_file() and not p.is_symlink() and p.stat().st_size <= 16 << 20:
            files[p.name] = p.read_bytes()
    return RunOut(r.exit_code, r.stdout, r.stderr, files)


def input_files(build: Path, package: str, input_set: str) -> dict[str, Path]:
    inp = pn.manifest(build)["programs"][package]["inputs"][input_set]
    base = build / "install" / (inp["dir"] or "")
    return {f: base / f for f in inp["files"]}


def run_and_check(
    build: Path,
    package: str,
    input_set: str,
    threads: int,
    workdir: Path,
    timeout: float | None = None,
) -> Outcome:
    """Run PACKAGE natively (as the mix runs it), then its variants, and check."""
    main = pn.run_native(build, package, input_set, threads, workdir / "main", timeout=timeout)
    variants = {}
    for v in CHECKS[package].variants:
        r = pn.run_native(
            build,
            package,
            input_set,
            v.threads or threads,
            workdir / v.name,
            list(v.extra_args),
            timeout=timeout,
        )
        variants[v.name] = native_out(r)
    problems, figures = check(
        package, native_out(main), variants, input_files(build, package, input_set)
    )
    return Outcome(package, input_set, threads, main.seconds, problems, figures)


def main_check(
    build: Path, only: list[str], input_set: str, threads: int, workdir: Path | None
) -> int:
    man = pn.manifest(build)
    pkgs = [cat.lookup(p).package for p in only] if only else sorted(man["programs"])
    base = workdir or Path(f"/tmp/numa-lb-parsec-check-{input_set}")
    failed = 0
    for pkg in pkgs:
        if input_set not in man["programs"].get(pkg, {}).get("inputs", {}):
            print(f"{pkg:26s} {input_set}: not in this build")
            continue
        o = run_and_check(build, pkg, input_set, threads, base / cat.lookup(pkg).name)
        failed += not o.ok
        status = "ok" if o.ok else "FAILED: " + "; ".join(o.problems)
        print(
            f"{pkg:26s} {input_set} {threads} threads {o.seconds:7.2f} s  {status}  "
            f"[{CHECKS[pkg].what}]",
            flush=True,
        )
    print(f"{len(pkgs) - failed} ok, {failed} failed", file=sys.stderr)
    return 1 if failed else 0
