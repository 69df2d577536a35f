"""The report's document model (sections of paragraphs, tables and figures)
and its two renderers: a self-contained HTML page and a Markdown file.

Every string reaches the output escaped: html.escape in report.html; in
report.md ``md_text`` (see there). report.py builds the sections.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import Any

from . import plots


# ------------------------------------------------------------------ document
@dataclass
class Table:
    header: list[str]
    rows: list[list[Any]]
    caption: str = ""


@dataclass
class Figure:
    png: bytes
    caption: str
    name: str


@dataclass
class Section:
    title: str
    paras: list[str] = field(default_factory=list)
    items: list[Table | Figure | str] = field(default_factory=list)


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if abs(v) >= 1e5 or (abs(v) < 1e-3 and v != 0):
            return f"{v:.3g}"
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


IDENTICAL = " (identical repeats: no CI)"


def pm(mean: float, ci: float, pct: bool = False) -> str:
    """mean ± 95 % CI; a CI of exactly 0 means every repeat gave the same value
    (a deterministic simulator without guest-side variation), which is said."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    s = f"{mean:+.1f} %" if pct else _fmt(float(mean))
    if ci is not None and isinstance(ci, float) and not math.isnan(ci):
        if ci == 0.0:
            return s + IDENTICAL
        s += f" ± {ci:.1f}" if pct else f" ± {_fmt(float(ci))}"
    return s


# ------------------------------------------------------------------ render
CSS = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px;max-width:100%}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
img{max-width:100%;height:auto}
th{background:#eee} caption{caption-side:top;text-align:left;font-style:italic;padding:3px}
figure{margin:1em 0} figcaption{font-style:italic;font-size:13px} .warn{color:#a00;font-weight:bold}
"""


def to_html(secs: list[Section]) -> str:
    e = html.escape
    out = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>{e(secs[0].title)}</title><style>{CSS}</style></head><body>",
    ]
    for i, sec in enumerate(secs):
        out.append(f"<h{1 if i == 0 else 2}>{e(sec.title)}</h{1 if i == 0 else 2}>")
        for p in sec.paras:
            cls = " class='warn'" if p.startswith("WARNING") else ""
            out.append(f"<p{cls}>{e(p)}</p>")
        for it in sec.items:
            if isinstance(it, Table):
                out.append("<table>")
                if it.caption:
                    out.append(f"<caption>{e(it.caption)}</caption>")
                out.append("<tr>" + "".join(f"<th>{e(str(h))}</th>" for h in it.header) + "</tr>")
                for r in it.rows:
                    out.append("<tr>" + "".join(f"<td>{e(_fmt(c))}</td>" for c in r) + "</tr>")
                out.append("</table>")
            elif isinstance(it, Figure):
                out.append(
                    f"<figure><img alt='{e(it.caption, quote=True)}' "
                    f"src='data:image/png;base64,{plots.b64(it.png)}'>"
                    f"<figcaption>{e(it.caption)}</figcaption></figure>"
                )
            else:
                out.append(f"<p>{e(str(it))}</p>")
    out.append("</body></html>")
    return "\n".join(out)


_MD_SPECIAL = re.compile(r"[\\`*\[\]|#~]")
_MD_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MD_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # what would open a tag, comment or autolink
_MD_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")  # what would be read as an entity


def md_text(v: Any) -> str:
    """Any text for report.md: strings from specs and runs (mix, policy, program
    names, notes, errors) must not become markup there either, and the file
    must read as plain text too.

    Only what a Markdown viewer would read as HTML becomes an entity: a < that
    would open a tag, comment or autolink (&lt;; so a raw <script> is never
    live) and an & that would start an entity reference (&amp;); "Chiang & Su"
    and ">= 50" stay as they are. Markdown's own characters (backslash,
    backtick, *, [, ], |, #, ~, word-edge _, a leading >) are backslash-escaped;
    newlines become spaces, so no string can start a block of its own.
    Intra-word _ (excl_base) stays.
    """
    s = _MD_ENTITY.sub("&amp;", _fmt(v))
    s = _MD_TAG_START.sub("&lt;", s)
    s = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), s)
    s = _MD_EDGE_UNDERSCORE.sub(r"\\_", s)
    s = " ".join(s.splitlines())
    return "\\" + s if s.startswith(">") else s


def to_markdown(secs: list[Section], img_dir: str) -> str:
    out: list[str] = []
    for i, sec in enumerate(secs):
        out.append(f"{'#' if i == 0 else '##'} {md_text(sec.title)}\n")
        for p in sec.paras:
            out.append(f"{'**' + md_text(p) + '**' if p.startswith('WARNING') else md_text(p)}\n")
        for it in sec.items:
            if isinstance(it, Table):
                if it.caption:
                    out.append(f"*{md_text(it.caption)}*\n")
                out.append("| " + " | ".join(md_text(h) for h in it.header) + " |")
                out.append("|" + "---|" * len(it.header))
                for r in it.rows:
                    out.append("| " + " | ".join(md_text(c) for c in r) + " |")
                out.append("")
            elif isinstance(it, Figure):
                out.append(f"![{md_text(it.name)}]({img_dir}/{it.name}.png)\n")
                out.append(f"*{md_text(it.caption)}*\n")
            else:
                out.append(f"{md_text(it)}\n")
    return "\n".join(out)
