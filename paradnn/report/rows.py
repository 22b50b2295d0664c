"""Which rows an analysis of the report uses, and how many it leaves out: one setting of a store
(one platform, software, dtype, ...), its platforms and frameworks, the metrics it holds, the
unstable and flagged runs among them."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from paradnn import families
from paradnn.analysis.columns import (
    PLATFORM_KEY, ok_rows, platform_label, present, software_columns, unstable_mask,
    warning_lists,
)
from paradnn.analysis.framework import framework_of, frameworks

# The parameterized families (read from the family registry at use time).
GENERATED: Sequence[str] = families.FieldsView(lambda: tuple(families.generated()))
# Columns that make a setting besides the platform and the software stack.
_SETTING_WORKLOAD = ("framework", "dtype", "optimizer", "devices")


def plural(count: int, noun: str) -> str:
    """``1 run``, ``4 runs``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def setting_columns(rows: pd.DataFrame) -> list[str]:
    """The columns whose values make one setting: platform, software stack (read from the
    data), framework, dtype, optimizer and devices."""
    return [*PLATFORM_KEY, *software_columns(rows), *_SETTING_WORKLOAD]


def one_setting(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Rows of the most common platform, software, dtype and optimizer (one setting), so an
    analysis over hyperparameters does not mix platforms; and the values chosen."""
    chosen = {}
    for c in setting_columns(rows):
        if c in rows.columns and rows[c].dropna().nunique() > 1:
            v = rows[c].value_counts().index[0]
            chosen[c] = v
            rows = rows[rows[c] == v]
    return rows, chosen


def settings_counts(rows: pd.DataFrame) -> str:
    """``float32 on cpu: 6, bfloat16 on cpu: 6``: runs per setting (dtype and platform)."""
    if rows.empty:
        return "none"
    cols = [c for c in setting_columns(rows) if c in rows.columns and rows[c].notna().any()]
    if not cols:
        return str(len(rows))
    parts = []
    for _, g in rows.groupby(cols, dropna=False, sort=True):
        r = g.iloc[0]
        where = platform_label(r) if present(g, PLATFORM_KEY) else ""
        parts.append(f"{r.get('dtype', '?')}{' on ' + where if where else ''}: {len(g)}")
    return ", ".join(parts)


def platforms(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``(platform label, its rows)`` per platform, by label; one ``("", rows)`` without
    platform columns."""
    if not present(rows, PLATFORM_KEY):
        return [("", rows)]
    labels = rows.apply(platform_label, axis=1)
    return [(p, rows[labels == p]) for p in sorted(labels.unique())]


def platforms_and_frameworks(rows: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """:func:`platforms`, each split by framework when ``rows`` hold several (``CPU,
    tensorflow``): a figure of one platform never mixes frameworks."""
    if len(frameworks(rows)) < 2:
        return platforms(rows)
    out = []
    for plat, prow in platforms(rows):
        fw = framework_of(prow)
        for name in frameworks(prow):
            out.append((f"{plat}, {name}" if plat else name, prow[fw == name]))
    return out


def most_common_platform(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the store's most common platform (all of them without platform columns)."""
    if not present(rows, PLATFORM_KEY):
        return rows
    labels = rows.apply(platform_label, axis=1)
    return rows[labels == labels.value_counts().index[0]]


def first_metric(rows: pd.DataFrame, *names: str) -> str | None:
    """The first of ``names`` that some ok row holds as a number, or None."""
    for n in names:
        if n in rows.columns and pd.to_numeric(ok_rows(rows)[n], errors="coerce").notna().any():
            return n
    return None


def has_all(rows: pd.DataFrame, *metrics: str) -> bool:
    """Whether some row has every one of ``metrics`` (numeric, not null)."""
    if rows.empty or not all(m in rows.columns for m in metrics):
        return False
    return bool(rows[list(metrics)].apply(pd.to_numeric, errors="coerce").notna().all(axis=1).any())


def common_dtype(rows: pd.DataFrame) -> str:
    """The most common dtype of ``rows`` (float32 when they name none)."""
    if "dtype" in rows.columns and rows["dtype"].notna().any():
        return str(rows["dtype"].value_counts().index[0])
    return "float32"


def marks(rows: pd.DataFrame) -> tuple[int, int]:
    """(unstable ok runs, ok runs with a physics warning) among ``rows``."""
    ok = ok_rows(rows)
    return int(unstable_mask(ok).sum()), int(warning_lists(ok, "physics").map(bool).sum())
