"""Figures of the system experiments: scaling, collective bandwidth, ops on the roofline.

Like every :mod:`paradnn.plots` figure, each function takes an analysis output and returns a matplotlib Figure
on an Agg canvas (no pyplot state); every axis label carries its unit. Figures of rows measured
on simulated devices (one CPU host) say so in their title.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from paradnn.errors import ParadnnError
from paradnn.plots.style import new_figure
from paradnn.experiments.scaling import amdahl_speedup

_SIMULATED = " [simulated devices: not a multi-device measurement]"


def _need(df: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing or df.empty:
        raise ParadnnError(f"{what}: needs a non-empty frame with columns {', '.join(columns)}"
                           + (f"; missing {', '.join(missing)}" if missing else ""))


def _simulated(df: pd.DataFrame) -> bool:
    return "simulated_devices" in df.columns and bool(df["simulated_devices"].fillna(False).astype(bool).any())


def scaling(table: pd.DataFrame, serial_fraction: float | None = None, title: str | None = None) -> Figure:
    """Speedup against devices on log-log axes, one line per mode (the table of
    :func:`paradnn.experiments.scaling.summarize`), with the linear reference (speedup = devices) and, when
    given, the Amdahl curve of the fitted serial fraction (like ParaDnn Fig 4)."""
    _need(table, ("mode", "devices", "speedup"), "scaling plot")
    fig, ax = new_figure(6.0)
    d_all = np.asarray(sorted(table["devices"].unique()), dtype=float)
    ax.plot(d_all, d_all, color="gray", linestyle="--", label="linear (ideal)")
    for mode, g in table.groupby("mode", sort=False):
        g = g.sort_values("devices")
        ax.plot(g["devices"], g["speedup"], marker="o", label=f"{mode} scaling")
    if serial_fraction is not None and np.isfinite(serial_fraction):
        grid = np.geomspace(d_all.min(), d_all.max(), 50)
        ax.plot(grid, amdahl_speedup(grid, serial_fraction), color="black", linewidth=0.8,
                label=f"Amdahl, serial fraction {serial_fraction:.3g}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("devices [count]")
    ax.set_ylabel("speedup over one device [x] (global examples/s ratio)")
    ax.legend()
    ax.set_title((title or "Scaling") + (_SIMULATED if _simulated(table) else ""), fontsize=9)
    return fig


def bandwidth(rows: pd.DataFrame, which: str = "busbw_bytes_per_sec", title: str | None = None) -> Figure:
    """Bandwidth (B/s) against message size (B), one line per collective and device count
    (collective rows of :mod:`paradnn.experiments.collectives`); ``which`` is ``busbw_bytes_per_sec`` (NCCL-tests
    bus bandwidth) or ``algbw_bytes_per_sec``."""
    if which not in ("busbw_bytes_per_sec", "algbw_bytes_per_sec"):
        raise ParadnnError(f"bandwidth plot: which={which!r}; allowed: busbw_bytes_per_sec, algbw_bytes_per_sec")
    _need(rows, ("collective", "devices", "size_bytes", which), "bandwidth plot")
    ok = rows[rows["status"] == "ok"] if "status" in rows.columns else rows
    fig, ax = new_figure(6.0)
    for (collective, n), g in ok.groupby(["collective", "devices"], sort=True):
        g = g.sort_values("size_bytes")
        ax.plot(g["size_bytes"], g[which], marker=".", label=f"{collective}, {int(n)} devices")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size [B] (NCCL-tests convention)")
    ax.set_ylabel(("bus" if which.startswith("bus") else "algorithm") + " bandwidth [B/s]")
    ax.legend(fontsize=7)
    ax.set_title((title or "Collective bandwidth") + (_SIMULATED if _simulated(ok) else ""), fontsize=9)
    return fig


def ops_roofline(points: pd.DataFrame, title: str | None = None) -> Figure:
    """Op and model points on the roofline (the frame of :func:`paradnn.experiments.ops.roofline_points`):
    achieved FLOP/s against arithmetic intensity, the roof of each device and dtype drawn from
    the rows' peaks. Rows whose peaks are unknown (not positive numbers: a host with no usable
    probe) have no roof: the title says how many, and with no roof at all the figure is titled
    as what it is ("operators and models: arithmetic intensity and achieved FLOP/s")."""
    _need(points, ("point", "label", "arithmetic_intensity", "flops_per_sec", "roof_peak_flops",
                   "roof_peak_bytes_per_sec"), "ops roofline plot")
    fig, ax = new_figure(6.0)
    x = pd.to_numeric(points["arithmetic_intensity"])
    lo, hi = float(x.min()) / 4, float(x.max()) * 4
    grid = np.geomspace(lo, hi, 100)
    peaks = points[["roof_peak_flops", "roof_peak_bytes_per_sec"]].apply(pd.to_numeric, errors="coerce")
    known = (np.isfinite(peaks) & (peaks > 0)).all(axis=1)
    for (pf, pb), _ in peaks[known].groupby(["roof_peak_flops", "roof_peak_bytes_per_sec"]):
        ax.plot(grid, np.minimum(pf, grid * pb), color="gray", linewidth=1)
    models = points[points["point"] == "model"]
    if not models.empty:
        ax.scatter(models["arithmetic_intensity"], models["flops_per_sec"], s=12, color="tab:blue",
                   alpha=0.6, label="models")
    for lab, g in points[points["point"] == "op"].groupby("label"):
        ax.scatter(g["arithmetic_intensity"], g["flops_per_sec"], marker="^", s=30, label=str(lab))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity [FLOP/B]")
    ax.set_ylabel("achieved [FLOP/s]")
    ax.legend(fontsize=7)
    unknown = int((~known).sum())
    if not known.any():
        default = ("Operators and models: arithmetic intensity and achieved FLOP/s\n(no roof: "
                   "no row carries its device's peak FLOP/s and bandwidth)")
    else:
        default = "Operators and models on the roofline" + (
            f"\n({unknown} of {len(points)} points have no roof: their device's peaks are unknown)"
            if unknown else "")
    ax.set_title(title or default, fontsize=9)
    return fig
