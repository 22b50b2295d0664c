"""A metric over two hyperparameters (ParaDnn Fig 2a-c, Fig 7), as one map or as small multiples:
one panel per value of every other configuration column that varies."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from paradnn.analysis.columns import (
    PLATFORM_KEY, SPEC_FIELDS, group_columns, require_columns, unit, unstable_mask, warning_lists,
)
from paradnn.analysis.framework import with_framework
from paradnn.errors import ParadnnError

FAILED = ("oom", "error", "timeout", "crashed")
MAX_PANELS = 12


def _sorted(values) -> list:
    # Numbers by value (4 before 16), anything else by its text; deterministic either way.
    try:
        return sorted(values, key=float)
    except (TypeError, ValueError):
        return sorted(values, key=str)


def _most_common(values: pd.Series):
    # The most common value keeps the largest grid; ties go to the upper median in sorted order
    # so the choice does not depend on the row order of the store.
    counts = values.value_counts()
    tied = _sorted(counts[counts == counts.max()].index)
    return tied[len(tied) // 2]


def _panel_order(rows: pd.DataFrame, names: list[str]) -> list[str]:
    # Settings (platform, dtype, software, optimizer) first: mixing them in one map is never
    # meant; then hyperparameters, fewest values first, so more of them fit in the panels.
    settings = [c for c in names if c not in SPEC_FIELDS]
    hyper = sorted((c for c in names if c in SPEC_FIELDS), key=lambda c: rows[c].nunique())
    return settings + hyper


def heatmap(
    df: pd.DataFrame,
    x: str,
    y: str,
    value: str,
    fixed: Mapping[str, Any] | None = None,
    panels: bool = False,
    max_panels: int = MAX_PANELS,
) -> pd.DataFrame:
    """One cell per (``x``, ``y``) pair: the median of ``value`` over ok rows, or the failure.

    ``fixed`` selects the rows first (``{"layers": 64, "family": "fc"}``, or
    ``{"framework": "torch"}``). Every other configuration column that still varies (another
    hyperparameter, dtype, framework, platform, software):

    - with ``panels=False``, is fixed to its most common value (ties: the upper median), so the
      result is one map;
    - with ``panels=True``, splits the result into small multiples, one panel per combination
      of its values present in the rows (settings first, then hyperparameters with the fewest
      values), as long as there are at most ``max_panels`` panels; columns beyond that are
      fixed as above.

    The values fixed are in ``attrs["fixed"]`` (those chosen here also in ``attrs["auto_fixed"]``).
    Rows of different frameworks are never one cell: ``framework`` is a setting like the dtype
    (a panel, or fixed), and rows without one (older stores) are JAX's.

    A cell's value is the median over its ok runs that are not unstable (``stable`` False); a
    cell with only unstable ok runs takes their median and is marked ``unstable``. Older stores
    without the ``stable`` column count as stable.

    Returns a tidy DataFrame with columns ``x``, ``y`` (named as given), ``value`` (named as
    given; NaN where no ok run), ``status`` (``ok``, or the failure of every run in the cell:
    ``oom`` first), ``n`` (rows in the cell), ``unstable`` (bool), ``warnings`` (the physics
    codes of the runs used, comma-separated, "" if none), and with ``panels=True`` ``panel``
    (0, 1, ...) plus the panel columns. ``attrs``: ``x``, ``y``, ``value``, ``unit`` (of
    ``value``), ``fixed``, ``auto_fixed``, ``panel_columns`` and ``panels`` (one dict of
    column values per panel).

    >>> hm = heatmap(df, "batch", "nodes", "examples_per_sec", fixed={"family": "fc"})
    >>> multiples = heatmap(df[df.family == "fc"], "batch", "nodes", "examples_per_sec", panels=True)
    """
    require_columns(df, (x, y, value), "heatmap")
    if x == y:
        raise ParadnnError(f"heatmap: x and y are both {x!r}; allowed: two different columns")
    if max_panels < 1:
        raise ParadnnError(f"heatmap: max_panels={max_panels!r}; allowed: an integer >= 1")
    fixed = dict(fixed or {})
    # Rows without a framework are JAX's: they must not average with another framework's.
    rows = df = with_framework(df)
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
    rows = rows.reset_index(drop=True)  # cells are looked up by label: labels must be unique

    names = [c for c in group_columns(rows, exclude=(x, y, *fixed)) if rows[c].dropna().nunique() > 1]
    split: list[str] = []
    if panels:
        for name in _panel_order(rows, names):
            trial = split + [name]
            # Platform columns vary together: count the combinations present, not the product.
            if len(rows[trial].drop_duplicates()) <= max_panels:
                split.append(name)
        # A platform is one panel axis: take its columns together or not at all.
        plat = [c for c in PLATFORM_KEY if c in names]
        if any(c in split for c in plat) and not all(c in split for c in plat):
            together = [c for c in split if c not in plat] + plat
            split = together if len(rows[together].drop_duplicates()) <= max_panels else \
                [c for c in split if c not in plat]
    auto: dict[str, Any] = {}
    # Platform, software and training settings first, so that the hyperparameters are chosen
    # among the rows of one setting.
    for name in _panel_order(rows, [c for c in names if c not in split]):
        values = rows[name].dropna()
        if values.nunique() <= 1:
            continue
        auto[name] = _most_common(values)
        rows = rows[rows[name] == auto[name]]
    split = [c for c in split if rows[c].dropna().nunique() > 1]

    status = rows["status"] if "status" in rows.columns else pd.Series("ok", index=rows.index)
    unstable = unstable_mask(rows)
    codes = warning_lists(rows)
    panel_keys = (
        list(rows[split].drop_duplicates().sort_values(split, key=_sort_key).itertuples(index=False, name=None))
        if split else [()]
    )
    cells = []
    for p, key in enumerate(panel_keys):
        prow = rows
        for c, v in zip(split, key):
            prow = prow[prow[c] == v] if pd.notna(v) else prow[prow[c].isna()]
        for (xv, yv), cell in prow.groupby([x, y], sort=True):
            cell_status = status.loc[cell.index]
            ok = cell_status == "ok"
            steady = ok & ~unstable.loc[cell.index]
            use = steady if steady.any() else ok
            values = pd.to_numeric(cell.loc[use, value], errors="coerce").dropna()
            if len(values):
                st, v = "ok", float(values.median())
                used = values.index
            else:
                failures = [s for s in FAILED if (cell_status == s).any()]
                st, v, used = (failures[0] if failures else "ok"), float("nan"), cell.index[:0]
            rec = {x: xv, y: yv, value: v, "status": st, "n": len(cell),
                   "unstable": bool(len(used)) and not steady.any(),
                   "warnings": ",".join(sorted({c for cs in codes.loc[used] for c in cs}))}
            if split:
                rec.update(panel=p, **dict(zip(split, key)))
            cells.append(rec)
    cols = [x, y, value, "status", "n", "unstable", "warnings"] + (["panel", *split] if split else [])
    out = pd.DataFrame(cells, columns=cols)
    out.attrs.update(
        x=x, y=y, value=value, unit=unit(value), fixed={**fixed, **auto}, auto_fixed=sorted(auto),
        panel_columns=split, panels=[dict(zip(split, k)) for k in panel_keys] if split else [],
    )
    return out


def _sort_key(s: pd.Series) -> pd.Series:
    # Numeric columns by value, others by text (dtype, device kind).
    num = pd.to_numeric(s, errors="coerce")
    return num if num.notna().all() else s.astype(str)
