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
    unstable_any = False
    palette = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")
    for gi, g in enumerate(groups):
        sel = fr if g is None else fr[fr[by] == g]
        color = palette[gi % len(palette)]
        for _, r in sel.iterrows():
            yv = labels.index(r["label"]) + (gi - (len(groups) - 1) / 2) * height
            shaky = int(r.get("n_unstable", 0) or 0)
            unstable_any = unstable_any or shaky > 0
            if r["kind"] == "real" or r["min"] == r["max"]:
                if r["kind"] == "real":  # hollow: rests on unstable runs
                    ax.scatter([r["median"]], [yv], marker="o", s=60, color=color,
                               facecolors="none" if shaky else color, edgecolors=color if shaky else "black",
                               linewidths=1.5, zorder=5)
                else:  # a family with a single value: a tick, not a bar
                    ax.scatter([r["median"]], [yv], marker="|", s=120, color=color, zorder=5)
            else:
                # Hatched: the range includes unstable runs.
                ax.barh(yv, r["max"] - r["min"], left=r["min"], height=min(0.5, height * 0.8),
                        color=color, alpha=0.6, hatch="///" if shaky else None,
                        edgecolor="black" if shaky else color, linewidth=0)
                ax.plot([r["median"]], [yv], marker="|", color="black", markersize=13)
            if shaky:
                ax.annotate(f"{shaky}/{int(r['n'])} unstable", (r["max"], yv), xytext=(4, 0),
                            textcoords="offset points", va="center", fontsize=8)
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
    if unstable_any:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                             label="includes unstable runs (timing missed its target)"))
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
