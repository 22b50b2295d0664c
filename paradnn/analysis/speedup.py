"""Speedups between two sets of records (ParaDnn Fig 8-12).

The speedup of A over B for a workload is ``examples_per_sec`` on A divided by that on B (the
paper's definition). A and B are two platforms, two dtypes or two software versions; a store
that holds several of them is split by :func:`comparisons`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from paradnn.analysis._common import (
    PLATFORM_KEY, SOFTWARE_KEY, WORKLOAD_FIELDS, drop_unstable, ok_rows, platform_label,
    present, require_columns, software_label, unstable_mask, workload_label,
)
from paradnn.errors import ParadnnError

# Columns carried from each side into the result, suffixed _a and _b.
_SIDE_COLUMNS = ("model_flops_utilization", "flops_utilization", "step_time_s", "device_kind",
                 "device_platform", "dtype", "jax_version", "unstable")


def _per_key(rows: pd.DataFrame, on: list[str], metric: str) -> pd.DataFrame:
    # Repeats of one workload on one side collapse to their median; other columns keep the
    # first row's value.
    rows = rows.assign(**{metric: pd.to_numeric(rows[metric], errors="coerce")})
    first = rows.groupby(on, dropna=False, sort=False).first()
    med = rows.groupby(on, dropna=False, sort=False)[metric].median()
    first[metric] = med
    # A workload's value rests on unstable runs only when every repeat was unstable.
    first["unstable"] = rows.groupby(on, dropna=False, sort=False)["unstable"].all()
    return first.reset_index()


def speedup(
    df_a: pd.DataFrame,
    df_b: pd.DataFrame,
    metric: str = "examples_per_sec",
    on: Sequence[str] | None = None,
    include_unstable: bool = False,
) -> pd.DataFrame:
    """Join A and B on the workload and give ``speedup`` = ``metric`` on A / on B.

    ``on`` defaults to ``workload_key`` when both frames have it, else to the workload fields
    (family, hyperparameters, batch, dtype, optimizer, devices) present in both. To compare
    dtypes, join on the workload fields without ``dtype``. Only ok rows with a positive metric
    take part; repeats are reduced to their median. Runs whose timing missed its precision
    target (``stable`` False) are left out unless ``include_unstable``; with it, a workload whose
    value on A or B rests on unstable runs only has ``unstable`` True.

    Returns one row per common workload: the join columns, the workload fields (from A),
    ``kind``, ``params``, ``label``, ``<metric>_a``, ``<metric>_b``, ``speedup`` (x), and
    ``unstable``, ``flops_utilization_a/_b`` where present. ``attrs``: ``a`` and ``b``
    (labels), ``metric``, ``unstable_excluded`` (runs left out, A and B together).

    >>> sp = speedup(df[df.device_kind == "TPU v3"], df[df.device_kind == "H100"])
    """
    require_columns(df_a, (metric,), "speedup (A)")
    require_columns(df_b, (metric,), "speedup (B)")
    if on is None:
        if "workload_key" in df_a.columns and "workload_key" in df_b.columns:
            on = ["workload_key"]
        else:
            on = [c for c in WORKLOAD_FIELDS if c in df_a.columns and c in df_b.columns]
    on = list(on)
    if not on:
        raise ParadnnError("speedup: no workload columns in common; allowed: frames with "
                           "workload_key or the workload fields")
    require_columns(df_a, on, "speedup (A)")
    require_columns(df_b, on, "speedup (B)")

    left_out = 0

    def side(df: pd.DataFrame) -> pd.DataFrame:
        nonlocal left_out
        rows = ok_rows(df)
        rows = rows[pd.to_numeric(rows[metric], errors="coerce") > 0]
        rows, n = drop_unstable(rows, include_unstable)
        left_out += n
        rows = rows.assign(unstable=unstable_mask(rows))
        return _per_key(rows, on, metric) if len(rows) else rows

    a, b = side(df_a), side(df_b)
    carried = [c for c in (*WORKLOAD_FIELDS, "kind", "params") if c in a.columns and c not in on]
    a_cols = on + carried + [metric] + [c for c in _SIDE_COLUMNS
                                        if c in a.columns and c not in carried and c not in on]
    b_cols = on + [metric] + [c for c in _SIDE_COLUMNS if c in b.columns and c not in on]
    a = a[a_cols].rename(columns={c: f"{c}_a" for c in [metric, *_SIDE_COLUMNS]
                                  if c not in carried and c not in on})
    b = b[b_cols].rename(columns={c: f"{c}_b" for c in [metric, *_SIDE_COLUMNS] if c not in on})
    out = a.merge(b, on=on, how="inner")
    out["speedup"] = out[f"{metric}_a"] / out[f"{metric}_b"]
    if "unstable_a" in out.columns and "unstable_b" in out.columns:
        out["unstable"] = out["unstable_a"].astype(bool) | out["unstable_b"].astype(bool)
        out = out.drop(columns=["unstable_a", "unstable_b"])
    else:
        out["unstable"] = False
    out["label"] = [workload_label(r) for _, r in out.iterrows()] if len(out) else []
    out.attrs.update(
        a=_describe(df_a), b=_describe(df_b), metric=metric, on=on, unstable_excluded=left_out,
    )
    return out


def _describe(df: pd.DataFrame) -> str:
    """A short label of a set of records: its platforms, dtypes and software, where single."""
    if df.empty:
        return "no records"
    row = df.iloc[0]
    parts = []
    if all(c in df.columns for c in ("device_kind",)) and df["device_kind"].nunique() == 1:
        parts.append(platform_label(row))
    if "dtype" in df.columns and df["dtype"].nunique() == 1:
        parts.append(str(row["dtype"]))
    if "jax_version" in df.columns and df["jax_version"].nunique() == 1:
        parts.append(software_label(row))
    return ", ".join(parts) or f"{len(df)} records"


@dataclass
class Comparison:
    """Two sets of records of one store that differ in one respect."""

    kind: str  # "platform", "dtype" or "software"
    a: str  # label of A (the numerator)
    b: str  # label of B (the baseline)
    df_a: pd.DataFrame
    df_b: pd.DataFrame
    on: list[str]

    @property
    def title(self) -> str:
        return f"{self.a} over {self.b}"


def _version_key(text: str) -> tuple:
    parts = []
    for p in str(text).replace("-", ".").split("."):
        parts.append((0, int(p), "") if p.isdigit() else (1, 0, p))
    return tuple(parts)


def comparisons(df: pd.DataFrame, limit: int = 3) -> list[Comparison]:
    """The speedups a store supports: between platforms, between dtypes (each reduced
    precision over float32 on one platform) and between software versions (newer over older on
    one platform). Only pairs with at least one common ok workload are returned; at most
    ``limit`` of each kind.
    """
    rows = ok_rows(df)
    out: list[Comparison] = []
    if rows.empty:
        return out
    pcols = present(rows, PLATFORM_KEY)
    if pcols:
        labels = rows.apply(platform_label, axis=1)
        names = sorted(labels.unique())
        found = 0
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                c = Comparison("platform", a, b, rows[labels == a], rows[labels == b],
                               ["workload_key"] if "workload_key" in rows.columns else
                               present(rows, WORKLOAD_FIELDS))
                if found < limit and _overlap(c):
                    out.append(c)
                    found += 1
    by_platform = rows.groupby(rows.apply(platform_label, axis=1)) if pcols else [("", rows)]
    fields_no_dtype = [c for c in present(rows, WORKLOAD_FIELDS) if c != "dtype"]
    found = 0
    for plat, prow in by_platform:
        if "dtype" not in prow.columns or "float32" not in set(prow["dtype"]):
            continue
        for dt in sorted(set(prow["dtype"].dropna()) - {"float32"}):
            c = Comparison("dtype", f"{dt}" + (f" on {plat}" if plat else ""),
                           "float32" + (f" on {plat}" if plat else ""),
                           prow[prow["dtype"] == dt], prow[prow["dtype"] == "float32"],
                           fields_no_dtype)
            if found < limit and _overlap(c):
                out.append(c)
                found += 1
    scols = present(rows, SOFTWARE_KEY)
    found = 0
    if scols:
        for plat, prow in by_platform:
            soft = prow.apply(software_label, axis=1)
            versions = sorted(soft.unique(), key=_version_key, reverse=True)
            for i, newer in enumerate(versions):
                for older in versions[i + 1:]:
                    c = Comparison("software", newer + (f" on {plat}" if plat else ""),
                                   older + (f" on {plat}" if plat else ""),
                                   prow[soft == newer], prow[soft == older],
                                   ["workload_key"] if "workload_key" in prow.columns else
                                   present(prow, WORKLOAD_FIELDS))
                    if found < limit and _overlap(c):
                        out.append(c)
                        found += 1
    return out


def _overlap(c: Comparison) -> bool:
    if not all(col in c.df_a.columns and col in c.df_b.columns for col in c.on):
        return False
    ka = set(map(tuple, c.df_a[c.on].astype(str).to_numpy()))
    kb = set(map(tuple, c.df_b[c.on].astype(str).to_numpy()))
    return bool(ka & kb)


def speedup_of(c: Comparison, metric: str = "examples_per_sec",
               include_unstable: bool = False) -> pd.DataFrame:
    """:func:`speedup` of a :class:`Comparison`, labelled with its ``a`` and ``b``."""
    out = speedup(c.df_a, c.df_b, metric=metric, on=c.on, include_unstable=include_unstable)
    out.attrs.update(a=c.a, b=c.b, comparison=c.kind)
    return out


def geometric_mean(values: pd.Series) -> float:
    """Geometric mean of positive ratios (the mean that treats x2 and x0.5 symmetrically)."""
    v = pd.to_numeric(values, errors="coerce").dropna()
    v = v[v > 0]
    return float(np.exp(np.log(v).mean())) if len(v) else float("nan")


def geometric_mean_ci(
    values: pd.Series, bootstrap: int = 2000, seed: int = 0, ci: float = 0.95
) -> tuple[float, float, float]:
    """``(geometric mean, ci_low, ci_high)`` of positive ratios: the percentile interval of the
    geometric mean over ``bootstrap`` resamples of the values (one per workload, with
    replacement; ``numpy`` generator seeded with ``seed``). With fewer than two values the
    interval is NaN: one workload says nothing about the spread."""
    if not 0 < ci < 1:
        raise ParadnnError(f"geometric_mean_ci: ci={ci!r}; allowed: a fraction between 0 and 1")
    if bootstrap < 1:
        raise ParadnnError(f"geometric_mean_ci: bootstrap={bootstrap!r}; allowed: an integer >= 1")
    v = pd.to_numeric(values, errors="coerce").dropna()
    logs = np.log(v[v > 0].to_numpy(dtype=float))
    if len(logs) == 0:
        return float("nan"), float("nan"), float("nan")
    gm = float(np.exp(logs.mean()))
    if len(logs) < 2:
        return gm, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = logs[rng.integers(0, len(logs), (bootstrap, len(logs)))].mean(axis=1)
    lo, hi = np.exp(np.quantile(means, [(1 - ci) / 2, (1 + ci) / 2]))
    return gm, float(lo), float(hi)


def speedup_summary(sp: pd.DataFrame, bootstrap: int = 2000, seed: int = 0,
                    ci: float = 0.95) -> dict:
    """The claim a speedup table supports, with its uncertainty: ``n`` (workloads),
    ``geomean`` (x), ``ci_low``/``ci_high`` (x, bootstrap over workloads, see
    :func:`geometric_mean_ci`), ``ci`` (level), ``faster`` (fraction of workloads with speedup
    > 1), ``unstable_excluded`` (runs left out by :func:`speedup`) and ``unstable_included``
    (workloads kept that rest on unstable runs)."""
    require_columns(sp, ("speedup",), "speedup_summary")
    v = pd.to_numeric(sp["speedup"], errors="coerce").dropna()
    gm, lo, hi = geometric_mean_ci(v, bootstrap=bootstrap, seed=seed, ci=ci)
    return {
        "n": int(len(v)), "geomean": gm, "ci_low": lo, "ci_high": hi, "ci": ci,
        "faster": float((v > 1).mean()) if len(v) else float("nan"),
        "unstable_excluded": int(sp.attrs.get("unstable_excluded", 0)),
        "unstable_included": int(sp["unstable"].astype(bool).sum()) if "unstable" in sp else 0,
    }
