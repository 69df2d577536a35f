"""Build gem5 v24.0.0.1 (X86, Ruby MOESI_hammer) out of tree into the project's cache.

    ./run_all.py build-gem5 [--src PATH] [--clone-url URL] [--variant fast|opt ...]
                            [--jobs N] [--nice N] [--build-dir DIR] [--configure-only]

(``python3 -m analysis.gem5_build`` takes the same arguments.)

Source: ``--src`` is a gem5 source tree, or a git repository (bare git dir or
clone) holding tag v24.0.0.1; a clone whose HEAD is the tag's commit and whose
tracked files are unmodified is built in place, otherwise the tag is extracted
with ``git archive`` (leaving out ``tests/test-progs``, binaries that gem5
mirrors often lack and the build never reads) into ``<cache>/gem5/src/v24.0.0.1``.
Without ``--src`` that cached tree is used; without it the tag is fetched from
``--clone-url`` (default gem5's GitHub repository) where the network allows.
A tree that is not gem5 v24.0.0.1 (``src/base/version.cc``; for git, the
commit) is refused with exit 2 before SCons starts.

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
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analysis import cache
from analysis.sweep.provenance import cached_sha256

EXIT_FAILED, EXIT_USAGE, EXIT_PREREQ, EXIT_INTERRUPTED = 1, 2, 3, 130
DEFAULT_CLONE_URL = "https://github.com/gem5/gem5"
SKIPPED = "tests/test-progs/"  # test binaries: gem5 mirrors often lack them, builds never read them
EXCLUDE = f":(exclude){SKIPPED}"
MARKER = ".numa-lb-source.json"  # written into a tree this command extracted
KCONFIG_WANT = {"USE_X86_ISA": "y", "RUBY": "y", "PROTOCOL": "MOESI_hammer"}
KCONFIG_RECORD = (*KCONFIG_WANT, "RUBY_PROTOCOL_MOESI_HAMMER", "BUILD_ISA", "USE_KVM")
PROTOCOL_OPT = "RUBY_PROTOCOL_MOESI_HAMMER=y"
SCHEMA = 1


class BuildError(RuntimeError):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code = code


def log(msg: str) -> None:
    print(f"build-gem5: {msg}", file=sys.stderr, flush=True)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def git(args: list[str], timeout: float = 600, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, timeout=timeout, check=False, **kw
    )


# -------------------------------------------------------------------- source
@dataclass
class Source:
    tree: Path
    commit: str | None  # None: a plain tree whose commit is not known
    commit_how: str
    origin: str  # what --src / the clone URL named


def read_version(tree: Path) -> str | None:
    """gem5Version of src/base/version.cc, or None when the file or the line is absent."""
    try:
        text = (tree / "src" / "base" / "version.cc").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r'gem5Version\s*=\s*"([^"]*)"', text)
    return m.group(1) if m else None


def check_tree(tree: Path) -> None:
    """Refuse (exit 2) a tree that is not gem5 v24.0.0.1."""
    if not (tree / "SConstruct").is_file() or not (tree / "src" / "base" / "version.cc").is_file():
        raise BuildError(
            EXIT_USAGE,
            f"{tree} is not a gem5 source tree (no SConstruct / src/base/version.cc) "
            "nor a git repository",
        )
    v = read_version(tree)
    if v != cache.GEM5_VERSION:
        raise BuildError(
            EXIT_USAGE,
            f"{tree} is gem5 {v or '(no gem5Version in src/base/version.cc)'}, "
            f"not {cache.GEM5_VERSION} (the study is fixed on gem5 {cache.GEM5_TAG})",
        )


def git_kind(path: Path) -> str | None:
    """What @path is to git: "work" (a clone's top), "bare" (a git dir), or None."""
    if (path / ".git").exists():
        return "work"
    if (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir():
        return "bare"
    return None


def git_base(path: Path, kind: str) -> list[str]:
    """``--git-dir=...`` of @path: commands that read objects, not its work tree."""
    if kind == "work":
        r = git(["-C", str(path), "rev-parse", "--absolute-git-dir"], timeout=60)
        if r.returncode != 0:
            raise BuildError(EXIT_USAGE, f"{path}: not a usable git work tree: {r.stderr.strip()}")
        return [f"--git-dir={r.stdout.strip()}"]
    return [f"--git-dir={path}"]


def tag_commit(base: list[str]) -> str | None:
    r = git([*base, "rev-parse", "--verify", "-q", f"{cache.GEM5_TAG}^{{commit}}"], timeout=60)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def read_marker(tree: Path) -> dict[str, Any] | None:
    try:
        d = json.loads((tree / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def write_marker(tree: Path, commit: str, origin: str, how: str) -> None:
    rec = {"tag": cache.GEM5_TAG, "commit": commit, "origin": origin, "how": how}
    rec["written_at"] = now_iso()
    (tree / MARKER).write_text(json.dumps(rec, indent=1) + "\n")


def differing(git_dir: list[str], tree: Path, commit: str) -> list[str]:
    """Paths of @tree that differ from @commit (tests/test-progs left out), via a
    throw-away index: reads the tree, writes nothing into it."""
    with tempfile.TemporaryDirectory(prefix="gem5-verify-") as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=str(Path(tmp) / "index"))
        base = [*git_dir, f"--work-tree={tree}"]
        r = git([*base, "read-tree", commit], env=env)
        if r.returncode != 0:
            raise BuildError(EXIT_FAILED, f"git read-tree {commit} failed: {r.stderr.strip()}")
        git([*base, "update-index", "-q", "--refresh"], env=env, cwd=tree)
        r = git([*base, "diff-files", "--name-only", "--", ".", EXCLUDE], env=env, cwd=tree)
        if r.returncode != 0:
            raise BuildError(EXIT_FAILED, f"git diff-files failed: {r.stderr.strip()}")
        return r.stdout.split()


def expected_files(git_dir: list[str], commit: str) -> int:
    """How many files git archive writes for @commit (blobs outside tests/test-progs)."""
    r = git([*git_dir, "ls-tree", "-r", commit])
    if r.returncode != 0:
        raise BuildError(EXIT_FAILED, f"git ls-tree {commit} failed: {r.stderr.strip()}")
    rows = (ln.split("\t", 1) for ln in r.stdout.splitlines() if "\t" in ln)
    return sum(
        1 for meta, path in rows if meta.split()[1] == "blob" and not path.startswith(SKIPPED)
    )


def extract(git_dir: list[str], commit: str, dest: Path, origin: str) -> None:
    """git archive @commit (without tests/test-progs) into @dest, atomically.

    git archive reads the whole tree even with the exclude: from a mirror
    without the test binaries it prints "invalid object ... for
    'tests/test-progs/...'" and still writes every other file. Those lines are
    dropped; the extracted file count is checked against the commit's instead.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    want = expected_files(git_dir, commit)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    log(f"extracting {cache.GEM5_TAG} ({commit[:12]}, {want} files) from {origin} into {dest}")
    arch = subprocess.Popen(
        ["git", *git_dir, "archive", "--format=tar", commit, "--", ".", EXCLUDE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    tar = subprocess.run(["tar", "-x", "-C", str(tmp)], stdin=arch.stdout, capture_output=True)
    assert arch.stdout is not None and arch.stderr is not None
    arch.stdout.close()
    err = [
        ln
        for ln in arch.stderr.read().decode(errors="replace").splitlines()
        if not re.search(rf"invalid object .* for '{SKIPPED}", ln)
    ]
    got = sum(len(files) for _, _, files in os.walk(tmp))
    if arch.wait() != 0 or tar.returncode != 0 or got != want:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BuildError(
            EXIT_FAILED,
            f"extracting {commit[:12]} failed ({got} of {want} files): "
            f"{' '.join(err)[-500:]} {tar.stderr.decode(errors='replace')[-300:]}",
        )
    for ln in err:
        log(f"git archive: {ln}")
    write_marker(tmp, commit, origin, f"git archive of tag {cache.GEM5_TAG}")
    tmp.rename(dest)


def from_git(path: Path, kind: str, origin: str) -> Source:
    """A git repository: in place when a clean clone at the tag, else extracted."""
    base = git_base(path, kind)
    commit = tag_commit(base)
    if kind == "work":
        head = git(["-C", str(path), "rev-parse", "HEAD"], timeout=60).stdout.strip()
        if head == cache.GEM5_COMMIT:
            check_tree(path)
            st = git(["-C", str(path), "status", "--porcelain", "--untracked-files=no"])
            changed = [ln[3:] for ln in st.stdout.splitlines() if ln.strip()]
            if changed:
                raise BuildError(
                    EXIT_USAGE,
                    f"{path}: {len(changed)} tracked files modified (e.g. {changed[0]}); "
                    "the study uses gem5 stock and unmodified",
                )
            return Source(path, head, "git HEAD of the work tree (clean)", origin)
        if commit is None:
            raise BuildError(
                EXIT_USAGE,
                f"{path} is at commit {head[:12] or '?'}, not {cache.GEM5_TAG} "
                f"({cache.GEM5_COMMIT[:12]}), and has no tag {cache.GEM5_TAG}",
            )
    if commit is None:
        raise BuildError(EXIT_USAGE, f"{path}: git repository without tag {cache.GEM5_TAG}")
    if commit != cache.GEM5_COMMIT:
        raise BuildError(
            EXIT_USAGE,
            f"{path}: tag {cache.GEM5_TAG} is commit {commit[:12]}, not gem5's "
            f"{cache.GEM5_COMMIT[:12]}",
        )
    dest = cache.gem5_src_dir()
    if not dest.exists():
        extract(base, commit, dest, origin)
    else:
        mark = read_marker(dest)
        if not (mark and mark.get("commit") == commit):
            diff = differing(base, dest, commit)
            if diff:
                raise BuildError(
                    EXIT_USAGE,
                    f"{dest} exists and differs from {cache.GEM5_TAG} in {len(diff)} files "
                    f"(e.g. {diff[0]}); remove it to extract the tag again",
                )
            write_marker(dest, commit, origin, "verified against the tag (git diff-files)")
    check_tree(dest)
    return Source(dest, commit, f"extracted from / verified against {origin}", origin)


def clone(url: str) -> Path:
    """Fetch the tag (depth 1) into <cache>/gem5/repo.git; exit 3 without network."""
    repo = cache.cache_root() / "gem5" / "repo.git"
    if not (repo / "HEAD").is_file():
        repo.parent.mkdir(parents=True, exist_ok=True)
        r = git(["init", "-q", "--bare", str(repo)])
        if r.returncode != 0:
            raise BuildError(EXIT_FAILED, f"git init {repo} failed: {r.stderr.strip()}")
    if tag_commit([f"--git-dir={repo}"]) is None:
        log(f"fetching tag {cache.GEM5_TAG} from {url} into {repo}")
        refspec = f"refs/tags/{cache.GEM5_TAG}:refs/tags/{cache.GEM5_TAG}"
        for args, limit in (
            (["ls-remote", "--exit-code", url, f"refs/tags/{cache.GEM5_TAG}"], 60),
            ([f"--git-dir={repo}", "fetch", "--depth", "1", url, refspec], 3600),
        ):
            try:
                r = git(args, timeout=limit, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
                why = r.stderr.strip()[-200:] if r.returncode != 0 else ""
            except subprocess.TimeoutExpired:
                why = f"no answer in {limit} s"
            if why or r.returncode != 0:
                raise BuildError(
                    EXIT_PREREQ,
                    f"cannot fetch {cache.GEM5_TAG} from {url} ({why or 'no such tag'}); "
                    "without network pass --src with a gem5 tree or git repository",
                )
    return repo


def resolve_source(src: str | None, clone_url: str | None) -> Source:
    if src:
        p = Path(src).expanduser().resolve()
        if not p.is_dir():
            raise BuildError(EXIT_USAGE, f"--src {p}: no such directory")
        kind = git_kind(p)
        if kind is not None:
            return from_git(p, kind, str(p))
        check_tree(p)
        mark = read_marker(p)
        if mark and isinstance(mark.get("commit"), str):
            return Source(p, mark["commit"], f"{MARKER} ({mark.get('how')})", str(p))
        return Source(p, None, "unknown: a plain tree (version.cc says the version)", str(p))
    cached = cache.gem5_src_dir()
    if cached.is_dir():
        return resolve_source(str(cached), None)
    url = clone_url or DEFAULT_CLONE_URL
    return from_git(clone(url), "bare", url)


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
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
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
                rec = provenance_record(
                    binary,
                    source,
                    build_dir,
                    variant,
                    (old.get("scons") or {}).get("steps", {}),
                    options,
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
