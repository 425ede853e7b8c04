# SPDX-License-Identifier: Apache-2.0
"""matplotlib figures (Agg backend, object API: no pyplot state), embedded as base64 PNG."""

from __future__ import annotations

import base64
import html
import io
import math

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402

DPI = 100


def _margins(fig: Figure, *, left=0.75, right=0.25, top=0.55, bottom=0.55, wspace=0.35, hspace=0.6) -> None:
    """Fixed margins in inches (matplotlib's constrained layout drew every figure twice: 40 % of the
    report's time)."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h, wspace=wspace,
                        hspace=hspace)


def fmt(x, digits: int = 3) -> str:
    """A number for a table or a cell: `digits` significant digits, non-finite spelled out."""
    if x is None:
        return "—"
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def to_img(fig: Figure, alt: str) -> str:
    """The figure as an <img> with a base64 PNG data URI (no file, no network)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img class="fig" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def wrap(title: str) -> str:
    """A column title over lines: "A: run.json · bf16" -> "A: run.json\nbf16"."""
    return title.replace(" · ", "\n")


class Metric:
    """One row of a heatmap grid: its title, how to colour it, and the value per cell."""

    def __init__(self, title: str, *, signed: bool, unit_range=None, fmt_digits: int = 2):
        self.title = title
        self.signed = signed          # diverging colours, symmetric about 0
        self.unit_range = unit_range  # fixed (vmin, vmax), e.g. (0, 1) for shares
        self.fmt_digits = fmt_digits


def heatmap_grid(metrics, columns, *, xlabel="head", ylabel="batch", alt="heatmaps", xticklabels=None,
                 yticklabels=None) -> str:
    """Rows: metrics; columns: inputs (or modes) shown side by side with one colour scale per row.

    `columns` is a list of (title, matrices, marks): matrices[i] is a 2-d array (batch x head) for
    metrics[i] (NaN where there is no value, drawn grey); marks a boolean array of the same shape or
    None (a black frame: the head is flagged biased). `xticklabels`/`yticklabels`: names of the
    columns/rows of every matrix (default: their indices); `yticklabels` may instead hold one list
    per column (columns with different rows, e.g. different modes)."""
    nrow, ncol = len(metrics), len(columns)
    shape = max((np.shape(m) for _, ms, _ in columns for m in ms), key=lambda s: s[0] * s[1])
    cell_w = 0.55 if shape[1] <= 16 else max(0.12, 8.0 / shape[1])
    panel_w = max(2.7, cell_w * shape[1] + 0.9)
    panel_h = max(1.3, min(0.45 * shape[0], 6.0) + 0.9)
    fig = Figure(figsize=(min(panel_w * ncol + 2.0, 18), panel_h * nrow + 0.3))
    axes = fig.subplots(nrow, ncol, squeeze=False)
    _margins(fig, top=0.85, right=0.7, hspace=0.75, wspace=0.35)
    annotate = shape[0] * shape[1] <= 64
    for r, metric in enumerate(metrics):
        values = [np.asarray(ms[r], dtype=float) for _, ms, _ in columns]
        finite = np.concatenate([v[np.isfinite(v)].ravel() for v in values]) if values else np.array([])
        if metric.unit_range is not None:
            vmin, vmax = metric.unit_range
        elif metric.signed:
            lim = float(np.max(np.abs(finite))) if finite.size else 1.0
            lim = lim if lim > 0 else 1.0
            vmin, vmax = -lim, lim
        else:
            vmin = float(finite.min()) if finite.size else 0.0
            vmax = float(finite.max()) if finite.size else 1.0
            if vmax <= vmin:
                vmax = vmin + 1.0
        cmap = matplotlib.colormaps["RdBu_r" if metric.signed else "viridis"].copy()
        cmap.set_bad("#d0d0d0")
        im = None
        for c, (title, _, marks) in enumerate(columns):
            ax = axes[r][c]
            v = values[c]
            im = ax.imshow(np.ma.masked_invalid(v), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                           interpolation="nearest")
            ax.set_title(f"{wrap(title)}\n{metric.title}" if r == 0 else metric.title, fontsize=8)
            if xticklabels is not None and v.shape[1] <= 16:
                ax.set_xticks(range(v.shape[1]), xticklabels[:v.shape[1]])
            else:
                ax.set_xticks(range(v.shape[1]) if v.shape[1] <= 16 else [])
            if yticklabels is not None and v.shape[0] <= 16:
                names = yticklabels[c] if isinstance(yticklabels[0], (list, tuple)) else yticklabels
                ax.set_yticks(range(v.shape[0]), names[:v.shape[0]])
            else:
                ax.set_yticks(range(v.shape[0]) if v.shape[0] <= 16 else [])
            ax.tick_params(labelsize=7)
            if r == nrow - 1:
                ax.set_xlabel(xlabel, fontsize=8)
            if c == 0:
                ax.set_ylabel(ylabel, fontsize=8)
            if marks is not None:
                for (i, j) in zip(*np.nonzero(np.asarray(marks))):
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2))
            if annotate:
                for i in range(v.shape[0]):
                    for j in range(v.shape[1]):
                        # white on the dark ends of the colour map, black elsewhere
                        t = (v[i, j] - vmin) / (vmax - vmin) if np.isfinite(v[i, j]) else 0.5
                        dark = abs(t - 0.5) > 0.3 if metric.signed else t < 0.45
                        ax.text(j, i, fmt(v[i, j], metric.fmt_digits), ha="center", va="center", fontsize=7,
                                color="white" if dark else "black")
        fig.colorbar(im, ax=list(axes[r]), fraction=0.04, pad=0.02, aspect=10)
    return to_img(fig, alt)


def ci_plot(columns, *, ylabel="mean error (ulps)", alt="means with 95 % intervals") -> str:
    """Per column (title, labels, series): series = [(name, means, lows, highs)], one marker with its
    interval per label (head), panels side by side sharing the y axis."""
    ncol = len(columns)
    nlab = max(len(labels) for _, labels, _ in columns)
    fig = Figure(figsize=(min(max(3.0, 0.35 * nlab + 1.5) * ncol, 18), 3.0))
    axes = fig.subplots(1, ncol, squeeze=False)[0]  # own y scales: an f32 output's ulps dwarf a bf16 one's
    _margins(fig, bottom=0.75, wspace=0.4)
    for ax, (title, labels, series) in zip(axes, columns):
        x = np.arange(len(labels), dtype=float)
        for k, (name, means, lows, highs) in enumerate(series):
            off = (k - (len(series) - 1) / 2) * 0.25
            m = np.asarray(means, float)
            err = np.vstack([m - np.asarray(lows, float), np.asarray(highs, float) - m])
            err = np.where(np.isfinite(err), err, 0.0)
            ax.errorbar(x + off, m, yerr=err, fmt="o", ms=3, capsize=2, label=name)
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_title(wrap(title), fontsize=8)
        if len(labels) <= 24:
            ax.set_xticks(x, labels, fontsize=6, rotation=90 if len(labels) > 8 else 0)
        else:
            ax.set_xticks([])
        ax.set_xlim(-0.6, len(labels) - 0.4)
        ax.tick_params(labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(ylabel, fontsize=8)
    axes[0].legend(fontsize=7)
    return to_img(fig, alt)


def sign_bars(columns, *, alt="signs of the errors") -> str:
    """Histogram of the sign of every error event: per column (title, positive, zero, negative) as
    shares of the events, one stacked bar per column."""
    fig = Figure(figsize=(min(1.9 * len(columns) + 3.0, 16), 3.0))
    ax = fig.subplots()
    _margins(fig, right=2.1, bottom=0.75)
    x = np.arange(len(columns))
    totals = np.array([max(p + z + n, 1) for _, p, z, n in columns], float)
    pos = np.array([p for _, p, _, _ in columns], float) / totals
    zero = np.array([z for _, _, z, _ in columns], float) / totals
    neg = np.array([n for _, _, _, n in columns], float) / totals
    ax.bar(x, neg, color="#4575b4", label="negative (rounded down)")
    ax.bar(x, zero, bottom=neg, color="#bbbbbb", label="zero")
    ax.bar(x, pos, bottom=neg + zero, color="#d73027", label="positive (rounded up)")
    ax.axhline(0.5, color="black", linewidth=0.6, linestyle=":")
    ax.set_xticks(x, [wrap(t) for t, _, _, _ in columns], fontsize=6)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of events", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return to_img(fig, alt)


def histograms(columns, *, xlabel, alt="histograms") -> str:
    """Per column (title, values): a histogram, panels side by side sharing the bins."""
    allv = np.concatenate([np.asarray(v, float)[np.isfinite(np.asarray(v, float))] for _, v in columns])
    lo, hi = (float(allv.min()), float(allv.max())) if allv.size else (0.0, 1.0)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    bins = np.linspace(lo, hi, 31)
    fig = Figure(figsize=(min(3.2 * len(columns) + 0.5, 18), 2.8))
    axes = fig.subplots(1, len(columns), squeeze=False, sharey=True)[0]
    _margins(fig, wspace=0.15)
    for ax, (title, v) in zip(axes, columns):
        v = np.asarray(v, float)
        ax.hist(v[np.isfinite(v)], bins=bins, color="#4c72b0")
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("count", fontsize=8)
    return to_img(fig, alt)


def curves(panels, *, alt="curves") -> str:
    """Panels side by side: (title, xlabel, ylabel, [(name, x, y)], marks) where marks is a list of
    (x, text) drawn as vertical lines."""
    fig = Figure(figsize=(min(4.2 * len(panels), 18), 3.0))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    _margins(fig, wspace=0.35)
    for ax, (title, xlabel, ylabel, lines, marks) in zip(axes, panels):
        for name, x, y in lines:
            ax.plot(x, y, marker="o" if len(x) <= 40 else None, ms=3, linewidth=1.2, label=name)
        for xm, text in marks or []:
            ax.axvline(xm, color="#d62728", linestyle="--", linewidth=1)
            ax.annotate(text, (xm, 1.0), xycoords=("data", "axes fraction"), fontsize=7, color="#d62728",
                        ha="left", va="top")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if len(lines) > 1:
            ax.legend(fontsize=7)
    return to_img(fig, alt)


def bars(columns, *, ylabel, alt="bars", xlabel="") -> str:
    """Per column (title, labels, values): a bar chart, panels side by side."""
    fig = Figure(figsize=(min(max(3.0, 0.3 * max(len(l) for _, l, _ in columns) + 1.5) * len(columns), 18), 2.8))
    axes = fig.subplots(1, len(columns), squeeze=False)[0]
    _margins(fig, bottom=1.6 if max(len(l) for _, l, _ in columns) > 8 else 0.6, wspace=0.3)
    for ax, (title, labels, values) in zip(axes, columns):
        x = np.arange(len(labels))
        ax.bar(x, np.asarray(values, float), color="#4c72b0")
        ax.axhline(0.0, color="black", linewidth=0.8)
        if len(labels) <= 32:
            ax.set_xticks(x, labels, fontsize=6, rotation=90 if len(labels) > 8 else 0)
        else:
            ax.set_xticks([])
        ax.set_title(title, fontsize=8)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel(ylabel, fontsize=8)
    return to_img(fig, alt)


def line_grid(panels, *, ncols: int, alt: str, sharey: bool = False, panel_w: float = 4.0, panel_h: float = 2.6) -> str:
    """Line panels on a grid of `ncols` columns (rows as needed). Each panel is None (an empty place)
    or a dict: title, xlabel,
    ylabel, lines = [(label or None, x, y, style)] (style: keyword arguments of Axes.plot), and
    optionally logy (log y axis), zero (a black line at y = 0), legend (draw the labelled lines'
    legend; default on the first panel only), legend_loc (matplotlib's loc; default "best", which
    costs a search over every point of the panel). `sharey`: one y range for every panel."""
    n = max(len(panels), 1)
    ncols = max(1, min(ncols, n))
    nrows = (n + ncols - 1) // ncols
    fig = Figure(figsize=(min(panel_w * ncols + 0.6, 18), panel_h * nrows + 0.4))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=sharey)
    _margins(fig, top=0.5, bottom=0.55, wspace=0.3 if sharey else 0.4, hspace=0.75)
    for i in range(nrows * ncols):
        ax = axes[i // ncols][i % ncols]
        if i >= len(panels) or panels[i] is None:
            ax.set_visible(False)
            continue
        p = panels[i]
        for label, x, y, style in p["lines"]:
            ax.plot(np.asarray(x, float), np.asarray(y, float), label=label if label else "_nolegend_", **style)
        if p.get("logy"):
            ax.set_yscale("log")
        if p.get("zero"):
            ax.axhline(0.0, color="black", linewidth=0.7)
        ax.xaxis.set_major_locator(MaxNLocator(5))  # fewer tick labels: text is most of the drawing time
        ax.yaxis.set_major_locator(MaxNLocator(5))
        ax.set_title(wrap(p["title"]), fontsize=8)
        ax.set_xlabel(p.get("xlabel", ""), fontsize=8)
        ax.set_ylabel(p.get("ylabel", ""), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if p.get("legend", i == 0) and any(label for label, _, _, _ in p["lines"]):
            ax.legend(fontsize=6, loc=p.get("legend_loc", "best"))
    return to_img(fig, alt)
