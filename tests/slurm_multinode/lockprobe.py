#!/usr/bin/env python3
"""One array task of the shared-checkpoint test: ask for the same staged
directory as every other task, through analysis.sweep.staging.build_once
(the primitive behind the boot checkpoints), on whichever node it runs.

    lockprobe.py BASE KEY RESULTS_DIR

The build (only the first task to take the lock runs it) writes four parts
slowly; every task then reads the whole directory and records what it saw,
which node it ran on and whether it built or waited.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from analysis.sweep.staging import build_once  # noqa: E402


def main(base: Path, key: str, results: Path) -> int:
    node = os.environ.get("SLURMD_NODENAME", "?")
    task = os.environ.get("SLURM_ARRAY_TASK_ID", "?")
    built: list[str] = []
    notes: list[str] = []

    def build(tmp: Path) -> None:
        built.append(node)
        for i in range(4):
            (tmp / f"part{i}").write_bytes(hashlib.sha256(f"{key}{i}".encode()).digest() * 4096)
            time.sleep(2)

    t0 = time.monotonic()
    d = build_once(base, key, build, note=notes.append, what="checkpoint")
    digest = hashlib.sha256(b"".join((d / f"part{i}").read_bytes() for i in range(4))).hexdigest()
    rec = {
        "task": task,
        "node": node,
        "hostname": os.uname().nodename,
        "built": bool(built),
        "notes": notes,
        "sha256": digest,
        "seconds": round(time.monotonic() - t0, 1),
    }
    (results / f"task{task}.json").write_text(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])))
