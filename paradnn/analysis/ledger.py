"""The time ledger across a grid (docs/ledger.md): each run's parts as shares of its step time,
what limits each config, and how each part moves with the hyperparameters.

The ledger itself is taken per run (:mod:`paradnn.ledger`); these functions read the stored
``ledger_<part>_s`` metrics of ok runs, one row per run.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from paradnn.analysis.columns import ok_rows
from paradnn.analysis.sensitivity import sensitivity
from paradnn.errors import ParadnnError
from paradnn.record import LEDGER_PARTS, ledger_metric


def share_column(part: str) -> str:
    """The column of :func:`ledger_frame` holding ``part``'s share of the step time."""
    return f"ledger_share_{part}"


def ledger_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The ok runs of ``df`` that carry a ledger, with ``ledger_share_<part>`` (fraction of the
    step time; the overlap negative) for every part of :data:`paradnn.record.LEDGER_PARTS`.
    ParadnnError where no run has one (measure with the ``ledger`` setting or `paradnn ledger`)."""
    rows = ok_rows(df)
    if "ledger_source" not in rows.columns or "step_time_s" not in rows.columns:
        raise ParadnnError("ledger: no run has a time ledger (measure with --ledger, a sweep's "
                           "settings: {ledger: true}, or `paradnn ledger STORE`)")
    rows = rows[rows["ledger_source"].notna()].copy()
    if rows.empty:
        raise ParadnnError("ledger: no ok run has a time ledger (measure with --ledger, a sweep's "
                           "settings: {ledger: true}, or `paradnn ledger STORE`)")
    step = pd.to_numeric(rows["step_time_s"], errors="coerce")
    for part in LEDGER_PARTS:
        col = ledger_metric(part)
        value = pd.to_numeric(rows[col], errors="coerce") if col in rows.columns else np.nan
        rows[share_column(part)] = value / step
    return rows.reset_index(drop=True)


def part_sensitivity(df: pd.DataFrame, features: Sequence[str], log2: bool = True,
                     bootstrap: int = 100, include_unstable: bool = False) -> pd.DataFrame:
    """The regression sensitivity (ParaDnn Fig 7's method, :func:`paradnn.analysis.sensitivity`)
    of each ledger part's share to ``features``: ``DataFrame[part, feature, weight, ci_low,
    ci_high]`` (standardized weights: the change of the share, in its standard deviations, per
    standard deviation of log2 of the feature). Parts that never vary are left out; so are runs
    whose timing missed its precision target, unless ``include_unstable``."""
    frame = ledger_frame(df)
    out = []
    for part in LEDGER_PARTS:
        col = share_column(part)
        values = frame[col].dropna()
        if len(values) < 2 or values.std() == 0:
            continue
        try:
            sens = sensitivity(frame, col, list(features), log2=log2, bootstrap=bootstrap,
                               include_unstable=include_unstable)
        except ParadnnError:
            continue
        out.append(sens.assign(part=part))
    if not out:
        raise ParadnnError("ledger sensitivity: no ledger part varies over enough runs "
                           f"(features {list(features)})")
    return pd.concat(out, ignore_index=True)[["part", "feature", "weight", "ci_low", "ci_high"]]
