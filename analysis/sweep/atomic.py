"""Files written whole or not at all: a temporary file beside the target, renamed onto it.

A reader (a concurrent ``report --frames``, ``keep``, ``run --kept``, the
``status`` of a running sweep) sees the old file or the new one, never a
half-written one, and a writer killed mid-write leaves the old file in place.
The temporary file is in the target's directory (``os.replace`` is atomic
only within one file system), hidden, named after the target, the process and
the thread, so two writers of one file do not share it; the last rename wins.
A writer killed between its write and its rename leaves a hidden
``.NAME.PID.TID.tmp`` behind, nothing else.

Every writer of run-directory state, frames and report files in
``analysis/`` goes through here (status.json, spec.json, job.json,
sweep.json, the frames' parquet, report.html/.md and its figures, the
calibration CSV, PROVENANCE.md, host_times.json).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


@contextlib.contextmanager
def atomic_path(path: Path, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write @path's new content to; on leaving the
    block it is renamed onto @path, or removed if the block raised.

    @fsync: flush the file to disk before the rename (state files a crash of
    the machine must not leave empty; report files can be written again).
    """
    path = Path(path)
    tmp = temp_path(path)
    try:
        yield tmp
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_bytes_atomic(path: Path, data: bytes, fsync: bool = False) -> None:
    with atomic_path(path, fsync) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str, fsync: bool = False) -> None:
    with atomic_path(path, fsync) as tmp:
        tmp.write_text(text)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Indented, sorted JSON with a final newline, flushed to disk (run state)."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n", fsync=True)
