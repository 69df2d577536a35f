"""The paths a ``run_all.py`` command names, checked before anything runs.

A path argument that cannot serve used to surface as a traceback, some of
them after the kernel and image build (``run --out`` at a file or a
read-only directory) or after the frames were built (``report --out`` at a
file). Each command's path arguments are checked here first, and a problem is
a ``UsageError`` that ``run_all.py`` prints as one line and exit 2:

* an input directory must exist, be a directory and be readable;
* an input file must exist, be a file and be readable;
* an output directory must be a directory or not exist yet, and the nearest
  existing directory on its way must be writable (``os.access``, which also
  sees a read-only mount; nothing is created, so a dry run still writes
  nothing anywhere);
* an output file must not be a directory, and its directory must be writable;
* a sweep output directory's ``runs/``, where there is one, must be a
  listable directory (and writable, for ``run --out``).

What a path must hold beyond that (run directories, frames files) is checked
by the command's own reader: ``report``'s inputs, ``--kept`` (kept.py).
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path


class UsageError(ValueError):
    """A bad command-line argument: one line for the user, exit 2."""

    def __init__(self, what: str, problem: str) -> None:
        super().__init__(f"{what}: {problem}" if what else problem)


def _kind(p: Path, what: str) -> str | None:
    """What @p is: "dir", "file", "other" or None (nothing there); UsageError
    when it cannot be looked at (a directory on its way is not searchable)."""
    try:
        st = p.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise UsageError(what, f"cannot reach {p}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "file" if stat.S_ISREG(st.st_mode) else "other"


def input_dir(path: Path, what: str) -> Path:
    p = Path(path)
    kind = _kind(p, what)
    if kind is None:
        raise UsageError(what, f"no such directory: {p}")
    if kind != "dir":
        raise UsageError(what, f"{p} is a file, not a directory")
    if not os.access(p, os.R_OK | os.X_OK):
        raise UsageError(what, f"{p} is not readable")
    return p


def input_file(path: Path, what: str) -> Path:
    p = Path(path)
    kind = _kind(p, what)
    if kind is None:
        raise UsageError(what, f"no such file: {p}")
    if kind == "dir":
        raise UsageError(what, f"{p} is a directory, not a file")
    if not os.access(p, os.R_OK):
        raise UsageError(what, f"{p} is not readable")
    return p


def output_dir(path: Path, what: str) -> Path:
    """@path as a directory to write into (created later by the command)."""
    p = Path(path).absolute()
    base = p
    while _kind(base, what) is None and base != base.parent:
        base = base.parent
    if _kind(base, what) != "dir":
        if base == p:
            raise UsageError(what, f"{path} is a file, not a directory")
        raise UsageError(what, f"cannot create {path}: {base} is a file, not a directory")
    if not os.access(base, os.W_OK | os.X_OK):
        where = "" if base == p else f" ({base}, where it would be created, is not)"
        raise UsageError(what, f"{path} is not writable{where}")
    return Path(path)


def _runs_subdir(p: Path, what: str, write: bool) -> None:
    """A sweep directory's runs/, where there is one: listable (and writable)."""
    runs = p / "runs"
    kind = _kind(runs, what)
    if kind is None:
        return
    if kind != "dir":
        raise UsageError(what, f"{runs} is a file; a sweep's runs/ is a directory")
    mode = os.R_OK | os.X_OK | (os.W_OK if write else 0)
    if not os.access(runs, mode):
        raise UsageError(what, f"{runs} is not {'writable' if write else 'readable'}")


def sweep_dir_in(path: Path, what: str) -> Path:
    """A sweep output directory (or a run directory, or a parent) to read."""
    _runs_subdir(input_dir(path, what), what, write=False)
    return Path(path)


def sweep_dir_out(path: Path, what: str) -> Path:
    """A sweep output directory to run into (it may hold the runs of before)."""
    output_dir(path, what)
    _runs_subdir(Path(path), what, write=True)
    return Path(path)


def output_file(path: Path, what: str) -> Path:
    p = Path(path)
    kind = _kind(p, what)
    if kind == "dir":
        raise UsageError(what, f"{p} is a directory, not a file")
    if kind is not None and not os.access(p, os.W_OK):
        raise UsageError(what, f"{p} is not writable")
    output_dir(p.parent, what)
    return p


# command -> (argument, kind, name in messages: the option, '' for a
# positional); a list argument (action=append, nargs) is checked item by item.
# `run --out` is checked by the driver, which knows the default
# (results/<sweep name>).
_CHECKS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "run": (("spec", "in_file", "spec file"), ("kept", "in_dir", "--kept")),
    "status": (("out", "sweep_in", ""),),
    "report": (
        ("dirs", "sweep_in", ""),
        ("frames", "in_dir", "--frames"),
        ("out", "out_dir", "--out"),
    ),
    "bench": (("src", "in_dir", "--from"), ("workdir", "out_dir", "--workdir")),
    "bench-machine": (("out", "out_dir", "--out"),),
    "calibrate": (
        ("out", "in_dir", ""),
        ("idle", "in_dir", "--idle"),
        ("write", "out_file", "--write"),
    ),
}
_KINDS = {"in_dir": input_dir, "in_file": input_file, "out_dir": output_dir,
          "out_file": output_file, "sweep_in": sweep_dir_in}  # fmt: skip


def check_args(a: argparse.Namespace) -> None:
    """UsageError for the first path argument of @a's command that cannot serve."""
    for attr, kind, what in _CHECKS.get(a.command, ()):
        value = getattr(a, attr, None)
        for v in value if isinstance(value, list) else [value]:
            if v is not None:
                _KINDS[kind](Path(v), what)
