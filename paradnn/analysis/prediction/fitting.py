"""Fitting: one group's model (:func:`fit`: roofline, overhead, correction, then the interval's
calibration) and every group of a frame (:func:`fit_all`, a :class:`Predictor`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

from paradnn.analysis.columns import FAMILY_FIELDS, WORKLOAD_FIELDS, require_columns
from paradnn.analysis.prediction.calibration import calibrate
from paradnn.analysis.prediction.correction import (
    DEFAULT_CORRECTION, Correction, check_correction, learn,
)
from paradnn.analysis.prediction.data import (
    CALIBRATE_AXES, DEFAULT_LEVEL, FOLDS, GROUP_KEY, MIN_CONFIGS, SIZE_COLUMNS, check_level,
    config_table, group_label, groups, is_missing, measured, numeric, select,
)
from paradnn.analysis.prediction.model import FeatureSpace, StepTimeModel
from paradnn.analysis.prediction.roofline import fit_bytes, fit_roofline, peak_of
from paradnn.errors import ParadnnError


def fit(rows: pd.DataFrame, correction: str = DEFAULT_CORRECTION, level: float = DEFAULT_LEVEL,
        folds: int = FOLDS, seed: int = 0, include_unstable: bool = False,
        calibrate_axes: bool = CALIBRATE_AXES) -> StepTimeModel:
    """Fit the model of one group from its rows (``paradnn.load`` rows plus ``SIZE_COLUMNS``).

    The rows must all be of one group (``GROUP_KEY``); ``ok`` and stable rows are used (all
    ``ok`` rows with ``include_unstable``). Raises :class:`ParadnnError` with fewer than
    ``MIN_CONFIGS`` measured configs or without peaks.
    """
    level = check_level(level)
    corr = check_correction(correction)
    require_columns(rows, (*SIZE_COLUMNS, "batch", "step_time_s"), "predict: fit")
    present = [c for c in GROUP_KEY if c in rows.columns]
    grp = groups(rows[present]) if len(rows) else []
    if len(grp) > 1:
        raise ParadnnError(f"predict: fit takes the rows of one group; these hold {len(grp)}: "
                           + "; ".join(group_label(g) for g in grp[:4]))
    group = grp[0] if grp else {}
    meas, n_unstable = measured(rows, include_unstable)
    train = config_table(meas[fit_columns(meas)])
    train = train[(numeric(train, "model_flops_per_step") > 0)].reset_index(drop=True)
    if len(train) < MIN_CONFIGS:
        what = group_label(group) if group else "the rows given"
        raise ParadnnError(
            f"predict: {what} has {len(train)} measured config(s) (ok and stable, with a step "
            f"time and analytic FLOPs; {n_unstable} unstable row(s) left out); a fit needs at "
            f"least {MIN_CONFIGS}")
    with _one_thread():
        model = _fit_core(train, group, corr, level)
        model.n_rows, model.n_unstable = len(meas), n_unstable
        calibrate(model, train, corr, level, folds, seed, calibrate_axes)
    return model


def fit_columns(df: pd.DataFrame) -> list[str]:
    """The columns of ``df`` a fit reads: a store row has some 200, and the folds of a fit
    copy their rows many times over."""
    keep = {*GROUP_KEY, *SIZE_COLUMNS, *WORKLOAD_FIELDS, "status", "stable", "kind",
            "workload_key", "batch", "devices", "step_time_s", "bytes_per_step", "peak_flops",
            "peak_bytes_per_sec", "peak_source"}
    for fields in FAMILY_FIELDS.values():
        keep.update(fields)
    return [c for c in df.columns if c in keep]


def _one_thread() -> Any:
    """BLAS on one thread while fitting: the matrices are small, and on a loaded host a thread
    pool per call made a Gaussian-process fit 6x slower (48 s against 7.5 s, 180 configs)."""
    return learn().threadpool_limits(1)


def _fit_core(train: pd.DataFrame, group: dict[str, Any], corr: Correction,
              level: float, like: Any = None,
              start: tuple[float, float, float] | None = None) -> StepTimeModel:
    """The point model (roofline, overhead, correction) on a config table; no interval yet.
    ``like``: a fitted regressor whose hyperparameters to keep; ``start``: (compute efficiency,
    bandwidth efficiency, overhead s) to start the roofline fit from (a fold of a model)."""
    pf, pb = peak_of(train, "peak_flops"), peak_of(train, "peak_bytes_per_sec")
    if not (np.isfinite(pf) and np.isfinite(pb)):
        raise ParadnnError(f"predict: the rows of {group_label(group)} have no peak_flops or "
                           "peak_bytes_per_sec (the roofline needs both): they were measured "
                           "without a usable peak (record schema 4 and older gave none where only "
                           "probes under load were on record; today a CPU falls back to its "
                           "nominal peak); measure them again, or run `paradnn probe --refresh` "
                           "on a quiet host first")
    sources = train["peak_source"].dropna().astype(str).unique() if "peak_source" in train else []
    coef, bytes_source = fit_bytes(train)
    model = StepTimeModel(
        group=group, correction=corr.name, level=level, peak_flops=pf, peak_bytes_per_sec=pb,
        peak_source=", ".join(sources) or "unknown source", compute_efficiency=1.0,
        bandwidth_efficiency=1.0, overhead_s=0.0, bytes_coef=coef, bytes_source=bytes_source,
        n_configs=len(train), n_rows=len(train), n_unstable=0, quantile=float("inf"), ranges={})
    devices = numeric(train, "devices").fillna(1.0).to_numpy(float)
    flops = numeric(train, "model_flops_per_step").to_numpy(float)
    t = numeric(train, "step_time_s").to_numpy(float)
    ec, eb, o = fit_roofline(flops, model.bytes_per_step(train), t, pf * devices, pb * devices,
                              start)
    model.compute_efficiency, model.bandwidth_efficiency, model.overhead_s = ec, eb, o
    model._space = FeatureSpace.of(str(group.get("family")), train)
    if corr.name != "none":
        y = np.log(t) - np.log(model.baseline(train))
        x = model._space.inputs(train, flops, model.bytes_per_step(train))
        reg = corr.make(len(train), like)
        with warnings.catch_warnings():
            # A GP whose length scale hits its bound says so on every fit: the fit is still the
            # best within the bounds, and the held-out scores judge it.
            warnings.simplefilter("ignore")
            reg.fit(x, y)
        model._regressor = reg
    ranges = {}
    for col in ("model_flops_per_step", "params", *model._space.numeric):
        v = numeric(train, col)
        ranges[col] = (float(v.min()), float(v.max()))
    model.ranges = ranges
    model._train_axes = model._space.axes(train)
    return model


@dataclass
class Predictor:
    """The fitted models of a frame's groups, and why a group got none."""

    models: list[StepTimeModel]
    skipped: dict[str, str]

    def model_for(self, group: Mapping[str, Any]) -> StepTimeModel | None:
        for m in self.models:
            if all(_same(m.group.get(k), group.get(k)) for k in GROUP_KEY if k in m.group):
                return m
        return None


def _same(a: Any, b: Any) -> bool:
    return (is_missing(a) and is_missing(b)) or a == b


def fit_all(df: pd.DataFrame, correction: str = DEFAULT_CORRECTION, level: float = DEFAULT_LEVEL,
            family: str | None = None, include_unstable: bool = False) -> Predictor:
    """One :func:`fit` per group of ``df``'s measured rows (``family`` only, when given).

    Raises :class:`ParadnnError` when nothing can be fitted: no measured rows, no rows of
    ``family``, or no group with ``MIN_CONFIGS`` configs (each group's reason is named).
    """
    level = check_level(level)
    check_correction(correction)
    if not len(df):
        raise ParadnnError("predict: the store has no rows; measure some first "
                           "(`paradnn sweep FILE --budget N` measures only what a fit needs)")
    rows = df
    if family is not None:
        have = sorted(map(str, df["family"].dropna().unique())) if "family" in df else []
        rows = df[df["family"] == family] if "family" in df else df.iloc[0:0]
        if not len(rows):
            raise ParadnnError(f"predict: family={family!r} has no rows in the store; "
                               f"families present: {', '.join(have) or 'none'}")
    meas, _ = measured(rows, include_unstable=True)
    if not len(meas):
        counts = rows["status"].value_counts().to_dict() if "status" in rows else {}
        raise ParadnnError("predict: no ok rows with a step time to fit (rows by status: "
                           + (", ".join(f"{k} {v}" for k, v in counts.items()) or "none") + ")")
    models, skipped = [], {}
    for g in groups(meas):
        try:
            models.append(fit(select(rows, g), correction, level,
                              include_unstable=include_unstable))
        except ParadnnError as exc:
            skipped[group_label(g)] = str(exc).removeprefix("predict: ")
    if not models:
        raise ParadnnError("predict: no group can be fitted: " + "; ".join(skipped.values()))
    return Predictor(models, skipped)
