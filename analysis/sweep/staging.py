"""Stage before submit: what a sweep's runs read, made or checked once, up front.

A run reads the kernel, the image, (gem5) the simulator binary and a boot
checkpoint. On a cluster these live on a file system every node sees (the
artifact cache, ``NUMA_LB_CACHE``) and are made on the submitting host before
the array starts (``stage``), so compute nodes never build anything: the Slurm
job script exports ``NUMA_LB_STAGED_ONLY=1`` and a worker that finds a
checkpoint missing fails with the reason instead of booting gem5 for it.

``build_once`` is the one primitive for a directory that many processes, on
one host or on many, may ask for at the same time: the first takes
``<key>.lock`` (flock; on NFS the kernel maps it to a POSIX lock through
lockd / NFSv4, on Lustre the mount needs ``-o flock``) and builds into a
private ``<key>.tmp.<host>.<pid>`` directory, writes ``DONE`` into it and
renames it to ``<key>``; the others wait for the lock (saying who holds it)
and find the finished directory. A directory named ``<key>`` is therefore
always complete; a builder that dies leaves only its tmp directory, which
the next builder removes. Readers that find ``<key>/DONE`` take no lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from ..progress import Heartbeat

STAGED_ONLY_ENV = "NUMA_LB_STAGED_ONLY"
# README (gem5) and configs/README.md: one boot per boot shape
CHECKPOINT_TYPICAL = (
    "the atomic boot of 4 x 1 cores took 9 min 52 s on the first 2-core development VM "
    "and a 4 x 2 boot about 12 min; on its successor (2026-12-07) a 4 x 2 boot takes "
    "about 23 min of a core and a 4 x 8 boot 29 min"
)
DONE = "DONE"
OWNER = ".owner"


class NotStaged(RuntimeError):
    """A compute node needed something the submitting host should have staged."""


class LockError(RuntimeError):
    """The shared file system refuses the lock (e.g. Lustre mounted without flock)."""


def staged_only() -> bool:
    """True inside a Slurm job of ours: nothing may be built here."""
    return os.environ.get(STAGED_ONLY_ENV) == "1"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _lock(lf: Any, path: Path, blocking: bool) -> bool:
    try:
        fcntl.flock(lf, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES) and not blocking:
            return False
        raise LockError(
            f"cannot lock {path}: {e.strerror} (errno {e.errno}); the shared file system "
            "must support file locks (NFS with lockd or NFSv4; Lustre mounted with -o flock)"
        ) from None
    return True


def owner_text(base: Path, key: str) -> str:
    try:
        o = json.loads((base / f"{key}{OWNER}").read_text())
        return f"{o.get('host')} pid {o.get('pid')} since {o.get('since')}"
    except (OSError, ValueError, AttributeError):
        return "another process"


def build_once(
    base: Path,
    key: str,
    build: Callable[[Path], None],
    note: Callable[[str], None] | None = None,
    allow_build: bool = True,
    what: str = "artifact",
) -> Path:
    """``base/key``, built by ``build(tmp_dir)`` unless it exists complete.

    Concurrent callers (processes on any host sharing ``base``) wait for the
    one that builds. ``allow_build=False``: raise NotStaged instead of
    building. A failing ``build`` leaves nothing behind and raises.
    """
    final = base / key
    if (final / DONE).exists():
        return final
    base.mkdir(parents=True, exist_ok=True)
    lock_path = base / f"{key}.lock"
    with open(lock_path, "a+") as lf:
        if not _lock(lf, lock_path, blocking=False):
            if note:
                note(f"waiting for {what} {key}: being built by {owner_text(base, key)}")
            t0 = time.monotonic()
            _lock(lf, lock_path, blocking=True)
            if note:
                note(f"{what} {key}: lock released after {time.monotonic() - t0:.0f} s")
        if (final / DONE).exists():
            return final
        if not allow_build:
            raise NotStaged(
                f"{what} {key} is not in {base} and this process may not build it "
                f"({STAGED_ONLY_ENV}=1: under Slurm, run_all.py stages it on the submitting "
                "host before the array starts). Rerun the sweep's command on the submitting "
                "host; check that the artifact cache (NUMA_LB_CACHE) is on a path every "
                "node sees"
            )
        host, pid = socket.gethostname(), os.getpid()
        for stale in base.glob(f"{key}.tmp.*"):  # left by a builder that died
            shutil.rmtree(stale, ignore_errors=True)
        owner = base / f"{key}{OWNER}"
        owner.write_text(
            json.dumps({"host": host, "pid": pid, "since": time.strftime("%Y-%m-%dT%H:%M:%S")})
        )
        tmp = base / f"{key}.tmp.{host}.{pid}"
        tmp.mkdir()
        try:
            build(tmp)
            with open(tmp / DONE, "w") as f:
                json.dump({"host": host, "pid": pid, "at": time.time()}, f)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(tmp)
            if final.exists():  # incomplete (no DONE): never a finished one
                shutil.rmtree(final)
            os.rename(tmp, final)
            _fsync_dir(base)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            owner.unlink(missing_ok=True)
        return final


# ------------------------------------------------------------ inputs of a run
INPUT_KEYS = ("kernel", "image", "gem5")


def inputs_problem(rec: dict[str, Any]) -> str | None:
    """Why this host cannot read a run's kernel/image/gem5 (spec.json paths), or None."""
    paths = rec.get("paths") or {}
    missing = [
        f"{k} {paths[k]}" for k in INPUT_KEYS if paths.get(k) and not Path(paths[k]).is_file()
    ]
    if not missing:
        return None
    return (
        f"not found on host {socket.gethostname()}: {', '.join(missing)}; they were staged on "
        "the submitting host, so the artifact cache (NUMA_LB_CACHE) must be on a file system "
        "every node sees at the same path"
    )


def check_inputs(rec: dict[str, Any]) -> None:
    why = inputs_problem(rec)
    if why:
        raise NotStaged(why)


# ------------------------------------------------------------- the stage step
def stage(
    recs: Iterable[dict[str, Any]],
    stream: TextIO,
    checkpoint_key: Callable[[dict[str, Any]], str],
    checkpoint_ready: Callable[[str], bool],
    make_checkpoint: Callable[[dict[str, Any]], Path] | None,
    needs_checkpoint: Callable[[dict[str, Any]], bool] = lambda rec: True,
) -> dict[str, Any]:
    """Verify every run's inputs on this host and make the missing boot checkpoints.

    ``recs``: the spec.json records of the runs about to be submitted.
    ``make_checkpoint`` is None when the runs boot without one (qemu, or
    gem5.checkpoint = false). Returns a summary (also written to ``stream``).
    """
    w = stream.write
    seen_inputs: set[str] = set()
    need: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    n = 0
    for rec in recs:
        n += 1
        for k in INPUT_KEYS:
            p = (rec.get("paths") or {}).get(k)
            if p and p not in seen_inputs:
                seen_inputs.add(p)
                if not Path(p).is_file():
                    raise NotStaged(f"stage: {k} {p} does not exist on this host")
        if make_checkpoint is not None and needs_checkpoint(rec):
            key = checkpoint_key(rec)
            counts[key] = counts.get(key, 0) + 1
            need.setdefault(key, rec)
    w(f"stage: {n} run(s) read {len(seen_inputs)} input file(s), all present: "
      f"{', '.join(sorted(seen_inputs))}\n")  # fmt: skip
    made, present = [], []
    for key, rec in need.items():
        if checkpoint_ready(key):
            present.append(key)
            continue
        w(f"stage: boot checkpoint {key} ({counts[key]} run(s)) missing: booting it here, "
          f"once, before any run starts ({CHECKPOINT_TYPICAL})\n")  # fmt: skip
        stream.flush()
        t0 = time.monotonic()
        assert make_checkpoint is not None
        with Heartbeat("stage", f"booting checkpoint {key} under gem5", out=stream):
            make_checkpoint(rec)
        w(f"stage: boot checkpoint {key} made in {time.monotonic() - t0:.0f} s\n")
        made.append(key)
    if need:
        w(f"stage: boot checkpoints: {len(present)} present, {len(made)} made\n")
    return {"runs": n, "inputs": sorted(seen_inputs), "checkpoints_made": made,
            "checkpoints_present": present}  # fmt: skip
