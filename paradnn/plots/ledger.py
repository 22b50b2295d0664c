"""Figures of the time ledger (docs/ledger.md): a stacked bar per config, share maps over two
hyperparameters with what limits each cell, and the sensitivity of each part (ParaDnn Fig 7's
method applied to causes)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from paradnn.analysis.columns import unstable_mask, workload_label
from paradnn.analysis.ledger import share_column
from paradnn.errors import ParadnnError
from paradnn.plots.style import MIN_FONT_PT, PAGE_WIDTH_IN, PlotFigure, new_figure, styled
from paradnn.record import LEDGER_PARTS

#: One colour per part, the same in every ledger figure: useful work green, losses warm to grey.
PART_COLORS = {
    "useful": "#2ca02c", "extra": "#98df8a", "memory": "#1f77b4", "below_roof": "#ff7f0e",
    "communication": "#9467bd", "input": "#8c564b", "outside": "#7f7f7f", "overlap": "#d3d3d3",
}
#: Bars drawn at most (the shortest and longest steps and those between, spread): more do not read.
MAX_BARS = 40


def _label(part: str) -> str:
    return LEDGER_PARTS[part][0]


@styled
def ledger_bars(frame: pd.DataFrame, title: str | None = None) -> Figure:
    """One horizontal bar per run of :func:`paradnn.analysis.ledger.ledger_frame`: its parts as
    shares of its step time, stacked from 0 to 1 (the overlap, negative, left of 0), runs sorted
    by step time; at most :data:`MAX_BARS` runs, spread over that order."""
    if frame.empty:
        raise ParadnnError("plots.ledger_bars: no run with a ledger")
    rows = frame.sort_values("step_time_s").reset_index(drop=True)
    if len(rows) > MAX_BARS:
        rows = rows.iloc[np.unique(np.linspace(0, len(rows) - 1, MAX_BARS).round().astype(int))]
    height = max(2.5, 0.22 * len(rows) + 1.2)
    fig, ax = new_figure(height)
    y = np.arange(len(rows))
    left_pos, left_neg = np.zeros(len(rows)), np.zeros(len(rows))
    for part in LEDGER_PARTS:
        v = rows[share_column(part)].fillna(0.0).to_numpy(dtype=float)
        if not np.any(v):
            continue
        pos = np.where(v > 0, v, 0.0)
        neg = np.where(v < 0, v, 0.0)
        ax.barh(y, pos, left=left_pos, color=PART_COLORS[part], label=_label(part), height=0.8)
        if np.any(neg):
            ax.barh(y, neg, left=left_neg, color=PART_COLORS[part], height=0.8, hatch="//",
                    label=None if np.any(pos) else _label(part))
        left_pos += pos
        left_neg += neg
    # Runs whose timing missed its precision target are named so (their step time is noisy).
    shaky = unstable_mask(rows)
    names = [f"{workload_label(r)} batch {int(r['batch'])}  ({r['step_time_s'] * 1e3:.3g} ms"
             + (", unstable)" if shaky.loc[i] else ")") for i, r in rows.iterrows()]
    ax.set_yticks(y, names, fontsize=MIN_FONT_PT)
    for tick, bad in zip(ax.get_yticklabels(), shaky):
        if bad:
            tick.set_color("dimgray")
            tick.set_fontstyle("italic")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("share of the measured step time (1 = the step; parts add up to it)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="part")
    ax.set_title(title or "Where each config's step time goes (time ledger)")
    return fig


def _grid(frame: pd.DataFrame, x: str, y: str, column: str) -> tuple[list, list, np.ndarray]:
    xs = sorted(pd.to_numeric(frame[x]).dropna().unique())
    ys = sorted(pd.to_numeric(frame[y]).dropna().unique())
    cells = np.full((len(ys), len(xs)), np.nan)
    med = frame.groupby([y, x])[column].median()
    for (yv, xv), v in med.items():
        cells[ys.index(yv), xs.index(xv)] = v
    return xs, ys, cells


@styled
def ledger_maps(frame: pd.DataFrame, x: str, y: str, title: str | None = None) -> Figure:
    """Small multiples over two hyperparameters ``x`` and ``y`` of the runs of
    :func:`paradnn.analysis.ledger.ledger_frame` (one figure per family; other columns as the
    caller selected them): the first panel names the largest part of each cell's median ledger
    (what limits that config), then one panel per part that is non-zero somewhere, its median
    share of the step time (0 to 1, labelled in percent)."""
    for c in (x, y):
        if c not in frame.columns or frame[c].isna().all():
            raise ParadnnError(f"plots.ledger_maps: the runs have no {c!r}")
    parts = [p for p in LEDGER_PARTS if p != "overlap" and frame[share_column(p)].fillna(0).abs().max() > 0.005]
    n = len(parts) + 1
    ncols = min(4, n)
    nrows = -(-n // ncols)
    fig = PlotFigure(figsize=(PAGE_WIDTH_IN, 2.6 * nrows + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(n)]
    shares = {p: _grid(frame, x, y, share_column(p)) for p in parts}
    xs, ys, _ = shares[parts[0]] if parts else _grid(frame, x, y, "step_time_s")
    # What limits each cell: the part with the largest median share.
    stack = np.stack([shares[p][2] for p in parts]) if parts else np.zeros((1, len(ys), len(xs)))
    filled = np.where(np.isnan(stack), -np.inf, stack)
    best = np.argmax(filled, axis=0)
    ax = axes[0]
    for i in range(len(ys)):
        for j in range(len(xs)):
            if not np.isfinite(filled[:, i, j]).any():
                continue
            part = parts[best[i, j]]
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, color=PART_COLORS[part]))
            ax.text(j, i, _label(part).split(" ")[0], ha="center", va="center", fontsize=MIN_FONT_PT)
    ax.set_title("largest part (what limits it)")
    for ax_, part in zip(axes[1:], parts):
        im = ax_.imshow(shares[part][2], origin="lower", vmin=0, vmax=1, cmap="magma_r", aspect="auto")
        for i in range(len(ys)):
            for j in range(len(xs)):
                v = shares[part][2][i, j]
                if v == v:
                    ax_.text(j, i, f"{v:.0%}", ha="center", va="center", fontsize=MIN_FONT_PT,
                             color="white" if v > 0.5 else "black")
        ax_.set_title(_label(part))
    for ax_ in axes:
        ax_.set_xlim(-0.5, len(xs) - 0.5)
        ax_.set_ylim(-0.5, len(ys) - 0.5)
        ax_.set_xticks(range(len(xs)), [f"{v:g}" for v in xs])
        ax_.set_yticks(range(len(ys)), [f"{v:g}" for v in ys])
        ax_.set_xlabel(x)
        ax_.set_ylabel(y)
    if parts:
        fig.colorbar(im, ax=axes[1:], label="share of the step time", shrink=0.8)
    fig.suptitle(title or f"Time ledger over {x} and {y}: median share of the step time per cell")
    return fig


@styled
def ledger_sensitivity(sens: pd.DataFrame, title: str | None = None) -> Figure:
    """The weights of :func:`paradnn.analysis.ledger.part_sensitivity` as a matrix, one row per
    part and one column per hyperparameter (blue: the share grows with the hyperparameter, red:
    it falls), each cell labelled with its weight."""
    if sens.empty:
        raise ParadnnError("plots.ledger_sensitivity: no weights")
    parts = [p for p in LEDGER_PARTS if p in set(sens["part"])]
    feats = list(dict.fromkeys(sens["feature"]))
    m = np.full((len(parts), len(feats)), np.nan)
    for r in sens.itertuples():
        m[parts.index(r.part), feats.index(r.feature)] = r.weight
    fig, ax = new_figure(0.45 * len(parts) + 1.6)
    lim = max(np.nanmax(np.abs(m)), 1e-9)
    im = ax.imshow(m, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
    for i in range(len(parts)):
        for j in range(len(feats)):
            if m[i, j] == m[i, j]:
                ax.text(j, i, f"{m[i, j]:+.2f}", ha="center", va="center", fontsize=MIN_FONT_PT)
    ax.set_xticks(range(len(feats)), [f"log2 {f}" for f in feats])
    ax.set_yticks(range(len(parts)), [_label(p) for p in parts])
    fig.colorbar(im, ax=ax, label="weight (share SDs per SD)")
    ax.set_title(title or "Sensitivity of each ledger part's share to the hyperparameters (Fig 7 method)")
    return fig
