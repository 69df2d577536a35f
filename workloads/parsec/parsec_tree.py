"""Reading a PARSEC 3.0 source tree (given by path; nothing of it is in this repository).

What the build needs to know about the tree: where it is and what it is
(``find_tree``, ``identity``: a content hash of the parts we use), how
PARSEC itself runs a program at an input size (``run_command``: from the
package's ``parsec/<size>.runconf`` and, for SPLASH-2x, the ``run.sh`` it
names), and its input tarballs (``extract``: regular files only, no path
leaves the destination).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import tarfile
from dataclasses import dataclass
from pathlib import Path

# The parts of the tree every build uses besides the programs' own directories.
COMMON_DIRS = ("pkgs/libs/hooks/src", "pkgs/libs/parmacs/src/m4")
HOOKS_SRC = "pkgs/libs/hooks/src"
PARMACS_PTHREADS = "pkgs/libs/parmacs/src/m4/parmacs.pthreads.c.m4"
ORIGIN_SUFFIX = ".ORIGIN"  # <tree>.ORIGIN: where the tree came from (optional, recorded)


class TreeError(RuntimeError):
    pass


def find_tree(path: str | os.PathLike[str]) -> Path:
    """The PARSEC 3.0 root (it holds pkgs/ and ext/splash2x/); the given
    directory or its single parsec-3.0* subdirectory."""
    p = Path(path).expanduser().resolve()
    cands = [p] + sorted(p.glob("parsec-3.0*")) if p.is_dir() else []
    for c in cands:
        if (c / HOOKS_SRC / "hooks.c").is_file() and (c / "ext" / "splash2x").is_dir():
            return c
    raise TreeError(
        f"{p}: not a PARSEC 3.0 tree (no {HOOKS_SRC}/hooks.c and ext/splash2x); give the "
        "directory of a PARSEC 3.0 checkout (e.g. of the bamos/parsec-benchmark mirror)"
    )


def origin(tree: Path) -> str | None:
    """The first line of <tree>.ORIGIN, if someone wrote one (provenance only)."""
    f = tree.with_name(tree.name + ORIGIN_SUFFIX)
    try:
        return f.read_text(errors="replace").strip().splitlines()[0]
    except (OSError, IndexError):
        return None


def _files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        # build products of an earlier parsecmgmt run are not sources
        dirnames[:] = sorted(d for d in dirnames if d not in ("obj", "inst", "run"))
        out += [Path(dirpath) / n for n in sorted(filenames)]
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def identity(tree: Path, pkg_dirs: list[str]) -> str:
    """sha256 over (path, sha256) of every file under COMMON_DIRS and PKG_DIRS
    (sources, runconf files, the tree's input tarballs): what the build reads."""
    h = hashlib.sha256()
    for d in sorted(set(COMMON_DIRS) | set(pkg_dirs)):
        base = tree / d
        if not base.is_dir():
            raise TreeError(f"{tree}: {d} is missing")
        for f in _files(base):
            h.update(f"{f.relative_to(tree).as_posix()} {sha256_file(f)}\n".encode())
    return h.hexdigest()


# ------------------------------------------------------------ run commands

_RUNCONF = re.compile(r'^\s*(run_exec|run_args)\s*=\s*"(.*)"\s*$')


def runconf(tree: Path, pkg_dir: str, size: str) -> dict[str, str]:
    path = tree / pkg_dir / "parsec" / f"{size}.runconf"
    out = {}
    try:
        text = path.read_text()
    except OSError as e:
        raise TreeError(f"{path}: {e.strerror}") from None
    for line in text.splitlines():
        m = _RUNCONF.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    if "run_exec" not in out:
        raise TreeError(f"{path}: no run_exec")
    return out


@dataclass
class RunCommand:
    """How PARSEC runs one program at one size, with ``{threads}`` for the count."""

    exe: str  # binary name (PARSEC's inst/<plat>/bin/<exe>)
    args: list[str]
    stdin: str | None = None  # file in the run directory the program reads on stdin
    template: str | None = None  # SPLASH-2x: input.template -> stdin file, NUMPROCS filled in


def _threads(text: str, *names: str) -> str:
    for n in names:
        text = text.replace("${" + n + "}", "{threads}").replace("$" + n, "{threads}")
    return text


def run_command(tree: Path, pkg_dir: str, size: str) -> RunCommand:
    """From <pkg>/parsec/<size>.runconf; SPLASH-2x programs run ``bin/run.sh
    NTHREADS SIZE``, whose PROGARGS for SIZE (or its template branch) are read."""
    conf = runconf(tree, pkg_dir, size)
    exe = conf["run_exec"]
    if Path(exe).name != "run.sh":
        args = shlex.split(_threads(conf.get("run_args", ""), "NTHREADS"))
        return RunCommand(exe=Path(exe).name, args=args)
    script = tree / pkg_dir / "src" / "run.sh"
    try:
        text = script.read_text()
    except OSError as e:
        raise TreeError(f"{script}: {e.strerror}") from None
    target = re.search(r"^TARGET=(\S+)\s*$", text, re.M)
    if not target:
        raise TreeError(f"{script}: no TARGET=")
    if re.search(r'^INPUTTEMPLATE="([^"]+)"', text, re.M):
        template = re.search(r'^INPUTTEMPLATE="([^"]+)"', text, re.M).group(1)  # type: ignore[union-attr]
        infile = re.search(r'^INPUTFILE="([^"]+)"', text, re.M)
        progargs = re.search(r'^PROGARGS="([^"]+)"', text, re.M)
        if not (infile and progargs and "s/NUMPROCS/$NUMPROCS/" in text):
            raise TreeError(f"{script}: a template branch we do not understand")
        stdin_file = _threads(infile.group(1), "NUMPROCS")
        pa = _threads(progargs.group(1), "NUMPROCS").replace("${INPUTFILE}", stdin_file)
        words = shlex.split(pa)
        if len(words) < 2 or words[-2] != "<" or words[-1] != stdin_file:
            raise TreeError(f"{script}: PROGARGS {progargs.group(1)!r}: no '< INPUTFILE'")
        return RunCommand(exe=target.group(1), args=words[:-2], stdin=stdin_file, template=template)
    branch = re.search(r'^"' + re.escape(size) + r'"\s*\)\s*\n\s*PROGARGS="([^"]*)";;', text, re.M)
    if not branch:
        raise TreeError(f"{script}: no PROGARGS for input size {size!r}")
    args = shlex.split(_threads(branch.group(1), "NUMPROCS"))
    return RunCommand(exe=target.group(1), args=args)


# ------------------------------------------------------------ input tarballs


def tarball(tree: Path, pkg_dir: str, size: str) -> Path:
    return tree / pkg_dir / "inputs" / f"input_{size}.tar"


def official_tarball(inputs_dir: Path, pkg_dir: str, size: str) -> Path | None:
    """PARSEC's official input tarball under INPUTS_DIR, laid out as in the tree
    (<dir>/<pkg_dir>/inputs/input_<size>.tar), also one parsec-3.0*/ level down
    (how PARSEC's input archives unpack)."""
    rel = Path(pkg_dir) / "inputs" / f"input_{size}.tar"
    for base in [inputs_dir] + sorted(inputs_dir.glob("parsec-3.0*")):
        if (base / rel).is_file():
            return base / rel
    return None


def extract(tar_path: Path, dest: Path) -> list[str]:
    """Unpack TAR_PATH's regular files and directories into DEST (no links,
    devices or paths leaving DEST); returns its top-level names."""
    dest.mkdir(parents=True, exist_ok=True)
    top: set[str] = set()
    with tarfile.open(tar_path) as tf:
        for m in tf.getmembers():
            parts = Path(m.name).parts
            if m.name.startswith("/") or ".." in parts or not parts:
                raise TreeError(f"{tar_path}: unsafe member {m.name!r}")
            if not (m.isfile() or m.isdir()):
                raise TreeError(f"{tar_path}: {m.name!r} is not a file or directory")
            top.add(parts[0])
            out = dest.joinpath(*parts)
            if m.isdir():
                out.mkdir(parents=True, exist_ok=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(m)
            assert src is not None
            with src, open(out, "wb") as f:
                while chunk := src.read(1 << 20):
                    f.write(chunk)
            os.chmod(out, 0o644)
    return sorted(top)
