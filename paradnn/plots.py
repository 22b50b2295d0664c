"""One function per figure kind; each takes an analysis output and returns a matplotlib Figure.

Figures are built with the object-oriented API on an Agg canvas: no pyplot state, no display
needed, safe in threads and headless jobs. In Jupyter, a returned Figure displays itself; save
one with ``fig.savefig("f.png")``. Every axis label carries its unit.

>>> import paradnn
>>> from paradnn import analysis, plots
>>> fig = plots.heatmap(analysis.heatmap(df, "batch", "nodes", "flops_utilization"))
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullLocator

from paradnn.analysis._common import label, unit
from paradnn.analysis.oplevel import CATEGORIES
from paradnn.errors import ParadnnError
from paradnn.record import METRICS

__all__ = [
    "heatmap", "sensitivity", "roofline", "op_roofline", "op_breakdown", "speedup",
    "family_ranges", "params_range", "utilization_comparison", "saturation",
]

_CATEGORY_COLORS = dict(zip(CATEGORIES, ("tab:red", "tab:blue", "tab:green", "tab:purple",
                                         "tab:gray", "tab:brown")))


class PlotFigure(Figure):
    """A matplotlib Figure that shows itself as PNG in Jupyter whatever the backend (these
    figures are made without pyplot, so no inline backend hook sees them)."""

    def _repr_png_(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


def _figure(width: float = 6.4, height: float = 4.8) -> tuple[Figure, object]:
    fig = PlotFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        v = int(v)
    if isinstance(v, (int, np.integer)) and abs(v) >= 10_000:
        return f"{v / 1000:g}k" if v % 1000 == 0 else f"{v:,}"
    return str(v)


def _plain_ticks(axis) -> None:
    """Tick labels as plain numbers (0.5, 2, 10) on a log axis instead of powers of ten."""
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_major_formatter(fmt)
    axis.set_minor_formatter(FuncFormatter(
        lambda v, _: f"{v:g}" if v > 0 and round(v / 10 ** math.floor(math.log10(v))) in (2, 3, 5) else ""))


def _log2_edges(values: np.ndarray) -> np.ndarray:
    """Cell edges on a log2 axis: midway (in log2) between neighbours, half a gap at the ends."""
    p = np.log2(values.astype(float))
    if len(p) == 1:
        return np.array([p[0] - 0.5, p[0] + 0.5])
    mid = (p[:-1] + p[1:]) / 2
    return np.concatenate([[p[0] - (mid[0] - p[0])], mid, [p[-1] + (p[-1] - mid[-1])]])


def _axis_label(column: str, log2: bool = False) -> str:
    u = unit(column)
    scale = ", log2 scale" if log2 else ""
    return f"{column} ({u}{scale})" if u else f"{column} ({scale.lstrip(', ')})" if log2 else column


def heatmap(hm: pd.DataFrame, title: str | None = None, cmap: str = "viridis") -> Figure:
    """Heat map of :func:`paradnn.analysis.heatmap`: log2 axes, a colour bar with the unit of
    the value, ``oom`` cells white and marked "OOM", other failed cells grey and marked."""
    x, y, value = hm.attrs.get("x"), hm.attrs.get("y"), hm.attrs.get("value")
    if not (x and y and value):
        raise ParadnnError("plots.heatmap: expected the output of paradnn.analysis.heatmap "
                           "(attrs x, y, value missing)")
    xs = np.array(sorted(pd.to_numeric(hm[x]).unique()), dtype=float)
    ys = np.array(sorted(pd.to_numeric(hm[y]).unique()), dtype=float)
    if (xs <= 0).any() or (ys <= 0).any():
        raise ParadnnError(f"plots.heatmap: {x}/{y} must be positive for a log2 axis")
    grid = np.full((len(ys), len(xs)), np.nan)
    status = {}
    xi = {v: i for i, v in enumerate(xs)}
    yi = {v: i for i, v in enumerate(ys)}
    for _, r in hm.iterrows():
        i, j = yi[float(r[y])], xi[float(r[x])]
        grid[i, j] = r[value]
        status[(i, j)] = r["status"]
    fig, ax = _figure()
    ax.set_facecolor("0.92")  # configurations not in the store
    finite = grid[np.isfinite(grid)]
    norm = None
    if value.endswith("utilization"):
        norm = mcolors.Normalize(0, max(1e-9, finite.max() if finite.size else 1))
    elif finite.size and finite.min() > 0 and finite.max() / finite.min() > 100:
        norm = mcolors.LogNorm(finite.min(), finite.max())
    mesh = ax.pcolormesh(_log2_edges(xs), _log2_edges(ys), np.ma.masked_invalid(grid),
                         cmap=cmap, norm=norm, shading="flat")
    ex, ey = _log2_edges(xs), _log2_edges(ys)
    handles = []
    for (i, j), st in status.items():
        if st == "ok":
            continue
        face = "white" if st == "oom" else "0.75"
        ax.fill_between([ex[j], ex[j + 1]], ey[i], ey[i + 1], color=face, edgecolor="0.4",
                        hatch=None if st == "oom" else "//", linewidth=0.5)
        ax.text((ex[j] + ex[j + 1]) / 2, (ey[i] + ey[i + 1]) / 2, "OOM" if st == "oom" else st,
                ha="center", va="center", fontsize=7, color="black")
    if "oom" in status.values():
        handles.append(Patch(facecolor="white", edgecolor="0.4", label="out of memory (oom)"))
    if any(s not in ("ok", "oom") for s in status.values()):
        handles.append(Patch(facecolor="0.75", edgecolor="0.4", hatch="//", label="failed run"))
    if len(status) < len(xs) * len(ys):
        handles.append(Patch(facecolor="0.92", edgecolor="0.4", label="not measured"))
    if finite.size and len(xs) * len(ys) <= 64:
        for (i, j), st in status.items():
            if st == "ok" and np.isfinite(grid[i, j]):
                v = grid[i, j]
                txt = f"{v:.2f}" if value.endswith("utilization") else f"{v:.3g}"
                rgba = mesh.cmap(mesh.norm(v))
                dark = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.5
                ax.text((ex[j] + ex[j + 1]) / 2, (ey[i] + ey[i + 1]) / 2, txt, ha="center",
                        va="center", fontsize=6.5, color="white" if dark else "black")
    ax.set_xticks(np.log2(xs), [_fmt(v) for v in xs])
    ax.set_yticks(np.log2(ys), [_fmt(v) for v in ys])
    ax.set_xlim(ex[0], ex[-1])
    ax.set_ylim(ey[0], ey[-1])
    ax.set_xlabel(_axis_label(x, log2=True))
    ax.set_ylabel(_axis_label(y, log2=True))
    cbar = fig.colorbar(mesh, ax=ax)
    cbar.set_label(label(value))
    fixed = hm.attrs.get("fixed") or {}
    ax.set_title(title or (", ".join(f"{k}={_fmt(v)}" for k, v in fixed.items()) or label(value)),
                 fontsize=9)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.12), ncol=3,
                  fontsize=7, frameon=False)
    return fig


def sensitivity(sens: pd.DataFrame, title: str | None = None) -> Figure:
    """Horizontal bars of the standardized regression weights of
    :func:`paradnn.analysis.sensitivity`, with the bootstrap confidence interval and R^2."""
    target = sens.attrs.get("target", "target")
    rows = sens.iloc[::-1]  # largest |weight| on top
    fig, ax = _figure(6.0, 0.45 * len(rows) + 1.8)
    col = ["tab:blue" if w >= 0 else "tab:red" for w in rows["weight"]]
    err = None
    if rows["ci_low"].notna().all():
        err = np.vstack([rows["weight"] - rows["ci_low"], rows["ci_high"] - rows["weight"]])
        err = np.clip(err, 0, None)
    ax.barh(np.arange(len(rows)), rows["weight"], color=col, xerr=err, capsize=3)
    ax.set_yticks(np.arange(len(rows)), list(rows["feature"]))
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"standardized weight (SD of {target} per SD of feature)")
    ax.set_ylabel("hyperparameter (standardized" + (", log2" if sens.attrs.get("log2") else "") + ")")
    ci = sens.attrs.get("ci", 0.95)
    ax.set_title(title or f"sensitivity of {label(target)}\nR^2 = {sens.attrs.get('r2', float('nan')):.2f}, "
                 f"n = {sens.attrs.get('n', len(sens))} runs, bars: {ci:.0%} bootstrap CI", fontsize=9)
    return fig


def _roof_lines(ax, peaks: Sequence[tuple[float, float, str]], xmin: float, xmax: float) -> list:
    handles = []
    styles = ("-", "--", ":", "-.")
    if peaks:  # show the ridge and some of the flat roof even when every point is left of it
        xmax = max(xmax, 3 * max(pf / pb for pf, pb, _ in peaks))
    for k, (pf, pb, source) in enumerate(peaks):
        xs = np.logspace(math.log10(xmin), math.log10(xmax), 200)
        (h,) = ax.plot(xs, np.minimum(pf, xs * pb), color="tab:red", linestyle=styles[k % 4],
                       linewidth=1.5,
                       label=f"roof ({source} peak): {pf / 1e12:.3g} TFLOP/s, {pb / 1e9:.3g} GB/s")
        handles.append(h)
    return handles


def _peaks(rf: pd.DataFrame, source: str | None = None) -> list[tuple[float, float, str]]:
    """Distinct (peak FLOP/s, peak B/s, source) roofs of the rows, at most four."""
    if "roof_peak_flops" not in rf.columns:
        raise ParadnnError("plots: expected the output of paradnn.analysis.roofline")
    rows = rf.dropna(subset=["roof_peak_flops", "roof_peak_bytes_per_sec"])
    src = rows["peak_source"].fillna("unknown") if "peak_source" in rows.columns and source is None \
        else pd.Series(source or "given", index=rows.index)
    keys = {(float(f), float(b), str(s)) for f, b, s in
            zip(rows["roof_peak_flops"], rows["roof_peak_bytes_per_sec"], src)}
    return sorted(keys, reverse=True)[:4]


def roofline(rf: pd.DataFrame, color_by: str = "batch", title: str | None = None,
             annotate_real: bool = True) -> Figure:
    """Roofline of :func:`paradnn.analysis.roofline`: achieved FLOP/s against arithmetic
    intensity (log-log), the roof of each device (the legend says whether its peak is the
    spec sheet's or measured, from ``peak_source``), generated models as dots coloured by
    ``color_by``, real models (``kind == "real"``) as labelled stars."""
    rows = rf.dropna(subset=["flops_per_sec", "arithmetic_intensity"])
    rows = rows[(rows["flops_per_sec"] > 0) & (rows["arithmetic_intensity"] > 0)]
    if rows.empty:
        raise ParadnnError("plots.roofline: no rows with flops_per_sec and arithmetic_intensity")
    real = rows["kind"] == "real" if "kind" in rows.columns else pd.Series(False, index=rows.index)
    fig, ax = _figure(7.0, 5.0)
    gen = rows[~real]
    handles = []
    if len(gen):
        c = pd.to_numeric(gen[color_by], errors="coerce") if color_by in gen.columns else None
        if c is not None and c.notna().any():
            norm = mcolors.LogNorm(c.min(), c.max()) if c.min() > 0 and c.max() / c.min() > 8 else None
            sc = ax.scatter(gen["arithmetic_intensity"], gen["flops_per_sec"], c=c, cmap="viridis",
                            norm=norm, s=18, alpha=0.85, edgecolors="none")
            fig.colorbar(sc, ax=ax).set_label(_axis_label(color_by, log2=False)
                                              + (" (log colour scale)" if norm else ""))
        else:
            ax.scatter(gen["arithmetic_intensity"], gen["flops_per_sec"], s=18, color="tab:blue")
        handles.append(Line2D([], [], marker="o", linestyle="", color="tab:blue",
                              label="generated models (ParaDnn)"))
    if real.any():
        rr = rows[real]
        ax.scatter(rr["arithmetic_intensity"], rr["flops_per_sec"], marker="*", s=180,
                   color="gold", edgecolors="black", linewidths=0.8, zorder=5)
        if annotate_real:
            for _, r in rr.iterrows():
                ax.annotate(str(r.get("model", "real")), (r["arithmetic_intensity"], r["flops_per_sec"]),
                            textcoords="offset points", xytext=(6, -10), fontsize=8)
        handles.append(Line2D([], [], marker="*", linestyle="", markersize=12, color="gold",
                              markeredgecolor="black", label="real models"))
    xmin = rows["arithmetic_intensity"].min() / 2
    xmax = rows["arithmetic_intensity"].max() * 2
    handles += _roof_lines(ax, _peaks(rows), xmin, xmax)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/B)")
    ax.set_ylabel("achieved (FLOP/s)")
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.set_title(title or "roofline", fontsize=9)
    return fig


def op_roofline(ops: pd.DataFrame, title: str | None = None) -> Figure:
    """Operation-level roofline (Fig 3b/3d) of :func:`paradnn.analysis.op_roofline`: one point
    per operation, coloured by category, sized by its share of time; the roof of the device."""
    rows = ops[(ops["flops_per_sec"] > 0) & (ops["arithmetic_intensity"] > 0)]
    if rows.empty:
        raise ParadnnError("plots.op_roofline: no operation with FLOPs and bytes")
    fig, ax = _figure(7.0, 5.0)
    handles = []
    for cat in CATEGORIES:
        sel = rows[rows["category"] == cat]
        if sel.empty:
            continue
        ax.scatter(sel["arithmetic_intensity"], sel["flops_per_sec"], s=20 + 600 * sel["time_fraction"],
                   color=_CATEGORY_COLORS[cat], alpha=0.75, edgecolors="black", linewidths=0.4)
        handles.append(Line2D([], [], marker="o", linestyle="", color=_CATEGORY_COLORS[cat], label=cat))
    handles += _roof_lines(ax, _peaks(rows, ops.attrs.get("peak_source", "given")),
                           rows["arithmetic_intensity"].min() / 2, rows["arithmetic_intensity"].max() * 2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/B)")
    ax.set_ylabel("achieved by the operation (FLOP/s)")
    note = " - per-op times approximate (CPU)" if ops.attrs.get("approximate") else ""
    ax.set_title(title or f"operations above {ops.attrs.get('min_time_fraction', 0.01):.0%} of step time"
                 f" (marker area ~ time share){note}", fontsize=9)
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    return fig


def op_breakdown(breakdown: pd.DataFrame, title: str | None = None) -> Figure:
    """Share of step time per operation category (:func:`paradnn.analysis.op_breakdown`)."""
    rows = breakdown.iloc[::-1]
    fig, ax = _figure(6.0, 0.5 * len(rows) + 1.6)
    ax.barh(np.arange(len(rows)), 100 * rows["time_fraction"],
            color=[_CATEGORY_COLORS.get(c, "tab:gray") for c in rows["category"]])
    ax.set_yticks(np.arange(len(rows)), list(rows["category"]))
    ax.set_xlabel("share of step time (%)")
    ax.set_ylabel("operation category")
    note = " (per-op times approximate on CPU)" if breakdown.attrs.get("approximate") else ""
    ax.set_title(title or f"time by operation category{note}", fontsize=9)
    return fig


def speedup(sp: pd.DataFrame, x: str = "params", color_by: str = "batch",
            title: str | None = None) -> Figure:
    """Scatter of :func:`paradnn.analysis.speedup` against ``x`` (log scale), coloured by a
    hyperparameter, with a line at 1 (no speedup); real models as stars (Fig 8b-c, 9b, 10)."""
    rows = sp.dropna(subset=["speedup"])
    if x not in rows.columns:
        raise ParadnnError(f"plots.speedup: column {x!r} missing; allowed: {sorted(rows.columns)}")
    rows = rows[pd.to_numeric(rows[x], errors="coerce") > 0]
    if rows.empty:
        raise ParadnnError("plots.speedup: no joined rows to plot")
    fig, ax = _figure(6.4, 4.6)
    real = rows["kind"] == "real" if "kind" in rows.columns else pd.Series(False, index=rows.index)
    gen = rows[~real]
    if len(gen):
        c = pd.to_numeric(gen[color_by], errors="coerce") if color_by in gen.columns else None
        if c is not None and c.notna().any():
            norm = mcolors.LogNorm(c.min(), c.max()) if c.min() > 0 and c.max() / c.min() > 8 else None
            sc = ax.scatter(gen[x], gen["speedup"], c=c, cmap="viridis", norm=norm, s=20)
            fig.colorbar(sc, ax=ax).set_label(_axis_label(color_by))
        else:
            ax.scatter(gen[x], gen["speedup"], s=20)
    for _, r in rows[real].iterrows():
        ax.scatter([r[x]], [r["speedup"]], marker="*", s=160, color="gold", edgecolors="black", zorder=5)
        ax.annotate(str(r.get("model", "real")), (r[x], r["speedup"]), textcoords="offset points",
                    xytext=(6, 4), fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_ticks(ax.yaxis)
    ax.set_xlabel((label(x) if x in METRICS else _axis_label(x)) + ", log scale")
    metric = sp.attrs.get("metric", "examples_per_sec")
    ax.set_ylabel(f"speedup (x, ratio of {metric} [{unit(metric)}])")
    a, b = sp.attrs.get("a", "A"), sp.attrs.get("b", "B")
    ax.set_title(title or f"speedup of {a} over {b}", fontsize=9)
    return fig


def family_ranges(fr: pd.DataFrame, title: str | None = None, log: bool = True) -> Figure:
    """Ranges per family (bar from min to max, tick at the median) and real models as points
    (:func:`paradnn.analysis.family_ranges`); Fig 1 for ``params``, Fig 11 for speedups."""
    value = fr.attrs.get("value", "value")
    by = fr.attrs.get("by")
    groups = [None] if not by else list(dict.fromkeys(fr[by]))
    labels = list(dict.fromkeys(fr["label"]))
    fig, ax = _figure(6.4, 0.45 * len(labels) * max(1, len(groups)) ** 0.5 + 1.8)
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
                ax.plot([r["min"], r["max"]], [yv, yv], color=color, linewidth=6, alpha=0.6,
                        solid_capstyle="butt")
                ax.plot([r["median"]], [yv], marker="|", color="black", markersize=12)
        if g is not None:
            handles.append(Patch(color=color, label=str(g)))
    ax.set_yticks(range(len(labels)), labels)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(label(value) + (", log scale" if log else ""))
    ax.set_ylabel("model family / real model")
    ax.invert_yaxis()
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="lower right")
    ax.set_title(title or f"{label(value)}: generated families as ranges (bar min-max, tick "
                 "median), real models as points", fontsize=9)
    return fig


def params_range(pr: pd.DataFrame, title: str | None = None) -> Figure:
    """Fig 1: trainable parameters per family (ranges) and per real model (points)."""
    return family_ranges(pr, title=title or "trainable parameters: families as ranges, real models as points")


def utilization_comparison(ur: pd.DataFrame, title: str | None = None) -> Figure:
    """Fig 11 (bottom): FLOPS utilization ranges per family for each platform
    (:func:`paradnn.analysis.family_ranges` with ``value="flops_utilization"`` and ``by``)."""
    return family_ranges(ur, title=title or "FLOPS utilization per family and platform", log=False)


def saturation(curves: pd.DataFrame, title: str | None = None, max_models: int = 12) -> Figure:
    """Throughput relative to each model's best against batch (log2), with the saturation batch
    (the smallest reaching the threshold) marked (:func:`paradnn.analysis.saturation`)."""
    if curves.empty:
        raise ParadnnError("plots.saturation: no model was measured at two or more batch sizes")
    thr = curves.attrs.get("threshold", 0.9)
    fig, ax = _figure(6.8, 4.6)
    models = list(dict.fromkeys(curves["model"]))[:max_models]
    # Words every model name shares (family, fixed hyperparameters) go to the title once.
    common = set.intersection(*(set(m.split()) for m in models))
    for m in models:
        c = curves[curves["model"] == m].sort_values("batch")
        short = " ".join(w for w in m.split() if w not in common) or m
        (line,) = ax.plot(c["batch"], c["fraction_of_best"], marker="o", markersize=3, linewidth=1,
                          label=short if len(short) < 60 else short[:57] + "...")
        sb = c["saturation_batch"].iloc[0]
        ax.plot([sb], [c.loc[c["batch"] == sb, "fraction_of_best"].iloc[0]], marker="D",
                markersize=7, color=line.get_color(), markeredgecolor="black")
    ax.axhline(thr, color="black", linestyle="--", linewidth=0.8)
    ax.set_xscale("log", base=2)
    batches = sorted(curves["batch"].unique())
    if len(batches) <= 12:
        ax.set_xticks(batches, [_fmt(b) for b in batches])
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch (examples, log2 scale)")
    metric = curves.attrs.get("metric", "examples_per_sec")
    ax.set_ylabel(f"{label(metric)} / model's best (fraction)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=6, loc="lower right")
    shown = f" (first {max_models} of {curves['model'].nunique()} models)" if curves["model"].nunique() > max_models else ""
    same = " ".join(w for w in models[0].split() if w in common)
    ax.set_title(title or f"batch saturation: diamond = smallest batch reaching {thr:.0%} of the "
                 f"best{shown}" + (f"\nall: {same}" if same else ""), fontsize=9)
    return fig
