"""The exchange formats of numa-lb-init, shared by the host and the guest.

Job tar (host -> guest): USTAR members NUMA-LB-JOB (marker), job.json,
init.json. Results (guest -> host): a PAX tar NUMA-LB-RESULTS (marker),
status.json, then flat result files; on the serial console the same tar in
base64 between marker lines. The host (disk-image/guest_io.py, qemu_boot.py,
the tests) imports these through numa-lb-init, so they are defined once.
Stdlib only, Python >= 3.6 (see numa-lb-init).
"""

# typing comments and %-formatting on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP031, UP035, UP045
import base64
import hashlib
import io
import json
import tarfile
from typing import IO, Any, Dict, List, Optional, Tuple  # noqa: F401 (List: type comments)

JOB_MARKER = "NUMA-LB-JOB"
RESULTS_MARKER = "NUMA-LB-RESULTS"
RESULTS_EMPTY = "NUMA-LB-RESULTS-EMPTY"
STATUS_FILE = "status.json"
INIT_KEYS = (
    "watchdog_s",
    "dry_run",
    "clock_unix",
    "roi_workid",
    "gem5_prefix",
    "gem5_handback",
    "mixrunner_args",
)
# gem5 hand-back modes: "tar" one `m5 writefile` of the results tar as
# <gem5_prefix>results.tar (GEM5_TAR); "writefile" one per file as
# <gem5_prefix><name>, status.json last; "console" the console block below.
GEM5_HANDBACKS = ("tar", "writefile", "console")
GEM5_HANDBACK_DEFAULT = "tar"
GEM5_TAR = "results.tar"
# Serial-console fallback: the results tar (pack_results) in base64 between
# these lines; the header carries the byte count and SHA-256 so a console line
# mangled by a kernel message is detected, never silently accepted.
CONSOLE_BEGIN = "NUMA-LB-RESULTS-B64"
CONSOLE_END = "NUMA-LB-RESULTS-B64-END"
CONSOLE_LINE = 76
MAX_MEMBER = 256 << 20  # largest result file the host accepts
# kept when the results do not fit the disk; the rest goes biggest first
ESSENTIAL = (STATUS_FILE, "results.jsonl", "init.log", "job.json")


class JobError(Exception):
    pass


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mode = 0o644
    ti.mtime = 0
    ti.uname = ti.gname = "root"
    tar.addfile(ti, io.BytesIO(data))


def pack_job(job: Dict[str, Any], options: Optional[Dict[str, Any]] = None) -> bytes:
    """The job tar: marker, job.json, init.json (deterministic bytes)."""
    options = options or {}
    bad = sorted(set(options) - set(INIT_KEYS))
    if bad:
        raise JobError("unknown init options: %s (allowed: %s)" % (bad, ", ".join(INIT_KEYS)))
    how = options.get("gem5_handback", GEM5_HANDBACK_DEFAULT)
    if how not in GEM5_HANDBACKS:
        raise JobError("gem5_handback: %r is not one of %s" % (how, ", ".join(GEM5_HANDBACKS)))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        _add(tar, JOB_MARKER, b"numa-lb-job 1\n")
        _add(tar, "job.json", json.dumps(job, indent=1, sort_keys=True).encode() + b"\n")
        _add(tar, "init.json", json.dumps(options, indent=1, sort_keys=True).encode() + b"\n")
    return buf.getvalue()


def unpack_job(data: bytes) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(job, init options) from a job tar; JobError when it is not one."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = tar.getmembers()
            if not members or members[0].name != JOB_MARKER:
                raise JobError("not a numa-lb job tar (first member is not %s)" % JOB_MARKER)
            files = {}
            for m in members[1:]:
                if m.isfile() and m.name in ("job.json", "init.json"):
                    files[m.name] = tar.extractfile(m).read()  # type: ignore[union-attr]
    except tarfile.TarError as e:
        raise JobError("job tar unreadable: %s" % e) from e
    if "job.json" not in files:
        raise JobError("job tar without job.json")
    try:
        job = json.loads(files["job.json"].decode())
        opts = json.loads(files.get("init.json", b"{}").decode())
    except ValueError as e:
        raise JobError("job tar: bad JSON: %s" % e) from e
    if not isinstance(job, dict) or not isinstance(opts, dict):
        raise JobError("job.json and init.json must hold JSON objects")
    bad = sorted(set(opts) - set(INIT_KEYS))
    if bad:
        raise JobError("unknown init options: %s" % bad)
    return job, opts


def blank_results(size: int) -> bytes:
    """The host's blank results disk: one marker member, zero padded to SIZE."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        _add(tar, RESULTS_EMPTY, b"numa-lb-results-empty 1\n")
    data = buf.getvalue()
    if size < len(data) or size % 512:
        raise ValueError("results disk size must be a multiple of 512 and >= %d" % len(data))
    return data + bytes(size - len(data))


def safe_name(name: str) -> bool:
    """Result files are flat: no directories, no dot names, printable ASCII."""
    return (
        0 < len(name) <= 200
        and "/" not in name
        and not name.startswith(".")
        and all(33 <= ord(c) < 127 for c in name)
    )


def pack_results(files: Dict[str, bytes], status: Dict[str, Any]) -> bytes:
    """The results tar: marker, status.json, then FILES (flat names) in name order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, RESULTS_MARKER, b"numa-lb-results 1\n")
        _add(tar, STATUS_FILE, json.dumps(status, indent=1, sort_keys=True).encode() + b"\n")
        for name in sorted(files):
            if name != STATUS_FILE and safe_name(name):
                _add(tar, name, files[name])
    return buf.getvalue()


def read_results(fileobj: IO[bytes]) -> Optional[Dict[str, bytes]]:
    """{name: bytes} from a results disk/tar (status.json included); None when the
    disk still holds the host's blank marker (the guest never wrote it).
    Raises JobError for anything that is not a results tar."""
    return _read_results(fileobj)[0]


def read_results_tar(fileobj: IO[bytes]) -> Dict[str, bytes]:
    """read_results for a results tar on its own (gem5's GEM5_TAR), which must
    be whole: its end-of-archive blocks are there, so a tar cut short (the
    simulation ended during the writefile) is refused, not half read."""
    files, end = _read_results(fileobj)
    if files is None:
        raise JobError("results tar: only the blank marker")
    fileobj.seek(end)
    rest = fileobj.read(20 << 10)
    if len(rest) < 1024 or rest.strip(b"\0"):
        raise JobError("results tar: no end-of-archive after byte %d (cut short?)" % end)
    return files


def _read_results(fileobj: IO[bytes]) -> Tuple[Optional[Dict[str, bytes]], int]:
    """(read_results' answer, offset where the tar's end-of-archive should be)."""
    try:
        with tarfile.open(fileobj=fileobj, mode="r:") as tar:
            first = tar.next()
            if first is None:
                raise JobError("results: empty tar")
            if first.name == RESULTS_EMPTY:
                return None, 0
            if first.name != RESULTS_MARKER:
                raise JobError("results: first member is %r, not %s" % (first.name, RESULTS_MARKER))
            out = {}
            for m in tar:
                if m.name == RESULTS_MARKER:
                    continue  # iterating a TarFile starts again at its first member
                if not m.isfile() or not safe_name(m.name) or m.size > MAX_MEMBER:
                    raise JobError("results: refusing member %r" % m.name)
                out[m.name] = tar.extractfile(m).read()  # type: ignore[union-attr]
            end = tar.offset
    except tarfile.TarError as e:
        raise JobError("results tar unreadable: %s" % e) from e
    if STATUS_FILE not in out:
        raise JobError("results without status.json")
    return out, end


def console_encode(files: Dict[str, bytes], status: Dict[str, Any]) -> str:
    """The results tar as console text (CONSOLE_BEGIN ... CONSOLE_END)."""
    data = pack_results(files, status)
    b64 = base64.b64encode(data).decode()
    lines = [b64[i : i + CONSOLE_LINE] for i in range(0, len(b64), CONSOLE_LINE)]
    head = "%s %d %s" % (CONSOLE_BEGIN, len(data), hashlib.sha256(data).hexdigest())
    return "\n".join([head] + lines + [CONSOLE_END]) + "\n"


def console_decode(text: str) -> Optional[Dict[str, bytes]]:
    """The last intact results block in a console log, as read_results gives it;
    None when there is none. Lines that are not base64 (kernel messages, CRs)
    are skipped; a block whose size or SHA-256 does not match is not intact."""
    found = None  # type: Optional[Dict[str, bytes]]
    lines = text.replace("\r", "").split("\n")
    i = 0
    while i < len(lines):
        parts = lines[i].strip().split()
        i += 1
        if len(parts) != 3 or parts[0] != CONSOLE_BEGIN or not parts[1].isdigit():
            continue
        chunks = []  # type: List[str]
        while i < len(lines) and lines[i].strip() != CONSOLE_END:
            line = lines[i].strip()
            if line and all(c.isalnum() or c in "+/=" for c in line):
                chunks.append(line)
            i += 1
        try:
            data = base64.b64decode("".join(chunks), validate=True)
        except ValueError:
            continue
        if len(data) != int(parts[1]) or hashlib.sha256(data).hexdigest() != parts[2]:
            continue
        try:
            found = read_results(io.BytesIO(data))
        except JobError:
            continue
    return found


def fit_results(files: Dict[str, bytes], status: Dict[str, Any], limit: int) -> bytes:
    """pack_results within LIMIT bytes: drop the biggest non-essential files first
    (their names go into status["dropped"])."""
    files = dict(files)
    while True:
        data = pack_results(files, status)
        if len(data) <= limit:
            return data
        optional = [n for n in files if n not in ESSENTIAL]
        victim = max(optional or list(files), key=lambda n: len(files[n]), default=None)
        if victim is None:
            raise ValueError("results do not fit even without files")
        status.setdefault("dropped", []).append({"name": victim, "bytes": len(files[victim])})
        del files[victim]
