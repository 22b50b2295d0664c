"""Bars of the standardized regression weights of :func:`paradnn.analysis.sensitivity`
(ParaDnn Fig 2d-f, 8a, 9a, 10a, 10d) with their bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from paradnn.analysis.columns import label
from paradnn.plots.style import new_figure, styled

@styled
def sensitivity(sens: pd.DataFrame, title: str | None = None) -> Figure:
    """Horizontal bars of the standardized regression weights of
    :func:`paradnn.analysis.sensitivity`, with the bootstrap confidence interval, R^2 and the
    number of unstable runs left out."""
    target = sens.attrs.get("target", "target")
    rows = sens.iloc[::-1]  # largest |weight| on top
    fig, ax = new_figure(0.42 * len(rows) + 2.0)
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
