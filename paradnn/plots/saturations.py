"""Batch-size saturation (as in the TBD benchmark suite): throughput relative to each model's
best against batch, from :func:`paradnn.analysis.saturation`."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from paradnn.analysis.columns import label
from paradnn.errors import ParadnnError
from paradnn.plots.style import marks_legend, new_figure, styled, tick_label

# One marker and line style per model: up to 12 x 4 models are told apart without colour.
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "p", "*")
LINESTYLES = ("-", "--", "-.", ":")

@styled
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
    fig, ax = new_figure(5.0 + 0.2 * math.ceil((len(models) + 2) / 2))
    # Words every model name shares (family, fixed hyperparameters) go to the title once.
    common = set.intersection(*(set(m.split()) for m in models))
    any_unstable = False
    for k, m in enumerate(models):
        c = curves[curves["model"] == m].sort_values("batch")
        # Offsets of a few percent in batch (log2 axis): coincident curves stay visible.
        shift = 2.0 ** (0.025 * (k - (len(models) - 1) / 2))
        short = " ".join(w for w in m.split() if w not in common) or m
        short = short if len(short) <= 70 else short[:67] + "..."
        color, marker = f"C{k % 10}", MODEL_MARKERS[k % len(MODEL_MARKERS)]
        bx = c["batch"].to_numpy(dtype=float) * shift
        fy = c["fraction_of_best"].to_numpy(dtype=float)
        shaky = c["unstable"].astype(bool).to_numpy() if "unstable" in c.columns else np.zeros(len(c), bool)
        any_unstable |= bool(shaky.any())
        ax.plot(bx, fy, color=color, linestyle=LINESTYLES[(k // 10) % 4], linewidth=1.4, alpha=0.85,
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
    ax.set_xticks(batches[::step], [tick_label(b) for b in batches[::step]])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("batch (examples, log2 scale)")
    metric = curves.attrs.get("metric", "examples_per_sec")
    ax.set_ylabel(f"{label(metric)} / model's best (fraction)")
    ax.set_ylim(0, 1.05)
    extra = [Line2D([], [], marker="D", linestyle="", color="0.6", markeredgecolor="black",
                    markersize=8, label=f"saturation batch (first >= {thr:.0%} of best)")]
    extra += marks_legend(any_unstable, False)
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
