"""A metric over two hyperparameters with the others fixed (ParaDnn Fig 2a-c, Fig 7)."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from paradnn.analysis._common import SPEC_FIELDS, group_columns, require_columns, unit
from paradnn.errors import ParadnnError

FAILED = ("oom", "error", "timeout", "crashed")


def _sorted(values) -> list:
    # Numbers by value (4 before 16), anything else by its text; deterministic either way.
    try:
        return sorted(values, key=float)
    except (TypeError, ValueError):
        return sorted(values, key=str)


def heatmap(
    df: pd.DataFrame,
    x: str,
    y: str,
    value: str,
    fixed: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """One cell per (``x``, ``y``) pair: the median of ``value`` over ok rows, or the failure.

    ``fixed`` selects the rows first (``{"layers": 64, "family": "fc"}``). Every other
    configuration column that still varies (another hyperparameter, dtype, platform, software)
    is then fixed to its most common value (ties: the upper median), so each cell is one configuration; the values used
    are in ``result.attrs["fixed"]`` (those chosen here also in ``attrs["auto_fixed"]``).

    Returns a tidy DataFrame with columns ``x``, ``y`` (named as given), ``value`` (named as
    given; NaN where no ok run), ``status`` (``ok``, or the failure of every run in the cell:
    ``oom`` first), and ``n`` (rows in the cell). ``attrs`` holds ``x``, ``y``, ``value``,
    ``unit`` (of ``value``) and ``fixed``.

    >>> hm = heatmap(df, "batch", "nodes", "examples_per_sec", fixed={"family": "fc"})
    """
    require_columns(df, (x, y, value), "heatmap")
    if x == y:
        raise ParadnnError(f"heatmap: x and y are both {x!r}; allowed: two different columns")
    fixed = dict(fixed or {})
    rows = df
    for name, wanted in fixed.items():
        require_columns(rows, (name,), "heatmap fixed")
        rows = rows[rows[name] == wanted]
        if rows.empty:
            raise ParadnnError(
                f"heatmap: no rows with fixed {name}={wanted!r}; values present: "
                f"{sorted(map(str, df[name].dropna().unique()))}"
            )
    rows = rows[rows[x].notna() & rows[y].notna()]
    if "status" in rows.columns:
        rows = rows[rows["status"].isin(("ok", *FAILED))]
    if rows.empty:
        raise ParadnnError(f"heatmap: no rows have both {x!r} and {y!r}")

    auto: dict[str, Any] = {}
    # Platform, software and training settings first, so that the hyperparameters are chosen
    # among the rows of one setting.
    names = group_columns(rows, exclude=(x, y, *fixed))
    settings = [c for c in names if c not in SPEC_FIELDS]
    for name in settings + [c for c in names if c in SPEC_FIELDS]:
        values = rows[name].dropna()
        if values.nunique() <= 1:
            continue
        # The most common value keeps the largest grid; ties go to the first in sorted order
        # so the choice does not depend on the row order of the store.
        counts = values.value_counts()
        tied = _sorted(counts[counts == counts.max()].index)
        best = tied[len(tied) // 2]  # upper median of the tied values
        auto[name] = best
        rows = rows[rows[name] == best]

    status = rows["status"] if "status" in rows.columns else pd.Series("ok", index=rows.index)
    cells = []
    for (xv, yv), cell in rows.groupby([x, y], sort=True):
        cell_status = status.loc[cell.index]
        ok = cell.loc[cell_status == "ok", value]
        ok = pd.to_numeric(ok, errors="coerce").dropna()
        if len(ok):
            st, v = "ok", float(ok.median())
        else:
            failures = [s for s in FAILED if (cell_status == s).any()]
            st, v = (failures[0] if failures else "ok"), float("nan")
        cells.append({x: xv, y: yv, value: v, "status": st, "n": len(cell)})
    out = pd.DataFrame(cells, columns=[x, y, value, "status", "n"])
    out.attrs.update(
        x=x, y=y, value=value, unit=unit(value), fixed={**fixed, **auto}, auto_fixed=sorted(auto)
    )
    return out
