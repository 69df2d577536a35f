"""Build gem5 v24.0.0.1 (X86, Ruby MOESI_hammer) out of tree into the project's cache.

    ./run_all.py build-gem5 [--src PATH] [--clone-url URL] [--variant fast|opt ...]
                            [--jobs N] [--nice N] [--build-dir DIR] [--configure-only]

(``python3 -m analysis.gem5_build`` takes the same arguments.)

Source (analysis/gem5_source.py): ``--src`` is a gem5 source tree, or a git
repository (bare git dir or clone) holding tag v24.0.0.1; a clone whose HEAD is
the tag's commit and whose tracked files are unmodified is built in place,
otherwise the tag is extracted with ``git archive`` (leaving out
``tests/test-progs``, binaries that gem5 mirrors often lack and the build never
reads) into ``<cache>/gem5/src/v24.0.0.1``. Without ``--src`` that cached tree
is used; without it the tag is fetched from ``--clone-url`` (default gem5's
GitHub repository) where the network allows. A tree that is not gem5 v24.0.0.1
(``src/base/version.cc``; for git, the commit) is refused with exit 2 before
SCons starts.

Build: in ``<cache>/gem5/v24.0.0.1/build/X86_MOESI_hammer`` (``--build-dir``:
any absolute ``.../build/<name>``): gem5's ``scons defconfig <dir>
build_opts/X86`` and ``scons setconfig <dir> RUBY_PROTOCOL_MOESI_HAMMER=y``
(skipped when the configuration already says X86 + MOESI_hammer), then ``scons
<dir>/gem5.<variant> -jN`` under ``nice``, run from the source tree with
``PYTHON_CONFIG`` naming the system Python's ``python3-config`` (the Python gem5
embeds). SIGINT, SIGTERM and SIGHUP are forwarded to SCons as SIGINT, so SCons
saves its signature database and rerunning the same command resumes (exit
130); a SIGKILL loses it. Every SCons invocation is appended to
``gem5.<variant>.builds.jsonl``; after a successful build
``gem5.<variant>.provenance.json`` is written beside the binary (analysis/cache.py
reads it to pick the default binary; the sweep copies it into sweep.json). A
rerun whose binary still has the recorded SHA-256 starts no SCons and rewrites
the provenance.

Exit codes: 0 built (or already built), 1 SCons failed, 2 bad arguments or a
source that is not gem5 v24.0.0.1, 3 missing prerequisite (scons, python3-config,
no source and no network, a build of the same directory already running), 130
interrupted.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from analysis import cache
from analysis.gem5_source import (
    DEFAULT_CLONE_URL,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PREREQ,
    EXIT_USAGE,
    BuildError,
    Source,
    log,
    now_iso,
    read_version,
    resolve_source,
)
from analysis.sweep.provenance import cached_sha256

KCONFIG_WANT = {"USE_X86_ISA": "y", "RUBY": "y", "PROTOCOL": "MOESI_hammer"}
KCONFIG_RECORD = (*KCONFIG_WANT, "RUBY_PROTOCOL_MOESI_HAMMER", "BUILD_ISA", "USE_KVM")
PROTOCOL_OPT = "RUBY_PROTOCOL_MOESI_HAMMER=y"
SCHEMA = 1


# ------------------------------------------------------------------- kconfig
def read_kconfig(build_dir: Path) -> dict[str, str]:
    """gem5.build/config as {KEY: value} (quotes stripped; "is not set" lines left out)."""
    out: dict[str, str] = {}
    try:
        text = (build_dir / "gem5.build" / "config").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip().strip('"')
    return out


def kconfig_ok(build_dir: Path) -> bool:
    cfg = read_kconfig(build_dir)
    return all(cfg.get(k) == v for k, v in KCONFIG_WANT.items())


def check_build_dir(path: str | None) -> Path:
    d = Path(path).expanduser().absolute() if path else cache.gem5_build_dir()
    if d.parent.name != "build" or not d.name:
        raise BuildError(EXIT_USAGE, f"--build-dir {d}: gem5 needs a directory named build/<name>")
    return d


# --------------------------------------------------------------------- scons
@dataclass
class Invocation:
    argv: list[str]
    started: str
    wall_s: float
    cpu_s: float
    exit_code: int
    interrupted: bool


def scons_env(python_config: str) -> dict[str, str]:
    return dict(os.environ, PYTHON_CONFIG=python_config)


def run_scons(argv: list[str], cwd: Path, env: dict[str, str]) -> Invocation:
    """Run SCons in a process group of its own; forward SIGINT/SIGTERM/SIGHUP to
    that group as SIGINT (what a terminal's Ctrl-C does), so SCons stops, saves
    its signature database and exits."""
    log("$ " + " ".join(argv))
    started = now_iso()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, start_new_session=True
    )
    got: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        got.append(signum)
        log(f"signal {signum}: asking SCons to stop (SIGINT); it saves its database")
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, forward) for s in handled}
    try:
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return Invocation(argv, started, round(time.monotonic() - t0, 1), round(cpu, 1), rc, bool(got))


def running_builds(build_dir: Path) -> list[int]:
    """Pids of other scons processes whose command line names @build_dir."""
    pids = []
    me = str(build_dir)
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            args = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = [a.decode(errors="replace") for a in args]
        if any(Path(a).name == "scons" or a.endswith("/scons") for a in text[:3]) and any(
            me in a for a in text
        ):
            pids.append(int(p.name))
    return pids


@contextmanager
def locked(build_dir: Path) -> Iterator[None]:
    path = build_dir.parent / f".{build_dir.name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BuildError(
                EXIT_PREREQ, f"another build-gem5 holds {path}; wait for it to finish"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ---------------------------------------------------------------- provenance
def history_path(binary: Path) -> Path:
    return binary.with_name(binary.name + ".builds.jsonl")


def append_history(binary: Path, inv: Invocation) -> None:
    with open(history_path(binary), "a") as f:
        f.write(json.dumps(asdict(inv)) + "\n")


def read_history(binary: Path) -> list[dict[str, Any]]:
    try:
        lines = history_path(binary).read_text().splitlines()
    except OSError:
        return []
    out = []
    for ln in lines:
        try:
            out.append(json.loads(ln))
        except ValueError:
            continue
    return out


def first_line(argv: list[str]) -> str | None:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (r.stdout or r.stderr).strip().splitlines()
    return lines[0] if r.returncode == 0 and lines else None


def linked_libraries(binary: Path) -> list[str]:
    """The shared libraries ldd lists for @binary (names), [] for a static one."""
    try:
        r = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [ln.split()[0] for ln in r.stdout.splitlines() if ln.strip() and "=>" in ln]


def elf_comments(binary: Path) -> list[str]:
    """The strings of the ELF .comment section (the compilers that built it)."""
    try:
        r = subprocess.run(
            ["readelf", "-p", ".comment", str(binary)], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = re.findall(r"^\s*\[\s*[0-9a-f]+\]\s+(.*\S)\s*$", r.stdout, flags=re.M)
    return list(dict.fromkeys(found))


def binary_facts(binary: Path) -> dict[str, Any]:
    libs = linked_libraries(binary)
    return {
        "binary": str(binary),
        "binary_sha256": cached_sha256(binary),
        "binary_size": binary.stat().st_size,
        "linked_libraries": libs,
        "tcmalloc": any("tcmalloc" in lib for lib in libs),
        "compiler_comment": elf_comments(binary),
    }


def provenance_record(
    binary: Path,
    source: Source,
    build_dir: Path,
    variant: str,
    steps: dict[str, list[str]],
    options: dict[str, Any],
) -> dict[str, Any]:
    cxx = os.environ.get("CXX", "g++")
    hist = read_history(binary)
    return {
        "schema": SCHEMA,
        "written_by": "build-gem5 (analysis/gem5_build.py)",
        "written_at": now_iso(),
        "gem5_version": read_version(source.tree),
        "source": {
            "tree": str(source.tree),
            "commit": source.commit,
            "commit_how": source.commit_how,
            "origin": source.origin,
        },
        "build_dir": str(build_dir),
        "variant": variant,
        "kconfig": {k: v for k, v in read_kconfig(build_dir).items() if k in KCONFIG_RECORD},
        "scons": {"steps": steps, **options},
        "compiler": {"cxx": cxx, "cxx_version": first_line([cxx, "--version"])},
        **binary_facts(binary),
        "host": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "build": {
            "wall_s": round(sum(h.get("wall_s", 0.0) for h in hist), 1),
            "cpu_s": round(sum(h.get("cpu_s", 0.0) for h in hist), 1),
            "invocations": hist,
            "note": "the SCons invocations of build-gem5 for this binary (a build started by "
            "hand is not counted); cpu_s: user+sys of SCons and the compilers",
        },
    }


def write_provenance(binary: Path, rec: dict[str, Any]) -> Path:
    out = cache.provenance_path(binary)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, out)
    return out


def still_built(binary: Path, source: Source) -> dict[str, Any] | None:
    """The old provenance when @binary is the one it records from the same source."""
    if not binary.is_file():
        return None
    try:
        old = json.loads(cache.provenance_path(binary).read_text())
    except (OSError, ValueError):
        return None
    same_src = (old.get("source") or {}).get("tree") == str(source.tree)
    if same_src and old.get("binary_sha256") == cached_sha256(binary):
        return old
    return None


# ---------------------------------------------------------------------- main
def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="build-gem5",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--src",
        help="gem5 source tree, or git dir/clone holding tag v24.0.0.1 "
        "(default: <cache>/gem5/src/v24.0.0.1, else fetched from --clone-url)",
    )
    ap.add_argument("--clone-url", help=f"where to fetch the tag (default {DEFAULT_CLONE_URL})")
    ap.add_argument(
        "--variant",
        action="append",
        choices=cache.GEM5_VARIANTS,
        help="gem5.fast (the sweep binary) and/or gem5.opt (debugging); repeatable; default fast",
    )
    ap.add_argument(
        "--jobs", "-j", type=int, default=os.cpu_count() or 1,
        help="parallel SCons jobs (default: this host's CPU count)",
    )  # fmt: skip
    ap.add_argument("--nice", type=int, default=19, help="nice value of SCons (default 19)")
    ap.add_argument("--build-dir", help="an absolute .../build/<name> (default: the cache's)")
    ap.add_argument(
        "--python-config",
        default=os.environ.get("PYTHON_CONFIG") or "/usr/bin/python3-config",
        help="python3-config of the Python gem5 embeds (default $PYTHON_CONFIG or the system's)",
    )
    ap.add_argument(
        "--configure-only",
        action="store_true",
        help="only defconfig + setconfig of the build directory (seconds; no binary)",
    )
    return ap


def build(a: argparse.Namespace) -> int:
    if a.jobs < 1 or not -20 <= a.nice <= 19:
        raise BuildError(EXIT_USAGE, "--jobs must be >= 1 and --nice in -20..19")
    build_dir = check_build_dir(a.build_dir)
    variants = list(dict.fromkeys(a.variant or ["fast"]))
    source = resolve_source(a.src, a.clone_url)
    log(f"source: {source.tree} (gem5 {cache.GEM5_VERSION}, commit {source.commit or 'unknown'})")
    scons = shutil.which("scons")
    if scons is None:
        raise BuildError(EXIT_PREREQ, "scons not found (Debian: apt-get install scons; README)")
    if not Path(a.python_config).is_file():
        raise BuildError(EXIT_PREREQ, f"python3-config {a.python_config} not found (python3-dev)")
    busy = running_builds(build_dir)
    if busy:
        raise BuildError(
            EXIT_PREREQ,
            f"scons (pid {', '.join(map(str, busy))}) is building {build_dir} already; "
            "wait for it, or stop it with SIGINT and rerun this command",
        )
    env = scons_env(a.python_config)
    nice = ["nice", "-n", str(a.nice)]
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    with locked(build_dir):
        steps: dict[str, list[str]] = {}
        if not kconfig_ok(build_dir):
            cfg = [
                ("defconfig", [*nice, scons, "defconfig", str(build_dir), "build_opts/X86"]),
                ("setconfig", [*nice, scons, "setconfig", str(build_dir), PROTOCOL_OPT]),
            ]
            if (build_dir / "gem5.build" / "config").is_file():
                cfg = cfg[1:]  # keep the existing configuration, set the protocol
            for name, argv in cfg:
                inv = run_scons(argv, source.tree, env)
                if inv.interrupted:
                    return EXIT_INTERRUPTED
                if inv.exit_code != 0:
                    raise BuildError(EXIT_FAILED, f"scons {name} failed (exit {inv.exit_code})")
                steps[name] = argv
            if not kconfig_ok(build_dir):
                raise BuildError(
                    EXIT_FAILED, f"{build_dir}/gem5.build/config does not say {KCONFIG_WANT}"
                )
        log(f"configured: {build_dir} ({', '.join(f'{k}={v}' for k, v in KCONFIG_WANT.items())})")
        if a.configure_only:
            return 0
        for variant in variants:
            binary = cache.gem5_binary(variant, build_dir)
            options = {"jobs": a.jobs, "nice": a.nice, "PYTHON_CONFIG": a.python_config}
            old = still_built(binary, source)
            if old is not None:
                log(f"{binary} is built (sha256 {old['binary_sha256'][:12]}); provenance rewritten")
                was = dict(old.get("scons") or {})  # how it was built, not this rerun's flags
                steps_was = was.pop("steps", {})
                rec = provenance_record(
                    binary, source, build_dir, variant, steps_was, was or options
                )
                write_provenance(binary, rec)
                continue
            argv = [*nice, scons, str(binary), f"-j{a.jobs}"]
            inv = run_scons(argv, source.tree, env)
            append_history(binary, inv)
            if inv.interrupted:
                log(
                    f"interrupted after {inv.wall_s:.0f} s; SCons saved its database: "
                    "rerun the same command to resume"
                )
                return EXIT_INTERRUPTED
            if inv.exit_code != 0 or not binary.is_file():
                raise BuildError(EXIT_FAILED, f"scons {binary.name} failed (exit {inv.exit_code})")
            rec = provenance_record(
                binary, source, build_dir, variant, {**steps, "build": argv}, options
            )
            out = write_provenance(binary, rec)
            log(f"built {binary} (sha256 {rec['binary_sha256'][:12]}); provenance {out}")
            print(binary)
    return 0


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        return build(a)
    except BuildError as e:
        print(f"build-gem5: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:  # outside SCons (extraction, hashing): nothing to save
        print("build-gem5: interrupted; rerun the same command", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
