"""disk-image: writing our files into ext4 images without mounting (debugfs -w).

Small images made here with `mke2fs -d` (whole-disk, MBR and GPT partitioned)
stand in for our Debian image and for gem5 resources' x86-parsec image.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "disk-image"))

import build_image as bi  # noqa: E402

MiB = 1 << 20

if not (shutil.which("mke2fs") and shutil.which("debugfs") and shutil.which("e2fsck")):
    pytest.skip("SKIPPED disk-image overlay: e2fsprogs missing", allow_module_level=True)


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def base_tree(tmp: Path) -> Path:
    """A tiny 'foreign' root: /opt (mode 0700, must be kept), /etc, an old file of ours."""
    t = tmp / "base"
    (t / "etc").mkdir(parents=True)
    (t / "etc/os-release").write_text('NAME="Ubuntu"\nVERSION="18.04"\n')
    (t / "opt/numa-lb/bin").mkdir(parents=True)
    (t / "opt/numa-lb/bin/m5").write_text("stale m5 from an older overlay\n")
    (t / "opt").chmod(0o700)
    return t


def make_fs(tree: Path, image: Path, size: int, offset: int = 0) -> None:
    with open(image, "r+b" if image.exists() else "wb") as f:
        f.truncate(max(image.stat().st_size if image.exists() else 0, offset + size))
    cmd = ["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(tree)]
    if offset:
        cmd += ["-E", f"offset={offset}"]
    subprocess.run([*cmd, str(image), f"{size // 1024}k"], check=True)


def mbr_disk(image: Path, start: int, size: int) -> None:
    mbr = bytearray(512)
    struct.pack_into("<B3xB3xII", mbr, 446, 0x80, 0x83, start // 512, size // 512)
    mbr[510:512] = b"\x55\xaa"
    with open(image, "wb") as f:
        f.truncate(start + size + MiB)
        f.write(mbr)


def gpt_disk(image: Path, parts: list[tuple[int, int]]) -> None:
    """Protective MBR + GPT header + entries (no CRCs: the reader does not need them)."""
    mbr = bytearray(512)
    struct.pack_into("<B3xB3xII", mbr, 446, 0, 0xEE, 1, 0xFFFFFFFF)
    mbr[510:512] = b"\x55\xaa"
    hdr = bytearray(92)
    hdr[:8] = b"EFI PART"
    struct.pack_into("<QII", hdr, 72, 2, 128, 128)
    table = bytearray(128 * 128)
    for i, (start, size) in enumerate(parts):
        table[i * 128 : i * 128 + 16] = bytes(range(1, 17))  # any non-zero type GUID
        struct.pack_into("<QQ", table, i * 128 + 32, start // 512, (start + size) // 512 - 1)
    end = max(s + n for s, n in parts) + MiB
    with open(image, "wb") as f:
        f.truncate(end)
        f.write(mbr)
        f.seek(512)
        f.write(hdr)
        f.seek(1024)
        f.write(table)


def staged(tmp: Path) -> Path:
    s = tmp / "stage"
    (s / "opt/numa-lb/bin").mkdir(parents=True)
    (s / "opt/numa-lb/sbin").mkdir(parents=True)
    (s / "opt/numa-lb/bin/m5").write_bytes(b"\x7fELF new m5" + bytes(5000))
    (s / "opt/numa-lb/bin/parsec_catalog.py").write_text("PROGRAMS = ()\n")
    (s / "opt/numa-lb/sbin/numa-lb-init").write_text("#!/usr/bin/python3\n")
    for p in s.rglob("*"):
        p.chmod(0o755)
    (s / "opt/numa-lb/bin/parsec_catalog.py").chmod(0o644)
    return s


def listing(image: Path, path: str, offset: int = 0) -> dict[str, int]:
    got = bi.ls_dir(image, path, offset)
    assert got is not None, path
    return got


def test_overlay_writes_replaces_and_keeps_foreign_dirs(tmp_path: Path) -> None:
    img = tmp_path / "fs.img"
    make_fs(base_tree(tmp_path), img, 8 * MiB)
    entries = bi.entries_from_tree(staged(tmp_path))
    assert [e.path for e in entries][:2] == ["/opt", "/opt/numa-lb"]
    bi.apply_overlay(img, entries)  # reads back and compares every file itself
    bi.fsck(img)
    assert listing(img, "/")["opt"] == 0o040700  # an existing directory keeps its mode
    bin_ = listing(img, "/opt/numa-lb/bin")
    assert bin_ == {"m5": 0o100755, "parsec_catalog.py": 0o100644}
    assert listing(img, "/opt/numa-lb/sbin") == {"numa-lb-init": 0o100755}
    out = tmp_path / "m5.out"
    bi.debugfs(img, f"dump /opt/numa-lb/bin/m5 {out}")
    assert out.read_bytes().startswith(b"\x7fELF new m5")  # the stale file was replaced
    stat = bi.debugfs(img, "stat /opt/numa-lb/sbin/numa-lb-init")
    assert "User:     0   Group:     0" in stat
    # applying twice is fine (a cached image is never overlaid twice, a copy may be)
    bi.apply_overlay(img, entries)
    bi.fsck(img)
    assert (bi.ls_dir(img, "/etc") or {}).keys() == {"os-release"}


def test_overlay_refuses_type_conflicts_and_unsafe_paths(tmp_path: Path) -> None:
    img = tmp_path / "fs.img"
    t = base_tree(tmp_path)
    (t / "opt/numa-lb/sbin").write_text("a file where we need a directory\n")
    make_fs(t, img, 8 * MiB)
    with pytest.raises(bi.ImageError, match="not a directory"):
        bi.apply_overlay(img, bi.entries_from_tree(staged(tmp_path)))
    for bad in ("relative", "/a/../b", "/a b", "/a;rm", "/a/./b", '/a"b'):
        with pytest.raises(bi.ImageError, match="unsafe"):
            bi.Entry(bad, 0o755)


def test_overlay_commands_for_a_fresh_tree() -> None:
    entries = [bi.Entry("/opt", 0o755), bi.Entry("/opt/x", 0o700), bi.Entry("/opt/x/f", 0o644,
               Path("/tmp/src"))]  # fmt: skip
    cmds = bi.overlay_commands(entries, {"/": {"etc": 0o040755}, "/opt": None, "/opt/x": None})
    assert cmds == [
        "mkdir /opt", "sif /opt mode 040755", "sif /opt uid 0", "sif /opt gid 0",
        "mkdir /opt/x", "sif /opt/x mode 040700", "sif /opt/x uid 0", "sif /opt/x gid 0",
        "cd /opt/x", "write /tmp/src f", "sif /opt/x/f mode 0100644",
        "sif /opt/x/f uid 0", "sif /opt/x/f gid 0",
    ]  # fmt: skip


@pytest.mark.parametrize("table", ["mbr", "gpt"])
def test_partitioned_images_are_found_and_written_in_place(tmp_path: Path, table: str) -> None:
    img = tmp_path / "disk.img"
    start, size = 2 * MiB, 12 * MiB
    if table == "mbr":
        mbr_disk(img, start, size)
        want = [(start, size)]
    else:
        gpt_disk(img, [(MiB, MiB), (start + MiB, size)])  # a non-ext4 partition first
        start = start + MiB
        want = [(MiB, MiB), (start, size)]
    make_fs(base_tree(tmp_path), img, size, offset=start)
    assert bi.partitions(img) == want
    assert bi.find_ext4(img) == start
    if table == "gpt":
        assert bi.find_ext4(img, 2) == start
        with pytest.raises(bi.ImageError, match="no ext2/3/4"):
            bi.find_ext4(img, 1)
    with pytest.raises(bi.ImageError, match="no partition 5"):
        bi.find_ext4(img, 5)
    bi.apply_overlay(img, bi.entries_from_tree(staged(tmp_path)), start)
    bi.fsck(img, start)
    assert listing(img, "/opt/numa-lb/sbin", start) == {"numa-lb-init": 0o100755}


def test_no_filesystem_is_an_error(tmp_path: Path) -> None:
    img = tmp_path / "zero.img"
    img.write_bytes(bytes(4 * MiB))
    with pytest.raises(bi.ImageError, match="no ext2/3/4"):
        bi.find_ext4(img)


def test_overlay_image_copies_and_never_touches_the_source(tmp_path: Path) -> None:
    """The PARSEC path on a stand-in image: our real staged files (make install,
    the init, the manifest) go into a copy of a partitioned image."""
    src = tmp_path / "x86-parsec.img"
    mbr_disk(src, MiB, 40 * MiB)
    make_fs(base_tree(tmp_path), src, 40 * MiB, offset=MiB)
    before = sha(src)
    dst = tmp_path / "out" / "parsec-numa-lb.img"
    rec = bi.overlay_image(src, dst)
    assert sha(src) == before
    assert rec["fs_offset"] == MiB and rec["fsck"] == "e2fsck -fn clean"
    meta = json.loads(Path(str(dst) + ".json").read_text())
    assert meta["files"] == rec["files"]
    names = set(rec["files"])  # type: ignore[arg-type]
    for want in ("m5", "leader_ft", "perthread_ft", "mixrunner.py", "parsec_catalog.py"):
        assert f"/opt/numa-lb/bin/{want}" in names
    assert "/opt/numa-lb/sbin/numa-lb-init" in names
    assert "/opt/numa-lb/manifest.json" not in names  # the manifest lists the others
    # everything in the copy equals the repo's files where they are copied verbatim
    out = tmp_path / "dump"
    out.mkdir()
    bi.debugfs(dst, f"rdump /opt/numa-lb {out}", MiB)
    got = out / "numa-lb"
    assert sha(got / "sbin/numa-lb-init") == sha(bi.INIT)
    assert sha(got / "bin/mixrunner.py") == sha(ROOT / "workloads/mixrunner.py")
    assert sha(got / "bin/parsec_catalog.py") == sha(ROOT / "workloads/parsec_catalog.py")
    man = json.loads((got / "manifest.json").read_text())
    assert man["kind"] == "numa-lb-overlay" and man["base"] == "x86-parsec.img"
    for path, digest in man["files"].items():
        assert sha(got / path.removeprefix("/opt/numa-lb/")) == digest, path
    with pytest.raises(bi.ImageError, match="same file"):
        bi.overlay_image(dst, dst)


def test_our_image_layout_mbr_and_ext4_at_one_mib(tmp_path: Path) -> None:
    """build_image's own layout: mke2fs at an offset, an MBR naming it, found again."""
    img = tmp_path / "rootfs.img"
    size = 16 * MiB
    bi.mkfs(base_tree(tmp_path), img, size, "11111111-2222-3333-4444-555555555555",
            offset=bi.PART_OFFSET)  # fmt: skip
    sig = bi.disk_signature("0123456789abcdef")
    bi.write_mbr(img, sig, bi.PART_OFFSET, size)
    assert img.stat().st_size == bi.PART_OFFSET + size
    assert bi.partitions(img) == [(bi.PART_OFFSET, size)]
    assert bi.find_ext4(img) == bi.PART_OFFSET and not bi.ext4_at(img, 0)
    bi.fsck(img, bi.PART_OFFSET)
    assert bi.fs_usage(img, bi.PART_OFFSET)["fs_bytes"] == size
    with open(img, "rb") as f:
        mbr = f.read(512)
    assert struct.unpack_from("<I", mbr, 440)[0] == sig and mbr[446 + 4] == 0x83
    # reproducible from the image key, and what root=PARTUUID= names
    assert bi.disk_signature("0123456789abcdef") == sig != bi.disk_signature("other")
    assert bi.root_partuuid(sig) == f"{sig:08x}-01"
