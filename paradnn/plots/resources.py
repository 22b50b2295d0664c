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

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from paradnn.analysis.columns import ok_rows, platform_label, require_columns, workload_label
from paradnn.analysis.framework import framework_of
from paradnn.errors import ParadnnError
from paradnn.plots.style import STYLE, log_axis, new_figure_row, styled
from paradnn.units import byte_unit, compact

__all__ = ["memory_breakdown", "energy", "utilization", "MEMORY_PARTS", "ENERGY_METRICS",
           "UTILIZATION_METRICS"]

# The breakdown's metrics bottom to top, as paradnn.backends.jax.memory.MEMORY_PARTS orders them (a test
# holds the two equal; named here so that drawing a store's figures does not import JAX).
_PART_NAMES = {
    "memory_weights_bytes": "weights", "memory_gradients_bytes": "weight gradients",
    "memory_optimizer_bytes": "optimizer state", "memory_activations_bytes": "feature maps",
    "memory_workspace_bytes": "workspace / other",
}
MEMORY_PARTS: tuple[str, ...] = tuple(_PART_NAMES)
_PART_COLORS = dict(zip(MEMORY_PARTS, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:gray")))
ENERGY_METRICS = ("power_w", "energy_per_example_j")
UTILIZATION_METRICS = ("host_cpu_utilization", "device_busy_fraction")
MAX_BARS = 40  # beyond this the bars' names are unreadable on one page


def model_names(rows: pd.DataFrame) -> pd.Series:
    """A readable model name per row (:func:`~paradnn.analysis.columns.workload_label`), with
    ``[framework]`` appended when ``rows`` hold several frameworks and ``on <platform>`` when
    they hold several platforms, so that grouping by the name never mixes them."""
    names = pd.Series([workload_label(r) for _, r in rows.iterrows()], index=rows.index, dtype=object)
    fw = framework_of(rows)
    if fw.nunique() > 1:
        names = names + " [" + fw.astype(str) + "]"
    if len(rows):
        plat = rows.apply(platform_label, axis=1)
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
    """One line per model name: the median of ``metric`` per batch."""
    for name, g in rows.groupby("workload", sort=True):
        g = pd.to_numeric(g.set_index("batch")[metric], errors="coerce").dropna()
        g = g.groupby(level=0).median().sort_index()
        if len(g):
            ax.plot(g.index.to_numpy(float), g.to_numpy(float), marker="o", label=name)
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


@styled
def utilization(df: pd.DataFrame, title: str | None = None) -> Figure:
    """Host CPU utilization (busy share of the host's cores, 0-1, from /proc/stat) and device
    busy fraction (kernel time over the window, 0-1, from a profiler trace) over the timed
    window against the batch, one line per model. A panel whose metric no ok row has says so
    and why (``device_busy_note``); with neither metric the error says what is missing."""
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
