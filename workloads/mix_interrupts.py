"""Per-CPU interrupt counts around the mix (/proc/interrupts), a diagnostic.

Why: a CPU that stays halted while its run queue holds tasks (the verdict
pilot's stage A4 under gem5, findings/2026-11-28-verdict-pilot/PLAN.md) is
what a lost or late reschedule IPI looks like. The runner reads
/proc/interrupts where it reads the run queues' counters (the ROI's start,
the first program's exit, the end) and records, per window, each row's
per-CPU delta: RES (rescheduling IPIs received), LOC (local timer), CAL
(function calls), TLB, and every device line by its number.

Stdlib only, Python >= 3.6 (the runner's floor); the run record keeps
the raw texts too, so a parse that goes wrong here loses nothing.
"""

# ruff: noqa: UP006, UP035, UP045

from typing import Dict, List, Optional

INTERRUPTS = "/proc/interrupts"


class InterruptsError(ValueError):
    pass


def parse(text: str) -> Dict[str, List[int]]:
    """{row: [count per CPU]} of a /proc/interrupts text. The header names
    the CPUs; a row has a name ending in ':' and then up to that many counts
    (ERR and MIS have one total, kept as a list of one)."""
    lines = text.splitlines()
    if not lines or not lines[0].split() or not lines[0].split()[0].startswith("CPU"):
        raise InterruptsError("no CPU header line")
    ncpu = len(lines[0].split())
    rows = {}  # type: Dict[str, List[int]]
    for line in lines[1:]:
        parts = line.split()
        if not parts or not parts[0].endswith(":"):
            continue
        counts = []  # type: List[int]
        for p in parts[1 : 1 + ncpu]:
            if not p.isdigit():
                break
            counts.append(int(p))
        if counts:
            rows[parts[0][:-1]] = counts
    if not rows:
        raise InterruptsError("no interrupt rows")
    return rows


def delta(before: str, after: str) -> Dict[str, List[int]]:
    """Per row, per CPU: after - before, rows present in both, rows whose
    counts did not move left out."""
    b, a = parse(before), parse(after)
    out = {}  # type: Dict[str, List[int]]
    for row, counts in a.items():
        if row not in b or len(b[row]) != len(counts):
            continue
        d = [x - y for x, y in zip(counts, b[row])]  # noqa: B905 (Python 3.6)
        if any(d):
            out[row] = d
    return out


def snapshot(path: str = INTERRUPTS) -> Optional[str]:
    """The text of one read, None without the file."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def window(begin: Optional[str], end: Optional[str]) -> Dict:
    """One window's record: {"status", "delta"} or why there is none."""
    if begin is None or end is None:
        return {"status": "absent"}
    try:
        return {"status": "present", "delta": delta(begin, end)}
    except InterruptsError as e:
        return {"status": "error", "error": str(e)}


def record(begin: Optional[str], first: Optional[str], end: Optional[str]) -> Dict:
    """The run_end "interrupts" entry: the ROI ("roi": start to end) and the
    all-running window ("all_running": start to the first program's exit),
    with the raw texts."""
    rec = {
        "path": INTERRUPTS,
        "roi": window(begin, end),
        "all_running": window(begin, first),
    }  # type: Dict
    for key, text in (("begin", begin), ("first_exit", first), ("end", end)):
        rec[key + "_raw"] = text
    return rec
