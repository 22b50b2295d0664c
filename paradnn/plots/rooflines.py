"""Rooflines (ParaDnn Fig 3; Williams et al. 2009): model points of
:func:`paradnn.analysis.roofline` under the roofs of their devices, operation points of
:func:`paradnn.analysis.op_roofline`, and the share of step time per operation category."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib import colors as mcolors
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from paradnn import families
from paradnn.analysis.columns import bounded_mask, flagged_mask, label, unstable_mask
from paradnn.analysis.oplevel import CATEGORIES
from paradnn.errors import ParadnnError
from paradnn.plots.style import (
    dtype_color, family_of, framework_marks, log_axis, marks_legend,
    new_figure, scatter_marked, styled, tick_label,
)
from paradnn.units import compact, si

_CATEGORY_COLORS = dict(zip(CATEGORIES, ("tab:red", "tab:blue", "tab:green", "tab:purple",
                                         "tab:gray", "tab:brown")))

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


@styled
def roofline(rf: pd.DataFrame, color_by: str = "dtype", title: str | None = None,
             annotate_real: bool = True) -> Figure:
    """Roofline of :func:`paradnn.analysis.roofline`: achieved FLOP/s against arithmetic
    intensity (log-log). One roof per peak, labelled with its dtype(s) and whether the peak is
    the spec sheet's or measured (``peak_source``). Marker shape = family; colour = dtype (or a
    numeric column ``color_by``, with a colour bar); hollow = unstable timing; red ring =
    physics warning; real models (``kind == "real"``) as labelled stars, only when present.
    Rows of several frameworks are points of their own, told apart by a mark inside the
    marker (``framework_mark``: none for JAX, + TensorFlow, x PyTorch) named in the legend."""
    rows = rf.dropna(subset=["flops_per_sec", "arithmetic_intensity"])
    rows = rows[(rows["flops_per_sec"] > 0) & (rows["arithmetic_intensity"] > 0)]
    if rows.empty:
        raise ParadnnError("plots.roofline: no rows with flops_per_sec and arithmetic_intensity")
    fig, ax = new_figure(5.6)
    fam = rows.apply(family_of, axis=1) if len(rows) else pd.Series(dtype=object)
    unstable, flagged = unstable_mask(rows), flagged_mask(rows)
    # A point above its own roof is impossible whatever the record says (older stores have no
    # warnings column) where the roof is a bound (a vendor peak, a quiet probe): it is ringed
    # too; above a nominal or loaded roof it is a provenance note, not ringed.
    if "roof_fraction" in rows.columns:
        flagged = flagged | ((pd.to_numeric(rows["roof_fraction"], errors="coerce") > 1.0 + 1e-9)
                             & bounded_mask(rows))
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
        marker = families.marker(f)
        size = 200 if f == "real" else 36
        if numeric is not None:
            colours = colormaps["viridis"](norm(numeric[sel.index].to_numpy()))
            scatter_marked(ax, sel["arithmetic_intensity"], sel["flops_per_sec"], marker=marker,
                            color=colours, size=size, unstable=unstable[sel.index],
                            flagged=flagged[sel.index])
        else:
            sel_dtype = sel["dtype"].fillna("?") if "dtype" in sel.columns else pd.Series("?", index=sel.index)
            for d in dtypes:
                sd = sel[sel_dtype == d]
                if len(sd):
                    scatter_marked(ax, sd["arithmetic_intensity"], sd["flops_per_sec"],
                                    marker=marker, color=dtype_color(d, dtypes), size=size,
                                    unstable=unstable[sd.index], flagged=flagged[sd.index])
        handles.append(Line2D([], [], marker=marker, linestyle="", color="0.35",
                              markersize=13 if f == "real" else 7,
                              label=families.display_name(f) + (" (star)" if f == "real" else "")))
        if f == "real" and annotate_real:
            # Alternate below/above so that two real models at one place stay readable.
            for k, (_, r) in enumerate(sel.sort_values("arithmetic_intensity").iterrows()):
                ax.annotate(str(r.get("model", "real")), (r["arithmetic_intensity"], r["flops_per_sec"]),
                            textcoords="offset points", xytext=(8, -14 if k % 2 == 0 else 6),
                            fontsize=9)
    handles += framework_marks(ax, rows, "arithmetic_intensity", "flops_per_sec")
    if numeric is not None:
        cb = fig.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=ax)
        cb.set_label(label(color_by) + (", log scale" if isinstance(norm, mcolors.LogNorm) else ""))
        if isinstance(norm, mcolors.LogNorm):
            log_axis(cb.ax.yaxis, fmt=tick_label, max_ticks=6)
    else:
        handles += [Patch(color=dtype_color(d, dtypes), label=f"dtype {d}") for d in dtypes if d != "?"]
    handles += marks_legend(bool(unstable.any()), bool(flagged.any()))
    xmin = rows["arithmetic_intensity"].min() / 2
    xmax = rows["arithmetic_intensity"].max() * 2
    roof_handles = _roof_lines(ax, _roofs(rows), xmin, xmax)
    _roofline_axes(ax, "achieved")
    fig.legend(handles=handles + roof_handles, loc="outside right upper", frameon=False)
    ax.set_title(title or "roofline")
    return fig


def _roofline_axes(ax, achieved: str) -> None:
    """Log-log roofline axes: arithmetic intensity (FLOP/B) against ``achieved`` FLOP/s."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/B, log scale)")
    ax.set_ylabel(f"{achieved} (FLOP/s, log scale)")
    log_axis(ax.xaxis, fmt=compact)
    log_axis(ax.yaxis, fmt=compact)


def no_roof_reason(attrs: dict) -> str:
    """Why a table of operations (its ``attrs``, :func:`paradnn.experiments.profile.capture`'s) has no roof:
    its device's peak FLOP/s or bandwidth is unknown, with how the peak was sought."""
    how = attrs.get("peak_method") or attrs.get("peak_source")
    return "the device's peak FLOP/s and bandwidth are unknown" + (f" ({how})" if how else "")


def _known_roofs(rows: pd.DataFrame, source: str) -> list[tuple[float, float, str, str]]:
    """The roofs of ``rows`` whose peaks are positive numbers; none for a frame without roof
    columns (operations not classified by :func:`paradnn.analysis.op_roofline`)."""
    if "roof_peak_flops" not in rows.columns or "roof_peak_bytes_per_sec" not in rows.columns:
        return []
    return [r for r in _roofs(rows, source)
            if all(math.isfinite(v) and v > 0 for v in r[:2])]


@styled
def op_roofline(ops: pd.DataFrame, title: str | None = None) -> Figure:
    """Operation-level roofline (Fig 3b/3d) of :func:`paradnn.analysis.op_roofline`: one point
    per operation, coloured by category, sized by its share of time; the roof of the device.
    Operations without a known roof (no peaks: their table straight from
    :func:`paradnn.experiments.profile.capture`, or peaks that are not positive numbers) are drawn on the
    same axes with no roof, and the title says what the figure is then ("operations:
    arithmetic intensity and achieved FLOP/s") and why it has no roof
    (:func:`no_roof_reason`)."""
    rows = ops[(ops["flops_per_sec"] > 0) & (ops["arithmetic_intensity"] > 0)]
    if rows.empty:
        raise ParadnnError("plots.op_roofline: no operation with FLOPs and bytes")
    roofs = _known_roofs(rows, ops.attrs.get("peak_source", "given"))
    fig, ax = new_figure(5.6)
    handles = []
    for cat in CATEGORIES:
        sel = rows[rows["category"] == cat]
        if sel.empty:
            continue
        ax.scatter(sel["arithmetic_intensity"], sel["flops_per_sec"], s=20 + 600 * sel["time_fraction"],
                   color=_CATEGORY_COLORS[cat], alpha=0.75, edgecolors="black", linewidths=0.4)
        handles.append(Line2D([], [], marker="o", linestyle="", color=_CATEGORY_COLORS[cat], label=cat))
    handles += _roof_lines(ax, roofs, rows["arithmetic_intensity"].min() / 2,
                           rows["arithmetic_intensity"].max() * 2)
    _roofline_axes(ax, "achieved by the operation")
    which = (f"operations above {ops.attrs['min_time_fraction']:.0%} of step time"
             if "min_time_fraction" in ops.attrs else "operations with FLOPs")
    note = "; per-op times approximate (CPU)" if ops.attrs.get("approximate") else ""
    # Two lines: one would run past the axes, and off the page on the left.
    # Without a roof the title says so; how the peak was sought is the caption's (no_roof_reason).
    default = (f"{which} on the roofline\n(marker area ~ time share{note})" if roofs else
               f"{which}: arithmetic intensity and achieved FLOP/s\n(no roof: the device's peaks "
               f"are unknown{note})")
    ax.set_title(title or default)
    fig.legend(handles=handles, loc="outside right upper", frameon=False)
    return fig


@styled
def op_breakdown(breakdown: pd.DataFrame, title: str | None = None) -> Figure:
    """Share of step time per operation category (:func:`paradnn.analysis.op_breakdown`)."""
    rows = breakdown.iloc[::-1]
    fig, ax = new_figure(0.45 * len(rows) + 1.8)
    ax.barh(np.arange(len(rows)), 100 * rows["time_fraction"],
            color=[_CATEGORY_COLORS.get(c, "tab:gray") for c in rows["category"]])
    ax.set_yticks(np.arange(len(rows)), list(rows["category"]))
    ax.set_xlabel("share of step time (%)")
    ax.set_ylabel("operation category")
    note = " (per-op times approximate on CPU)" if breakdown.attrs.get("approximate") else ""
    ax.set_title(title or f"time by operation category{note}")
    return fig
