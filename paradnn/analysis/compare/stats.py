"""Statistics of one config: the per-call step times of each side (:class:`Side`), the
Hodges-Lehmann ratio with its interval, the Mann-Whitney test and, with repeats, the t test of
the runs (:func:`compare_samples`); the distributions from ``scipy.stats``."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from statistics import NormalDist
from types import ModuleType
from typing import Any, Sequence

import numpy as np
import pandas as pd

def scipy_stats() -> ModuleType:
    """``scipy.stats``, imported on first use: it takes 0.5 s, and every command imports
    ``paradnn.analysis``."""
    from scipy import stats

    return stats


#: Confidence level of every interval.
LEVEL = 0.95
#: Above this many pairwise differences, the Hodges-Lehmann interval uses a seeded subsample of
#: each side (the interval of 10^6 differences is already far tighter than any noise floor).
MAX_PAIRS = 1_000_000
#: Exact Mann-Whitney p-values for samples without ties up to this many pairs (n x m); the
#: normal approximation with tie and continuity corrections above it.
EXACT_MAX_PAIRS = 2_500
# 1.4826 x the median absolute deviation estimates a normal standard deviation.
_MAD_SCALE = 1.4826
_NORMAL = NormalDist()


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U test p-value of samples ``x`` and ``y`` (1 = no evidence of a
    shift), by ``scipy.stats.mannwhitneyu``: its exact null distribution without ties up to
    :data:`EXACT_MAX_PAIRS` pairs, else its normal approximation with tie and continuity
    corrections. 1 when every value is tied (no spread: scipy's NaN); NaN when a sample is
    empty."""
    return float(mann_whitney_many([(x, y)])[0])


def mann_whitney_many(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> np.ndarray:
    """:func:`mann_whitney` of every ``(x, y)`` in ``pairs``, one p-value each. The pairs of
    the same sample sizes and method are tested in one call of ``scipy.stats.mannwhitneyu``
    (one row each): a call costs about 1 ms whatever its rows, and the configs of a compare
    share a few sample sizes."""
    out = np.full(len(pairs), np.nan)
    groups: dict[tuple[int, int, str], list[int]] = {}
    arrays = [(np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in pairs]
    for i, (x, y) in enumerate(arrays):
        n, m = len(x), len(y)
        if n == 0 or m == 0:
            continue
        distinct = len(np.unique(np.concatenate([x, y])))
        if distinct == 1:
            out[i] = 1.0
            continue
        method = "exact" if distinct == n + m and n * m <= EXACT_MAX_PAIRS else "asymptotic"
        groups.setdefault((n, m, method), []).append(i)
    for (_, _, method), idx in groups.items():
        xs, ys = np.stack([arrays[i][0] for i in idx]), np.stack([arrays[i][1] for i in idx])
        out[idx] = scipy_stats().mannwhitneyu(xs, ys, alternative="two-sided", method=method, axis=1).pvalue
    return out


def hodges_lehmann(x: Sequence[float], y: Sequence[float], level: float = LEVEL,
                   seed: int = 0) -> tuple[float, float, float]:
    """``(shift, low, high)``: the Hodges-Lehmann estimate of the shift of ``y`` over ``x``
    (the median of all pairwise differences ``y_j - x_i``) and its distribution-free confidence
    interval at ``level`` from the Mann-Whitney distribution (normal approximation of its
    critical value). With too few samples for the level the interval is the full range of the
    differences. Above :data:`MAX_PAIRS` pairs each side is subsampled (numpy generator seeded
    with ``seed``)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) == 0 or len(y) == 0:
        return math.nan, math.nan, math.nan
    if len(x) * len(y) > MAX_PAIRS:
        rng = np.random.default_rng(seed)
        k = int(math.sqrt(MAX_PAIRS))
        x = rng.choice(x, min(k, len(x)), replace=False)
        y = rng.choice(y, min(k, len(y)), replace=False)
    n, m = len(x), len(y)
    d = np.sort(np.subtract.outer(y, x).ravel())
    shift = float(np.median(d))
    z = _NORMAL.inv_cdf(0.5 + level / 2)
    c = int(math.floor(n * m / 2.0 - z * math.sqrt(n * m * (n + m + 1) / 12.0)))
    if c < 1:
        return shift, float(d[0]), float(d[-1])
    return shift, float(d[c - 1]), float(d[n * m - c])


def relative_spread(samples: Sequence[float]) -> float:
    """Robust relative standard deviation of positive times (1 = 100%): 1.4826 x the median
    absolute deviation of their logarithms (a single slow call does not inflate it). NaN for
    fewer than 2 samples."""
    logs = np.log(np.asarray(samples, dtype=float))
    if len(logs) < 2:
        return math.nan
    return float(math.expm1(_MAD_SCALE * np.median(np.abs(logs - np.median(logs)))))


def t_two_sided(t: float, df: float) -> float:
    """Two-sided p-value of Student's t statistic ``t`` with ``df`` degrees of freedom
    (``scipy.stats.t``); 0 for an infinite ``t``, NaN for NaN."""
    if not np.isfinite(t):
        return 0.0 if abs(t) == math.inf else math.nan
    return float(2.0 * scipy_stats().t.sf(abs(t), df))


@functools.lru_cache(maxsize=256)
def t_quantile(level: float, df: float) -> float:
    """The two-sided ``level`` critical value of Student's t with ``df`` degrees of freedom
    (1.96 for a large df at 95%; ``scipy.stats.t``). Kept per (level, df): the configs of a
    compare share a few run counts."""
    return float(scipy_stats().t.ppf(0.5 + level / 2, df))


def run_test(base_medians: np.ndarray, new_medians: np.ndarray,
             level: float = LEVEL) -> tuple[float, float, float]:
    """``(p, low, high)``: Student's two-sample t test (pooled variance) of the runs' log
    median step times, and the ``level`` interval of exp(the difference of their means), x.
    The run is the unit of replication: calls of one run share the machine's state, runs do
    not. Needs 3 runs or more in all (1 against 2 works) and a spread; NaN otherwise."""
    a, b = np.log(np.asarray(base_medians, float)), np.log(np.asarray(new_medians, float))
    n, m = len(a), len(b)
    if n < 1 or m < 1 or n + m < 3:
        return math.nan, math.nan, math.nan
    df = n + m - 2
    ss = float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
    if ss <= 0:
        return math.nan, math.nan, math.nan
    se = math.sqrt(ss / df * (1.0 / n + 1.0 / m))
    d = float(b.mean() - a.mean())
    half = t_quantile(level, df) * se
    return t_two_sided(d / se, df), math.exp(d - half), math.exp(d + half)


@dataclass(frozen=True)
class Side:
    """The measurements of one config on one side, one entry per run: ``run_samples`` (each
    run's per-call step times, s; None when a run lacks them), ``medians`` (median step time,
    s), ``ci_low``/``ci_high`` (bounds of its 95% interval of the median, s) and ``cvs``
    (coefficient of variation of its calls, 1)."""

    run_samples: tuple[np.ndarray, ...] | None
    medians: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    cvs: np.ndarray

    @property
    def runs(self) -> int:
        return len(self.medians)

    @property
    def samples(self) -> np.ndarray | None:
        """The runs' per-call times pooled with equal weight per run: each run is thinned to
        the shortest run's call count (evenly in call order). Without it a run slowed by a
        neighbour, which times fewer calls in its budget, would count less than a fast one."""
        if self.run_samples is None or not self.run_samples:
            return None
        k = min(len(r) for r in self.run_samples)
        return np.concatenate([r if len(r) == k else r[np.linspace(0, len(r) - 1, k).round().astype(int)]
                               for r in self.run_samples])


def as_samples(value: Any) -> np.ndarray | None:
    """A row's ``step_times_s`` as an array of positive finite seconds; None when absent or
    unreadable (a CSV round trip gives its text, which is parsed)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) == 0:
        return None
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if arr.ndim != 1 or not np.isfinite(arr).all() or (arr <= 0).any():
        return None
    return arr


def side_of(rows: pd.DataFrame) -> Side:
    """The :class:`Side` of the ok rows of one config (runs with a positive median only)."""
    def col(name: str) -> np.ndarray:
        if name not in rows.columns:
            return np.full(len(rows), np.nan)
        return pd.to_numeric(rows[name], errors="coerce").to_numpy(dtype=float)

    samples = [as_samples(v) for v in rows["step_times_s"]] if "step_times_s" in rows.columns \
        else [None] * len(rows)
    runs = None if any(s is None for s in samples) else tuple(samples)
    return Side(runs, col("step_time_s"), col("step_time_ci_low_s"), col("step_time_ci_high_s"),
                col("step_time_cv"))


@dataclass(frozen=True)
class Estimate:
    """One config compared: ``ratio`` NEW/BASE step time (x) with its interval ``ci_low`` ..
    ``ci_high`` (x), the two-sided ``p`` value, the ``noise`` floor (relative, 1 = 100%),
    ``method`` (``samples`` or ``ci``) and the sample counts."""

    ratio: float
    ci_low: float
    ci_high: float
    p: float
    noise: float
    method: str
    n_base: int
    n_new: int


def side_noise(s: Side) -> float:
    """A side's noise floor (relative, 1 = 100%): the largest of its runs' spreads
    (:func:`relative_spread` of each run's per-call times, else their recorded CVs) and, with
    repeats, the spread of the runs' medians; NaN where none is known."""
    parts = []
    if s.run_samples is not None:
        parts.extend(relative_spread(r) for r in s.run_samples if len(r) >= 2)
    else:
        parts.extend(v for v in s.cvs if np.isfinite(v))
    if s.runs >= 2:
        # Repeats: how far the runs' medians disagree is noise the per-call test cannot see
        # (calls of one run share the machine's state while it ran). Robust, like the calls'
        # spread: one run slowed by a neighbour is the t test of the runs' business (it widens
        # its interval), not a reason to deny every change smaller than that run's slowdown.
        parts.append(relative_spread(s.medians))
    finite = [v for v in parts if np.isfinite(v)]
    return max(finite) if finite else math.nan


def _log_median_se(s: Side, z: float) -> tuple[float, float]:
    """Mean log median of a side's runs and its standard error, from the runs' recorded 95%
    intervals (half-width / z on the log scale) and, with repeats, their spread."""
    logs = np.log(s.medians)
    se = (np.log(s.ci_high) - np.log(s.ci_low)) / (2 * z)
    se = np.where(np.isfinite(se), se, np.nan)
    var = float(np.nanmean(se**2)) / s.runs if np.isfinite(se).any() else math.nan
    if s.runs >= 2:
        between = float(np.var(logs, ddof=1)) / s.runs
        var = between if not np.isfinite(var) else var + between
    return float(np.mean(logs)), math.sqrt(var) if np.isfinite(var) else math.nan


def compare_samples(base: Side, new: Side, level: float = LEVEL, p_calls: float | None = None) -> Estimate:
    """Compare one config: with per-call times on both sides, the Hodges-Lehmann ratio
    ``exp(shift of log time)`` with its interval and the Mann-Whitney p-value (method
    ``samples``; ``p_calls`` where the caller tested the log samples already, as
    :func:`mann_whitney_many` does for many configs at once); else the ratio of the mean log
    medians with a normal interval and z-test from the recorded intervals (method ``ci``).
    ``noise``: the larger of the two sides' spreads (:func:`relative_spread` of the per-call
    times, else the recorded CV; with repeats, also the spread of the runs' medians)."""
    noise = max((v for v in (side_noise(base), side_noise(new)) if np.isfinite(v)),
                default=math.nan)
    if base.samples is not None and new.samples is not None:
        la, lb = np.log(base.samples), np.log(new.samples)
        shift, lo, hi = hodges_lehmann(la, lb, level)
        p = mann_whitney(la, lb) if p_calls is None else p_calls
        ratio, lo, hi = math.exp(shift), math.exp(lo), math.exp(hi)
        if base.runs + new.runs >= 3:
            # Repeats: the change must also stand against how much whole runs disagree (an
            # intersection-union test: both p-values below alpha; the wider interval).
            p_runs, lo_runs, hi_runs = run_test(base.medians, new.medians, level)
            if np.isfinite(p_runs):
                return Estimate(ratio, min(lo, lo_runs), max(hi, hi_runs), max(p, p_runs), noise,
                                "samples+runs", len(la), len(lb))
        return Estimate(ratio, lo, hi, p, noise, "samples", len(la), len(lb))
    z = _NORMAL.inv_cdf(0.5 + level / 2)
    ma, sa = _log_median_se(base, z)
    mb, sb = _log_median_se(new, z)
    d = mb - ma
    se = math.sqrt(sa**2 + sb**2) if np.isfinite(sa) and np.isfinite(sb) else math.nan
    if np.isfinite(se) and se > 0:
        p = math.erfc(abs(d) / se / math.sqrt(2.0))
        lo, hi = math.exp(d - z * se), math.exp(d + z * se)
    else:
        p, lo, hi = math.nan, math.nan, math.nan
    return Estimate(math.exp(d), lo, hi, p, noise, "ci", base.runs, new.runs)
