"""disk-image: pure parts -- cache keys, job/results tar formats, QEMU command line.

No debootstrap, no QEMU, no ext4 here (test_disk_image_overlay.py and
test_disk_image_init.py do the filesystem and the init; tests/image boots).
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "disk-image"))
sys.path.insert(0, str(ROOT / "configs"))

import build_image  # noqa: E402
import qemu_boot  # noqa: E402
from numa_lb.qemu import guest_topology, qemu_args  # noqa: E402

init = qemu_boot.init

JOB = {
    "run_id": "t1",
    "policy": "excl",
    "numa_balancing": 0,
    "programs": [
        {"name": "lft", "workload": "leader_ft", "threads": 2, "args": ["--size=4M"]},
        {"name": "pft", "workload": "perthread_ft", "threads": 2, "args": ["--size=1M"]},
    ],
}


# ------------------------------------------------------------------ cache keys


def _copy_inputs(tmp: Path) -> tuple[Path, Path]:
    wl = tmp / "workloads"
    shutil.copytree(ROOT / "workloads", wl, ignore=shutil.ignore_patterns("build", "__pycache__"))
    ini = tmp / "numa-lb-init"
    shutil.copyfile(build_image.INIT, ini)
    return wl, ini


def test_rootfs_key_hashes_suite_packages_and_recipe() -> None:
    base = build_image.rootfs_recipe()
    assert build_image.rootfs_key(base) == build_image.rootfs_key(dict(base))
    assert len(build_image.rootfs_key(base)) == 16
    for change in (
        {"suite": "trixie"},
        {"packages": sorted([*build_image.PACKAGES, "strace"])},
        {"recipe": build_image.ROOTFS_RECIPE + 1},
        {"strip": []},
    ):
        assert build_image.rootfs_key({**base, **change}) != build_image.rootfs_key(base), change
    # the package order does not matter (the recipe sorts it)
    assert base["packages"] == sorted(build_image.PACKAGES)


def test_image_key_follows_our_files_not_docs_or_build_output(tmp_path: Path) -> None:
    wl, ini = _copy_inputs(tmp_path)
    files = build_image.input_files(wl, ini)
    names = set(files)
    assert "workloads/mixrunner.py" in names and "workloads/parsec_catalog.py" in names
    assert "workloads/m5ops/m5.c" in names and "workloads/Makefile" in names
    assert "disk-image/init/numa-lb-init" in names and "disk-image/build_image.py" in names
    assert not any("/build/" in n or n.endswith(".md") for n in names)
    key = build_image.image_key("r" * 16, files)
    assert key == build_image.image_key("r" * 16, build_image.input_files(wl, ini))
    # docs and build products do not change the key
    (wl / "README.md").write_text("changed\n")
    (wl / "build").mkdir()
    (wl / "build" / "m5").write_bytes(b"\x7fELF")
    assert build_image.image_key("r" * 16, build_image.input_files(wl, ini)) == key
    # a source, the init or the rootfs key does
    src = wl / "src" / "leader_ft.c"
    src.write_text(src.read_text() + "\n")
    k2 = build_image.image_key("r" * 16, build_image.input_files(wl, ini))
    assert k2 != key
    ini.write_text(ini.read_text() + "\n# changed\n")
    k3 = build_image.image_key("r" * 16, build_image.input_files(wl, ini))
    assert k3 not in (key, k2)
    assert build_image.image_key("s" * 16, build_image.input_files(wl, ini)) != k3


def test_cache_lives_outside_the_repo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NUMA_LB_CACHE", str(tmp_path))
    assert build_image.image_path("abc") == tmp_path / "images" / "abc" / "rootfs.img"
    assert build_image.rootfs_dir("r1") == tmp_path / "images" / "rootfs" / "r1"
    monkeypatch.delenv("NUMA_LB_CACHE")
    assert ROOT not in build_image.image_path("abc").parents


def test_dpkg_status_parser(tmp_path: Path) -> None:
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(
        "Package: numactl\nStatus: install ok installed\nArchitecture: amd64\n"
        "Version: 2.0.16-1\nDescription: x\n multi-line\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n"
        "Package: base-files\nStatus: install ok installed\nArchitecture: amd64\nVersion: 12.4\n"
    )
    assert build_image.read_dpkg_status(tmp_path) == [
        {"name": "base-files", "version": "12.4", "arch": "amd64"},
        {"name": "numactl", "version": "2.0.16-1", "arch": "amd64"},
    ]


def test_strip_removes_docs_and_apt_caches_only(tmp_path: Path) -> None:
    keep = ["usr/bin/python3", "usr/share/zoneinfo/UTC", "var/lib/apt/lists/lock", "etc/x"]
    drop = [
        "usr/share/doc/numactl/copyright",
        "usr/share/man/man1/ls.1.gz",
        "usr/share/locale/de/LC_MESSAGES/x.mo",
        "var/cache/apt/archives/numactl_2.0.16-1_amd64.deb",
        "var/cache/apt/pkgcache.bin",
        "var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease",
    ]
    for rel in keep + drop:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x" * 5000)
    build_image.strip_tree(tmp_path)
    assert all((tmp_path / k).exists() for k in keep)
    assert not any((tmp_path / d).exists() for d in drop)
    assert (tmp_path / "usr/share/doc").is_dir()  # the directory itself stays


# ------------------------------------------------------------------ job and results tars


def test_job_tar_round_trip_and_marker_first() -> None:
    data = init.pack_job(JOB, {"watchdog_s": 30, "dry_run": True})
    assert data == init.pack_job(JOB, {"dry_run": True, "watchdog_s": 30})  # deterministic
    assert len(data) % 512 == 0
    assert data[257:262] == b"ustar" and data[:100].rstrip(b"\0") == b"NUMA-LB-JOB"
    job, opts = init.unpack_job(data)
    assert job == JOB and opts == {"watchdog_s": 30, "dry_run": True}


def test_job_tar_from_a_raw_disk_stops_at_the_end_marker(tmp_path: Path) -> None:
    data = init.pack_job(JOB)
    disk = tmp_path / "job.img"
    # padded like qemu_boot does, with garbage after the archive's end
    disk.write_bytes(data + bytes(4096) + b"garbage" * 1000)
    assert init.first_member(str(disk)) == init.JOB_MARKER
    with open(disk, "rb") as f:
        raw = init.read_tar_stream(f)
    assert init.unpack_job(raw)[0] == JOB
    blank = tmp_path / "blank.img"
    blank.write_bytes(bytes(1 << 16))
    assert init.first_member(str(blank)) is None


@pytest.mark.parametrize(
    "bad, message",
    [
        (b"not a tar at all" * 64, "unreadable"),
        (bytes(4096), "not a numa-lb job"),
        ("wrong-marker", "first member"),
        ("no-job", "without job.json"),
        ("bad-json", "bad JSON"),
        ("list-job", "JSON objects"),
        ("unknown-option", "unknown init options"),
    ],
)
def test_bad_job_tars_are_rejected(bad: bytes | str, message: str) -> None:
    if isinstance(bad, bytes):
        data = bad
    else:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            first = "SOMETHING" if bad == "wrong-marker" else init.JOB_MARKER
            init._add(tar, first, b"x")
            body = {
                "wrong-marker": b"{}",
                "bad-json": b"{nope",
                "list-job": b"[]",
                "unknown-option": b"{}",
            }
            if bad != "no-job":
                init._add(tar, "job.json", body[bad])
            if bad == "unknown-option":
                init._add(tar, "init.json", b'{"shell": "rm -rf /"}')
        data = buf.getvalue()
    with pytest.raises(init.JobError, match=message):
        init.unpack_job(data)


def test_pack_job_rejects_unknown_init_options() -> None:
    with pytest.raises(init.JobError, match="unknown init options"):
        init.pack_job(JOB, {"watchdog": 3})


def test_results_round_trip_blank_and_refusals(tmp_path: Path) -> None:
    blank = init.blank_results(1 << 20)
    assert len(blank) == 1 << 20
    assert init.read_results(io.BytesIO(blank)) is None
    with pytest.raises(ValueError):
        init.blank_results(1000)
    files = {"results.jsonl": b'{"type": "run"}\n', "prog-00-a.out": b"out\n", "init.log": b"l\n"}
    status = {"status": "ok", "mixrunner_exit": 0}
    data = init.pack_results(files, status)
    got = init.read_results(io.BytesIO(data + bytes(1 << 16)))
    assert got is not None
    assert set(got) == {*files, "status.json"}
    assert json.loads(got["status.json"]) == status
    assert got["prog-00-a.out"] == b"out\n"
    # names that could escape the output directory are never packed nor accepted
    assert init.pack_results({"../evil": b"x", "a/b": b"y", ".hidden": b"z"}, status) == (
        init.pack_results({}, status)
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        init._add(tar, init.RESULTS_MARKER, b"m")
        init._add(tar, "status.json", b"{}")
        init._add(tar, "../../etc/passwd", b"x")
    with pytest.raises(init.JobError, match="refusing"):
        init.read_results(io.BytesIO(buf.getvalue()))
    with pytest.raises(init.JobError, match="first member"):
        init.read_results(io.BytesIO(init.pack_job(JOB)))


def test_results_that_do_not_fit_drop_the_biggest_optional_files() -> None:
    files = {
        "results.jsonl": b"r" * 3000,
        "prog-00-a.out": b"o" * 200_000,
        "prog-01-b.out": b"o" * 50_000,
        "dmesg.txt": b"d" * 20_000,
    }
    status: dict[str, object] = {"status": "ok"}
    data = init.fit_results(files, status, 120_000)
    assert len(data) <= 120_000
    got = init.read_results(io.BytesIO(data))
    assert got is not None and "results.jsonl" in got and "prog-00-a.out" not in got
    assert "prog-01-b.out" in got
    assert status["dropped"] == [{"name": "prog-00-a.out", "bytes": 200_000}]
    assert json.loads(got["status.json"])["dropped"][0]["name"] == "prog-00-a.out"


def test_watchdog_defaults() -> None:
    assert init.default_watchdog({}, {}) == init.DEFAULT_WATCHDOG_S
    assert init.default_watchdog({"timeout_s": 100}, {}) == 210.0
    assert init.default_watchdog({"timeout_s": 100}, {"watchdog_s": 7}) == 7.0


def test_mixrunner_argv() -> None:
    argv = init.mixrunner_argv("/usr/bin/python3", "/opt/numa-lb", "/run/j.json", "/run/o", {})
    assert argv == [
        "/usr/bin/python3", "/opt/numa-lb/bin/mixrunner.py", "/run/j.json",
        "--outdir", "/run/o", "--bin-dir", "/opt/numa-lb/bin",
    ]  # fmt: skip
    dry = init.mixrunner_argv("py", "/p", "j", "o", {"dry_run": True, "mixrunner_args": ["-x"]})
    assert dry[-2:] == ["-x", "--dry-run"]
    with pytest.raises(init.JobError):
        init.mixrunner_argv("py", "/p", "j", "o", {"mixrunner_args": "--evil; rm -rf /"})


# ------------------------------------------------------------------ QEMU command


def test_qemu_command_is_tcg_ide_and_never_kvm(tmp_path: Path) -> None:
    topo = guest_topology()
    cmd = qemu_boot.qemu_command(
        tmp_path / "k", tmp_path / "r.qcow2", tmp_path / "j.img", tmp_path / "o.img", topo,
        qemu_boot.kernel_cmdline(),
    )  # fmt: skip
    assert cmd[0] == "qemu-system-x86_64"
    assert not any("kvm" in a for a in cmd)
    assert cmd[cmd.index("-accel") + 1].startswith("tcg")
    assert cmd[cmd.index("-M") + 1] == "pc"
    drives = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-drive"]
    assert drives == [
        f"file={tmp_path / 'r.qcow2'},format=qcow2,if=ide,index=0,media=disk",
        f"file={tmp_path / 'j.img'},format=raw,if=ide,index=1,media=disk",
        f"file={tmp_path / 'o.img'},format=raw,if=ide,index=2,media=disk",
    ]
    append = cmd[cmd.index("-append") + 1]
    for word in ("root=/dev/sda", "rw", "console=ttyS0", f"init={qemu_boot.INIT_PATH}", "panic=-1"):
        assert word in append.split()
    assert "-no-reboot" in cmd and "-nodefaults" in cmd
    # the NUMA part is exactly what the configs' Topology asks for
    numa = cmd[cmd.index("-smp") : cmd.index("-nodefaults")]
    assert numa == qemu_args(topo)
    with pytest.raises(ValueError, match="comma"):
        qemu_boot.qemu_command(
            tmp_path / "k", tmp_path / "a,b", tmp_path / "j", tmp_path / "o", topo, ""
        )


def test_gem5_topology_converts_to_qemu_with_its_slit() -> None:
    from numa_lb.numa_factor import InterSocket  # noqa: PLC0415
    from numa_lb.topology import Topology as Gem5Topology  # noqa: PLC0415

    ring = Gem5Topology(
        sockets=4, cores_per_socket=2, mem_per_node=256 << 20, inter_socket=InterSocket.RING,
        numa_factor=1.6,
    )  # fmt: skip
    args = qemu_args(ring)
    assert "-m" in args and args[args.index("-m") + 1] == "1024M"
    dists = [args[i + 1] for i, a in enumerate(args) if a == "-numa" and "dist" in args[i + 1]]
    assert "dist,src=0,dst=2,val=22" in dists and "dist,src=0,dst=1,val=16" in dists
    assert len(dists) == 6  # symmetric: one entry per pair
    assert "-smp" in args and args[args.index("-smp") + 1].startswith("8,sockets=4")


def test_invalid_jobs_fail_on_the_host_before_any_boot(tmp_path: Path) -> None:
    bad = dict(JOB, programs=[{"name": "x; rm -rf /", "workload": "leader_ft"}])
    with pytest.raises(ValueError, match="invalid job"):
        qemu_boot.run(tmp_path / "none", tmp_path / "none", bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()
