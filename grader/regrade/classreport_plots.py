"""The class report's plots: score histograms drawn with matplotlib's Agg renderer, each a PNG data: URI.

No PNG names the software that drew it, so its bytes depend on its pixels only and the same scores give the
same page (grader/regrade/classreport.py).
"""
from __future__ import annotations

import base64
import io
import math
import statistics

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from grader.regrade.classreport_data import fmt

INTEGER_BARS = 80  # up to this many points a histogram has one bar per score
# the look of every plot; parse_math off: a `$` in a piece name must not start mathtext
STYLE = {"font.size": 9, "axes.titlesize": 9.5, "axes.titleweight": "bold", "axes.spines.top": False,
         "axes.spines.right": False, "text.parse_math": False, "figure.dpi": 100, "savefig.dpi": 100}
BLUE, GREEN, RED, GREY = "#4a78b5", "#2e8b57", "#c0392b", "#555555"

# --- the plots -------------------------------------------------------------------------------------------------

def _png(fig: Figure) -> str:
    """The figure as a data: URI. No Software entry: the PNG's bytes then depend on its pixels only."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor="white", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _counts(values: list[float], top: float | None) -> tuple[np.ndarray, list[tuple[str, np.ndarray]], float]:
    """Bar centres, the counts of each colour (stacked in that order) and the width: one bar per score when the
    scores are whole and few, else 20 bins. Red counts the scores of zero and green full marks by the score
    itself, never by which bar holds it: a bin from 0 to 1 also holds the scores of 0.5."""
    span = max(top or 0.0, max(values, default=0.0), 1.0)
    if span <= INTEGER_BARS and all(float(v).is_integer() for v in values):
        edges = np.arange(math.ceil(span) + 2, dtype=float) - 0.5  # a bar centred on each whole score
    else:
        edges = np.linspace(0.0, span, 21)
    v = np.clip(np.asarray(values, dtype=float), 0.0, span)
    zero = v <= 0
    # full marks of 0 would make every score both: such a piece's scores are zeros
    full = (v >= top) & ~zero if top is not None and top > 0 else np.zeros(len(v), dtype=bool)
    parts = [(color, np.histogram(v[mask], bins=edges)[0]) for color, mask in
             ((RED, zero), (BLUE, ~(zero | full)), (GREEN, full))]
    return (edges[:-1] + edges[1:]) / 2, parts, float(edges[1] - edges[0])


def _bars(ax, values: list[float], top: float | None) -> None:
    """A histogram on `ax`: zero is red and full marks green, whatever the bars' width."""
    x, parts, width = _counts(values, top)
    bottom = np.zeros(len(x), dtype=int)
    for color, counts in parts:
        some = counts > 0  # no empty rectangles: the picture is the same, the PNG needs none
        if some.any():
            ax.bar(x[some], counts[some], width=width * 0.9, bottom=bottom[some], color=color)
        bottom = bottom + counts
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
    ax.set_xlim(x[0] - width / 2 - 0.3, x[-1] + width / 2 + 0.3)


def overall_plot(totals: list[float], top: float | None) -> str:
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8.0, 2.8))
        ax = fig.add_subplot()
        _bars(ax, totals, top)
        mean, median = statistics.fmean(totals), statistics.median(totals)
        ax.axvline(mean, color=GREY, linestyle="--", linewidth=1.2, label=f"mean {fmt(mean)}")
        ax.axvline(median, color="#e67e22", linestyle=":", linewidth=1.6, label=f"median {fmt(median)}")
        ax.legend(frameon=False, loc="upper left")
        ax.set_xlabel(f"total score (out of {fmt(top)})" if top is not None else "total score")
        ax.set_ylabel("students")
        fig.tight_layout()
        return _png(fig)


def piece_plot(pieces: list[str], scores: dict[str, list[float]], tops: dict[str, float | None]) -> str:
    """Small multiples, one histogram per piece in the order given, each titled with its mean and full marks."""
    ncols = min(3, len(pieces))
    nrows = math.ceil(len(pieces) / ncols)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(3.2 * ncols, 2.25 * nrows))
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        for ax, name in zip(axes, pieces):
            values, top = scores[name], tops[name]
            if not values:
                ax.set_title(f"{name}: no scores")
                ax.set_axis_off()
                continue
            _bars(ax, values, top)
            ax.set_xlabel("score")
            ax.set_ylabel("students")
            full = sum(v >= top for v in values) / len(values) if top is not None else 0.0
            ax.set_title(f"{name}: mean {fmt(statistics.fmean(values))}/{fmt(top)}, {full:.0%} full")
        for ax in axes[len(pieces):]:
            ax.set_axis_off()
        fig.tight_layout()
        return _png(fig)
