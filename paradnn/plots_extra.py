"""Figures of the memory breakdown (TBD Fig 8) and of power and energy per example (by model
and batch). Each takes the DataFrame of ``paradnn.load`` and returns a matplotlib Figure.

>>> from paradnn import plots_extra
>>> fig = plots_extra.memory_breakdown(df)  # doctest: +SKIP
>>> fig = plots_extra.energy(df)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from paradnn.analysis._common import ok_rows, require_columns, workload_label
from paradnn.errors import ParadnnError
from paradnn.memory import MEMORY_PARTS
from paradnn.plots import PlotFigure

__all__ = ["memory_breakdown", "energy"]

_PART_NAMES = {
    "memory_weights_bytes": "weights", "memory_gradients_bytes": "weight gradients",
    "memory_optimizer_bytes": "optimizer state", "memory_activations_bytes": "feature maps",
    "memory_workspace_bytes": "workspace / other",
}
_PART_COLORS = dict(zip(MEMORY_PARTS, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:gray")))
_ENERGY_METRICS = ("power_w", "energy_per_example_j")


def _figure(ncols: int = 1, width: float = 6.4, height: float = 4.8) -> tuple[Figure, list]:
    fig = PlotFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]


def _bars(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (workload label, batch): the mean of each part over repeats, sorted."""
    rows = ok_rows(df).dropna(subset=["memory_weights_bytes", "memory_activations_bytes"]).copy()
    rows["workload"] = [workload_label(r) for _, r in rows.iterrows()]
    bars = rows.groupby(["workload", "batch"], sort=True)[list(MEMORY_PARTS)].mean().reset_index()
    return bars.fillna(0.0)


def memory_breakdown(df: pd.DataFrame, title: str | None = None) -> Figure:
    """Stacked bars of the memory per device (GiB) by category, one bar per model and batch,
    with each bar's feature-map share written above it. Rows without a breakdown are left out."""
    require_columns(df, (*MEMORY_PARTS, "batch"), "memory breakdown figure")
    bars = _bars(df)
    if bars.empty:
        raise ParadnnError("memory breakdown figure: no ok row has memory_weights_bytes and "
                           "memory_activations_bytes (runs from before the breakdown existed?)")
    fig, (ax,) = _figure(width=max(6.4, 0.55 * len(bars) + 2))
    x = np.arange(len(bars))
    bottom = np.zeros(len(bars))
    for part in MEMORY_PARTS:
        gib = bars[part].to_numpy(float) / 2**30
        ax.bar(x, gib, bottom=bottom, color=_PART_COLORS[part], label=_PART_NAMES[part], width=0.8)
        bottom += gib
    share = bars["memory_activations_bytes"].to_numpy(float) / 2**30 / np.where(bottom > 0, bottom, np.nan)
    for xi, top, s in zip(x, bottom, share):
        if np.isfinite(s):
            ax.text(xi, top, f"{100 * s:.0f}%", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [f"{w} ({int(b)})" for w, b in zip(bars["workload"], bars["batch"])],
                  rotation=60, ha="right", fontsize=7)
    ax.set_xlabel("model (batch, examples)")
    ax.set_ylabel("memory per device (GiB)")
    ax.legend(fontsize=8, title="share above bars: feature maps", title_fontsize=7)
    ax.set_title(title or "Memory breakdown of a training step (compiled program, per device)")
    return fig


def energy(df: pd.DataFrame, title: str | None = None) -> Figure:
    """Average power (W) and energy per example (J/example) over the timed window against the
    batch, one line per model. Rows whose ``energy_source`` is ``unavailable`` are left out and
    counted in the title; with no measured row the error gives their reasons."""
    require_columns(df, (*_ENERGY_METRICS, "energy_source", "batch"), "energy figure")
    rows = ok_rows(df)
    measured = rows[(rows["energy_source"] != "unavailable") & rows["power_w"].notna()].copy()
    if measured.empty:
        notes = sorted({str(n) for n in rows.get("energy_note", pd.Series(dtype=object)).dropna()})
        raise ParadnnError("energy figure: no ok row has a measured energy (energy_source is "
                           f"unavailable); reasons recorded: {'; '.join(notes) or 'none'}")
    measured["workload"] = [workload_label(r) for _, r in measured.iterrows()]
    fig, axes = _figure(ncols=2, width=11, height=4.6)
    ylabels = {"power_w": "average power (W)", "energy_per_example_j": "energy per example (J/example)"}
    for ax, metric in zip(axes, _ENERGY_METRICS):
        for name, g in measured.groupby("workload", sort=True):
            g = g.groupby("batch")[metric].median().sort_index()
            ax.plot(g.index.to_numpy(float), g.to_numpy(float), marker="o", label=name)
        ax.set_xscale("log", base=2)
        if metric == "energy_per_example_j":
            ax.set_yscale("log")
        ax.set_xlabel("batch (examples)")
        ax.set_ylabel(ylabels[metric])
    axes[0].legend(fontsize=7)
    left_out = len(rows) - len(measured)
    sources = ", ".join(sorted(measured["energy_source"].astype(str).unique()))
    fig.suptitle((title or "Power and energy per example over the timed window")
                 + f" (source: {sources}" + (f"; {left_out} run(s) without energy left out)" if left_out else ")"))
    return fig
