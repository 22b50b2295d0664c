"""Frameworks in the analyses: which framework ran a row, which frameworks a frame holds (in a
fixed order) and which pairs of them to compare, and which column names the device platform.
The speedup of one framework over another is :func:`paradnn.analysis.speedup.framework_speedup`.

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

from paradnn.analysis.columns import DEFAULT_FRAMEWORK, FRAMEWORK

__all__ = ["DEFAULT_FRAMEWORK", "FRAMEWORK", "PLATFORM_COLUMNS", "device_platform", "framework_of",
           "framework_pairs", "frameworks", "platform_column", "with_framework"]

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


def _ordered(names) -> list[str]:
    # The reference first (JAX: the framework of the paper's runs and of every old store),
    # the others by name. Read from the data: a new framework needs no edit here.
    names = set(names)
    return ([DEFAULT_FRAMEWORK] if DEFAULT_FRAMEWORK in names else []) + sorted(names - {DEFAULT_FRAMEWORK})


def frameworks(df: pd.DataFrame) -> list[str]:
    """The frameworks present in ``df``: JAX first (the reference), the others by name."""
    return _ordered(framework_of(df))


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
    in :func:`frameworks` order (later over earlier)."""
    ordered = _ordered(names)
    pairs = []
    for i, b in enumerate(ordered):
        for a in ordered[i + 1:]:
            pairs.append((a, b))
    return pairs
