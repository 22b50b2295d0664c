"""The infeed figure (like ParaDnn's Figure 5): throughput and infeed-bound fraction against the
number of host workers, synthetic device batches against the real host pipeline.

Takes the table of :func:`paradnn.experiments.infeed.summarize` (or infeed rows of a store) and returns a
matplotlib Figure on an Agg canvas (no pyplot state); every axis label carries its unit. Rows
measured with the host's CPU as the device say so in the title.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from paradnn.errors import ParadnnError
from paradnn.plots.style import PAGE_WIDTH_IN, PlotFigure

_DEVICE_IS_HOST = " [device = host CPU: not an accelerator infeed measurement]"


def infeed(table: pd.DataFrame, title: str | None = None) -> Figure:
    """Two panels over host workers (count): top, examples/s of the pipeline feed (one line per
    model and dtype) with the synthetic feed's as a dashed level; bottom, the infeed-bound
    fraction (time the device waited for input over step time) of both feeds."""
    needed = ("feed", "workers", "examples_per_sec", "infeed_bound_fraction")
    missing = [c for c in needed if c not in table.columns]
    if missing or table.empty:
        raise ParadnnError("infeed plot: needs a non-empty frame with columns " + ", ".join(needed)
                           + (f"; missing {', '.join(missing)}" if missing else ""))
    ok = table[table["status"] == "ok"] if "status" in table.columns else table
    if ok.empty:
        raise ParadnnError("infeed plot: no row with status ok")
    fig = PlotFigure(figsize=(PAGE_WIDTH_IN, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    keys = [c for c in ("model", "dtype", "batch") if c in ok.columns]
    pipeline = ok[ok["feed"] == "pipeline"]
    workers = np.asarray(sorted(pipeline["workers"].dropna().unique()), dtype=float)
    span = (workers.min(), workers.max()) if workers.size else (1.0, 1.0)
    groups = ok.groupby(keys, dropna=False, sort=True) if keys else [((), ok)]
    for i, (key, g) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{k} {v}" for k, v in zip(keys, key) if v is not None and v == v)
        color = f"C{i}"
        p = g[g["feed"] == "pipeline"].sort_values("workers")
        s = g[g["feed"] == "synthetic"]
        if not p.empty:
            top.plot(p["workers"], p["examples_per_sec"], marker="o", color=color,
                     label=f"JPEG pipeline ({name})")
            bottom.plot(p["workers"], p["infeed_bound_fraction"], marker="o", color=color,
                        label=f"JPEG pipeline ({name})")
        if not s.empty:
            level = float(s["examples_per_sec"].iloc[0])
            top.hlines(level, *span, colors=color, linestyles="--",
                       label=f"synthetic, on the device ({name})")
            bottom.hlines(float(s["infeed_bound_fraction"].iloc[0]), *span, colors=color,
                          linestyles="--", label=f"synthetic ({name})")
    if workers.size:
        top.set_xscale("log", base=2)
        top.set_xticks(workers, [str(int(w)) for w in workers])
    top.set_ylabel("throughput [examples/s]")
    top.set_ylim(0, 1.25 * float(ok["examples_per_sec"].max()))  # room for the legend above the lines
    top.legend(fontsize=8)
    bottom.set_ylabel("infeed-bound [fraction of step time]")
    bottom.set_xlabel("host input workers [count] (parallel decode calls and threads)")
    bottom.set_ylim(0, 1)
    bottom.legend(fontsize=8)
    host = "device_is_host" in ok.columns and bool(ok["device_is_host"].fillna(False).astype(bool).any())
    top.set_title((title or "Host infeed: synthetic batches vs JPEG input pipeline")
                  + (_DEVICE_IS_HOST if host else ""), fontsize=9)
    return fig
