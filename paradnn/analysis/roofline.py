"""The roofline model (ParaDnn Fig 3a, 3c; Williams et al. 2009).

The roof at arithmetic intensity I (FLOP/B) is ``min(peak_flops, I * peak_bytes_per_sec)``;
the ridge point ``peak_flops / peak_bytes_per_sec`` separates the memory-bound side (left)
from the compute-bound side (right).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paradnn.analysis.columns import measurements, require_columns
from paradnn.errors import ParadnnError


def roofline(
    df: pd.DataFrame,
    peak_flops: float | None = None,
    peak_bytes_per_sec: float | None = None,
) -> pd.DataFrame:
    """Classify each row against the roof of its device.

    Uses the columns ``flops_per_sec`` (FLOP/s achieved) and ``arithmetic_intensity``
    (FLOP/B), and the roof from ``peak_flops`` (FLOP/s) and ``peak_bytes_per_sec`` (B/s):
    the arguments when given (they apply to every row), else the row's own columns. The peaks
    of a record are per device while its FLOPS are for all devices, so a row's roof is scaled
    by its ``devices`` column when there is one.

    Returns a copy (without predicted rows, which are not runs) with added columns ``roof_peak_flops`` and ``roof_peak_bytes_per_sec`` (the
    peaks used, scaled to the row's devices), ``roof_flops_per_sec`` (the roof at the row's intensity,
    FLOP/s), ``ridge_intensity`` (FLOP/B), ``bound`` (``memory`` left of the ridge, ``compute``
    at or right of it; missing where a value is missing) and ``roof_fraction`` (achieved /
    roof, 1 = on the roof).

    >>> roofline(ops, peak_flops=1.2e14, peak_bytes_per_sec=9e11)[["bound", "roof_fraction"]]
    ... # doctest: +SKIP
    """
    need = ["flops_per_sec", "arithmetic_intensity"]
    if peak_flops is None:
        need.append("peak_flops")
    if peak_bytes_per_sec is None:
        need.append("peak_bytes_per_sec")
    require_columns(df, need, "roofline (pass peak_flops= and peak_bytes_per_sec= for a frame without them)")
    for name, v in (("peak_flops", peak_flops), ("peak_bytes_per_sec", peak_bytes_per_sec)):
        if v is not None and not (np.isfinite(v) and v > 0):
            raise ParadnnError(f"roofline: {name}={v!r}; allowed: a positive number")
    out = measurements(df).copy()  # failed runs stay (as NaN), predictions are not runs
    devices = (
        pd.to_numeric(out["devices"], errors="coerce").fillna(1.0)
        if "devices" in out.columns else pd.Series(1.0, index=out.index)
    )
    pf = (
        pd.Series(float(peak_flops), index=out.index) if peak_flops is not None
        else pd.to_numeric(out["peak_flops"], errors="coerce")
    ) * devices
    pb = (
        pd.Series(float(peak_bytes_per_sec), index=out.index) if peak_bytes_per_sec is not None
        else pd.to_numeric(out["peak_bytes_per_sec"], errors="coerce")
    ) * devices
    intensity = pd.to_numeric(out["arithmetic_intensity"], errors="coerce")
    achieved = pd.to_numeric(out["flops_per_sec"], errors="coerce")
    roof = np.minimum(pf, intensity * pb)
    ridge = pf / pb
    known = intensity.notna() & ridge.notna()
    out["roof_peak_flops"] = pf
    out["roof_peak_bytes_per_sec"] = pb
    out["roof_flops_per_sec"] = roof
    out["ridge_intensity"] = ridge
    out["bound"] = pd.Series(
        np.where(intensity < ridge, "memory", "compute"), index=out.index, dtype=object
    ).where(known, None)
    out["roof_fraction"] = achieved / roof
    return out
