"""One function per figure kind; each takes an analysis output and returns a matplotlib Figure.

Figures are built with the object-oriented API on an Agg canvas: no pyplot state, no display
needed, safe in threads and headless jobs. In Jupyter, a returned Figure displays itself; save
one with ``fig.savefig("f.png", dpi=plots.DPI_2X)``. Every axis label carries its unit.

Sizes are for a page about 1100 px wide: every figure is ``PAGE_WIDTH_IN`` inches wide, which is
1100 px at ``DPI_1X`` (100 dpi); the report saves at ``DPI_2X`` and shows the image at half its
pixel size, so it stays sharp on high-density screens. No text is smaller than
``MIN_FONT_PT`` (10 px at 1x). Marks: marker shape = model family, colour = dtype (or a
hyperparameter where the figure says so), hollow marker = unstable timing (the run missed its
precision target), red ring = physics warning (see the report's Warnings section).

>>> import paradnn
>>> from paradnn import analysis, plots
>>> fig = plots.heatmap(analysis.heatmap(df, "batch", "nodes", "flops_utilization", panels=True))
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib import colors as mcolors
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

from paradnn.analysis._common import (
    PLATFORM_KEY, flagged_mask, label, platform_label, unit, unstable_mask,
)
from paradnn.analysis.oplevel import CATEGORIES
from paradnn.errors import ParadnnError
from paradnn.record import METRICS

__all__ = [
    "heatmap", "sensitivity", "roofline", "op_roofline", "op_breakdown", "speedup", "speedup_by_config",
    "family_ranges", "params_range", "utilization_comparison", "saturation",
    "PAGE_WIDTH_IN", "DPI_1X", "DPI_2X", "MIN_FONT_PT",
]

PAGE_WIDTH_IN = 11.0  # 1100 px at DPI_1X: the report's page width
DPI_1X = 100
DPI_2X = 200
MIN_FONT_PT = 7.2  # 10 px at DPI_1X: the smallest text legible at 100% zoom
CELL_FONT_PT = 8.5
# Every text size of the figures, in points (at DPI_1X one point is 1.39 px).
STYLE = {
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5, "legend.fontsize": 9, "legend.title_fontsize": 9.5,
    "figure.titlesize": 11.5, "figure.labelsize": 10,
}
FAMILY_MARKERS = {"fc": "o", "cnn": "s", "rnn": "^", "real": "*"}
FAMILY_NAMES = {"fc": "FC", "cnn": "CNN", "rnn": "RNN", "real": "real model"}
DTYPE_COLORS = {"float32": "tab:blue", "bfloat16": "tab:orange", "float16": "tab:green"}
# A mark inside the marker per framework, drawn only when a figure holds several frameworks.
FRAMEWORK_MARKS = {"jax": "", "tensorflow": "+", "torch": "x"}
WARNING_COLOR = "red"
_CATEGORY_COLORS = dict(zip(CATEGORIES, ("tab:red", "tab:blue", "tab:green", "tab:purple",
                                         "tab:gray", "tab:brown")))
_MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "p", "*")
_LINESTYLES = ("-", "--", "-.", ":")


class PlotFigure(Figure):
    """A matplotlib Figure that shows itself as PNG in Jupyter whatever the backend (these
    figures are made without pyplot, so no inline backend hook sees them)."""

    def _repr_png_(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=DPI_1X)
        return buf.getvalue()


def _styled(fn: Callable) -> Callable:
    """Build the figure under STYLE: matplotlib reads font sizes when an artist is created."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with rc_context(STYLE):
            return fn(*args, **kwargs)
    return wrapper


def _figure(height: float, width: float = PAGE_WIDTH_IN) -> tuple[Figure, object]:
    fig = PlotFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _fmt(v) -> str:
    """A hyperparameter value as a tick label: 64, 4096, 16k, 16,384."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        v = int(v)
    if isinstance(v, (int, np.integer)) and abs(v) >= 10_000:
        return f"{v / 1000:g}k" if v % 1000 == 0 else f"{v:,}"
    return str(v)


def compact(v: float) -> str:
    """One number format for every measured value on a figure: three significant digits, with
    an SI suffix (k, M, G, T, P) from 1000 up: 0.423, 510, 3.81k, 12.3M. Never exponents."""
    if v is None or not np.isfinite(v):
        return ""
    a = abs(v)
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div * 0.9995:
            return f"{v / div:.3g}{suffix}"
    if a == 0:
        return "0"
    if a < 0.001:
        return f"{v:.1g}" if a >= 1e-9 else "0"
    return f"{v:.3g}"


def si(v: float, unit_: str) -> str:
    """A value with an SI-prefixed unit: ``120 TFLOP/s``, ``900 GB/s``."""
    text = compact(v)
    num = text.rstrip("kMGTP")
    return f"{num} {text[len(num):]}{unit_}"


def _ratio(v: float) -> str:
    """A ratio tick: 0.5x, 1x, 2x."""
    return f"{v:g}x"


_NICE = (1.0, 2.0, 5.0)


def _log_ticks(lo: float, hi: float, max_ticks: int = 8) -> list[float]:
    """Tick values on a log axis from [lo, hi]: 1-2-5 per decade while few enough, else
    powers of ten (every other decade when very wide)."""
    if not (lo > 0 and hi > lo):
        return [lo] if lo > 0 else []
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for subs in ((1.0, 2.0, 5.0), (1.0, 3.0), (1.0,)):
        ticks = [m * 10.0 ** d for d in range(d0, d1 + 1) for m in subs if lo <= m * 10.0 ** d <= hi]
        if 2 <= len(ticks) <= max_ticks:
            return ticks
    ticks = [10.0 ** d for d in range(d0, d1 + 1) if lo <= 10.0 ** d <= hi]
    step = max(1, math.ceil(len(ticks) / max_ticks))
    out = ticks[::step]
    if len(out) < 2:  # less than a decade wide with no 1-2-5 inside: the ends
        out = [lo, hi]
    return out


def _log_axis(axis, fmt: Callable[[float], str] = compact, max_ticks: int = 8) -> None:
    """Major ticks at :func:`_log_ticks` of the axis's range, labelled with ``fmt`` (compact
    numbers or ratios), no minor labels: no ``3x10^3`` and no colliding minor ticks."""
    lo, hi = sorted(axis.get_view_interval())
    axis.set_major_locator(FixedLocator(_log_ticks(lo, hi, max_ticks)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
    axis.set_minor_formatter(NullFormatter())


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


def _family_of(row) -> str:
    if row.get("kind") == "real" or row.get("family") == "real":
        return "real"
    return str(row.get("family", "?"))


def _dtype_color(dtype, order: list) -> str:
    if dtype in DTYPE_COLORS:
        return DTYPE_COLORS[dtype]
    extra = [d for d in order if d not in DTYPE_COLORS]
    return f"C{(3 + extra.index(dtype)) % 10}" if dtype in extra else "tab:gray"


def _marks_legend(unstable: bool, flagged: bool) -> list:
    out = []
    if unstable:
        out.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                          markeredgecolor="0.2", label="hollow: unstable timing (missed its precision target)"))
    if flagged:
        out.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none", markersize=11,
                          markeredgecolor=WARNING_COLOR, markeredgewidth=1.8,
                          label="red ring: physics warning or above its roof"))
    return out


def _scatter_marked(ax, x, y, *, marker: str, color, size: float, unstable: pd.Series,
                    flagged: pd.Series, zorder: float = 3, **kw) -> None:
    """Filled markers for stable points, hollow for unstable ones, a red ring on flagged ones."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    u, f = np.asarray(unstable, dtype=bool), np.asarray(flagged, dtype=bool)
    per_point = not isinstance(color, str) and np.ndim(color) == 2 and len(color) == len(x)

    def pick(mask):
        return np.asarray(color)[mask] if per_point else color

    if (~u).any():
        ax.scatter(x[~u], y[~u], marker=marker, s=size, color=pick(~u), edgecolors="black",
                   linewidths=0.4, zorder=zorder, **kw)
    if u.any():
        ax.scatter(x[u], y[u], marker=marker, s=size, facecolors="none", edgecolors=pick(u),
                   linewidths=1.3, zorder=zorder, **kw)
    if f.any():
        ax.scatter(x[f], y[f], marker="o", s=size * 3.2, facecolors="none",
                   edgecolors=WARNING_COLOR, linewidths=1.8, zorder=zorder + 1)


def _framework_marks(ax, rows: pd.DataFrame, x: str, y: str) -> list:
    """Where ``rows`` hold more than one framework, a black mark inside each point (none for
    JAX, + TensorFlow, x PyTorch, a letter-like dot for others) and their legend entries; no
    marks and no entries for a single framework."""
    from paradnn.analysis.framework import framework_of, frameworks

    names = frameworks(rows)
    if len(names) < 2:
        return []
    fw = framework_of(rows)
    handles = []
    for name in names:
        mark = FRAMEWORK_MARKS.get(name, "1")
        sel = rows[fw == name]
        if mark:
            ax.scatter(sel[x], sel[y], marker=mark, s=22, color="black", linewidths=1.0, zorder=6)
        handles.append(Line2D([], [], marker=mark or "o", linestyle="", color="black",
                              markerfacecolor="none" if not mark else "black",
                              label=f"framework {name}" + ("" if mark else " (no inner mark)")))
    return handles


# -- heat maps -------------------------------------------------------------------------------

def _panel_title(panel: dict) -> str:
    parts, plat = [], {c: panel[c] for c in PLATFORM_KEY if c in panel}
    if plat:
        parts.append(platform_label(plat))
    for k, v in panel.items():
        # jaxlib follows jax: one version in a title is enough.
        if k in PLATFORM_KEY or (k == "jaxlib_version" and "jax_version" in panel):
            continue
        parts.append(str(v) if k in ("dtype", "framework") else f"{k.replace('_version', '')} {v}"
                     if k.endswith("_version") else f"{k}={_fmt(v)}")
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


@_styled
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
    ex, ey = _log2_edges(xs), _log2_edges(ys)
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
    first.set_xticks(np.log2(xs), [_fmt(v) for v in xs])
    first.set_yticks(np.log2(ys), [_fmt(v) for v in ys])
    for r_ in range(nrows):
        axes[r_][0].set_ylabel(_axis_label(y, log2=True))
    for c_ in range(ncols):
        bottom = min(nrows - 1, (n - 1 - c_) // ncols) if c_ < n else nrows - 1
        axes[bottom][c_].set_xlabel(_axis_label(x, log2=True))
        axes[bottom][c_].xaxis.set_tick_params(labelbottom=True)
    cbar = fig.colorbar(mesh, ax=axes, extend=extend, fraction=0.04, pad=0.01)
    cbar.set_label(label(value) + (", log scale" if isinstance(norm, mcolors.LogNorm) else ""))
    if isinstance(norm, mcolors.LogNorm):
        _log_axis(cbar.ax.yaxis, max_ticks=6)
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
    fixed_text = ", ".join(f"{k}={_fmt(v)}" for k, v in fixed.items())
    head = title or label(value)
    fig.suptitle(head + (f"\nfixed: {fixed_text}" if fixed_text else ""))
    if not label_cells:
        fig.text(0.5, 0.0, "cells too small for labels: values are in the table",
                 ha="center", va="bottom", fontsize=STYLE["legend.fontsize"])
    return fig


# -- sensitivity -----------------------------------------------------------------------------

@_styled
def sensitivity(sens: pd.DataFrame, title: str | None = None) -> Figure:
    """Horizontal bars of the standardized regression weights of
    :func:`paradnn.analysis.sensitivity`, with the bootstrap confidence interval, R^2 and the
    number of unstable runs left out."""
    target = sens.attrs.get("target", "target")
    rows = sens.iloc[::-1]  # largest |weight| on top
    fig, ax = _figure(0.42 * len(rows) + 2.0)
    col = ["tab:blue" if w >= 0 else "tab:red" for w in rows["weight"]]
    err = None
    if rows["ci_low"].notna().all():
        err = np.vstack([rows["weight"] - rows["ci_low"], rows["ci_high"] - rows["weight"]])
        err = np.clip(err, 0, None)
    ax.barh(np.arange(len(rows)), rows["weight"], color=col, xerr=err, capsize=4)
    ax.set_yticks(np.arange(len(rows)), list(rows["feature"]))
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"standardized weight (SD of {target} per SD of feature)")
    ax.set_ylabel("hyperparameter (standardized" + (", log2" if sens.attrs.get("log2") else "") + ")")
    ci = sens.attrs.get("ci", 0.95)
    left = sens.attrs.get("unstable_excluded", 0)
    ax.set_title(title or f"sensitivity of {label(target)}: R^2 = {sens.attrs.get('r2', float('nan')):.2f}, "
                 f"n = {sens.attrs.get('n', len(sens))} runs"
                 + (f" ({left} unstable left out)" if left else "")
                 + f", bars: {ci:.0%} bootstrap CI")
    return fig


# -- rooflines -------------------------------------------------------------------------------

def _roofs(rows: pd.DataFrame, source: str | None = None) -> list[tuple[float, float, str, str]]:
    """Distinct roofs (peak FLOP/s, peak B/s, dtypes, source) of the rows, at most four."""
    if "roof_peak_flops" not in rows.columns:
        raise ParadnnError("plots: expected the output of paradnn.analysis.roofline")
    rows = rows.dropna(subset=["roof_peak_flops", "roof_peak_bytes_per_sec"])
    if source is None and "peak_source" in rows.columns:
        src = rows["peak_source"].fillna("unknown").astype(str)
    else:
        src = pd.Series(source or "given", index=rows.index)
    dt = rows["dtype"].fillna("?").astype(str) if "dtype" in rows.columns else pd.Series("", index=rows.index)
    out: dict[tuple[float, float, str], set] = {}
    for f, b, s, d in zip(rows["roof_peak_flops"], rows["roof_peak_bytes_per_sec"], src, dt):
        out.setdefault((float(f), float(b), s), set()).add(d)
    roofs = [(f, b, "/".join(sorted(d for d in ds if d)), s) for (f, b, s), ds in out.items()]
    return sorted(roofs, reverse=True)[:4]


def _source_words(source: str) -> str:
    return {"spec": "spec-sheet peak", "measured": "measured peak (paradnn probe)",
            "given": "given peak"}.get(source, f"{source} peak")


def _roof_lines(ax, roofs, xmin: float, xmax: float) -> list:
    handles = []
    styles = ("-", "--", ":", "-.")
    if roofs:  # show the ridge and some of the flat roof even when every point is left of it
        xmax = max(xmax, 3 * max(pf / pb for pf, pb, _, _ in roofs))
    xs = np.logspace(math.log10(xmin), math.log10(xmax), 200)
    for k, (pf, pb, dtypes, source) in enumerate(roofs):
        name = f"{dtypes} roof" if dtypes else "roof"
        (h,) = ax.plot(xs, np.minimum(pf, xs * pb), color="tab:red", linestyle=styles[k % 4],
                       linewidth=1.6,
                       label=f"{name}, {_source_words(source)}: {si(pf, 'FLOP/s')}, {si(pb, 'B/s')}")
        handles.append(h)
        # The roof's own label on its flat part, so the page reads without the legend.
        ax.annotate(f"{dtypes or 'roof'} ({source})", (xmax, pf), xytext=(-4, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=9, color="tab:red")
    return handles


@_styled
def roofline(rf: pd.DataFrame, color_by: str = "dtype", title: str | None = None,
             annotate_real: bool = True) -> Figure:
    """Roofline of :func:`paradnn.analysis.roofline`: achieved FLOP/s against arithmetic
    intensity (log-log). One roof per peak, labelled with its dtype(s) and whether the peak is
    the spec sheet's or measured (``peak_source``). Marker shape = family; colour = dtype (or a
    numeric column ``color_by``, with a colour bar); hollow = unstable timing; red ring =
    physics warning; real models (``kind == "real"``) as labelled stars, only when present.
    Rows of several frameworks are points of their own, told apart by a mark inside the
    marker (``FRAMEWORK_MARKS``: none for JAX, + TensorFlow, x PyTorch) named in the legend."""
    rows = rf.dropna(subset=["flops_per_sec", "arithmetic_intensity"])
    rows = rows[(rows["flops_per_sec"] > 0) & (rows["arithmetic_intensity"] > 0)]
    if rows.empty:
        raise ParadnnError("plots.roofline: no rows with flops_per_sec and arithmetic_intensity")
    fig, ax = _figure(5.6)
    fam = rows.apply(_family_of, axis=1) if len(rows) else pd.Series(dtype=object)
    unstable, flagged = unstable_mask(rows), flagged_mask(rows)
    # A point above its own roof is impossible whatever the record says (older stores have no
    # warnings column): it is ringed too.
    if "roof_fraction" in rows.columns:
        flagged = flagged | (pd.to_numeric(rows["roof_fraction"], errors="coerce") > 1.0 + 1e-9)
    dtypes = list(dict.fromkeys(rows["dtype"].fillna("?"))) if "dtype" in rows.columns else ["?"]
    numeric = None
    if color_by != "dtype" and color_by in rows.columns:
        c = pd.to_numeric(rows[color_by], errors="coerce")
        numeric = c if c.notna().any() else None
    norm = None
    if numeric is not None:
        norm = (mcolors.LogNorm(numeric.min(), numeric.max())
                if numeric.min() > 0 and numeric.max() / numeric.min() > 8
                else mcolors.Normalize(numeric.min(), numeric.max()))
    handles = []
    for f in dict.fromkeys(fam):
        sel = rows[fam == f]
        marker = FAMILY_MARKERS.get(f, "D")
        size = 200 if f == "real" else 36
        if numeric is not None:
            colours = colormaps["viridis"](norm(numeric[sel.index].to_numpy()))
            _scatter_marked(ax, sel["arithmetic_intensity"], sel["flops_per_sec"], marker=marker,
                            color=colours, size=size, unstable=unstable[sel.index],
                            flagged=flagged[sel.index])
        else:
            sel_dtype = sel["dtype"].fillna("?") if "dtype" in sel.columns else pd.Series("?", index=sel.index)
            for d in dtypes:
                sd = sel[sel_dtype == d]
                if len(sd):
                    _scatter_marked(ax, sd["arithmetic_intensity"], sd["flops_per_sec"],
                                    marker=marker, color=_dtype_color(d, dtypes), size=size,
                                    unstable=unstable[sd.index], flagged=flagged[sd.index])
        handles.append(Line2D([], [], marker=marker, linestyle="", color="0.35",
                              markersize=13 if f == "real" else 7,
                              label=FAMILY_NAMES.get(f, f) + (" (star)" if f == "real" else "")))
        if f == "real" and annotate_real:
            # Alternate below/above so that two real models at one place stay readable.
            for k, (_, r) in enumerate(sel.sort_values("arithmetic_intensity").iterrows()):
                ax.annotate(str(r.get("model", "real")), (r["arithmetic_intensity"], r["flops_per_sec"]),
                            textcoords="offset points", xytext=(8, -14 if k % 2 == 0 else 6),
                            fontsize=9)
    handles += _framework_marks(ax, rows, "arithmetic_intensity", "flops_per_sec")
    if numeric is not None:
        from matplotlib.cm import ScalarMappable

        cb = fig.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=ax)
        cb.set_label(_axis_label(color_by) + (", log scale" if isinstance(norm, mcolors.LogNorm) else ""))
        if isinstance(norm, mcolors.LogNorm):
            _log_axis(cb.ax.yaxis, fmt=_fmt, max_ticks=6)
    else:
        handles += [Patch(color=_dtype_color(d, dtypes), label=f"dtype {d}") for d in dtypes if d != "?"]
    handles += _marks_legend(bool(unstable.any()), bool(flagged.any()))
    xmin = rows["arithmetic_intensity"].min() / 2
    xmax = rows["arithmetic_intensity"].max() * 2
    roof_handles = _roof_lines(ax, _roofs(rows), xmin, xmax)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/B, log scale)")
    ax.set_ylabel("achieved (FLOP/s, log scale)")
    _log_axis(ax.xaxis, fmt=compact)
    _log_axis(ax.yaxis, fmt=compact)
    fig.legend(handles=handles + roof_handles, loc="outside right upper", frameon=False)
    ax.set_title(title or "roofline")
    return fig


@_styled
def op_roofline(ops: pd.DataFrame, title: str | None = None) -> Figure:
    """Operation-level roofline (Fig 3b/3d) of :func:`paradnn.analysis.op_roofline`: one point
    per operation, coloured by category, sized by its share of time; the roof of the device."""
    rows = ops[(ops["flops_per_sec"] > 0) & (ops["arithmetic_intensity"] > 0)]
    if rows.empty:
        raise ParadnnError("plots.op_roofline: no operation with FLOPs and bytes")
    fig, ax = _figure(5.6)
    handles = []
    for cat in CATEGORIES:
        sel = rows[rows["category"] == cat]
        if sel.empty:
            continue
        ax.scatter(sel["arithmetic_intensity"], sel["flops_per_sec"], s=20 + 600 * sel["time_fraction"],
                   color=_CATEGORY_COLORS[cat], alpha=0.75, edgecolors="black", linewidths=0.4)
        handles.append(Line2D([], [], marker="o", linestyle="", color=_CATEGORY_COLORS[cat], label=cat))
    handles += _roof_lines(ax, _roofs(rows, ops.attrs.get("peak_source", "given")),
                           rows["arithmetic_intensity"].min() / 2, rows["arithmetic_intensity"].max() * 2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/B, log scale)")
    ax.set_ylabel("achieved by the operation (FLOP/s, log scale)")
    _log_axis(ax.xaxis, fmt=compact)
    _log_axis(ax.yaxis, fmt=compact)
    note = " - per-op times approximate (CPU)" if ops.attrs.get("approximate") else ""
    ax.set_title(title or f"operations above {ops.attrs.get('min_time_fraction', 0.01):.0%} of step time"
                 f" (marker area ~ time share){note}")
    fig.legend(handles=handles, loc="outside right upper", frameon=False)
    return fig


@_styled
def op_breakdown(breakdown: pd.DataFrame, title: str | None = None) -> Figure:
    """Share of step time per operation category (:func:`paradnn.analysis.op_breakdown`)."""
    rows = breakdown.iloc[::-1]
    fig, ax = _figure(0.45 * len(rows) + 1.8)
    ax.barh(np.arange(len(rows)), 100 * rows["time_fraction"],
            color=[_CATEGORY_COLORS.get(c, "tab:gray") for c in rows["category"]])
    ax.set_yticks(np.arange(len(rows)), list(rows["category"]))
    ax.set_xlabel("share of step time (%)")
    ax.set_ylabel("operation category")
    note = " (per-op times approximate on CPU)" if breakdown.attrs.get("approximate") else ""
    ax.set_title(title or f"time by operation category{note}")
    return fig


# -- speedups and ranges ---------------------------------------------------------------------

@_styled
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
    fig, ax = _figure(5.0)
    fam = rows.apply(_family_of, axis=1)
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
        marker = FAMILY_MARKERS.get(f, "D")
        if f == "real":
            colours = "gold"
        elif norm is not None:
            colours = colormaps["viridis"](norm(c[sel.index].fillna(c.min()).to_numpy()))
        else:
            colours = "tab:blue"
        _scatter_marked(ax, sel[x], sel["speedup"], marker=marker, color=colours,
                        size=220 if f == "real" else 36, unstable=unstable[sel.index],
                        flagged=flagged[sel.index])
        handles.append(Line2D([], [], marker=marker, linestyle="", color="0.35",
                              markersize=13 if f == "real" else 7,
                              label=FAMILY_NAMES.get(f, f) + (" (star)" if f == "real" else "")))
        if f == "real":
            for _, r in sel.iterrows():
                ax.annotate(str(r.get("model", "real")), (r[x], r["speedup"]),
                            textcoords="offset points", xytext=(7, 4), fontsize=9)
    if norm is not None:
        from matplotlib.cm import ScalarMappable

        cb = fig.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=ax)
        cb.set_label(_axis_label(color_by) + (", log scale" if isinstance(norm, mcolors.LogNorm) else ""))
        if isinstance(norm, mcolors.LogNorm):
            _log_axis(cb.ax.yaxis, fmt=_fmt, max_ticks=6)
    handles += _marks_legend(bool(unstable.any()), False)
    ax.axhline(1.0, color="black", linewidth=0.9, linestyle="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo, hi = float(rows["speedup"].min()), float(rows["speedup"].max())
    ax.set_ylim(min(lo, 1.0) / 1.15, max(hi, 1.0) * 1.15)  # 1x always in view
    _log_axis(ax.yaxis, fmt=_ratio)
    _log_axis(ax.xaxis, fmt=compact)
    ax.set_xlabel((label(x) if x in METRICS else _axis_label(x)) + ", log scale")
    metric = sp.attrs.get("metric", "examples_per_sec")
    ax.set_ylabel(f"speedup (x, ratio of {metric} [{unit(metric)}])")
    a, b = sp.attrs.get("a", "A"), sp.attrs.get("b", "B")
    ax.set_title(title or f"speedup of {a} over {b}")
    fig.legend(handles=handles, loc="outside right upper", frameon=False)
    return fig


@_styled
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
    from paradnn import families

    order = {f: i for i, f in enumerate((*families.names(), "real"))}
    rows["_family"] = rows.apply(_family_of, axis=1)
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
    fig, ax = _figure(5.4)
    unstable = rows["unstable"].astype(bool) if "unstable" in rows.columns else pd.Series(False, index=rows.index)
    handles = []
    for k, f in enumerate(fams):
        sel = (rows["_family"] == f).to_numpy()
        color = f"C{k % 10}"
        _scatter_marked(ax, pos[sel], rows.loc[sel, "speedup"], marker=FAMILY_MARKERS.get(f, "D"),
                        color=color, size=44, unstable=unstable[sel], flagged=np.zeros(sel.sum(), bool))
        centre = pos[sel].mean()
        ax.annotate(FAMILY_NAMES.get(f, f), (centre, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=9.5)
        handles.append(Line2D([], [], marker=FAMILY_MARKERS.get(f, "D"), linestyle="", color=color,
                              label=FAMILY_NAMES.get(f, f)))
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
    handles += _marks_legend(bool(unstable.any()), False)
    ax.set_yscale("log")
    ax.set_ylim(min(lo, 1.0) / 1.15, max(hi, 1.0) * 1.15)  # 1x always in view
    _log_axis(ax.yaxis, fmt=_ratio)
    if len(rows) <= max_labels:
        names = []
        for _, r in rows.iterrows():
            name = str(r.get("label", "")) or str(r["_family"])
            # The family is the group's heading: drop it from each name.
            name = name[len(str(r["_family"])) + 1:] if name.startswith(f"{r['_family']} ") else name
            names.append(name + (f" b={_fmt(r['batch'])}" if pd.notna(r.get("batch")) else ""))
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


@_styled
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
    fig, ax = _figure(0.42 * len(labels) * max(1, len(groups)) ** 0.5 + 2.0)
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
        _log_axis(ax.xaxis, fmt=_ratio if value == "speedup" else compact)
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


# -- batch saturation ------------------------------------------------------------------------

@_styled
def saturation(curves: pd.DataFrame, title: str | None = None, max_models: int = 12) -> Figure:
    """Throughput relative to each model's best against batch (log2), with the saturation batch
    (the smallest reaching the threshold) marked by a diamond (:func:`paradnn.analysis.saturation`,
    as in the TBD benchmark suite, Training Benchmark for DNNs). Every model has its own marker
    and line style and is drawn slightly offset along the batch axis, so no line hides another;
    hollow markers are points resting on unstable runs."""
    if curves.empty:
        raise ParadnnError("plots.saturation: no model was measured at two or more batch sizes")
    thr = curves.attrs.get("threshold", 0.9)
    models = list(dict.fromkeys(curves["model"]))[:max_models]
    fig, ax = _figure(5.0 + 0.2 * math.ceil((len(models) + 2) / 2))
    # Words every model name shares (family, fixed hyperparameters) go to the title once.
    common = set.intersection(*(set(m.split()) for m in models))
    any_unstable = False
    for k, m in enumerate(models):
        c = curves[curves["model"] == m].sort_values("batch")
        # Offsets of a few percent in batch (log2 axis): coincident curves stay visible.
        shift = 2.0 ** (0.025 * (k - (len(models) - 1) / 2))
        short = " ".join(w for w in m.split() if w not in common) or m
        short = short if len(short) <= 70 else short[:67] + "..."
        color, marker = f"C{k % 10}", _MODEL_MARKERS[k % len(_MODEL_MARKERS)]
        bx = c["batch"].to_numpy(dtype=float) * shift
        fy = c["fraction_of_best"].to_numpy(dtype=float)
        shaky = c["unstable"].astype(bool).to_numpy() if "unstable" in c.columns else np.zeros(len(c), bool)
        any_unstable |= bool(shaky.any())
        ax.plot(bx, fy, color=color, linestyle=_LINESTYLES[(k // 10) % 4], linewidth=1.4, alpha=0.85,
                marker=None, zorder=2)
        ax.scatter(bx[~shaky], fy[~shaky], marker=marker, s=30, color=color, zorder=3,
                   label=short)
        if shaky.any():
            ax.scatter(bx[shaky], fy[shaky], marker=marker, s=30, facecolors="none",
                       edgecolors=color, linewidths=1.3, zorder=3)
        sb = c["saturation_batch"].iloc[0]
        ax.scatter([sb * shift], [c.loc[c["batch"] == sb, "fraction_of_best"].iloc[0]], marker="D",
                   s=70, color=color, edgecolors="black", linewidths=1.0, zorder=4)
    ax.axhline(thr, color="black", linestyle="--", linewidth=0.9)
    ax.set_xscale("log", base=2)
    batches = sorted(curves["batch"].unique())
    step = max(1, math.ceil(len(batches) / 10))
    ax.set_xticks(batches[::step], [_fmt(b) for b in batches[::step]])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch (examples, log2 scale)")
    metric = curves.attrs.get("metric", "examples_per_sec")
    ax.set_ylabel(f"{label(metric)} / model's best (fraction)")
    ax.set_ylim(0, 1.05)
    extra = [Line2D([], [], marker="D", linestyle="", color="0.6", markeredgecolor="black",
                    markersize=8, label=f"saturation batch (first >= {thr:.0%} of best)")]
    extra += _marks_legend(any_unstable, False)
    h, _ = ax.get_legend_handles_labels()
    # Below the plot, in columns: model names are long, and a legend beside the axes would
    # squeeze them (and the title) off the page.
    fig.legend(handles=h + extra, loc="outside lower center", ncol=2, frameon=False)
    n_models = curves["model"].nunique()
    shown = f" (first {max_models} of {n_models} models)" if n_models > max_models else ""
    same = " ".join(w for w in models[0].split() if w in common)
    ax.set_title(title or f"batch saturation: diamond = smallest batch reaching {thr:.0%} of the "
                 f"best{shown}" + (f"\nall: {same}" if same else ""))
    return fig
