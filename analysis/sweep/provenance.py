"""Ids of what a run depends on: kernel build, image, code revision, gem5/QEMU.

Everything here is deterministic in its inputs; the expensive ones (SHA-256 of
a gem5 binary or a disk image) are cached by (path, size, mtime_ns) in
``$NUMA_LB_CACHE/hashes.json`` (default ~/.cache/numa-lb-study).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from analysis.cache import cache_root, provenance_path

from ..progress import Heartbeat

ROOT = Path(__file__).resolve().parents[2]
CODE_SUFFIXES = (".py", ".json", ".csv", ".toml")


class PrerequisiteError(RuntimeError):
    """A prerequisite is missing; the message says what and how to get it."""


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


def cached_sha256(path: Path, store: bool = True) -> str:
    """SHA-256 of a big file, cached by (resolved path, size, mtime_ns).

    store=False (a dry run) reads the cache but never writes it.
    """
    path = Path(path).resolve()
    st = path.stat()
    key = f"{path}\0{st.st_size}\0{st.st_mtime_ns}"
    db_path = cache_root() / "hashes.json"
    try:
        db = json.loads(db_path.read_text())
    except (OSError, ValueError):
        db = {}
    if key in db:
        return db[key]
    digest = sha256_file(path)
    if not store:
        return digest
    db[key] = digest
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = db_path.with_name(f".hashes.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(db, indent=0))
        os.replace(tmp, db_path)
    except OSError:
        pass  # the cache is an optimisation only
    return digest


def tree_hash(
    root: Path, suffixes: tuple[str, ...] = CODE_SUFFIXES, exclude: tuple[str, ...] = ()
) -> str:
    """Hash of the files (relative path + content) of a source tree; caches and
    the relative paths in ``exclude`` skipped."""
    h = hashlib.sha256()
    files = sorted(
        p
        for p in Path(root).rglob("*")
        if p.is_file()
        and p.suffix in suffixes
        and "__pycache__" not in p.parts
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and str(p.relative_to(root)) not in exclude
    )
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def code_revision(backend: str) -> dict[str, str]:
    """Hashes of the project code a backend's results depend on.

    configs/ builds the machine (gem5) and the Topology both backends use; the
    QEMU backend also depends on disk-image/qemu_boot.py. workloads/ reaches the
    guest through the image, so the image id covers it.
    """
    rev = {"configs": tree_hash(ROOT / "configs")}
    if backend == "qemu":
        qb = ROOT / "disk-image" / "qemu_boot.py"
        rev["qemu_boot"] = sha256_file(qb) if qb.exists() else "absent"
    return rev


def _run(cmd: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


# -------------------------------------------------------------------- kernel
def kernel_artifacts(variant: str, build: bool) -> Path:
    """The kernel artifact dir (kernel-patches/kbuild.py); builds it when asked."""
    cmd = [sys.executable, str(ROOT / "kernel-patches" / "kbuild.py"), "build" if build else "path"]
    cmd += ["--variant", variant]
    # stdout: the artifact dir; kbuild's phases and make's progress come on stderr
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if r.returncode != 0 or not r.stdout.strip():
        raise PrerequisiteError(
            f"kernel: `{' '.join(cmd[1:])}` failed (exit {r.returncode}); see its messages above"
        )
    return Path(r.stdout.strip().splitlines()[-1])


def kernel_build_id(art: Path, need_built: bool) -> str:
    bj = art / "build.json"
    if bj.exists():
        return str(json.loads(bj.read_text())["build_id"])
    if need_built:
        raise PrerequisiteError(
            f"kernel: {bj} missing; build it with `kernel-patches/kbuild.py build` "
            "(or drop --no-build)"
        )
    return art.name  # kbuild names the artifact dir after the build id


# --------------------------------------------------------------------- image
# disk-image/README.md and workloads/README.md, the 2-core build machine
IMAGE_TYPICAL = (
    "a clean build took 104 s, 93 s of them debootstrap downloading from deb.debian.org; "
    "with PARSEC_SRC its 15 programs add 90-120 s; cached afterwards"
)


def image_path(build: bool, need_built: bool = True) -> Path:
    """The image (disk-image/build_image.py build|path). Unbuilt and not needed
    (a dry run): a placeholder named after the image key (`build_image.py key`)."""
    tool = ROOT / "disk-image" / "build_image.py"
    if not tool.exists():
        raise PrerequisiteError(
            "disk image: disk-image/build_image.py does not exist yet (the image tool is "
            "being written); the qemu and gem5 backends need its image"
        )
    cmd = [sys.executable, str(tool), "build" if build else "path"]
    # stdout: the image path; build_image.py (and build_parsec.py) log phases on
    # stderr; a line a minute while a step is quiet (only a build takes that long).
    # `path` says on stderr that there is no image yet: not an error for a dry
    # run (its plan says what will be built), so it is kept for the message.
    with Heartbeat(
        "run_all", "building the guest image (disk-image/build_image.py)", IMAGE_TYPICAL
    ):
        r = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=None if build else subprocess.PIPE, text=True,
            check=False,
        )  # fmt: skip
    if r.returncode == 0 and r.stdout.strip():
        return Path(r.stdout.strip().splitlines()[-1])
    if not build and not need_built:
        k = subprocess.run(
            [sys.executable, str(tool), "key"], stdout=subprocess.PIPE, text=True, check=False
        )
        for line in k.stdout.splitlines():
            if line.startswith("image "):
                return Path(f"unbuilt-image-{line.split()[1]}")
    hint = "" if build else "; build it with `disk-image/build_image.py build` (or drop --no-build)"
    said = (r.stderr or "").strip().splitlines()[-1:]
    raise PrerequisiteError(
        f"disk image: `{' '.join(cmd[1:])}` failed (exit {r.returncode}){hint}"
        + (f" ({said[0]})" if said else "")
    )


def image_id(path: Path, need_built: bool) -> str:
    """The image's own id if the image tool records one, else its SHA-256."""
    for meta in (path.with_suffix(".json"), path.parent / "image.json", path / "image.json"):
        if meta.is_file():
            try:
                d = json.loads(meta.read_text())
            except ValueError:
                continue
            for k in ("image_id", "id", "build_id"):
                if isinstance(d.get(k), str):
                    return d[k]
    if path.is_file():
        return "sha256:" + cached_sha256(path, store=need_built)
    if path.name.startswith("unbuilt-image-"):
        return path.name.removeprefix("unbuilt-image-")  # build_image.py's image key = its id
    if need_built:
        raise PrerequisiteError(
            f"disk image: {path} does not exist; build it with "
            "`disk-image/build_image.py build` (or drop --no-build)"
        )
    return f"unbuilt:{path.name}"


# ---------------------------------------------------------------------- gem5
GEM5_INFO_SCRIPT = Path(__file__).resolve().parents[2] / "configs" / "gem5_info.py"
GEM5_REQUIRED = {"version": "24.0.0.1", "PROTOCOL": "MOESI_hammer", "USE_X86_ISA": True}


def gem5_version(binary: Path) -> tuple[str, dict[str, str]]:
    """(version, build options) of a gem5 binary, from configs/gem5_info.py.

    (gem5 v24.0.0.1's own ``--build-info`` fails.) A binary that is not v24.0.0.1
    built for X86 with MOESI_hammer is a missing prerequisite.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gem5-info-") as tmp:
        r = _run([str(binary), f"--outdir={tmp}", str(GEM5_INFO_SCRIPT)], timeout=120)
    line = next((x for x in r.stdout.splitlines() if x.startswith("GEM5_INFO ")), None)
    if r.returncode != 0 or line is None:
        raise PrerequisiteError(
            f"gem5: `{binary} configs/gem5_info.py` failed (exit {r.returncode}): "
            f"{(r.stderr or r.stdout).strip()[-300:]}"
        )
    info = json.loads(line.removeprefix("GEM5_INFO "))
    build = info.get("build", {})
    got = {
        "version": info.get("version"),
        **{k: build.get(k) for k in GEM5_REQUIRED if k != "version"},
    }
    if got != GEM5_REQUIRED:
        raise PrerequisiteError(
            f"gem5: {binary} is {got}; the study needs {GEM5_REQUIRED} (see README, gem5)"
        )
    return str(info["version"]), {k: str(v) for k, v in build.items()}


def gem5_build_provenance(binary: Path) -> dict[str, Any] | None:
    """The build provenance build-gem5 wrote beside @binary (analysis/gem5_build.py):
    its path, SHA-256 and content, and whether it records this binary's SHA-256.
    None when the binary was not built by build-gem5 (a gem5 built by hand)."""
    f = provenance_path(Path(binary).resolve())
    try:
        raw = f.read_bytes()
        content = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(content, dict):
        return None
    return {
        "file": str(f),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "records_this_binary": content.get("binary_sha256") == cached_sha256(Path(binary)),
        "content": content,
    }


def qemu_version() -> str:
    try:
        r = _run(["qemu-system-x86_64", "--version"], timeout=30)
    except FileNotFoundError:
        raise PrerequisiteError(
            "qemu: qemu-system-x86_64 not found (Debian package qemu-system-x86; run .ci/setup)"
        ) from None
    return r.stdout.splitlines()[0].strip() if r.stdout else "unknown"


def summary(prov: Any) -> dict[str, Any]:
    return prov.to_dict() if hasattr(prov, "to_dict") else dict(prov)
