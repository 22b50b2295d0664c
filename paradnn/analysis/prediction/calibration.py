"""The interval's calibration: out-of-fold residuals (K folds by config and each axis value
held out), refit from a fit's own pieces, and the conformal quantile."""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd

from paradnn.analysis.prediction import correction
from paradnn.analysis.prediction.correction import Correction, InducingGP, learn
from paradnn.analysis.prediction.data import MIN_CONFIGS, SCORE_AXES, numeric
from paradnn.analysis.prediction.model import StepTimeModel, difficulty_of, nearest_configs
from paradnn.analysis.prediction.roofline import bytes_coef, fit_roofline, median_positive


#: Most configs of a fit whose folds fit their roofline from the 8 starting points, as the fit
#: does: every exact fit (``GP_EXACT_MAX`` = 200 configs), so that the study's grids keep their
#: numbers to the digit. Bigger fits' folds start from the fit's optimum only (their data are
#: most of the fit's), 5x faster. At 50 a 1,000-row store scores in 30 CPU s instead of 146,
#: but the study's coverages move by one to three configs, up to 2 points (docs/prediction.md,
#: "Many configs"): more than the one point the prediction study allows.
FOLD_MULTISTART_MAX = 200


def folds_of(n: int, k: int, seed: int) -> np.ndarray:
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
    fold = folds_of(n, folds, seed)
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
        devices = numeric(train, "devices").fillna(1.0).to_numpy(float)
        self.flops = numeric(train, "model_flops_per_step").to_numpy(float)
        self.nbytes = model.bytes_per_step(train)
        self.pf, self.pb = model.peak_flops * devices, model.peak_bytes_per_sec * devices
        self.t = numeric(train, "step_time_s").to_numpy(float)
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
        return n > correction.GP_EXACT_MAX and (model._regressor is None
                                     or isinstance(model._regressor, InducingGP))

    def residuals(self, held: np.ndarray) -> np.ndarray:
        """Log residuals (log measured - log predicted) of the ``held`` configs (a mask) by the
        model refit on the others."""
        fit = ~held
        ec, eb, o = fit_roofline(self.flops[fit], self.nbytes[fit], self.t[fit], self.pf[fit],
                                  self.pb[fit], self.start)
        log_base = np.log(o + np.maximum(self.flops / (ec * self.pf),
                                         self.nbytes / (eb * self.pb)))
        r = self.logt[held] - log_base[held]
        if self.phi is not None:
            out = self.phi[held]
            a = self.prior + self.gram - out.T @ out
            a[np.diag_indices_from(a)] += 1e-10 * max(float(np.trace(a)) / len(a), 1e-300)
            w = learn().solve(a, self.phi[fit].T @ (self.logt[fit] - log_base[fit]),
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
        self.devices = numeric(train, "devices").fillna(1.0).to_numpy(float)
        self.flops = numeric(train, "model_flops_per_step").to_numpy(float)
        self.t = numeric(train, "step_time_s").to_numpy(float)
        self.peaks = [numeric(train, c).to_numpy(float) for c in ("peak_flops", "peak_bytes_per_sec")]
        self.sizes = np.stack([numeric(train, c).to_numpy(float)
                               for c in ("state_bytes", "activation_bytes", "batch_bytes")], axis=1)
        self.xla_bytes = numeric(train, "bytes_per_step").to_numpy(float)
        self.axes = model._space.axes(train)
        self.params = np.log(np.maximum(numeric(train, "params").to_numpy(float), 1.0))

    def residuals(self, held: np.ndarray) -> np.ndarray:
        """Log residuals (log measured - log predicted) of the ``held`` configs (a mask) by the
        model refit on the others."""
        fit = ~held
        pf, pb = (median_positive(p[fit]) for p in self.peaks)
        coef, _ = bytes_coef(self.sizes[fit], self.xla_bytes[fit])
        nbytes = np.maximum(self.sizes @ np.asarray(coef), 1.0)
        pf, pb = pf * self.devices, pb * self.devices
        start = self.start if len(self.t) > FOLD_MULTISTART_MAX else None
        ec, eb, o = fit_roofline(self.flops[fit], nbytes[fit], self.t[fit], pf[fit], pb[fit],
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


def calibrate(model: StepTimeModel, train: pd.DataFrame, corr: Correction, level: float,
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
    spacing = nearest_configs(x, x, 1, exclude_self=True)[0][:, 0] if len(x) > 1 else np.zeros(len(x))
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
        s[mine] = difficulty_of(x[mine], x[others], model._residuals[others], model._scale0,
                              model._res_median)
    scores = list(absr[good] / s[good])
    if axes:
        # Unmeasured configs of a grid are often whole missing slices (a value of an axis not
        # measured at all), which random folds never hold out: their residuals join the pool,
        # so the intervals cover such configs too.
        for mask in _axis_splits(train, model._space.numeric):
            r = refit.residuals(mask)
            d = difficulty_of(x[mask], x[~mask], model._residuals[~mask], model._scale0,
                            model._res_median)
            scores.extend(np.abs(r) / d)
    scores = np.asarray(scores)
    n = len(scores)
    rank = int(math.ceil((n + 1) * level))
    model.quantile = float(np.sort(scores)[rank - 1]) if 0 < rank <= n else float("inf")
