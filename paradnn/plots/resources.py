"""Figures of the resources a step uses: the memory breakdown (TBD Fig 8), of power and energy per example, and of host
CPU and device utilization, by model and batch. Each takes the DataFrame of ``paradnn.load`` and
returns a matplotlib Figure one report page wide (``plots.PAGE_WIDTH_IN``).

Runs of different frameworks or platforms are never averaged into one bar or one line: a
model's name gets its framework and platform appended when the rows hold more than one.

>>> from paradnn import plots
>>> fig = plots.memory_breakdown(df)  # doctest: +SKIP
>>> fig = plots.energy(df)  # doctest: +SKIP
>>> fig = plots.utilization(df)  # doctest: +SKIP
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator
from matplotlib.transforms import offset_copy

from paradnn import families, sizes
from paradnn.analysis.columns import (
    label_columns, ok_rows, platform_label, require_columns, workload_label,
)
from paradnn.analysis.framework import framework_of
from paradnn.errors import ParadnnError
from paradnn.plots.saturations import LINESTYLES, MODEL_MARKERS
from paradnn.plots.style import STYLE, log_axis, new_figure_row, styled
from paradnn.units import byte_unit, compact, precise_duration

__all__ = ["memory_breakdown", "energy", "utilization", "utilization_left_out", "MEMORY_PARTS",
           "ENERGY_METRICS", "UTILIZATION_METRICS"]

# The breakdown's metrics bottom to top and their labels (paradnn.sizes, which imports no framework).
_PART_NAMES = sizes.MEMORY_PARTS
MEMORY_PARTS: tuple[str, ...] = tuple(_PART_NAMES)
_PART_COLORS = dict(zip(MEMORY_PARTS, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:gray")))
ENERGY_METRICS = ("power_w", "energy_per_example_j")
UTILIZATION_METRICS = ("host_cpu_utilization", "device_busy_fraction")
MAX_BARS = 40  # beyond this the bars' names are unreadable on one page
#: /proc/stat counts CPU time in clock ticks of 1/USER_HZ s (100 Hz on Linux): a timed window
#: shorter than one tick may see no core tick, and then has no host_cpu_utilization
#: (paradnn.hostutil), which is why short runs (tiny FC or RNN models) have none.
PROC_STAT_TICK_S = 0.01
#: Sideways shift between the lines of two models (points, 1/72 in), and the most a line moves:
#: models with equal values at one batch would otherwise draw one dot.
DODGE_PT, MAX_DODGE_PT = 6.0, 15.0


def model_names(rows: pd.DataFrame) -> pd.Series:
    """A readable model name per row (:func:`~paradnn.analysis.columns.workload_label`), with
    ``[framework]`` appended when ``rows`` hold several frameworks and ``on <platform>`` when
    they hold several platforms, so that grouping by the name never mixes them."""
    # Plain records of the columns the labels read: iterrows over every column of a big
    # store took 6 s a call at 10,000 rows.
    records = rows[label_columns(rows)].to_dict("records")
    names = pd.Series([workload_label(r) for r in records], index=rows.index, dtype=object)
    fw = framework_of(rows)
    if fw.nunique() > 1:
        names = names + " [" + fw.astype(str) + "]"
    if len(rows):
        plat = pd.Series([platform_label(r) for r in records], index=rows.index, dtype=object)
        if plat.nunique() > 1:
            names = names + " on " + plat.astype(str)
    return names


def _bars(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (model name, batch): the mean of each part over repeats, sorted."""
    rows = ok_rows(df).dropna(subset=["memory_weights_bytes", "memory_activations_bytes"]).copy()
    rows["workload"] = model_names(rows)
    bars = rows.groupby(["workload", "batch"], sort=True)[list(MEMORY_PARTS)].mean().reset_index()
    return bars.fillna(0.0)


def memory_unit(df: pd.DataFrame, max_bars: int = MAX_BARS) -> tuple[str, int]:
    """``(name, bytes per unit)`` of the memory breakdown figure's axis for ``df``: the binary
    unit its largest drawn bar reaches (:func:`paradnn.units.byte_unit`). Its caption names the
    same unit."""
    bars = _bars(df).head(max_bars)
    return byte_unit(float(bars[list(MEMORY_PARTS)].sum(axis=1).max()) if len(bars) else 0.0)


@styled
def memory_breakdown(df: pd.DataFrame, title: str | None = None, max_bars: int = MAX_BARS) -> Figure:
    """Stacked bars of the memory per device (GiB, MiB, KiB or B: the figure's largest bar
    sets the unit) by category, one bar per model and batch,
    with each bar's feature-map share written above it; the first ``max_bars`` bars (by name,
    then batch) when there are more. Rows without a breakdown are left out."""
    require_columns(df, (*MEMORY_PARTS, "batch"), "memory breakdown figure")
    bars = _bars(df)
    if bars.empty:
        raise ParadnnError("memory breakdown figure: no ok row has memory_weights_bytes and "
                           "memory_activations_bytes (runs from before the breakdown existed?)")
    total = len(bars)
    bars = bars.head(max_bars)
    fig, (ax,) = new_figure_row(height=5.6)
    x = np.arange(len(bars))
    bottom = np.zeros(len(bars))
    # One binary unit for the figure, chosen by its largest bar: 1.5 MiB, not 0.0015 GiB.
    name, scale = memory_unit(df, max_bars)
    for part in MEMORY_PARTS:
        size = bars[part].to_numpy(float) / scale
        ax.bar(x, size, bottom=bottom, color=_PART_COLORS[part], label=_PART_NAMES[part], width=0.8)
        bottom += size
    ax.set_ylim(0, max(bottom.max(), 1e-12) * 1.1)  # room for the shares above the bars
    share = bars["memory_activations_bytes"].to_numpy(float) / scale / np.where(bottom > 0, bottom, np.nan)
    for xi, top, s in zip(x, bottom, share):
        if np.isfinite(s):
            ax.text(xi, top, f"{100 * s:.0f}%", ha="center", va="bottom", fontsize=7.5)
    ax.set_xticks(x, [f"{w} ({int(b)})" for w, b in zip(bars["workload"], bars["batch"])],
                  rotation=60, ha="right", fontsize=7.5)
    ax.set_xlabel("model (batch, examples)")
    ax.set_ylabel(f"memory per device ({name})")
    fig.legend(loc="outside right upper", frameon=False, title="share above bars:\nfeature maps")
    shown = f" (first {len(bars)} of {total} bars)" if total > len(bars) else ""
    ax.set_title((title or "Memory breakdown of a training step (compiled program, per device)") + shown)
    return fig


def _lines(ax, rows: pd.DataFrame, metric: str) -> None:
    """One line per model name: the median of ``metric`` per batch. Every model has its own
    colour, marker and line style, drawn translucent and shifted sideways by a few points
    (:data:`DODGE_PT`), so that models with the same value at the same batch (two at 100%
    host CPU) stay two visible points."""
    lines = []
    for name, g in rows.groupby("workload", sort=True):
        g = pd.to_numeric(g.set_index("batch")[metric], errors="coerce").dropna()
        g = g.groupby(level=0).median().sort_index()
        if len(g):
            lines.append((name, g))
    step = min(DODGE_PT, 2 * MAX_DODGE_PT / max(len(lines) - 1, 1))
    for k, (name, g) in enumerate(lines):
        # A shift in display points, not in data: the same on a log axis and at any batch.
        shifted = offset_copy(ax.transData, fig=ax.figure, x=(k - (len(lines) - 1) / 2) * step,
                              y=0.0, units="points")
        x, y = g.index.to_numpy(float), g.to_numpy(float)
        ax.plot(x, y, color=f"C{k % 10}", marker=MODEL_MARKERS[k % len(MODEL_MARKERS)],
                linestyle=LINESTYLES[(k // 10) % len(LINESTYLES)], markersize=7, alpha=0.75,
                label=name, transform=shifted)
        # A line drawn in a shifted transform does not widen the axes' data limits: its data does.
        ax.update_datalim(np.column_stack([x, y]))
    ax.margins(x=0.12)  # room for the shifted markers of the smallest and largest batch
    ax.autoscale_view()
    ax.set_xscale("log", base=2)
    batches = sorted(pd.to_numeric(rows["batch"], errors="coerce").dropna().unique())
    ax.set_xticks(batches, [f"{int(b)}" for b in batches])  # 64, not 2^6
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch (examples, log2 scale)")


@styled
def energy(df: pd.DataFrame, title: str | None = None) -> Figure:
    """Average power (W) and energy per example (J/example) over the timed window against the
    batch, one line per model. Rows whose ``energy_source`` is ``unavailable`` are left out and
    counted in the title; with no measured row the error gives their reasons."""
    require_columns(df, (*ENERGY_METRICS, "energy_source", "batch"), "energy figure")
    rows = ok_rows(df)
    measured = rows[(rows["energy_source"] != "unavailable") & rows["power_w"].notna()].copy()
    if measured.empty:
        notes = sorted({str(n) for n in rows.get("energy_note", pd.Series(dtype=object)).dropna()})
        raise ParadnnError("energy figure: no ok row has a measured energy (energy_source is "
                           f"unavailable); reasons recorded: {'; '.join(notes) or 'none'}")
    measured["workload"] = model_names(measured)
    fig, axes = new_figure_row(ncols=2, height=4.6)
    ylabels = {"power_w": "average power (W)", "energy_per_example_j": "energy per example (J/example)"}
    for ax, metric in zip(axes, ENERGY_METRICS):
        _lines(ax, measured, metric)
        if metric == "energy_per_example_j":
            ax.set_yscale("log")
            log_axis(ax.yaxis, fmt=compact)
            ylabels[metric] += ", log scale"
        ax.set_ylabel(ylabels[metric])
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2,
               frameon=False)
    left_out = len(rows) - len(measured)
    sources = ", ".join(sorted(measured["energy_source"].astype(str).unique()))
    fig.suptitle((title or "Power and energy per example over the timed window")
                 + f" (source: {sources}" + (f"; {left_out} run(s) without energy left out)" if left_out else ")"))
    return fig


def _runs_by_family(rows: pd.DataFrame) -> str:
    """``2 FC and 2 RNN runs``, ``1 CNN run``: ``rows`` counted by family."""
    if "family" not in rows.columns:
        return f"{len(rows)} run" + ("" if len(rows) == 1 else "s")
    counts = [f"{n} {families.display_name(f) if f in families.names() else f}"
              for f, n in rows["family"].astype(str).value_counts(sort=False).sort_index().items()]
    text = ", ".join(counts[:-1]) + " and " + counts[-1] if len(counts) > 1 else counts[0]
    return text + (" run" if len(rows) == 1 else " runs")


def utilization_left_out(df: pd.DataFrame, metric: str = "host_cpu_utilization") -> str:
    """Which ok runs of ``df`` the ``metric`` panel of :func:`utilization` does not draw (they
    have no value), by family, and why: ``2 FC and 2 RNN runs (timed window 914 µs to 2.10
    ms, shorter than /proc/stat's 10 ms clock tick: no core ticked)``; "" when none."""
    rows = ok_rows(df)
    values = (pd.to_numeric(rows[metric], errors="coerce") if metric in rows.columns
              else pd.Series(np.nan, index=rows.index))
    missing = rows[values.isna()]
    if missing.empty:
        return ""
    parts: list[tuple[pd.DataFrame, str]] = []
    if metric == "host_cpu_utilization":
        window = (pd.to_numeric(missing["meter_window_s"], errors="coerce") if "meter_window_s" in missing.columns
                  else pd.Series(np.nan, index=missing.index))
        short = (window < PROC_STAT_TICK_S).to_numpy()
        if short.any():
            lo, hi = window[short].min(), window[short].max()
            span = (precise_duration(lo, zeros=True) if lo == hi
                    else f"{precise_duration(lo, zeros=True)} to {precise_duration(hi, zeros=True)}")
            parts.append((missing[short], f"timed window {span}, shorter than /proc/stat's "
                          f"{PROC_STAT_TICK_S * 1e3:.0f} ms clock tick: no core ticked"))
        parts.append((missing[~short], "no /proc/stat reading: not a Linux host, not readable, or "
                      "recorded before the metric existed"))
    else:
        note = metric.replace("_fraction", "_note")
        why = (missing[note].fillna("not recorded").astype(str) if note in missing.columns
               else pd.Series("not recorded", index=missing.index))
        parts += [(missing[why == w], w) for w in sorted(why.unique())]
    return "; ".join(f"{_runs_by_family(r)} ({why})" for r, why in parts if len(r))


@styled
def utilization(df: pd.DataFrame, title: str | None = None) -> Figure:
    """Host CPU utilization (busy share of the host's cores, 0-1, from /proc/stat) and device
    busy fraction (kernel time over the window, 0-1, from a profiler trace) over the timed
    window against the batch, one line per model (own marker, shifted a few points sideways
    so that equal values stay visible). A panel whose metric no ok row has says so and why
    (``device_busy_note``); a panel that some runs lack names them above it
    (:func:`utilization_left_out`); with neither metric the error says what is missing."""
    require_columns(df, ("batch",), "utilization figure")
    rows = ok_rows(df).copy()
    have = [m for m in UTILIZATION_METRICS
            if m in rows.columns and pd.to_numeric(rows[m], errors="coerce").notna().any()]
    if not have:
        notes = sorted({str(n) for n in rows.get("device_busy_note", pd.Series(dtype=object)).dropna()})
        raise ParadnnError("utilization figure: no ok row has host_cpu_utilization or "
                           "device_busy_fraction" + (f"; device: {'; '.join(notes)}" if notes else ""))
    rows["workload"] = model_names(rows)
    fig, axes = new_figure_row(ncols=2, height=4.6)
    ylabels = {"host_cpu_utilization": "host CPU utilization (busy share of all cores, 0-1)",
               "device_busy_fraction": "device busy fraction (kernel time / window, 0-1)"}
    for ax, metric in zip(axes, UTILIZATION_METRICS):
        ax.set_ylabel(ylabels[metric])
        ax.set_ylim(0, 1.05)
        if metric in have:
            _lines(ax, rows, metric)
            left = utilization_left_out(rows, metric)
            if left:  # never silently: which runs have no point here, and why
                ax.set_title(textwrap.fill(f"not drawn: {left}", 75), fontsize=STYLE["font.size"] - 1,
                             loc="left", color="0.25")
            continue
        notes = sorted({str(n) for n in rows.get(metric.replace("_fraction", "_note"),
                                                   pd.Series(dtype=object)).dropna()})
        ax.text(0.5, 0.5, "not measured" + (":\n" + "\n".join(notes[:3]) if notes else ""),
                ha="center", va="center", transform=ax.transAxes, wrap=True,
                fontsize=STYLE["font.size"])
        ax.set_xticks([])
    handles, labels = axes[UTILIZATION_METRICS.index(have[0])].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False)
    fig.suptitle(title or "Host CPU and device utilization over the timed window")
    return fig
