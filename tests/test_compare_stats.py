"""The distribution functions of paradnn compare against scipy, on a fixed table of inputs.

The Student t tail and quantile, the incomplete beta function behind them, the Mann-Whitney
p-value and the Benjamini-Hochberg correction were once written by hand in
:mod:`paradnn.analysis.compare`; they now come from ``scipy.stats``. The ``OLD_*`` tables below
are the values the hand-written functions gave on these inputs (recorded before that code was
removed, after a test had checked them against scipy to 1e-9): today's functions must give them
to 1e-9 (relative; absolute 1e-15 near zero), and so must scipy itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from paradnn.analysis import compare as AC

nan, inf = math.nan, math.inf
REL, ABS = 1e-9, 1e-15


def _wave(n: int, phase: float, shift: float = 0.0) -> list[float]:
    """``n`` distinct values (no ties) that look unordered: a sine sampled off its period."""
    return [round(math.sin(1.7 * i + phase) + shift + 1e-3 * i, 12) for i in range(n)]


#: (a, b, x) of the regularized incomplete beta function I_x(a, b).
BETA = [(0.5, 0.5, 0.3), (1.5, 0.5, 0.9), (10.0, 0.5, 0.1), (2.0, 3.0, 0.5), (0.5, 20.0, 0.99),
        (100.0, 0.5, 0.97), (1.25, 0.5, 0.2), (500.0, 0.5, 0.999), (0.5, 0.5, 0.0), (3.0, 0.5, 1.0)]
#: (t, df) of the two-sided p-value of Student's t.
T_SF = [(2.0, 3), (0.5, 1), (5.0, 20), (1.2, 2.5), (30.0, 4), (0.0, 7), (1.96, 1000), (-2.5, 10),
        (3.3, 1), (12.0, 2), (0.01, 50), (inf, 5), (-inf, 3), (nan, 5)]
#: (level, df) of the two-sided critical value of Student's t.
T_Q = [(0.95, 1), (0.95, 2), (0.99, 5), (0.9, 40), (0.95, 1000), (0.8, 3), (0.95, 2.5), (0.999, 7)]
#: (x, y) samples of the two-sided Mann-Whitney test: exact (no ties, n x m up to
#: EXACT_MAX_PAIRS = 2,500, the bound included), asymptotic (larger, or ties), degenerate.
MW = [
    (_wave(5, 0.0), _wave(7, 1.0)),
    (_wave(6, 0.3), _wave(6, 2.0, 1.0)),
    (_wave(12, 0.1), _wave(9, 0.7, 0.5)),
    (_wave(1, 0.0), _wave(1, 1.0, 0.5)),
    (_wave(3, 0.2), _wave(40, 0.9, 0.3)),
    (_wave(40, 0.4), _wave(30, 1.3, 0.2)),
    (_wave(50, 0.5), _wave(50, 2.5, 0.15)),
    (_wave(50, 0.5), _wave(51, 2.5, 0.15)),
    (_wave(70, 0.6), _wave(80, 0.2, 0.1)),
    (_wave(8, 0.0), _wave(8, 0.0, 10.0)),
    ([1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0], [2.0, 3.0, 4.0, 4.0, 5.0, 5.0]),
    ([1.0, 1.0, 1.0], [1.0, 1.0]),
    ([5.0, 5.0, 6.0], [1.0, 2.0, 5.0, 5.0]),
]
#: (base run medians, new run medians) of the t test of the runs (:func:`AC.run_test`).
RUNS = [([1.0, 1.1, 0.9], [1.5, 1.6, 1.4]), ([1.0], [1.2, 1.3]), ([1.0, 1.02], [1.01, 0.99, 1.03, 1.05]),
        ([2e-3, 2.1e-3, 1.9e-3, 2.05e-3], [2.2e-3, 2.3e-3, 2.25e-3]), ([2.0, 2.0], [2.0]), ([1.0], [2.0])]
#: p-values of the Benjamini-Hochberg correction (:func:`AC.benjamini_hochberg`; NaN stays NaN).
BH = [[0.001, 0.2, 0.03, 0.04, 0.5, 0.011, 0.9], [0.01, nan, 0.02], [0.04, 0.04, 0.04, 0.5], [1.0], [nan],
      [0.3, 1e-12, 0.049, 0.051, 0.02, 0.9, 0.7, 0.0]]

# -- the values the hand-written functions gave (recorded) ---------------------------------------

OLD_BETAINC = [
    0.36901011956554497, 0.6041813035905921, 1.8480273740563803e-11, 0.6875000000000002, 1.0,
    0.01369787686662173, 0.06501683978680427, 0.31731044730966607, 0.0, 1.0,
]
OLD_T_TWO_SIDED = [
    0.13932596855884316, 0.7048327646991337, 6.8730285795422e-05, 0.3314388376658778,
    7.352856097661318e-06, 1.0, 0.05027318495575551, 0.03144684423660886, 0.18731554186375865,
    0.006872933677158459, 0.9920610813670894, 0.0, 0.0, nan,
]
OLD_T_QUANTILE = [
    12.706204736174687, 4.302652729749459, 4.032142983555227, 1.6838510133356572,
    1.9623390808264358, 1.6377443536962093, 3.57465484200368, 5.407882520861724,
]
OLD_MANN_WHITNEY = [
    0.8762626262626263, 0.30952380952380953, 0.06928180178954173, 1.0, 0.8399643464873187,
    0.1910035624664917, 0.2668371380459433, 0.2877802593953467, 0.196969187801932,
    0.0001554001554001554, 0.07826242947714625, 1.0, 0.17214884482446172,
]
OLD_RUN_TEST = [
    (0.004254020717390965, 1.2387139381180905, 1.8231890235313468),
    (0.19239685327691994, 0.5176589107080904, 3.0135673659439597),
    (0.6532923029753933, 0.9553394668622004, 1.067170114774069),
    (0.009595664177435664, 1.042225420171823, 1.2005547920138406), (nan, nan, nan), (nan, nan, nan),
]
OLD_BENJAMINI_HOCHBERG = [
    [0.007, 0.28, 0.06999999999999999, 0.07, 0.5833333333333334, 0.0385, 0.9], [0.02, nan, 0.02],
    [0.05333333333333334, 0.05333333333333334, 0.05333333333333334, 0.5], [1.0], [nan],
    [0.39999999999999997, 4e-12, 0.08159999999999999, 0.08159999999999999, 0.05333333333333334, 0.9,
     0.7999999999999999, 0.0],
]

# -- the checks ----------------------------------------------------------------------------------


def _same(got: float, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    return got == pytest.approx(want, rel=REL, abs=ABS)


def _scipy_mann_whitney(x, y) -> float:
    """scipy's two-sided p-value with the method paradnn uses: exact without ties up to
    EXACT_MAX_PAIRS pairs, else the normal approximation with tie and continuity corrections."""
    ties = len(np.unique(np.concatenate([x, y]))) < len(x) + len(y)
    method = "exact" if not ties and len(x) * len(y) <= AC.EXACT_MAX_PAIRS else "asymptotic"
    return float(stats.mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue)


def test_scipy_gives_the_recorded_values():
    assert all(_same(special.betainc(*args), v) for args, v in zip(BETA, OLD_BETAINC, strict=True))
    for (t, df), v in zip(T_SF, OLD_T_TWO_SIDED, strict=True):
        if math.isfinite(t):
            assert _same(2 * stats.t.sf(abs(t), df), v), (t, df)
    for (level, df), v in zip(T_Q, OLD_T_QUANTILE, strict=True):
        assert _same(stats.t.ppf(0.5 + level / 2, df), v), (level, df)
    for (x, y), v in zip(MW, OLD_MANN_WHITNEY, strict=True):
        want = _scipy_mann_whitney(x, y)
        assert _same(1.0 if math.isnan(want) else want, v), (x, y)  # every value tied: 1
    for p, v in zip(BH, OLD_BENJAMINI_HOCHBERG, strict=True):
        finite = [x for x in p if math.isfinite(x)]
        if finite:
            assert all(map(_same, stats.false_discovery_control(finite), [x for x in v if math.isfinite(x)]))


def test_the_functions_of_compare_give_the_recorded_values():
    assert all(_same(AC.t_two_sided(*args), v) for args, v in zip(T_SF, OLD_T_TWO_SIDED, strict=True))
    assert all(_same(AC.t_quantile(*args), v) for args, v in zip(T_Q, OLD_T_QUANTILE, strict=True))
    assert all(_same(AC.mann_whitney(*args), v) for args, v in zip(MW, OLD_MANN_WHITNEY, strict=True))
    for args, want in zip(RUNS, OLD_RUN_TEST, strict=True):
        assert all(_same(g, w) for g, w in zip(AC.run_test(*args), want, strict=True)), args
    for p, want in zip(BH, OLD_BENJAMINI_HOCHBERG, strict=True):
        assert all(_same(g, w) for g, w in zip(AC.benjamini_hochberg(p), want, strict=True)), p
    assert math.isnan(AC.mann_whitney([], [1.0]))
    # Many pairs at once (compare_frames tests every config in one scipy call per sample sizes):
    # each pair's p-value as if alone, the table twice over so that each size has several rows.
    many = AC.mann_whitney_many(MW + MW[::-1] + [([], [1.0])])
    assert all(map(_same, many, OLD_MANN_WHITNEY + OLD_MANN_WHITNEY[::-1] + [nan]))
