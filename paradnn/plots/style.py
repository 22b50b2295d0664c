"""What every figure shares: its size on the page, its fonts, colours and markers, and the axis
helpers (log ticks, number formats, the marks of unstable and flagged points).

Sizes are for a page about 1100 px wide: every figure is ``PAGE_WIDTH_IN`` inches wide, which is
1100 px at ``DPI_1X`` (100 dpi); the report saves at ``DPI_2X`` and shows the image at half its
pixel size, so it stays sharp on high-density screens. No text is smaller than
``MIN_FONT_PT`` (10 px at 1x). Marks: marker shape = model family, colour = dtype (or a
hyperparameter where the figure says so), hollow marker = unstable timing (the run missed its
precision target), red ring = physics warning (see the report's Warnings section).

Figures are built with the object-oriented API on an Agg canvas: no pyplot state, no display
needed, safe in threads and headless jobs.
"""

from __future__ import annotations

import functools
import io
import math
from typing import Callable

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

from paradnn import frameworks as registry
from paradnn.analysis.framework import framework_of, frameworks
from paradnn.units import compact

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
DTYPE_COLORS = {"float32": "tab:blue", "bfloat16": "tab:orange", "float16": "tab:green"}


def framework_mark(name: str) -> str:
    """The mark drawn inside a point of framework ``name`` when a figure holds several
    frameworks: its registry entry's ``FrameworkInfo.mark`` (none for JAX, + TensorFlow,
    x PyTorch); a tri-down mark for a framework not registered in this process."""
    return registry.meta(name).mark if name in registry.names() else "1"

WARNING_COLOR = "red"


class PlotFigure(Figure):
    """A matplotlib Figure that shows itself as PNG in Jupyter whatever the backend (these
    figures are made without pyplot, so no inline backend hook sees them)."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=DPI_1X)
        return buf.getvalue()


def styled(fn: Callable) -> Callable:
    """Build the figure under STYLE: matplotlib reads font sizes when an artist is created."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with rc_context(STYLE):
            return fn(*args, **kwargs)
    return wrapper


def new_figure(height: float, width: float = PAGE_WIDTH_IN) -> tuple[Figure, object]:
    """A figure ``width`` x ``height`` inches (one page wide by default) with one axes."""
    fig = PlotFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def new_figure_row(ncols: int = 1, height: float = 4.8) -> tuple[Figure, list]:
    """A page-wide figure ``height`` inches high with ``ncols`` axes side by side."""
    fig = PlotFigure(figsize=(PAGE_WIDTH_IN, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]


def tick_label(v) -> str:
    """A hyperparameter value as a tick label: 64, 4096, 16k, 16,384."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        v = int(v)
    if isinstance(v, (int, np.integer)) and abs(v) >= 10_000:
        return f"{v / 1000:g}k" if v % 1000 == 0 else f"{v:,}"
    return str(v)


def ratio(v: float) -> str:
    """A ratio tick: 0.5x, 1x, 2x."""
    return f"{v:g}x"


def log_ticks(lo: float, hi: float, max_ticks: int = 8) -> list[float]:
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


def log_axis(axis, fmt: Callable[[float], str] = compact, max_ticks: int = 8) -> None:
    """Major ticks at :func:`log_ticks` of the axis's range, labelled with ``fmt`` (compact
    numbers or ratios), no minor labels: no ``3x10^3`` and no colliding minor ticks."""
    lo, hi = sorted(axis.get_view_interval())
    axis.set_major_locator(FixedLocator(log_ticks(lo, hi, max_ticks)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
    axis.set_minor_formatter(NullFormatter())


def log2_edges(values: np.ndarray) -> np.ndarray:
    """Cell edges on a log2 axis: midway (in log2) between neighbours, half a gap at the ends."""
    p = np.log2(values.astype(float))
    if len(p) == 1:
        return np.array([p[0] - 0.5, p[0] + 0.5])
    mid = (p[:-1] + p[1:]) / 2
    return np.concatenate([[p[0] - (mid[0] - p[0])], mid, [p[-1] + (p[-1] - mid[-1])]])


def family_of(row) -> str:
    """The family a point is drawn as: ``real`` for real models, else the row's family."""
    if row.get("kind") == "real" or row.get("family") == "real":
        return "real"
    return str(row.get("family", "?"))


def dtype_color(dtype, order: list) -> str:
    """The colour of ``dtype``: its own where :data:`DTYPE_COLORS` has one, else the next free
    one of the colour cycle in ``order`` (the dtypes of the figure)."""
    if dtype in DTYPE_COLORS:
        return DTYPE_COLORS[dtype]
    extra = [d for d in order if d not in DTYPE_COLORS]
    return f"C{(3 + extra.index(dtype)) % 10}" if dtype in extra else "tab:gray"


def marks_legend(unstable: bool, flagged: bool) -> list:
    """Legend entries of the marks a figure uses: hollow (unstable), red ring (flagged)."""
    out = []
    if unstable:
        out.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                          markeredgecolor="0.2", label="hollow: unstable timing (missed its precision target)"))
    if flagged:
        out.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none", markersize=11,
                          markeredgecolor=WARNING_COLOR, markeredgewidth=1.8,
                          label="red ring: physics warning or above its roof"))
    return out


def scatter_marked(ax, x, y, *, marker: str, color, size: float, unstable: pd.Series,
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


def framework_marks(ax, rows: pd.DataFrame, x: str, y: str) -> list:
    """Where ``rows`` hold more than one framework, a black mark inside each point
    (:func:`framework_mark`) and their legend entries; no
    marks and no entries for a single framework."""
    names = frameworks(rows)
    if len(names) < 2:
        return []
    fw = framework_of(rows)
    handles = []
    for name in names:
        mark = framework_mark(name)
        sel = rows[fw == name]
        if mark:
            ax.scatter(sel[x], sel[y], marker=mark, s=22, color="black", linewidths=1.0, zorder=6)
        handles.append(Line2D([], [], marker=mark or "o", linestyle="", color="black",
                              markerfacecolor="none" if not mark else "black",
                              label=f"framework {name}" + ("" if mark else " (no inner mark)")))
    return handles
