"""The cells of the report's tables as text: one number format per column, whatever pandas
would print (an int column whole, a float column in its own format: ``756700000`` beside
``1.009e+09``). The tables behind the figures (:func:`paradnn.report.html.html_table`) and the
summary of every run (:mod:`paradnn.report.summary`) both use it."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from paradnn.analysis.columns import unit
from paradnn.units import compact, precise_duration

#: Significant digits of every measured number in a table (a step time's 95% interval is a
#: few percent wide: a fourth digit would be noise).
TABLE_DIGITS = 3
#: Whole numbers below this print whole (batch 256, 87516 B); a column reaching it prints with
#: SI prefixes throughout (13.9k ... 25.0M), so that one column never mixes the two formats.
WHOLE_BELOW = 10**6


def _real(v: object) -> float | None:
    """``v`` as a float if it is a finite real number (not a bool), else None."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return None
    x = float(v)
    return x if math.isfinite(x) else None


def is_seconds(column: str) -> bool:
    """Whether a column holds durations in seconds: its unit is s, or its name ends in ``_s``
    (the store's convention: ``step_time_s``, ``compile_s``, an op table's ``time_s``)."""
    return unit(column) == "s" or column.endswith("_s")


def table_column(values: Sequence[object], seconds: bool = False) -> list[str]:
    """The cells of one table column as text, in one format for the whole column (pandas
    would print an int column whole and a float column in its own format: ``756700000``
    beside ``1.009e+09``). Numbers: durations (``seconds``) with :data:`TABLE_DIGITS`
    significant digits in the unit that reads best (``5.06 µs``, ``1.42 ms``:
    :func:`paradnn.units.precise_duration`); else whole where every one is a whole number
    below :data:`WHOLE_BELOW` (counts, batch, bytes); else :data:`TABLE_DIGITS` significant
    digits with their trailing zeros and an SI suffix from 1000 up (``0.0159``, ``757M``,
    ``1.01G``: :func:`paradnn.units.compact`); never an exponent. Text stays as it is; None,
    NaN and infinities are empty."""
    numbers = [_real(v) for v in values]
    found = [x for x in numbers if x is not None]
    whole = bool(found) and all(x.is_integer() and abs(x) < WHOLE_BELOW for x in found)
    out = []
    for v, x in zip(values, numbers):
        if x is not None and seconds:
            out.append(precise_duration(x, TABLE_DIGITS, zeros=True))
        elif x is not None:
            out.append(str(int(x)) if whole else compact(x, TABLE_DIGITS, zeros=True))
        elif v is None or isinstance(v, (float, np.floating)) or v is pd.NA or v is pd.NaT:
            out.append("")  # missing, NaN or infinite: no number to show
        else:
            out.append(str(v))
    return out
