"""Keep a finding in the repository: a sweep's tidy frames, its report, and
where they came from (issue 15 item 5).

    python3 -m analysis.results.keep INPUT [INPUT ...] findings/NAME --command "..."

An INPUT is a sweep output directory (runs/, sweep.json) or a frames directory
kept earlier (runs.parquet, e.g. findings/OLD/frames: the runs a sweep on an
earlier machine finished, see sweep/kept.py); their runs become one frame (a
run id in two inputs: the later input's copy); done runs that findings/NAME's
frames hold and the inputs do not stop it with an error (give its frames as
an input too). A sweep's runs are those of its
run directories and the kept runs it adopted (``run --kept``, sweep.json
"kept"), read back from the frames directories it names. Writes
``findings/NAME/frames/{metrics,runs,errors}.parquet``, ``report.md`` (with
``report_files/``) and ``PROVENANCE.md``: the command, the project commit the
sweep ran from (sweep.json ``git``; older sweeps lack it and the file says
so), gem5 version and binary hash, kernel builds, image, configs hash, the
hosts and dates of the runs, and every gem5 binary hash with its run count
(runs of one sweep may come from two builds of the same gem5). Run
directories, gem5 outputs and checkpoints stay in the cache; the report
regenerates from the frames alone:

    ./run_all.py report --frames findings/NAME/frames --out findings/NAME

``--no-report`` keeps blind: frames and PROVENANCE.md only, no report (and a
report an earlier keep wrote there is removed, since it would describe other
frames), and the frames hold each run's own rows only, without the
speedup/improvement rows that pair runs. It is for a stage of a
pre-registered experiment that must outlive its machine before its endpoint
may be computed: no contrast between runs is computed or written. A keep
with a report derives those rows again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from ..sweep.atomic import write_text_atomic
from ..sweep.driver import git_state
from .frames import (
    Frames,
    FramesError,
    build_frames,
    kept_rows,
    merge_frames,
    read_frames,
    with_derived,
    without_derived,
)
from .report import write_report_from_frames


def _head() -> str:
    return (git_state() or {}).get("commit", "unknown")


BLIND_NOTE = [
    "Kept blind (`keep --no-report`): no report, and the frames hold each run's own rows "
    "only, no contrast between runs (a stage whose endpoint may not be computed yet).",
    "",
]
REGENERATE = [
    "Regenerate the report from the frames alone:",
    "",
    "```sh",
    "./run_all.py report --frames findings/<this dir>/frames --out findings/<this dir>",
    "```",
    "",
]


def provenance_md(
    manifest: dict[str, Any], runs: pd.DataFrame, command: str, blind: bool = False
) -> str:
    prov = manifest.get("provenance") or {}
    git = manifest.get("git")
    if git:
        made = f"`{git['commit']}`" + (" (with local changes)" if git.get("dirty") else "")
    else:
        made = ("not recorded (sweep started before sweep.json recorded it); "
                f"kept at `{_head()}`")  # fmt: skip
    built = (manifest.get("kernels") or {}).items()
    kernels = ", ".join(f"{v}: `{k['build_id']}`" for v, k in built)
    kernels = kernels or f"`{prov.get('kernel_build_id', '?')}`"
    states = runs["state"].value_counts().to_dict() if "state" in runs else {}
    hosts = sorted(set(runs["host"].dropna().astype(str))) if "host" in runs else []
    lines = [
        "# Provenance",
        "",
        "Command:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- sweep: `{manifest.get('sweep')}` ({manifest.get('source')}): "
        f"{manifest.get('description', '')}",
        f"- project commit of the sweep: {made}",
        f"- backend: {manifest.get('backend')}; {prov.get('tool_version', '?')} "
        f"(binary sha256 `{prov.get('gem5_sha256', '-')}`)",
        f"- kernels: {kernels or '-'}; image `{prov.get('image_id', '?')}`; "
        f"configs tree `{(prov.get('code_revision') or {}).get('configs', '-')}`",
        f"- runs: {len(runs)} ({', '.join(f'{k} {v}' for k, v in sorted(states.items()))}) "
        f"on {', '.join(hosts) or '?'}; sweep manifest written {manifest.get('written_at')}",
        f"- caveat: {manifest.get('caveat', '')}",
        "",
        *(BLIND_NOTE if blind else REGENERATE),
    ]
    return "\n".join(lines)


def _manifest(sweep: Path) -> dict[str, Any]:
    p = sweep / "sweep.json"
    if not p.is_file():
        raise ValueError(f"{sweep}: no sweep.json (not a sweep output directory)")
    m = json.loads(p.read_text())
    if not isinstance(m, dict):
        raise ValueError(f"{p}: not a JSON object")
    return m


def is_frames_dir(p: Path) -> bool:
    """A frames directory (kept earlier) rather than a sweep output directory."""
    return (Path(p) / "runs.parquet").is_file()


def read_input(p: Path) -> tuple[Frames, dict[str, Any] | None]:
    """(frames, sweep manifest) of one input; a frames directory has no manifest.

    A sweep's frames hold its run directories and the kept runs it adopted
    (sweep.json "kept"), so that keeping it again after another machine change
    keeps the earlier machines' runs too; a run directory a kept run stands for
    (a run that failed here) is left out, as in the sweep's own report."""
    if is_frames_dir(p):
        return read_frames(p), None
    m = _manifest(p)
    kept = kept_inputs(p, m)
    if not kept:
        return build_frames([p]), m
    parts = [(str(d), kept_rows(d, ids)) for d, ids in kept]
    here = build_frames([p])
    replaced = set((m.get("kept") or {}).keys())
    parts.append((str(p), here.only(set(here.runs["run_id"].dropna()) - replaced)))
    fr, notes = merge_frames(parts)
    for n in notes:
        print(f"keep: {p}: {n}", file=sys.stderr)
    return fr, m


def sweeps_with_kept(dirs: list[Path], out: Path) -> tuple[Frames, list[str]] | None:
    """The frames of the dirs with the kept runs their sweeps adopted
    (read_input; a dir without sweep.json: its run directories), merged, when
    a sweep among them adopted some; None when none did (`report DIR` then
    reads the run directories alone, as before). ValueError: a parent dir
    holding a sweep that adopted kept runs (give the sweep dir itself), or
    @out/frames being a frames dir the kept runs are read from."""
    kept: list[Path] = []
    for d in dirs:
        if (d / "sweep.json").is_file():
            kept += [k for k, _ in kept_inputs(d, _manifest(d))]
            continue
        for sj in d.rglob("sweep.json"):
            if kept_inputs(sj.parent, _manifest(sj.parent)):
                raise ValueError(f"{sj.parent} adopted kept runs (--kept): report it as a "
                                 f"sweep dir of its own, not through {d}")  # fmt: skip
    if not kept:
        return None
    if (out / "frames").resolve() in {k.resolve() for k in kept}:
        raise ValueError(f"{out / 'frames'} holds kept runs a sweep adopted: the report's "
                         "frames would replace them there; give another --out")  # fmt: skip
    parts = [(str(d), read_input(d)[0] if (d / "sweep.json").is_file() else build_frames([d]))
             for d in dirs]  # fmt: skip
    return merge_frames(parts)


def kept_inputs(sweep: Path, m: dict[str, Any]) -> list[tuple[Path, set[str]]]:
    """(frames dir, run ids) of the kept runs sweep.json records; ValueError
    naming a frames dir that is gone (its runs would silently be lost)."""
    rec = m.get("kept")
    if not isinstance(rec, dict):
        return []
    ids: dict[Path, set[str]] = {}
    for v in rec.values():
        if isinstance(v, dict) and v.get("run_id") and v.get("frames"):
            ids.setdefault(Path(str(v["frames"])), set()).add(str(v["run_id"]))
    for d, s in ids.items():
        if not d.is_dir():
            raise ValueError(
                f"{sweep / 'sweep.json'}: {len(s)} run(s) adopted with --kept from {d}, "
                "which no longer exists; keep from where it is (check it out again) or "
                "its runs are lost from the finding"
            )
    return list(ids.items())


def earlier_provenance(d: Path) -> str | None:
    """The PROVENANCE.md beside a frames directory (keep wrote it), or None."""
    f = Path(d).parent / "PROVENANCE.md"
    try:
        return f.read_text() if f.is_file() else None
    except (OSError, UnicodeDecodeError):
        return None


def frames_provenance_md(
    d: Path, runs: pd.DataFrame, earlier: str | None = None, how: str = ""
) -> str:
    """What a kept frames directory says about its runs (its manifest stayed
    behind), and @earlier, the PROVENANCE.md kept with them, copied: keeping
    again into the same finding directory replaces that file."""
    states = runs["state"].value_counts().to_dict()
    hosts = sorted(set(runs["host"].dropna().astype(str)))

    def ids(col: str) -> str:
        vals = sorted(set(runs[col].dropna().astype(str))) if col in runs else []
        return ", ".join(f"`{v}`" for v in vals) or "not recorded"

    lines = [
        f"# Provenance of kept frames `{d}`{how}",
        "",
        f"- runs: {len(runs)} ({', '.join(f'{k} {v}' for k, v in sorted(states.items()))}) "
        f"on {', '.join(hosts) or '?'}",
        f"- backend tool: {ids('tool_version')}; kernels: {ids('kernel_build_id')}; "
        f"image: {ids('image_id')}",
        f"- code revision: {ids('code_revision')}",
    ]
    if earlier is None:
        lines.append("- their provenance when kept: no PROVENANCE.md beside the frames")
    else:
        lines += [f"- their provenance when kept (`{Path(d).parent / 'PROVENANCE.md'}`, "
                  "copied):", ""]  # fmt: skip
        lines += [f"> {x}".rstrip() for x in earlier.rstrip("\n").splitlines()]
    return "\n".join([*lines, ""])


def gem5_binaries_md(runs: pd.DataFrame) -> str:
    """Every gem5 binary hash with its run count, and the caveat when there are
    several: gem5 embeds its build date, so two builds of one source differ in
    hash (and in run ids) while every input that decides a result is the same."""
    sha = runs["gem5_sha256"] if "gem5_sha256" in runs else pd.Series(None, index=runs.index)
    g = runs[(runs["backend"] == "gem5") | sha.notna()]
    if g.empty:
        return ""
    sha = sha[g.index]
    counts = sha.dropna().astype(str).value_counts()
    lines = ["# gem5 binaries", ""]
    lines += [f"- `{h}`: {n} run(s)" for h, n in sorted(counts.items())]
    if sha.isna().any():
        lines.append(f"- not recorded (frames kept before runs recorded it): {sha.isna().sum()} "
                     "run(s)")  # fmt: skip
    if len(counts) > 1:
        lines += ["", _binaries_caveat(g[sha.notna()], counts)]
    return "\n".join([*lines, ""])


def _binaries_caveat(g: pd.DataFrame, counts: pd.Series) -> str:
    each = ", ".join(f"{n} runs on binary `{h[:16]}`" for h, n in sorted(counts.items()))
    versions = sorted(set(g["tool_version"].dropna().astype(str)))
    configs = set(g["code_revision"].dropna().astype(str)) if "code_revision" in g else set()
    if len(versions) == 1 and len(configs) == 1:
        return (f"Caveat: {each}, same version ({versions[0]}), source and configs: "
                "gem5 embeds its build date, so two builds of one source differ "
                "in hash.")  # fmt: skip
    return (f"Caveat: {each}; versions {', '.join(versions) or '?'}, "
            f"{len(configs) or 'unrecorded'} configs revision(s): the builds may differ in "
            "more than their date.")  # fmt: skip


def _write_frames(fr: Frames, dest: Path) -> None:
    """dest/frames rewritten file by file, each renamed onto the old one
    (Frames.write): a concurrent reader (`report --frames`, `run --kept`) sees
    old or new files, never a missing directory or half a file (an input may be
    dest/frames itself: it was read before)."""
    fr.write(dest / "frames")


def _refuse_to_drop(dest: Path, fr: Frames) -> None:
    """Keeping into a finding whose frames hold runs the inputs do not would
    lose them silently (e.g. the inputs are a sweep that adopted only some of
    them with --kept; or a blind keep without the finding's frames, whose
    failed runs of a repeat group cut by a machine change the analysis still
    reads): ValueError naming them; give dest/frames as an input too."""
    old = dest / "frames"
    if not is_frames_dir(old):
        return
    runs = read_frames(old).runs
    lost = runs[~runs["run_id"].isin(set(fr.runs["run_id"]))]
    if len(lost):
        n_done = int((lost["state"] == "done").sum())
        names = ", ".join(
            f"{r.policy} f={r.numa_factor:g} r{r['repeat']} ({str(r.run_id)[:16]})"
            for _, r in lost.head(5).iterrows()
        )
        raise ValueError(
            f"{old} holds {len(lost)} run(s) ({n_done} done) the inputs do not ({names}"
            f"{', ...' if len(lost) > 5 else ''}): keeping would lose them; give {old} "
            "as an input too, or remove it to replace the finding"
        )


def keep(inputs: list[Path], dest: Path, command: str, *, report: bool = True) -> Path:
    """One finding from one or more sweeps of the same study (e.g. a sweep and
    the points it was split into) and frames kept from earlier machines: their
    runs in one frame, each input's provenance listed, then the gem5 binaries."""
    read = [(p, *read_input(p)) for p in inputs]
    # read before anything is written: dest may be the finding they were kept in
    kept_of = {Path(p): kept_inputs(p, m) for p, _, m in read if m is not None}
    frames_dirs = [Path(p) for p, _, m in read if m is None]
    frames_dirs += [d for kept in kept_of.values() for d, _ in kept]
    earlier = {d: earlier_provenance(d) for d in frames_dirs}
    fr, notes = merge_frames([(str(p), f) for p, f, _ in read])
    for n in notes:
        print(f"keep: {n}", file=sys.stderr)
    _refuse_to_drop(dest, fr)
    fr = with_derived(fr) if report else without_derived(fr)
    dest.mkdir(parents=True, exist_ok=True)
    _write_frames(fr, dest)
    if report:  # the kept report is the one the frames alone give: it regenerates exactly
        write_report_from_frames(dest / "frames", dest)
    else:  # blind: a report of earlier frames would no longer describe these
        (dest / "report.md").unlink(missing_ok=True)
        shutil.rmtree(dest / "report_files", ignore_errors=True)
    (dest / "report.html").unlink(missing_ok=True)  # Markdown only in git
    parts = []
    given = {Path(p).resolve() for p, _, m in read if m is None}
    for p, f, m in read:
        mine = f.runs if len(f.runs) else fr.runs
        if m is None:
            parts.append(frames_provenance_md(p, mine, earlier[Path(p)]))
            continue
        kept = kept_of[Path(p)]
        adopted = set().union(*(ids for _, ids in kept))
        parts.append(provenance_md(m, mine[~mine["run_id"].isin(adopted)], command, not report))
        for d, ids in kept:  # the kept runs this sweep adopted
            if d.resolve() not in given:  # else listed as an input of its own
                how = f" (adopted by the sweep `{p}`)"
                parts.append(
                    frames_provenance_md(d, mine[mine["run_id"].isin(ids)], earlier[d], how)
                )
    parts.append(gem5_binaries_md(fr.runs))
    write_text_atomic(dest / "PROVENANCE.md", "\n".join(x for x in parts if x))
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "sweep", type=Path, nargs="+", help="sweep dir(s) or frames dir(s), then the finding dir"
    )
    ap.add_argument("--command", required=True, help="the command that made the sweep")
    ap.add_argument(
        "--no-report",
        action="store_true",
        help="keep blind: frames and provenance, no report (a stage whose endpoint "
        "must not be computed yet)",
    )
    a = ap.parse_args(argv)
    try:
        if len(a.sweep) < 2:
            raise ValueError("give at least one sweep or frames dir and the finding dir")
        d = keep(a.sweep[:-1], a.sweep[-1], a.command, report=not a.no_report)
    except (OSError, ValueError, FramesError) as e:
        print(f"keep: {e}", file=sys.stderr)
        return 2
    print(f"kept: {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
