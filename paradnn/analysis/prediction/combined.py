"""Measured and predicted configs together, marked, for the figures asked to show both; every
other analysis reads measured rows only."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from paradnn.analysis.columns import PLATFORM_KEY, ok_rows
from paradnn.analysis.heatmap import heatmap
from paradnn.errors import ParadnnError
from paradnn.record import PREDICTED


def predicted_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` that are predictions (``status == "predicted"``), the latest one per
    config and platform when a config was predicted several times."""
    if "status" not in df.columns:
        return df.iloc[0:0]
    rows = df[df["status"] == PREDICTED]
    ident = [c for c in ("workload_key", *PLATFORM_KEY) if c in rows.columns]
    if len(rows) and "time_utc" in rows.columns and ident:
        rows = rows.sort_values("time_utc").drop_duplicates(ident, keep="last")
    return rows


def completed(df: pd.DataFrame, value: str = "examples_per_sec") -> pd.DataFrame:
    """Measured and predicted configs in one frame, **marked**: the ``ok`` rows with their
    measured ``value`` and ``source = "measured"``, then the predicted configs not measured with
    ``value`` taken from ``predicted_<value>`` and ``source = "predicted"``. For figures that
    are asked to show both (the completed heat map); every other analysis uses measured rows
    only."""
    if value not in ("examples_per_sec", "step_time_s"):
        raise ParadnnError(f"completed: value={value!r}; allowed: examples_per_sec, step_time_s")
    meas = ok_rows(df).assign(source="measured")
    pred = predicted_rows(df)
    if len(pred) and "workload_key" in pred.columns and "workload_key" in meas.columns:
        plat = [c for c in PLATFORM_KEY if c in df.columns]
        have = set(map(tuple, meas[["workload_key", *plat]].astype(str).to_numpy()))
        ident = pred[["workload_key", *plat]].astype(str).to_numpy()
        pred = pred[[tuple(r) not in have for r in ident]]
    pred = pred.assign(source="predicted", status="ok")
    pred[value] = pred[f"predicted_{value}"]
    return pd.concat([meas, pred], ignore_index=True)


def completed_heatmap(df: pd.DataFrame, x: str, y: str, value: str = "examples_per_sec",
                      fixed: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """:func:`paradnn.analysis.heatmap` of :func:`completed` rows (one map, ``panels`` off):
    measured cells and predicted ones, with a ``source`` column (``measured`` where the cell
    has a measured ``ok`` run, else ``predicted``)."""
    both = completed(df, value)
    hm = heatmap(both, x, y, value, fixed=fixed)
    meas = both[both["source"] == "measured"]
    for col, v in hm.attrs["fixed"].items():
        if col in meas.columns:
            meas = meas[meas[col] == v]
    seen = {(float(a), float(b)) for a, b in zip(meas[x], meas[y])} if len(meas) else set()
    hm["source"] = ["measured" if (float(a), float(b)) in seen else "predicted"
                    for a, b in zip(hm[x], hm[y])]
    return hm
