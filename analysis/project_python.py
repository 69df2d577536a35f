"""The project's Python: the interpreter run_all.py, tests/run and the Slurm jobs use.

`.ci/setup` installs the Python packages of pyproject.toml into a virtual
environment in the clone, ``.venv`` (never into the system Python: Debian's
``/usr/bin/python3`` is externally managed, PEP 668). The project's
interpreter is, in this order:

1. ``$NUMA_LB_PYTHON`` when set (bring your own interpreter; it needs the
   packages of pyproject.toml),
2. ``<clone>/.venv/bin/python`` when it exists,
3. the interpreter already running (``python3`` on PATH).

``run_all.py`` starts under whatever ``python3`` its shebang finds and calls
``reexec`` first: if the project's interpreter is another one, it replaces
itself with it (``os.execv``), so ``./run_all.py`` needs no activated
environment. Workers and Slurm job scripts start ``sys.executable``, i.e. the
project's interpreter. ``tests/run`` picks the same interpreter in shell.
Stdlib only: this runs before the packages are known to be importable.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_PYTHON = "NUMA_LB_PYTHON"
# set in the environment of the replacing process: never re-exec twice (a
# pyenv shim or a symlink may report another sys.executable than it was given)
ENV_REEXECED = "NUMA_LB_REEXECED"


def venv_dir(root: Path = ROOT) -> Path:
    return root / ".venv"


def project_python(root: Path = ROOT, env: dict[str, str] | None = None) -> str | None:
    """The interpreter the project should run under, or None for "this one"."""
    env = os.environ if env is None else env
    if env.get(ENV_PYTHON):
        given = env[ENV_PYTHON]
        return given if "/" in given else (shutil.which(given) or given)
    py = venv_dir(root) / "bin" / "python"
    if py.is_file() and os.access(py, os.X_OK):
        return str(py)
    return None


def running_under(target: str) -> bool:
    """True when this process already runs @target.

    A venv's bin/python is a symlink to the base interpreter, so paths are
    compared unresolved, and a venv is recognised by its prefix.
    """
    t = Path(target).absolute()
    if Path(sys.executable).absolute() == t:
        return True
    cfg = t.parent.parent / "pyvenv.cfg"
    return cfg.is_file() and Path(sys.prefix).absolute() == t.parent.parent


def reexec_argv(
    script: str, argv: list[str], root: Path = ROOT, env: dict[str, str] | None = None
) -> list[str] | None:
    """The command that replaces this process, or None to carry on here."""
    env = os.environ if env is None else env
    if env.get(ENV_REEXECED):
        return None
    target = project_python(root, env)
    if target is None or running_under(target):
        return None
    return [target, script, *argv]


def reexec(script: str, argv: list[str], root: Path = ROOT) -> None:
    """Replace this process with the project's interpreter running @script, if
    that is another interpreter; return otherwise."""
    cmd = reexec_argv(script, argv, root)
    if cmd is None:
        return
    os.environ[ENV_REEXECED] = "1"
    try:
        os.execv(cmd[0], cmd)
    except OSError as e:
        sys.exit(
            f"error: cannot start the project's Python {cmd[0]}: {e.strerror}; run .ci/setup "
            f"(it makes {venv_dir(root)}), or set {ENV_PYTHON} to a Python with the packages "
            "of pyproject.toml"
        )
