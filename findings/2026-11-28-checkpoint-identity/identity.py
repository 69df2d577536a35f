"""Issue 38 item 2(b): is a boot checkpoint the same when made twice with one binary?

    python3 findings/2026-11-28-checkpoint-identity/identity.py RUN_DIR OUT_DIR

RUN_DIR is a gem5 run directory of a sweep (its spec.json names the point,
the kernel, the image and the gem5 binary); the checkpoint it restored is in
the cache under its key (analysis/sweep/backends.py checkpoint_key). This
boots the same checkpoint again into OUT_DIR with the exact command the sweep
uses (backends.gem5_command) and compares the two file by file: SHA-256 of
each file, and for the gzip-compressed memory images (*.pmem) and the
checkpoint text (m5.cpt) the decompressed bytes and the differing lines.
Prints one line per file and "identical" or what differs.
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from analysis.sweep import backends as bk  # noqa: E402


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def content(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def compare(a: Path, b: Path) -> bool:
    same = True
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    for name in names:
        pa, pb = a / name, b / name
        if not pa.exists() or not pb.exists():
            print(f"{name}: only in {'the cache' if pa.exists() else 'the new boot'}")
            same = False
            continue
        raw = digest(pa.read_bytes()) == digest(pb.read_bytes())
        ca, cb = content(pa), content(pb)
        print(f"{name}: file {'identical' if raw else 'differs'}, content "
              f"{'identical' if ca == cb else 'differs'} ({len(ca)} bytes)")  # fmt: skip
        if ca != cb:
            same = False
            if name.endswith((".cpt", ".json")):
                diff = difflib.unified_diff(
                    ca.decode(errors="replace").splitlines(),
                    cb.decode(errors="replace").splitlines(), lineterm="", n=0,
                )  # fmt: skip
                for line in list(diff)[:40]:
                    print("   ", line)
    return same


def main(run_dir: Path, out: Path) -> int:
    rec = json.loads((run_dir / "spec.json").read_text())
    key = bk.checkpoint_key(rec)
    cached = bk.checkpoint_base() / key / "cpt"
    if not cached.is_dir():
        sys.exit(f"no cached checkpoint {cached} for {run_dir}")
    out.mkdir(parents=True, exist_ok=True)
    cmd = bk.gem5_command(rec, out, checkpoint=out / "cpt", take_checkpoint=True)
    print(f"key {key}; booting again into {out}", flush=True)
    t0 = time.monotonic()
    with open(out / "boot.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    print(f"boot rc {rc}, {time.monotonic() - t0:.0f} s host")
    if rc != 0:
        return rc
    same = compare(cached, out / "cpt")
    print("identical" if same else "DIFFERS")
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
