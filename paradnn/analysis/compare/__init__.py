"""Noise-aware comparison of two sets of records: did a change make anything slower, and where?

Pure statistics on DataFrames (``paradnn.load``): no framework, no file, no clock. The stores
are loaded and the CLI is served by :mod:`paradnn.compare`; docs/compare.md explains the method
and shows it on real measurements.

The steps, in the order :func:`compare_frames` runs them:

1. **Axes.** Two sets of records differ along an *axis* (:data:`AXES`): the software versions,
   the paradnn revision, the framework, the dtype, the platform or the measurement settings. An
   axis *differs* when the values its columns take on the two sides do not overlap
   (:func:`differing_axes`). The configs are joined on every configuration column except those
   of the axis compared (:func:`join_columns`), so a config is the same computation on the same
   platform with the same software, settings, dtype and framework, one axis apart.
2. **Per config** (:func:`compare_samples`): the ratio of the step time on NEW over BASE (x; above
   1 is slower), from the per-call step times each record keeps (``step_times_s``): the
   Hodges-Lehmann estimate of the shift of log step time, its distribution-free confidence
   interval, and a two-sided Mann-Whitney test; with repeats, a t test of the runs' medians
   must agree (the run is the unit of replication too). Records without per-call times (stores
   written before they were kept) are compared on their median and its recorded confidence
   interval (a normal approximation on the log scale; method ``ci``).
3. **Many configs:** the p-values are corrected over all configs compared with
   Benjamini-Hochberg (:func:`benjamini_hochberg`), q below ``alpha`` is significant.
4. **Noise floor:** each config's own spread (a robust relative standard deviation of its
   per-call times, or the recorded coefficient of variation) is its noise floor; a change
   within it is never called a regression, and a config whose floor reaches the threshold, or
   whose interval reaches past it without a significant change, is ``inconclusive``.
5. **Where:** :func:`localise` fits a depth-2 regression tree of the log ratio on the
   hyperparameters, the family and the roofline class (memory or compute bound) and says, in
   one or two sentences, in which region the change lives.

The modules, one job each (every name is importable from this package):

* ``axes``: the axes, a config's key and name, :func:`differing_axes` and :func:`join_columns`;
* ``stats``: one config's statistics (:class:`Side`, :func:`compare_samples`; the distributions
  from ``scipy.stats``);
* ``verdicts``: the Benjamini-Hochberg correction and :func:`verdict`;
* ``frames``: :func:`compare_frames` and its :class:`CompareResult`;
* ``localisation``: :func:`localise`, the regression tree and its sentence;
* ``changepoints``: :func:`change_points` over a history of versions.
"""

from paradnn.analysis.compare.axes import (
    AXES,
    UNPOOLED_AXES,
    Join,
    axis_columns,
    config_columns,
    config_keys,
    config_label,
    differing_axes,
    join_columns,
    parse_axes,
    workload_join,
)
from paradnn.analysis.compare.changepoints import Step, change_points, pool
from paradnn.analysis.compare.frames import CompareResult, bound_of, compare_frames, shared_records
from paradnn.analysis.compare.localisation import MIN_SPLIT_GAIN, TREE_DEPTH, Localisation, localise
from paradnn.analysis.compare.stats import (
    EXACT_MAX_PAIRS,
    LEVEL,
    MAX_PAIRS,
    Estimate,
    Side,
    compare_samples,
    hodges_lehmann,
    mann_whitney,
    mann_whitney_many,
    relative_spread,
    run_test,
    side_of,
    t_quantile,
    t_two_sided,
)
from paradnn.analysis.compare.verdicts import (
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    VERDICTS,
    benjamini_hochberg,
    verdict,
)

__all__ = [
    "AXES", "UNPOOLED_AXES", "Join", "axis_columns", "config_columns", "config_keys", "config_label",
    "differing_axes", "join_columns", "parse_axes", "workload_join",
    "Step", "change_points", "pool",
    "CompareResult", "bound_of", "compare_frames", "shared_records",
    "MIN_SPLIT_GAIN", "TREE_DEPTH", "Localisation", "localise",
    "EXACT_MAX_PAIRS", "LEVEL", "MAX_PAIRS", "Estimate", "Side", "compare_samples", "hodges_lehmann",
    "mann_whitney", "mann_whitney_many", "relative_spread", "run_test", "side_of", "t_quantile", "t_two_sided",
    "DEFAULT_ALPHA", "DEFAULT_THRESHOLD", "VERDICTS", "benjamini_hochberg", "verdict",
]
