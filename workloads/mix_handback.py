"""Hand-back of the mix runner's results: results.jsonl and the records in it.

The JSON-lines Writer (flushed per record so a guest that dies mid-run still
leaves partial results), and the completion of each program record from its
output files and the sampler's thread groups. Stdlib only, Python >= 3.6 (see
mixrunner.py).
"""

# typing.List/Dict/Optional on purpose: the guest may run Python 3.6.
# ruff: noqa: UP006, UP035, UP045

import json
import os
import re
import sys
from typing import Any, Dict, List, Optional

from mix_metrics import ThreadGroup

_ROI_RE = re.compile(r"\[HOOKS\] Total time spent in ROI: ([0-9.]+)s")


class Writer:
    def __init__(self, path: Optional[str]) -> None:
        self.f = open(path, "w") if path else sys.stdout

    def write(self, rec: Dict[str, Any]) -> None:
        self.f.write(json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n")
        self.f.flush()  # partial results survive a guest that dies mid-run

    def close(self) -> None:
        if self.f is not sys.stdout:
            self.f.close()


def tail(path: str, nbytes: int = 65536) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - nbytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def workload_result(stdout_tail: str) -> Optional[Dict[str, Any]]:
    """The last JSON object line with a 'workload' key (our synthetic programs)."""
    for line in reversed(stdout_tail.splitlines()):
        line = line.strip()
        if line.startswith("{") and '"workload"' in line:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict):
                return d
    return None


# Outputs of our PARSEC build's programs bigger than this stay in their work
# directory (the QEMU results disk is 64 MiB; native-size outputs are not wanted).
OUTPUT_LIMIT = 4 << 20


def collect_outputs(installed: Dict[str, Any], outdir: str, prefix: str) -> Dict[str, Any]:
    """Copy the output files a PARSEC program of our build wrote in its work
    directory (names, or glob patterns) to OUTDIR/PREFIX.<file>, so they are
    handed back with the rest; returns {file: copied name, or why not}."""
    import glob  # noqa: PLC0415 - only this path needs it
    import shutil  # noqa: PLC0415

    out = {}  # type: Dict[str, Any]
    names = []  # type: List[str]
    for pat in installed.get("outputs", []):  # names or glob patterns
        if glob.has_magic(pat):
            found = glob.glob(os.path.join(glob.escape(installed["cwd"]), pat))
            names += sorted(os.path.basename(f) for f in found)
        else:
            names.append(pat)
    for name in names:
        src = os.path.join(installed["cwd"], name)
        try:
            size = os.path.getsize(src)
        except OSError:
            out[name] = {"error": "missing"}
            continue
        if size > OUTPUT_LIMIT:
            out[name] = {"error": f"too big ({size} bytes > {OUTPUT_LIMIT})"}
            continue
        dst = f"{prefix}.{name}"
        shutil.copyfile(src, os.path.join(outdir, dst))
        out[name] = {"file": dst, "bytes": size}
    return out


def complete_records(
    results: Dict[int, Dict[str, Any]], sampled: Dict[int, Dict[int, ThreadGroup]],
    outdir: str, run_id: str,
) -> List[Dict[str, Any]]:  # fmt: skip
    """Fill in each program record from what the run left behind (the
    workload's JSON line, PARSEC's ROI time, the sampler's thread groups);
    the thread_group records, in the order they were first seen."""
    tgs = []
    for rec in results.values():
        out_tail = tail(os.path.join(outdir, rec["stdout"]))
        rec["result"] = workload_result(out_tail)
        m = _ROI_RE.findall(out_tail + tail(os.path.join(outdir, rec["stderr"])))
        rec["roi_s"] = float(m[-1]) if m else None
        groups = sampled.get(rec["index"], {})
        rec["threads_max"] = max((g.threads_max for g in groups.values()), default=0)
        for g in sorted(groups.values(), key=lambda g: g.first_seen):
            tgs.append(
                dict(g.record(), type="thread_group", run_id=run_id,
                     program=rec["name"], program_index=rec["index"])
            )  # fmt: skip
    return tgs
