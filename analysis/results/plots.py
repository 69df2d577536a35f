"""Matplotlib (Agg) figures returned as PNG bytes for embedding as base64."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

DPI = 80
POLICY_ORDER = ["stock", "default", "null", "tm", "mb", "bce", "mbplus", "mbplus_ff", "excl_base",
                "excl", "excl_ff", "autonuma", "imar", "imar2", "devil", "plb"]  # fmt: skip


_CYCLE = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def color(policy: str) -> str:
    i = (
        POLICY_ORDER.index(policy)
        if policy in POLICY_ORDER
        else len(POLICY_ORDER) + hash(policy) % 2
    )
    return _CYCLE[i % len(_CYCLE)]


def order_policies(ps: Sequence[str]) -> list[str]:
    known = [p for p in POLICY_ORDER if p in ps]
    return known + sorted(p for p in ps if p not in POLICY_ORDER)


def png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def lines_vs(summ: pd.DataFrame, x: str, panels: list[tuple[str, str, str]], title: str) -> bytes:
    """One panel per (column, ylabel, errcol): a line per policy over x."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.2), squeeze=False)
    for ax, (col, ylabel, err) in zip(axes[0], panels, strict=True):
        for pol in order_policies(list(summ["policy"].unique())):
            d = summ[summ["policy"] == pol].sort_values(x)
            if d.empty or d[col].isna().all():
                continue
            yerr = d[err] if err and err in d else None
            ax.errorbar(
                d[x], d[col], yerr=yerr, marker="o", ms=3, capsize=2, label=pol, color=color(pol)
            )
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel, fontsize=9)
        xs = sorted(summ[x].unique())
        if x == "threads" and xs and min(xs) > 0:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{v:g}" for v in xs])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return png(fig)


def grouped_bars(
    table: pd.DataFrame, ylabel: str, title: str, err: pd.DataFrame | None = None
) -> bytes:
    """table: index = groups (x), columns = series; optional err of the same shape."""
    n_groups, n_series = table.shape
    fig, ax = plt.subplots(figsize=(max(4.0, 0.5 * n_groups * max(1, n_series) * 0.6 + 2), 3.2))
    width = 0.8 / max(1, n_series)
    x = np.arange(n_groups)
    for i, col in enumerate(table.columns):
        e = err[col].values if err is not None and col in err else None
        ax.bar(
            x + i * width - 0.4 + width / 2,
            table[col].values,
            width,
            yerr=e,
            capsize=2,
            label=str(col),
            color=color(str(col)),
        )
    ax.set_xticks(x)
    ax.set_xticklabels(
        [str(i) for i in table.index],
        rotation=45 if n_groups > 6 else 0,
        ha="right" if n_groups > 6 else "center",
        fontsize=8,
    )
    ax.set_ylabel(ylabel)
    ax.axhline(0, color="black", lw=0.5)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=10)
    return png(fig)


def small_multiples_bars(data: dict[str, pd.Series], title: str) -> bytes:
    """One bar panel per metric (series indexed by policy)."""
    n = len(data)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False)
    for ax, (name, s) in zip(axes.flat, data.items(), strict=False):
        ax.bar([str(i) for i in s.index], s.values, color=[color(str(i)) for i in s.index])
        ax.set_title(name, fontsize=9)
        ax.tick_params(axis="x", rotation=45, labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return png(fig)


def heatmap(grid: pd.DataFrame, title: str, xlabel: str, ylabel: str) -> bytes:
    fig, ax = plt.subplots(figsize=(0.7 * grid.shape[1] + 2.5, 0.5 * grid.shape[0] + 1.8))
    vals = grid.values.astype(float)
    lim = np.nanmax(np.abs(vals)) if np.isfinite(vals).any() else 1.0
    lim = lim or 1.0
    im = ax.imshow(vals, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto", origin="lower")
    ax.set_xticks(range(grid.shape[1]))
    ax.set_xticklabels([str(c) for c in grid.columns], fontsize=8)
    ax.set_yticks(range(grid.shape[0]))
    ax.set_yticklabels(
        [f"{r:g}" if isinstance(r, float) else str(r) for r in grid.index], fontsize=8
    )
    for (i, j), v in np.ndenumerate(vals):
        if np.isfinite(v):
            ax.text(j, i, f"{v:+.1f}", ha="center", va="center", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.colorbar(im, ax=ax, label="improvement %")
    ax.set_title(title, fontsize=10)
    return png(fig)


def forest(
    rows: Sequence[dict],
    xlabel: str,
    title: str,
    mark: str = "pre-registered",
    threshold: tuple[float, str] | None = None,
) -> bytes:
    """A forest plot: one row per contrast, grouped (a bold heading per group).

    Each row is a dict with ``group``, ``label`` (a policy: its colour),
    ``mean``, ``lo``, ``hi`` (the interval; nan when there is none), ``n``
    (pairs) and ``marked`` (the pre-registered contrast: a shaded band, a
    diamond and @mark beside its numbers). A row without an interval gets a
    hollow marker and the words "no interval"; never a bar. The line at 0 is
    "no difference"; mean, interval and n are printed at the right edge.
    @threshold (x, label): a dashed line at x, labelled (e.g. a decision rule's
    bound), kept inside the axis.
    """
    groups: list[str] = list(dict.fromkeys(str(r["group"]) for r in rows))
    ys: list[tuple[float, dict]] = []
    heads: list[tuple[float, str]] = []
    y = 0.0
    for g in groups:
        heads.append((y, g))
        y += 1
        for r in rows:
            if str(r["group"]) == g:
                ys.append((y, r))
                y += 1
        y += 0.4
    fig, ax = plt.subplots(figsize=(8.6, 0.3 * y + 1.3))
    finite = [v for _, r in ys for v in (r["mean"], r["lo"], r["hi"]) if np.isfinite(v)]
    extra = [0.0] + ([threshold[0]] if threshold else [])
    lo_x, hi_x = (min(finite + extra), max(finite + extra)) if finite else (-1.0, 1.0)
    pad = 0.08 * (hi_x - lo_x or 1.0)
    ax.set_xlim(lo_x - pad, hi_x + pad)
    for yy, r in ys:
        c = color(str(r["label"]))
        has_ci = np.isfinite(r["lo"]) and np.isfinite(r["hi"]) and r["n"] >= 2
        if r.get("marked"):
            ax.axhspan(yy - 0.45, yy + 0.45, color="#ffe9a8", zorder=0)
        if has_ci:
            ax.plot([r["lo"], r["hi"]], [yy, yy], color=c, lw=2, zorder=2)
            ax.plot([r["lo"]] * 2, [yy - 0.18, yy + 0.18], color=c, lw=1.2, zorder=2)
            ax.plot([r["hi"]] * 2, [yy - 0.18, yy + 0.18], color=c, lw=1.2, zorder=2)
        if np.isfinite(r["mean"]):
            big = bool(r.get("marked"))
            ax.plot(r["mean"], yy, marker="D" if big else "o", ms=8 if big else 6, zorder=3,
                    mfc=c if has_ci else "white", mec="black" if big else c)  # fmt: skip
        txt = f"{r['mean']:+.1f} %" if np.isfinite(r["mean"]) else "–"
        txt += f"  [{r['lo']:+.1f}, {r['hi']:+.1f}]" if has_ci else "  no interval"
        txt += f"  n={int(r['n'])}"
        if r.get("marked"):
            txt += f"  ({mark})"
        ax.annotate(txt, xy=(1.01, yy), xycoords=("axes fraction", "data"), va="center",
                    fontsize=8, fontweight="bold" if r.get("marked") else "normal")  # fmt: skip
    ax.axvline(0, color="black", lw=0.8, zorder=1)
    if threshold:
        ax.axvline(threshold[0], color="#b03a2e", lw=0.9, ls="--", zorder=1)
        ax.annotate(threshold[1], xy=(threshold[0], -0.75), fontsize=7, color="#b03a2e",
                    ha="left", va="bottom", rotation=0)  # fmt: skip
    ticks = [yy for yy, _ in ys] + [yy for yy, _ in heads]
    labels = [str(r["label"]) for _, r in ys] + [g for _, g in heads]
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8)
    for t, (_, r) in zip(ax.get_yticklabels(), ys, strict=False):
        if r.get("marked"):
            t.set_fontweight("bold")
    for t in ax.get_yticklabels()[len(ys) :]:
        t.set_fontweight("bold")
        t.set_fontsize(9)
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(y - 0.4, -0.8)  # first group at the top
    ax.set_xlabel(xlabel, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=10)
    return png(fig)
