"""Figures of ``paradnn predict`` (docs/prediction.md): predicted against measured, and the heat
map completed by predictions with the measured cells marked.

>>> from paradnn import plots, predictor
>>> table = predictor.score("fc.db", keep_predictions=True)                # doctest: +SKIP
>>> fig = plots.predicted_vs_measured(table.attrs["predictions"])          # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter

from paradnn.analysis import prediction as PR
from paradnn.analysis.columns import label
from paradnn.errors import ParadnnError
from paradnn.plots.heatmaps import heatmap
from paradnn.plots.style import MIN_FONT_PT, PAGE_WIDTH_IN, STYLE, PlotFigure, log2_edges
from paradnn.units import compact

__all__ = ["predicted_vs_measured", "completed_heatmap"]

#: Colour of each model in a figure: the corrected model, the pure roofline.
MODEL_COLORS = {"corrected": "tab:blue", "roofline only": "0.55"}


def predicted_vs_measured(pred: pd.DataFrame, title: str | None = None,
                          level: float = PR.DEFAULT_LEVEL) -> Figure:
    """Held-out predictions against measurements of examples/s, log-log, one panel per scheme
    (k-fold, leave out an axis, cross-platform): the corrected model's points with their
    interval as a bar, the pure roofline's as grey rings, the line y = x and a +-10 percent
    band. ``pred``: ``attrs["predictions"]`` of :func:`paradnn.predictor.score` (columns
    ``step_time_s``, ``batch``, the prediction columns, ``scheme`` and ``model``)."""
    need = ("step_time_s", "batch", "predicted_examples_per_sec", "scheme", "model")
    missing = [c for c in need if c not in pred.columns]
    if missing or pred.empty:
        raise ParadnnError("plots.predicted_vs_measured: expected the held-out "
                           "predictions of paradnn.predictor.score(..., keep_predictions=True)"
                           + (f" (column {missing[0]!r} is missing)" if missing else " (empty)"))
    with rc_context(STYLE):  # matplotlib reads font sizes when an artist is created
        return _predicted_vs_measured(pred, title, level)


def _predicted_vs_measured(pred: pd.DataFrame, title: str | None, level: float) -> Figure:
    rows = pred.assign(measured=pd.to_numeric(pred["batch"]) / pd.to_numeric(pred["step_time_s"]))
    schemes = list(dict.fromkeys(rows["scheme"]))
    ncols = min(3, len(schemes))
    nrows = int(np.ceil(len(schemes) / ncols))
    fig = PlotFigure(figsize=(PAGE_WIDTH_IN, 3.8 * nrows + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    lo = float(np.nanmin([rows["measured"].min(), rows["predicted_examples_per_sec"].min()])) / 1.5
    hi = float(np.nanmax([rows["measured"].max(), rows["predicted_examples_per_sec"].max()])) * 1.5
    for k, scheme in enumerate(schemes):
        ax = axes[k // ncols][k % ncols]
        sel = rows[rows["scheme"] == scheme]
        line = np.array([lo, hi])
        ax.fill_between(line, line / 1.1, line * 1.1, color="0.9", zorder=0)
        ax.plot(line, line, color="0.3", linewidth=0.8, zorder=1)
        notes = []
        for model, g in sel.groupby("model", sort=False):
            e = PR.errors(g)
            base = model in ("none", "roofline only")
            name = "roofline only" if base else "roofline + " + str(model).removeprefix("roofline + ")
            if base:
                ax.scatter(g["measured"], g["predicted_examples_per_sec"], s=22, facecolors="none",
                           edgecolors=MODEL_COLORS["roofline only"], linewidths=0.9, zorder=2)
            else:
                low = g["predicted_examples_per_sec"] - g["predicted_examples_per_sec_low"]
                high = g["predicted_examples_per_sec_high"] - g["predicted_examples_per_sec"]
                finite = np.isfinite(high.to_numpy(float))
                ax.errorbar(g["measured"][finite], g["predicted_examples_per_sec"][finite],
                            yerr=[low[finite], high[finite]], fmt="none",
                            ecolor=MODEL_COLORS["corrected"], alpha=0.3, linewidth=0.8, zorder=2)
                ax.scatter(g["measured"], g["predicted_examples_per_sec"], s=18,
                           color=MODEL_COLORS["corrected"], zorder=3)
            notes.append(f"{name}: median {100 * e['median_ape']:.1f}%, p90 "
                         f"{100 * e['p90_ape']:.0f}%, coverage {100 * e['coverage']:.0f}% "
                         f"(n={e['configs']})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(lambda v, _pos: compact(v)))
        ax.set_title(str(scheme), fontsize=STYLE["axes.titlesize"] - 1)
        ax.text(0.02, 0.98, "\n".join(notes), transform=ax.transAxes, va="top", ha="left",
                fontsize=MIN_FONT_PT + 0.8,
                bbox=dict(boxstyle="square,pad=0.2", facecolor="white", edgecolor="none", alpha=0.8))
        ax.set_xlabel("measured throughput (examples/s, log scale)")
        ax.set_ylabel("predicted (examples/s, log scale)")
    for k in range(len(schemes), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    handles = [Line2D([], [], marker="o", linestyle="", color=MODEL_COLORS["corrected"],
                      label="roofline + learned correction, with its "
                            f"{level:.0%} interval"),
               Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                      color=MODEL_COLORS["roofline only"], label="pure roofline (baseline)"),
               Patch(facecolor="0.9", label="within 10% of the measurement")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False)
    fig.suptitle(title or "held-out predictions against measurements (each config predicted "
                 "by a fit that did not see it)")
    return fig


def completed_heatmap(hm: pd.DataFrame, title: str | None = None) -> Figure:
    """The heat map of :func:`paradnn.analysis.prediction.completed_heatmap`: every cell filled,
    measured or predicted, the measured ones framed black and the title counting both, so the
    two are never confused. Drawn by :func:`paradnn.plots.heatmap`."""
    if "source" not in hm.columns:
        raise ParadnnError("plots.completed_heatmap: expected the output of "
                           "paradnn.analysis.prediction.completed_heatmap (column 'source')")
    n_meas, n_pred = int((hm["source"] == "measured").sum()), int((hm["source"] == "predicted").sum())
    head = title or (f"{label(hm.attrs['value'])}: {n_meas} measured cells (framed black), "
                     f"{n_pred} predicted (status predicted, not framed)")
    fig = heatmap(hm, title=head)
    x, y = hm.attrs["x"], hm.attrs["y"]
    xs = np.array(sorted(pd.to_numeric(hm[x]).unique()), dtype=float)
    ys = np.array(sorted(pd.to_numeric(hm[y]).unique()), dtype=float)
    ex, ey = log2_edges(xs), log2_edges(ys)
    xi = {v: i for i, v in enumerate(xs)}
    yi = {v: i for i, v in enumerate(ys)}
    ax = fig.axes[0]
    for _, r in hm[hm["source"] == "measured"].iterrows():
        i, j = yi[float(r[y])], xi[float(r[x])]
        # Inset, so that the frames of neighbouring measured cells stay apart.
        dx, dy = 0.08 * (ex[j + 1] - ex[j]), 0.1 * (ey[i + 1] - ey[i])
        ax.add_patch(Rectangle((ex[j] + dx, ey[i] + dy), ex[j + 1] - ex[j] - 2 * dx,
                               ey[i + 1] - ey[i] - 2 * dy, facecolor="none", edgecolor="black",
                               linewidth=1.8, zorder=5))
    return fig
