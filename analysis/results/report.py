"""Reports: a self-contained HTML page and a Markdown summary from any set of runs.

``build`` puts the sections in their order: the head (inputs, backends and
their caveats), the runs and their provenance, the headline, the verdict
(only where excl and default runs are paired in 2 or more repeats), the first
finding, the figures (Fig. 11-14 views of Chiang & Su [Chiang21] Sec. 4,
heatmaps, best/worst), the user-level policies, the warm-up effect, the host
cost, the metric definitions and the input problems. The modules below it:

* ``reference.py``: the reference configuration (the group closest to the
  paper's gem5, 4 x 8, f = 1.6, else the one with most runs) and the baseline;
* ``sections.py``: the text and table sections (headline, paper comparison,
  verdict, finding, warm-up, cost, definitions, input problems);
* ``figures.py``: the figure sections;
* ``document.py``: the document model (Section, Table, Figure) and its two
  renderers, HTML and Markdown.

``write_report`` (run directories) and ``write_report_from_frames`` (kept
frames) write report.html, report.md and report_files/. Every string from the
inputs is escaped (html.escape; in report.md also Markdown's own characters,
``md_text``) and every plot is a base64 PNG, so report.html has no external
references; the Markdown file links PNG copies in report_files/.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from ..sweep.atomic import write_bytes_atomic, write_text_atomic
from ..sweep.backends import CAVEATS
from . import glossary
from .daemons import daemon_section
from .document import (  # noqa: F401 - the document model, re-exported for callers
    CSS,
    IDENTICAL,
    Figure,
    Section,
    Table,
    _fmt,
    md_text,
    pm,
    to_html,
    to_markdown,
)
from .figures import best_worst, fig11, fig12, fig13, fig14, heatmaps
from .frames import (
    Frames,
    build_frames,
    kept_rows,
    merge_frames,
    read_frames_many,
)
from .reference import cfg_label, family, ref_threads, reference_group, select
from .sections import (
    NO_GATE,
    PAPER_REF,
    cost_section,
    definitions,
    errors_section,
    finding_section,
    finding_unfilled,
    headline,
    verdict_section,
    warmup_section,
)


def _mix(fr: Frames) -> pd.DataFrame:
    m = fr.metrics
    return m[m["entity_type"] == "mix"]


def build(
    fr: Frames, title: str, inputs: list[Path], notes: list[str] | None = None
) -> list[Section]:
    """The report's sections; @notes: what merging the inputs noticed (merge_frames),
    listed under Input problems."""
    secs: list[Section] = []
    runs = fr.runs
    mx = _mix(fr)
    backends = sorted(set(runs["backend"].dropna())) if not runs.empty else []

    head = Section(title)
    head.paras.append(
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} from "
        f"{len(runs)} runs: {', '.join(str(p) for p in inputs)}."
    )
    head.paras.append(f"Backend(s): {', '.join(backends) or 'none'}.")
    head.paras.append("Fig. N views and the paper's figures refer to " + PAPER_REF + ".")
    for b in backends:
        head.paras.append(("WARNING — " if b == "qemu" else "") + CAVEATS.get(b, b))
    secs.append(head)

    st = Section("Runs")
    counts = runs["state"].value_counts().to_dict() if not runs.empty else {}
    st.items.append(Table(["state", "runs"], [[k, v] for k, v in sorted(counts.items())]))
    prov_rows = []
    if not runs.empty:
        # the gem5 binary too: two builds of one source differ in it (and in run ids)
        sha = runs["gem5_sha256"].map(lambda h: str(h)[:16] if isinstance(h, str) else None)
        by = ["backend", "kernel_build_id", "image_id", "tool_version", sha.rename("gem5")]
        for (b, k, i, t, g), n in runs.groupby(by, dropna=False).size().items():
            prov_rows.append([b, k, i, t, "-" if pd.isna(g) else g, n])
    st.items.append(
        Table(
            ["backend", "kernel build", "image", "tool", "gem5 binary", "runs"],
            prov_rows,
            "Provenance (all of it enters the run ids)",
        )
    )
    bad = runs[runs["state"].isin(["failed", "timeout", "interrupted"])] if not runs.empty else runs
    if not bad.empty:
        rows = [
            [
                r["run_id"][:16],
                r["state"],
                cfg_label(r) + f" {r['policy']} r{r['repeat']}",
                r["exit_code"],
                (r["error"] or "")[:200],
            ]
            for _, r in bad.head(200).iterrows()
        ]
        st.items.append(
            Table(
                ["run", "state", "point", "exit", "error"],
                rows,
                f"Unsuccessful runs ({len(bad)}; first 200)",
            )
        )
    st.paras.extend(glossary.mix_glossary(runs))  # what tiny, lft, pft stand for
    secs.append(st)

    if mx.empty:
        secs.append(Section("Results", ["No finished run with results yet."]))
        secs.append(errors_section(fr, notes))
        return secs

    ref = reference_group(mx)
    assert ref is not None
    qemu_note = (
        " (QEMU: host time under TCG, not architectural performance)"
        if ref["backend"] == "qemu"
        else ""
    )
    rmx = select(mx, ref)
    threads = sorted(int(t) for t in rmx["threads"].unique())
    secs.append(headline(mx, ref, rmx, qemu_note, runs))
    vs = verdict_section(fr.metrics, fr.runs)  # only with paired excl and default repeats
    if vs is not None:
        secs.append(vs)
    why_not = finding_unfilled(mx)
    fs = finding_section(mx, qemu_note, fr.metrics) if why_not is None else None
    if fs:
        fs.paras[:0] = glossary.mix_glossary(runs)
        secs.append(fs)
    elif why_not is not None and why_not != NO_GATE:
        head.paras.append(
            "Not shown: the first-finding section (positive control, go/no-go gate, "
            f"improvement per NUMA factor), which these runs cannot fill: {why_not}."
        )
    secs.append(fig11(rmx, ref, qemu_note, family(mx, ref)))
    s12 = fig12(rmx, ref, qemu_note)
    if s12:
        secs.append(s12)
    t_ref = ref_threads(threads)
    secs.append(fig13(rmx, t_ref, ref))
    s14 = fig14(select(fr.metrics, ref), t_ref, ref, qemu_note)
    s14.paras[:0] = glossary.mix_glossary(runs, [str(ref["mix"])])
    secs.append(s14)
    secs.append(heatmaps(mx, ref))
    secs.append(best_worst(mx))
    ds = daemon_section(mx, runs)  # the user-level policies beside the kernel ones
    if ds is not None:
        secs.append(ds)
    ws = warmup_section(mx)
    if ws is not None:
        secs.append(ws)
    cs = cost_section(runs, mx)
    if cs is not None:
        secs.append(cs)
    secs.append(definitions())
    secs.append(errors_section(fr, notes))
    return secs


def write_report(
    dirs: list[Path],
    out: Path,
    title: str | None = None,
    run_ids: set[str] | None = None,
    kept: list[tuple[Path, set[str]]] | None = None,
) -> dict[str, Path]:
    """Frames (written to out/frames) and the report of the runs under @dirs.

    @kept: frames directories of earlier machines and the run ids to take from
    each (the runs a sweep adopted, sweep/kept.py); they come first, so a run
    also found under @dirs is reported from there.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parts = [(str(d), kept_rows(Path(d), ids)) for d, ids in kept or []]
    parts.append((", ".join(map(str, dirs)), build_frames(dirs, run_ids=run_ids)))
    fr, notes = merge_frames(parts)
    fpaths = fr.write(out / "frames")
    inputs = [Path(d) for d, _ in kept or []] + [Path(d) for d in dirs]
    secs = build(fr, title or "numa-lb-study report", inputs, notes)
    return {**_write_sections(secs, out), "frame": fpaths["metrics"],
            **{f"frame_{k}": v for k, v in fpaths.items()}}  # fmt: skip


def write_report_from_frames(
    frames: Path | list[Path],
    out: Path,
    title: str | None = None,
    notes: list[str] | None = None,
) -> dict[str, Path]:
    """The report again from frames directories alone (metrics/runs/errors
    parquet, as write_report leaves them): a finding kept in the repository
    regenerates without its run directories. Several directories are reported
    as one (merge_frames: a run id found twice is taken from the later one;
    @notes receives what the merge noticed). FramesError if one is missing or
    unreadable."""
    dirs = [Path(frames)] if isinstance(frames, str | Path) else [Path(f) for f in frames]
    fr, found = read_frames_many(dirs)
    if notes is not None:
        notes.extend(found)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    secs = build(fr, title or "numa-lb-study report", dirs, found)
    return {**_write_sections(secs, out), "frame": dirs[0] / "metrics.parquet"}


def _write_sections(secs: list[Section], out: Path) -> dict[str, Path]:
    img = out / "report_files"
    img.mkdir(exist_ok=True)
    for sec in secs:
        for it in sec.items:
            if isinstance(it, Figure):
                write_bytes_atomic(img / f"{it.name}.png", it.png)
    write_text_atomic(out / "report.html", to_html(secs))  # temp + rename: never half a file
    write_text_atomic(out / "report.md", to_markdown(secs, "report_files"))
    return {"html": out / "report.html", "md": out / "report.md"}
