#!/usr/bin/env python3
"""Fetch, patch, configure and build the study's Linux 6.1 kernel.

    kernel-patches/kbuild.py build [--variant V]                vmlinux + bzImage
    kernel-patches/kbuild.py kunit                              KUnit suites under UML
    kernel-patches/kbuild.py checkpatch                         checkpatch --strict
    kernel-patches/kbuild.py bisect [--from N] [--to M]          build after every patch
    kernel-patches/kbuild.py path [--variant ...]               print the artifact dir

Everything heavy lives under the cache root ($NUMA_LB_CACHE, default
~/.cache/numa-lb-study/kernel):

    src/<version>/          pristine source, a git repo with one commit
    tree/<version>/         the working tree: pristine + series checked out
    obj/<variant>/          kbuild O= directory, reused between builds
    artifacts/<build id>/   vmlinux, bzImage, config, build.json

Variants (VARIANTS): `release` (the series, kMLB on), `debug` (release +
lockdep, KASAN, DEBUG_VM), `nokmlb` (the series with per-node RSS tracking
compiled out: only excl and excl_base select) and `stock` (the same source and
config fragments with none of the study's patches: the paper's unmodified
kernel; it applies only the platform patches listed in `platform`, which make
the guest behave on gem5 as on hardware and change no scheduling decision).

The build id hashes the source version, the series and the config fragments,
so an artifact never goes stale; the object directory and ccache make a
rebuild after a patch change touch only what changed.

Output: stdout carries only the answer (the artifact dir; checkpatch's
verdicts), so run_all.py can read it; progress goes to stderr: a line per
phase with what is built and how long it usually takes, then a line every
minute (NUMA_LB_PROGRESS_S) with make's step count and last target. make's
full output goes to logs/build-<variant>.log under the cache root
(`build --verbose` echoes it to stderr as well).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from analysis.progress import Heartbeat, run_condensed  # noqa: E402 - stdlib only

SERIES_FILE = HERE / "series"
PLATFORM_FILE = HERE / "platform"  # the series' patches that `stock` applies too
CONFIG_DIR = HERE / "config"
DEBIAN_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")


@dataclass(frozen=True)
class Variant:
    fragments: tuple[str, ...]  # config fragments, in merge order
    patched: bool  # False: pristine source + the platform patches only


VARIANTS = {
    "release": Variant(("base.config",), patched=True),
    "debug": Variant(("base.config", "debug.config"), patched=True),
    "nokmlb": Variant(("base.config", "nokmlb.config"), patched=True),
    "stock": Variant(("base.config", "stock.config"), patched=False),
}
KUNIT_CONFIG = CONFIG_DIR / "kunit.config"
# Cold builds (empty object dir and ccache) on the project's 2-core build
# machine, 2026-11-22, gem5 compiling at nice 19 beside them (README).
COLD_BUILD = "a cold build took 494 s (release), 489 s (debug) on the 2-core build machine"
TYPICAL_BUILD = (
    f"{COLD_BUILD} and up to ~20 min beside other work; a rebuild reusing the object "
    "directory and ccache takes seconds to minutes"
)
GIT_ID = ["-c", "user.name=numa-lb-study", "-c", "user.email=numa-lb-study@localhost"]


class BuildError(RuntimeError):
    pass


def cache_root() -> Path:
    env = os.environ.get("NUMA_LB_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "numa-lb-study"
    return base / "kernel"


def log(msg: str) -> None:
    # stderr: stdout carries only the answer (the artifact dir), read by run_all.py
    print(f"kbuild: {msg}", file=sys.stderr, flush=True)


@contextmanager
def locked(name: str) -> Iterator[None]:
    """Hold ``<cache>/locks/<name>.lock`` (flock): two invocations on one cache
    (a test tier and a user, two sweeps) must not extract, check out or build
    into the same directories at once. The kernel drops the lock if we die."""
    path = cache_root() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        if os.environ.get("NUMA_LB_LOCK_VERBOSE"):
            log(f"waiting for {path.name}")
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def publish(tmp: Path, final: Path) -> None:
    """Make a finished directory visible under its final name in one rename."""
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)


def run(
    cmd: list[str], cwd: Path | None = None, quiet: bool = False, env: dict[str, str] | None = None
) -> str:
    """Run a command without a shell; raise with its output tail on failure."""
    proc = subprocess.run(cmd, cwd=cwd, text=True, capture_output=True, env=env)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise BuildError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{tail}")
    if not quiet and proc.stdout.strip():
        print(proc.stdout, end="", file=sys.stderr, flush=True)
    return proc.stdout


def stream(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    """Run a long command, echoing its output to stderr as it comes (--verbose)."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        print(line, end="", file=sys.stderr, flush=True)
        tail = (tail + [line])[-60:]
    if proc.wait() != 0:
        raise BuildError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{''.join(tail)}")


VERBOSE = False  # build --verbose: make's whole output on stderr too


def make_with_progress(cmd: list[str], doing: str, log_name: str, typical: str) -> None:
    """Run make: its output to <cache>/logs/<log_name>, a progress line every
    minute to stderr (--verbose: the whole output to stderr instead)."""
    if VERBOSE:
        stream(cmd, env=make_env())
        return
    logf = cache_root() / "logs" / log_name
    log(f"{doing}: make's output goes to {logf}")
    rc, tail = run_condensed(cmd, "kbuild", doing, logf, typical, env=make_env())
    if rc != 0:
        raise BuildError(f"{' '.join(cmd)} failed ({rc}); full output {logf}:\n{tail}")


def _names(listing: Path) -> list[str]:
    return [
        ln.strip()
        for ln in listing.read_text().splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]


def series() -> list[Path]:
    return [HERE / n for n in _names(SERIES_FILE)]


def platform_patches() -> list[Path]:
    """The series' patches that correct the simulated platform, not the
    scheduler (`platform`): every variant applies them, `stock` included, so
    the unmodified kernel runs on the same machine as the patched one."""
    names = _names(PLATFORM_FILE)
    unknown = sorted(set(names) - set(_names(SERIES_FILE)))
    if unknown:
        raise BuildError(f"{PLATFORM_FILE.name} lists patches not in the series: {unknown}")
    return [p for p in series() if p.name in names]


def sha256_files(paths: list[Path], extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class Source:
    tarball: Path
    version: str  # e.g. 6.1.192
    origin: str  # e.g. "Debian linux-source-6.1 6.1.192-2"

    @property
    def pristine(self) -> Path:
        return cache_root() / "src" / self.version

    @property
    def tree(self) -> Path:
        return cache_root() / "tree" / self.version


def find_source(tarball: str | None) -> Source:
    path = Path(tarball) if tarball else DEBIAN_TARBALL
    if not path.exists():
        raise BuildError(
            f"kernel source {path} not found: install Debian's linux-source-6.1 "
            "(.ci/setup does) or pass --tarball linux-6.1.x.tar.xz"
        )
    origin = f"tarball {path.name}"
    if path == DEBIAN_TARBALL:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "linux-source-6.1"],
            text=True,
            capture_output=True,
        )
        if out.returncode == 0:
            origin = f"Debian linux-source-6.1 {out.stdout.strip()}"
    # The version is read from the tarball's Makefile once it is extracted;
    # key the extraction directory by the tarball's identity meanwhile.
    st = path.stat()
    tag = hashlib.sha256(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
    return Source(tarball=path, version=tag[:12], origin=origin)


def kernel_version(tree: Path) -> str:
    return makefile_version((tree / "Makefile").read_text())


def makefile_version(text: str) -> str:
    """6.1.192 from the VERSION/PATCHLEVEL/SUBLEVEL/EXTRAVERSION lines of Linux's Makefile."""
    fields = {}
    for key in ("VERSION", "PATCHLEVEL", "SUBLEVEL", "EXTRAVERSION"):
        m = re.search(rf"^{key}\s*=\s*(\S*)\s*$", text, re.M)
        fields[key] = m.group(1) if m else ""
    return "{VERSION}.{PATCHLEVEL}.{SUBLEVEL}{EXTRAVERSION}".format(**fields)


def source_version(src: Source) -> str:
    """The kernel version of a source without extracting it.

    `path` must write nothing (a sweep's --dry-run calls it; extracting is 1.2 GB):
    the version comes from the extracted tree when there is one, else from the
    tarball's top-level Makefile, streamed out (tar stops at the first match).
    """
    done = src.pristine / ".extracted"
    if (src.pristine / ".git").exists() and done.exists():
        return done.read_text().strip()
    cmd = ["tar", "-xOf", str(src.tarball), "--wildcards", "--no-wildcards-match-slash"]
    r = subprocess.run(cmd + ["--occurrence=1", "*/Makefile"], capture_output=True, check=False)
    text = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0 or not re.search(r"^VERSION\s*=", text, re.M):
        raise BuildError(
            f"cannot read the kernel version from {src.tarball} without extracting it "
            f"(tar exit {r.returncode}); `kbuild.py build` extracts and builds it"
        )
    return makefile_version(text)


def ensure_pristine(src: Source) -> Path:
    """Extract the tarball once into a git repo with a single commit.

    The extraction happens under a lock in a private temporary directory that is
    renamed into place when complete, so a concurrent or interrupted extraction
    is never seen (or deleted) half-done by another invocation.
    """
    dest = src.pristine
    if (dest / ".git").exists() and (dest / ".extracted").exists():
        return dest
    with locked(f"src-{src.version}"):
        if (dest / ".git").exists() and (dest / ".extracted").exists():
            return dest  # another invocation finished it while we waited
        for stale in dest.parent.glob(f"{dest.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a killed extraction
        tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
        tmp.mkdir(parents=True)
        log(f"extracting {src.tarball} into a git repository (once per source version)")
        with Heartbeat("kbuild", f"extracting and committing {src.tarball.name}", "once"):
            run(["tar", "-xf", str(src.tarball), "-C", str(tmp), "--strip-components=1"])
            # Debian's top-level .gitignore ignores everything ("/*"): git must see the tree.
            (tmp / ".gitignore").unlink(missing_ok=True)
            run(["git", "init", "-q"], cwd=tmp)
            run(["git", "add", "-A"], cwd=tmp, quiet=True)
            run(["git", *GIT_ID, "commit", "-qm", f"pristine {src.origin}"], cwd=tmp)
        (tmp / ".extracted").write_text(kernel_version(tmp) + "\n")
        publish(tmp, dest)
    return dest


def prepare_tree(src: Source, patches: list[Path]) -> Path:
    """Check out pristine + @patches in the working tree.

    The patched state is built as commits in a scratch index (git apply
    --cached), without touching the work tree; checking it out then rewrites
    only the files whose content differs from what is there, so the reused
    object directory rebuilds only what a series change really changed.
    """
    pristine = ensure_pristine(src)
    tree = src.tree
    if not (tree / ".git").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        log("cloning working tree (once)")
        run(["git", "clone", "-q", str(pristine), str(tree)])
    env = dict(os.environ, GIT_INDEX_FILE=str(tree / ".git" / "numa-lb-series-index"))
    run(["git", "read-tree", "origin/HEAD"], cwd=tree, env=env)
    head = run(["git", "rev-parse", "origin/HEAD"], cwd=tree, quiet=True).strip()
    for p in patches:
        try:
            run(["git", "apply", "--cached", str(p)], cwd=tree, env=env, quiet=True)
        except BuildError as e:
            raise BuildError(f"patch {p.name} does not apply: {e}") from None
        tree_id = run(["git", "write-tree"], cwd=tree, env=env, quiet=True).strip()
        head = run(
            ["git", *GIT_ID, "commit-tree", tree_id, "-p", head, "-m", p.name],
            cwd=tree,
            quiet=True,
        ).strip()
    run(["git", "checkout", "-q", "-f", "--detach", head], cwd=tree)
    run(["git", "clean", "-qfdx"], cwd=tree)
    log(f"tree at {tree}: {len(patches)} patch(es) applied")
    return tree


def config_fragments(variant: str) -> list[Path]:
    if variant not in VARIANTS:
        raise BuildError(f"unknown variant {variant!r}; allowed: {', '.join(VARIANTS)}")
    return [CONFIG_DIR / f for f in VARIANTS[variant].fragments]


def variant_patches(variant: str) -> list[Path]:
    """The patches a variant applies: the series, or for `stock` the
    platform patches only."""
    config_fragments(variant)  # validates the name
    return series() if VARIANTS[variant].patched else platform_patches()


def fragment_symbols(fragments: list[Path]) -> dict[str, str]:
    want: dict[str, str] = {}
    for frag in fragments:
        for ln in frag.read_text().splitlines():
            ln = ln.strip()
            if not ln or ln.startswith("#"):
                continue
            key, _, val = ln.partition("=")
            want[key] = val
    return want


def check_config(config: Path, want: dict[str, str], partial_series: bool = False) -> None:
    """Fail if kconfig silently dropped a symbol the fragments ask for.

    With @partial_series (bisect builds) a symbol that no Kconfig of the tree
    defines yet is not an error: a later patch adds it.
    """
    have: dict[str, str] = {}
    for ln in config.read_text().splitlines():
        m = re.match(r"^(CONFIG_\w+)=(.*)$", ln)
        if m:
            have[m.group(1)] = m.group(2)
        m = re.match(r"^# (CONFIG_\w+) is not set$", ln)
        if m:
            have[m.group(1)] = "n"
    bad = []
    for key, val in want.items():
        if partial_series and key not in have:
            continue
        got = have.get(key, "n")
        if val.strip('"') != got.strip('"'):
            bad.append(f"{key}: want {val}, got {got}")
    if bad:
        raise BuildError("config fragment not honoured:\n  " + "\n  ".join(bad))


def make_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CCACHE_DIR", str(cache_root().parent / "ccache"))
    env.setdefault("KBUILD_BUILD_USER", "numa-lb-study")
    env.setdefault("KBUILD_BUILD_HOST", "build")
    return env


def make_cmd(tree: Path, obj: Path, *targets: str) -> list[str]:
    cc = "ccache gcc" if shutil.which("ccache") else "gcc"
    jobs = str(os.cpu_count() or 1)
    return [
        "make",
        "-C",
        str(tree),
        f"O={obj}",
        "ARCH=x86_64",
        f"CC={cc}",
        f"-j{jobs}",
        *targets,
    ]


def configure(tree: Path, obj: Path, fragments: list[Path], partial_series: bool = False) -> None:
    obj.mkdir(parents=True, exist_ok=True)
    scratch = obj.parent / (obj.name + ".cfg")
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir()
    env = make_env()
    run(make_cmd(tree, scratch, "tinyconfig"), quiet=True)
    run(
        [
            str(tree / "scripts/kconfig/merge_config.sh"),
            "-m",
            "-O",
            str(scratch),
            str(scratch / ".config"),
            *map(str, fragments),
        ],
        cwd=tree,
        quiet=True,
    )
    run(make_cmd(tree, scratch, "olddefconfig"), quiet=True)
    check_config(scratch / ".config", fragment_symbols(fragments), partial_series)
    new = (scratch / ".config").read_text()
    old = (obj / ".config").read_text() if (obj / ".config").exists() else None
    if new != old:  # keep mtimes when nothing changed: no spurious rebuild
        (obj / ".config").write_text(new)
    shutil.rmtree(scratch)
    del env


def build_id(src_version: str, patches: list[Path], fragments: list[Path], variant: str) -> str:
    h = sha256_files(patches + fragments, extra=f"{src_version}\0{variant}")
    return h[:16]


def artifact_dir(bid: str) -> Path:
    return cache_root() / "artifacts" / bid


def build(variant: str, tarball: str | None, upto: int | None = None) -> Path:
    src = find_source(tarball)
    patches = variant_patches(variant)
    patches = patches[:upto] if upto is not None else patches
    fragments = config_fragments(variant)
    pristine = ensure_pristine(src)
    version = kernel_version(pristine)
    bid = build_id(version, patches, fragments, variant)
    out = artifact_dir(bid)
    if (out / "build.json").exists() and upto is None:
        log(f"up to date: {out}")
        return out
    # The working tree and object directories are shared by every variant and
    # series state: one checkout-and-build at a time.
    with locked(f"tree-{src.version}"):
        if (out / "build.json").exists() and upto is None:
            log(f"up to date: {out} (built while we waited)")
            return out
        return _build_locked(src, patches, fragments, variant, version, bid, out, upto)


def _build_locked(
    src: Source,
    patches: list[Path],
    fragments: list[Path],
    variant: str,
    version: str,
    bid: str,
    out: Path,
    upto: int | None,
) -> Path:
    tree = prepare_tree(src, patches)
    obj = cache_root() / "obj" / variant
    log(f"configuring {variant} ({', '.join(f.name for f in fragments)})")
    configure(tree, obj, fragments, partial_series=upto is not None)
    log(
        f"building Linux {version} + {len(patches)} patch(es), variant {variant} "
        f"(vmlinux + bzImage): {TYPICAL_BUILD}"
    )
    t0 = time.monotonic()
    make_with_progress(
        make_cmd(tree, obj, "vmlinux", "bzImage"),
        f"building kernel variant {variant}",
        f"build-{variant}.log",
        COLD_BUILD,
    )
    seconds = time.monotonic() - t0
    if upto is not None:
        return obj
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    shutil.copy2(obj / "vmlinux", tmp / "vmlinux")
    shutil.copy2(obj / "arch/x86/boot/bzImage", tmp / "bzImage")
    shutil.copy2(obj / ".config", tmp / "config")
    meta = {
        "build_id": bid,
        "variant": variant,
        "kernel_version": version,
        "source": src.origin,
        "series": [p.name for p in patches],
        "series_sha256": sha256_files(patches),
        "config_sha256": hashlib.sha256((obj / ".config").read_bytes()).hexdigest(),
        "build_seconds": round(seconds, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gcc": run(["gcc", "--version"], quiet=True).splitlines()[0],
    }
    (tmp / "build.json").write_text(json.dumps(meta, indent=2) + "\n")
    publish(tmp, out)
    log(f"built in {seconds:.0f} s: {out}")
    return out


def kunit(tarball: str | None, extra: list[str]) -> int:
    src = find_source(tarball)
    ensure_pristine(src)
    with locked(f"tree-{src.version}"):
        return _kunit_locked(src, extra)


def _kunit_locked(src: Source, extra: list[str]) -> int:
    tree = prepare_tree(src, series())
    bdir = cache_root() / "obj" / "kunit-um"
    cmd = [
        sys.executable,
        str(tree / "tools/testing/kunit/kunit.py"),
        "run",
        f"--build_dir={bdir}",
        f"--kunitconfig={KUNIT_CONFIG}",
        f"--jobs={os.cpu_count() or 1}",
        "--timeout=300",
        *extra,
    ]
    env = make_env()
    env["CROSS_COMPILE"] = ""
    log(
        "running KUnit under UML (builds a UML kernel, then the suites; 244 s on the 2-core "
        "build machine): " + " ".join(cmd[1:])
    )
    return subprocess.run(cmd, cwd=tree, env=env).returncode


def checkpatch(tarball: str | None) -> int:
    src = find_source(tarball)
    pristine = ensure_pristine(src)
    failed = 0
    for p in series():
        proc = subprocess.run(
            [
                str(pristine / "scripts/checkpatch.pl"),
                "--strict",
                "--no-tree",
                "--terse",
                "--show-types",
                str(p),
            ],
            text=True,
            capture_output=True,
        )
        verdict = "ok" if proc.returncode == 0 else "FAIL"
        print(f"checkpatch --strict {p.name}: {verdict}")
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr)
            failed += 1
    return 1 if failed else 0


def bisect(variant: str, tarball: str | None, first: int = 1, last: int | None = None) -> int:
    """Build after each patch: every patch of the series must build on its own.

    The builds are incremental, one after the other in the variant's object
    directory (the tree is checked out at pristine + patches 1..i for build
    i).  @first and @last (1-based, inclusive) limit the patches built after;
    the whole series is built at the end, as `build` would.  Returns 1 and
    names the first patch whose tree does not build.
    """
    if not VARIANTS[variant].patched:
        raise BuildError(f"variant {variant} applies only the platform patches: nothing to bisect")
    patches = series()
    n = len(patches)
    last = n if last is None else last
    if not 1 <= first <= last <= n:
        raise BuildError(f"bisect range {first}..{last} is not within 1..{n}")
    t0 = time.monotonic()
    for i in range(first, last + 1):
        log(f"bisect build {i}/{n}: {patches[i - 1].name}")
        t1 = time.monotonic()
        try:
            build(variant, tarball, upto=i)
        except BuildError as e:
            print(f"kbuild: error: {e}", file=sys.stderr)
            log(f"bisect: FIRST FAILING PATCH {i}/{n}: {patches[i - 1].name}")
            return 1
        log(f"bisect build {i}/{n} ok in {time.monotonic() - t1:.0f} s")
    build(variant, tarball)
    log(
        f"bisect: patches {first}..{last} of {n} each build ({variant} config), "
        f"{time.monotonic() - t0:.0f} s"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("command", choices=["build", "kunit", "checkpatch", "bisect", "path"])
    ap.add_argument("--variant", default="release", choices=sorted(VARIANTS))
    ap.add_argument("--tarball", help="a kernel.org linux-6.1.x tarball instead of Debian's")
    ap.add_argument(
        "--from", dest="first", type=int, default=1, help="bisect: first patch (1-based)"
    )
    ap.add_argument("--to", dest="last", type=int, help="bisect: last patch (default: the last)")
    ap.add_argument("kunit_args", nargs="*", help="extra kunit.py arguments (after --)")
    ap.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="build/bisect: echo make's whole output to stderr (default: a progress line "
        "a minute, the output in <cache>/kernel/logs/build-<variant>.log)",
    )
    args = ap.parse_args(argv)
    global VERBOSE
    VERBOSE = args.verbose
    try:
        if args.command == "build":
            print(build(args.variant, args.tarball))
            return 0
        if args.command == "path":
            src = find_source(args.tarball)
            version = source_version(src)  # read only: `path` never extracts
            bid = build_id(
                version, variant_patches(args.variant), config_fragments(args.variant), args.variant
            )
            print(artifact_dir(bid))
            return 0
        if args.command == "kunit":
            return kunit(args.tarball, args.kunit_args)
        if args.command == "checkpatch":
            return checkpatch(args.tarball)
        return bisect(args.variant, args.tarball, args.first, args.last)
    except BuildError as e:
        print(f"kbuild: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
