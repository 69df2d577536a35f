"""Shared by the gem5-long tier's modules (test_daemons_gem5.py,
test_attribution_gem5.py): the artifacts (kernel, image), one gem5 call, the
4 x 2 boot checkpoint and a run restored from it with a job.

A boot checkpoint depends only on the boot-fixed machine (topology.py
``BOOT_FIELDS``: sockets, cores, memory, clocks, the SLIT), not on the link
latency, so every module of one pytest session that boots the same machine
in the same directory shares it (``boot_checkpoint``), and runs restored
from it may each give their own ``--link-latency``.

gem5's atomic boot is deterministic to the byte
(findings/2026-11-28-checkpoint-identity), so a boot is a function of its
inputs: ``cached_boot`` keeps each boot (its output directory and its
checkpoint) in the project cache under the hash of the gem5 binary, the
kernel, the image, configs/ and the boot's flags, and a later session with
the same inputs reads that boot instead of booting again (the sweep does the
same with its checkpoints). Any changed input boots afresh;
``NUMA_LB_GEM5_TEST_FRESH_BOOT=1`` always does, outside the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from analysis.cache import cache_root, default_gem5
from analysis.sweep import provenance as pv
from analysis.sweep import staging

REPO = Path(__file__).resolve().parents[2]
for p in (REPO / "configs", REPO / "disk-image", REPO / "kernel-patches", REPO):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

GEM5 = default_gem5()[0] or ""  # $GEM5, else the cached build (analysis/cache.py)
BOOT_TIMEOUT_S = 4 * 3600
RUN_TIMEOUT_S = 4 * 3600
# the boot-fixed 4 x 2 machine (one checkpoint for both modules)
BOOT_MACHINE = ["--sockets", "4", "--cores-per-socket", "2", "--mem-per-node", "512MiB",
                "--slit-remote-distance", "16"]  # fmt: skip
# a link latency, not a factor: the tier needs no calibration table of this machine
MACHINE = [*BOOT_MACHINE, "--link-latency", "58"]


def why_not() -> str | None:
    if not GEM5 or not os.access(GEM5, os.X_OK):
        return "no gem5 binary: " + default_gem5()[1]
    return None


def artifacts_or_skip() -> dict[str, Path]:
    """The release kernel and the disk image (built on demand); skips without gem5."""
    why = why_not()
    if why:
        pytest.skip(f"SKIPPED gem5: {why}")
    import build_image  # noqa: PLC0415
    import kbuild  # noqa: PLC0415

    kernel = Path(os.environ.get("NUMA_LB_VMLINUX") or kbuild.build("release", None) / "vmlinux")
    return {"kernel": kernel, "image": build_image.build()}


def gem5(outdir: Path, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    cmd = [GEM5, f"--outdir={outdir}", str(REPO / "configs" / "numa_run.py"), *args]
    outdir.mkdir(parents=True, exist_ok=True)
    with open(outdir.parent / f"{outdir.name}.log", "w") as log:
        run = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                             timeout=timeout, check=False)  # fmt: skip
    run.stdout = (outdir.parent / f"{outdir.name}.log").read_text()
    return run


_BASES: dict[str, Path] = {}  # this session's base directory, made once


def session_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the boot checkpoint and the restored runs go: $NUMA_LB_GEM5_DAEMON_DIR
    (kept: its checkpoint and finished runs are reused), else one temporary
    directory for the whole session, so both modules restore from one boot."""
    env = os.environ.get("NUMA_LB_GEM5_DAEMON_DIR")
    if env:
        return Path(env)
    if "tmp" not in _BASES:
        _BASES["tmp"] = tmp_path_factory.mktemp("daemons")
    return _BASES["tmp"]


FRESH_BOOT_ENV = "NUMA_LB_GEM5_TEST_FRESH_BOOT"


def boot_args(artifacts: dict[str, Path], machine: list[str], cpt: Path) -> list[str]:
    return [*machine, "--kernel", str(artifacts["kernel"]),
            "--disk-image", str(artifacts["image"]), "--take-checkpoint", str(cpt)]  # fmt: skip


def boot_key(artifacts: dict[str, Path], machine: list[str]) -> str:
    """The hash of everything a boot's result depends on."""
    parts = {
        "gem5": pv.cached_sha256(Path(GEM5)),
        "kernel": pv.cached_sha256(artifacts["kernel"]),
        "image": pv.cached_sha256(artifacts["image"]),
        "configs": pv.tree_hash(REPO / "configs"),
        "args": machine,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def cached_boot(base: Path, artifacts: dict[str, Path], machine: list[str],
                timeout: float = BOOT_TIMEOUT_S) -> Path:  # fmt: skip
    """BASE with BASE/boot (the boot's gem5 output) and BASE/cpt (its
    checkpoint): links into the project cache's test boot of these inputs,
    booted there once (``staging.build_once``: concurrent sessions wait for
    one boot); with $NUMA_LB_GEM5_TEST_FRESH_BOOT=1 booted here, uncached."""
    base.mkdir(parents=True, exist_ok=True)
    if os.environ.get(FRESH_BOOT_ENV) == "1":
        run = gem5(base / "boot", boot_args(artifacts, machine, base / "cpt"), timeout)
        assert run.returncode == 0, run.stdout[-4000:]
        return base
    key = boot_key(artifacts, machine)
    store = cache_root() / "test-boots"
    failed: list[str] = []

    def boot(tmp: Path) -> None:
        t0 = time.monotonic()
        run = gem5(tmp / "boot", boot_args(artifacts, machine, tmp / "cpt"), timeout)
        if run.returncode != 0:
            failed.append(run.stdout[-4000:])
            raise RuntimeError(f"boot failed (gem5 exit {run.returncode})")
        (tmp / "made.json").write_text(json.dumps(
            {"key": key, "host_s": round(time.monotonic() - t0, 1), "machine": machine,
             "at": time.strftime("%Y-%m-%dT%H:%M:%S")}))  # fmt: skip

    try:
        done = staging.build_once(store, key, boot, what="gem5 test boot")
    except RuntimeError as e:
        raise AssertionError(f"{e}\n{failed[0] if failed else ''}") from None
    made = json.loads((done / "made.json").read_text())
    print(f"gem5 test boot {key}: {done} (booted {made['at']} in {made['host_s']} s; "
          f"{FRESH_BOOT_ENV}=1 boots afresh)")  # fmt: skip
    for name in ("boot", "cpt"):
        link = base / name
        if not link.exists():
            link.symlink_to(done / name, target_is_directory=True)
    return base


def boot_checkpoint(base: Path, artifacts: dict[str, Path], machine: list[str]) -> Path:
    """BASE with the boot checkpoint in BASE/cpt (a kept BASE's own, else
    ``cached_boot``'s)."""
    if not (base / "cpt" / "m5.cpt").is_file():
        cached_boot(base, artifacts, machine)
    return base


def restore_job(
    boot: Path, artifacts: dict[str, Path], name: str, job: dict[str, Any], machine: list[str]
) -> Path:
    """BOOT/NAME: the outdir of a run of JOB restored from BOOT/cpt on MACHINE
    (reused when its guest status is there: a kept directory)."""
    out = boot / name
    if (out / "guest" / "status.json").is_file():  # a kept directory: reuse
        return out
    (boot / f"{name}.job.json").write_text(json.dumps(job))
    run = gem5(
        out,
        [*machine, "--kernel", str(artifacts["kernel"]),
         "--disk-image", str(artifacts["image"]), "--job", str(boot / f"{name}.job.json"),
         "--restore-checkpoint", str(boot / "cpt")],
        RUN_TIMEOUT_S,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:]
    return out


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
