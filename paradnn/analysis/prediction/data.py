"""The training table of a fit: which rows are measurements, the closed-form sizes of each
config, one row per config, the groups; and the constants the whole model shares."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from paradnn import sizes
from paradnn.analysis.columns import (
    FAMILY_FIELDS, PLATFORM_KEY, WORKLOAD_FIELDS, drop_unstable, ok_rows, platform_label,
)
from paradnn.errors import ParadnnError
from paradnn.workload import Workload, spec_from_dict


#: One model per group: a platform, a framework, a dtype and a family.
GROUP_KEY: tuple[str, ...] = (*PLATFORM_KEY, "framework", "dtype", "family")


#: Analytic sizes every row needs, fitted or predicted (``paradnn.sizes.config_sizes`` names).
SIZE_COLUMNS: tuple[str, ...] = ("model_flops_per_step", "params", "state_bytes",
                                 "activation_bytes", "batch_bytes")


#: Nominal coverage of the prediction intervals.
DEFAULT_LEVEL = 0.9


#: Folds of the cross-validation that calibrates the intervals (fewer with fewer configs).
FOLDS = 5


#: Fewest configs a group needs: the roofline term has three parameters, and one more config
#: is left to check them on.
MIN_CONFIGS = 4


#: Neighbours whose residuals set a config's local difficulty.
NEIGHBOURS = 5


#: Calibrate the intervals on leave-one-axis-value-out residuals too, not only K-fold ones.
CALIBRATE_AXES = True


#: Axes of the leave-one-value-out scores (extrapolation along each), where they vary.
SCORE_AXES: tuple[str, ...] = ("nodes", "layers", "batch", "filters", "blocks", "embed", "length")


#: Columns of a predicted row: name -> (unit, where it comes from).
PREDICTION_COLUMNS: dict[str, tuple[str, str]] = {
    "predicted_step_time_s": ("s", "predicted: roofline term + overhead, times the learned "
                              "correction (paradnn.analysis.prediction)"),
    "predicted_step_time_low_s": ("s", "predicted: lower bound of the interval (prediction_level)"),
    "predicted_step_time_high_s": ("s", "predicted: upper bound of the interval; inf when the "
                                   "fit had too few configs for one"),
    "predicted_examples_per_sec": ("examples/s", "predicted: batch / predicted_step_time_s"),
    "predicted_examples_per_sec_low": ("examples/s", "predicted: batch / predicted_step_time_high_s"),
    "predicted_examples_per_sec_high": ("examples/s", "predicted: batch / predicted_step_time_low_s"),
    "roofline_step_time_s": ("s", "the pure-roofline baseline: overhead + max(FLOPs / fitted "
                             "compute rate, bytes / fitted bandwidth), no learned correction"),
    "predicted_bound": ("", "compute or memory: the side of the roofline term that binds"),
    "prediction_level": ("1", "nominal coverage of the interval (0.9: 90 percent)"),
    "prediction_relative_width": ("1", "(high - low) / predicted step time"),
    "prediction_out_of_range": ("", "why the config lies outside what the model was fitted on "
                                "(FLOPs, parameters or a hyperparameter), or empty"),
    "prediction_basis": ("", "fitted on this platform's measurements, or a cross-platform "
                         "estimate with its assumption"),
    "prediction_model": ("", "the fit: group, configs, efficiencies, overhead, correction"),
    "prediction_fit_id": ("", "identity of the fit (its training rows and options)"),
}


def check_level(level: float) -> float:
    if not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ParadnnError(f"level={level!r}; allowed: a coverage strictly between 0 and 1 "
                           "(0.9 for 90 percent intervals)")
    return float(level)


def group_label(group: Mapping[str, Any]) -> str:
    """``fc float32 jax on cpu``: a group as a person reads it."""
    plat = platform_label({k: group.get(k) for k in PLATFORM_KEY})
    return f"{group.get('family')} {group.get('dtype')} {group.get('framework')} on {plat}"


def numeric(df: pd.DataFrame, col: str) -> pd.Series:
    if col not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[col], errors="coerce")


def measured(df: pd.DataFrame, include_unstable: bool = False) -> tuple[pd.DataFrame, int]:
    """``(rows, n_unstable_left_out)``: the ``ok`` rows with a step time, without unstable ones
    (``stable`` False) unless ``include_unstable``. Predicted rows are never measurements."""
    rows = ok_rows(df)
    rows = rows[numeric(rows, "step_time_s") > 0]
    return drop_unstable(rows, include_unstable)


def workload_of(row: Mapping[str, Any]) -> Workload | None:
    """The Workload of a stored row; None for a family without closed forms (a real model) or a
    row whose fields do not make a valid workload."""
    family = row.get("family")
    if not isinstance(family, str) or family not in FAMILY_FIELDS or row.get("kind") == "real":
        return None
    spec = {"family": family}
    for f in FAMILY_FIELDS[family]:
        v = row.get(f)
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        spec[f] = int(v) if isinstance(v, float) and v.is_integer() else v
    try:
        return Workload(spec_from_dict(spec), int(row["batch"]), row.get("dtype") or "float32",
                        row.get("optimizer") or None, int(row.get("devices") or 1),
                        row.get("framework") or "jax")
    except (ParadnnError, TypeError, ValueError):
        return None


def size_table(workloads: Sequence[Workload]) -> pd.DataFrame:
    """``workload_key`` and the ``SIZE_COLUMNS`` of each workload, from the closed forms
    (:func:`paradnn.sizes.config_sizes`: FLOP, parameters, B; NaN where a family has none)."""
    rows = []
    for w in {w.key: w for w in workloads}.values():
        found = sizes.config_sizes(w)
        rows.append({"workload_key": w.key, **{c: found[c] for c in SIZE_COLUMNS}})
    return pd.DataFrame.from_records(rows, columns=["workload_key", *SIZE_COLUMNS])


def sized(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (store rows) with the ``SIZE_COLUMNS`` from the closed forms (``params`` and
    ``model_flops_per_step`` as recorded where a row has them). Rows of families without closed
    forms (real models) get NaN sizes and are never fitted."""
    if not len(df):
        return df.assign(**{c: pd.Series(dtype=float) for c in SIZE_COLUMNS if c not in df})
    out = df.copy()
    workloads = {}
    for i, row in out.iterrows():
        w = workload_of(row)
        if w is not None:
            workloads[i] = w
    table = size_table(list(workloads.values())).set_index("workload_key")
    keys = pd.Series({i: w.key for i, w in workloads.items()}, dtype=object)
    for col in SIZE_COLUMNS:
        computed = keys.map(table[col]) if len(keys) else pd.Series(dtype=float)
        have = pd.to_numeric(out[col], errors="coerce") if col in out.columns else None
        filled = computed.reindex(out.index).astype(float)
        out[col] = have.fillna(filled) if have is not None else filled
    return out


def config_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per config (``workload_key``, else the workload fields) of measured ``rows``:
    the first row's fields, the median ``step_time_s`` (s) and ``repeats`` (rows merged)."""
    if not len(rows):
        return rows.assign(repeats=pd.Series(dtype=int))
    key = "workload_key" if "workload_key" in rows.columns and rows["workload_key"].notna().all() \
        else None
    if key is None:
        cols = [c for c in WORKLOAD_FIELDS if c in rows.columns]
        ident = rows[cols].astype(str).agg("|".join, axis=1)
    else:
        ident = rows[key]
    g = rows.assign(_id=ident.to_numpy(), step_time_s=numeric(rows, "step_time_s"))
    groups = g.groupby("_id", sort=False)
    # copy(): groupby's result holds a block per column; consolidated before columns are set.
    first = groups.first().copy()
    first["step_time_s"] = groups["step_time_s"].median()
    first["repeats"] = groups.size()
    return first.reset_index(drop=True)


def groups(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The groups (``GROUP_KEY`` values) present in ``df``, in a stable order."""
    cols = [c for c in GROUP_KEY if c in df.columns]
    if not len(df):
        return []
    keys = df[cols].drop_duplicates().sort_values(cols, key=lambda s: s.astype(str))
    return [dict(zip(cols, values)) for values in keys.itertuples(index=False, name=None)]


def select(df: pd.DataFrame, group: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of ``df`` in ``group`` (a missing value matches a missing value)."""
    mask = pd.Series(True, index=df.index)
    for col, v in group.items():
        if col not in df.columns:
            continue
        mask &= df[col].isna() if is_missing(v) else (df[col] == v)
    return df[mask]


def is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))
