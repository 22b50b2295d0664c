"""How long configurations take to measure, estimated from a store's own records.

Two measures per record:

- its *wall time*: the seconds since the previous record of the same host (records are stamped
  when they are written, one after the other in a sweep), which includes the process start,
  model initialization and everything else a config costs; a gap that is shorter than the
  record's own compile + timing, or longer by more than ``MAX_OVERHEAD_S``, is a pause between
  sessions and is not used;
- its *compile + timing*: the compile time plus the timing phase, i.e. the warm-up
  (``warmup_elapsed_s`` where the record has it, else ``warmup_calls`` calls) and the timed calls
  (``timed_calls`` x steps per call x the median step time). Without the start-up costs this
  is a lower bound.

:func:`estimate_seconds` uses the wall times where the store has them, else compile + timing.
Neither counts the sweep's own start (imports, a first peak probe).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from paradnn.analysis._common import PLATFORM_KEY, ok_rows, platform_label, present

DEFAULT_CONFIG_S = 30.0  # per config when the store has no record to learn from; stated as such
MAX_OVERHEAD_S = 120.0  # a gap longer than compile + timing + this is a pause, not a config


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    if col not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[col], errors="coerce")


def config_seconds(df: pd.DataFrame) -> pd.Series:
    """Seconds each ok record spent in compilation and timing (NaN where unknown)."""
    step = _num(df, "step_time_s")
    steps = _num(df, "steps_per_call_used").fillna(_num(df, "steps_per_call"))
    timed = _num(df, "timed_calls") * steps * step
    warm = _num(df, "warmup_elapsed_s").fillna(_num(df, "warmup_calls") * steps * step)
    out = _num(df, "compile_s") + timed + warm.fillna(0.0)
    return out.where(_num(df, "compile_s").notna() & timed.notna())


def wall_seconds(df: pd.DataFrame) -> pd.Series:
    """Seconds between each record and the previous record of the same host (NaN for the first,
    and where the gap is implausible for one config: see the module notes)."""
    out = pd.Series(np.nan, index=df.index, dtype=float)
    if "time_utc" not in df.columns or df.empty:
        return out
    t = pd.to_datetime(df["time_utc"], utc=True, errors="coerce", format="mixed")
    own = config_seconds(df)
    hosts = df["host"].fillna("") if "host" in df.columns else pd.Series("", index=df.index)
    for _, idx in t.groupby(hosts).groups.items():
        ts = t.loc[idx].dropna().sort_values()
        gap = ts.diff().dt.total_seconds()
        out.loc[gap.index] = gap
    low = own.fillna(0.0) * 0.99
    high = own.fillna(0.0) + MAX_OVERHEAD_S
    return out.where((out > 0) & (out >= low) & (out <= high))


def estimate_seconds(
    df: pd.DataFrame, n_configs: int, like: Mapping[str, Any] | None = None
) -> tuple[float, str]:
    """``(seconds, basis)``: the time to measure ``n_configs`` configurations like ``like``
    (column values, e.g. ``{"family": "fc", "dtype": "float32"}``) on the platform of the
    store's records.

    The per-config time is the median over the ok records that match ``like`` on the most
    columns (all of them, then dropping the last one, ...), on the store's most common
    platform, of their wall time (:func:`wall_seconds`) where at least one of them has one,
    else of their compile + timing (:func:`config_seconds`, a lower bound). Without any such
    record the default ``DEFAULT_CONFIG_S`` is used. ``basis`` says which records and which
    measure (or the default) the estimate rests on.
    """
    walls = wall_seconds(df) if len(df) else pd.Series(dtype=float)
    rows = ok_rows(df) if len(df) else df
    if len(rows):
        rows = rows.assign(_s=config_seconds(rows), _w=walls.loc[rows.index])
        rows = rows[rows["_s"].notna() | rows["_w"].notna()]
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
            what = " ".join(f"{c}={v}" for c, v in items[:k]) or "all"
            if sel["_w"].notna().any():
                per, n = float(sel["_w"].median()), int(sel["_w"].notna().sum())
                how = "wall time between consecutive records"
            else:
                per, n = float(sel["_s"].median()), int(sel["_s"].notna().sum())
                how = "compile + timing only, a lower bound"
            return per * n_configs, (f"median {per:.3g} s per config ({how}) of {n} {what} "
                                     f"records{where}")
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
