"""The README's set-up command on stock Debian Python (tier `setup`).

A copy of this checkout (its tracked and new files, as on disk) runs
`.ci/setup` with PATH=/usr/bin:/bin first, so `python3` is Debian's
/usr/bin/python3, which is externally managed (PEP 668): a `pip install`
into it stops with "externally-managed-environment". The setup must make the
clone's .venv instead, leave the system Python's packages as they were, and
`./run_all.py` (shebang python3 = Debian's) and `tests/run` must then run
under the venv. Downloads the pyproject packages from PyPI (about 200 MB):
minutes. Skipped where /usr/bin/python3 is not externally managed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_PY = Path("/usr/bin/python3")
PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
# a kept finding's frames: its report needs pandas, pyarrow and matplotlib
FRAMES = ROOT / "findings" / "2026-11-24-control" / "frames"
QUICK_TEST = "tests/unit/test_sweep_ids.py"


def _externally_managed() -> str | None:
    """Why this test cannot run here, or None."""
    if not DEBIAN_PY.is_file():
        return f"{DEBIAN_PY} does not exist (not a Debian machine)"
    r = subprocess.run(
        [str(DEBIAN_PY), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    marker = Path(r.stdout.strip()) / "EXTERNALLY-MANAGED"
    if r.returncode != 0 or not marker.is_file():
        return f"{DEBIAN_PY} is not externally managed (no {marker})"
    if os.geteuid() != 0 and shutil.which("sudo") is None:
        return ".ci/setup may need apt-get (python3-venv): needs root or sudo"
    return None


_WHY_NOT = _externally_managed()
pytestmark = pytest.mark.skipif(_WHY_NOT is not None, reason=str(_WHY_NOT))


def _copy_checkout(dst: Path) -> None:
    """The checkout as on disk (tracked files and new, not ignored, ones)."""
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for rel in filter(None, (f.decode() for f in files)):
        src = ROOT / rel
        if src.is_file():  # deleted but still in the index: skip
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def _debian_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYENV", "PYTHON", "VIRTUAL_ENV", "NUMA_LB_PYTHON", "NUMA_LB_REEXEC"))
    }
    env["PATH"] = PATH
    env["NUMA_LB_CACHE"] = str(home / "cache")  # nothing here may build; keep it private
    return env


def _site_listing() -> dict[str, list[str]]:
    """What is installed for Debian's python3, per site directory (pip: /usr/local)."""
    dirs = [Path("/usr/local/lib/python3.11/dist-packages"), Path("/usr/lib/python3/dist-packages")]
    return {str(d): sorted(p.name for p in d.iterdir()) if d.is_dir() else [] for d in dirs}


def test_setup_with_debian_python(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    _copy_checkout(clone)
    env = _debian_env(tmp_path)
    r = subprocess.run(
        ["sh", "-c", "command -v python3"], env=env, capture_output=True, text=True, check=True
    )
    assert r.stdout.strip() in ("/usr/bin/python3", "/bin/python3"), r.stdout
    before = _site_listing()

    r = subprocess.run(
        [".ci/setup"], cwd=clone, env=env, capture_output=True, text=True, timeout=1800
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "externally-managed-environment" not in out
    assert "setup: creating the project's Python environment" in out
    venv_py = clone / ".venv" / "bin" / "python"
    assert venv_py.is_file(), out[-2000:]
    cfg = (clone / ".venv" / "pyvenv.cfg").read_text()
    assert "home = /usr/bin" in cfg, cfg  # made from Debian's python3
    assert _site_listing() == before, "the system Python's packages changed"

    # a second run only checks
    r = subprocess.run(
        [".ci/setup"], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "creating" not in r.stdout and "installing" not in r.stdout, r.stdout
    assert f"setup: ok (Python: {venv_py})" in r.stdout, r.stdout

    # ./run_all.py starts under Debian's python3 (shebang) and moves to the venv
    r = subprocess.run(
        ["./run_all.py", "presets"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "quick" in r.stdout, r.stdout
    # ... where pandas, pyarrow and matplotlib are: a report from kept frames
    r = subprocess.run(
        ["./run_all.py", "report", "--frames", str(FRAMES), "--out", str(tmp_path / "rep")],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "rep" / "report.html").is_file()
    assert (tmp_path / "rep" / "report.md").is_file()

    # tests/run names the venv's interpreter; a skipped tier costs nothing
    r = subprocess.run(
        ["tests/run", "gem5"],
        cwd=clone,
        env={k: v for k, v in env.items() if k != "GEM5"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith(f"python: {venv_py} (3."), r.stdout
    assert "SKIPPED gem5" in r.stdout

    # and one quick test file under the venv's pytest
    r = subprocess.run(
        [str(venv_py), "-m", "pytest", "-q", "-p", "no:cacheprovider", QUICK_TEST],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout
