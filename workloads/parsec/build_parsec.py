#!/usr/bin/env python3
"""Build PARSEC 3.0 programs for the study from a PARSEC tree given by path.

    workloads/parsec/build_parsec.py build [--src DIR] [--inputs DIR] [--sizes LIST] [-j N]
    workloads/parsec/build_parsec.py key|path|info   (same selection options)
    workloads/parsec/build_parsec.py run PROGRAM [--input simsmall] [--threads 4] [--workdir D]
    workloads/parsec/build_parsec.py check [PROGRAM...] [--input simsmall] [--threads 4]

The tree comes from --src or $PARSEC_SRC (a PARSEC 3.0 checkout, e.g. of the
public mirror bamos/parsec-benchmark); PARSEC's official input tarballs, for
the inputs the tree lacks, from --inputs or $PARSEC_INPUTS. Nothing of
PARSEC is in this repository: this tool compiles the tree's own sources with
its own Makefiles (parsec_recipes.py), pthreads versions, linked statically,
with PARSEC's hooks library wired to our m5ops (hooks_m5.c: the ROI becomes
gem5 work items of id parsec_catalog.PARSEC_WORK_ID, no-ops outside gem5),
and prepares the inputs (parsec_inputs.py).

Output: <cache>/parsec/build/<build id>/ with install/ (bin/<program>,
inputs/<program>/<size>/, parsec.json: the manifest the mix runner's
"numa-lb" launcher reads) and build.json. The build id hashes the tree's
content (the parts used), this tool (every file it reads of ours), the
compiler and linker versions, the sizes and the official tarballs used.
Builds are serialised per id with flock and published by an atomic rename.
<cache> is $NUMA_LB_CACHE or ~/.cache/numa-lb-study.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(WORKLOADS))
import parsec_catalog as cat  # noqa: E402
import parsec_checks  # noqa: E402
import parsec_inputs as pin  # noqa: E402
import parsec_recipes as prc  # noqa: E402
import parsec_tree as pt  # noqa: E402
from parsec_native import NativeRun, manifest, run_native  # noqa: E402, F401 - re-exported

M5OPS = WORKLOADS / "m5ops"
HOOKS_SHIM = HERE / "hooks_m5.c"
DEFAULT_SIZES = ("test", "simdev", "simsmall", "simmedium", "simlarge")  # native: ask for it
SCHEMA = 1
# PARSEC's four hook entry points, renamed in its hooks.c (hooks_m5.c wraps them)
HOOK_NAMES = (
    "__parsec_bench_begin",
    "__parsec_bench_end",
    "__parsec_roi_begin",
    "__parsec_roi_end",
)
SHIM_MARK = b"numa-lb m5 work items"  # a string of hooks_m5.c every binary must carry


class BuildError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"build_parsec: {msg}", file=sys.stderr, flush=True)


def cache_base() -> Path:
    env = os.environ.get("NUMA_LB_CACHE")
    return (Path(env) if env else Path.home() / ".cache" / "numa-lb-study") / "parsec" / "build"


@contextmanager
def locked(name: str) -> Iterator[None]:
    path = cache_base() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def publish(tmp: Path, final: Path) -> None:
    """Make a finished build visible under its final name in one rename."""
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def run(
    cmd: list[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    logf: Path | None = None,
) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True)
    out = proc.stdout + proc.stderr
    if logf is not None:
        with open(logf, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{out}\n")
    if proc.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed ({proc.returncode}) in {cwd}:\n{out[-3000:]}")
    return proc.stdout


def first_line(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, text=True, capture_output=True)
    except OSError:
        return "missing"
    return ((proc.stdout or proc.stderr).strip().splitlines() or ["?"])[0]


# ------------------------------------------------------------------ selection


@dataclass
class Selection:
    """What a build is made of: the tree, the official inputs, sizes, programs."""

    tree: Path
    inputs_dir: Path | None
    sizes: tuple[str, ...]
    programs: tuple[str, ...]  # packages

    @classmethod
    def make(
        cls,
        src: str | None = None,
        inputs: str | None = None,
        sizes: list[str] | None = None,
        programs: list[str] | None = None,
    ) -> Selection:
        src = src or os.environ.get("PARSEC_SRC")
        if not src:
            raise BuildError("no PARSEC tree: pass --src DIR or set PARSEC_SRC")
        tree = pt.find_tree(src)
        inputs = inputs if inputs is not None else os.environ.get("PARSEC_INPUTS")
        inputs_dir = Path(inputs).expanduser().resolve() if inputs else None
        if inputs_dir is not None and not inputs_dir.is_dir():
            raise BuildError(f"PARSEC_INPUTS {inputs_dir} is not a directory")
        sizes_t = tuple(sizes or DEFAULT_SIZES)
        for s in sizes_t:
            if s not in cat.INPUTS:
                raise BuildError(f"unknown input size {s!r} ({', '.join(cat.INPUTS)})")
        if programs:
            try:
                progs = tuple(cat.lookup(p).package for p in programs)
            except KeyError as e:
                raise BuildError(e.args[0]) from None
            for p in progs:
                if p not in prc.RECIPES:
                    raise BuildError(f"{p}: no build recipe (parsec_catalog.buildable)")
        else:
            # every program with a recipe whose sources the tree has
            progs = tuple(
                p.package
                for p in cat.PROGRAMS
                if p.package in prc.RECIPES and (tree / p.pkg_dir / "src").is_dir()
            )
        return cls(tree, inputs_dir, sizes_t, progs)

    def official(self, package: str, size: str) -> Path | None:
        prog = cat.lookup(package)
        if cat.input_source(prog, size) != cat.OFFICIAL or self.inputs_dir is None:
            return None
        return pt.official_tarball(self.inputs_dir, prog.pkg_dir, size)


# Our modules whose content shapes a build (parsec_native.py runs a build and
# parsec_checks.py reads its results: neither shapes it).
BUILD_MODULES = ("build_parsec.py", "parsec_tree.py", "parsec_recipes.py", "parsec_inputs.py")


def tool_files() -> dict[str, Path]:
    """Every file of ours a build depends on."""
    files = {f"workloads/parsec/{n}": HERE / n for n in BUILD_MODULES}
    files["workloads/parsec/hooks_m5.c"] = HOOKS_SHIM
    files["workloads/m5ops/m5ops.c"] = M5OPS / "m5ops.c"
    files["workloads/m5ops/m5ops.h"] = M5OPS / "m5ops.h"
    return files


def catalog_facts(packages: tuple[str, ...]) -> dict[str, Any]:
    """What the build takes from parsec_catalog.py (not the whole file: editing
    the catalog's mixes or docs must not rebuild PARSEC)."""
    return {
        "work_id": cat.PARSEC_WORK_ID,
        "config": cat.NUMA_LB_PARSEC_CONFIG,
        "manifest": cat.MANIFEST_NAME,
        "programs": {
            p: {
                "pkg_dir": cat.lookup(p).pkg_dir,
                "sources": {s: cat.input_source(cat.lookup(p), s) for s in cat.INPUTS},
            }
            for p in packages
        },
        "tree_files": sorted(f"{p} {s} {t}" for (p, s), t in cat.TREE_FILES_TARBALL.items()),
    }


def compilers() -> dict[str, str]:
    return {
        "gcc": first_line(["gcc", "--version"]),
        "g++": first_line(["g++", "--version"]),
        "m4": first_line(["m4", "--version"]),
        "ld": first_line(["ld", "--version"]),
        "libc": first_line(["ldd", "--version"]),
    }


def build_identity(sel: Selection) -> dict[str, Any]:
    pkg_dirs = [cat.lookup(p).pkg_dir for p in sel.programs]
    official = {}
    for p in sel.programs:
        for s in sel.sizes:
            tar = sel.official(p, s)
            if tar is not None:
                st = tar.stat()  # content is recorded in build.json; the id uses the stat
                official[f"{p}/{s}"] = f"{tar.name} {st.st_size} {st.st_mtime_ns}"
    return {
        "schema": SCHEMA,
        "tree": pt.identity(sel.tree, pkg_dirs),
        "tool": {n: pt.sha256_file(p) for n, p in sorted(tool_files().items())},
        "catalog": catalog_facts(sel.programs),
        "compilers": compilers(),
        "sizes": list(sel.sizes),
        "programs": list(sel.programs),
        "official_inputs": official,
    }


def build_id(sel: Selection, ident: dict[str, Any] | None = None) -> str:
    ident = build_identity(sel) if ident is None else ident
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def build_dir(bid: str) -> Path:
    return cache_base() / bid


# ------------------------------------------------------------------ building


def is_static(exe: Path) -> bool:
    """An ELF executable without a PT_INTERP program header (no dynamic loader)."""
    import struct  # noqa: PLC0415

    with open(exe, "rb") as f:
        hdr = f.read(64)
        if hdr[:4] != b"\x7fELF" or hdr[4] != 2:
            return False
        (phoff,) = struct.unpack_from("<Q", hdr, 32)
        phentsize, phnum = struct.unpack_from("<HH", hdr, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            if struct.unpack("<I", f.read(4))[0] == 3:  # PT_INTERP
                return False
    return True


def build_hooks(tree: Path, work: Path, logf: Path) -> Path:
    """libnlshooks.a: PARSEC's hooks.c (entry points renamed), hooks_m5.c, m5ops."""
    work.mkdir(parents=True, exist_ok=True)
    inc = tree / pt.HOOKS_SRC / "include"
    renames = [f"-D{n}=__nls_orig_{n}" for n in HOOK_NAMES]
    # PARSEC's Makefile.static flags; hooks.c needs _GNU_SOURCE for CPU_SET
    run(
        [
            "gcc",
            "-O2",
            "-Wall",
            "-D_GNU_SOURCE",
            "-D_XOPEN_SOURCE=600",
            *renames,
            "-I",
            str(inc),
            "-c",
            "-o",
            str(work / "hooks.o"),
            str(tree / pt.HOOKS_SRC / "hooks.c"),
        ],
        logf=logf,
    )
    warn = ["-std=gnu11", "-Wall", "-Wextra", "-Wmissing-prototypes", "-Werror"]
    run(
        [
            "gcc",
            "-O2",
            *warn,
            f"-DNLS_PARSEC_WORK_ID={cat.PARSEC_WORK_ID}",
            "-I",
            str(inc),
            "-I",
            str(M5OPS),
            "-c",
            "-o",
            str(work / "hooks_m5.o"),
            str(HOOKS_SHIM),
        ],
        logf=logf,
    )
    run(["gcc", "-O2", *warn, "-c", "-o", str(work / "m5ops.o"), str(M5OPS / "m5ops.c")], logf=logf)
    lib = work / "libnlshooks.a"
    run(
        [
            "ar",
            "rcs",
            str(lib),
            str(work / "hooks.o"),
            str(work / "hooks_m5.o"),
            str(work / "m5ops.o"),
        ],
        logf=logf,
    )
    return lib


def build_program(
    tree: Path, package: str, work: Path, lib: Path, bindir: Path, jobs: int, logf: Path
) -> Path:
    prog, rec = cat.lookup(package), prc.RECIPES[package]
    src = work / prog.name
    shutil.copytree(tree / prog.pkg_dir / "src", src, symlinks=True)
    env = prc.make_env(
        str(tree / pt.HOOKS_SRC / "include"),
        str(lib),
        os.environ.get("PATH", "/usr/bin:/bin"),
        rec.cflags,
    )
    for pre in rec.pre_make:
        run(["make", *pre], cwd=src, env=env, logf=logf)
    cmd = ["make", f"-j{jobs if rec.parallel else 1}"]
    if rec.splash2x:
        cmd.append(f"MACROS={tree / pt.PARMACS_PTHREADS}")
    run(cmd, cwd=src, env=env, logf=logf)
    exe = src / rec.exe
    if not exe.is_file():
        raise BuildError(f"{package}: make produced no {rec.exe} (log: {logf})")
    if not is_static(exe):
        raise BuildError(f"{package}: {exe} is not statically linked")
    if SHIM_MARK not in exe.read_bytes():
        raise BuildError(f"{package}: {exe} is not linked with hooks_m5.c")
    bindir.mkdir(parents=True, exist_ok=True)
    out = bindir / rec.exe
    run(["strip", "--strip-debug", "-o", str(out), str(exe)], logf=logf)
    os.chmod(out, 0o755)
    return out


def check_inputgen(tree: Path, inputgen: Path, work: Path) -> dict[str, bool]:
    """Does inputgen reproduce the tree's own blackscholes option files?"""
    out = {}
    for size in ("test", "simdev"):
        tar = pt.tarball(tree, "pkgs/apps/blackscholes", size)
        if not tar.is_file():
            continue
        ref = work / f"ref-{size}"
        names = pt.extract(tar, ref)
        gen = work / f"gen-{size}"
        same = True
        for n in names:
            pin.generate_blackscholes(inputgen, n, gen)
            same = same and (gen / n).read_bytes() == (ref / n).read_bytes()
        out[size] = same
    return out


def build(sel: Selection, jobs: int = 2, force: bool = False) -> Path:
    """Build (or find in the cache) SEL; return the build directory."""
    ident = build_identity(sel)
    bid = build_id(sel, ident)
    out = build_dir(bid)
    if (out / "build.json").exists() and not force:
        log(f"build {bid}: cached ({out})")
        return out
    with locked(bid):
        if (out / "build.json").exists() and not force:
            log(f"build {bid}: built while we waited ({out})")
            return out
        for stale in out.parent.glob(f"{bid}.tmp-*"):
            shutil.rmtree(stale)  # we hold the lock: nobody else builds this id
        tmp = out.with_name(f"{bid}.tmp-{os.getpid()}")
        tmp.mkdir(parents=True)
        meta = _build_into(sel, ident, bid, tmp, jobs)
        (tmp / "build.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        publish(tmp, out)
    log(f"build {bid}: {len(meta['programs'])} programs in {meta['seconds']['total']:.0f} s: {out}")
    return out


def _build_into(
    sel: Selection, ident: dict[str, Any], bid: str, tmp: Path, jobs: int
) -> dict[str, Any]:
    t0 = time.monotonic()
    work, install, logs = tmp / "work", tmp / "install", tmp / "logs"
    for d in (work, install, logs):
        d.mkdir(parents=True)
    log(
        f"build {bid}: hooks library (PARSEC hooks + hooks_m5.c + m5ops, work id "
        f"{cat.PARSEC_WORK_ID})"
    )
    lib = build_hooks(sel.tree, work / "hooks", logs / "hooks.log")
    inputgen = None
    matches: dict[str, bool] = {}
    if "parsec.blackscholes" in sel.programs:
        inputgen = pin.build_inputgen(sel.tree, work / "inputgen")
        matches = check_inputgen(sel.tree, inputgen, work / "inputgen")
        if not all(matches.values()):
            raise BuildError(
                f"blackscholes inputgen does not reproduce the tree's inputs: {matches}"
            )
    programs: dict[str, Any] = {}
    unavailable: dict[str, dict[str, str]] = {}
    seconds: dict[str, float] = {}
    for package in sel.programs:
        prog = cat.lookup(package)
        entries: dict[str, Any] = {}
        for size in sel.sizes:
            try:
                cmd = pt.run_command(sel.tree, prog.pkg_dir, size)
                entries[size] = pin.stage(
                    sel.tree,
                    prog,
                    size,
                    cmd,
                    install,
                    prc.RECIPES[package].outputs,
                    sel.inputs_dir,
                    inputgen,
                )
            except (pin.InputError, pt.TreeError) as e:
                unavailable.setdefault(package, {})[size] = str(e)
        if not entries:
            log(f"{package}: no input available at {', '.join(sel.sizes)}: not built")
            continue
        t = time.monotonic()
        log(f"{package}: make (inputs: {', '.join(entries)})")
        exe = build_program(
            sel.tree, package, work, lib, install / "bin", jobs, logs / f"{prog.name}.log"
        )
        seconds[package] = round(time.monotonic() - t, 1)
        programs[package] = {
            "exe": exe.relative_to(install).as_posix(),
            "sha256": pt.sha256_file(exe),
            "inputs": entries,
        }
    man = {
        "schema": SCHEMA,
        "kind": "numa-lb-parsec",
        "build_id": bid,
        "config": cat.NUMA_LB_PARSEC_CONFIG,
        "work_id": cat.PARSEC_WORK_ID,
        "programs": programs,
    }
    (install / cat.MANIFEST_NAME).write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(work)
    return {
        "build_id": bid,
        "identity": ident,
        "source": {"path": str(sel.tree), "origin": pt.origin(sel.tree)},
        "official_inputs_dir": str(sel.inputs_dir) if sel.inputs_dir else None,
        "flags": {"opt": prc.OPT, "cxx_extra": prc.CXX_EXTRA, "ldflags": prc.LDFLAGS},
        "inputgen_reproduces_tree": matches,
        "programs": {p: sorted(e["inputs"]) for p, e in programs.items()},
        "unavailable": unavailable,
        "seconds": {"programs": seconds, "total": round(time.monotonic() - t0, 1)},
        "built_unix": int(time.time()),
    }


def find_built(sel: Selection) -> Path | None:
    out = build_dir(build_id(sel))
    return out if (out / "build.json").exists() else None


# ------------------------------------------------------------------ CLI


def _selection(a: argparse.Namespace) -> Selection:
    sizes = a.sizes.split(",") if getattr(a, "sizes", None) else None
    progs = a.programs.split(",") if getattr(a, "programs", None) else None
    return Selection.make(a.src, a.inputs, sizes, progs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    parsers = {}
    for name, hlp in (
        ("build", "build (cached) and print the build directory"),
        ("key", "print the build id"),
        ("path", "print the build directory"),
        ("info", "print build.json"),
        ("run", "run one program natively"),
        ("check", "run programs natively and check their output"),
    ):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("--src", help="PARSEC 3.0 tree (default $PARSEC_SRC)")
        p.add_argument("--inputs", help="official input tarballs (default $PARSEC_INPUTS)")
        p.add_argument("--sizes", help=f"input sizes (default {','.join(DEFAULT_SIZES)})")
        p.add_argument("--programs", help="comma-separated programs (default: all with a recipe)")
        parsers[name] = p
    parsers["build"].add_argument("-j", "--jobs", type=int, default=2)
    parsers["build"].add_argument("--force", action="store_true")
    parsers["run"].add_argument("program")
    parsers["check"].add_argument("only", nargs="*", help="programs (default: all built)")
    for n in ("run", "check"):
        parsers[n].add_argument("--input", default="simsmall")
        parsers[n].add_argument("--threads", type=int, default=4)
        parsers[n].add_argument("--workdir", type=Path)
    a = ap.parse_args(argv)
    try:
        sel = _selection(a)
        if a.cmd == "key":
            print(build_id(sel))
            return 0
        if a.cmd == "build":
            print(build(sel, a.jobs, a.force))
            return 0
        built = find_built(sel)
        if built is None:
            log(f"not built ({build_dir(build_id(sel))}): run build_parsec.py build")
            return 1
        if a.cmd == "path":
            print(built)
        elif a.cmd == "info":
            print((built / "build.json").read_text(), end="")
        elif a.cmd == "run":
            wd = a.workdir or Path(f"/tmp/numa-lb-parsec-run-{os.getpid()}")
            r = run_native(built, cat.lookup(a.program).package, a.input, a.threads, wd)
            sys.stdout.write(r.stdout)
            sys.stderr.write(r.stderr)
            log(
                f"{r.package} {a.input} {a.threads} threads: exit {r.exit_code}, "
                f"{r.seconds:.2f} s, work directory {wd}"
            )
            return r.exit_code
        else:
            return parsec_checks.main_check(built, a.only, a.input, a.threads, a.workdir)
    except (BuildError, pt.TreeError, pin.InputError, ValueError, FileNotFoundError) as e:
        print(f"build_parsec: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
