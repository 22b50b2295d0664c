"""Held-out scores: the model's errors and interval coverage on configs it did not see (K folds
and each axis value held out), beside the pure roofline's."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from paradnn.analysis.prediction.calibration import folds_of
from paradnn.analysis.prediction.correction import DEFAULT_CORRECTION, check_correction
from paradnn.analysis.prediction.data import (
    CALIBRATE_AXES, DEFAULT_LEVEL, FOLDS, MIN_CONFIGS, SCORE_AXES, check_level, config_table,
    group_label, groups, measured, numeric, select,
)
from paradnn.analysis.prediction.fitting import fit, fit_columns
from paradnn.analysis.prediction.model import StepTimeModel
from paradnn.errors import ParadnnError


#: Columns of :func:`score`'s table.
SCORE_COLUMNS = ("group", "scheme", "held_out", "model", "configs", "median_ape", "p90_ape",
                 "coverage", "median_relative_width")


def errors(pred: pd.DataFrame) -> dict[str, float]:
    """Median and p90 absolute percentage error of examples/s (fractions), coverage of the
    intervals, median relative width, over rows with both a measurement and a prediction."""
    t = numeric(pred, "step_time_s").to_numpy(float)
    tp = numeric(pred, "predicted_step_time_s").to_numpy(float)
    # examples/s = batch / t, so |eps_pred - eps| / eps = |t / t_pred - 1|.
    ape = np.abs(t / tp - 1.0)
    inside = (t >= numeric(pred, "predicted_step_time_low_s").to_numpy(float)) & \
             (t <= numeric(pred, "predicted_step_time_high_s").to_numpy(float))
    return {"configs": int(len(t)), "median_ape": float(np.median(ape)),
            "p90_ape": float(np.quantile(ape, 0.9)), "coverage": float(np.mean(inside)),
            "median_relative_width": float(np.median(numeric(pred, "prediction_relative_width")))}


def held_out(rows: pd.DataFrame, test_mask: np.ndarray, correction: str, level: float,
             seed: int = 0, calibrate_axes: bool = CALIBRATE_AXES) -> pd.DataFrame:
    """Fit on the configs of ``rows`` (a config table) outside ``test_mask``, predict those in it:
    the test configs with ``PREDICTION_COLUMNS`` and their measured ``step_time_s``."""
    train, test = rows.loc[~test_mask, fit_columns(rows)], rows[test_mask]
    model = fit(train, correction, level, seed=seed, include_unstable=True,
                calibrate_axes=calibrate_axes)
    return model.predict(test)


def score(df: pd.DataFrame, correction: str = DEFAULT_CORRECTION, level: float = DEFAULT_LEVEL,
          folds: int = FOLDS, seed: int = 0, axes: Sequence[str] = SCORE_AXES,
          baseline: bool = True, include_unstable: bool = False,
          keep_predictions: bool = False, calibrate_axes: bool = CALIBRATE_AXES) -> pd.DataFrame:
    """Held-out errors of the model of every group of ``df`` (rows with ``SIZE_COLUMNS``).

    Schemes: ``k-fold`` (``folds`` folds by config, shuffled with ``seed``) and ``leave out
    <axis>`` for each axis of ``axes`` that takes at least 3 values in the group: every value in
    turn is held out and the model fitted on the others (extrapolation at the smallest and
    largest values, interpolation between). Each scheme is scored for ``correction`` and, with
    ``baseline``, for the pure roofline (``none``). Errors are of examples/s, as fractions
    (0.1 = 10 percent); ``coverage`` is the share of held-out configs inside their ``level``
    interval.

    Returns ``SCORE_COLUMNS``; with ``keep_predictions``, ``attrs["predictions"]`` holds every
    held-out prediction (the config, its measured step time and the prediction columns, with
    ``group``, ``scheme`` and ``model``).
    """
    level = check_level(level)
    models = [correction] + (["none"] if baseline and correction != "none" else [])
    for m in models:
        check_correction(m)
    meas, _ = measured(df, include_unstable)
    out, preds = [], []
    for g in groups(meas):
        table = config_table(select(meas, g)).reset_index(drop=True)
        label = group_label(g)
        if len(table) < 2 * MIN_CONFIGS:
            continue
        schemes: list[tuple[str, str, list[np.ndarray]]] = []
        fold = folds_of(len(table), folds, seed)
        schemes.append(("k-fold", f"{len(np.unique(fold))} folds by config",
                        [fold == f for f in np.unique(fold)]))
        for axis in axes:
            if axis not in table.columns:
                continue
            values = sorted(table[axis].dropna().unique(), key=float)
            if len(values) < 3:
                continue
            schemes.append((f"leave out {axis}", f"each of {len(values)} values",
                            [(table[axis] == v).to_numpy() for v in values]))
        for scheme, what, masks in schemes:
            for m in models:
                parts = []
                for mask in masks:
                    if (~mask).sum() < MIN_CONFIGS or not mask.any():
                        continue
                    parts.append(held_out(table, mask, m, level, seed, calibrate_axes))
                if not parts:
                    continue
                pred = pd.concat(parts, ignore_index=True)
                out.append({"group": label, "scheme": scheme, "held_out": what,
                            "model": "roofline only" if m == "none" else f"roofline + {m}",
                            **errors(pred)})
                if keep_predictions:
                    preds.append(pred.assign(group=label, scheme=scheme, model=m))
    result = pd.DataFrame(out, columns=list(SCORE_COLUMNS))
    if keep_predictions:
        result.attrs["predictions"] = pd.concat(preds, ignore_index=True) if preds else pd.DataFrame()
    return result


def score_on(model: StepTimeModel, rows: pd.DataFrame, peak_flops: float | None = None,
             peak_bytes_per_sec: float | None = None, basis: str | None = None,
             include_unstable: bool = False) -> tuple[dict[str, float], pd.DataFrame]:
    """Errors of ``model`` on the measured configs of ``rows`` (e.g. another platform's, with
    that platform's peaks): the :func:`score` measures and the predictions."""
    meas, _ = measured(rows, include_unstable)
    table = config_table(meas)
    if not len(table):
        raise ParadnnError("predict: no measured configs to score on (ok and stable rows with a "
                           "step time)")
    pred = model.predict(table, peak_flops, peak_bytes_per_sec, basis)
    return errors(pred), pred
