"""Frameworks in the analyses: which framework ran a row, which column names its device
platform, and the speedup of one framework over another on the same workloads (ParaDnn Fig 12
style, as in TBD's framework comparison).

Rows of different frameworks are different configurations: the analyses never average them into
one value. Stores written before frameworks existed have no ``framework`` column, or a null in
it; those rows were run by JAX (the only framework paradnn had), so they read as ``"jax"``.

>>> import paradnn
>>> from paradnn.analysis import framework_speedup, speedup_summary
>>> sp = framework_speedup(paradnn.load("results.db"), "tensorflow", "jax")   # doctest: +SKIP
>>> speedup_summary(sp)["geomean"]   # doctest: +SKIP
"""

from __future__ import annotations

import pandas as pd

from paradnn.errors import ParadnnError
from paradnn.families import FRAMEWORKS

FRAMEWORK = "framework"
#: What a row without a framework means: stores from before frameworks ran JAX only.
DEFAULT_FRAMEWORK = "jax"
#: The device-platform column (cpu|gpu|tpu), and its name in stores before the rename.
PLATFORM_COLUMNS = ("device_platform", "backend")


def framework_of(df: pd.DataFrame) -> pd.Series:
    """The framework of each row: the ``framework`` column with missing values (and a missing
    column) read as ``"jax"``."""
    if FRAMEWORK not in df.columns:
        return pd.Series(DEFAULT_FRAMEWORK, index=df.index, dtype=object)
    return df[FRAMEWORK].astype(object).where(df[FRAMEWORK].notna(), DEFAULT_FRAMEWORK)


def with_framework(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``framework`` value on every row (:func:`framework_of`); the frame itself
    when nothing is missing."""
    if FRAMEWORK in df.columns and df[FRAMEWORK].notna().all():
        return df
    return df.assign(**{FRAMEWORK: framework_of(df)})


def frameworks(df: pd.DataFrame) -> list[str]:
    """The frameworks present in ``df``, in the order of ``paradnn.families.FRAMEWORKS`` (others,
    if a store holds a name this version does not know, after them by name)."""
    present = set(framework_of(df))
    known = [f for f in FRAMEWORKS if f in present]
    return known + sorted(present - set(known))


def platform_column(df: pd.DataFrame) -> str | None:
    """The name of the device-platform column in ``df``: ``device_platform``, or ``backend`` in
    frames from before the rename; None when neither is there."""
    for c in PLATFORM_COLUMNS:
        if c in df.columns:
            return c
    return None


def device_platform(df: pd.DataFrame) -> pd.Series:
    """The device platform (cpu|gpu|tpu) of each row, whichever name its column has; null
    where unknown."""
    col = platform_column(df)
    if col is None:
        return pd.Series(None, index=df.index, dtype=object)
    return df[col]


def framework_pairs(names: list[str]) -> list[tuple[str, str]]:
    """``(a, b)`` pairs of frameworks to compare, A over B: every other framework over JAX (the
    reference, the framework of the paper's runs) when JAX is present, and the remaining pairs
    in ``FRAMEWORKS`` order (later over earlier)."""
    ordered = [f for f in FRAMEWORKS if f in names] + sorted(set(names) - set(FRAMEWORKS))
    pairs = []
    for i, b in enumerate(ordered):
        for a in ordered[i + 1:]:
            pairs.append((a, b))
    return pairs


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
    # Imported here: speedup.py reads this module's column helpers at import time.
    from paradnn.analysis.speedup import across_fields, speedup

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
