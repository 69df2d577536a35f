"""A PARSEC build run natively on this host: its manifest and one program run.

``run_native`` runs a program of a build (``build_parsec.py build``) exactly as
the mix runner's numa-lb launcher does in the guest: the same manifest
(``install/parsec.json``), the same command and work directory set-up
(``parsec_catalog.installed_command``, ``prepare_workdir``). Used by
``build_parsec.py run``/``check``, ``parsec_checks.py`` (a run's output checked),
``instructions.py`` and the parsec tier. It reads a build and does not shape it:
the build id does not hash this file (``build_parsec.BUILD_MODULES``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import parsec_catalog as cat


def manifest(build: Path) -> dict[str, Any]:
    """The manifest of a build (what the numa-lb launcher reads in the guest)."""
    return json.loads((build / "install" / cat.MANIFEST_NAME).read_text())


@dataclass
class NativeRun:
    package: str
    input_set: str
    threads: int
    argv: list[str]
    workdir: Path
    exit_code: int
    seconds: float
    stdout: str
    stderr: str

    def file(self, name: str) -> Path:
        return self.workdir / name


def run_native(
    build: Path,
    package: str,
    input_set: str,
    threads: int,
    workdir: Path,
    extra_args: list[str] | None = None,
    timeout: float | None = None,
) -> NativeRun:
    """Run PACKAGE from BUILD on this host exactly as the mix runner's numa-lb
    launcher does in the guest (same manifest, same work directory set-up)."""
    root = str(build / "install")
    r = cat.installed_command(cat.lookup(package), input_set, threads, str(workdir), root)
    if workdir.exists():
        shutil.rmtree(workdir)
    cat.prepare_workdir(r)
    argv = r.argv + list(extra_args or [])
    env = dict(os.environ, NUMA_LB_PARSEC_M5=os.environ.get("NUMA_LB_PARSEC_M5", "auto"))
    t0 = time.monotonic()
    proc = subprocess.run(
        argv,
        cwd=workdir,
        env=env,
        text=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )
    secs = time.monotonic() - t0
    (workdir / "stdout.txt").write_text(proc.stdout)
    (workdir / "stderr.txt").write_text(proc.stderr)
    return NativeRun(
        package, input_set, threads, argv, workdir, proc.returncode, secs, proc.stdout, proc.stderr
    )
