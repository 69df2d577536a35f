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

# Our own PARSEC build (workloads/parsec/build_parsec.py, from a PARSEC 3.0 tree
# given by path): pthreads versions, static, PARSEC's hooks wired to our m5ops,
# installed in our image under NUMA_LB_PARSEC_ROOT with a manifest
# (MANIFEST_NAME) that says, per program and input, the argv and the files.
NUMA_LB_PARSEC_ROOT = "/opt/numa-lb/parsec"
NUMA_LB_PARSEC_CONFIG = "gcc-pthreads+numa-lb-hooks"
MANIFEST_NAME = "parsec.json"
LAUNCHERS = ("parsecmgmt", "direct", "numa-lb")
# gem5 work-item id of the ROI that PARSEC's hooks mark in our build
# (workloads/parsec/hooks_m5.c gets it as -DNLS_PARSEC_WORK_ID). The mix
# runner's ROI is work id 1 (configs/numa_lb/roi.py ROI_WORK_ID, the init's
# roi_workid): the gem5 script records these items and never acts on them.
PARSEC_WORK_ID = 2


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


# ------------------------------------------------------------ availability
#
# Where each program's input of each size comes from in our build
# (workloads/parsec/build_parsec.py), given the PARSEC 3.0 tree of the public
# mirror (bamos/parsec-benchmark): it carries only the test and simdev input
# tarballs, and not those of splash2x.raytrace and splash2x.cholesky.
GENERATED = "generated"  # made at build time by PARSEC's own generator, compiled from the tree
ARGS = "args"  # the input is the command line only (no files)
TREE = "tree"  # the package's input_<size>.tar in the tree
TREE_FILES = "tree-files"  # the files its arguments name, from another tarball of the tree
OFFICIAL = "official"  # PARSEC's official input_<size>.tar, from $PARSEC_INPUTS
NO_RECIPE = "no-recipe"  # our build does not build this program (yet)
SOURCES = (GENERATED, ARGS, TREE, TREE_FILES, OFFICIAL, NO_RECIPE)

_ALL_ARGS = dict((s, ARGS) for s in INPUTS)  # type: Dict[str, str]
_TREE_THEN_OFFICIAL = dict((s, TREE if s in ("test", "simdev") else OFFICIAL) for s in INPUTS)  # type: Dict[str, str]
_INPUT_SOURCES = {
    # inputgen.c (pkgs/apps/blackscholes/src) writes the option files; it
    # reproduces the tree's test and simdev files byte for byte (checked by
    # the build). Counts from the runconf file names: in_4K = 4,096 options,
    # in_16K, in_64K, in_10M = 10,000,000 (native; built only when asked).
    "parsec.blackscholes": dict(
        (s, TREE if s in ("test", "simdev") else GENERATED) for s in INPUTS
    ),
    "parsec.streamcluster": _ALL_ARGS,  # generates its points itself (none input)
    "parsec.swaptions": _ALL_ARGS,
    "splash2x.fft": _ALL_ARGS,
    "splash2x.lu_cb": _ALL_ARGS,
    "splash2x.lu_ncb": _ALL_ARGS,
    "splash2x.radix": _ALL_ARGS,
    "splash2x.ocean_cp": _ALL_ARGS,
    # built with PARSEC's 32-bit grid bound (2050, workloads/parsec/parsec_recipes.py):
    # native's 4098 grid does not fit
    "splash2x.ocean_ncp": dict((s, NO_RECIPE if s == "native" else ARGS) for s in INPUTS),
    "splash2x.radiosity": _ALL_ARGS,
    # simsmall's arguments name head-scaleddown4, the data set of the tree's
    # input_test.tar (assumed to be the same files as the official simsmall
    # tarball's, which the mirror lacks); simmedium and up use other data sets.
    "splash2x.volrend": dict(
        (s, {"test": TREE, "simdev": TREE, "simsmall": TREE_FILES}.get(s, OFFICIAL)) for s in INPUTS
    ),
    # parameter templates (input.template, NUMPROCS filled in at run time):
    # the tree's test/simdev templates; other sizes need the official tarballs.
    "splash2x.barnes": _TREE_THEN_OFFICIAL,
    "splash2x.fmm": _TREE_THEN_OFFICIAL,
    "splash2x.water_nsquared": _TREE_THEN_OFFICIAL,
    "splash2x.water_spatial": _TREE_THEN_OFFICIAL,
}  # type: Dict[str, Dict[str, str]]
# The tarball a TREE_FILES input takes its files from.
TREE_FILES_TARBALL = {("splash2x.volrend", "simsmall"): "input_test.tar"}


def input_source(prog: Program, input_set: str) -> str:
    """Where our build takes PROG's INPUT_SET from (one of SOURCES)."""
    _check(input_set, 1)
    return _INPUT_SOURCES.get(prog.package, {}).get(input_set, NO_RECIPE)


def available(prog: Program, input_set: str, official_inputs: bool = False) -> bool:
    """Whether our build can provide PROG at INPUT_SET: from the tree alone, or
    (official_inputs) also with PARSEC's official input tarballs at hand."""
    src = input_source(prog, input_set)
    return src in (GENERATED, ARGS, TREE, TREE_FILES) or (official_inputs and src == OFFICIAL)


def available_programs(input_set: str, official_inputs: bool = False) -> List[Program]:
    """Table 2's programs our build can provide at INPUT_SET, in Table 2 order."""
    return [p for p in PROGRAMS if available(p, input_set, official_inputs)]


# Programs that need at least one work unit per thread: swaptions runs at most
# as many threads as the input has swaptions (-ns in PARSEC's runconf files).
_MAX_THREADS = {
    "parsec.swaptions": {
        "test": 1,
        "simdev": 3,
        "simsmall": 16,
        "simmedium": 32,
        "simlarge": 64,
        "native": 128,
    },
}  # type: Dict[str, Dict[str, int]]


def max_threads(prog: Program, input_set: str) -> Optional[int]:
    """The most threads PROG accepts at INPUT_SET (None: no such limit known)."""
    return _MAX_THREADS.get(prog.package, {}).get(input_set)


def buildable(prog: Program) -> bool:
    """Whether our build has a recipe for PROG at all."""
    return prog.package in _INPUT_SOURCES


# ------------------------------------------------ our installed PARSEC build


class InstalledRun(NamedTuple):
    argv: List[str]  # program and arguments (through /bin/sh when it reads stdin)
    cwd: str  # a fresh per-program work directory
    links: Dict[str, str]  # name in cwd -> input file (symlinked before the run)
    generate: Dict[str, str]  # name in cwd -> content (templates filled in)
    outputs: List[str]  # files the program writes in cwd (collected after the run)


def load_manifest(root: str = NUMA_LB_PARSEC_ROOT) -> Dict:
    """ROOT/parsec.json, written by workloads/parsec/build_parsec.py."""
    import json  # noqa: PLC0415 - only this path needs it

    path = os.path.join(root, MANIFEST_NAME)
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise FileNotFoundError(
            f"no PARSEC build at {root} ({e.strerror}): build the image with PARSEC_SRC "
            "set (workloads/parsec/build_parsec.py)"
        ) from None


def _fill(text: str, threads: int) -> str:
    return text.replace("{threads}", str(threads))


def installed_command(
    prog: Program,
    input_set: str,
    threads: int,
    workdir: str,
    root: str = NUMA_LB_PARSEC_ROOT,
    manifest: Optional[Dict] = None,
) -> InstalledRun:
    """How to run PROG from our installed build: the manifest's argv with the
    thread count filled in, run in WORKDIR where the input files are linked and
    parameter templates written (prepare_workdir)."""
    _check(input_set, threads)
    man = load_manifest(root) if manifest is None else manifest
    entry = man.get("programs", {}).get(prog.package)
    if entry is None:
        raise ValueError(
            "{} is not in the PARSEC build at {} (it has: {})".format(
                prog.package, root, ", ".join(sorted(man.get("programs", {}))) or "nothing"
            )
        )
    inp = entry["inputs"].get(input_set)
    if inp is None:
        raise ValueError(
            "{} has no {} input in the PARSEC build at {} (it has: {})".format(
                prog.package, input_set, root, ", ".join(sorted(entry["inputs"]))
            )
        )
    argv = [os.path.join(root, entry["exe"])] + [_fill(a, threads) for a in inp["args"]]
    links = {}  # type: Dict[str, str]
    if inp.get("dir"):
        d = os.path.join(root, inp["dir"])
        for name in inp.get("files", []):
            links[name] = os.path.join(d, name)
    generate = {}  # type: Dict[str, str]
    for g in inp.get("generate", []):
        text = g["text"]
        for key, value in sorted(g.get("subst", {}).items()):
            text = text.replace(key, _fill(value, threads))
        generate[_fill(g["name"], threads)] = text
    if inp.get("stdin"):
        # sh -c 'exec "$@" <"$0"' STDIN PROG ARGS...: the program itself reads it
        argv = ["/bin/sh", "-c", 'exec "$@" <"$0"', _fill(inp["stdin"], threads)] + argv
    return InstalledRun(
        argv=argv, cwd=workdir, links=links, generate=generate,
        outputs=list(inp.get("outputs", [])),
    )  # fmt: skip


def prepare_workdir(run: InstalledRun) -> None:
    """Create RUN's work directory: input files symlinked, templates written."""
    os.makedirs(run.cwd, exist_ok=True)
    for name, target in sorted(run.links.items()):
        dst = os.path.join(run.cwd, name)
        if os.path.lexists(dst):
            os.unlink(dst)
        os.symlink(target, dst)
    for name, text in sorted(run.generate.items()):
        with open(os.path.join(run.cwd, name), "w") as f:
            f.write(text)
