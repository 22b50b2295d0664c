"""Verdicts: the Benjamini-Hochberg correction over many configs and the rule that calls a config
a regression, an improvement, inconclusive or unchanged (:func:`verdict`)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from paradnn.analysis.compare.stats import scipy_stats

#: The verdicts of a config, in the order tables list them.
VERDICTS = ("regression", "improvement", "inconclusive", "unchanged")
#: Default regression threshold (x, NEW over BASE step time): asv's default factor.
DEFAULT_THRESHOLD = 1.1
#: Default false-discovery rate of the Benjamini-Hochberg correction.
DEFAULT_ALPHA = 0.05


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q): the false-discovery-rate correction
    (``scipy.stats.false_discovery_control``) over the finite values of ``p``; NaN stays NaN.
    ``q < alpha`` keeps the expected share of false discoveries among the significant configs
    at most ``alpha``."""
    p = np.asarray(p, dtype=float)
    q = np.full(len(p), np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    if len(idx):
        q[idx] = scipy_stats().false_discovery_control(p[idx], method="bh")
    return q


def verdict(ratio: float, ci_low: float, ci_high: float, q: float, noise: float,
            threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA) -> str:
    """The verdict of one config (one of :data:`VERDICTS`):

    * ``regression``: at least ``threshold`` x slower and slower by more than its own noise
      floor, and either significant (``q < alpha``) or with its whole interval beyond the
      threshold (``ci_low >= threshold``: every plausible ratio is a regression, even where too
      few samples let the rank test reach ``alpha``);
    * ``improvement``: the same, faster (ratio at most ``1/threshold``);
    * ``inconclusive``: neither, but a change of the threshold's size cannot be ruled out: the
      interval reaches ``threshold`` (or ``1/threshold``), the config's noise floor is as large
      as the threshold's margin, or there is no test at all (too few samples);
    * ``unchanged``: the interval lies within ``1/threshold`` .. ``threshold``.
    """
    margin = math.log(threshold)
    floor = math.log1p(noise) if np.isfinite(noise) else 0.0
    lr = math.log(ratio) if ratio > 0 else math.nan
    significant = np.isfinite(q) and q < alpha
    beyond_up = bool(np.isfinite(ci_low) and ci_low > 0 and math.log(ci_low) >= margin - 1e-12)
    beyond_down = bool(np.isfinite(ci_high) and ci_high > 0 and -math.log(ci_high) >= margin - 1e-12)
    if (significant or beyond_up) and lr >= margin - 1e-12 and lr > floor:
        return "regression"
    if (significant or beyond_down) and -lr >= margin - 1e-12 and -lr > floor:
        return "improvement"
    if (not np.isfinite(q) or not np.isfinite(ci_low) or ci_high >= threshold
            or ci_low <= 1 / threshold or floor >= margin):
        return "inconclusive"
    return "unchanged"
