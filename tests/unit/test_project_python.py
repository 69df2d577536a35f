"""analysis/project_python.py: run_all.py moves itself to the clone's .venv.

Real virtual environments (``python -m venv --without-pip``, about a second)
and real processes; the full set-up on Debian's Python is tests/setup.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from analysis import project_python as pp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory laid out like a clone: a script that reexecs, and a .venv."""
    root = tmp_path_factory.mktemp("clone")
    venv.create(root / ".venv", with_pip=False, symlinks=True)
    (root / "where.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from pathlib import Path\n"
        "from analysis.project_python import reexec\n"
        "reexec(__file__, sys.argv[1:], Path(__file__).resolve().parent)\n"
        "print(sys.prefix, *sys.argv[1:])\n"
    )
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (pp.ENV_PYTHON, pp.ENV_REEXECED)}
    return {**env, **extra}


def test_project_python_order(clone: Path, tmp_path: Path) -> None:
    assert pp.project_python(clone, {}) == str(clone / ".venv" / "bin" / "python")
    assert pp.project_python(clone, {pp.ENV_PYTHON: "/opt/py/bin/python3"}) == "/opt/py/bin/python3"
    assert pp.project_python(tmp_path, {}) is None  # no .venv: the running interpreter


def test_reexec_argv(clone: Path, tmp_path: Path) -> None:
    vpy = str(clone / ".venv" / "bin" / "python")
    assert pp.reexec_argv("run_all.py", ["presets"], clone, {}) == [vpy, "run_all.py", "presets"]
    assert pp.reexec_argv("run_all.py", [], clone, {pp.ENV_REEXECED: "1"}) is None  # no loop
    assert pp.reexec_argv("run_all.py", [], tmp_path, {}) is None
    # already under that interpreter
    assert pp.reexec_argv("x", [], clone, {pp.ENV_PYTHON: sys.executable}) is None


def test_script_moves_to_the_venv(clone: Path) -> None:
    r = subprocess.run(
        [sys.executable, str(clone / "where.py"), "a b", "--c"],
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    # the base interpreter's symlink target is the same file: the prefix tells them apart
    assert r.stdout.strip() == f"{clone / '.venv'} a b --c"


def test_numa_lb_python_overrides_the_venv(clone: Path) -> None:
    r = subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), str(clone / "where.py")],
        env=_env(**{pp.ENV_PYTHON: sys.executable}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout.strip() == sys.prefix


def test_missing_interpreter_is_an_error_not_a_traceback(clone: Path, tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, str(clone / "where.py")],
        env=_env(**{pp.ENV_PYTHON: str(tmp_path / "nope" / "python")}),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    assert "cannot start the project's Python" in r.stderr and ".ci/setup" in r.stderr
    assert "Traceback" not in r.stderr
