"""Speedups between two sets of records (ParaDnn Fig 8-12).

The speedup of A over B for a workload is ``examples_per_sec`` on A divided by that on B (the
paper's definition). A and B are two platforms, two dtypes, two software versions or two
frameworks; a store that holds several of them is split by :func:`comparisons`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from paradnn.analysis.columns import (
    PLATFORM_KEY, WORKLOAD_FIELDS, drop_unstable, ok_rows, platform_label, present,
    require_columns, software_columns, software_label, unstable_mask, workload_label,
)
from paradnn.analysis.framework import (
    DEFAULT_FRAMEWORK, FRAMEWORK, PLATFORM_COLUMNS, framework_pairs, frameworks, with_framework,
)
from paradnn.analysis.compare import workload_join
from paradnn import precision
from paradnn.errors import ParadnnError

# Columns carried from each side into the result, suffixed _a and _b (with the software
# columns of the frames, see _side_columns).
_SIDE_COLUMNS = ("model_flops_utilization", "flops_utilization", "step_time_s", "device_kind",
                 *PLATFORM_COLUMNS, "dtype", FRAMEWORK, "matmul_precision_used", "best_calibration_id",
                 "unstable")


def _side_columns(df_a: pd.DataFrame, df_b: pd.DataFrame) -> tuple[str, ...]:
    # The versions of the software stack (jax_version, tf_version, ...: whatever the frames
    # hold, read from the data) travel with each side, so a software comparison shows them.
    both = pd.concat([df_a, df_b], ignore_index=True)
    versions = [c for c in present(both, software_columns(both)) if c.endswith("_version")]
    return (*_SIDE_COLUMNS[:-1], *versions, _SIDE_COLUMNS[-1])


def _per_key(rows: pd.DataFrame, on: list[str], metric: str) -> pd.DataFrame:
    # Repeats of one workload on one side collapse to their median; other columns keep the
    # first row's value.
    rows = rows.assign(**{metric: pd.to_numeric(rows[metric], errors="coerce")})
    groups = rows.groupby(on, dropna=False, sort=False)
    # copy(): groupby's result holds a block per column; consolidated before columns are set.
    first = groups.first().copy()
    first[metric] = groups[metric].median()
    # A workload's value rests on unstable runs only when every repeat was unstable.
    first["unstable"] = groups["unstable"].all()
    return first.reset_index()


def speedup(
    df_a: pd.DataFrame,
    df_b: pd.DataFrame,
    metric: str = "examples_per_sec",
    on: Sequence[str] | None = None,
    include_unstable: bool = False,
) -> pd.DataFrame:
    """Join A and B on the workload and give ``speedup`` = ``metric`` on A / on B.

    ``on`` defaults to :func:`paradnn.analysis.compare.workload_join`: ``workload_key`` when
    both frames have it, else the workload fields (family, hyperparameters, batch, dtype,
    optimizer, devices, framework) present in both; without ``dtype`` or ``framework`` when A
    and B have no value of it in common (stores of two frameworks, float32 and bfloat16 rows),
    the rule of ``paradnn compare``. Only ok rows with a positive metric take part; repeats are reduced to their median. Runs whose timing missed its precision
    target (``stable`` False) are left out unless ``include_unstable``; with it, a workload whose
    value on A or B rests on unstable runs only has ``unstable`` True.

    Returns one row per common workload: the join columns, the workload fields (from A),
    ``kind``, ``params``, ``label``, ``<metric>_a``, ``<metric>_b``, ``speedup`` (x), and
    ``unstable``, ``flops_utilization_a/_b`` where present, ``precision_differs`` (float32 rows
    whose measured ``matmul_precision_used`` differs between A and B). ``attrs``: ``a`` and ``b``
    (labels), ``metric``, ``unstable_excluded`` (runs left out, A and B together).

    >>> sp = speedup(df[df.device_kind == "TPU v3"], df[df.device_kind == "H100"])
    """
    require_columns(df_a, (metric,), "speedup (A)")
    require_columns(df_b, (metric,), "speedup (B)")
    if on is None:
        on = workload_join(df_a, df_b)  # without the dtype or framework A and B differ in
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

    sides = _side_columns(df_a, df_b)
    a, b = side(df_a), side(df_b)
    carried = [c for c in (*WORKLOAD_FIELDS, "kind", "params") if c in a.columns and c not in on]
    a_cols = on + carried + [metric] + [c for c in sides
                                        if c in a.columns and c not in carried and c not in on]
    b_cols = on + [metric] + [c for c in sides if c in b.columns and c not in on]
    a = a[a_cols].rename(columns={c: f"{c}_a" for c in [metric, *sides]
                                  if c not in carried and c not in on})
    b = b[b_cols].rename(columns={c: f"{c}_b" for c in [metric, *sides] if c not in on})
    out = a.merge(b, on=on, how="inner")
    out["speedup"] = out[f"{metric}_a"] / out[f"{metric}_b"]
    if "unstable_a" in out.columns and "unstable_b" in out.columns:
        out["unstable"] = out["unstable_a"].astype(bool) | out["unstable_b"].astype(bool)
        out = out.drop(columns=["unstable_a", "unstable_b"])
    else:
        out["unstable"] = False
    # A float32 speedup between sides whose matmuls ran at different measured precisions (JAX's
    # TF32 against PyTorch's full float32 on an NVIDIA GPU, at both frameworks' defaults) is
    # also a speedup of one precision over another: flagged, never silently averaged.
    # (A reduced dtype's label is the dtype: a dtype comparison is not flagged.)
    out["precision_differs"] = False
    if {"matmul_precision_used_a", "matmul_precision_used_b"} <= set(out.columns):
        pa, pb = out["matmul_precision_used_a"], out["matmul_precision_used_b"]
        levels = [precision.is_level(x) and precision.is_level(y) for x, y in zip(pa, pb)]
        out["precision_differs"] = [bool(ok and x != y) for ok, x, y in zip(levels, pa, pb)]
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
    software = df.apply(software_label, axis=1)
    if software.nunique() == 1 and software.iloc[0] != "unknown software":
        parts.append(software.iloc[0])
    return ", ".join(parts) or f"{len(df)} records"


@dataclass
class Comparison:
    """Two sets of records of one store that differ in one respect."""

    kind: str  # one of KINDS: "platform", "dtype", "software" or "framework"
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


#: The kinds of comparison :func:`comparisons` finds, in the report's order.
KINDS = ("platform", "dtype", "software", "framework")


def across_fields(df: pd.DataFrame, column: str) -> list[str]:
    """The join columns of a comparison across ``column``: the workload fields ``df`` holds,
    without ``column`` (``dtype`` to compare dtypes, ``framework`` to compare frameworks)."""
    return [c for c in present(df, WORKLOAD_FIELDS) if c != column]


def _same_workload(rows: pd.DataFrame) -> list[str]:
    return ["workload_key"] if "workload_key" in rows.columns else present(rows, WORKLOAD_FIELDS)


def _compare(kind: str, scopes, labels_of: Callable[[pd.DataFrame], pd.Series],
             pairs_of: Callable[[list], list[tuple[str, str]]],
             on_of: Callable[[pd.DataFrame], list[str]], limit: int) -> list[Comparison]:
    """The comparisons of one kind: in each ``(scope label, rows)`` of ``scopes``, the rows
    are labelled by ``labels_of`` (a platform, a dtype, ...), and each pair ``(a, b)`` of
    ``pairs_of(labels)`` with a common workload (joined on ``on_of(rows)``) is one comparison
    of A over B; at most ``limit``."""
    out: list[Comparison] = []
    for scope, rows in scopes:
        labels = labels_of(rows)
        where = f" on {scope}" if scope else ""
        for a, b in pairs_of(list(labels.dropna().unique())):
            c = Comparison(kind, f"{a}{where}", f"{b}{where}", rows[labels == a],
                           rows[labels == b], on_of(rows))
            if len(out) < limit and _overlap(c):
                out.append(c)
    return out


def _all_pairs(names: list) -> list[tuple[str, str]]:
    names = sorted(names)
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def _over_float32(names: list) -> list[tuple[str, str]]:
    return [(d, "float32") for d in sorted(set(names) - {"float32"})] if "float32" in names else []


def _newer_over_older(names: list) -> list[tuple[str, str]]:
    versions = sorted(names, key=_version_key, reverse=True)
    return [(a, b) for i, a in enumerate(versions) for b in versions[i + 1:]]


def comparisons(df: pd.DataFrame, limit: int = 3,
                kinds: Sequence[str] = KINDS) -> list[Comparison]:
    """The speedups a store supports: between platforms, between dtypes (each reduced
    precision over float32 on one platform), between software versions (newer over older on
    one platform) and between frameworks (each framework over JAX, or the later over the
    earlier in :func:`~paradnn.analysis.framework.frameworks` order, on one platform; rows
    without a framework are JAX's). Each is the same computation, :func:`speedup` of two sets of rows across one
    column. Only pairs with at least one common ok workload are returned; at most ``limit`` of
    each kind of ``kinds``.
    """
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ParadnnError(f"comparisons: kinds={list(kinds)!r}; allowed: {', '.join(KINDS)}")
    rows = with_framework(ok_rows(df))
    out: list[Comparison] = []
    if rows.empty:
        return out
    pcols = present(rows, PLATFORM_KEY)
    by_platform = list(rows.groupby(rows.apply(platform_label, axis=1))) if pcols else [("", rows)]
    if "platform" in kinds and pcols:
        out += _compare("platform", [("", rows)], lambda r: r.apply(platform_label, axis=1),
                        _all_pairs, _same_workload, limit)
    if "dtype" in kinds and "dtype" in rows.columns:
        on = across_fields(rows, "dtype")
        out += _compare("dtype", by_platform, lambda r: r["dtype"], _over_float32,
                        lambda r: on, limit)
    if "software" in kinds and present(rows, software_columns(rows)):
        out += _compare("software", by_platform, lambda r: r.apply(software_label, axis=1),
                        _newer_over_older, _same_workload, limit)
    if "framework" in kinds:
        on = across_fields(rows, FRAMEWORK)
        out += _compare("framework", by_platform, lambda r: r[FRAMEWORK], framework_pairs,
                        lambda r: on, limit)
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
    > 1), ``unstable_excluded`` (runs left out by :func:`speedup`), ``unstable_included``
    (workloads kept that rest on unstable runs) and ``precision_differs`` (workloads whose two
    sides ran float32 matmuls at different measured precisions: the claim is then also one
    about precision)."""
    require_columns(sp, ("speedup",), "speedup_summary")
    v = pd.to_numeric(sp["speedup"], errors="coerce").dropna()
    gm, lo, hi = geometric_mean_ci(v, bootstrap=bootstrap, seed=seed, ci=ci)
    return {
        "n": int(len(v)), "geomean": gm, "ci_low": lo, "ci_high": hi, "ci": ci,
        "faster": float((v > 1).mean()) if len(v) else float("nan"),
        "unstable_excluded": int(sp.attrs.get("unstable_excluded", 0)),
        "unstable_included": int(sp["unstable"].astype(bool).sum()) if "unstable" in sp else 0,
        "precision_differs": int(sp["precision_differs"].astype(bool).sum()) if "precision_differs" in sp else 0,
    }


def framework_speedup(
    df: pd.DataFrame,
    a: str,
    b: str = DEFAULT_FRAMEWORK,
    metric: str = "examples_per_sec",
    include_unstable: bool = False,
) -> pd.DataFrame:
    """The speedup of framework ``a`` over framework ``b``: for every workload (every workload
    field but ``framework``) measured under both on the same device (``device_kind`` and
    device count), ``metric`` under ``a`` / under ``b`` (x). Computed by
    :func:`paradnn.analysis.speedup` (medians of repeats, unstable runs left out unless
    ``include_unstable``); summarise it with :func:`paradnn.analysis.speedup_summary` for the
    geometric mean and its bootstrap interval.

    Returns the table of :func:`~paradnn.analysis.speedup` with ``device_kind`` among the join
    columns; ``attrs["a"]``/``["b"]`` are the framework names.
    """
    names = frameworks(df)
    for name, value in (("a", a), ("b", b)):
        if value not in names:
            raise ParadnnError(f"framework_speedup: {name}={value!r}; allowed: a framework with "
                               f"rows in the DataFrame ({', '.join(names) or 'none'})")
    if a == b:
        raise ParadnnError(f"framework_speedup: a and b are both {a!r}; allowed: two different "
                           "frameworks")
    rows = with_framework(df)
    # Same workload on the same device: the framework is the only difference.
    on = across_fields(rows, FRAMEWORK) + [c for c in ("device_kind", "device_count")
                                               if c in rows.columns and rows[c].notna().any()]
    out = speedup(rows[rows[FRAMEWORK] == a], rows[rows[FRAMEWORK] == b], metric=metric,
                      on=on, include_unstable=include_unstable)
    out.attrs.update(a=a, b=b, comparison="framework")
    return out


#: The metric that marks a record of a run at the best stack (``paradnn.beststack``), and the one
#: that holds the calibration it came from (JSON text).
FRAMEWORK_CHOICE, BEST_CALIBRATION = "framework_choice", "best_calibration"


def _best_rows(df: pd.DataFrame, side: str) -> pd.DataFrame:
    # The rows of runs at the best stack, with the id of the calibration that chose each.
    if FRAMEWORK_CHOICE not in df.columns or not (df[FRAMEWORK_CHOICE] == "best").any():
        raise ParadnnError(f"best_stack_speedup: {side} has no records of a run at the best stack (column "
                           f"{FRAMEWORK_CHOICE} == 'best'); allowed: records of framework='best' runs "
                           "(paradnn run --framework best)")
    rows = with_framework(df[df[FRAMEWORK_CHOICE] == "best"])
    ids = [json.loads(c).get("id") if isinstance(c, str) and c.startswith("{") else None
           for c in rows.get(BEST_CALIBRATION, pd.Series([None] * len(rows), index=rows.index))]
    return rows.assign(best_calibration_id=ids)


def best_stack_speedup(
    df_a: pd.DataFrame,
    df_b: pd.DataFrame,
    metric: str = "examples_per_sec",
    include_unstable: bool = False,
) -> pd.DataFrame:
    """The speedup of platform A over platform B, each at its best stack: the records of
    ``framework="best"`` runs on each side (``framework_choice`` "best"), joined on the workload
    without its framework, so that A's stack (say JAX on a GPU) meets B's (say PyTorch on a
    CPU). Computed by :func:`speedup`; every row says which stack each side used
    (``framework_a``, ``framework_b``) and the calibration that chose it
    (``best_calibration_id_a``/``_b``). ``attrs``: ``a``/``b`` labels ending in "at its best
    stack (frameworks)", ``stacks`` ({"a": [...], "b": [...]}, the frameworks each side
    used) and ``comparison`` "best stack". A side without such records is a ParadnnError.
    """
    a, b = _best_rows(df_a, "A"), _best_rows(df_b, "B")
    on = [c for c in across_fields(pd.concat([a, b], ignore_index=True), FRAMEWORK)
          if c in a.columns and c in b.columns]
    out = speedup(a, b, metric=metric, on=on, include_unstable=include_unstable)
    # speedup() carries A's workload fields unsuffixed; here the framework is a side's stack.
    out = out.rename(columns={FRAMEWORK: f"{FRAMEWORK}_a"})
    stacks = {side: sorted(set(out[f"{FRAMEWORK}_{side}"].dropna())) if f"{FRAMEWORK}_{side}" in out else []
              for side in ("a", "b")}
    out.attrs.update(a=f"{out.attrs['a']} at its best stack ({', '.join(stacks['a']) or 'none'})",
                     b=f"{out.attrs['b']} at its best stack ({', '.join(stacks['b']) or 'none'})",
                     stacks=stacks, comparison="best stack")
    return out
