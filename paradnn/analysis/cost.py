"""How long configurations take to measure, estimated from a store's own records.

A record's cost is its compile time plus its timing phase: the warm-up (``warmup_s`` where the
record has it, else ``warmup_calls`` calls) and the timed calls (``timed_calls`` x steps per
call x the median step time). Process start and model initialization are not in the records,
so the estimate is a lower bound of the wall time.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from paradnn.analysis._common import PLATFORM_KEY, ok_rows, platform_label, present

DEFAULT_CONFIG_S = 30.0  # per config when the store has no record to learn from; stated as such


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    if col not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[col], errors="coerce")


def config_seconds(df: pd.DataFrame) -> pd.Series:
    """Seconds each ok record spent in compilation and timing (NaN where unknown)."""
    step = _num(df, "step_time_s")
    steps = _num(df, "steps_per_call_used").fillna(_num(df, "steps_per_call"))
    timed = _num(df, "timed_calls") * steps * step
    warm = _num(df, "warmup_s").fillna(_num(df, "warmup_calls") * steps * step)
    out = _num(df, "compile_s") + timed + warm.fillna(0.0)
    return out.where(_num(df, "compile_s").notna() & timed.notna())


def estimate_seconds(
    df: pd.DataFrame, n_configs: int, like: Mapping[str, Any] | None = None
) -> tuple[float, str]:
    """``(seconds, basis)``: the time to measure ``n_configs`` configurations like ``like``
    (column values, e.g. ``{"family": "fc", "dtype": "float32"}``) on the platform of the
    store's records.

    The per-config time is the median of :func:`config_seconds` over the ok records that match
    ``like`` on the most columns (all of them, then dropping the last one, ...), on the store's
    most common platform. Without any such record the default ``DEFAULT_CONFIG_S`` is used.
    ``basis`` says which records (or the default) the estimate rests on.
    """
    rows = ok_rows(df) if len(df) else df
    rows = rows.assign(_s=config_seconds(rows)) if len(rows) else rows
    rows = rows[rows["_s"].notna()] if len(rows) else rows
    where = ""
    if len(rows) and present(rows, PLATFORM_KEY):
        labels = rows.apply(platform_label, axis=1)
        plat = labels.value_counts().index[0]
        rows, where = rows[labels == plat], f" on {plat}"
    items = [(k, v) for k, v in (like or {}).items() if v is not None]
    for k in range(len(items), -1, -1):
        sel = rows
        for col, v in items[:k]:
            sel = sel[sel[col] == v] if col in sel.columns else sel.iloc[0:0]
        if len(sel):
            per = float(sel["_s"].median())
            what = " ".join(f"{c}={v}" for c, v in items[:k]) or "all"
            return per * n_configs, (f"median {per:.3g} s per config (compile + timing) of "
                                     f"{len(sel)} {what} records{where}")
    return DEFAULT_CONFIG_S * n_configs, (f"default {DEFAULT_CONFIG_S:g} s per config: the store "
                                          "has no timed records to learn from")


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.2 h``: a duration as a person reads it."""
    if not np.isfinite(seconds):
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
