"""disk-image: the guest init run as an ordinary process (--host) on this machine.

The init gets the real files it gets in the image (build_image.stage_files:
make install, the init, the manifest) and file-backed "disks"; everything but
mounting and powering off is the guest code path: finding the disks by
content, unpacking the job, the watchdog, the mix runner, packing and writing
the results tar.  The gem5 path runs against a stand-in `m5` that records its
calls.  Also: the PARSEC command lines the init would run (mix runner dry run
through the init) are the catalog's.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "disk-image"))
sys.path.insert(0, str(ROOT / "workloads"))

import build_image  # noqa: E402
import guest_io  # noqa: E402
import parsec_catalog  # noqa: E402
import qemu_boot  # noqa: E402

init = qemu_boot.init
INIT = str(build_image.INIT)
SMALL_MIX = [
    {"name": "lft", "workload": "leader_ft", "threads": 2, "args": ["--size=2M", "--iters=2"]},
    {"name": "pft", "workload": "perthread_ft", "threads": 2, "args": ["--size=512K"]},
]


def python36() -> str | None:
    cand = [os.environ.get("PYTHON36", "")]  # as tests/unit/test_mix_catalog.py
    cand += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6")))
    return next((c for c in cand if c and os.access(c, os.X_OK)), None)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("stage")
    root = build_image.stage_files(tmp, {"kind": "numa-lb-test"})
    return root / "opt" / "numa-lb"


def disks(tmp: Path, job: dict | None, opts: dict | None = None, res_size: int = 1 << 20):
    jd = tmp / "job.img"
    if job is not None:
        data = init.pack_job(job, opts)
        jd.write_bytes(data + bytes(-len(data) % 65536))
    else:
        jd.write_bytes(bytes(65536))  # a disk that is no job disk
    rd = tmp / "res.img"
    rd.write_bytes(init.blank_results(res_size))
    return jd, rd


def run_init(
    prefix: Path, tmp: Path, jd: Path, rd: Path, python: str = sys.executable, *extra: str
) -> tuple[int, str, dict[str, bytes] | None, float]:
    cmd = [python, INIT, "--host", "--prefix", str(prefix), "--rundir", str(tmp / "run"),
           "--disk", str(rd), "--disk", str(jd), "--disk-wait", "1", *extra]  # fmt: skip
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    with open(rd, "rb") as f:
        files = init.read_results(f)
    return p.returncode, p.stdout + p.stderr, files, took


def records(files: dict[str, bytes]) -> list[dict]:
    return [json.loads(ln) for ln in files["results.jsonl"].decode().splitlines() if ln.strip()]


@pytest.mark.parametrize("interp", ["python3", "python3.6"])
def test_a_mix_runs_and_comes_back_through_the_results_disk(
    prefix: Path, tmp_path: Path, interp: str
) -> None:
    python = sys.executable if interp == "python3" else python36()
    if python is None:
        pytest.skip("SKIPPED init-py36: no Python 3.6 interpreter on this host")
    job = {"run_id": "host-ok", "programs": SMALL_MIX, "timeout_s": 60}
    jd, rd = disks(tmp_path, job, {"watchdog_s": 90})
    rc, out, files, _ = run_init(prefix, tmp_path, jd, rd, python)
    assert rc == 0, out
    assert files is not None, out
    st = json.loads(files["status.json"])
    assert st["status"] == "ok" and st["mixrunner_exit"] == 0 and st["error"] is None
    assert st["backend"] == "qemu" and st["run_id"] == "host-ok" and st["watchdog_s"] == 90
    assert st["image"]["kind"] == "numa-lb-test"
    assert {"results.jsonl", "init.log", "job.json", "mixrunner.err", "mixrunner.out"} <= set(files)
    assert set(st["files"]) <= set(files)
    recs = records(files)
    assert [r["type"] for r in recs][0] == "run" and recs[-1]["type"] == "run_end"
    progs = [r for r in recs if r["type"] == "program"]
    assert [p["name"] for p in progs] == ["lft", "pft"]
    assert all(p["exit_code"] == 0 and p["elapsed_s"] > 0 for p in progs)
    assert all(p["result"]["verified"] for p in progs)
    if interp == "python3.6":
        assert recs[0]["python"].startswith("3.6")
    log = files["init.log"].decode()
    assert "numa-lb-init: job 'host-ok': 2 programs" in log
    assert "numa-lb-init: mix runner exit 0" in log
    # progress lines go to stdout (the console) as they happen
    assert "numa-lb-init: status ok" in out


def test_the_watchdog_ends_a_hanging_job_and_still_hands_back(prefix: Path, tmp_path: Path) -> None:
    # a duration of its own, so another test run on the machine is not mistaken for ours
    nap = f"300.{os.getpid()}"
    job = {"run_id": "hang", "programs": [{"name": "sleeper", "cmd": ["sleep", nap]}]}
    jd, rd = disks(tmp_path, job, {"watchdog_s": 3})
    rc, out, files, took = run_init(prefix, tmp_path, jd, rd)
    assert rc == 1 and took < 60, out
    assert files is not None
    st = json.loads(files["status.json"])
    assert st["status"] == "watchdog" and st["watchdog_fired"] is True
    assert "watchdog" in st["error"]
    # the runner wrote (and flushed) its run record before the programs started
    assert records(files)[0]["type"] == "run"
    # nothing of the job survives: the program ran in a session of its own
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"sleep {nap}" not in ps


def test_a_job_the_runner_rejects_is_reported(prefix: Path, tmp_path: Path) -> None:
    job = {"run_id": "bad", "programs": [{"name": "x", "workload": "no_such_workload"}]}
    jd, rd = disks(tmp_path, job)
    rc, out, files, _ = run_init(prefix, tmp_path, jd, rd)
    assert rc == 1 and files is not None
    st = json.loads(files["status.json"])
    assert st["status"] == "invalid-job" and st["mixrunner_exit"] == 2
    assert b"invalid job" in files["mixrunner.err"]


def test_no_job_disk_still_hands_back_an_error(prefix: Path, tmp_path: Path) -> None:
    jd, rd = disks(tmp_path, None)
    rc, out, files, took = run_init(prefix, tmp_path, jd, rd)
    assert rc == 1 and took < 30 and files is not None
    st = json.loads(files["status.json"])
    assert st["status"] == "invalid-job" and "no job disk" in st["error"]
    assert "results.jsonl" not in files


def test_results_bigger_than_the_disk_drop_program_output(prefix: Path, tmp_path: Path) -> None:
    prog = {"name": "chatty", "cmd": ["head", "-c", "300000", "/dev/zero"]}
    jd, rd = disks(tmp_path, {"run_id": "big", "programs": [prog]}, res_size=128 << 10)
    rc, out, files, _ = run_init(prefix, tmp_path, jd, rd)
    assert files is not None, out
    st = json.loads(files["status.json"])
    assert st["status"] == "ok"
    assert st["dropped"] == [{"name": "prog-00-chatty.out", "bytes": 300000}]
    assert "results.jsonl" in files and "prog-00-chatty.out" not in files


FAKE_M5 = """#!/bin/sh
# stand-in for the m5 CLI under gem5: log the call, serve readfile, store writefile
echo "$*" >> "$FAKE_M5_DIR/calls"
case "$1" in
  readfile) cat "$FAKE_M5_DIR/job.tar" ;;
  writefile) cp "$2" "$FAKE_M5_DIR/out/$3" ;;
esac
exit 0
"""


def run_init_with_m5(
    prefix: Path, tmp_path: Path, m5_script: str, job: dict, options: dict, *extra: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the init on the host with M5_SCRIPT as its m5 tool; (process, m5 dir)."""
    fake = tmp_path / "prefix"
    shutil.copytree(prefix, fake)
    m5 = fake / "bin" / "m5"
    m5.write_text(m5_script)
    m5.chmod(m5.stat().st_mode | stat.S_IXUSR)
    d = tmp_path / "m5"
    (d / "out").mkdir(parents=True)
    (d / "job.tar").write_bytes(init.pack_job(job, options))
    p = subprocess.run(
        [sys.executable, INIT, "--host", "--prefix", str(fake), "--rundir", str(tmp_path / "r"),
         *extra],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, FAKE_M5_DIR=str(d)),
    )  # fmt: skip
    return p, d


def test_gem5_path_readfile_work_items_writefile_exit(prefix: Path, tmp_path: Path) -> None:
    job = {"run_id": "g1", "programs": SMALL_MIX[:1]}
    opts = {"roi_workid": 7, "gem5_prefix": "guest.", "gem5_handback": "writefile"}
    p, d = run_init_with_m5(prefix, tmp_path, FAKE_M5, job, opts)
    assert p.returncode == 0, p.stdout + p.stderr
    calls = (d / "calls").read_text().splitlines()
    names = [c.split()[0] for c in calls]
    assert names[:4] == ["probe", "readfile", "workbegin", "workend"], calls
    assert calls[2] == "workbegin 7 0" and calls[3] == "workend 7 0"
    writes = [c.split()[2] for c in calls if c.startswith("writefile")]
    assert writes[-1] == "guest.status.json"  # last: its presence means complete
    assert {"guest.results.jsonl", "guest.init.log", "guest.dmesg.txt"} - set(writes) == {
        "guest.dmesg.txt"  # --host reads no kernel log
    }
    assert names[-1] == "exit"
    st = json.loads((d / "out" / "guest.status.json").read_text())
    assert st["backend"] == "gem5" and st["status"] == "ok"
    assert records({"results.jsonl": (d / "out" / "guest.results.jsonl").read_bytes()})
    # the gem5 backend's side: m5out/guest.<name> -> <dest>/<name>
    got = guest_io.collect_gem5(d / "out", tmp_path / "guest", prefix="guest.")
    assert got == st
    assert (tmp_path / "guest" / "results.jsonl").is_file()
    assert (tmp_path / "guest" / "init.log").is_file()
    (d / "out" / "guest.status.json").unlink()  # an interrupted hand back
    assert guest_io.collect_gem5(d / "out", tmp_path / "g2", prefix="guest.") is None


def test_gem5_default_hand_back_is_one_results_tar(prefix: Path, tmp_path: Path) -> None:
    """gem5_handback "tar" (the default): one m5 writefile, status.json inside."""
    job = {"run_id": "g3", "programs": SMALL_MIX[:1]}
    p, d = run_init_with_m5(prefix, tmp_path, FAKE_M5, job, {"roi_workid": 7})
    assert p.returncode == 0, p.stdout + p.stderr
    calls = (d / "calls").read_text().splitlines()
    assert [c.split()[0] for c in calls] == [
        "probe", "readfile", "workbegin", "workend", "writefile", "exit"
    ]  # fmt: skip
    assert calls[4].split()[2] == "guest-results.tar"
    assert [f.name for f in (d / "out").iterdir()] == ["guest-results.tar"]
    assert "handed back 8 files with 1 m5 writefile: collect " in p.stdout
    got = guest_io.collect_gem5(d / "out", tmp_path / "guest", prefix="guest-")
    assert got is not None and got["status"] == "ok" and got["gem5_handback"] == "tar"
    g = tmp_path / "guest"
    assert json.loads((g / "handback.json").read_text()) == {"via": "tar"}
    assert not (g / "results.tar").exists()
    assert records({"results.jsonl": (g / "results.jsonl").read_bytes()})
    assert "mix runner exit 0" in (g / "init.log").read_text()
    # the guest-clock split of the time after the ROI: runner, then the init
    stamps = got["monotonic_s"]
    assert stamps["run_end"] <= stamps["handback"] <= stamps["collected"]
    end = [json.loads(x) for x in (g / "results.jsonl").read_text().splitlines()][-1]
    assert end["monotonic_s"]["workend"] <= end["monotonic_s"]["record"] <= stamps["run_end"]
    # a tar cut short (gem5 stopped during the writefile) is refused, not half read
    tar = d / "out" / "guest-results.tar"
    tar.write_bytes(tar.read_bytes()[:1536])
    assert guest_io.collect_gem5(d / "out", tmp_path / "cut", prefix="guest-") is None
    hb = json.loads((tmp_path / "cut" / "handback.json").read_text())
    assert hb["via"] is None and "guest-results.tar" in hb["tar_error"]


def test_guest_io_cli_packs_jobs_and_reads_results_disks(tmp_path: Path) -> None:
    job = {"run_id": "cli", "programs": SMALL_MIX}
    (tmp_path / "job.json").write_text(json.dumps(job))
    tool = str(ROOT / "disk-image" / "guest_io.py")
    subprocess.run(
        [sys.executable, tool, "pack-job", str(tmp_path / "job.json"), str(tmp_path / "j.tar"),
         "--init-option", "watchdog_s=12", "--init-option", "dry_run=true"],
        check=True, capture_output=True,
    )  # fmt: skip
    assert init.unpack_job((tmp_path / "j.tar").read_bytes()) == (
        job, {"watchdog_s": 12, "dry_run": True}
    )  # fmt: skip
    disk = tmp_path / "res.img"
    disk.write_bytes(init.blank_results(1 << 16))
    r = subprocess.run([sys.executable, tool, "read-results", str(disk), str(tmp_path / "o")],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 1 and "no complete result set" in r.stdout
    disk.write_bytes(init.pack_results({"results.jsonl": b"{}\n"}, {"status": "ok"}))
    r = subprocess.run([sys.executable, tool, "read-results", str(disk), str(tmp_path / "o")],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "ok"
    assert (tmp_path / "o" / "results.jsonl").read_bytes() == b"{}\n"


def test_parsec_command_lines_are_the_catalogs(prefix: Path, tmp_path: Path) -> None:
    """A PARSEC job through the init (dry run): what the guest would execute."""
    programs = [
        {"name": p.package, "parsec": p.package, "threads": 4, "input": "simsmall"}
        for p in parsec_catalog.PROGRAMS
    ]
    job = {"run_id": "parsec-plan", "programs": programs}
    jd, rd = disks(tmp_path, job, {"dry_run": True})
    rc, out, files, _ = run_init(prefix, tmp_path, jd, rd)
    assert rc == 0 and files is not None, out
    plans = [json.loads(ln) for ln in files["mixrunner.out"].decode().splitlines()]
    assert len(plans) == len(parsec_catalog.PROGRAMS) == 30
    root, cfg = "/home/gem5/parsec-benchmark", "gcc-hooks"  # the job defaults
    for plan, prog in zip(plans, parsec_catalog.PROGRAMS, strict=True):
        want = parsec_catalog.parsecmgmt_command(prog, "simsmall", 4, root, cfg)
        assert plan["argv"] == want, prog.name
        assert plan["argv"][0] == f"{root}/bin/parsecmgmt"
        assert plan["parsec"]["package"] == prog.package
        assert plan["kind"] == "parsec"
    assert "results.jsonl" not in files  # a dry run runs nothing


FAILING_WRITEFILE_M5 = FAKE_M5.replace(
    'writefile) cp "$2" "$FAKE_M5_DIR/out/$3" ;;', "writefile) exit 1 ;;"
)


@pytest.mark.parametrize("how", ["tar", "writefile"])
def test_gem5_writefile_failure_falls_back_to_the_serial_console(
    prefix: Path, tmp_path: Path, how: str
) -> None:
    job = {"run_id": "g2", "programs": SMALL_MIX[:1]}
    opts = {"gem5_prefix": "guest-", "gem5_handback": how}
    p, d = run_init_with_m5(prefix, tmp_path, FAILING_WRITEFILE_M5, job, opts)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "m5 writefile failed" in p.stdout
    assert not list((d / "out").iterdir())  # nothing came through writefile
    console = tmp_path / "console.log"
    console.write_text(p.stdout)
    st = guest_io.collect_gem5(d / "out", tmp_path / "guest", prefix="guest-", console=console)
    assert st is not None and st["status"] == "ok" and st["run_id"] == "g2"
    assert json.loads((tmp_path / "guest" / "handback.json").read_text()) == {"via": "console"}
    assert records({"results.jsonl": (tmp_path / "guest" / "results.jsonl").read_bytes()})
    # one corrupted base64 line: the block no longer verifies and is not used
    lines = p.stdout.splitlines()
    k = next(i for i, x in enumerate(lines) if x.startswith(init.CONSOLE_BEGIN)) + 2
    lines[k] = lines[k][:-8] + ("A" * 8 if not lines[k].endswith("A" * 8) else "B" * 8)
    console.write_text("\n".join(lines))
    assert guest_io.collect_gem5(d / "out", tmp_path / "g3", "guest-", console) is None


def test_unknown_gem5_handback_is_a_job_error() -> None:
    with pytest.raises(init.JobError, match="gem5_handback"):
        init.pack_job({"run_id": "x", "programs": SMALL_MIX[:1]}, {"gem5_handback": "carrier"})


def test_staged_modules_are_byte_compiled_for_the_guest_python(tmp_path: Path) -> None:
    """The image ships __pycache__ for the guest's interpreter (the guest never
    writes bytecode): the mix runner imports its modules from the .pyc, which
    does not depend on file times (unchecked-hash)."""
    tree = tmp_path / "tree"
    (tree / "usr" / "bin").mkdir(parents=True)
    v = sys.version_info
    (tree / "usr" / "bin" / f"python{v[0]}.{v[1]}").write_text("")
    (tree / "usr" / "bin" / f"python{v[0]}.{v[1]}-config").write_text("")
    assert build_image.guest_python_version(tree) == (v[0], v[1])
    assert build_image.guest_python_version(tmp_path) is None
    root = build_image.stage_files(tmp_path / "s", {"kind": "numa-lb-test"}, None, (v[0], v[1]))
    bin_ = root / "opt" / "numa-lb" / "bin"
    tag = sys.implementation.cache_tag
    pyc = bin_ / "__pycache__" / f"mix_run.{tag}.pyc"
    assert pyc.is_file()
    assert pyc.read_bytes()[4:8] == (1).to_bytes(4, "little")  # PEP 552: unchecked hash
    man = json.loads((root / "opt" / "numa-lb" / "manifest.json").read_text())
    assert f"/opt/numa-lb/bin/__pycache__/mix_run.{tag}.pyc" in man["files"]
    # the staged runner imports from those .pyc files, writing none of its own
    os.utime(bin_ / "mix_run.py", (0, 0))
    p = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import mix_run;"
         "print(mix_run.__cached__)", str(bin_)],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(pyc)
    # an interpreter the host lacks: the image is built without, and says so
    msg = build_image.compile_python(root, (3, 99))
    assert msg.startswith("no python3.99 on this host")


def test_the_page_cache_warm_up_reads_our_files_and_starts_the_runner(prefix: Path) -> None:
    """Before the boot checkpoint the init reads PREFIX/bin and PREFIX/lib and
    runs `mixrunner.py --help` (exit 0); a runner that cannot start is logged,
    never fatal."""

    class Probe(init.JobIn):
        def __init__(self, pfx: Path, python: str) -> None:
            self.prefix = str(pfx)
            self.a = argparse.Namespace(python=python)
            self.lines: list[str] = []

        def log(self, msg: str) -> None:
            self.lines.append(msg)

    expect = sum(p.stat().st_size for d in ("bin", "lib") for p in (prefix / d).rglob("*")
                 if p.is_file())  # fmt: skip
    ok = Probe(prefix, sys.executable)
    ok.warm_page_cache()
    assert len(ok.lines) == 1, ok.lines
    assert ok.lines[0].startswith(f"warm: {expect} bytes read, mixrunner --help: 0, ")
    bad = Probe(prefix, "/nonexistent/python3")
    bad.warm_page_cache()
    assert "mixrunner --help: [Errno 2]" in bad.lines[-1]


def test_console_hand_back_waits_for_the_tty_to_send_the_block(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An m5 exit right after flush() cut a 51,200-byte block on gem5 (the
    serial driver was still sending it): the hand back drains the tty first."""
    import threading  # noqa: PLC0415

    import init_handback  # noqa: PLC0415 (disk-image/init is on sys.path via qemu_boot)

    master, slave = os.openpty()
    out = os.fdopen(slave, "w")
    drained: list[tuple[int, bool]] = []
    got = bytearray()

    def tcdrain(fd: int) -> None:  # what the pty master had received when drained
        while init.CONSOLE_END.encode() not in got:
            got.extend(os.read(master, 65536))
        drained.append((fd, True))

    monkeypatch.setattr(init_handback.termios, "tcdrain", tcdrain)
    monkeypatch.setattr(init_handback.sys, "stdout", out)
    monkeypatch.setattr(init_handback, "PRINTK", str(tmp_path / "printk"))
    hb = init_handback.HandBack()
    hb.status, hb.lines, hb.lock = {"status": "ok"}, [], threading.Lock()
    hb.console_handback({"results.jsonl": b"x" * 4000})
    assert drained == [(slave, True)]
    assert (tmp_path / "printk").read_text() == "1\n"
    assert init.console_decode(got.decode()) is not None
    # not a tty (a pipe, a file): nothing to wait for, no error
    r, w = os.pipe()
    with os.fdopen(w, "w") as pipe:
        monkeypatch.undo()
        init_handback.drain_console(pipe)
    os.close(r)
    out.close()
    os.close(master)


def test_a_boot_variant_does_its_work_before_the_checkpoint_and_records_it() -> None:
    """numa_lb.boot_variant=N (N > 0): N-dependent work (pages, children, sleep)
    and status["boot_variant"], which the restored run then hands back."""
    import init_jobin  # noqa: PLC0415 (disk-image/init is on sys.path via qemu_boot)

    class Probe(init_jobin.JobIn):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.status: dict[str, object] = {}
            self.logged: list[str] = []

        def log(self, text: str) -> None:
            self.logged.append(text)

    p = Probe()
    t0 = time.monotonic()
    p.vary_boot("2")
    assert time.monotonic() - t0 >= 2 * 0.0137
    assert p.status == {"boot_variant": 2}
    assert p.logged[0].startswith("boot variant 2: 6 MiB touched, 14 children, 27.4 ms slept")
    for text in (None, "0", "x"):
        q = Probe()
        q.vary_boot(text)
        assert q.status == {}
    assert "not an integer" in q.logged[0]


# A stand-in m5 that logs each call with its CLOCK_MONOTONIC time (the mix
# runner's stamps are on the same clock); FAKE_M5_KILL_WAITER: at `checkpoint`
# it SIGKILLs the init's waiting mix runner (its sibling: the init's child
# with --serve on its command line), a runner that died in the checkpoint.
TIMED_M5 = (
    f"#!{sys.executable}\n"
    + """\
import os, shutil, signal, sys, time
d, a = os.environ["FAKE_M5_DIR"], sys.argv[1:]
with open(os.path.join(d, "calls"), "a") as f:
    f.write("%s %.9f\\n" % (" ".join(a), time.monotonic()))
if a[0] == "readfile":
    with open(os.path.join(d, "job.tar"), "rb") as f:
        sys.stdout.buffer.write(f.read())
elif a[0] == "writefile":
    shutil.copy(a[1], os.path.join(d, "out", a[2]))
elif a[0] == "checkpoint" and os.environ.get("FAKE_M5_KILL_WAITER"):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open("/proc/%s/stat" % pid).read()
            cmd = open("/proc/%s/cmdline" % pid, "rb").read()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2:].split()[1]) == os.getppid() and b"--serve" in cmd:
            os.kill(int(pid), signal.SIGKILL)
            with open(os.path.join(d, "killed"), "w") as f:
                f.write(pid)
"""
)


def run_checkpointed(
    prefix: Path, tmp_path: Path, job: dict, options: dict, kill_waiter: bool = False
) -> tuple[subprocess.CompletedProcess[str], Path, list[tuple[str, float]]]:
    """The init in gem5 checkpoint mode (numa_lb.checkpoint=1 through --cmdline)
    with TIMED_M5; (process, m5 dir, [(call, monotonic s)])."""
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("console=ttyS0 numa_lb.backend=gem5 numa_lb.checkpoint=1\n")
    if kill_waiter:
        os.environ["FAKE_M5_KILL_WAITER"] = "1"
    try:
        p, d = run_init_with_m5(prefix, tmp_path, TIMED_M5, job, options,
                                "--cmdline", str(cmdline))  # fmt: skip
    finally:
        os.environ.pop("FAKE_M5_KILL_WAITER", None)
    calls = [(c.rsplit(" ", 1)[0], float(c.rsplit(" ", 1)[1]))
             for c in (d / "calls").read_text().splitlines()]  # fmt: skip
    return p, d, calls


def handed_back(d: Path, tmp_path: Path) -> tuple[dict, list[dict], str]:
    """status.json, results.jsonl's records and init.log from the results tar."""
    got = guest_io.collect_gem5(d / "out", tmp_path / "guest", prefix="guest-")
    assert got is not None
    g = tmp_path / "guest"
    recs = records({"results.jsonl": (g / "results.jsonl").read_bytes()})
    return got, recs, (g / "init.log").read_text()


def test_checkpoint_mode_starts_the_runner_before_the_checkpoint(
    prefix: Path, tmp_path: Path
) -> None:
    """numa_lb.checkpoint=1: the mix runner is started (and has imported
    everything) before `m5 checkpoint`, gets its request after `m5 readfile`,
    and runs the job as the init's own start would; the run record says so."""
    job = {"run_id": "pre", "programs": SMALL_MIX[:1]}
    p, d, calls = run_checkpointed(prefix, tmp_path, job, {"roi_workid": 7})
    assert p.returncode == 0, p.stdout + p.stderr
    assert [c for c, _ in calls] == [
        "checkpoint", "readfile", "workbegin 7 0", "workend 7 0",
        f"writefile {tmp_path}/r/handback-results.tar guest-results.tar", "exit",
    ]  # fmt: skip
    at = dict(calls)
    st, recs, log = handed_back(d, tmp_path)
    assert st["status"] == "ok" and st["mixrunner_exit"] == 0
    assert st["cmdline"] == "console=ttyS0 numa_lb.backend=gem5 numa_lb.checkpoint=1"
    assert st["prestart"]["used"] is True and st["prestart"]["error"] is None
    run = recs[0]
    pre, mono = run["prestart"], run["monotonic_s"]
    # the runner's imports and "ready" came before the checkpoint, its
    # request after the readfile, and the ROI after that
    assert mono["imported"] <= pre["ready"] < at["checkpoint"] < at["readfile"]
    assert at["readfile"] < pre["request"] <= mono["run_record"] < at["workbegin 7 0"]
    assert recs[-1]["status"] == "ok" and [r["name"] for r in recs if r["type"] == "program"] == [
        "lft"
    ]
    order = [x for x in ("prestart: mix runner pid", "m5 checkpoint", "m5 readfile",
                         "run: by the pre-started mix runner") if x in log]  # fmt: skip
    assert len(order) == 4 and sorted(order, key=log.index) == order, log


def test_a_waiting_runner_that_died_is_replaced_by_todays_start(
    prefix: Path, tmp_path: Path
) -> None:
    """The waiting runner killed during the checkpoint: the init logs it and
    starts the runner with its arguments; the run does not fail."""
    job = {"run_id": "dead", "programs": SMALL_MIX[:1]}
    p, d, calls = run_checkpointed(prefix, tmp_path, job, {}, kill_waiter=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (d / "killed").is_file()  # the stand-in found and killed the waiter
    assert [c.split()[0] for c, _ in calls] == [
        "checkpoint", "readfile", "workbegin", "workend", "writefile", "exit"
    ]  # fmt: skip
    st, recs, log = handed_back(d, tmp_path)
    assert st["status"] == "ok" and st["mixrunner_exit"] == 0
    assert st["prestart"]["used"] is False and st["prestart"]["ready_s"] > 0
    assert st["prestart"]["error"] == "the waiting runner exited with -9"
    assert "the mix runner starts as without a checkpoint" in log
    assert recs[0]["prestart"] is None and recs[-1]["status"] == "ok"


def test_a_refused_request_falls_back_with_the_reason(prefix: Path, tmp_path: Path) -> None:
    """A request the waiting runner refuses (here: a shell metacharacter in
    an init option's argument) is logged with the reason; the init starts the
    runner with the same arguments, as without a checkpoint."""
    job = {"run_id": "refused", "programs": SMALL_MIX[:1]}
    p, d, _ = run_checkpointed(prefix, tmp_path, job,
                               {"mixrunner_args": ["--lb-stats", "/nonexistent/$x"]})  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    st, recs, log = handed_back(d, tmp_path)
    why = "refused: argument '/nonexistent/$x': shell metacharacter '$'"
    assert st["status"] == "ok" and (st["prestart"]["used"], st["prestart"]["error"]) == (
        False, why
    )  # fmt: skip
    assert f"prestart: {why}; the mix runner starts as without a checkpoint" in log
    assert "mixrunner: request refused: argument '/nonexistent/$x'" in log  # its stderr
    assert recs[0]["prestart"] is None and recs[-1]["status"] == "ok"
    assert recs[-1]["sched_numa_lb_stats"]["path"] == "/nonexistent/$x"  # the fallback's argv


def test_a_waiting_runner_without_a_job_is_ended(prefix: Path, tmp_path: Path) -> None:
    """No job after the checkpoint (a readfile that fails): the waiting runner
    is told so (its socket closed), exits, and the init hands back the error."""
    m5 = TIMED_M5.replace('if a[0] == "readfile":', 'if a[0] == "readfile":\n    sys.exit(1)')
    p, d = run_init_with_m5(prefix, tmp_path, m5, {"run_id": "x", "programs": SMALL_MIX[:1]},
                            {}, "--cmdline", str(tmp_path / "cmdline"))  # fmt: skip
    assert p.returncode == 1 and "waiting" not in p.stdout  # no --cmdline file: no checkpoint
    cmdline = tmp_path / "cmdline2"
    cmdline.write_text("numa_lb.backend=gem5 numa_lb.checkpoint=1\n")
    shutil.rmtree(tmp_path / "prefix")
    shutil.rmtree(d)
    p, d = run_init_with_m5(prefix, tmp_path, m5, {"run_id": "x", "programs": SMALL_MIX[:1]},
                            {}, "--cmdline", str(cmdline))  # fmt: skip
    assert p.returncode == 1, p.stdout + p.stderr
    console = p.stdout
    assert "job error: m5 readfile returned no job" in console
    assert "prestart: the waiting mix runner got no request, exit 3" in console
    assert "mixrunner: request refused: no request (end of file)" in console
