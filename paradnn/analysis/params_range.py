"""Ranges of a value per model family, real models as points (ParaDnn Fig 1 and Fig 11)."""

from __future__ import annotations

import pandas as pd

from paradnn import families
from paradnn.analysis.columns import drop_unstable, ok_rows, require_columns, unit, unstable_mask


def _group_label(row: pd.Series) -> str:
    # A family is split by its structural choice (its registry ``variant``: CNN block, RNN
    # cell), as in the paper's Fig 11 and 12.
    family = str(row.get("family", "?"))
    variant = families.get(family).variant if family in families.names() else None
    name = families.display_name(family)
    if variant and isinstance(row.get(variant), str):
        return f"{name} {row[variant]}"
    return name


def family_ranges(df: pd.DataFrame, value: str, by: str | None = None,
                  include_unstable: bool = False) -> pd.DataFrame:
    """Summary of ``value`` per family (generated models) and per real model.

    Generated models (``kind`` != ``real``) are grouped by family and its variant (CNN block,
    RNN cell); each real model is its own group. Uses the rows that hold the value (ok rows
    when there is a ``status`` column). ``by`` adds a grouping column (e.g. ``device_kind``).
    Runs whose timing missed its precision target (``stable`` False) are left out unless
    ``include_unstable``.

    Returns ``DataFrame[by?, label, kind, n, n_unstable, min, p10, median, p90, max]``; ``kind``
    is ``generated`` or ``real``; ``n_unstable`` counts the group's unstable runs (0 unless
    ``include_unstable``). ``attrs``: ``value``, ``unit``, ``unstable_excluded``.
    """
    require_columns(df, (value,), "family_ranges")
    rows, n_unstable = drop_unstable(ok_rows(df), include_unstable)
    rows = rows.assign(_v=pd.to_numeric(rows[value], errors="coerce"))
    rows = rows[rows["_v"].notna()]
    if by is not None:
        require_columns(rows, (by,), "family_ranges by")
    kind = rows["kind"] if "kind" in rows.columns else pd.Series("generated", index=rows.index)
    real = (kind == "real") | (rows.get("family", pd.Series(index=rows.index, dtype=object)) == "real")
    labels = pd.Series(
        [str(r.get("model")) if is_real else _group_label(r)
         for (_, r), is_real in zip(rows.iterrows(), real)],
        index=rows.index, dtype=object,
    )
    rows = rows.assign(_label=labels, _kind=real.map({True: "real", False: "generated"}))
    keys = ([by] if by else []) + ["_kind", "_label"]
    out = []
    for key, g in rows.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        v = g["_v"]
        rec = dict(zip(([by] if by else []) + ["kind", "label"], key))
        rec.update(n=len(v), n_unstable=int(unstable_mask(g).sum()), min=v.min(), p10=v.quantile(0.1), median=v.median(),
                   p90=v.quantile(0.9), max=v.max())
        out.append(rec)
    cols = ([by] if by else []) + ["label", "kind", "n", "n_unstable", "min", "p10", "median", "p90", "max"]
    result = pd.DataFrame(out, columns=cols)
    # Generated families first, then real models by size, as the paper orders Fig 1.
    result = result.sort_values(["kind", "median"], key=lambda s: s.map({"generated": 0, "real": 1})
                                if s.name == "kind" else s).reset_index(drop=True)
    result.attrs.update(value=value, unit=unit(value), by=by, unstable_excluded=n_unstable)
    return result


def params_range(df: pd.DataFrame) -> pd.DataFrame:
    """Trainable parameters per family (range) and per real model (point), ParaDnn Fig 1.

    A model's parameter count does not depend on batch, platform or timing noise, so every ok
    row counts (unstable ones too).
    """
    return family_ranges(df, "params", include_unstable=True)
