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

The modules, in the order they import each other:

* ``data``: the training table (measured rows, closed-form sizes, one row per config, groups)
  and the constants the whole model shares.
* ``correction``: the learned corrections (``CORRECTIONS``), the inducing-point Gaussian process
  for many configs, and :func:`learn`, the lazy import of scikit-learn and SciPy.
* ``model``: :class:`StepTimeModel`, its feature space, predictions, intervals and the
  interval's difficulty (nearest fitted configs).
* ``roofline``: the byte coefficients and the roofline's efficiencies and overhead.
* ``calibration``: out-of-fold residuals refit from a fit's pieces and the conformal quantile.
* ``fitting``: :func:`fit` (one group) and :func:`fit_all` (a :class:`Predictor` per frame).
* ``scoring``: held-out errors and coverage (:func:`score`, :func:`score_on`).
* ``adaptive``: what the adaptive sweep measures next (:func:`space_filling`,
  :func:`next_configs`).
* ``combined``: measured and predicted configs together, for the figures that show both.
"""

from paradnn.analysis.prediction.adaptive import (
    START_FRACTION, next_configs, space_filling, start_size,
)
from paradnn.analysis.prediction.calibration import FOLD_MULTISTART_MAX, calibrate, folds_of
from paradnn.analysis.prediction.combined import completed, completed_heatmap, predicted_rows
from paradnn.analysis.prediction.correction import (
    CORRECTIONS, DEFAULT_CORRECTION, GP_EXACT_MAX, GP_INDUCING, Correction, InducingGP,
    check_correction, farthest_first, learn,
)
from paradnn.analysis.prediction.data import (
    CALIBRATE_AXES, DEFAULT_LEVEL, FOLDS, GROUP_KEY, MIN_CONFIGS, NEIGHBOURS, PREDICTION_COLUMNS,
    SCORE_AXES, SIZE_COLUMNS, check_level, config_table, group_label, groups, is_missing, measured,
    numeric, select, size_table, sized, workload_of,
)
from paradnn.analysis.prediction.fitting import Predictor, fit, fit_all, fit_columns
from paradnn.analysis.prediction.model import (
    DENSE_DISTANCES, FeatureSpace, StepTimeModel, difficulty_of, min_for_interval, nearest_configs,
)
from paradnn.analysis.prediction.roofline import (
    bytes_coef, fit_bytes, fit_roofline, median_positive, peak_of,
)
from paradnn.analysis.prediction.scoring import SCORE_COLUMNS, errors, held_out, score, score_on

__all__ = [
    # data
    "GROUP_KEY", "SIZE_COLUMNS", "DEFAULT_LEVEL", "FOLDS", "MIN_CONFIGS", "NEIGHBOURS",
    "CALIBRATE_AXES", "SCORE_AXES", "PREDICTION_COLUMNS", "check_level", "group_label", "numeric",
    "measured", "workload_of", "size_table", "sized", "config_table", "groups", "select",
    "is_missing",
    # correction
    "learn", "GP_EXACT_MAX", "GP_INDUCING", "farthest_first", "InducingGP", "Correction",
    "CORRECTIONS", "DEFAULT_CORRECTION", "check_correction",
    # model
    "FeatureSpace", "StepTimeModel", "min_for_interval", "DENSE_DISTANCES", "nearest_configs",
    "difficulty_of",
    # roofline, calibrate, fit
    "bytes_coef", "fit_bytes", "fit_roofline", "median_positive", "peak_of",
    "FOLD_MULTISTART_MAX", "folds_of", "calibrate", "fit", "fit_columns", "Predictor", "fit_all",
    # score, adaptive, completed
    "SCORE_COLUMNS", "errors", "held_out", "score", "score_on",
    "START_FRACTION", "start_size", "space_filling", "next_configs",
    "predicted_rows", "completed", "completed_heatmap",
]
