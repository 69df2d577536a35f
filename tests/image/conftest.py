"""Image tier fixtures: the disk image (built on demand, cached) and the release kernel.

    python3 -m pytest -q -rs tests/image

Prerequisites: qemu-system-x86_64 and qemu-img; the debootstrap tree cached,
or root + debootstrap to build it.  Missing ones skip the tier with one
"SKIPPED image: <reason>" line.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT / "disk-image", Path(__file__).resolve().parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import build_image  # noqa: E402


def _missing() -> str | None:
    if not shutil.which("qemu-system-x86_64") or not shutil.which("qemu-img"):
        return "qemu-system-x86_64/qemu-img missing (run .ci/setup)"
    if not (build_image.rootfs_dir() / "rootfs.json").exists():
        if os.geteuid() != 0:
            return "the debootstrap tree is not cached and building it needs root"
        if not shutil.which("debootstrap"):
            return "debootstrap missing (apt-get install debootstrap)"
    return None


@pytest.fixture(scope="session")
def image() -> Path:
    why = _missing()
    if why:
        pytest.skip(f"SKIPPED image: {why}")
    return build_image.build()


@pytest.fixture(scope="session")
def kernel(image: Path) -> Path:
    import kbuild  # noqa: PLC0415 - kernel-patches/ is on sys.path (tests/conftest.py)

    return kbuild.build("release", None) / "bzImage"
