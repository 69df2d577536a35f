#!/usr/bin/env python3
"""Build the study's guest disk image: Debian bookworm + our init, m5 tool and workloads.

    disk-image/build_image.py build [--force] [--rootfs-only]   build (cached), print the image
    disk-image/build_image.py path                              print the image for the current
                                                                inputs (exit 1 if not built)
    disk-image/build_image.py overlay SRC DST [--partition N]   copy SRC (e.g. gem5 resources'
                                                                x86-parsec) to DST and add our
                                                                files, without mounting
    disk-image/build_image.py info                              the cached image's image.json

The image is a raw disk with an MBR and one ext4 partition at 1 MiB, whose
PARTUUID (disk signature from the image key, "-01") is the root the kernel
mounts (root=PARTUUID=..., recorded in image.json): QEMU's libata probes its
three IDE disks in parallel, and the root disk was sometimes sdc, never mind
what it was called at boot. Built without mounting anything:

1. rootfs stage: `debootstrap --variant=minbase --include=<PACKAGES> bookworm`
   into a directory (as root), stripped of docs, man pages, locales and apt
   caches.  Cached under <cache>/images/rootfs/<rootfs key>/tree; the key
   hashes the suite, variant, package list and ROOTFS_RECIPE, so a change of
   our own files never re-runs debootstrap.
2. image stage: `mke2fs -t ext4 -d <tree>` into a sparse file, then our files
   (`make -C workloads install DESTDIR=.. PREFIX=/opt/numa-lb`, the init, a
   manifest) are written into the filesystem with `debugfs -w` -- the same
   overlay that puts them into a foreign image (PARSEC) -- and read back and
   compared, then `e2fsck -fn`.  Cached under <cache>/images/<image key>/
   {rootfs.img, image.json}; the image key hashes the rootfs key, every file
   we add (sources) and this script.

With PARSEC (PARSEC_SRC set, or --parsec-src; official input tarballs from
PARSEC_INPUTS or --parsec-inputs): the programs and inputs that
workloads/parsec/build_parsec.py builds from that tree (cached outside the
repo) go to /opt/numa-lb/parsec, image.json records them, and the image key
also hashes the PARSEC build id. Without PARSEC_SRC the image and its key are
what they are without PARSEC.

<cache> is $NUMA_LB_CACHE or ~/.cache/numa-lb-study.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "configs"))
from numa_lb.kernel_cmdline import INIT_PATH, guest_args  # noqa: E402 - one command line

WORKLOADS = ROOT / "workloads"
DAEMONS = ROOT / "daemons"
INIT = HERE / "init" / "numa-lb-init"
PREFIX = "/opt/numa-lb"
assert INIT_PATH == f"{PREFIX}/sbin/numa-lb-init", "the init lives under PREFIX"
MANIFEST_PATH = f"{PREFIX}/manifest.json"

SUITE = "bookworm"
VARIANT = "minbase"
MIRROR = os.environ.get("NUMA_LB_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# numactl: pinning scenarios; procps: ps/top/vmstat; python3: the init and the
# mix runner (full python3, not python3-minimal: ctypes, json, tarfile...);
# linux-perf: software events (works in gem5); busybox: a second set of tools.
PACKAGES = ("numactl", "procps", "python3", "linux-perf", "busybox")
# Removed from the tree after debootstrap (relative globs); nothing the guest runs.
STRIP = (
    "usr/share/doc/*",
    "usr/share/man/*",
    "usr/share/info/*",
    "usr/share/locale/*",
    "usr/share/lintian/*",
    "usr/share/bash-completion/*",
    "usr/share/common-licenses/*",
    "var/cache/apt/*.bin",
    "var/cache/apt/archives/*.deb",
    "var/lib/apt/lists/*_*",
    "var/cache/debconf/*-old",
    "var/lib/dpkg/*-old",
    "var/log/*.log",
    "var/log/apt/*",
)
# Bump when the rootfs steps below change in a way the key does not see.
ROOTFS_RECIPE = 1
HOSTNAME = "numalb"
# Image size: tree + our files, times HEADROOM, plus SLACK_MIB, rounded to 16 MiB.
HEADROOM = 1.25
SLACK_MIB = 64

SAFE_PATH = re.compile(r"/[A-Za-z0-9_.+@-]+(/[A-Za-z0-9_.+@-]+)*")
EXT4_MAGIC = 0xEF53


class ImageError(RuntimeError):
    pass


def log(msg: str) -> None:
    # stderr: stdout carries only the answer (the image path), as for kbuild.py
    print(f"build_image: {msg}", file=sys.stderr, flush=True)


def cache_base() -> Path:
    env = os.environ.get("NUMA_LB_CACHE")
    return (Path(env) if env else Path.home() / ".cache" / "numa-lb-study") / "images"


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """Run without a shell; raise with the output tail on failure."""
    proc = subprocess.run(cmd, text=True, capture_output=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise ImageError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{tail}")
    return proc


def stream(cmd: list[str], prefix: str, env: dict[str, str] | None = None) -> None:
    """Run a long command, echoing its output (progress); raise on failure."""
    proc = subprocess.Popen(
        cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-40:]
        print(f"{prefix}: {line}", file=sys.stderr, flush=True)
    if proc.wait() != 0:
        raise ImageError(f"{' '.join(cmd)} failed ({proc.returncode}):\n" + "\n".join(tail))


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Serialise builds (a test tier and a user may build at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------ keys


def rootfs_recipe() -> dict[str, object]:
    return {
        "suite": SUITE,
        "variant": VARIANT,
        "packages": sorted(PACKAGES),
        "strip": list(STRIP),
        "hostname": HOSTNAME,
        "recipe": ROOTFS_RECIPE,
    }


def rootfs_key(recipe: dict[str, object] | None = None) -> str:
    data = json.dumps(recipe or rootfs_recipe(), sort_keys=True).encode()
    return sha256_bytes(data)[:16]


def input_files(workloads: Path = WORKLOADS, init: Path = INIT) -> dict[str, Path]:
    """Every source file whose content ends up in the image, by stable name.

    The workload sources (Makefiles, C, headers, Python) rather than the
    compiled binaries: the key must be computable without building, and a
    change of the sources is what makes a rebuild necessary.
    """
    files: dict[str, Path] = {}
    for p in sorted(workloads.rglob("*")):
        rel = p.relative_to(workloads)
        if not p.is_file() or any(part in ("build", "__pycache__") for part in rel.parts):
            continue
        if rel.parts[0] == "parsec":  # the host-side PARSEC build tool: its build id is hashed
            continue
        if p.name == "Makefile" or p.suffix in (".c", ".h", ".py"):
            files[f"workloads/{rel.as_posix()}"] = p
    for p in sorted(DAEMONS.glob("*")):  # the policy daemons and their counter library
        if p.is_file() and (p.name == "Makefile" or p.suffix in (".c", ".h", ".py")):
            files[f"daemons/{p.name}"] = p
    # built into the image by workloads/src/Makefile (kMLB's page-fault cost)
    files["kernel-patches/guest/fault_bench.c"] = ROOT / "kernel-patches/guest/fault_bench.c"
    files["disk-image/init/numa-lb-init"] = init
    for p in sorted(init.parent.glob("*.py")):  # the init's phase modules, next to it
        files[f"disk-image/init/{p.name}"] = p
    files["disk-image/build_image.py"] = Path(__file__).resolve()
    return files


def image_key(
    rkey: str | None = None, files: dict[str, Path] | None = None, parsec: str | None = "env"
) -> str:
    """PARSEC: the PARSEC build id to include ("env": the one PARSEC_SRC selects,
    None without PARSEC: then the key is the same as an image's without PARSEC)."""
    files = input_files() if files is None else files
    parsec = parsec_build_id() if parsec == "env" else parsec
    h = hashlib.sha256()
    h.update(f"rootfs {rkey or rootfs_key()}\n".encode())
    for name in sorted(files):
        h.update(f"{name} {sha256_file(files[name])}\n".encode())
    if parsec is not None:
        h.update(f"parsec {parsec}\n".encode())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------ PARSEC


def parsec_selection():  # -> build_parsec.Selection | None
    """The PARSEC build PARSEC_SRC (and PARSEC_INPUTS) select; None when unset."""
    if not os.environ.get("PARSEC_SRC"):
        return None
    sys.path.insert(0, str(WORKLOADS / "parsec"))
    import build_parsec  # noqa: PLC0415 - only with PARSEC

    try:
        return build_parsec.Selection.make()
    except Exception as e:  # BuildError, TreeError: say so as an image error
        raise ImageError(f"PARSEC: {e}") from None


_PARSEC_IDS: dict[tuple[str, str], str] = {}


def parsec_build_id() -> str | None:
    """The selected PARSEC build's id (hashes its tree, tool and compiler), or None."""
    env = (os.environ.get("PARSEC_SRC", ""), os.environ.get("PARSEC_INPUTS", ""))
    if not env[0]:
        return None
    if env not in _PARSEC_IDS:
        sel = parsec_selection()
        import build_parsec  # noqa: PLC0415 - parsec_selection put it on sys.path

        _PARSEC_IDS[env] = build_parsec.build_id(sel)
    return _PARSEC_IDS[env]


def build_parsec_for_image() -> tuple[Path, dict[str, object]] | None:
    """Build (cached) the selected PARSEC programs; (install dir, image.json record)."""
    sel = parsec_selection()
    if sel is None:
        return None
    import build_parsec  # noqa: PLC0415

    bdir = build_parsec.build(sel)
    meta = json.loads((bdir / "build.json").read_text())
    man = build_parsec.manifest(bdir)
    rec = {
        "build_id": meta["build_id"],
        "root": f"{PREFIX}/parsec",
        "launcher": "numa-lb",
        "config": man["config"],
        "work_id": man["work_id"],
        "source": meta["source"],
        "official_inputs_dir": meta["official_inputs_dir"],
        "programs": {
            p: {s: e["inputs"][s]["source"] for s in sorted(e["inputs"])}
            for p, e in sorted(man["programs"].items())
        },
        "unavailable": meta["unavailable"],
    }
    return bdir / "install", rec


def rootfs_dir(rkey: str | None = None) -> Path:
    return cache_base() / "rootfs" / (rkey or rootfs_key())


def image_dir(key: str | None = None) -> Path:
    return cache_base() / (key or image_key())


def image_path(key: str | None = None) -> Path:
    return image_dir(key) / "rootfs.img"


# ------------------------------------------------------------------ rootfs


def read_dpkg_status(tree: Path) -> list[dict[str, str]]:
    """Installed packages (name, version, arch) from var/lib/dpkg/status, no chroot."""
    text = (tree / "var/lib/dpkg/status").read_text(errors="replace")
    pkgs = []
    for para in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in para.splitlines():
            if line and not line[0].isspace() and ":" in line:
                k, v = line.split(":", 1)
                fields[k] = v.strip()
        if fields.get("Package") and "installed" in fields.get("Status", "").split():
            pkgs.append(
                {
                    "name": fields["Package"],
                    "version": fields.get("Version", ""),
                    "arch": fields.get("Architecture", ""),
                }
            )
    return sorted(pkgs, key=lambda p: p["name"])


def tree_bytes(tree: Path) -> int:
    """Allocated size of a directory tree (what mke2fs will need, roughly)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            total += max(st.st_blocks * 512, 4096 if not name.startswith(".") else 0)
    return total


def strip_tree(tree: Path) -> int:
    """Delete STRIP globs; return bytes freed."""
    freed = 0
    for pattern in STRIP:
        for p in tree.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                freed += tree_bytes(p)
                shutil.rmtree(p)
            else:
                freed += p.lstat().st_blocks * 512
                p.unlink()
    return freed


def build_rootfs(force: bool = False) -> Path:
    """The stripped debootstrap tree (cached). Needs root (debootstrap).
    rootfs.json beside it records the packages and the debootstrap time."""
    rdir = rootfs_dir()
    tree = rdir / "tree"
    with locked(cache_base() / "rootfs.lock"):
        if (rdir / "rootfs.json").exists() and not force:
            log(f"rootfs {rdir.name}: cached ({tree})")
            return tree
        if os.geteuid() != 0:
            raise ImageError("debootstrap needs root (run as root or under sudo)")
        if not shutil.which("debootstrap"):
            raise ImageError("debootstrap not found: apt-get install debootstrap")
        if rdir.exists():
            shutil.rmtree(rdir)
        work = rdir.with_name(rdir.name + ".tmp")
        if work.exists():
            shutil.rmtree(work)
        debs = cache_base() / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        (work / "tree").mkdir(parents=True)
        t0 = time.monotonic()
        cmd = [
            "debootstrap",
            f"--variant={VARIANT}",
            f"--include={','.join(PACKAGES)}",
            f"--cache-dir={debs}",
            SUITE,
            str(work / "tree"),
            MIRROR,
        ]
        log(f"rootfs {rdir.name}: {' '.join(cmd)}")
        stream(cmd, "debootstrap")
        t_boot = time.monotonic() - t0
        t = work / "tree"
        before = tree_bytes(t)
        freed = strip_tree(t)
        (t / "etc/hostname").write_text(HOSTNAME + "\n")
        (t / "etc/fstab").write_text("# numa-lb-init mounts what it needs; root is the kernel's\n")
        for d in ("proc", "sys", "dev", "run", "tmp"):
            (t / d).mkdir(exist_ok=True)
        pkgs = read_dpkg_status(t)
        meta = {
            "rootfs_key": rdir.name,
            "recipe": rootfs_recipe(),
            "mirror": MIRROR,
            "debootstrap_version": run(
                ["dpkg-query", "-W", "-f=${Version}", "debootstrap"]
            ).stdout.strip(),
            "debootstrap_s": round(t_boot, 1),
            "bytes_before_strip": before,
            "bytes_stripped": freed,
            "bytes": tree_bytes(t),
            "packages": pkgs,
            "built_unix": int(time.time()),
        }
        (work / "rootfs.json").write_text(json.dumps(meta, indent=1) + "\n")
        work.rename(rdir)
        log(
            f"rootfs {rdir.name}: {len(pkgs)} packages, {meta['bytes'] >> 20} MiB "
            f"({freed >> 20} MiB stripped), debootstrap {t_boot:.0f} s"
        )
        return tree


# ------------------------------------------------------------------ ext4 without mounting


PART_OFFSET = 1 << 20  # the ext4 partition starts at 1 MiB (LBA 2048), as fdisk aligns
SECTOR = 512


def disk_signature(key: str) -> int:
    """The MBR disk signature, from the image key: reproducible and never 0."""
    sig = int(hashlib.sha256(f"numa-lb-study/mbr/{key}".encode()).hexdigest()[:8], 16)
    return sig or 1


def root_partuuid(signature: int) -> str:
    """What the kernel's root=PARTUUID= names for partition 1 of an MBR disk."""
    return f"{signature:08x}-01"


def write_mbr(image: Path, signature: int, start: int, size: int) -> None:
    """An MBR with one Linux partition (type 0x83) at START bytes, SIZE bytes long."""
    mbr = bytearray(SECTOR)
    struct.pack_into("<I", mbr, 440, signature)
    chs = b"\xfe\xff\xff"  # LBA only
    mbr[446:462] = struct.pack("<B3sB3sII", 0, chs, 0x83, chs, start // SECTOR, size // SECTOR)
    mbr[510:512] = b"\x55\xaa"
    with open(image, "r+b") as f:
        f.write(mbr)


def mkfs(
    tree: Path,
    image: Path,
    size_bytes: int,
    fs_uuid: str,
    label: str = "numalb-root",
    offset: int = 0,
) -> None:
    """mke2fs -t ext4 -d TREE into a sparse file: SIZE_BYTES of filesystem at OFFSET."""
    image.parent.mkdir(parents=True, exist_ok=True)
    if image.exists():
        image.unlink()
    with open(image, "wb") as f:
        f.truncate(offset + size_bytes)
    env = dict(os.environ, E2FSPROGS_FAKE_TIME=str(int(time.time())))
    extended = f"root_owner=0:0,hash_seed={fs_uuid}" + (f",offset={offset}" if offset else "")
    cmd = [
        "mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-L", label, "-U", fs_uuid,
        "-E", extended, "-m", "0", "-d", str(tree), str(image), str(size_bytes // 4096),
    ]  # fmt: skip
    run(cmd, env=env)


def fsck(image: Path, offset: int = 0) -> None:
    """Read-only full check (e2fsck -fn): exit 0 only for a clean filesystem."""
    run(["e2fsck", "-fn", _fs(image, offset)])


@dataclass(frozen=True)
class Entry:
    """One path to put into an ext4 filesystem: a directory (src None) or a file."""

    path: str  # absolute path inside the filesystem
    mode: int  # permission bits
    src: Path | None = None

    def __post_init__(self) -> None:
        if not SAFE_PATH.fullmatch(self.path) or "/../" in self.path + "/" or "/./" in self.path:
            raise ImageError(f"unsafe path for the overlay: {self.path!r}")


def entries_from_tree(staging: Path) -> list[Entry]:
    """Entries for every directory and regular file under STAGING (parents first)."""
    out: list[Entry] = []
    for p in sorted(staging.rglob("*")):
        rel = "/" + p.relative_to(staging).as_posix()
        st = p.lstat()
        if p.is_symlink():
            raise ImageError(f"symlinks are not supported by the overlay: {rel}")
        if p.is_dir():
            out.append(Entry(rel, st.st_mode & 0o7777))
        elif p.is_file():
            out.append(Entry(rel, st.st_mode & 0o7777, p))
        else:
            raise ImageError(f"not a file or directory: {rel}")
    return out


def _fs(image: Path, offset: int) -> str:
    # unix_io's "?offset=" option: a filesystem inside a partitioned image
    return f"{image}?offset={offset}" if offset else str(image)


def debugfs(image: Path, request: str, offset: int = 0) -> str:
    """One read-only debugfs request (-R), its stdout."""
    return run(["debugfs", "-R", request, _fs(image, offset)]).stdout


def ls_dir(image: Path, path: str, offset: int = 0) -> dict[str, int] | None:
    """{name: mode} of a directory inside the filesystem; None when it does not exist."""
    proc = subprocess.run(
        ["debugfs", "-R", f"ls -p {path}", _fs(image, offset)], text=True, capture_output=True
    )
    out: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        # /inode/mode/uid/gid/name/size/
        parts = line.strip().split("/")
        if len(parts) >= 7 and parts[1].isdigit():
            if parts[5] not in (".", ".."):
                out[parts[5]] = int(parts[2], 8)
    missing = ("File not found", "Ext2 inode is not a directory")
    if not out and any(m in proc.stderr for m in missing):
        return None
    if proc.returncode != 0:
        raise ImageError(f"debugfs ls {path}: {proc.stderr.strip()}")
    return out


def _parent(path: str) -> tuple[str, str]:
    head, _, name = path.rpartition("/")
    return head or "/", name


def overlay_commands(entries: list[Entry], existing: dict[str, dict[str, int] | None]) -> list[str]:
    """The debugfs -w script that puts ENTRIES into a filesystem.

    EXISTING maps each parent directory to its listing (ls_dir) before the
    change, None when the directory does not exist yet.  Existing files are
    replaced, existing directories kept as they are; what we create is owned
    by root with the entry's mode.
    """
    cmds: list[str] = []
    created: set[str] = set()
    for e in entries:
        parent, name = _parent(e.path)
        listing = existing.get(parent)
        present = None if parent in created or listing is None else listing.get(name)
        if e.src is None:
            if present is None:
                cmds.append(f"mkdir {e.path}")
                created.add(e.path)
            elif present & 0o170000 != 0o040000:
                raise ImageError(f"{e.path} exists in the image and is not a directory")
            else:
                continue  # an existing directory (/opt) keeps its mode and owner
            cmds.append(f"sif {e.path} mode 0{0o040000 | e.mode:o}")
        else:
            if present is not None:
                if present & 0o170000 == 0o040000:
                    raise ImageError(f"{e.path} exists in the image as a directory")
                cmds.append(f"rm {e.path}")
            # debugfs "write" links the name into the cwd verbatim: cd first
            cmds.append(f"cd {parent}")
            cmds.append(f"write {e.src} {name}")
            cmds.append(f"sif {e.path} mode 0{0o100000 | e.mode:o}")
        cmds.append(f"sif {e.path} uid 0")
        cmds.append(f"sif {e.path} gid 0")
    return cmds


def apply_overlay(image: Path, entries: list[Entry], offset: int = 0) -> None:
    """Write ENTRIES into the ext4 filesystem at OFFSET of IMAGE with debugfs -w, then
    read every file back and compare content and mode."""
    for e in entries:
        if e.src is not None and (" " in str(e.src) or '"' in str(e.src)):
            raise ImageError(f"source path with spaces or quotes: {e.src}")
    parents = sorted({_parent(e.path)[0] for e in entries}, key=lambda p: p.count("/"))
    existing = {p: ls_dir(image, p, offset) for p in parents}
    cmds = overlay_commands(entries, existing)
    with tempfile.NamedTemporaryFile("w", suffix=".debugfs") as script:
        script.write("\n".join(cmds) + "\n")
        script.flush()
        proc = run(["debugfs", "-w", "-f", script.name, _fs(image, offset)])
    # debugfs -f goes on after a failing command and still exits 0: check its
    # error lines, then check the result itself.
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("debugfs ")]
    if errors:
        raise ImageError("debugfs overlay errors:\n" + "\n".join(errors[:20]))
    verify_overlay(image, entries, offset)


def verify_overlay(image: Path, entries: list[Entry], offset: int = 0) -> None:
    """Every entry is in the filesystem with our mode; files byte-identical."""
    listings: dict[str, dict[str, int] | None] = {}
    with tempfile.TemporaryDirectory(prefix="numa-lb-verify-") as tmp:
        for i, e in enumerate(entries):
            parent, name = _parent(e.path)
            if parent not in listings:
                listings[parent] = ls_dir(image, parent, offset)
            mode = (listings[parent] or {}).get(name)
            if e.src is None:
                if mode is None or mode & 0o170000 != 0o040000:
                    raise ImageError(f"overlay check: {e.path} is not a directory")
                continue
            if mode != 0o100000 | e.mode:
                want = f"0{0o100000 | e.mode:o}"
                raise ImageError(f"overlay check: {e.path} has mode {mode!r}, want {want}")
            if e.src is not None:
                out = Path(tmp) / str(i)
                run(["debugfs", "-R", f"dump {e.path} {out}", _fs(image, offset)])
                if not out.exists() or sha256_file(out) != sha256_file(e.src):
                    raise ImageError(f"overlay check: {e.path} differs from {e.src}")


# ------------------------------------------------------------------ partitions


def ext4_at(image: Path, offset: int) -> bool:
    with open(image, "rb") as f:
        f.seek(offset + 1024 + 56)
        magic = f.read(2)
    return len(magic) == 2 and struct.unpack("<H", magic)[0] == EXT4_MAGIC


def partitions(image: Path) -> list[tuple[int, int]]:
    """(start byte, size bytes) of each partition of an MBR or GPT disk image, in order."""
    with open(image, "rb") as f:
        mbr = f.read(512)
        if len(mbr) < 512 or mbr[510:512] != b"\x55\xaa":
            return []
        parts = []
        ents = [struct.unpack_from("<B3xB3xII", mbr, 446 + 16 * i) for i in range(4)]
        if any(t == 0xEE for _, t, _, _ in ents):
            f.seek(512)
            hdr = f.read(92)
            if hdr[:8] != b"EFI PART":
                raise ImageError(f"{image}: protective MBR but no GPT header")
            lba, count, size = struct.unpack_from("<QII", hdr, 72)
            f.seek(lba * 512)
            table = f.read(count * size)
            for i in range(count):
                ent = table[i * size : (i + 1) * size]
                first, last = struct.unpack_from("<QQ", ent, 32)
                if ent[:16] != bytes(16):
                    parts.append((first * 512, (last - first + 1) * 512))
            return parts
        for _, ptype, start, sectors in ents:
            if ptype and sectors:
                parts.append((start * 512, sectors * 512))
        return parts


def find_ext4(image: Path, partition: int | None = None) -> int:
    """Byte offset of the ext4 filesystem: the whole image, partition N (1-based), or
    the first partition holding one."""
    if partition is None and ext4_at(image, 0):
        return 0
    parts = partitions(image)
    if partition is not None:
        if not 1 <= partition <= len(parts):
            raise ImageError(f"{image}: no partition {partition} ({len(parts)} found)")
        off = parts[partition - 1][0]
        if not ext4_at(image, off):
            raise ImageError(f"{image}: partition {partition} holds no ext2/3/4 filesystem")
        return off
    for off, _ in parts:
        if ext4_at(image, off):
            return off
    raise ImageError(f"{image}: no ext2/3/4 filesystem on the disk or in any partition")


# ------------------------------------------------------------------ our files


def guest_python_version(tree: Path) -> tuple[int, int] | None:
    """The (major, minor) of the rootfs's python3 (usr/bin/python3.X), or None."""
    found = []
    for p in tree.glob("usr/bin/python3.*"):
        m = re.fullmatch(r"python3\.(\d+)", p.name)
        if m:
            found.append((3, int(m.group(1))))
    return max(found) if found else None


def compile_python(root: Path, version: tuple[int, int]) -> str:
    """Byte-compile our Python files under ROOT for the guest's interpreter.

    The guest runs with PYTHONDONTWRITEBYTECODE (no writes next to our files),
    so without a shipped __pycache__ every run compiles the mix runner's
    modules again: ~80 M instructions on the atomic CPU before the warm-up
    (measured with callgrind on Python 3.11: 205 M without, 126 M with the
    .pyc files for `mixrunner.py --dry-run`). unchecked-hash: the .pyc does
    not depend on file times. Needs a host interpreter of the same version
    (the bytecode format changes between minor versions); without one the
    image is built without them and says so.
    """
    want = f"python{version[0]}.{version[1]}"
    if sys.version_info[:2] == version:
        python = sys.executable
    else:
        python = shutil.which(want) or ""
    if not python:
        return f"no {want} on this host: the guest compiles our modules at every start"
    top = root / PREFIX.lstrip("/")
    run([python, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash",
         "-s", str(root), "-p", "/", str(top)])  # fmt: skip
    n = sum(1 for _ in top.rglob("*.pyc"))
    return f"{n} modules compiled for {want}"


def stage_files(
    tmp: Path, manifest: dict[str, object], parsec: Path | None = None,
    guest_python: tuple[int, int] | None = None,
) -> Path:  # fmt: skip
    """Our files under TMP/root as they go into the image: PREFIX/bin (make install:
    m5, the workloads, mixrunner.py and its mix_*.py, parsec_catalog.py; the
    policy daemons' Python files, their libnlbctr.so in PREFIX/lib),
    PREFIX/sbin/numa-lb-init with its init_*.py, and PREFIX/manifest.json.  The
    compile happens in TMP, not in the source tree. GUEST_PYTHON: byte-compile
    our modules for that interpreter (``compile_python``)."""
    root = tmp / "root"
    log("staging our files: make -C workloads install")
    run(
        [
            "make", "-s", "-C", str(WORKLOADS), "install", f"O={tmp / 'build'}",
            f"DESTDIR={root}", f"PREFIX={PREFIX}",
        ]
    )  # fmt: skip
    run(
        [
            "make", "-s", "-C", str(DAEMONS), "install", f"O={tmp / 'build-daemons'}",
            f"DESTDIR={root}", f"PREFIX={PREFIX}",
        ]
    )  # fmt: skip
    sbin = root / PREFIX.lstrip("/") / "sbin"
    sbin.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(INIT, sbin / "numa-lb-init")
    os.chmod(sbin / "numa-lb-init", 0o755)
    for p in sorted(INIT.parent.glob("*.py")):  # the init imports these from its own dir
        shutil.copyfile(p, sbin / p.name)
        os.chmod(sbin / p.name, 0o644)
    if parsec is not None:  # PREFIX/parsec: our PARSEC build (bin/, inputs/, parsec.json)
        log(f"staging PARSEC from {parsec}")
        shutil.copytree(parsec, root / PREFIX.lstrip("/") / "parsec", symlinks=False)
        for p in (root / PREFIX.lstrip("/") / "parsec").rglob("*"):
            if p.is_file():
                os.chmod(p, 0o755 if p.parent.name == "bin" else 0o644)
    if guest_python is not None:
        log(f"byte-compiling: {compile_python(root, guest_python)}")
    files = {
        "/" + p.relative_to(root).as_posix(): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    man = dict(manifest, files=files)
    (root / MANIFEST_PATH.lstrip("/")).write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    for p in root.rglob("*"):
        if p.is_dir():
            os.chmod(p, 0o755)
    return root


def fs_usage(image: Path, offset: int = 0) -> dict[str, int]:
    """Block counts from the superblock (dumpe2fs -h)."""
    out = run(["dumpe2fs", "-h", _fs(image, offset)]).stdout
    kv = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        kv[k.strip()] = v.strip()
    bs = int(kv["Block size"])
    total, free = int(kv["Block count"]), int(kv["Free blocks"])
    return {"fs_bytes": total * bs, "used_bytes": (total - free) * bs, "free_bytes": free * bs}


def tool_version(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, text=True, capture_output=True)
    return (proc.stdout + proc.stderr).strip().splitlines()[0] if proc.returncode == 0 else "?"


def build(force: bool = False, rebuild_rootfs: bool = False) -> Path:
    """Build (or find in the cache) the image for the current inputs; return its path."""
    t0 = time.monotonic()
    rkey = rootfs_key()
    key = image_key(rkey)
    idir = image_dir(key)
    parsec_id = parsec_build_id()
    img = idir / "rootfs.img"
    if (idir / "image.json").exists() and not (force or rebuild_rootfs):
        log(f"image {key}: cached")
        return img
    built_before = (rootfs_dir(rkey) / "rootfs.json").exists() and not rebuild_rootfs
    tree = build_rootfs(force=rebuild_rootfs)
    rmeta = json.loads((rootfs_dir(rkey) / "rootfs.json").read_text())
    parsec = build_parsec_for_image()
    if parsec is not None and parsec[1]["build_id"] != parsec_id:
        raise ImageError(f"PARSEC build {parsec[1]['build_id']} is not the keyed {parsec_id}")
    with locked(cache_base() / f"{key}.lock"):
        if (idir / "image.json").exists() and not (force or rebuild_rootfs):
            return img
        work = idir.with_name(idir.name + ".tmp")
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        with tempfile.TemporaryDirectory(prefix="numa-lb-image-") as tmp:
            t1 = time.monotonic()
            staged = stage_files(
                Path(tmp),
                {"kind": "numa-lb-image", "image_key": key, "rootfs_key": rkey,
                 "parsec_build_id": parsec_id},
                parsec[0] if parsec else None,
                guest_python_version(tree),
            )  # fmt: skip
            entries = entries_from_tree(staged)
            need = tree_bytes(tree) + tree_bytes(staged)
            size = int(need * HEADROOM) + (SLACK_MIB << 20)
            size = (size + (16 << 20) - 1) // (16 << 20) * (16 << 20)
            fs_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"numa-lb-study/image/{key}"))
            t2 = time.monotonic()
            log(f"image {key}: mke2fs -t ext4 -d {tree} ({size >> 20} MiB at 1 MiB)")
            img_path = work / "rootfs.img"
            mkfs(tree, img_path, size, fs_uuid, offset=PART_OFFSET)
            signature = disk_signature(key)
            write_mbr(img_path, signature, PART_OFFSET, size)
            t3 = time.monotonic()
            log(f"image {key}: debugfs -w: {len(entries)} entries under {PREFIX}")
            apply_overlay(img_path, entries, PART_OFFSET)
            t4 = time.monotonic()
            log(f"image {key}: e2fsck -fn")
            fsck(img_path, PART_OFFSET)
            t5 = time.monotonic()
            manifest = json.loads((staged / MANIFEST_PATH.lstrip("/")).read_text())
        usage = fs_usage(work / "rootfs.img", PART_OFFSET)
        root = f"PARTUUID={root_partuuid(signature)}"
        meta = {
            "image_id": key,  # what run provenance records (analysis/sweep/provenance.py)
            "image_key": key,
            "rootfs_key": rkey,
            "image": "rootfs.img",
            "format": "raw disk, MBR, ext4 in partition 1",
            "partition_offset": PART_OFFSET,
            "root": root,
            "size_bytes": (work / "rootfs.img").stat().st_size,
            "allocated_bytes": (work / "rootfs.img").stat().st_blocks * 512,
            **usage,
            "uuid": fs_uuid,
            "kernel_cmdline": " ".join(guest_args("qemu", INIT_PATH, root=root)),
            "init": INIT_PATH,
            "suite": SUITE,
            "mirror": rmeta["mirror"],
            "rootfs_bytes": rmeta["bytes"],
            "seconds": {
                "debootstrap": 0 if built_before else rmeta["debootstrap_s"],
                "stage_files": round(t2 - t1, 1),
                "mkfs": round(t3 - t2, 1),
                "overlay": round(t4 - t3, 1),
                "fsck": round(t5 - t4, 1),
                "total": round(time.monotonic() - t0, 1),
            },
            "debootstrap_s_when_built": rmeta["debootstrap_s"],
            "tools": {
                "mke2fs": tool_version(["mke2fs", "-V"]),
                "gcc": tool_version(["gcc", "--version"]),
                "debootstrap": rmeta["debootstrap_version"],
            },
            "inputs": {n: sha256_file(p) for n, p in sorted(input_files().items())},
            # our PARSEC build (PARSEC_SRC): programs -> {input size: where it came from}
            "parsec": parsec[1] if parsec else None,
            "files": manifest["files"],
            "packages": rmeta["packages"],
            "built_unix": int(time.time()),
        }
        (work / "image.json").write_text(json.dumps(meta, indent=1) + "\n")
        os.chmod(work / "rootfs.img", 0o444)
        if idir.exists():
            shutil.rmtree(idir)
        work.rename(idir)
    log(
        f"image {key}: {meta['size_bytes'] >> 20} MiB ({usage['used_bytes'] >> 20} MiB used, "
        f"{meta['allocated_bytes'] >> 20} MiB allocated), {len(rmeta['packages'])} packages, "
        f"{meta['seconds']['total']:.0f} s"
    )
    return img


def overlay_image(src: Path, dst: Path, partition: int | None = None) -> dict[str, object]:
    """Copy SRC (any disk image with an ext2/3/4 root, e.g. gem5 resources' x86-parsec)
    to DST and add our files to the copy; SRC is never written.  Returns the record
    also written to DST.json."""
    t0 = time.monotonic()
    src, dst = src.resolve(), dst.resolve()
    if src == dst:
        raise ImageError("overlay: source and destination are the same file")
    offset = find_ext4(src, partition)
    log(f"overlay: copying {src} -> {dst} (ext4 at byte {offset})")
    dst.parent.mkdir(parents=True, exist_ok=True)
    run(["cp", "--sparse=always", "--reflink=auto", str(src), str(dst)])
    os.chmod(dst, 0o644)
    with tempfile.TemporaryDirectory(prefix="numa-lb-overlay-") as tmp:
        staged = stage_files(
            Path(tmp),
            {"kind": "numa-lb-overlay", "image_key": image_key(), "base": src.name},
        )
        entries = entries_from_tree(staged)
        log(f"overlay: debugfs -w: {len(entries)} entries under {PREFIX}")
        apply_overlay(dst, entries, offset)
        fsck(dst, offset)
        manifest = json.loads((staged / MANIFEST_PATH.lstrip("/")).read_text())
    rec: dict[str, object] = {
        "kind": "numa-lb-overlay",
        "base": str(src),
        "image": str(dst),
        "fs_offset": offset,
        "partition": partition,
        "init": INIT_PATH,
        "files": manifest["files"],
        "fsck": "e2fsck -fn clean",
        "seconds": round(time.monotonic() - t0, 1),
    }
    Path(str(dst) + ".json").write_text(json.dumps(rec, indent=1) + "\n")
    log(f"overlay: done in {rec['seconds']} s: {dst}")
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the image (cached) and print its path")
    b.add_argument("--force", action="store_true", help="rebuild the image stage")
    b.add_argument("--rebuild-rootfs", action="store_true", help="re-run debootstrap too")
    b.add_argument("--rootfs-only", action="store_true", help="only the debootstrap tree")
    ps = [b, sub.add_parser("path", help="print the image path for the current inputs"),
          sub.add_parser("info", help="print the current image's image.json"),
          sub.add_parser("key", help="print the rootfs and image keys")]  # fmt: skip
    for p in ps:
        p.add_argument("--parsec-src", help="PARSEC 3.0 tree: add our PARSEC build "
                       "(default $PARSEC_SRC; unset: no PARSEC)")  # fmt: skip
        p.add_argument("--parsec-inputs", help="PARSEC's official input tarballs "
                       "(default $PARSEC_INPUTS)")  # fmt: skip
    o = sub.add_parser("overlay", help="copy an image and add our files to the copy")
    o.add_argument("src", type=Path)
    o.add_argument("dst", type=Path)
    o.add_argument("--partition", type=int, help="1-based partition (default: auto)")
    a = ap.parse_args(argv)
    for opt, var in (("parsec_src", "PARSEC_SRC"), ("parsec_inputs", "PARSEC_INPUTS")):
        if getattr(a, opt, None):
            os.environ[var] = getattr(a, opt)
    try:
        if a.cmd == "build":
            if a.rootfs_only:
                print(build_rootfs(force=a.rebuild_rootfs))
            else:
                print(build(force=a.force, rebuild_rootfs=a.rebuild_rootfs))
        elif a.cmd in ("path", "info"):
            img = image_path()
            if not (img.parent / "image.json").exists():
                print(f"build_image: no image for the current inputs ({img}); run "
                      "disk-image/build_image.py build", file=sys.stderr)  # fmt: skip
                return 1
            print(img if a.cmd == "path" else (img.parent / "image.json").read_text(), end="\n"
                  if a.cmd == "path" else "")  # fmt: skip
        elif a.cmd == "key":
            pid = parsec_build_id()
            print(f"rootfs {rootfs_key()}\nimage {image_key()}" + (f"\nparsec {pid}" * bool(pid)))
        else:
            overlay_image(a.src, a.dst, a.partition)
            print(a.dst)
    except ImageError as e:
        print(f"build_image: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
