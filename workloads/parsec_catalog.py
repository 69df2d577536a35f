"""PARSEC 3.0 catalog for numa-lb-study: the programs of Chiang & Su [Chiang21] Table 2.

Stdlib only and Python >= 3.6: the mix runner imports this inside the guest,
which is Debian bookworm (3.11) for our image but Ubuntu 18.04 (3.6) for the
gem5-resources x86-parsec image, hence typing.List/NamedTuple and no
dataclasses or PEP 604/585 syntax.

What comes from where:
  * suite, name, allocation class: [Chiang21] Table 2 ("Memory Allocated &
    Initialized by thread group leader / by individual threads");
  * input sets and the parsecmgmt convention (parsecmgmt -a run -p <pkg>
    -c <config> -i <input> -n <threads>) and package directories: the
    PARSEC 3.0 layout;
  * thread notes: PARSEC 3.0 documentation, approximate; -n is a minimum
    and several programs start more threads (pipelines, helpers), so the
    mix runner records the thread count it actually sees per thread group;
  * the x86-parsec image facts: gem5-resources src/parsec (PARSEC at
    /home/gem5/parsec-benchmark, built with config gcc-hooks, only the 13
    PARSEC 2.0 programs, sim* and native inputs).

Table 2 lists 30 programs; the paper runs 29 at once but does not say which
one it left out, so paper_mix() makes the caller name the exclusion.
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import os
import platform
import re
import shlex
from typing import Dict, List, NamedTuple, Optional

LEADER = "leader"
INDIVIDUAL = "individual"

INPUTS = ("test", "simdev", "simsmall", "simmedium", "simlarge", "native")

# gem5-resources x86-parsec image layout (src/parsec in gem5-resources).
GEM5_PARSEC_ROOT = "/home/gem5/parsec-benchmark"
GEM5_PARSEC_CONFIG = "gcc-hooks"
# What the paper built with (Sec. 4.1): gcc-pthreads, gcc-openmp for freqmine.
PAPER_CONFIG = "gcc-pthreads"


class Program(NamedTuple):
    package: str  # parsecmgmt package name, e.g. "parsec.canneal", "splash2x.fmm"
    suite: str  # Table 2 suite: "PARSEC 2.0", "SPLASH-2x", "Network"
    name: str  # short name as in Table 2
    allocation: str  # LEADER or INDIVIDUAL (Table 2)
    pkg_dir: str  # package directory relative to the PARSEC root
    paper_config: str  # build configuration the paper used
    threads_note: str  # how -n maps to threads (approximate, see module doc)
    in_gem5_image: bool  # built in the gem5-resources x86-parsec image
    synthetic: str  # our synthetic workload with the same allocation behaviour


def _p(
    package: str,
    suite: str,
    allocation: str,
    pkg_dir: str,
    threads_note: str,
    synthetic: str,
    config: str = PAPER_CONFIG,
    in_gem5_image: bool = False,
) -> Program:
    return Program(
        package=package,
        suite=suite,
        name=package.split(".", 1)[1],
        allocation=allocation,
        pkg_dir=pkg_dir,
        paper_config=config,
        threads_note=threads_note,
        in_gem5_image=in_gem5_image,
        synthetic=synthetic,
    )


_N = "n worker threads"
_POW2 = "n worker threads; n must be a power of two"

# Order: as in Table 2.
PROGRAMS = (
    # PARSEC 2.0, allocated and initialised by the thread-group leader
    _p(
        "parsec.blackscholes",
        "PARSEC 2.0",
        LEADER,
        "pkgs/apps/blackscholes",
        _N,
        "compute_small",
        in_gem5_image=True,
    ),
    _p(
        "parsec.bodytrack",
        "PARSEC 2.0",
        LEADER,
        "pkgs/apps/bodytrack",
        "n worker threads plus the main and an I/O thread",
        "leader_ft",
        in_gem5_image=True,
    ),
    _p(
        "parsec.canneal",
        "PARSEC 2.0",
        LEADER,
        "pkgs/kernels/canneal",
        _N,
        "leader_ft",
        in_gem5_image=True,
    ),
    _p(
        "parsec.dedup",
        "PARSEC 2.0",
        LEADER,
        "pkgs/kernels/dedup",
        "pipeline: n threads per parallel stage, so several times n in total",
        "leader_ft",
        in_gem5_image=True,
    ),
    _p(
        "parsec.raytrace",
        "PARSEC 2.0",
        LEADER,
        "pkgs/apps/raytrace",
        _N,
        "leader_ft",
        in_gem5_image=True,
    ),
    _p(
        "parsec.streamcluster",
        "PARSEC 2.0",
        LEADER,
        "pkgs/kernels/streamcluster",
        _N + "; the main thread coordinates (master/clients, [HongYoo])",
        "master_clients",
        in_gem5_image=True,
    ),
    _p(
        "parsec.swaptions",
        "PARSEC 2.0",
        LEADER,
        "pkgs/apps/swaptions",
        _N + "; n must not exceed the number of swaptions in the input",
        "compute_small",
        in_gem5_image=True,
    ),
    # PARSEC 2.0, by individual threads
    _p(
        "parsec.facesim",
        "PARSEC 2.0",
        INDIVIDUAL,
        "pkgs/apps/facesim",
        "n worker threads; only the partition counts shipped with the input work "
        "(1, 2, 3, 4, 6, 8, 16, 32, 64, 128)",
        "perthread_ft",
        in_gem5_image=True,
    ),
    _p(
        "parsec.ferret",
        "PARSEC 2.0",
        INDIVIDUAL,
        "pkgs/apps/ferret",
        "pipeline: n threads per parallel stage, so several times n in total",
        "perthread_ft",
        in_gem5_image=True,
    ),
    _p(
        "parsec.fluidanimate",
        "PARSEC 2.0",
        INDIVIDUAL,
        "pkgs/apps/fluidanimate",
        _POW2,
        "perthread_ft",
        in_gem5_image=True,
    ),
    _p(
        "parsec.freqmine",
        "PARSEC 2.0",
        INDIVIDUAL,
        "pkgs/apps/freqmine",
        "OpenMP: n threads via OMP_NUM_THREADS (parsecmgmt sets it)",
        "perthread_ft",
        config="gcc-openmp",
        in_gem5_image=True,
    ),
    _p(
        "parsec.vips",
        "PARSEC 2.0",
        INDIVIDUAL,
        "pkgs/apps/vips",
        "n worker threads plus helper threads",
        "perthread_ft",
        in_gem5_image=True,
    ),
    _p(
        "parsec.x264",
        "PARSEC 2.0",
        INDIVIDUAL,
        "pkgs/apps/x264",
        "n frame threads",
        "perthread_ft",
        in_gem5_image=True,
    ),
    # SPLASH-2x, by the leader
    _p("splash2x.barnes", "SPLASH-2x", LEADER, "ext/splash2x/apps/barnes", _N, "leader_ft"),
    _p("splash2x.cholesky", "SPLASH-2x", LEADER, "ext/splash2x/kernels/cholesky", _N, "leader_ft"),
    _p("splash2x.fft", "SPLASH-2x", LEADER, "ext/splash2x/kernels/fft", _POW2, "leader_ft"),
    _p("splash2x.lu_cb", "SPLASH-2x", LEADER, "ext/splash2x/kernels/lu_cb", _N, "leader_ft"),
    _p("splash2x.lu_ncb", "SPLASH-2x", LEADER, "ext/splash2x/kernels/lu_ncb", _N, "leader_ft"),
    _p("splash2x.ocean_cp", "SPLASH-2x", LEADER, "ext/splash2x/apps/ocean_cp", _POW2, "leader_ft"),
    _p(
        "splash2x.ocean_ncp", "SPLASH-2x", LEADER, "ext/splash2x/apps/ocean_ncp", _POW2, "leader_ft"
    ),
    _p("splash2x.radiosity", "SPLASH-2x", LEADER, "ext/splash2x/apps/radiosity", _N, "leader_ft"),
    _p("splash2x.radix", "SPLASH-2x", LEADER, "ext/splash2x/kernels/radix", _POW2, "leader_ft"),
    _p("splash2x.raytrace", "SPLASH-2x", LEADER, "ext/splash2x/apps/raytrace", _N, "leader_ft"),
    _p("splash2x.volrend", "SPLASH-2x", LEADER, "ext/splash2x/apps/volrend", _N, "leader_ft"),
    _p(
        "splash2x.water_spatial",
        "SPLASH-2x",
        LEADER,
        "ext/splash2x/apps/water_spatial",
        _N,
        "leader_ft",
    ),
    # SPLASH-2x, by individual threads
    _p("splash2x.fmm", "SPLASH-2x", INDIVIDUAL, "ext/splash2x/apps/fmm", _N, "perthread_ft"),
    _p(
        "splash2x.water_nsquared",
        "SPLASH-2x",
        INDIVIDUAL,
        "ext/splash2x/apps/water_nsquared",
        _N,
        "perthread_ft",
    ),
    # Network programs, by the leader (server and client in one run)
    _p(
        "parsec.netdedup",
        "Network",
        LEADER,
        "pkgs/netapps/netdedup",
        "server and client with the user-level TCP/IP stack; n server threads per stage",
        "leader_ft",
    ),
    _p(
        "parsec.netferret",
        "Network",
        LEADER,
        "pkgs/netapps/netferret",
        "server and client with the user-level TCP/IP stack; n server threads per stage",
        "leader_ft",
    ),
    _p(
        "parsec.netstreamcluster",
        "Network",
        LEADER,
        "pkgs/netapps/netstreamcluster",
        "server and client with the user-level TCP/IP stack; n server threads",
        "master_clients",
    ),
)

BY_PACKAGE = {p.package: p for p in PROGRAMS}  # type: Dict[str, Program]
PAPER_MIX_SIZE = 29


def lookup(name: str) -> Program:
    """Find a program by package name ("parsec.canneal") or unique short name."""
    if name in BY_PACKAGE:
        return BY_PACKAGE[name]
    hits = [p for p in PROGRAMS if p.name == name]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise KeyError(
            "ambiguous PARSEC name {!r}: {}".format(name, ", ".join(p.package for p in hits))
        )
    raise KeyError(f"unknown PARSEC program {name!r}")


def table2() -> List[Program]:
    """All 30 programs of Table 2."""
    return list(PROGRAMS)


def paper_mix(exclude: str) -> List[Program]:
    """The 29-program mix of Sec. 4.2: Table 2 minus the one named program."""
    gone = lookup(exclude)
    return [p for p in PROGRAMS if p != gone]


# ---------------------------------------------------------------- commands


def parsecmgmt_command(
    prog: Program,
    input_set: str,
    threads: int,
    parsec_root: str = GEM5_PARSEC_ROOT,
    config: Optional[str] = None,
) -> List[str]:
    """The PARSEC convention: parsecmgmt -a run -p PKG -c CFG -i INPUT -n THREADS."""
    _check(input_set, threads)
    return [
        os.path.join(parsec_root, "bin", "parsecmgmt"),
        "-a", "run",
        "-p", prog.package,
        "-c", config or prog.paper_config,
        "-i", input_set,
        "-n", str(threads),
    ]  # fmt: skip


def parsec_env(parsec_root: str, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """What PARSEC's env.sh sets, without sourcing a shell script."""
    env = dict(os.environ if base is None else base)
    env["PARSECDIR"] = parsec_root
    env["PATH"] = os.path.join(parsec_root, "bin") + os.pathsep + env.get("PATH", "")
    return env


def parsec_platform() -> str:
    """PARSEC's PARSECPLAT prefix of install directories, e.g. amd64-linux."""
    arch = platform.machine().lower()
    arch = {"x86_64": "amd64", "i686": "i386", "aarch64": "aarch64"}.get(arch, arch)
    return f"{arch}-{platform.system().lower()}"


class DirectRun(NamedTuple):
    argv: List[str]  # program and arguments, or ["/bin/sh", "-c", ...]
    cwd: str  # the package's run directory
    input_tar: Optional[str]  # to unpack into cwd before the run (untimed)


_RUNCONF_VAR = re.compile(r'^\s*(run_exec|run_args)\s*=\s*"(.*)"\s*$')


def parse_runconf(text: str) -> Dict[str, str]:
    """Extract run_exec and run_args from a PARSEC .runconf file."""
    out = {}  # type: Dict[str, str]
    for line in text.splitlines():
        m = _RUNCONF_VAR.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def direct_command(
    prog: Program,
    input_set: str,
    threads: int,
    parsec_root: str = GEM5_PARSEC_ROOT,
    config: Optional[str] = None,
) -> DirectRun:
    """Run the installed binary directly (no parsecmgmt, no per-run untar).

    Best effort: reads <pkg>/parsec/<input>.runconf for run_exec/run_args and
    substitutes ${NTHREADS}; arguments with shell syntax run through /bin/sh.
    parsecmgmt_command() stays the reference path.
    """
    _check(input_set, threads)
    pkg = os.path.join(parsec_root, prog.pkg_dir)
    conf_path = os.path.join(pkg, "parsec", input_set + ".runconf")
    with open(conf_path) as f:
        conf = parse_runconf(f.read())
    if "run_exec" not in conf:
        raise ValueError(f"{conf_path}: no run_exec")
    inst = os.path.join(pkg, "inst", f"{parsec_platform()}.{config or prog.paper_config}")
    exe = os.path.join(inst, conf["run_exec"])
    args = conf.get("run_args", "").replace("${NTHREADS}", str(threads))
    args = args.replace("$NTHREADS", str(threads))
    tar = os.path.join(pkg, "inputs", f"input_{input_set}.tar")
    cwd = os.path.join(pkg, "run")
    if re.search(r"[<>|;&$`]", args):
        argv = ["/bin/sh", "-c", f"exec {shlex.quote(exe)} {args}"]
    else:
        argv = [exe] + shlex.split(args)
    return DirectRun(argv=argv, cwd=cwd, input_tar=tar if os.path.exists(tar) else None)


def _check(input_set: str, threads: int) -> None:
    if input_set not in INPUTS:
        raise ValueError(f"input set must be one of {INPUTS}, not {input_set!r}")
    if threads < 1:
        raise ValueError("threads must be >= 1")


# ------------------------------------------------------ synthetic workloads


class Synthetic(NamedTuple):
    name: str  # binary name in workloads/build (and in the image's bin dir)
    allocation: str  # LEADER or INDIVIDUAL, as in Table 2
    models: str  # which PARSEC behaviour it stands for
    size_meaning: str


SYNTHETIC = {
    "leader_ft": Synthetic(
        "leader_ft",
        LEADER,
        "leader first touch: canneal, streamcluster and the 22 leader programs of Table 2",
        "shared array, total",
    ),
    "perthread_ft": Synthetic(
        "perthread_ft",
        INDIVIDUAL,
        "per-thread first touch with some sharing: fmm, fluidanimate, facesim, ...",
        "each worker's block",
    ),
    "master_clients": Synthetic(
        "master_clients",
        LEADER,
        "master/clients: streamcluster as characterised by Hong & Yoo [HongYoo]",
        "master array, total",
    ),
    "compute_small": Synthetic(
        "compute_small",
        LEADER,
        "compute-bound, small working set: blackscholes, swaptions",
        "option array, total",
    ),
    "ptrchase": Synthetic(
        "ptrchase",
        LEADER,
        "not a PARSEC stand-in: the NUMA-factor calibration benchmark",
        "each thread's chain",
    ),
}  # type: Dict[str, Synthetic]


def synthetic_for(prog: Program) -> Synthetic:
    """The synthetic workload that mirrors a PARSEC program's allocation class."""
    return SYNTHETIC[prog.synthetic]
