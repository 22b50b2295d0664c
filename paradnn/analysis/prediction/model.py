"""A fitted step-time model of one group (:class:`StepTimeModel`): its feature space, its
predictions with intervals, and the interval's difficulty (distance to the nearest fitted configs
and their residuals)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from paradnn.analysis.columns import FAMILY_FIELDS, require_columns
from paradnn.analysis.prediction.correction import learn
from paradnn.analysis.prediction.data import (
    FOLDS, NEIGHBOURS, SIZE_COLUMNS, group_label, numeric,
)


def _axes(family: str, train: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(numeric axes, categorical axes) of ``family`` that vary in ``train``, batch included."""
    fields = [*FAMILY_FIELDS.get(family, ()), "batch"]
    numeric, categorical = [], []
    for c in fields:
        if c not in train.columns or train[c].dropna().nunique() <= 1:
            continue
        if pd.to_numeric(train[c], errors="coerce").notna().all():
            numeric.append(c)
        else:
            categorical.append(c)
    return numeric, categorical


@dataclass
class FeatureSpace:
    """The feature spaces of one fit: the axes (for distances) and the correction's inputs."""

    numeric: list[str]
    categorical: dict[str, list[Any]]
    low: np.ndarray
    span: np.ndarray

    @classmethod
    def of(cls, family: str, train: pd.DataFrame) -> "FeatureSpace":
        numeric, categorical = _axes(family, train)
        logs = np.log2(train[numeric].to_numpy(float)) if numeric else np.zeros((len(train), 0))
        low = logs.min(axis=0) if numeric else np.zeros(0)
        span = (logs.max(axis=0) - low) if numeric else np.zeros(0)
        span = np.where(span > 0, span, 1.0)
        cats = {c: sorted(train[c].dropna().astype(str).unique()) for c in categorical}
        return cls(numeric, cats, low, span)

    def axes(self, rows: pd.DataFrame) -> np.ndarray:
        """Each row's hyperparameters: log2 of the numeric axes scaled to [0, 1] over the fit's
        configs, then one 0/1 column per categorical value."""
        parts = []
        if self.numeric:
            vals = pd.DataFrame({c: numeric(rows, c) for c in self.numeric}).to_numpy(float)
            parts.append((np.log2(vals) - self.low) / self.span)
        for c, values in self.categorical.items():
            col = rows[c].astype(str).to_numpy() if c in rows.columns else np.full(len(rows), "")
            parts.append(np.stack([(col == v).astype(float) for v in values], axis=1))
        return np.concatenate(parts, axis=1) if parts else np.zeros((len(rows), 0))

    def inputs(self, rows: pd.DataFrame, flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        """The correction's inputs: the axes, log FLOPs, log bytes, log parameters and log
        arithmetic intensity."""
        params = numeric(rows, "params").to_numpy(float)
        extra = np.stack([np.log(flops), np.log(nbytes), np.log(np.maximum(params, 1.0)),
                          np.log(flops / nbytes)], axis=1)
        return np.concatenate([self.axes(rows), extra], axis=1)


@dataclass
class StepTimeModel:
    """A fitted step-time model of one group (see the module notes). Times in s, rates per
    device (FLOP/s, B/s), bytes in B."""

    group: dict[str, Any]
    correction: str
    level: float
    peak_flops: float
    peak_bytes_per_sec: float
    peak_source: str
    compute_efficiency: float
    bandwidth_efficiency: float
    overhead_s: float
    bytes_coef: tuple[float, float, float]
    bytes_source: str
    n_configs: int
    n_rows: int
    n_unstable: int
    quantile: float  # q of the conformal interval (inf: too few configs)
    ranges: dict[str, tuple[float, float]]
    fit_id: str = ""
    #: Held-out error of the fit itself: median and p90 absolute percentage error of examples/s
    #: (fractions) of its configs, each predicted by the fold model that did not see it.
    cv_median_ape: float = float("nan")
    cv_p90_ape: float = float("nan")
    _space: FeatureSpace | None = field(default=None, repr=False)
    _regressor: Any = field(default=None, repr=False)
    _train_axes: np.ndarray | None = field(default=None, repr=False)
    _residuals: np.ndarray | None = field(default=None, repr=False)  # out-of-fold |log r|
    _scale0: float = field(default=1.0, repr=False)
    _res_median: float = field(default=0.0, repr=False)

    # -- pieces ----------------------------------------------------------------------------
    def bytes_per_step(self, rows: pd.DataFrame) -> np.ndarray:
        """Estimated bytes of one step (B), from the analytic sizes."""
        a, b, c = self.bytes_coef
        est = (a * numeric(rows, "state_bytes") + b * numeric(rows, "activation_bytes")
               + c * numeric(rows, "batch_bytes")).to_numpy(float)
        return np.maximum(est, 1.0)

    def roofline_terms(self, rows: pd.DataFrame, peak_flops: float | None = None,
                       peak_bytes_per_sec: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(compute time, memory time) in s of each row's step at the fitted efficiencies."""
        devices = numeric(rows, "devices").fillna(1.0).to_numpy(float)
        pf = (peak_flops or self.peak_flops) * devices
        pb = (peak_bytes_per_sec or self.peak_bytes_per_sec) * devices
        flops = numeric(rows, "model_flops_per_step").to_numpy(float)
        return (flops / (self.compute_efficiency * pf),
                self.bytes_per_step(rows) / (self.bandwidth_efficiency * pb))

    def baseline(self, rows: pd.DataFrame, **peaks: float | None) -> np.ndarray:
        """The pure-roofline step time (s): overhead + the binding roofline term."""
        tc, tm = self.roofline_terms(rows, **peaks)
        return self.overhead_s + np.maximum(tc, tm)

    def _log_correction(self, rows: pd.DataFrame) -> np.ndarray:
        if self._regressor is None:
            return np.zeros(len(rows))
        flops = numeric(rows, "model_flops_per_step").to_numpy(float)
        x = self._space.inputs(rows, flops, self.bytes_per_step(rows))
        return np.asarray(self._regressor.predict(x), dtype=float)

    def difficulty(self, rows: pd.DataFrame) -> np.ndarray:
        """Each row's interval scale: (a floor + the distance to the nearest fitted config in
        the scaled axes) x (the mean out-of-fold error of its nearest fitted configs, relative
        to the median)."""
        x = self._space.axes(rows)
        return difficulty_of(x, self._train_axes, self._residuals, self._scale0, self._res_median)

    def predict(self, rows: pd.DataFrame, peak_flops: float | None = None,
                peak_bytes_per_sec: float | None = None, basis: str | None = None) -> pd.DataFrame:
        """The predictions for ``rows`` (their fields and ``SIZE_COLUMNS``): a copy with the
        ``PREDICTION_COLUMNS`` added. ``peak_flops`` (FLOP/s) and ``peak_bytes_per_sec`` (B/s)
        of one device of another platform make it a cross-platform estimate, whose ``basis``
        says so (given by the caller, which knows the platform)."""
        require_columns(rows, (*SIZE_COLUMNS, "batch"), "predict")
        out = rows.copy()
        tc, tm = self.roofline_terms(rows, peak_flops, peak_bytes_per_sec)
        base = self.overhead_s + np.maximum(tc, tm)
        t = base * np.exp(self._log_correction(rows))
        spread = self.quantile * self.difficulty(rows)
        low, high = t * np.exp(-spread), t * np.exp(spread)
        batch = numeric(rows, "batch").to_numpy(float)
        out["predicted_step_time_s"] = t
        out["predicted_step_time_low_s"] = low
        out["predicted_step_time_high_s"] = high
        out["predicted_examples_per_sec"] = batch / t
        with np.errstate(divide="ignore"):  # no finite interval: 0 and inf examples/s
            out["predicted_examples_per_sec_low"] = batch / high
            out["predicted_examples_per_sec_high"] = batch / low
        out["roofline_step_time_s"] = base
        out["predicted_bound"] = np.where(tc >= tm, "compute", "memory")
        out["prediction_level"] = self.level
        out["prediction_relative_width"] = (high - low) / t
        out["prediction_out_of_range"] = self.out_of_range(rows)
        out["prediction_basis"] = basis or f"fitted on {self.n_configs} measured configs of this platform"
        out["prediction_model"] = self.describe()
        out["prediction_fit_id"] = self.fit_id
        return out

    def out_of_range(self, rows: pd.DataFrame) -> list[str]:
        """Per row: the quantities outside the fitted range, e.g. ``model_flops_per_step 3e+12
        above 1.2e+11``, or "" when none."""
        notes = [[] for _ in range(len(rows))]
        for col, (lo, hi) in self.ranges.items():
            if col not in rows.columns:
                continue
            v = numeric(rows, col).to_numpy(float)
            for i, x in enumerate(v):
                if np.isfinite(x) and x < lo * (1 - 1e-9):
                    notes[i].append(f"{col} {_show(x)} below the fitted {_show(lo)}")
                elif np.isfinite(x) and x > hi * (1 + 1e-9):
                    notes[i].append(f"{col} {_show(x)} above the fitted {_show(hi)}")
        for col, values in (self._space.categorical.items() if self._space else ()):
            if col in rows.columns:
                for i, v in enumerate(rows[col].astype(str)):
                    if v not in values:
                        notes[i].append(f"{col} {v} not fitted ({', '.join(values)})")
        return ["; ".join(n) for n in notes]

    def describe(self) -> str:
        """One line: the group, the data, the fitted roofline and the correction."""
        interval = (f"{self.level:.0%} interval q={self.quantile:.3g}" if np.isfinite(self.quantile)
                    else f"no finite {self.level:.0%} interval ({self.n_configs} configs, needs "
                         f"{min_for_interval(self.level)})")
        held = (f"{FOLDS}-fold held-out |error| of examples/s median {100 * self.cv_median_ape:.1f}%"
                f", p90 {100 * self.cv_p90_ape:.1f}%" if np.isfinite(self.cv_median_ape) else
                "no held-out error (too few configs)")
        return (f"{group_label(self.group)}: {self.n_configs} configs ({self.n_rows} rows); "
                f"compute {self.compute_efficiency:.3g} x {self.peak_flops:.3g} FLOP/s, "
                f"bandwidth {self.bandwidth_efficiency:.3g} x {self.peak_bytes_per_sec:.3g} B/s "
                f"({self.peak_source}), overhead {self.overhead_s:.3g} s/step, bytes "
                f"{self.bytes_source}; correction {self.correction}; {interval}; {held}")


def _show(x: float) -> str:
    """A hyperparameter as written (4096), a size in 3 digits (1.2e+11)."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e6 else f"{x:.3g}"


def min_for_interval(level: float) -> int:
    """Fewest calibration configs for a finite conformal interval at ``level``."""
    return int(math.ceil(level / (1 - level) - 1e-9))


#: Largest (rows x fitted configs) distance matrix computed whole; beyond it a k-d tree finds
#: the nearest configs (the whole matrix grows as n^2: 20,000 configs took 3 GB, and a tree
#: is faster from some 500 x 500 on).
DENSE_DISTANCES = 250_000


def nearest_configs(x: np.ndarray, train_x: np.ndarray, k: int,
             exclude_self: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(distances, indices) of the ``k`` configs of ``train_x`` nearest each row of ``x``
    (Euclidean, nearest first; ``exclude_self``: ``x`` is ``train_x`` and a row is not its own
    neighbour). ``k`` must be at most ``len(train_x)`` (less one with ``exclude_self``)."""
    if len(x) * len(train_x) <= DENSE_DISTANCES:
        d = np.sqrt(((x[:, None, :] - train_x[None, :, :]) ** 2).sum(axis=2))  # (rows, train)
        if exclude_self:
            np.fill_diagonal(d, np.inf)
        idx = np.argsort(d, axis=1)[:, :k]
        return np.take_along_axis(d, idx, axis=1), idx
    tree = learn().cKDTree(train_x)
    dist, idx = tree.query(x, k=k + (1 if exclude_self else 0))
    dist, idx = dist.reshape(len(x), -1), idx.reshape(len(x), -1)
    if exclude_self:
        # Drop each row's own entry (distance 0; with duplicates, whichever copy is its own).
        own = idx == np.arange(len(x))[:, None]
        drop = np.where(own.any(axis=1), own.argmax(axis=1), idx.shape[1] - 1)
        keep = np.ones_like(own)
        keep[np.arange(len(x)), drop] = False
        dist = dist[keep].reshape(len(x), -1)
        idx = idx[keep].reshape(len(x), -1)
    return dist, idx


def difficulty_of(x: np.ndarray, train_x: np.ndarray, residuals: np.ndarray, scale0: float,
                res_median: float, exclude_self: bool = False) -> np.ndarray:
    if train_x is None or not len(train_x):
        return np.ones(len(x))
    k = min(NEIGHBOURS, len(train_x) - (1 if exclude_self else 0))
    if k < 1:
        return np.full(len(x), scale0)
    dist, idx = nearest_configs(x, train_x, k, exclude_self)
    nearest = np.where(np.isfinite(dist[:, 0]), dist[:, 0], 0.0)
    if res_median > 0:
        local = residuals[idx].mean(axis=1) / res_median
        local = np.clip(local, 0.25, 4.0)  # one outlier neighbour must not make it 0 or huge
    else:
        local = np.ones(len(x))
    return (scale0 + nearest) * local
