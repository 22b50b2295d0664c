"""Speedups of :func:`paradnn.analysis.speedup`: against a workload's size (ParaDnn Fig 8-10)
and per configuration, grouped by family, with the geometric mean and its interval (Fig 12)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib import colors as mcolors
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from paradnn import families
from paradnn.analysis.columns import label, unit
from paradnn.errors import ParadnnError
from paradnn.plots.style import (
    MIN_FONT_PT, family_of, log_axis, marks_legend, new_figure, ratio,
    scatter_marked, styled, tick_label,
)
from paradnn.units import compact

@styled
def speedup(sp: pd.DataFrame, x: str = "params", color_by: str = "batch",
            title: str | None = None) -> Figure:
    """Scatter of :func:`paradnn.analysis.speedup` against ``x`` (log scale), marker shape by
    family, coloured by a hyperparameter, a dashed line at 1x (no speedup), a ratio axis in
    plain 0.5x 1x 2x; hollow markers for workloads resting on unstable runs (only when they
    were included); real models as stars, only when present (Fig 8b-c, 9b, 10)."""
    rows = sp.dropna(subset=["speedup"])
    if x not in rows.columns:
        raise ParadnnError(f"plots.speedup: column {x!r} missing; allowed: {sorted(rows.columns)}")
    rows = rows[(pd.to_numeric(rows[x], errors="coerce") > 0) & (rows["speedup"] > 0)]
    if rows.empty:
        raise ParadnnError("plots.speedup: no joined rows to plot")
    fig, ax = new_figure(5.0)
    fam = rows.apply(family_of, axis=1)
    unstable = rows["unstable"].astype(bool) if "unstable" in rows.columns else pd.Series(False, index=rows.index)
    flagged = pd.Series(False, index=rows.index)
    c = pd.to_numeric(rows[color_by], errors="coerce") if color_by in rows.columns else None
    norm = None
    if c is not None and c.notna().any():
        norm = (mcolors.LogNorm(c.min(), c.max()) if c.min() > 0 and c.max() / c.min() > 8
                else mcolors.Normalize(c.min(), c.max() if c.max() > c.min() else c.min() + 1))
    handles = []
    for f in dict.fromkeys(fam):
        sel = rows[fam == f]
        marker = families.marker(f)
        if f == "real":
            colours = "gold"
        elif norm is not None:
            colours = colormaps["viridis"](norm(c[sel.index].fillna(c.min()).to_numpy()))
        else:
            colours = "tab:blue"
        scatter_marked(ax, sel[x], sel["speedup"], marker=marker, color=colours,
                        size=220 if f == "real" else 36, unstable=unstable[sel.index],
                        flagged=flagged[sel.index])
        handles.append(Line2D([], [], marker=marker, linestyle="", color="0.35",
                              markersize=13 if f == "real" else 7,
                              label=families.display_name(f) + (" (star)" if f == "real" else "")))
        if f == "real":
            for _, r in sel.iterrows():
                ax.annotate(str(r.get("model", "real")), (r[x], r["speedup"]),
                            textcoords="offset points", xytext=(7, 4), fontsize=9)
    if norm is not None:
        cb = fig.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=ax)
        cb.set_label(label(color_by) + (", log scale" if isinstance(norm, mcolors.LogNorm) else ""))
        if isinstance(norm, mcolors.LogNorm):
            log_axis(cb.ax.yaxis, fmt=tick_label, max_ticks=6)
    handles += marks_legend(bool(unstable.any()), False)
    ax.axhline(1.0, color="black", linewidth=0.9, linestyle="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo, hi = float(rows["speedup"].min()), float(rows["speedup"].max())
    ax.set_ylim(min(lo, 1.0) / 1.15, max(hi, 1.0) * 1.15)  # 1x always in view
    log_axis(ax.yaxis, fmt=ratio)
    log_axis(ax.xaxis, fmt=compact)
    ax.set_xlabel(label(x) + ", log scale")
    metric = sp.attrs.get("metric", "examples_per_sec")
    ax.set_ylabel(f"speedup (x, ratio of {metric} [{unit(metric)}])")
    a, b = sp.attrs.get("a", "A"), sp.attrs.get("b", "B")
    ax.set_title(title or f"speedup of {a} over {b}")
    fig.legend(handles=handles, loc="outside right upper", frameon=False)
    return fig


@styled
def speedup_by_config(sp: pd.DataFrame, summary: dict | None = None, title: str | None = None,
                      max_labels: int = 48) -> Figure:
    """The speedup of every configuration of :func:`paradnn.analysis.speedup` (e.g.
    :func:`paradnn.analysis.framework_speedup`) as one point each, grouped by model family
    (families in registry order, inside a family by parameters then batch), with a dashed line
    at 1x (no speedup) and, from ``summary`` (:func:`paradnn.analysis.speedup_summary`), the
    geometric mean as a grey line and its bootstrap interval as a band. Ratio axis 0.5x 1x 2x;
    hollow markers rest on unstable runs. Configurations are named on the axis while there are
    at most ``max_labels`` of them (ParaDnn Fig 12 style)."""
    rows = sp.dropna(subset=["speedup"])
    rows = rows[rows["speedup"] > 0].copy()
    if rows.empty:
        raise ParadnnError("plots.speedup_by_config: no joined rows to plot")
    order = {f: i for i, f in enumerate((*families.names(), "real"))}
    rows["_family"] = rows.apply(family_of, axis=1)
    rows["_order"] = rows["_family"].map(lambda f: order.get(f, len(order)))
    keys = ["_order", "_family"] + [c for c in ("params", "batch") if c in rows.columns]
    rows = rows.sort_values(keys, kind="stable")
    fams = list(dict.fromkeys(rows["_family"]))
    # One gap of a slot between families, so each family reads as a group.
    pos, x, prev = [], -1.0, None
    for f in rows["_family"]:
        x += 2.0 if prev is not None and f != prev else 1.0
        pos.append(x)
        prev = f
    pos = np.array(pos)
    fig, ax = new_figure(5.4)
    unstable = rows["unstable"].astype(bool) if "unstable" in rows.columns else pd.Series(False, index=rows.index)
    handles = []
    for k, f in enumerate(fams):
        sel = (rows["_family"] == f).to_numpy()
        color = f"C{k % 10}"
        scatter_marked(ax, pos[sel], rows.loc[sel, "speedup"], marker=families.marker(f),
                        color=color, size=44, unstable=unstable[sel], flagged=np.zeros(sel.sum(), bool))
        centre = pos[sel].mean()
        ax.annotate(families.display_name(f), (centre, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=9.5)
        handles.append(Line2D([], [], marker=families.marker(f), linestyle="", color=color,
                              label=families.display_name(f)))
    ax.axhline(1.0, color="black", linewidth=1.0, linestyle="--")
    handles.append(Line2D([], [], color="black", linestyle="--", label="1x: equal throughput"))
    lo, hi = float(rows["speedup"].min()), float(rows["speedup"].max())
    if summary and np.isfinite(summary.get("geomean", np.nan)):
        gm = summary["geomean"]
        ax.axhline(gm, color="0.35", linewidth=1.4)
        text = f"geometric mean {gm:.2f}x"
        if np.isfinite(summary.get("ci_low", np.nan)):
            ax.axhspan(summary["ci_low"], summary["ci_high"], color="0.6", alpha=0.25, linewidth=0)
            text += f", {summary['ci']:.0%} CI {summary['ci_low']:.2f}x-{summary['ci_high']:.2f}x"
            lo, hi = min(lo, summary["ci_low"]), max(hi, summary["ci_high"])
        handles.append(Patch(facecolor="0.75", edgecolor="0.35", label=text))
    handles += marks_legend(bool(unstable.any()), False)
    ax.set_yscale("log")
    ax.set_ylim(min(lo, 1.0) / 1.15, max(hi, 1.0) * 1.15)  # 1x always in view
    log_axis(ax.yaxis, fmt=ratio)
    if len(rows) <= max_labels:
        names = []
        for _, r in rows.iterrows():
            name = str(r.get("label", "")) or str(r["_family"])
            # The family is the group's heading: drop it from each name.
            name = name[len(str(r["_family"])) + 1:] if name.startswith(f"{r['_family']} ") else name
            names.append(name + (f" b={tick_label(r['batch'])}" if pd.notna(r.get("batch")) else ""))
        ax.set_xticks(pos, names, rotation=60, ha="right", fontsize=MIN_FONT_PT + 0.3)
        ax.set_xlabel("configuration (hyperparameters, b = batch in examples)")
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"configuration ({len(rows)}, grouped by family; inside a family by "
                      "parameters, then batch)")
    ax.set_xlim(pos.min() - 1, pos.max() + 1)
    metric = sp.attrs.get("metric", "examples_per_sec")
    ax.set_ylabel("speedup (x, log scale)")
    a, b = sp.attrs.get("a", "A"), sp.attrs.get("b", "B")
    ax.set_title(title or f"speedup of {a} over {b} per configuration: ratio of {metric} "
                 f"({unit(metric)})", pad=18)
    fig.legend(handles=handles, loc="outside right upper", frameon=False)
    return fig
