"""gem5's source for build-gem5: a tree or git repository checked to be v24.0.0.1.

A plain tree must say ``gem5Version = "24.0.0.1"`` in ``src/base/version.cc``;
a git repository must hold tag v24.0.0.1 at gem5's commit. A clean clone at the
tag is used in place; otherwise the tag is extracted into
``<cache>/gem5/src/v24.0.0.1`` (an existing tree there is verified against the
tag, not overwritten) or, with no source at all, fetched first. Every refusal is
a BuildError with the exit code build-gem5 returns (2: not gem5 v24.0.0.1).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analysis import cache

EXIT_FAILED, EXIT_USAGE, EXIT_PREREQ, EXIT_INTERRUPTED = 1, 2, 3, 130
DEFAULT_CLONE_URL = "https://github.com/gem5/gem5"
SKIPPED = "tests/test-progs/"  # test binaries: gem5 mirrors often lack them, builds never read them
EXCLUDE = f":(exclude){SKIPPED}"
MARKER = ".numa-lb-source.json"  # written into a tree this command extracted


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
