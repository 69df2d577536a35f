"""PARSEC tier: build our PARSEC programs from $PARSEC_SRC, run and check them on this
host, then in the guest image under QEMU.

    PARSEC_SRC=~/parsec-3.0 python3 -m pytest -q -rs tests/parsec

PARSEC_SRC unset: the tree in the project's cache, <cache>/parsec/src, when it is
there (analysis/cache.py). tests/run prints "SKIPPED parsec: ..." and does not
start pytest when there is no tree; run directly, the tier skips with the same
reason. What is run: every
program the catalog says is available at simsmall (parsec_catalog.available_programs)
with 4 threads, plus the template programs at test size natively. The time of
each run is printed at the end (and written to <cache>/parsec/tier/).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT / "workloads" / "parsec", ROOT / "workloads", ROOT / "disk-image"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import build_parsec  # noqa: E402
import parsec_catalog as cat  # noqa: E402

from analysis.cache import default_parsec_src, export_parsec_default  # noqa: E402

INPUT = "simsmall"
THREADS = 4
# measured times, printed in the terminal summary: (where, program) -> record
TIMES: dict[tuple[str, str], dict[str, object]] = {}


def skip_reason() -> str | None:
    export_parsec_default()  # PARSEC_SRC unset: the cache's tree (analysis/cache.py)
    if not os.environ.get("PARSEC_SRC"):
        return default_parsec_src()[1]
    return None


def simsmall_programs() -> list[str]:
    return [p.package for p in cat.available_programs(INPUT)]


@pytest.fixture(scope="session")
def parsec_build() -> Path:
    why = skip_reason()
    if why:
        pytest.skip(f"SKIPPED parsec: {why}")
    return build_parsec.build(build_parsec.Selection.make())


@pytest.fixture(scope="session")
def image(parsec_build: Path) -> Path:
    if not shutil.which("qemu-system-x86_64") or not shutil.which("qemu-img"):
        pytest.skip("SKIPPED parsec: qemu-system-x86_64/qemu-img missing (run .ci/setup)")
    import build_image  # noqa: PLC0415

    if not (build_image.rootfs_dir() / "rootfs.json").exists() and os.geteuid() != 0:
        pytest.skip("SKIPPED parsec: the debootstrap tree is not cached and needs root")
    return build_image.build()  # PARSEC_SRC is set: the image with our PARSEC build


@pytest.fixture(scope="session")
def kernel(image: Path) -> Path:
    import kbuild  # noqa: PLC0415 - kernel-patches/ is on sys.path (tests/conftest.py)

    return kbuild.build("release", None) / "bzImage"


def record_time(where: str, package: str, **fields: object) -> None:
    TIMES[(where, package)] = dict(fields, at=time.strftime("%Y-%m-%dT%H:%M:%S"))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if not TIMES:
        return
    tr = terminalreporter
    tr.section(f"PARSEC run times ({THREADS} threads)")
    for (where, pkg), r in sorted(TIMES.items()):
        extra = "".join(f" {k}={v}" for k, v in sorted(r.items()) if k not in ("seconds", "at"))
        tr.write_line(f"{where:6s} {pkg:26s} {r['seconds']:8.2f} s{extra}")
    out = build_parsec.cache_base().parent / "tier"
    out.mkdir(parents=True, exist_ok=True)
    rows = [dict(r, where=w, program=p) for (w, p), r in sorted(TIMES.items())]
    (out / f"times-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(rows, indent=1))
