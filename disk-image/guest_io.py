#!/usr/bin/env python3
"""Host side of the guest exchange, for both backends: job in, result files out.

    disk-image/guest_io.py pack-job JOB.json OUT.tar [--init-option KEY=JSON]...
        the job tar the init reads (gem5: give OUT.tar to the workload's readfile)
    disk-image/guest_io.py collect-gem5 M5OUT DEST [--prefix guest-] [--console LOG]
        the results tar the init wrote with one `m5 writefile` (M5OUT/guest-results.tar,
        its default) or the files it wrote one by one (M5OUT/guest-<name>) -> DEST/<name>,
        or the results block it printed on the serial console LOG
    disk-image/guest_io.py read-results DISK DEST
        a QEMU results disk (raw, a tar) -> DEST/<name>

The formats are defined once, in init/numa-lb-init (imported here as a module):
job tar = NUMA-LB-JOB marker, job.json (the mix runner's job), init.json (init
options); results = status.json + flat files (results.jsonl, prog-NN-*.out/err,
init.log, dmesg.txt, job.json, mixrunner.out/err).  Exit status: 0 the guest
reported "ok", 1 anything else (incomplete, failed, no results).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
INIT_FILE = HERE / "init" / "numa-lb-init"


def load_init() -> ModuleType:
    """numa-lb-init as a module (the file has no .py suffix: it is the guest's PID 1)."""
    loader = importlib.machinery.SourceFileLoader("numa_lb_init", str(INIT_FILE))
    spec = importlib.util.spec_from_loader("numa_lb_init", loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


init = load_init()


def pack_job_file(job: dict[str, Any], out: Path, options: dict[str, Any] | None = None) -> Path:
    out.write_bytes(init.pack_job(job, options))
    return out


def write_results(files: dict[str, bytes], dest: Path) -> None:
    """Write {name: bytes} (flat names, checked again here) into DEST."""
    for name, blob in files.items():
        if not init.safe_name(name):
            raise init.JobError(f"results: refusing member {name!r}")
        target = dest / name
        if target.is_symlink():  # never write through a link out of DEST
            target.unlink()
        target.write_bytes(blob)


def extract_results_tar(tar: Path, dest: Path) -> dict[str, bytes]:
    """The results tar TAR (gem5 hand back "tar") -> DEST/<name>; its files.
    init.JobError, with nothing written, for a tar that is not a whole results
    tar: a member that is not a flat file name (no '/', '..', absolute path,
    link or device) or is bigger than init.MAX_MEMBER, or no end-of-archive."""
    with open(tar, "rb") as f:
        files = init.read_results_tar(f)
    dest.mkdir(parents=True, exist_ok=True)
    write_results(files, dest)
    return files


def collect_gem5(
    m5out: Path, dest: Path, prefix: str = "guest-", console: Path | None = None
) -> dict[str, Any] | None:
    """The guest's result files into DEST; its status, or None when the hand
    back did not complete. Three ways, DEST/handback.json says which one
    (and why the tar was refused, if it was):
    "tar": M5OUT/<prefix>results.tar, the init's default (one m5 writefile),
    whole (extract_results_tar); "writefile": M5OUT/<prefix><name> -> DEST/<name>,
    complete when <prefix>status.json is there (the init writes it last);
    "console": else, the results block the init printed on the serial CONSOLE
    (its fallback when m5 writefile fails), if one is intact."""
    dest.mkdir(parents=True, exist_ok=True)
    tar = m5out / (prefix + init.GEM5_TAR)
    for p in sorted(m5out.glob(prefix + "*")):
        name = p.name[len(prefix) :]
        if p.is_file() and init.safe_name(name) and p != tar:
            shutil.copyfile(p, dest / name)
    via = None
    record: dict[str, Any] = {}
    if tar.is_file():
        try:
            extract_results_tar(tar, dest)
            via = "tar"
        except (init.JobError, OSError) as e:
            record["tar_error"] = f"{tar.name}: {e}"
            print(f"guest_io: {tar}: refused: {e}", file=sys.stderr)
    if via is None and (m5out / (prefix + init.STATUS_FILE)).exists():
        via = "writefile"
    elif via is None and console is not None and console.exists():
        files = init.console_decode(console.read_text(errors="replace"))
        if files is not None:
            write_results(files, dest)
            via = "console"
    (dest / "handback.json").write_text(json.dumps(dict(record, via=via)) + "\n")
    if via is None:
        return None
    return json.loads((dest / init.STATUS_FILE).read_text())


def read_results_disk(disk: Path, dest: Path) -> dict[str, Any] | None:
    """Extract a QEMU results disk into DEST; the guest status, or None when the
    guest never wrote it (the blank marker is still there)."""
    with open(disk, "rb") as f:
        files = init.read_results(f)
    if files is None:
        return None
    dest.mkdir(parents=True, exist_ok=True)
    write_results(files, dest)
    return json.loads(files[init.STATUS_FILE])


def parse_init_option(text: str) -> tuple[str, Any]:
    """argparse type for --init-option KEY=JSON (a bare string is taken as is)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=JSON, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack-job")
    p.add_argument("job", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--init-option", type=parse_init_option, action="append", default=[])
    c = sub.add_parser("collect-gem5")
    c.add_argument("m5out", type=Path)
    c.add_argument("dest", type=Path)
    c.add_argument("--prefix", default="guest-")
    c.add_argument("--console", type=Path, help="serial console log (fallback hand back)")
    r = sub.add_parser("read-results")
    r.add_argument("disk", type=Path)
    r.add_argument("dest", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "pack-job":
            pack_job_file(json.loads(a.job.read_text()), a.out, dict(a.init_option))
            print(a.out)
            return 0
        if a.cmd == "collect-gem5":
            st = collect_gem5(a.m5out, a.dest, a.prefix, a.console)
        else:
            st = read_results_disk(a.disk, a.dest)
    except (init.JobError, OSError, ValueError) as e:
        print(f"guest_io: {e}", file=sys.stderr)
        return 1
    if st is None:
        print("guest_io: no complete result set (the guest did not finish its hand back)")
        return 1
    print(json.dumps({k: st.get(k) for k in ("status", "mixrunner_exit", "error", "run_id")}))
    return 0 if st.get("status") == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
