"""The heat map of a comparison (``paradnn compare --plot``, the report's compare section): the
ratio NEW/BASE of every config over two hyperparameters, one panel per family, cells whose
change is not significant hatched.

>>> import paradnn
>>> from paradnn.plots import compare_heatmap
>>> fig = compare_heatmap(paradnn.compare("base.db", "new.db"))   # doctest: +SKIP
>>> fig.savefig("compare.png", dpi=200)                            # doctest: +SKIP
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib import colormaps, rc_context
from matplotlib import colors as mcolors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from paradnn.analysis.columns import WORKLOAD_FIELDS, fmt, label
from paradnn.analysis.compare import CompareResult
from paradnn.errors import ParadnnError
from paradnn.plots.style import PAGE_WIDTH_IN, STYLE, PlotFigure

__all__ = ["compare_heatmap", "heat_table", "HATCH"]

#: Hatch pattern of a cell whose change is not significant.
HATCH = "///"
#: Most panels (families) in one figure.
MAX_PANELS = 4
_CATEGORICAL = ("family", "dtype", "framework", "optimizer", "devices")


def _numeric_axes(table: pd.DataFrame) -> list[str]:
    """Hyperparameters (numeric workload fields) that vary among the compared configs."""
    out = []
    for c in WORKLOAD_FIELDS:
        if c in table.columns and c not in _CATEGORICAL:
            v = pd.to_numeric(table[c], errors="coerce")
            if v.notna().any() and v.dropna().nunique() > 1:
                out.append(c)
    return out


def _default_axes(result: CompareResult, x: str | None, y: str | None) -> tuple[str, str | None]:
    axes = _numeric_axes(result.table)
    for name, v in (("x", x), ("y", y)):
        if v is not None and v not in result.table.columns:
            raise ParadnnError(f"compare --plot: --{name} {v!r} is not a column of the compared "
                               f"configs; allowed: one of {', '.join(axes) or 'none (no varying hyperparameter)'}")
    if x is None:
        # The hyperparameter the localisation tree split on, else the most varied one but batch.
        split = [a for a in axes if a != "batch" and any(
            f"{a} " in region for region in result.where.regions.get("region", []))]
        others = sorted((a for a in axes if a != (y or "batch")),
                        key=lambda a: -result.table[a].nunique())
        x = (split or others or axes or [None])[0]
    if x is None:
        raise ParadnnError("compare --plot: the compared configs vary in no numeric "
                           "hyperparameter; allowed: configs that differ in at least one")
    if y is None:
        rest = [a for a in axes if a != x]
        y = "batch" if "batch" in rest else (rest[0] if rest else None)
    return x, y


def heat_table(result: CompareResult, x: str, y: str | None) -> pd.DataFrame:
    """The cells of the heat map: one row per (family, y, x) with ``ratio`` (x, geometric mean
    NEW/BASE over the configs in the cell: those differing in other hyperparameters),
    ``configs``, ``significant`` (configs with q < alpha) and ``hatched`` (fewer than half of
    its configs significant)."""
    t = result.table.copy()
    t["_y"] = t[y] if y else "all"
    t["_family"] = t["family"] if "family" in t.columns else "configs"
    t = t[t[x].notna() & t["_y"].notna() & (t["ratio"] > 0)]
    t["_log"] = np.log(t["ratio"].astype(float))
    t["_sig"] = t["q"].astype(float) < result.alpha
    cells = t.groupby(["_family", "_y", x], sort=True).agg(
        log=("_log", "mean"), configs=("_log", "size"), significant=("_sig", "sum")).reset_index()
    cells["ratio"] = np.exp(cells["log"])
    cells["hatched"] = cells["significant"] * 2 < cells["configs"]
    return cells.drop(columns="log").rename(columns={"_family": "family", "_y": y or "y"})


def compare_heatmap(result: CompareResult, x: str | None = None, y: str | None = None,
                    title: str | None = None) -> Figure:
    """Heat map of ``result`` (:func:`paradnn.compare`): the NEW/BASE step-time ratio of each
    config over ``x`` and ``y`` (default: the hyperparameter the localisation split on, and
    batch), one panel per family; a cell holding several configs (other hyperparameters) shows
    their geometric mean and their count. Red is slower, blue faster, white unchanged (a log
    scale symmetric about 1x, at least as wide as the threshold); hatched cells changed
    significantly in fewer than half of their configs. The title carries the headline and the
    localisation sentence."""
    if result.table.empty:
        raise ParadnnError("compare --plot: no config was compared")
    x, y = _default_axes(result, x, y)
    cells = heat_table(result, x, y)
    ycol = y or "y"
    fams = list(dict.fromkeys(cells["family"]))[:MAX_PANELS]
    if not fams:
        raise ParadnnError(f"compare --plot: no config has a value of {x}"
                           + (f" and {y}" if y else ""))
    span = max(math.log(result.threshold) * 1.5, float(np.abs(np.log(cells["ratio"])).max()))
    norm = mcolors.TwoSlopeNorm(vmin=-span, vcenter=0.0, vmax=span)
    cmap = colormaps["RdBu_r"]
    with rc_context(STYLE):
        heights = [max(2.2, 0.45 * cells[cells["family"] == f][ycol].nunique() + 1.2) for f in fams]
        fig = PlotFigure(figsize=(PAGE_WIDTH_IN, sum(heights) + 1.3), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(fams), 1, squeeze=False, height_ratios=heights)[:, 0]
        for ax, fam in zip(axes, fams):
            sub = cells[cells["family"] == fam]
            xs = sorted(sub[x].unique(), key=_order)
            ys = sorted(sub[ycol].unique(), key=_order)
            grid = np.full((len(ys), len(xs)), np.nan)
            for d in sub.to_dict("records"):
                i, j = ys.index(d[ycol]), xs.index(d[x])
                grid[i, j] = math.log(d["ratio"])
                ax.text(j, i, f"{d['ratio']:.2f}x" + (f"\n({d['configs']})" if d["configs"] > 1 else ""),
                        ha="center", va="center", fontsize=8.5,
                        color="white" if abs(grid[i, j]) > 0.6 * span else "black")
                if d["hatched"]:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch=HATCH,
                                           edgecolor="0.45", linewidth=0))
            ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, norm=norm, aspect="auto",
                      origin="lower", interpolation="nearest")
            ax.set_xticks(range(len(xs)), [fmt(v) for v in xs])
            ax.set_yticks(range(len(ys)), [fmt(v) for v in ys])
            ax.set_xlabel(label(x))
            ax.set_ylabel(label(y) if y else "")
            ax.set_title(f"{fam}: NEW/BASE step time per config", loc="left")
        sm = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=list(axes), shrink=0.9, pad=0.01)
        ticks = [t for t in (0.25, 0.5, 1.0, 2.0, 4.0) if abs(math.log(t)) <= span]
        if len(ticks) < 3:  # a narrow scale: mark the threshold on both sides instead
            ticks = [1 / result.threshold, 1.0, result.threshold]
        sm.set_ticks([math.log(t) for t in ticks], labels=[f"{t:.3g}x" for t in ticks])
        sm.set_label("NEW / BASE step time (x; above 1 is slower)")
        axes[0].legend(handles=[Patch(facecolor="white", edgecolor="0.45", hatch=HATCH,
                                      label=f"not significant (q >= {result.alpha:g} in most of "
                                      "the cell's configs)")],
                       loc="lower left", bbox_to_anchor=(0, 1.12), frameon=False, fontsize=9)
        head = title or (f"paradnn compare: {result.counts()['regression']} regression(s) beyond "
                         f"{result.threshold:g}x; axis: {result.axis_text}")
        fig.suptitle("\n".join([*textwrap.wrap(head, 130), *textwrap.wrap(result.where.sentence, 130)]),
                     fontsize=10, x=0.01,
                     ha="left")
    return fig


def _order(v):
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))
