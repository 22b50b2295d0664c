"""Step-time prediction: a roofline model with a learned correction and calibrated intervals.

Pure functions from DataFrames to a fitted model and back (no framework, no file, no clock).
:func:`sized` adds the closed-form sizes of each config (:mod:`paradnn.sizes`);
:mod:`paradnn.predictor` reads the store and writes the predictions as rows of their own
(``status = "predicted"``).

The model of one (platform, framework, dtype, family) group, fitted on its ``ok`` and stable
rows (repeats of a config are one config, their median step time):

1. **Roofline term** ``t_roof = max(F / (e_c P), B / (e_b W))``: ``F`` the analytic FLOPs of a
   step (``model_flops_per_step``), ``P`` the device's peak FLOP/s and ``W`` its peak bandwidth
   (the rows' ``peak_flops`` and ``peak_bytes_per_sec``, times ``devices``), ``B`` the bytes of a
   step. ``B`` is analytic too, so that configs never compiled can be predicted: ``B = a S + b A
   + c I`` with ``S`` the training state bytes (weights and optimizer slots), ``A`` the
   activation bytes and ``I`` the input batch bytes (:func:`paradnn.sizes.config_sizes`), ``a, b,
   c >= 0`` fitted by non-negative least squares to XLA's ``bytes_per_step`` of the measured
   rows. ``e_c`` (compute efficiency, a fraction of the peak) and ``e_b`` (bandwidth
   efficiency; above 1 where caches serve XLA's byte count) are fitted.
2. **Per-step overhead** ``o`` (s): ``t_base = o + t_roof``; ``e_c, e_b, o`` are fitted by
   robust least squares on log step time (relative errors).
3. **Learned correction** ``g``: a scikit-learn regressor of ``log(t / t_base)`` on the log
   hyperparameters, log FLOPs, log bytes and log parameters (``CORRECTIONS``; the default was
   chosen on held-out numbers, docs/prediction.md). ``t = t_base * exp(g)``.
4. **Interval**: normalized split-conformal on K-fold cross-validation residuals. Each config's
   out-of-fold log residual ``r`` is divided by a difficulty ``s(x)`` that grows with the
   distance to the nearest measured config and with the residuals of its measured neighbours;
   the ``ceil((n+1) level)``-th smallest of ``|r| / s`` is ``q`` and the interval is ``t
   exp(+-q s(x))``. Fewer than ``1/(1-level) - 1`` configs give no finite interval (infinite
   bounds, said so).

A config outside the fitted range of FLOPs, parameters or any varying hyperparameter is flagged
(``prediction_out_of_range``). :func:`score` reports held-out errors (k-fold by config and
leave-one-value-out along each axis) beside the pure-roofline baseline.
"""

from __future__ import annotations

import copy
import functools
import math
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from paradnn import sizes
from paradnn.analysis.columns import (
    FAMILY_FIELDS, PLATFORM_KEY, WORKLOAD_FIELDS, drop_unstable, ok_rows, platform_label,
    require_columns,
)
from paradnn.analysis.heatmap import heatmap
from paradnn.errors import ParadnnError
from paradnn.record import PREDICTED
from paradnn.workload import Workload, spec_from_dict

#: One model per group: a platform, a framework, a dtype and a family.
GROUP_KEY: tuple[str, ...] = (*PLATFORM_KEY, "framework", "dtype", "family")
#: Analytic sizes every row needs, fitted or predicted (``paradnn.sizes.config_sizes`` names).
SIZE_COLUMNS: tuple[str, ...] = ("model_flops_per_step", "params", "state_bytes",
                                 "activation_bytes", "batch_bytes")
#: Nominal coverage of the prediction intervals.
DEFAULT_LEVEL = 0.9
#: Folds of the cross-validation that calibrates the intervals (fewer with fewer configs).
FOLDS = 5
#: Fewest configs a group needs: the roofline term has three parameters, and one more config
#: is left to check them on.
MIN_CONFIGS = 4
#: Neighbours whose residuals set a config's local difficulty.
NEIGHBOURS = 5
#: Calibrate the intervals on leave-one-axis-value-out residuals too, not only K-fold ones.
CALIBRATE_AXES = True
#: Axes of the leave-one-value-out scores (extrapolation along each), where they vary.
SCORE_AXES: tuple[str, ...] = ("nodes", "layers", "batch", "filters", "blocks", "embed", "length")

#: Columns of a predicted row: name -> (unit, where it comes from).
PREDICTION_COLUMNS: dict[str, tuple[str, str]] = {
    "predicted_step_time_s": ("s", "predicted: roofline term + overhead, times the learned "
                              "correction (paradnn.analysis.prediction)"),
    "predicted_step_time_low_s": ("s", "predicted: lower bound of the interval (prediction_level)"),
    "predicted_step_time_high_s": ("s", "predicted: upper bound of the interval; inf when the "
                                   "fit had too few configs for one"),
    "predicted_examples_per_sec": ("examples/s", "predicted: batch / predicted_step_time_s"),
    "predicted_examples_per_sec_low": ("examples/s", "predicted: batch / predicted_step_time_high_s"),
    "predicted_examples_per_sec_high": ("examples/s", "predicted: batch / predicted_step_time_low_s"),
    "roofline_step_time_s": ("s", "the pure-roofline baseline: overhead + max(FLOPs / fitted "
                             "compute rate, bytes / fitted bandwidth), no learned correction"),
    "predicted_bound": ("", "compute or memory: the side of the roofline term that binds"),
    "prediction_level": ("1", "nominal coverage of the interval (0.9: 90 percent)"),
    "prediction_relative_width": ("1", "(high - low) / predicted step time"),
    "prediction_out_of_range": ("", "why the config lies outside what the model was fitted on "
                                "(FLOPs, parameters or a hyperparameter), or empty"),
    "prediction_basis": ("", "fitted on this platform's measurements, or a cross-platform "
                         "estimate with its assumption"),
    "prediction_model": ("", "the fit: group, configs, efficiencies, overhead, correction"),
    "prediction_fit_id": ("", "identity of the fit (its training rows and options)"),
}


@functools.lru_cache(maxsize=1)
def _learn() -> types.SimpleNamespace:
    """scikit-learn, scipy.optimize and threadpoolctl, imported at the first fit.

    The one exception in this module to imports at the top, and why: they take about 4.5 s to
    import on this project's 2-core host, and this module is loaded by every ``paradnn``
    command (the CLI registers ``paradnn predict``) and by the report (its Prediction section),
    which, without a fit to make, then started in 7.5 s instead of 2.7 s
    (``python -X importtime -m paradnn --help``)."""
    from scipy.linalg import solve
    from scipy.optimize import least_squares, nnls
    from scipy.spatial import cKDTree
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler
    from threadpoolctl import threadpool_limits  # a scikit-learn dependency

    return types.SimpleNamespace(**{f.__name__: f for f in (
        solve, least_squares, nnls, cKDTree, GradientBoostingRegressor, GaussianProcessRegressor, RBF,
        ConstantKernel, WhiteKernel, RidgeCV, make_pipeline, PolynomialFeatures, StandardScaler,
        threadpool_limits)})


#: Most configs the Gaussian-process correction fits exactly (its cost grows as n^3 in time
#: and n^2 in memory) and the interval's folds refit from scratch; bigger fits use
#: :class:`InducingGP` and :class:`_FoldRefits`. Every grid of the prediction study
#: (docs/prediction.md: 40-180 configs) fits exactly; up to ``GP_INDUCING`` configs every
#: config is an inducing one (the exact GP's mean), only the folds are cheaper.
GP_EXACT_MAX = 200
#: Inducing configs of :class:`InducingGP` (chosen farthest-first over the scaled inputs).
GP_INDUCING = 300
#: Most configs of a fit whose folds fit their roofline from the 8 starting points, as the fit
#: does; bigger fits' folds start from the fit's optimum only (their data are most of the
#: fit's), 5x faster. The prediction study's errors are the same either way, its coverages
#: move by one to three configs (docs/prediction.md, "Many configs"); 200 keeps them exactly.
FOLD_MULTISTART_MAX = 50


def farthest_first(x: np.ndarray, k: int, chosen: Sequence[int] = ()) -> list[int]:
    """``k`` indices of rows of ``x`` spread over the space: the row nearest the centre (unless
    some are ``chosen`` already), then repeatedly the row farthest from every chosen one.

    Keeps each row's distance to its nearest chosen row and updates it with the newest pick
    only: ``O(len(x) k)`` distances instead of ``O(len(x) k^2)``; the picks are the same."""
    picked = list(chosen)
    n = len(x)
    if not n:
        return []
    if not picked:
        picked.append(int(np.argmin(((x - x.mean(axis=0)) ** 2).sum(axis=1))))
    nearest = np.full(n, np.inf)
    for p in picked:
        nearest = np.minimum(nearest, np.sqrt(((x - x[p]) ** 2).sum(axis=1)))
    want = min(k + len(chosen), n)
    while len(picked) < want:
        d = nearest.copy()
        d[picked] = -1.0
        p = int(np.argmax(d))
        picked.append(p)
        nearest = np.minimum(nearest, np.sqrt(((x - x[p]) ** 2).sum(axis=1)))
    return picked[len(chosen):]


class InducingGP:
    """A Gaussian-process regressor for many configs: the subset-of-regressors approximation on
    ``m`` inducing configs (Quinonero-Candela and Rasmussen 2005), with a zero mean like the
    exact one.

    The inducing configs are ``m`` training configs chosen farthest-first (the rule of the
    adaptive sweep's start); the kernel's hyperparameters are optimized on them by an exact
    GP (unless ``optimize`` is False: a fold reusing a fitted kernel), then the mean is fitted
    to **every** training config: ``w = (s2 Kmm + Kmn Knm)^-1 Kmn y``, ``f(x) = k(x, Z) w``, with
    ``s2`` the kernel's white-noise level. Cost ``O(n m^2)`` time and ``O(n m)`` memory, against
    ``O(n^3)`` and ``O(n^2)`` exactly; with ``n <= m`` the mean is the exact GP's. Inputs are
    standardized first (as the exact GP's pipeline does), so the kernel's length scale is in
    standard deviations of each input.
    """

    def __init__(self, kernel: Any, m: int = GP_INDUCING, optimize: bool = True) -> None:
        self.kernel = kernel
        self.m = m
        self.optimize = optimize

    def _scaled(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=float) - self.mean_) / self.scale_

    def fit(self, x: np.ndarray, y: np.ndarray) -> InducingGP:
        """Fit on inputs ``x`` (configs x features) and targets ``y`` (log corrections)."""
        L = _learn()
        self.mean_ = x.mean(axis=0)
        sd = x.std(axis=0)
        self.scale_ = np.where(sd > 0, sd, 1.0)
        x = self._scaled(x)
        idx = farthest_first(x, self.m)
        z = x[idx]
        if self.optimize:
            gp = L.GaussianProcessRegressor(self.kernel, normalize_y=False,
                                            n_restarts_optimizer=0, random_state=0)
            gp.fit(z, y[idx])
            self.kernel_ = gp.kernel_
        else:
            self.kernel_ = self.kernel
        signal, noise = self.kernel_.k1, float(self.kernel_.k2.noise_level)
        kmm = signal(z)
        kmn = signal(z, x)
        a = noise * kmm + kmn @ kmn.T
        # A little jitter: farthest-first configs are distinct, but two may be close.
        a[np.diag_indices_from(a)] += 1e-10 * max(float(np.trace(a)) / len(a), 1e-300)
        self.w_ = L.solve(a, kmn @ y, assume_a="pos")
        self.z_ = z
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The mean log correction at inputs ``x``."""
        return self.kernel_.k1(self._scaled(x), self.z_) @ self.w_


@dataclass(frozen=True)
class Correction:
    """A learned correction: ``make()`` returns an unfitted scikit-learn regressor."""

    name: str
    description: str

    def make(self, n: int, like: Any = None) -> Any:
        """The regressor for ``n`` training configs. ``like``: a fitted regressor of this kind
        whose hyperparameters to keep (the GP's kernel: the folds that calibrate an interval
        reuse the kernel fitted on all the training configs instead of optimizing it again)."""
        L = _learn()
        if self.name == "ridge":
            return L.make_pipeline(L.StandardScaler(), L.RidgeCV(alphas=np.logspace(-3, 3, 13)))
        if self.name == "ridge2":
            return L.make_pipeline(L.StandardScaler(), L.PolynomialFeatures(2, include_bias=False),
                                   L.StandardScaler(), L.RidgeCV(alphas=np.logspace(-3, 3, 13)))
        if self.name == "gbr":
            return L.GradientBoostingRegressor(n_estimators=150, max_depth=2, learning_rate=0.05,
                                               subsample=0.8 if n >= 20 else 1.0, random_state=0)
        if self.name == "gp":
            kernel = (L.ConstantKernel(0.1, (1e-4, 10.0)) * L.RBF(1.0, (0.05, 100.0))
                      + L.WhiteKernel(0.01, (1e-6, 1.0)))
            fixed = like is not None
            if fixed:
                kernel = (like if isinstance(like, InducingGP) else like[-1]).kernel_
            if n > GP_EXACT_MAX:
                # An exact GP costs n^3: beyond GP_EXACT_MAX configs, the same kernel on
                # GP_INDUCING inducing configs (docs/prediction.md, "Many configs").
                return InducingGP(kernel, GP_INDUCING, optimize=not fixed)
            # Zero mean (no normalize_y): far from the data the correction fades to 0, so the
            # prediction falls back to the roofline term instead of extrapolating a trend.
            return L.make_pipeline(L.StandardScaler(), L.GaussianProcessRegressor(
                kernel, normalize_y=False, n_restarts_optimizer=0, random_state=0,
                optimizer=None if fixed else "fmin_l_bfgs_b"))
        raise ParadnnError(f"correction {self.name!r} has no regressor")


#: The learned corrections, by name; ``none`` is the pure-roofline baseline.
CORRECTIONS: dict[str, Correction] = {c.name: c for c in (
    Correction("none", "no correction: the pure roofline term plus overhead"),
    Correction("ridge", "ridge regression, linear in the log features"),
    Correction("ridge2", "ridge regression on the log features and their pairwise products"),
    Correction("gbr", "gradient-boosted trees (150 trees of depth 2) on the log features"),
    Correction("gp", "Gaussian process (RBF + white noise, zero mean) on the log features"),
)}
#: The correction used unless one is named (chosen on held-out scores: docs/prediction.md).
DEFAULT_CORRECTION = "gp"


def _check_correction(name: str) -> Correction:
    if name not in CORRECTIONS:
        raise ParadnnError(f"correction={name!r}; allowed: {', '.join(CORRECTIONS)}")
    return CORRECTIONS[name]


def _check_level(level: float) -> float:
    if not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ParadnnError(f"level={level!r}; allowed: a coverage strictly between 0 and 1 "
                           "(0.9 for 90 percent intervals)")
    return float(level)


# -- the training table: one row per measured config ------------------------------------------

def group_label(group: Mapping[str, Any]) -> str:
    """``fc float32 jax on cpu``: a group as a person reads it."""
    plat = platform_label({k: group.get(k) for k in PLATFORM_KEY})
    return f"{group.get('family')} {group.get('dtype')} {group.get('framework')} on {plat}"


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    if col not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[col], errors="coerce")


def measured(df: pd.DataFrame, include_unstable: bool = False) -> tuple[pd.DataFrame, int]:
    """``(rows, n_unstable_left_out)``: the ``ok`` rows with a step time, without unstable ones
    (``stable`` False) unless ``include_unstable``. Predicted rows are never measurements."""
    rows = ok_rows(df)
    rows = rows[_num(rows, "step_time_s") > 0]
    return drop_unstable(rows, include_unstable)


def workload_of(row: Mapping[str, Any]) -> Workload | None:
    """The Workload of a stored row; None for a family without closed forms (a real model) or a
    row whose fields do not make a valid workload."""
    family = row.get("family")
    if not isinstance(family, str) or family not in FAMILY_FIELDS or row.get("kind") == "real":
        return None
    spec = {"family": family}
    for f in FAMILY_FIELDS[family]:
        v = row.get(f)
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        spec[f] = int(v) if isinstance(v, float) and v.is_integer() else v
    try:
        return Workload(spec_from_dict(spec), int(row["batch"]), row.get("dtype") or "float32",
                        row.get("optimizer") or None, int(row.get("devices") or 1),
                        row.get("framework") or "jax")
    except (ParadnnError, TypeError, ValueError):
        return None


def size_table(workloads: Sequence[Workload]) -> pd.DataFrame:
    """``workload_key`` and the ``SIZE_COLUMNS`` of each workload, from the closed forms
    (:func:`paradnn.sizes.config_sizes`: FLOP, parameters, B; NaN where a family has none)."""
    rows = []
    for w in {w.key: w for w in workloads}.values():
        found = sizes.config_sizes(w)
        rows.append({"workload_key": w.key, **{c: found[c] for c in SIZE_COLUMNS}})
    return pd.DataFrame.from_records(rows, columns=["workload_key", *SIZE_COLUMNS])


def sized(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (store rows) with the ``SIZE_COLUMNS`` from the closed forms (``params`` and
    ``model_flops_per_step`` as recorded where a row has them). Rows of families without closed
    forms (real models) get NaN sizes and are never fitted."""
    if not len(df):
        return df.assign(**{c: pd.Series(dtype=float) for c in SIZE_COLUMNS if c not in df})
    out = df.copy()
    workloads = {}
    for i, row in out.iterrows():
        w = workload_of(row)
        if w is not None:
            workloads[i] = w
    table = size_table(list(workloads.values())).set_index("workload_key")
    keys = pd.Series({i: w.key for i, w in workloads.items()}, dtype=object)
    for col in SIZE_COLUMNS:
        computed = keys.map(table[col]) if len(keys) else pd.Series(dtype=float)
        have = pd.to_numeric(out[col], errors="coerce") if col in out.columns else None
        filled = computed.reindex(out.index).astype(float)
        out[col] = have.fillna(filled) if have is not None else filled
    return out


def config_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per config (``workload_key``, else the workload fields) of measured ``rows``:
    the first row's fields, the median ``step_time_s`` (s) and ``repeats`` (rows merged)."""
    if not len(rows):
        return rows.assign(repeats=pd.Series(dtype=int))
    key = "workload_key" if "workload_key" in rows.columns and rows["workload_key"].notna().all() \
        else None
    if key is None:
        cols = [c for c in WORKLOAD_FIELDS if c in rows.columns]
        ident = rows[cols].astype(str).agg("|".join, axis=1)
    else:
        ident = rows[key]
    g = rows.assign(_id=ident.to_numpy(), step_time_s=_num(rows, "step_time_s"))
    first = g.groupby("_id", sort=False).first()
    first["step_time_s"] = g.groupby("_id", sort=False)["step_time_s"].median()
    first["repeats"] = g.groupby("_id", sort=False).size()
    return first.reset_index(drop=True)


def groups(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The groups (``GROUP_KEY`` values) present in ``df``, in a stable order."""
    cols = [c for c in GROUP_KEY if c in df.columns]
    if not len(df):
        return []
    keys = df[cols].drop_duplicates().sort_values(cols, key=lambda s: s.astype(str))
    return [dict(zip(cols, values)) for values in keys.itertuples(index=False, name=None)]


def select(df: pd.DataFrame, group: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of ``df`` in ``group`` (a missing value matches a missing value)."""
    mask = pd.Series(True, index=df.index)
    for col, v in group.items():
        if col not in df.columns:
            continue
        mask &= df[col].isna() if _missing(v) else (df[col] == v)
    return df[mask]


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


# -- features ---------------------------------------------------------------------------------

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
class _Space:
    """The feature spaces of one fit: the axes (for distances) and the correction's inputs."""

    numeric: list[str]
    categorical: dict[str, list[Any]]
    low: np.ndarray
    span: np.ndarray

    @classmethod
    def of(cls, family: str, train: pd.DataFrame) -> "_Space":
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
            vals = pd.DataFrame({c: _num(rows, c) for c in self.numeric}).to_numpy(float)
            parts.append((np.log2(vals) - self.low) / self.span)
        for c, values in self.categorical.items():
            col = rows[c].astype(str).to_numpy() if c in rows.columns else np.full(len(rows), "")
            parts.append(np.stack([(col == v).astype(float) for v in values], axis=1))
        return np.concatenate(parts, axis=1) if parts else np.zeros((len(rows), 0))

    def inputs(self, rows: pd.DataFrame, flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        """The correction's inputs: the axes, log FLOPs, log bytes, log parameters and log
        arithmetic intensity."""
        params = _num(rows, "params").to_numpy(float)
        extra = np.stack([np.log(flops), np.log(nbytes), np.log(np.maximum(params, 1.0)),
                          np.log(flops / nbytes)], axis=1)
        return np.concatenate([self.axes(rows), extra], axis=1)


# -- the model --------------------------------------------------------------------------------

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
    _space: _Space | None = field(default=None, repr=False)
    _regressor: Any = field(default=None, repr=False)
    _train_axes: np.ndarray | None = field(default=None, repr=False)
    _residuals: np.ndarray | None = field(default=None, repr=False)  # out-of-fold |log r|
    _scale0: float = field(default=1.0, repr=False)
    _res_median: float = field(default=0.0, repr=False)

    # -- pieces ----------------------------------------------------------------------------
    def bytes_per_step(self, rows: pd.DataFrame) -> np.ndarray:
        """Estimated bytes of one step (B), from the analytic sizes."""
        a, b, c = self.bytes_coef
        est = (a * _num(rows, "state_bytes") + b * _num(rows, "activation_bytes")
               + c * _num(rows, "batch_bytes")).to_numpy(float)
        return np.maximum(est, 1.0)

    def roofline_terms(self, rows: pd.DataFrame, peak_flops: float | None = None,
                       peak_bytes_per_sec: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(compute time, memory time) in s of each row's step at the fitted efficiencies."""
        devices = _num(rows, "devices").fillna(1.0).to_numpy(float)
        pf = (peak_flops or self.peak_flops) * devices
        pb = (peak_bytes_per_sec or self.peak_bytes_per_sec) * devices
        flops = _num(rows, "model_flops_per_step").to_numpy(float)
        return (flops / (self.compute_efficiency * pf),
                self.bytes_per_step(rows) / (self.bandwidth_efficiency * pb))

    def baseline(self, rows: pd.DataFrame, **peaks: float | None) -> np.ndarray:
        """The pure-roofline step time (s): overhead + the binding roofline term."""
        tc, tm = self.roofline_terms(rows, **peaks)
        return self.overhead_s + np.maximum(tc, tm)

    def _log_correction(self, rows: pd.DataFrame) -> np.ndarray:
        if self._regressor is None:
            return np.zeros(len(rows))
        flops = _num(rows, "model_flops_per_step").to_numpy(float)
        x = self._space.inputs(rows, flops, self.bytes_per_step(rows))
        return np.asarray(self._regressor.predict(x), dtype=float)

    def difficulty(self, rows: pd.DataFrame) -> np.ndarray:
        """Each row's interval scale: (a floor + the distance to the nearest fitted config in
        the scaled axes) x (the mean out-of-fold error of its nearest fitted configs, relative
        to the median)."""
        x = self._space.axes(rows)
        return _difficulty(x, self._train_axes, self._residuals, self._scale0, self._res_median)

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
        batch = _num(rows, "batch").to_numpy(float)
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
            v = _num(rows, col).to_numpy(float)
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
                         f"{_min_for_interval(self.level)})")
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


def _min_for_interval(level: float) -> int:
    """Fewest calibration configs for a finite conformal interval at ``level``."""
    return int(math.ceil(level / (1 - level) - 1e-9))


#: Largest (rows x fitted configs) distance matrix computed whole; beyond it a k-d tree finds
#: the nearest configs (the whole matrix grows as n^2: 20,000 configs took 3 GB, and a tree
#: is faster from some 500 x 500 on).
DENSE_DISTANCES = 250_000


def _nearest(x: np.ndarray, train_x: np.ndarray, k: int,
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
    tree = _learn().cKDTree(train_x)
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


def _difficulty(x: np.ndarray, train_x: np.ndarray, residuals: np.ndarray, scale0: float,
                res_median: float, exclude_self: bool = False) -> np.ndarray:
    if train_x is None or not len(train_x):
        return np.ones(len(x))
    k = min(NEIGHBOURS, len(train_x) - (1 if exclude_self else 0))
    if k < 1:
        return np.full(len(x), scale0)
    dist, idx = _nearest(x, train_x, k, exclude_self)
    nearest = np.where(np.isfinite(dist[:, 0]), dist[:, 0], 0.0)
    if res_median > 0:
        local = residuals[idx].mean(axis=1) / res_median
        local = np.clip(local, 0.25, 4.0)  # one outlier neighbour must not make it 0 or huge
    else:
        local = np.ones(len(x))
    return (scale0 + nearest) * local


def _bytes_coef(sizes: np.ndarray, xla_bytes: np.ndarray) -> tuple[tuple[float, float, float], int]:
    """Coefficients (a, b, c) of ``B = a S + b A + c I`` fitted to XLA's ``xla_bytes`` (B) from
    the ``sizes`` (configs x [state, activation, batch] B), and the configs they rest on; the
    assumed (3, 2, 1) and 0 where fewer than 3 configs have byte counts."""
    ok = np.isfinite(xla_bytes) & (xla_bytes > 0) & np.isfinite(sizes).all(axis=1)
    if ok.sum() >= 3:
        # Relative least squares: each row weighted by 1/B, so small configs count as much as
        # big ones.
        w = 1.0 / xla_bytes[ok]
        coef, _ = _learn().nnls(sizes[ok] * w[:, None], np.ones(int(ok.sum())))
        if coef.sum() > 0:
            return tuple(float(c) for c in coef), int(ok.sum())  # type: ignore[return-value]
    # A step reads the weights twice (forward, backward), writes the gradients and reads and
    # writes weights and optimizer slots once in the update: about 3 x the state; activations
    # are written forward and read backward; the batch is read once.
    return (3.0, 2.0, 1.0), 0


def _fit_bytes(train: pd.DataFrame) -> tuple[tuple[float, float, float], str]:
    """Coefficients (a, b, c) of ``B = a S + b A + c I`` against XLA's bytes_per_step, or a
    fixed assumption where the rows have no byte counts; and how they were found."""
    sizes = np.stack([_num(train, c).to_numpy(float)
                      for c in ("state_bytes", "activation_bytes", "batch_bytes")], axis=1)
    coef, n = _bytes_coef(sizes, _num(train, "bytes_per_step").to_numpy(float))
    if not n:
        return coef, "3 x state + 2 x activations + 1 x batch (assumed: no byte counts)"
    return coef, (f"{coef[0]:.3g} x state + {coef[1]:.3g} x activations + {coef[2]:.3g} x "
                  f"batch (fitted to XLA's bytes_per_step of {n} configs)")


def _fit_roofline(flops: np.ndarray, nbytes: np.ndarray, t: np.ndarray, pf: np.ndarray,
                  pb: np.ndarray, start: tuple[float, float, float] | None = None,
                  ) -> tuple[float, float, float]:
    """(compute efficiency, bandwidth efficiency, overhead s) minimizing robust log residuals.

    From a grid of 8 starting points, or from ``start`` only where given (a fold of a fitted
    model of more than ``FOLD_MULTISTART_MAX`` configs starts from the model's optimum: its
    data are most of the model's, so its optimum is near)."""
    logt = np.log(t)

    def parts(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        ec, eb, o = np.exp(theta)
        tc, tm = flops / (ec * pf), nbytes / (eb * pb)
        return tc, tm, o + np.maximum(tc, tm), o

    def resid(theta: np.ndarray) -> np.ndarray:
        return logt - np.log(parts(theta)[2])

    def jac(theta: np.ndarray) -> np.ndarray:
        # d log(pred) / d log(ec) is -tc / pred where compute binds (0 elsewhere); likewise
        # bandwidth; o / pred for the overhead. Analytic for many configs: finite differences
        # take 3 more evaluations per step.
        tc, tm, pred, o = parts(theta)
        compute = tc >= tm
        return np.stack([np.where(compute, tc, 0.0) / pred, np.where(compute, 0.0, tm) / pred,
                         -o / pred], axis=1)

    lo = np.log([1e-5, 1e-5, 1e-10])
    hi = np.log([2.0, 1e3, max(float(t.max()), 1e-9)])
    n = len(t)
    # Many configs: relative tolerances of 1e-6 instead of 1e-8 (a millionth of an efficiency
    # moves no prediction), and the 8 starting points tried on an even subsample of
    # GP_EXACT_MAX configs, the best one then polished on all: the multi-start only picks the
    # basin, and it cost 8 full fits per fit.
    # Up to GP_EXACT_MAX configs the fit is the one the prediction study measured: finite
    # differences, default tolerances, 8 starts (the analytic Jacobian alone moved 2 of its
    # intervals' coverages by a config or two).
    big = n > GP_EXACT_MAX
    tol = {"ftol": 1e-6, "xtol": 1e-6, "jac": jac} if big else {}
    if start is not None:
        starts = [start]
    else:
        starts = [(ec, eb, o) for ec in (0.05, 0.5) for eb in (0.3, 3.0)
                  for o in (float(t.min()) * 0.5, float(t.min()) * 0.01)]
        if big:
            sub = np.linspace(0, n - 1, GP_EXACT_MAX).round().astype(int)
            ec, eb, o = _fit_roofline(flops[sub], nbytes[sub], t[sub], pf[sub], pb[sub])
            starts = [(ec, eb, o)]
    best = None
    for ec, eb, o in starts:
        x0 = np.clip(np.log([ec, eb, max(o, 1e-10)]), lo + 1e-9, hi - 1e-9)
        r = _learn().least_squares(resid, x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.1,
                                   **tol)
        if best is None or r.cost < best.cost:
            best = r
    ec, eb, o = np.exp(best.x)
    return float(ec), float(eb), float(o)


def _median_positive(v: np.ndarray) -> float:
    """The median of the positive values of ``v`` (NaN where none)."""
    v = v[v > 0]
    return float(np.median(v)) if len(v) else float("nan")


def _peak(train: pd.DataFrame, col: str) -> float:
    return _median_positive(_num(train, col).to_numpy(float))


def fit(rows: pd.DataFrame, correction: str = DEFAULT_CORRECTION, level: float = DEFAULT_LEVEL,
        folds: int = FOLDS, seed: int = 0, include_unstable: bool = False,
        calibrate_axes: bool = CALIBRATE_AXES) -> StepTimeModel:
    """Fit the model of one group from its rows (``paradnn.load`` rows plus ``SIZE_COLUMNS``).

    The rows must all be of one group (``GROUP_KEY``); ``ok`` and stable rows are used (all
    ``ok`` rows with ``include_unstable``). Raises :class:`ParadnnError` with fewer than
    ``MIN_CONFIGS`` measured configs or without peaks.
    """
    level = _check_level(level)
    corr = _check_correction(correction)
    require_columns(rows, (*SIZE_COLUMNS, "batch", "step_time_s"), "predict: fit")
    present = [c for c in GROUP_KEY if c in rows.columns]
    grp = groups(rows[present]) if len(rows) else []
    if len(grp) > 1:
        raise ParadnnError(f"predict: fit takes the rows of one group; these hold {len(grp)}: "
                           + "; ".join(group_label(g) for g in grp[:4]))
    group = grp[0] if grp else {}
    meas, n_unstable = measured(rows, include_unstable)
    train = config_table(meas[_fit_columns(meas)])
    train = train[(_num(train, "model_flops_per_step") > 0)].reset_index(drop=True)
    if len(train) < MIN_CONFIGS:
        what = group_label(group) if group else "the rows given"
        raise ParadnnError(
            f"predict: {what} has {len(train)} measured config(s) (ok and stable, with a step "
            f"time and analytic FLOPs; {n_unstable} unstable row(s) left out); a fit needs at "
            f"least {MIN_CONFIGS}")
    with _one_thread():
        model = _fit_core(train, group, corr, level)
        model.n_rows, model.n_unstable = len(meas), n_unstable
        _calibrate(model, train, corr, level, folds, seed, calibrate_axes)
    return model


def _fit_columns(df: pd.DataFrame) -> list[str]:
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
    return _learn().threadpool_limits(1)


def _fit_core(train: pd.DataFrame, group: dict[str, Any], corr: Correction,
              level: float, like: Any = None,
              start: tuple[float, float, float] | None = None) -> StepTimeModel:
    """The point model (roofline, overhead, correction) on a config table; no interval yet.
    ``like``: a fitted regressor whose hyperparameters to keep; ``start``: (compute efficiency,
    bandwidth efficiency, overhead s) to start the roofline fit from (a fold of a model)."""
    pf, pb = _peak(train, "peak_flops"), _peak(train, "peak_bytes_per_sec")
    if not (np.isfinite(pf) and np.isfinite(pb)):
        raise ParadnnError(f"predict: the rows of {group_label(group)} have no peak_flops or "
                           "peak_bytes_per_sec (the roofline needs both): they were measured "
                           "without a usable peak (record schema 4 and older gave none where only "
                           "probes under load were on record; today a CPU falls back to its "
                           "nominal peak); measure them again, or run `paradnn probe --refresh` "
                           "on a quiet host first")
    sources = train["peak_source"].dropna().astype(str).unique() if "peak_source" in train else []
    coef, bytes_source = _fit_bytes(train)
    model = StepTimeModel(
        group=group, correction=corr.name, level=level, peak_flops=pf, peak_bytes_per_sec=pb,
        peak_source=", ".join(sources) or "unknown source", compute_efficiency=1.0,
        bandwidth_efficiency=1.0, overhead_s=0.0, bytes_coef=coef, bytes_source=bytes_source,
        n_configs=len(train), n_rows=len(train), n_unstable=0, quantile=float("inf"), ranges={})
    devices = _num(train, "devices").fillna(1.0).to_numpy(float)
    flops = _num(train, "model_flops_per_step").to_numpy(float)
    t = _num(train, "step_time_s").to_numpy(float)
    ec, eb, o = _fit_roofline(flops, model.bytes_per_step(train), t, pf * devices, pb * devices,
                              start)
    model.compute_efficiency, model.bandwidth_efficiency, model.overhead_s = ec, eb, o
    model._space = _Space.of(str(group.get("family")), train)
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
        v = _num(train, col)
        ranges[col] = (float(v.min()), float(v.max()))
    model.ranges = ranges
    model._train_axes = model._space.axes(train)
    return model


def _folds(n: int, k: int, seed: int) -> np.ndarray:
    """Fold number of each of ``n`` configs, shuffled with ``seed``."""
    k = max(2, min(k, n))
    order = np.random.default_rng(seed).permutation(n)
    out = np.empty(n, dtype=int)
    out[order] = np.arange(n) % k
    return out


def _oof(n: int, folds: int, seed: int, refit: Any) -> tuple[np.ndarray, np.ndarray]:
    """(out-of-fold log residual, fold) of each of ``n`` configs: the residual of the model
    refit on the other folds by ``refit`` (an :class:`_ExactRefits` or :class:`_FoldRefits`);
    NaN where those have fewer than 3 configs."""
    fold = _folds(n, folds, seed)
    resid = np.full(n, np.nan)
    for f in np.unique(fold):
        if (fold != f).sum() >= 3:
            resid[fold == f] = refit.residuals(fold == f)
    return resid, fold


class _FoldRefits:
    """The held-out residuals of a big fit's folds (more than ``GP_EXACT_MAX`` configs), refit
    from the fit's own pieces instead of from scratch.

    Each fold refits what depends on the step times it holds: the roofline (efficiencies and
    overhead, from the model's optimum) and the correction's mean (an :class:`InducingGP`'s
    weights). What depends on no step time is the model's: the byte coefficients (fitted to
    XLA's byte counts), the inducing configs (chosen on the inputs), the input scaling and the
    kernel (kept by every fold of an exact fit too). The correction's features of every config
    are then computed once, and a fold's system is the whole one less its held-out configs'
    part: ``O(held m^2 + n m + m^3)`` a fold instead of ``O(n m^2)`` and a new roofline from 8
    starting points."""

    def __init__(self, model: StepTimeModel, train: pd.DataFrame) -> None:
        self.start = (model.compute_efficiency, model.bandwidth_efficiency, model.overhead_s)
        devices = _num(train, "devices").fillna(1.0).to_numpy(float)
        self.flops = _num(train, "model_flops_per_step").to_numpy(float)
        self.nbytes = model.bytes_per_step(train)
        self.pf, self.pb = model.peak_flops * devices, model.peak_bytes_per_sec * devices
        self.t = _num(train, "step_time_s").to_numpy(float)
        self.logt = np.log(self.t)
        reg = model._regressor
        self.phi = None
        if reg is not None:
            x = model._space.inputs(train, self.flops, self.nbytes)
            self.phi = reg.kernel_.k1(reg._scaled(x), reg.z_)  # (configs, inducing)
            self.gram = self.phi.T @ self.phi
            self.prior = float(reg.kernel_.k2.noise_level) * reg.kernel_.k1(reg.z_)

    @staticmethod
    def usable(model: StepTimeModel, n: int) -> bool:
        """Whether the folds of ``model`` (fitted on ``n`` configs) are refit this way."""
        return n > GP_EXACT_MAX and (model._regressor is None
                                     or isinstance(model._regressor, InducingGP))

    def residuals(self, held: np.ndarray) -> np.ndarray:
        """Log residuals (log measured - log predicted) of the ``held`` configs (a mask) by the
        model refit on the others."""
        fit = ~held
        ec, eb, o = _fit_roofline(self.flops[fit], self.nbytes[fit], self.t[fit], self.pf[fit],
                                  self.pb[fit], self.start)
        log_base = np.log(o + np.maximum(self.flops / (ec * self.pf),
                                         self.nbytes / (eb * self.pb)))
        r = self.logt[held] - log_base[held]
        if self.phi is not None:
            out = self.phi[held]
            a = self.prior + self.gram - out.T @ out
            a[np.diag_indices_from(a)] += 1e-10 * max(float(np.trace(a)) / len(a), 1e-300)
            w = _learn().solve(a, self.phi[fit].T @ (self.logt[fit] - log_base[fit]),
                               assume_a="pos")
            r = r - out @ w
        return r


class _ExactRefits:
    """The held-out residuals of an exact fit's folds (up to ``GP_EXACT_MAX`` configs, or a
    correction other than the Gaussian process), each the residual of the model :func:`_fit_core`
    would fit on the other configs, computed on arrays prepared once per fit.

    A fold refits everything that :func:`_fit_core` fits: the peaks (medians of its configs),
    the byte coefficients, the roofline (from the model's optimum: its data are most of the
    model's) and the correction (a new regressor with the model's hyperparameters, as every
    fold keeps them). What it does not redo is the pandas work of a fit (a config table copied,
    its feature space rebuilt per fold), which took most of an exact fold's time: the
    correction's inputs are the model's, with the axes that do not vary among the fold's
    configs dropped, as the fold's own feature space drops them; the other axes differ from the
    fold's own by a shift and scale per column, which the regressor's standardization undoes.
    The roofline of a fold of a fit of more than ``FOLD_MULTISTART_MAX`` configs starts from the
    fit's optimum only."""

    def __init__(self, model: StepTimeModel, train: pd.DataFrame, corr: Correction) -> None:
        self.model, self.corr = model, corr
        self.start = (model.compute_efficiency, model.bandwidth_efficiency, model.overhead_s)
        self.devices = _num(train, "devices").fillna(1.0).to_numpy(float)
        self.flops = _num(train, "model_flops_per_step").to_numpy(float)
        self.t = _num(train, "step_time_s").to_numpy(float)
        self.peaks = [_num(train, c).to_numpy(float) for c in ("peak_flops", "peak_bytes_per_sec")]
        self.sizes = np.stack([_num(train, c).to_numpy(float)
                               for c in ("state_bytes", "activation_bytes", "batch_bytes")], axis=1)
        self.xla_bytes = _num(train, "bytes_per_step").to_numpy(float)
        self.axes = model._space.axes(train)
        self.params = np.log(np.maximum(_num(train, "params").to_numpy(float), 1.0))

    def residuals(self, held: np.ndarray) -> np.ndarray:
        """Log residuals (log measured - log predicted) of the ``held`` configs (a mask) by the
        model refit on the others."""
        fit = ~held
        pf, pb = (_median_positive(p[fit]) for p in self.peaks)
        coef, _ = _bytes_coef(self.sizes[fit], self.xla_bytes[fit])
        nbytes = np.maximum(self.sizes @ np.asarray(coef), 1.0)
        pf, pb = pf * self.devices, pb * self.devices
        start = self.start if len(self.t) > FOLD_MULTISTART_MAX else None
        ec, eb, o = _fit_roofline(self.flops[fit], nbytes[fit], self.t[fit], pf[fit], pb[fit],
                                  start)
        log_base = np.log(o + np.maximum(self.flops / (ec * pf), nbytes / (eb * pb)))
        r = np.log(self.t[held]) - log_base[held]
        if self.corr.name == "none":
            return r
        varies = np.ptp(self.axes[fit], axis=0) > 0 if fit.any() else np.zeros(0, bool)
        x = np.concatenate([self.axes[:, varies], np.stack(
            [np.log(self.flops), np.log(nbytes), self.params, np.log(self.flops / nbytes)],
            axis=1)], axis=1)
        reg = self.corr.make(int(fit.sum()), self.model._regressor)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as in _fit_core
            reg.fit(x[fit], np.log(self.t[fit]) - log_base[fit])
        return r - np.asarray(reg.predict(x[held]), dtype=float)


def _axis_splits(train: pd.DataFrame, numeric: Sequence[str]) -> list[np.ndarray]:
    """One mask per value of every ``SCORE_AXES`` axis of ``numeric`` with at least 3 values,
    where the other configs still make a fit."""
    out = []
    for axis in (a for a in SCORE_AXES if a in numeric):
        values = train[axis].dropna().unique()
        if len(values) < 3:
            continue
        for v in values:
            mask = (train[axis] == v).to_numpy()
            if (~mask).sum() >= MIN_CONFIGS:
                out.append(mask)
    return out


def _calibrate(model: StepTimeModel, train: pd.DataFrame, corr: Correction, level: float,
               folds: int, seed: int, axes: bool = True) -> None:
    """Conformal calibration of ``model``'s interval on cross-validation residuals: K-fold by
    config, and with ``axes`` also each value of each axis left out in turn."""
    refit = (_FoldRefits(model, train) if _FoldRefits.usable(model, len(train))
             else _ExactRefits(model, train, corr))
    resid, fold = _oof(len(train), folds, seed, refit)
    x = model._space.axes(train)
    good = np.isfinite(resid)
    absr = np.abs(resid)
    if good.any():
        # examples/s = batch / t, so its relative error is |t / t_predicted - 1| = |exp(r) - 1|.
        ape = np.abs(np.expm1(resid[good]))
        model.cv_median_ape = float(np.median(ape))
        model.cv_p90_ape = float(np.quantile(ape, 0.9))
    # Nearest-neighbour spacing of the fitted configs: the floor of the difficulty, so that a
    # config next to measured ones gets the typical interval, and a far one a wider one.
    spacing = _nearest(x, x, 1, exclude_self=True)[0][:, 0] if len(x) > 1 else np.zeros(len(x))
    spacing = spacing[np.isfinite(spacing)]
    model._scale0 = float(np.median(spacing)) if len(spacing) and np.median(spacing) > 0 else 1.0
    model._residuals = np.where(good, absr, np.nanmedian(absr) if good.any() else 0.0)
    model._res_median = float(np.median(model._residuals[good])) if good.any() else 0.0
    # A calibration config's difficulty as a new config's would be: its distance to the
    # configs of the other folds (those its out-of-fold model saw), its neighbours' residuals
    # without its own.
    s = np.empty(len(x))
    for f in np.unique(fold):
        mine, others = fold == f, fold != f
        s[mine] = _difficulty(x[mine], x[others], model._residuals[others], model._scale0,
                              model._res_median)
    scores = list(absr[good] / s[good])
    if axes:
        # Unmeasured configs of a grid are often whole missing slices (a value of an axis not
        # measured at all), which random folds never hold out: their residuals join the pool,
        # so the intervals cover such configs too.
        for mask in _axis_splits(train, model._space.numeric):
            r = refit.residuals(mask)
            d = _difficulty(x[mask], x[~mask], model._residuals[~mask], model._scale0,
                            model._res_median)
            scores.extend(np.abs(r) / d)
    scores = np.asarray(scores)
    n = len(scores)
    rank = int(math.ceil((n + 1) * level))
    model.quantile = float(np.sort(scores)[rank - 1]) if 0 < rank <= n else float("inf")


# -- several groups ---------------------------------------------------------------------------

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
    return (_missing(a) and _missing(b)) or a == b


def fit_all(df: pd.DataFrame, correction: str = DEFAULT_CORRECTION, level: float = DEFAULT_LEVEL,
            family: str | None = None, include_unstable: bool = False) -> Predictor:
    """One :func:`fit` per group of ``df``'s measured rows (``family`` only, when given).

    Raises :class:`ParadnnError` when nothing can be fitted: no measured rows, no rows of
    ``family``, or no group with ``MIN_CONFIGS`` configs (each group's reason is named).
    """
    level = _check_level(level)
    _check_correction(correction)
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


# -- held-out scores --------------------------------------------------------------------------

#: Columns of :func:`score`'s table.
SCORE_COLUMNS = ("group", "scheme", "held_out", "model", "configs", "median_ape", "p90_ape",
                 "coverage", "median_relative_width")


def errors(pred: pd.DataFrame) -> dict[str, float]:
    """Median and p90 absolute percentage error of examples/s (fractions), coverage of the
    intervals, median relative width, over rows with both a measurement and a prediction."""
    t = _num(pred, "step_time_s").to_numpy(float)
    tp = _num(pred, "predicted_step_time_s").to_numpy(float)
    # examples/s = batch / t, so |eps_pred - eps| / eps = |t / t_pred - 1|.
    ape = np.abs(t / tp - 1.0)
    inside = (t >= _num(pred, "predicted_step_time_low_s").to_numpy(float)) & \
             (t <= _num(pred, "predicted_step_time_high_s").to_numpy(float))
    return {"configs": int(len(t)), "median_ape": float(np.median(ape)),
            "p90_ape": float(np.quantile(ape, 0.9)), "coverage": float(np.mean(inside)),
            "median_relative_width": float(np.median(_num(pred, "prediction_relative_width")))}


def held_out(rows: pd.DataFrame, test_mask: np.ndarray, correction: str, level: float,
             seed: int = 0, calibrate_axes: bool = CALIBRATE_AXES) -> pd.DataFrame:
    """Fit on the configs of ``rows`` (a config table) outside ``test_mask``, predict those in it:
    the test configs with ``PREDICTION_COLUMNS`` and their measured ``step_time_s``."""
    train, test = rows.loc[~test_mask, _fit_columns(rows)], rows[test_mask]
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
    level = _check_level(level)
    models = [correction] + (["none"] if baseline and correction != "none" else [])
    for m in models:
        _check_correction(m)
    meas, _ = measured(df, include_unstable)
    out, preds = [], []
    for g in groups(meas):
        table = config_table(select(meas, g)).reset_index(drop=True)
        label = group_label(g)
        if len(table) < 2 * MIN_CONFIGS:
            continue
        schemes: list[tuple[str, str, list[np.ndarray]]] = []
        fold = _folds(len(table), folds, seed)
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


# -- measured and predicted together, only when asked ----------------------------------------

def predicted_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` that are predictions (``status == "predicted"``), the latest one per
    config and platform when a config was predicted several times."""
    if "status" not in df.columns:
        return df.iloc[0:0]
    rows = df[df["status"] == PREDICTED]
    ident = [c for c in ("workload_key", *PLATFORM_KEY) if c in rows.columns]
    if len(rows) and "time_utc" in rows.columns and ident:
        rows = rows.sort_values("time_utc").drop_duplicates(ident, keep="last")
    return rows


def completed(df: pd.DataFrame, value: str = "examples_per_sec") -> pd.DataFrame:
    """Measured and predicted configs in one frame, **marked**: the ``ok`` rows with their
    measured ``value`` and ``source = "measured"``, then the predicted configs not measured with
    ``value`` taken from ``predicted_<value>`` and ``source = "predicted"``. For figures that
    are asked to show both (the completed heat map); every other analysis uses measured rows
    only."""
    if value not in ("examples_per_sec", "step_time_s"):
        raise ParadnnError(f"completed: value={value!r}; allowed: examples_per_sec, step_time_s")
    meas = ok_rows(df).assign(source="measured")
    pred = predicted_rows(df)
    if len(pred) and "workload_key" in pred.columns and "workload_key" in meas.columns:
        plat = [c for c in PLATFORM_KEY if c in df.columns]
        have = set(map(tuple, meas[["workload_key", *plat]].astype(str).to_numpy()))
        ident = pred[["workload_key", *plat]].astype(str).to_numpy()
        pred = pred[[tuple(r) not in have for r in ident]]
    pred = pred.assign(source="predicted", status="ok")
    pred[value] = pred[f"predicted_{value}"]
    return pd.concat([meas, pred], ignore_index=True)


# -- what to measure next (the adaptive sweep) ------------------------------------------------

#: Share of a budget that the space-filling start takes; the rest goes to the widest intervals.
START_FRACTION = 0.4


def start_size(budget: int) -> int:
    """Configs of the space-filling start of an adaptive sweep of ``budget`` configs."""
    return min(budget, max(MIN_CONFIGS, int(round(START_FRACTION * budget))))


def space_filling(cand: pd.DataFrame, n: int) -> list[str]:
    """The space-filling start: ``n`` workload keys spread over each group's axes in proportion
    to the group's size (at least ``MIN_CONFIGS`` per group where it has them)."""
    out = []
    groups = list(cand.groupby(["framework", "dtype", "family"], sort=True))
    for _, rows in groups:
        share = max(MIN_CONFIGS, int(round(n * len(rows) / len(cand))))
        space = _Space.of(str(rows["family"].iloc[0]), rows)
        idx = farthest_first(space.axes(rows), min(share, len(rows)))
        out.extend(rows["workload_key"].iloc[idx])
    return out


def next_configs(predictor: Predictor, left: pd.DataFrame, k: int) -> tuple[list[str], float]:
    """The ``k`` configs of ``left`` to measure next (widest relative interval first, each pick
    counting as measured for the next) and the widest relative width (inf: no finite interval
    yet, then the most difficult configs go first).

    After each pick the configs of its group are rescored together (one neighbour search for
    all), not one by one: on the paper's FC grid (19,440 configs) a round of 10 picks took 79 s
    CPU one by one."""
    keys: list[Any] = []
    widths, diffs, gids, local = [], [], [], []
    models: list[StepTimeModel | None] = []
    axes: list[np.ndarray | None] = []
    for (fw, dtype, fam), rows in left.groupby(["framework", "dtype", "family"], sort=True):
        model = next((m for m in predictor.models if (m.group.get("framework"), m.group.get("dtype"),
                                                     m.group.get("family")) == (fw, dtype, fam)), None)
        if model is None:  # a group with no model yet: its configs are the most uncertain
            widths.append(np.full(len(rows), np.inf))
            diffs.append(np.full(len(rows), np.inf))
            axes.append(None)
        else:
            model = copy.copy(model)  # the picks below extend its neighbours, not the caller's
            widths.append(model.predict(rows)["prediction_relative_width"].to_numpy(float))
            diffs.append(np.asarray(model.difficulty(rows), dtype=float))
            axes.append(model._space.axes(rows))
        gids.append(np.full(len(rows), len(models)))
        local.append(np.arange(len(rows)))
        models.append(model)
        keys.extend(rows["workload_key"])
    if not keys:
        raise ValueError("next_configs: no configs left to choose from")
    width, diff = np.concatenate(widths), np.concatenate(diffs)
    gid, pos = np.concatenate(gids), np.concatenate(local)
    widest = float(width.max())
    alive = np.ones(len(keys), dtype=bool)
    order = np.arange(len(keys))  # the candidates' order in the list that is sorted each pick
    picks: list[str] = []
    while alive.any() and len(picks) < k:
        # Widest first, then most difficult; ties keep their order in the list (a stable sort,
        # as the list of tuples this replaces was sorted).
        idx = order[alive[order]]
        order = idx[np.lexsort((np.arange(len(idx)), -diff[idx], -width[idx]))]
        pick = int(order[0])
        picks.append(keys[pick])
        alive[pick] = False
        g = int(gid[pick])
        model = models[g]
        if model is None:
            continue
        # Believe the pick measured: it is a neighbour of the others from now on, so the next
        # pick of this round goes elsewhere.
        x = axes[g]
        model._train_axes = np.vstack([model._train_axes, x[pos[pick]][None, :]])
        model._residuals = np.append(model._residuals, model._res_median)
        same = np.flatnonzero(alive & (gid == g))
        if not len(same):
            continue
        d = _difficulty(x[pos[same]], model._train_axes, model._residuals, model._scale0,
                        model._res_median)
        diff[same] = d
        width[same] = (np.exp(model.quantile * d) - np.exp(-model.quantile * d)
                       if np.isfinite(model.quantile) else np.inf)
    return picks, widest


def completed_heatmap(df: pd.DataFrame, x: str, y: str, value: str = "examples_per_sec",
                      fixed: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """:func:`paradnn.analysis.heatmap` of :func:`completed` rows (one map, ``panels`` off):
    measured cells and predicted ones, with a ``source`` column (``measured`` where the cell
    has a measured ``ok`` run, else ``predicted``)."""
    both = completed(df, value)
    hm = heatmap(both, x, y, value, fixed=fixed)
    meas = both[both["source"] == "measured"]
    for col, v in hm.attrs["fixed"].items():
        if col in meas.columns:
            meas = meas[meas[col] == v]
    seen = {(float(a), float(b)) for a, b in zip(meas[x], meas[y])} if len(meas) else set()
    hm["source"] = ["measured" if (float(a), float(b)) in seen else "predicted"
                    for a, b in zip(hm[x], hm[y])]
    return hm
