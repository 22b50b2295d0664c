"""Ranges of a value per model family with real models as points (ParaDnn Fig 1 for the
parameters, Fig 11 for speedups and utilization), from :func:`paradnn.analysis.family_ranges`."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from paradnn.analysis.columns import label
from paradnn.errors import ParadnnError
from paradnn.plots.style import log_axis, new_figure, ratio, styled
from paradnn.units import compact

@styled
def family_ranges(fr: pd.DataFrame, title: str | None = None, log: bool = True) -> Figure:
    """Ranges per family (bar from min to max, tick at the median) and real models as points
    (:func:`paradnn.analysis.family_ranges`); Fig 1 for ``params``, Fig 11 for speedups (a
    ratio axis in 0.5x 1x 2x)."""
    value = fr.attrs.get("value", "value")
    if fr.empty:
        raise ParadnnError(f"plots.family_ranges: no ok run has a {value} value to plot")
    by = fr.attrs.get("by")
    groups = [None] if not by else list(dict.fromkeys(fr[by]))
    labels = list(dict.fromkeys(fr["label"]))
    fig, ax = new_figure(0.42 * len(labels) * max(1, len(groups)) ** 0.5 + 2.0)
    height = 0.8 / len(groups)
    handles = []
    palette = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")
    for gi, g in enumerate(groups):
        sel = fr if g is None else fr[fr[by] == g]
        color = palette[gi % len(palette)]
        for _, r in sel.iterrows():
            yv = labels.index(r["label"]) + (gi - (len(groups) - 1) / 2) * height
            if r["kind"] == "real" or r["min"] == r["max"]:
                if r["kind"] == "real":
                    ax.scatter([r["median"]], [yv], marker="o", s=60, color=color,
                               edgecolors="black", zorder=5)
                else:  # a family with a single value: a tick, not a bar
                    ax.scatter([r["median"]], [yv], marker="|", s=120, color=color, zorder=5)
            else:
                ax.plot([r["min"], r["max"]], [yv, yv], color=color, linewidth=7, alpha=0.6,
                        solid_capstyle="butt")
                ax.plot([r["median"]], [yv], marker="|", color="black", markersize=13)
        if g is not None:
            handles.append(Patch(color=color, label=str(g)))
    ax.set_yticks(range(len(labels)), labels)
    if log:
        ax.set_xscale("log")
        lo, hi = float(fr["min"].min()), float(fr["max"].max())
        if value == "speedup":
            ax.axvline(1.0, color="black", linewidth=0.9, linestyle="--")
            lo, hi = min(lo, 1.0), max(hi, 1.0)
        ax.set_xlim(lo / 1.3, hi * 1.3)
        log_axis(ax.xaxis, fmt=ratio if value == "speedup" else compact)
    ax.set_xlabel(label(value) + (", log scale" if log else ""))
    ax.set_ylabel("model family / real model")
    ax.invert_yaxis()
    if handles:
        fig.legend(handles=handles, loc="outside right upper", frameon=False)
    left = fr.attrs.get("unstable_excluded", 0)
    ax.set_title(title or f"{label(value)}: generated families as ranges (bar min-max, tick "
                 "median), real models as points"
                 + (f"; {left} unstable runs left out" if left else ""))
    return fig


def params_range(pr: pd.DataFrame, title: str | None = None) -> Figure:
    """Fig 1: trainable parameters per family (ranges) and per real model (points)."""
    return family_ranges(pr, title=title or "trainable parameters: families as ranges, real models as points")


def utilization_comparison(ur: pd.DataFrame, title: str | None = None) -> Figure:
    """Fig 11 (bottom): utilization ranges per family for each platform
    (:func:`paradnn.analysis.family_ranges` with a utilization value and ``by``)."""
    value = ur.attrs.get("value", "model_flops_utilization")
    return family_ranges(ur, title=title or f"{label(value)} per family and platform", log=False)
