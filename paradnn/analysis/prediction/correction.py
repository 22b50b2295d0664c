"""The learned corrections (scikit-learn regressors on log features) and the inducing-point
Gaussian process for fits of many configs; :func:`learn` imports the libraries at the first fit."""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from paradnn.errors import ParadnnError


@functools.lru_cache(maxsize=1)
def learn() -> types.SimpleNamespace:
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
        L = learn()
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
        L = learn()
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


def check_correction(name: str) -> Correction:
    if name not in CORRECTIONS:
        raise ParadnnError(f"correction={name!r}; allowed: {', '.join(CORRECTIONS)}")
    return CORRECTIONS[name]
