"""Heat maps of a metric over two hyperparameters (ParaDnn Fig 2a-c, Fig 7), as small multiples
with one shared log colour scale (:func:`paradnn.analysis.heatmap` gives the cells)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from paradnn.analysis.columns import COMPANION_VERSIONS, PLATFORM_KEY, label, platform_label
from paradnn.errors import ParadnnError
from paradnn.plots.style import (
    CELL_FONT_PT, PAGE_WIDTH_IN, STYLE, WARNING_COLOR, PlotFigure, log2_edges, log_axis, styled,
    tick_label,
)
from paradnn.units import compact

def _panel_title(panel: dict) -> str:
    parts, plat = [], {c: panel[c] for c in PLATFORM_KEY if c in panel}
    if plat:
        parts.append(platform_label(plat))
    for k, v in panel.items():
        # jaxlib follows jax: one version in a title is enough.
        if k in PLATFORM_KEY or COMPANION_VERSIONS.get(k) in panel:
            continue
        parts.append(str(v) if k in ("dtype", "framework") else f"{k.replace('_version', '')} {v}"
                     if k.endswith("_version") else f"{k}={tick_label(v)}")
    if plat and len(parts) > 1:
        return parts[0] + "\n" + ", ".join(parts[1:])
    return ", ".join(parts)


def _heat_norm(values: np.ndarray, reference: np.ndarray):
    """One log colour scale for all panels, set by the reference (stable) cells so that a
    noisy outlier does not stretch it; values beyond it take the end colours."""
    ref = reference[np.isfinite(reference) & (reference > 0)]
    if ref.size == 0:
        ref = values[np.isfinite(values) & (values > 0)]
    if ref.size == 0:
        return mcolors.Normalize(0, 1), "neither"
    lo, hi = float(ref.min()), float(ref.max())
    if hi <= lo * 1.0001:
        lo, hi = lo / 1.5, hi * 1.5
    finite = values[np.isfinite(values)]
    below, above = bool((finite < lo).any()), bool((finite > hi).any())
    extend = "both" if below and above else "min" if below else "max" if above else "neither"
    return mcolors.LogNorm(lo, hi), extend


@styled
def heatmap(hm: pd.DataFrame, title: str | None = None, cmap: str = "viridis") -> Figure:
    """Heat maps of :func:`paradnn.analysis.heatmap` as small multiples (one panel per value of
    the panel columns, or one map) with one shared, log-scaled colour bar. Log2 axes; every
    cell labelled in one number format (:func:`compact`) where cells are wide enough; ``oom``
    cells white and marked OOM, other failures grey and hatched, unstable cells cross-hatched,
    cells with a physics warning framed red and marked "!"."""
    x, y, value = hm.attrs.get("x"), hm.attrs.get("y"), hm.attrs.get("value")
    if not (x and y and value):
        raise ParadnnError("plots.heatmap: expected the output of paradnn.analysis.heatmap "
                           "(attrs x, y, value missing)")
    if hm.empty:
        raise ParadnnError("plots.heatmap: the heat map has no cells")
    xs = np.array(sorted(pd.to_numeric(hm[x]).unique()), dtype=float)
    ys = np.array(sorted(pd.to_numeric(hm[y]).unique()), dtype=float)
    if (xs <= 0).any() or (ys <= 0).any():
        raise ParadnnError(f"plots.heatmap: {x}/{y} must be positive for a log2 axis")
    panels = hm.attrs.get("panels") or [{}]
    panel_of = hm["panel"] if "panel" in hm.columns else pd.Series(0, index=hm.index)
    n = len(panels)
    unstable = hm["unstable"].astype(bool) if "unstable" in hm.columns else pd.Series(False, index=hm.index)
    flagged = (hm["warnings"].fillna("").astype(str) != "") if "warnings" in hm.columns \
        else pd.Series(False, index=hm.index)
    vals = pd.to_numeric(hm[value], errors="coerce").to_numpy(dtype=float)
    if value.endswith("utilization"):
        # Above the peak is impossible whatever the record says (older stores have no
        # warnings column): such cells are framed too.
        flagged = flagged | pd.Series(vals > 1.0 + 1e-9, index=hm.index)
    norm, extend = _heat_norm(vals, vals[~unstable.to_numpy()])

    # Geometry: cells at least ~0.45 in (45 px at 1x) wide so a label like "3.81k" fits.
    cbar_w, margin = 1.3, 0.75
    avail = PAGE_WIDTH_IN - cbar_w
    ncols = max(1, min(n, 4, int(avail // (len(xs) * 0.45 + margin))))
    nrows = math.ceil(n / ncols)
    cell_w = (avail / ncols - margin) / len(xs)
    cell_h = min(0.5, max(0.3, 3.2 / len(ys)))
    height = nrows * (len(ys) * cell_h + 0.75) + 1.5
    fig = PlotFigure(figsize=(PAGE_WIDTH_IN, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    ex, ey = log2_edges(xs), log2_edges(ys)
    xi = {v: i for i, v in enumerate(xs)}
    yi = {v: i for i, v in enumerate(ys)}
    label_cells = cell_w >= 0.42 and len(xs) * len(ys) <= 144
    seen = set()
    mesh = None
    for p, panel in enumerate(panels):
        ax = axes[p // ncols][p % ncols]
        sel = hm[panel_of == p]
        grid = np.full((len(ys), len(xs)), np.nan)
        for i_row, r in sel.iterrows():
            grid[yi[float(r[y])], xi[float(r[x])]] = r[value]
        ax.set_facecolor("0.92")  # configurations not in the store
        mesh = ax.pcolormesh(ex, ey, np.ma.masked_invalid(grid), cmap=cmap, norm=norm, shading="flat")
        measured = set()
        for i_row, r in sel.iterrows():
            i, j = yi[float(r[y])], xi[float(r[x])]
            measured.add((i, j))
            cx, cy = (ex[j] + ex[j + 1]) / 2, (ey[i] + ey[i + 1]) / 2
            st = r["status"]
            if st != "ok":
                seen.add("oom" if st == "oom" else "failed")
                ax.add_patch(Rectangle((ex[j], ey[i]), ex[j + 1] - ex[j], ey[i + 1] - ey[i],
                                       facecolor="white" if st == "oom" else "0.75",
                                       edgecolor="0.4", hatch=None if st == "oom" else "//",
                                       linewidth=0.5))
                ax.text(cx, cy, "OOM" if st == "oom" else st, ha="center", va="center",
                        fontsize=CELL_FONT_PT, color="black")
                continue
            if unstable.loc[i_row]:
                seen.add("unstable")
                ax.add_patch(Rectangle((ex[j], ey[i]), ex[j + 1] - ex[j], ey[i + 1] - ey[i],
                                       facecolor="none", edgecolor="0.25", hatch="xx", linewidth=0))
            if flagged.loc[i_row]:
                seen.add("flagged")
                ax.add_patch(Rectangle((ex[j], ey[i]), ex[j + 1] - ex[j], ey[i + 1] - ey[i],
                                       facecolor="none", edgecolor=WARNING_COLOR, linewidth=2.2))
            v = grid[i, j]
            if label_cells and np.isfinite(v):
                rgba = mesh.cmap(mesh.norm(v))
                dark = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.5
                shaky = bool(unstable.loc[i_row])
                ax.text(cx, cy, compact(v) + ("!" if flagged.loc[i_row] else ""), ha="center",
                        va="center", fontsize=CELL_FONT_PT,
                        color="black" if shaky or not dark else "white",
                        fontweight="bold" if flagged.loc[i_row] else "normal",
                        # Over the cross-hatch of an unstable cell the label sits on white.
                        bbox=dict(boxstyle="square,pad=0.15", facecolor="white", edgecolor="none",
                                  alpha=0.85) if shaky else None)
        if len(measured) < len(xs) * len(ys):
            seen.add("missing")
        ax.set_xlim(ex[0], ex[-1])
        ax.set_ylim(ey[0], ey[-1])
        if panel:
            ax.set_title(_panel_title(panel), fontsize=STYLE["axes.titlesize"] - 1)
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    first = axes[0][0]
    first.set_xticks(np.log2(xs), [tick_label(v) for v in xs])
    first.set_yticks(np.log2(ys), [tick_label(v) for v in ys])
    for r_ in range(nrows):
        axes[r_][0].set_ylabel(label(y, "log2 scale"))
    for c_ in range(ncols):
        bottom = min(nrows - 1, (n - 1 - c_) // ncols) if c_ < n else nrows - 1
        axes[bottom][c_].set_xlabel(label(x, "log2 scale"))
        axes[bottom][c_].xaxis.set_tick_params(labelbottom=True)
    cbar = fig.colorbar(mesh, ax=axes, extend=extend, fraction=0.04, pad=0.01)
    cbar.set_label(label(value) + (", log scale" if isinstance(norm, mcolors.LogNorm) else ""))
    if isinstance(norm, mcolors.LogNorm):
        log_axis(cbar.ax.yaxis, max_ticks=6)
    handles = []
    if "oom" in seen:
        handles.append(Patch(facecolor="white", edgecolor="0.4", label="OOM: out of memory"))
    if "failed" in seen:
        handles.append(Patch(facecolor="0.75", edgecolor="0.4", hatch="//", label="failed run"))
    if "missing" in seen:
        handles.append(Patch(facecolor="0.92", edgecolor="0.4", label="not measured"))
    if "unstable" in seen:
        handles.append(Patch(facecolor="white", edgecolor="0.15", hatch="xx",
                             label="unstable timing (missed its precision target)"))
    if "flagged" in seen:
        handles.append(Patch(facecolor="white", edgecolor=WARNING_COLOR, linewidth=2,
                             label="! physics warning or utilization above 1"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)),
                   frameon=False)
    fixed = hm.attrs.get("fixed") or {}
    fixed_text = ", ".join(f"{k}={tick_label(v)}" for k, v in fixed.items())
    head = title or label(value)
    fig.suptitle(head + (f"\nfixed: {fixed_text}" if fixed_text else ""))
    if not label_cells:
        fig.text(0.5, 0.0, "cells too small for labels: values are in the table",
                 ha="center", va="bottom", fontsize=STYLE["legend.fontsize"])
    return fig
