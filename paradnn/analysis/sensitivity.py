"""Regression sensitivity of a metric to hyperparameters (ParaDnn Fig 2d-f, 8a, 9a, 10a, 10d).

As in the paper, the features and the target are standardized (zero mean, unit standard
deviation) and a least-squares linear model is fitted; a weight is the change of the target, in
its standard deviations, per standard deviation of the feature. The sign says the direction of
the effect and the magnitude ranks the features. It measures effects; it is not a predictor.
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np
import pandas as pd

from paradnn.analysis.columns import drop_unstable, ok_rows, require_columns
from paradnn.errors import ParadnnError

MIN_ROWS = 8  # fewer ok rows give weights that move with every added point


def _design(
    rows: pd.DataFrame, features: Sequence[str], interactions: bool, log2: bool
) -> tuple[np.ndarray, list[str]]:
    cols = []
    for f in features:
        v = pd.to_numeric(rows[f], errors="coerce").to_numpy(dtype=float)
        if log2:
            v = np.log2(v)
        cols.append(v)
    names = list(features)
    if interactions:
        # Products of the standardized features, as in the original tool's pairwise terms.
        z = [(c - c.mean()) / c.std() for c in cols]
        for (i, a), (j, b) in combinations(enumerate(features), 2):
            cols.append(z[i] * z[j])
            names.append(f"{a} x {b}")
    return np.column_stack(cols), names


def _least_squares(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Weights of the ordinary least-squares plane through centred ``X`` and ``y`` (an
    intercept fitted, as scikit-learn's LinearRegression does; minimum-norm where the columns
    are collinear)."""
    coef, *_ = np.linalg.lstsq(X - X.mean(axis=0), y - y.mean(), rcond=None)
    return coef


def _standardize(a: np.ndarray) -> np.ndarray:
    sd = a.std(axis=0)
    sd[sd == 0] = 1.0
    return (a - a.mean(axis=0)) / sd


def sensitivity(
    df: pd.DataFrame,
    target: str,
    features: Sequence[str],
    *,
    interactions: bool = False,
    bootstrap: int = 200,
    seed: int = 0,
    ci: float = 0.95,
    log2: bool = False,
    include_unstable: bool = False,
) -> pd.DataFrame:
    """Standardized linear-regression weights of ``target`` on ``features``, with bootstrap CIs.

    Uses the ok rows (all rows when there is no ``status`` column) where the target and every
    feature are finite. Features that do not vary are dropped (listed in ``attrs["constant"]``).
    ``log2=True`` regresses on log2 of the features, natural for hyperparameters swept in
    powers of two. ``interactions=True`` adds the pairwise products ``a x b``.
    Rows whose timing missed its precision target (``stable`` False) are left out unless
    ``include_unstable``; how many is in ``attrs["unstable_excluded"]``.
    ``bootstrap`` resamples of the rows (with replacement, ``numpy`` generator seeded with
    ``seed``) give the ``ci`` percentile interval of each weight; 0 disables it.

    Returns ``DataFrame[feature, weight, ci_low, ci_high]`` sorted by ``|weight|``, largest
    first (ties in ``features`` order); ``attrs``: ``r2`` (coefficient of determination of the
    fit, 1), ``n`` (rows), ``target``, ``constant``, ``bootstrap``, ``ci``,
    ``unstable_excluded`` (rows left out).

    >>> s = sensitivity(df[df.family == "fc"], "flops_utilization",
    ...                 ["layers", "nodes", "input", "output", "batch"])
    >>> s.attrs["r2"]  # doctest: +SKIP
    """
    features = list(features)
    if not features:
        raise ParadnnError("sensitivity: features is empty; allowed: one or more numeric columns")
    require_columns(df, (target, *features), "sensitivity")
    if not 0 < ci < 1:
        raise ParadnnError(f"sensitivity: ci={ci!r}; allowed: a fraction between 0 and 1")
    if bootstrap < 0:
        raise ParadnnError(f"sensitivity: bootstrap={bootstrap!r}; allowed: an integer >= 0")
    rows, n_unstable = drop_unstable(ok_rows(df), include_unstable)
    numeric = {c: pd.to_numeric(rows[c], errors="coerce") for c in (target, *features)}
    for f in features:
        if rows[f].notna().any() and numeric[f][rows[f].notna()].isna().any():
            raise ParadnnError(
                f"sensitivity: feature {f!r} is not numeric (values like "
                f"{rows[f].dropna().iloc[0]!r}); allowed: numeric columns"
            )
    mask = np.isfinite(np.column_stack([numeric[c].to_numpy(dtype=float) for c in numeric])).all(axis=1)
    if log2:
        mask &= (np.column_stack([numeric[f].to_numpy(dtype=float) for f in features]) > 0).all(axis=1)
    rows = rows[mask]
    constant = [f for f in features if rows[f].nunique() <= 1]
    used = [f for f in features if f not in constant]
    n_terms = len(used) + (len(used) * (len(used) - 1) // 2 if interactions else 0)
    if not used or len(rows) < max(MIN_ROWS, n_terms + 2):
        raise ParadnnError(
            f"sensitivity of {target!r}: {len(rows)} ok rows varying {used or features}"
            + (f" ({n_unstable} unstable rows left out)" if n_unstable else "") + "; "
            f"allowed: at least {max(MIN_ROWS, n_terms + 2)} ok rows with a finite target and "
            f"at least one varying feature"
        )
    X, names = _design(rows, used, interactions, log2)
    X = _standardize(X)
    y = pd.to_numeric(rows[target]).to_numpy(dtype=float)
    if y.std() == 0:
        raise ParadnnError(f"sensitivity: target {target!r} is constant; allowed: a varying metric")
    y = (y - y.mean()) / y.std()
    weights = _least_squares(X, y)
    # Coefficient of determination of the fit (1 = every point on the plane).
    yc, residual = y - y.mean(), (y - y.mean()) - (X - X.mean(axis=0)) @ weights
    r2 = float(1.0 - np.sum(residual ** 2) / np.sum(yc ** 2))

    lo = np.full(len(names), np.nan)
    hi = np.full(len(names), np.nan)
    if bootstrap:
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(bootstrap):
            idx = rng.integers(0, len(y), len(y))
            Xb, yb = X[idx], y[idx]
            # Re-standardize inside the resample so a weight keeps its meaning per resample.
            sy = yb.std()
            if sy == 0:
                continue
            draws.append(_least_squares(_standardize(Xb), (yb - yb.mean()) / sy))
        if draws:
            d = np.array(draws)
            lo, hi = np.quantile(d, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
    out = pd.DataFrame({"feature": names, "weight": weights, "ci_low": lo, "ci_high": hi})
    # Largest |weight| first; equal weights (collinear features, e.g. a width and a count
    # derived from it, share theirs) keep the features' order, whatever the last bits say.
    size = out["weight"].abs().round(12)
    out = out.reindex(size.sort_values(ascending=False, kind="stable").index).reset_index(drop=True)
    out.attrs.update(
        r2=r2, n=int(len(y)), target=target, constant=constant, bootstrap=bootstrap, ci=ci,
        log2=log2, interactions=interactions, unstable_excluded=n_unstable,
    )
    return out
