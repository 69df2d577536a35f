"""What the names in a report stand for: mixes (tiny, lb3-block192) and their
programs (lft, pft), which the sweep spec names freely.

A run records what each program ran (the runs frame's ``programs`` column,
frames.program_commands); frames kept before that column existed fall back to
the shipped preset's mix of the same name, and say so.
"""

from __future__ import annotations

import tomllib

import pandas as pd

from ..sweep.spec import PRESET_DIR

# workloads/README.md, "Synthetic workloads": one line each
WORKLOADS = {
    "leader_ft": "the main thread first-touches all shared data, so its pages sit on one "
    "node; workers read and update their chunks",
    "perthread_ft": "each worker first-touches its own block, so its pages sit on its node, "
    "and reads a share of the next worker's",
    "master_clients": "a master thread owns an array every client reads each round",
    "compute_small": "Black-Scholes on a small array: compute-bound",
    "ptrchase": "dependent loads over a random chain (latency calibration)",
}


def _workload(cmd: str) -> tuple[str, str] | None:
    """(workload, what it does) of a command, None when unknown."""
    exe = cmd.split()[0] if cmd.split() else ""
    if exe in WORKLOADS:
        return exe, WORKLOADS[exe]
    if "parsec" in cmd:
        return exe, "a PARSEC 3.0 program"
    return None


def _preset_mixes() -> dict[str, list[str]]:
    """mix name -> "name: workload args" of every explicit mix in the shipped
    presets (the first preset that defines a name wins)."""
    out: dict[str, list[str]] = {}
    for f in sorted(PRESET_DIR.glob("*.toml")):
        try:
            doc = tomllib.loads(f.read_text())
        except (OSError, tomllib.TOMLDecodeError):
            continue
        for name, mix in (doc.get("mixes") or {}).items():
            progs = mix.get("programs") if isinstance(mix, dict) else None
            if name in out or not isinstance(progs, list):
                continue
            out[name] = [
                f"{p.get('name')}: {p.get('workload') or p.get('parsec') or p.get('cmd')} "
                + " ".join(map(str, p.get("args") or []))
                for p in progs
                if isinstance(p, dict)
            ]
    return out


def mix_glossary(runs: pd.DataFrame | None, mixes: list[str] | None = None) -> list[str]:
    """One sentence per mix of @runs (or @mixes): its programs, the command
    each ran, and what each workload does."""
    if runs is None or runs.empty or "mix" not in runs.columns:
        return []
    names = mixes or sorted(set(runs["mix"].dropna().astype(str)))
    recorded = runs["programs"] if "programs" in runs.columns else pd.Series(None, index=runs.index)
    presets: dict[str, list[str]] | None = None
    out = []
    for mix in names:
        rec = recorded[runs["mix"].astype(str) == mix].dropna()
        if len(rec):
            progs, src = str(rec.iloc[0]).split("; "), ""
        else:
            presets = _preset_mixes() if presets is None else presets
            if mix not in presets:
                continue
            progs = presets[mix]
            src = " (as the shipped presets define it today: these frames predate the record)"
        parts, notes = [], {}
        for p in progs:
            name, _, cmd = p.partition(": ")
            parts.append(f"{name} = {cmd.strip()}")
            if (w := _workload(cmd.strip())) is not None:
                notes[w[0]] = w[1]
        what = "".join(f" {w}: {n}." for w, n in notes.items())
        out.append(f"Mix {mix}{src}: " + "; ".join(parts) + "." + what)
    return out
