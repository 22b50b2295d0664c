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
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from paradnn.analysis.columns import (
    FAMILY_FIELDS, PLATFORM_KEY, WORKLOAD_FIELDS, fmt, ok_rows, unstable_mask, workload_label,
)
from paradnn import precision
from paradnn.errors import ParadnnError
from paradnn.measure import KEYED_SETTINGS

#: The comparison axes: name -> what it means. Their columns: :func:`axis_columns`.
AXES: dict[str, str] = {
    "software": "software versions (jax, jaxlib, flax, optax, TensorFlow, PyTorch, Python, "
                "XLA_FLAGS: every *_version column but the framework's and paradnn's)",
    "revision": "the paradnn source revision (paradnn_revision, paradnn_version)",
    "framework": "the framework (framework, framework_version)",
    "dtype": "the compute dtype",
    "platform": "the platform (device_platform, device_kind, device_count, cpu_model; the host "
                "name is left out, as in the record key)",
    "settings": "the measurement settings (time budget, CV target, XLA preset, step loop, ...)",
}
_FIXED_AXIS_COLUMNS: dict[str, Sequence[str]] = {
    "revision": ("paradnn_revision", "paradnn_version"),
    "framework": ("framework", "framework_version"),
    "dtype": ("dtype",),
    "platform": (*PLATFORM_KEY, "cpu_model"),
    # A live view: the protocol's fields and every registered framework's options (xla_preset,
    # step_loop, torch_compile, and those of a framework a plugin adds after this import).
    "settings": KEYED_SETTINGS,
}
#: Software fields that are not version numbers but shape a measurement.
_SOFTWARE_EXTRA = ("xla_flags", "xla_compile_options")
#: Columns named ``*_version`` that are no software version (the record's schema).
_NOT_SOFTWARE = ("schema_version",)

#: The axes whose values are different computations or machines, never repeats of one config: a
#: side holding several values of the axis compared is refused (:func:`join_columns`), not pooled.
#: Several revisions, software versions or settings on one side are pooled, with a note.
UNPOOLED_AXES = ("framework", "dtype", "platform")

#: The verdicts of a config, in the order tables list them.
VERDICTS = ("regression", "improvement", "inconclusive", "unchanged")
#: Default regression threshold (x, NEW over BASE step time): asv's default factor.
DEFAULT_THRESHOLD = 1.1
#: Default false-discovery rate of the Benjamini-Hochberg correction.
DEFAULT_ALPHA = 0.05
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


# -- axes and the join ---------------------------------------------------------------------------

def axis_columns(columns: Iterable[str]) -> dict[str, list[str]]:
    """The columns of each axis of :data:`AXES` among ``columns``. Software: the known software
    fields and every column named ``*_version``, less the framework's and paradnn's."""
    columns = list(columns)
    out = {name: [c for c in cols if c in columns] for name, cols in _FIXED_AXIS_COLUMNS.items()}
    taken = {c for cols in _FIXED_AXIS_COLUMNS.values() for c in cols}
    # Read from the data: a framework added later brings its *_version columns with it.
    software = [c for c in columns if c.endswith("_version") and c not in _NOT_SOFTWARE]
    software += [c for c in _SOFTWARE_EXTRA if c in columns]
    out["software"] = [c for c in software if c not in taken]
    return {name: out[name] for name in AXES}


def config_columns(columns: Iterable[str]) -> list[str]:
    """Every column of ``columns`` that identifies a configuration: the workload fields and the
    columns of every axis (the host name and the measurements are not among them)."""
    columns = list(columns)
    out = [c for c in WORKLOAD_FIELDS if c in columns]
    for cols in axis_columns(columns).values():
        out += [c for c in cols if c not in out]
    return out


def _norm(value: Any) -> Any:
    """A cell as a hashable key part: missing -> None, integral numbers -> int (64 and 64.0 from
    two stores are one value), containers -> sorted JSON, everything else as it is."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        v = float(value)
        if math.isnan(v):
            return None
        return int(v) if v.is_integer() else v
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def config_keys(df: pd.DataFrame, columns: Sequence[str]) -> list[tuple]:
    """One hashable key per row: the values of ``columns``, normalised so that two stores' rows
    of one config match (64 and 64.0 are one value; a missing column or value is None)."""
    if not columns:
        return [()] * len(df)
    # A list, not Series.map: pandas gives the mapped values a dtype again (None and 64 in a
    # float column come back as NaN and 64.0, and NaN never equals NaN in a key).
    cols = [[_norm(v) for v in df[c].tolist()] if c in df.columns else [None] * len(df)
            for c in columns]
    return list(zip(*cols))


def _filled(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if df[c].notna().any()]


def _value_label(values: Iterable[tuple], columns: Sequence[str], limit: int = 3) -> str:
    """Readable values of an axis on one side: ``jax_version=0.12, jaxlib_version=0.12``."""
    texts = []
    for v in sorted(set(values), key=str):
        parts = [f"{c}={fmt(x)}" for c, x in zip(columns, v) if x is not None]
        texts.append(", ".join(parts) or "none")
    more = f" (+{len(texts) - limit} more)" if len(texts) > limit else ""
    return "; ".join(texts[:limit]) + more


def differing_axes(base: pd.DataFrame, new: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """The axes along which ``base`` and ``new`` differ: axis -> (BASE's values, NEW's values).

    An axis differs when the values of its columns (those with a value on both sides) on BASE
    and on NEW have nothing in common: all of BASE is ``dtype=float32`` and all of NEW
    ``dtype=bfloat16``. Sides that share a value (both hold float32 rows) do not differ along
    it: the join matches those rows on it.
    """
    both = set(_filled(base)) & set(_filled(new))
    out: dict[str, tuple[str, str]] = {}
    for name, cols in axis_columns(both).items():
        if not cols:
            continue
        a, b = set(config_keys(base, cols)), set(config_keys(new, cols))
        if a and b and not a & b:
            out[name] = (_value_label(a, cols), _value_label(b, cols))
    return out


def workload_join(df_a: pd.DataFrame, df_b: pd.DataFrame) -> list[str]:
    """The columns that say "the same workload" in A and in B, for a speedup of A over B: the
    workload fields both hold, without a workload axis (``dtype``, ``framework``) along which A
    and B differ (:func:`differing_axes`'s rule). Two stores of TensorFlow and PyTorch runs join
    on everything but ``framework``; float32 and bfloat16 rows on everything but ``dtype``.
    When A and B differ in neither and both have ``workload_key`` (the hash of every workload
    field), that one column."""
    both = set(_filled(df_a)) & set(_filled(df_b))
    on = [c for c in WORKLOAD_FIELDS if c in both]
    drop: set[str] = set()
    for name in ("dtype", "framework"):
        cols = [c for c in _FIXED_AXIS_COLUMNS[name] if c in on]
        if cols and not set(config_keys(df_a, cols)) & set(config_keys(df_b, cols)):
            drop.update(cols)
    if not drop and "workload_key" in df_a.columns and "workload_key" in df_b.columns:
        return ["workload_key"]
    return [c for c in on if c not in drop]


def parse_axes(text: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """Axis names from ``"software,revision"`` or a sequence; None for automatic; SpecError-like
    ParadnnError naming the allowed ones otherwise."""
    if text is None:
        return None
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    bad = [n for n in names if n not in AXES]
    if bad or not names:
        raise ParadnnError(f"compare: axis={text!r}; allowed: one or more of "
                           f"{', '.join(AXES)}, comma-separated")
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Join:
    """How two sets of records are matched: the ``axes`` compared (empty: the same
    configuration measured twice), their values on each side, the join columns ``on``, the
    configuration columns left out because one side has no value in them (``ignored``), and
    notes for the user."""

    axes: tuple[str, ...]
    values: dict[str, tuple[str, str]]
    on: list[str]
    ignored: list[str]
    notes: list[str] = field(default_factory=list)


def join_columns(base: pd.DataFrame, new: pd.DataFrame,
                 axes: str | Sequence[str] | None = None) -> Join:
    """The :class:`Join` of ``base`` and ``new``: along ``axes`` (names of :data:`AXES`), or,
    when None, along the one axis that differs (none: a repeat of the same configuration).

    Raises ParadnnError when more axes differ than those asked, naming each with its values:
    two changes at once cannot be told apart.
    """
    asked = parse_axes(axes)
    differ = differing_axes(base, new)
    notes: list[str] = []
    if asked is None:
        if len(differ) > 1:
            raise ParadnnError(
                "compare: BASE and NEW differ in more than one axis: "
                + "; ".join(f"{a} (BASE {v[0]}; NEW {v[1]})" for a, v in differ.items())
                + f"; allowed: one change at a time, or name them together: --axis "
                f"{','.join(differ)}")
        chosen = tuple(differ)
    else:
        extra = [a for a in differ if a not in asked]
        if extra:
            raise ParadnnError(
                f"compare: asked to compare {','.join(asked)}, but BASE and NEW differ in "
                + "; ".join(f"{a} (BASE {differ[a][0]}; NEW {differ[a][1]})" for a in extra)
                + f" too; allowed: name every axis that differs: --axis "
                f"{','.join([*asked, *extra])}")
        for a in asked:
            if a not in differ:
                notes.append(f"axis {a} does not differ between BASE and NEW: configs are "
                             f"joined on it too")
        chosen = tuple(a for a in asked if a in differ)
    filled_a, filled_b = set(_filled(base)), set(_filled(new))
    configs = config_columns(set(base.columns) | set(new.columns))
    cols_of = axis_columns(configs)
    dropped = {c for a in chosen for c in cols_of[a]}
    on = [c for c in configs if c not in dropped and c in filled_a and c in filled_b]
    ignored = [c for c in configs if c not in dropped and (c in filled_a) != (c in filled_b)]
    for a in chosen:
        for side, df in (("BASE", base), ("NEW", new)):
            cols = [c for c in cols_of[a] if c in df.columns]
            n = len(set(config_keys(df, cols))) if cols else 0
            if n > 1 and a in UNPOOLED_AXES:
                # Runs of two frameworks (dtypes, platforms) are different computations, not
                # repeats of one: pooled, their ratio would describe neither.
                flag = "--base-where" if side == "BASE" else "--new-where"
                first = cols[0]
                values = sorted({str(k[0]) for k in config_keys(df, [first]) if k[0] is not None})
                raise ParadnnError(
                    f"compare: {side} holds {n} values of {a} "
                    f"({_value_label(config_keys(df, cols), cols)}) and would pool their runs of "
                    f"one config into one sample; allowed: one {a} a side, e.g. {flag} "
                    f"{first}={values[0] if values else '...'}"
                    + (f" (or {', '.join(values[1:4])})" if len(values) > 1 else ""))
            if n > 1:
                notes.append(f"{side} holds {n} values of {a} ({_value_label(config_keys(df, cols), cols)}); "
                             "their runs of one config are pooled")
    for a, cols in cols_of.items():
        cols = [c for c in cols if c in on]
        if a in chosen or not cols:
            continue
        va, vb = set(config_keys(base, cols)), set(config_keys(new, cols))
        if va != vb and (len(va) > 1 or len(vb) > 1):
            # The sides share some values of this axis but not all: the join keeps only rows
            # whose value is on both sides (a pooled side with two revisions, say).
            notes.append(f"BASE holds {_value_label(va, cols)} and NEW {_value_label(vb, cols)} "
                         f"of {a}: only rows with a value on both sides are matched")
    if ignored:
        notes.append("configuration columns with values on one side only are not joined on: "
                     + ", ".join(ignored))
    return Join(chosen, {a: differ[a] for a in chosen}, on, ignored, notes)


# -- statistics of one config ---------------------------------------------------------------------

def mann_whitney(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U test p-value of samples ``x`` and ``y`` (1 = no evidence of a
    shift), by ``scipy.stats.mannwhitneyu``: its exact null distribution without ties up to
    :data:`EXACT_MAX_PAIRS` pairs, else its normal approximation with tie and continuity
    corrections. 1 when every value is tied (no spread: scipy's NaN); NaN when a sample is
    empty."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        return math.nan
    both = np.concatenate([x, y])
    distinct = len(np.unique(both))
    if distinct == 1:
        return 1.0
    method = "exact" if distinct == n + m and n * m <= EXACT_MAX_PAIRS else "asymptotic"
    return float(scipy_stats.mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue)


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
    return float(2.0 * scipy_stats.t.sf(abs(t), df))


@functools.lru_cache(maxsize=256)
def t_quantile(level: float, df: float) -> float:
    """The two-sided ``level`` critical value of Student's t with ``df`` degrees of freedom
    (1.96 for a large df at 95%; ``scipy.stats.t``). Kept per (level, df): the configs of a
    compare share a few run counts."""
    return float(scipy_stats.t.ppf(0.5 + level / 2, df))


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


def _as_samples(value: Any) -> np.ndarray | None:
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

    samples = [_as_samples(v) for v in rows["step_times_s"]] if "step_times_s" in rows.columns \
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


def _side_noise(s: Side) -> float:
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


def compare_samples(base: Side, new: Side, level: float = LEVEL) -> Estimate:
    """Compare one config: with per-call times on both sides, the Hodges-Lehmann ratio
    ``exp(shift of log time)`` with its interval and the Mann-Whitney p-value (method
    ``samples``); else the ratio of the mean log medians with a normal interval and z-test from
    the recorded intervals (method ``ci``). ``noise``: the larger of the two sides' spreads
    (:func:`relative_spread` of the per-call times, else the recorded CV; with repeats, also
    the spread of the runs' medians)."""
    noise = max((v for v in (_side_noise(base), _side_noise(new)) if np.isfinite(v)),
                default=math.nan)
    if base.samples is not None and new.samples is not None:
        la, lb = np.log(base.samples), np.log(new.samples)
        shift, lo, hi = hodges_lehmann(la, lb, level)
        ratio, lo, hi, p = math.exp(shift), math.exp(lo), math.exp(hi), mann_whitney(la, lb)
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


def benjamini_hochberg(p: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q): the false-discovery-rate correction
    (``scipy.stats.false_discovery_control``) over the finite values of ``p``; NaN stays NaN.
    ``q < alpha`` keeps the expected share of false discoveries among the significant configs
    at most ``alpha``."""
    p = np.asarray(p, dtype=float)
    q = np.full(len(p), np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    if len(idx):
        q[idx] = scipy_stats.false_discovery_control(p[idx], method="bh")
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


# -- the roofline class ---------------------------------------------------------------------------

def bound_of(rows: pd.DataFrame) -> str | None:
    """``memory`` or ``compute``: the roofline class of a config's runs (median arithmetic
    intensity, FLOP/B, against the ridge point peak_flops / peak_bytes_per_sec of the records'
    own peaks, as :func:`paradnn.analysis.roofline`); None when a value is missing."""
    def median(name: str) -> float:
        if name not in rows.columns:
            return math.nan
        v = pd.to_numeric(rows[name], errors="coerce").dropna()
        return float(v.median()) if len(v) else math.nan

    intensity, pf, pb = median("arithmetic_intensity"), median("peak_flops"), median("peak_bytes_per_sec")
    if not (np.isfinite(intensity) and np.isfinite(pf) and np.isfinite(pb)) or pb <= 0:
        return None
    return "memory" if intensity < pf / pb else "compute"


# -- two sets of records --------------------------------------------------------------------------

@dataclass
class CompareResult:
    """What :func:`compare_frames` found. ``table``: one row per config compared (the join
    columns that vary, ``label``, ``bound``, ``runs_base``/``runs_new``, ``n_base``/``n_new``
    (samples), ``base_s``/``new_s`` (median step time, s), ``ratio``, ``ci_low``, ``ci_high``
    (x, NEW/BASE step time), ``p``, ``q`` (Benjamini-Hochberg), ``noise`` (relative),
    ``method``, ``verdict``), sorted by ratio, largest first. ``join``: how the sides were
    matched; ``only_base``/``only_new``: configs on one side only; ``skipped``: rows left out
    (not ok, or no positive step time), per side; ``notes``: what the user should know;
    ``where``: the localisation (:func:`localise`)."""

    table: pd.DataFrame
    join: Join
    threshold: float
    alpha: float
    only_base: int
    only_new: int
    skipped: dict[str, int]
    notes: list[str]
    where: "Localisation"
    level: float = LEVEL
    #: What BASE and NEW are (store paths and selections), for the renderers.
    source: tuple[str, str] = ("BASE", "NEW")

    def counts(self) -> dict[str, int]:
        """Configs per verdict, every verdict of :data:`VERDICTS` present."""
        got = self.table["verdict"].value_counts().to_dict() if len(self.table) else {}
        return {v: int(got.get(v, 0)) for v in VERDICTS}

    def exit_code(self, allow_inconclusive: bool = False) -> int:
        """For CI: 1 when a config regressed; else 3 when one is inconclusive (a regression of
        the threshold's size could not have been detected there: no "no regression" is claimed
        for it) unless ``allow_inconclusive``; else 0. (2, a usage error, is the command
        line's.)"""
        c = self.counts()
        if c["regression"]:
            return 1
        return 3 if c["inconclusive"] and not allow_inconclusive else 0

    @property
    def axis_text(self) -> str:
        """``dtype (BASE dtype=float32; NEW dtype=bfloat16)``, or the repeat case."""
        if not self.join.axes:
            return "none: the same configurations measured twice"
        return "; ".join(f"{a} (BASE {v[0]}; NEW {v[1]})" for a, v in self.join.values.items())


def _check_threshold(threshold: float, alpha: float, level: float) -> None:
    if not (isinstance(threshold, (int, float)) and np.isfinite(threshold) and threshold > 1):
        raise ParadnnError(f"compare: threshold={threshold!r}; allowed: a ratio above 1 (1.1 = "
                           "10% slower)")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ParadnnError(f"compare: alpha={alpha!r}; allowed: a fraction between 0 and 1")
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise ParadnnError(f"compare: level={level!r}; allowed: a fraction between 0 and 1")


def _usable(df: pd.DataFrame, side: str) -> tuple[pd.DataFrame, int, list[str]]:
    rows = ok_rows(df)
    notes = []
    if "step_time_s" not in rows.columns:
        raise ParadnnError(f"compare: {side} has no step_time_s column; allowed: paradnn records "
                           "(paradnn.load of a store)")
    t = pd.to_numeric(rows["step_time_s"], errors="coerce")
    good = rows[t > 0]
    bad = len(rows) - len(good)
    if bad:
        notes.append(f"{side}: {bad} ok row(s) without a positive step_time_s left out")
    return good, len(df) - len(good), notes


def config_label(row: pd.Series, columns: Sequence[str] = ()) -> str:
    """A config's name: :func:`~paradnn.analysis.columns.workload_label` (family, its
    hyperparameters, a dtype other than float32), then ``batch=`` and ``column=value`` for each
    of ``columns`` the name does not hold yet (the columns that vary among the configs)."""
    named = {"family", "dtype", "kind", "model", *FAMILY_FIELDS.get(row.get("family"), ())}
    text = workload_label(row)
    for c in dict.fromkeys(("batch", *columns)):
        if c not in named and c in row.index and _norm(row[c]) is not None:
            text += f" {c}={fmt(_norm(row[c]))}"
    return text


def _precisions(rows: pd.DataFrame) -> set[str]:
    """The measured ``matmul_precision_used`` of float32 rows (empty where not recorded: rows
    before paradnn measured it; reduced dtypes, whose label is the dtype, are left out)."""
    if "matmul_precision_used" not in rows.columns:
        return set()
    return {v for v in rows["matmul_precision_used"] if precision.is_level(v)}


def _steps_per_call(rows: pd.DataFrame) -> set[int]:
    if "steps_per_call_used" not in rows.columns:
        return set()
    return {int(v) for v in pd.to_numeric(rows["steps_per_call_used"], errors="coerce").dropna()}


def _ints(values: set[int]) -> str:
    return ", ".join(map(str, sorted(values)))


def _no_match(base: pd.DataFrame, new: pd.DataFrame, on: Sequence[str]) -> str:
    for c in on:
        a, b = set(config_keys(base, [c])), set(config_keys(new, [c]))
        if not a & b:
            return (f"{c} never matches (BASE {_value_label(a, [c])}; NEW {_value_label(b, [c])})")
    return "no combination of the join columns matches"


#: The columns :func:`compare_frames` reads of a config's rows (with the join columns).
_LOOP_COLUMNS = ("step_times_s", "step_time_s", "step_time_ci_low_s", "step_time_ci_high_s",
                 "step_time_cv", "stable", "steps_per_call_used", "matmul_precision_used",
                 "arithmetic_intensity", "peak_flops", "peak_bytes_per_sec", "family", "dtype",
                 "kind", "model", "batch", *WORKLOAD_FIELDS)


def _loop_columns(rows: pd.DataFrame, on: Sequence[str]) -> list[str]:
    keep = {*_LOOP_COLUMNS, *on}
    for fields in FAMILY_FIELDS.values():
        keep.update(fields)
    return [c for c in rows.columns if c in keep]


class _Runs:
    """One side's rows as arrays, for :func:`compare_frames`' loop over configs: each method
    gives for the runs at ``idx`` (positions) what the function of the same name gives for
    those rows (:func:`side_of`, :func:`bound_of`, :func:`_prefer_stable`,
    :func:`_steps_per_call`, :func:`_precisions`)."""

    NUMERIC = ("step_time_s", "step_time_ci_low_s", "step_time_ci_high_s", "step_time_cv",
               "steps_per_call_used", "arithmetic_intensity", "peak_flops", "peak_bytes_per_sec")

    def __init__(self, rows: pd.DataFrame) -> None:
        n = len(rows)
        self.col = {c: (pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=float)
                        if c in rows.columns else np.full(n, np.nan)) for c in self.NUMERIC}
        self.has_steps = "steps_per_call_used" in rows.columns
        self.samples = ([_as_samples(v) for v in rows["step_times_s"]]
                        if "step_times_s" in rows.columns else [None] * n)
        self.unstable = unstable_mask(rows).to_numpy(dtype=bool)
        self.precision = (rows["matmul_precision_used"].tolist()
                          if "matmul_precision_used" in rows.columns else None)

    def prefer_stable(self, idx: Sequence[int]) -> np.ndarray:
        idx = np.asarray(idx)
        bad = self.unstable[idx]
        return idx[~bad] if bad.any() and not bad.all() else idx

    def side(self, idx: np.ndarray) -> Side:
        samples = [self.samples[i] for i in idx]
        runs = None if any(s is None for s in samples) else tuple(samples)
        c = self.col
        return Side(runs, c["step_time_s"][idx], c["step_time_ci_low_s"][idx],
                    c["step_time_ci_high_s"][idx], c["step_time_cv"][idx])

    def bound(self, idx: np.ndarray) -> str | None:
        def median(name: str) -> float:
            v = self.col[name][idx]
            v = v[~np.isnan(v)]
            return float(np.median(v)) if len(v) else math.nan

        intensity, pf, pb = median("arithmetic_intensity"), median("peak_flops"), median("peak_bytes_per_sec")
        if not (np.isfinite(intensity) and np.isfinite(pf) and np.isfinite(pb)) or pb <= 0:
            return None
        return "memory" if intensity < pf / pb else "compute"

    def steps_per_call(self, idx: np.ndarray) -> set[int]:
        if not self.has_steps:
            return set()
        v = self.col["steps_per_call_used"][idx]
        return {int(x) for x in v[~np.isnan(v)]}

    def precisions(self, idx: np.ndarray) -> set[str]:
        if self.precision is None:
            return set()
        return {v for v in (self.precision[i] for i in idx) if precision.is_level(v)}


def _prefer_stable(rows: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``(rows, n_left_out)``: a config's runs on one side without those that missed their
    precision target, where at least one run met it; all of them otherwise (then the verdict's
    noise says how far they are to be trusted)."""
    bad = unstable_mask(rows)
    if bad.any() and not bad.all():
        return rows[~bad], int(bad.sum())
    return rows, 0


def shared_records(a: pd.DataFrame, b: pd.DataFrame) -> int:
    """How many rows of ``a`` are also rows of ``b``: the same record (``key`` and ``time_utc``,
    as ``paradnn merge`` identifies them, with the same configuration and step time), not
    another measurement of the same config. 0 where a frame lacks those columns."""
    both = set(a.columns) & set(b.columns)
    if not {"key", "time_utc"} <= both:
        return 0
    cols = ["key", "time_utc", "step_time_s", *config_columns(both)]
    cols = list(dict.fromkeys(c for c in cols if c in both))
    theirs = set(config_keys(b, cols))
    return sum(k in theirs for k in config_keys(a, cols))


def compare_frames(base: pd.DataFrame, new: pd.DataFrame, axes: str | Sequence[str] | None = None,
                   threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA,
                   level: float = LEVEL) -> CompareResult:
    """Compare the records of ``new`` against those of ``base`` (DataFrames of
    ``paradnn.load``) config by config, along ``axes`` (None: the one that differs).

    ``threshold`` (x, above 1) is the smallest slowdown called a regression; ``alpha`` the
    false-discovery rate of the Benjamini-Hochberg correction; ``level`` the confidence level
    of the intervals. Only ok rows with a positive ``step_time_s`` take part; runs of one
    config on one side are pooled (their per-call times together). Returns a
    :class:`CompareResult`; raises ParadnnError when the sides cannot be compared (more axes
    differ than asked, no common config, a bad parameter), naming the reason.
    """
    _check_threshold(threshold, alpha, level)
    b_rows, b_skip, notes = _usable(base, "BASE")
    n_rows, n_skip, more = _usable(new, "NEW")
    notes += more
    if b_rows.empty or n_rows.empty:
        empty = "BASE" if b_rows.empty else "NEW"
        raise ParadnnError(f"compare: {empty} has no ok rows with a step time; allowed: stores "
                           "with measured (ok) records")
    shared = shared_records(b_rows, n_rows)
    if shared and shared == len(b_rows) == len(n_rows):
        # The same rows on both sides (one store named twice): not two measurements, so any
        # ratio would be 1 by construction; calling that "unchanged" would mislead.
        raise ParadnnError(f"compare: BASE and NEW are the same {shared} record(s) (identical "
                           "rows: key, time and values), not two measurements: nothing to compare; "
                           "allowed: two different sets of records (a second store, or "
                           "--base-where and --new-where selecting different rows)")
    join = join_columns(b_rows, n_rows, axes)
    notes = list(join.notes) + notes
    if shared:
        notes.append(f"{shared} record(s) are on both sides (identical rows: key, time and values): the "
                     "configs they measured are compared partly with themselves")
    # The loop below takes each config's rows out of the frames: out of ~160 columns that
    # took 3 ms a config, out of the few it reads a tenth of that.
    b_rows, n_rows = b_rows[_loop_columns(b_rows, join.on)], n_rows[_loop_columns(n_rows, join.on)]
    kb, kn = config_keys(b_rows, join.on), config_keys(n_rows, join.on)
    groups_b: dict[tuple, list[int]] = {}
    groups_n: dict[tuple, list[int]] = {}
    for i, k in enumerate(kb):
        groups_b.setdefault(k, []).append(i)
    for i, k in enumerate(kn):
        groups_n.setdefault(k, []).append(i)
    common = [k for k in groups_b if k in groups_n]
    if not common:
        raise ParadnnError(f"compare: no config of BASE ({len(groups_b)}) matches one of NEW "
                           f"({len(groups_n)}) on {', '.join(join.on) or 'nothing'}: "
                           f"{_no_match(b_rows, n_rows, join.on)}; allowed: two sets of records "
                           "of the same configs, one axis apart")
    vary = [c for c in join.on if len({k[join.on.index(c)] for k in common}) > 1]
    shown = [c for c in WORKLOAD_FIELDS if c in join.on] + [c for c in vary if c not in WORKLOAD_FIELDS]
    out: list[dict[str, Any]] = []
    methods: dict[str, int] = {}
    k_differs: list[str] = []
    precision_differs: list[str] = []
    superseded = 0
    # Each side's columns as arrays once, each config's runs as positions into them: a pandas
    # frame per config and side cost ~6 ms a config (20,000 configs: two minutes).
    arr_b, arr_n = _Runs(b_rows), _Runs(n_rows)
    for k in common:
        ib, i_n = arr_b.prefer_stable(groups_b[k]), arr_n.prefer_stable(groups_n[k])
        superseded += len(groups_b[k]) - len(ib) + len(groups_n[k]) - len(i_n)
        first = b_rows.iloc[ib[0]]
        kb_used, kn_used = arr_b.steps_per_call(ib), arr_n.steps_per_call(i_n)
        if kb_used and kn_used and kb_used != kn_used:
            k_differs.append(f"{config_label(first, vary)} (BASE {_ints(kb_used)}; NEW {_ints(kn_used)})")
        pb, pn = arr_b.precisions(ib), arr_n.precisions(i_n)
        differs = bool(pb and pn and pb != pn)
        if differs:
            precision_differs.append(f"{config_label(first, vary)} (BASE {', '.join(sorted(pb))}; "
                                     f"NEW {', '.join(sorted(pn))})")
        est = compare_samples(arr_b.side(ib), arr_n.side(i_n), level)
        methods[est.method] = methods.get(est.method, 0) + 1
        row = {c: first[c] for c in shown}
        row.update(
            label=config_label(first, vary), bound=arr_b.bound(ib), runs_base=len(ib),
            runs_new=len(i_n), n_base=est.n_base, n_new=est.n_new,
            base_s=float(np.median(arr_b.col["step_time_s"][ib])),
            new_s=float(np.median(arr_n.col["step_time_s"][i_n])),
            ratio=est.ratio, ci_low=est.ci_low, ci_high=est.ci_high, p=est.p,
            noise=est.noise, method=est.method, precision_differs=differs)
        out.append(row)
    table = pd.DataFrame(out)
    table["q"] = benjamini_hochberg(table["p"])
    table["verdict"] = [verdict(r.ratio, r.ci_low, r.ci_high, r.q, r.noise, threshold, alpha)
                        for r in table.itertuples()]
    table = table.sort_values("ratio", ascending=False, kind="mergesort").reset_index(drop=True)
    if methods.get("ci"):
        notes.append(f"{methods['ci']} of {len(table)} configs compared on their recorded medians "
                     "and confidence intervals (method ci): their runs lack per-call step times "
                     "(step_times_s, kept by records since paradnn stores them); a weaker test "
                     "than on the samples")
    if superseded:
        notes.append(f"{superseded} run(s) that missed their precision target left out where the "
                     "same config has a run that met it on that side (e.g. a sweep's automatic "
                     "retry of an unstable config): the stable runs are compared")
    if k_differs:
        notes.append(f"{len(k_differs)} config(s) ran a different number of steps per call (K) "
                     f"on the two sides, e.g. {k_differs[0]}: a different compiled program, whose "
                     "per-step time differs by itself on some platforms; fix steps_per_call in "
                     "the sweep to compare like with like")
    if precision_differs:
        notes.append(f"{len(precision_differs)} float32 config(s) ran their matmuls at different "
                     f"precisions on the two sides (measured matmul_precision_used), e.g. "
                     f"{precision_differs[0]}: their ratio compares precisions as well (column "
                     "precision_differs); pin the setting matmul_precision on both sides to "
                     "compare like with like")
    sampled = table["method"] != "ci"
    few = int((sampled & ((table["n_base"] < 3) | (table["n_new"] < 3))).sum())
    single = int((sampled & (table["runs_base"] == 1) & (table["runs_new"] == 1)).sum())
    if single:
        notes.append(f"{single} config(s) have one run a side: run-to-run noise is unknown, so "
                     "only the calls are tested, and on a busy host a whole run can be slower "
                     "with tight calls (docs/compare.md measures the false positives); measure "
                     "both sides with --repeat 3 and compare the pooled runs")
    if few:
        notes.append(f"{few} config(s) have fewer than 3 samples on a side: no test can find a "
                     "change there (inconclusive at best); time more calls (--min-calls)")
    only_b, only_n = len(groups_b) - len(common), len(groups_n) - len(common)
    if only_b or only_n:
        notes.append(f"{only_b} config(s) only in BASE and {only_n} only in NEW are not compared")
    return CompareResult(table, join, threshold, alpha, only_b, only_n,
                         {"BASE": b_skip, "NEW": n_skip}, notes,
                         localise(table, threshold=threshold, alpha=alpha), level)


# -- where the change lives -----------------------------------------------------------------------

#: A split of the localisation tree must explain at least this share of the log ratios' total
#: sum of squares, else the node stays a leaf.
MIN_SPLIT_GAIN = 0.10
#: Depth of the localisation tree: at most 4 regions, each named by at most 2 conditions.
TREE_DEPTH = 2


@dataclass
class Localisation:
    """Where the change lives: ``sentence`` (one or two sentences for the user) and
    ``regions``: one row per leaf of the tree (``region`` text, ``configs``, ``ratio`` (x,
    geometric mean) with ``ci_low``/``ci_high`` (x, 95% interval of the region's mean, a t
    interval over its configs' log ratios; a single config's own interval), ``changed`` (bool),
    ``regressions``, ``significant`` (configs with q < alpha in the region's direction)
    (counts), ``bound`` (composition text))."""

    sentence: str
    regions: pd.DataFrame


@dataclass(frozen=True)
class _Feature:
    name: str
    values: np.ndarray  # float; binary features hold 0/1
    binary: bool
    text_true: str = ""   # binary: how a region with the feature reads
    text_false: str = ""


def _features(table: pd.DataFrame) -> list[_Feature]:
    """The tree's features: the roofline class, the family and dtype (one-hot, when several),
    then every numeric hyperparameter that every compared config has."""
    out: list[_Feature] = []
    bound = table["bound"] if "bound" in table.columns else pd.Series(None, index=table.index)
    if bound.notna().all() and bound.nunique() > 1:
        out.append(_Feature("bound", (bound == "memory").to_numpy(dtype=float), True,
                            "memory-bound", "compute-bound"))
    for col in ("family", "dtype", "framework", "optimizer"):
        if col in table.columns and table[col].notna().all() and table[col].nunique() > 1:
            for v in sorted(table[col].astype(str).unique()):
                out.append(_Feature(f"{col}={v}", (table[col].astype(str) == v).to_numpy(dtype=float),
                                    True, f"{col} {v}" if col != "family" else f"{v}",
                                    f"{col} not {v}" if col != "family" else f"not {v}"))
    skip = {"family", "dtype", "framework", "optimizer", "devices"}
    for col in [c for c in WORKLOAD_FIELDS if c in table.columns and c not in skip]:
        v = pd.to_numeric(table[col], errors="coerce")
        if v.notna().all() and v.nunique() > 1:
            out.append(_Feature(col, v.to_numpy(dtype=float), False))
    return out


def _best_split(y: np.ndarray, idx: np.ndarray, feats: list[_Feature], min_leaf: int,
                min_gain: float) -> tuple[int, float, float] | None:
    """(feature index, threshold, gain) of the split of ``idx`` that most reduces the sum of
    squares of ``y``, or None when none gains ``min_gain``. Ties keep the earlier feature (the
    roofline class and family before hyperparameters)."""
    base = float(((y[idx] - y[idx].mean()) ** 2).sum())
    best: tuple[int, float, float] | None = None
    for fi, f in enumerate(feats):
        x = f.values[idx]
        levels = np.unique(x)
        for lo, hi in zip(levels[:-1], levels[1:]):
            cut = (lo + hi) / 2
            left, right = idx[x <= cut], idx[x > cut]
            if len(left) < min_leaf or len(right) < min_leaf:
                continue
            sse = float(((y[left] - y[left].mean()) ** 2).sum() + ((y[right] - y[right].mean()) ** 2).sum())
            gain = base - sse
            if gain >= min_gain and (best is None or gain > best[2] + 1e-12):
                best = (fi, float(cut), gain)
    return best


def _describe(conds: list[tuple[_Feature, bool]], feats_idx: np.ndarray) -> str:
    """A region as words, from the conditions on its path and the values its configs hold."""
    parts: list[str] = []
    named_binary: dict[str, str] = {}
    numeric: dict[str, _Feature] = {}
    for f, side in conds:
        if f.binary:
            named_binary[f.name] = f.text_true if side else f.text_false
        else:
            numeric[f.name] = f
    for name, f in numeric.items():
        v = f.values[feats_idx]
        lo, hi = v.min(), v.max()
        full = f.values
        if lo == hi:
            parts.append(f"{name} = {fmt(float(lo))}")
        elif lo > full.min() and hi < full.max():
            parts.append(f"{fmt(float(lo))} <= {name} <= {fmt(float(hi))}")
        elif lo > full.min():
            parts.append(f"{name} >= {fmt(float(lo))}")
        else:
            parts.append(f"{name} <= {fmt(float(hi))}")
    words = list(named_binary.values())
    head = " ".join(w for w in words if w.endswith("-bound"))
    rest = [w for w in words if not w.endswith("-bound")]
    noun = " ".join([*rest, "configs"]) if rest else "configs"
    text = f"{head} {noun}".strip()
    return text + (" with " + " and ".join(parts) if parts else "")


def _mean_halfwidth(logs: np.ndarray) -> float:
    if len(logs) < 2:
        return math.nan
    return float(t_quantile(LEVEL, len(logs) - 1) * np.std(logs, ddof=1) / math.sqrt(len(logs)))


#: From this factor on, a change reads as a factor (2.1x) rather than a percentage.
_AS_FACTOR = 1.5


def _change(ratio: float, low: float, high: float) -> str:
    """A region's change as the sentence says it: the change of the step time in percent of
    BASE's, ``9% +/- 2%`` (the +/- is half the 95% interval of the region's mean, in
    percentage points), or from :data:`_AS_FACTOR` on as a factor, ``2.05x +/- 0.10x`` (a
    speedup as BASE/NEW)."""
    known = np.isfinite(low) and np.isfinite(high)
    if ratio >= _AS_FACTOR or ratio <= 1 / _AS_FACTOR:
        f, lo, hi = (ratio, low, high) if ratio > 1 else (1 / ratio, 1 / high, 1 / low)
        return f"{f:.2f}x" + (f" +/- {(hi - lo) / 2:.2f}x" if known else "")
    return f"{abs(ratio - 1) * 100:.0f}%" + (f" +/- {(high - low) * 50:.0f}%" if known else "")


def localise(table: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD,
             alpha: float = DEFAULT_ALPHA, depth: int = TREE_DEPTH,
             min_gain: float = MIN_SPLIT_GAIN) -> Localisation:
    """Where in the hyperparameter space the change lives: a regression tree of depth
    ``depth`` of the log ratio on the roofline class, the family (and dtype) and the
    hyperparameters of the configs of ``table`` (:attr:`CompareResult.table`). A split must
    explain ``min_gain`` of the total sum of squares and leave at least 2 configs (and a tenth
    of them) on each side. A region is *changed* when most of its configs changed significantly
    (``q < alpha``) in the direction of its mean. The sentence names the changed regions with
    their geometric-mean change and its 95% half-width, their roofline class, and "no change
    elsewhere"."""
    cols = ["region", "configs", "ratio", "ci_low", "ci_high", "changed", "regressions",
            "significant", "bound"]
    if table.empty:
        return Localisation("No config was compared.", pd.DataFrame(columns=cols))
    y = np.log(table["ratio"].to_numpy(dtype=float))
    ok = np.isfinite(y)
    sig = (table["q"].to_numpy(dtype=float) < alpha) & ok
    feats = _features(table)
    n = int(ok.sum())
    leaves: list[tuple[np.ndarray, list[tuple[_Feature, bool]]]] = []
    total = float(((y[ok] - y[ok].mean()) ** 2).sum()) if n else 0.0
    min_leaf = max(2, int(math.ceil(n / 10)))

    def grow(idx: np.ndarray, conds: list[tuple[_Feature, bool]], level: int) -> None:
        split = None
        if level < depth and total > 0 and sig.any():
            split = _best_split(y, idx, feats, min_leaf, min_gain * total)
        if split is None:
            leaves.append((idx, conds))
            return
        fi, cut, _ = split
        f = feats[fi]
        x = f.values[idx]
        # For a binary feature "> cut" means the feature holds (1).
        grow(idx[x > cut], conds + [(f, True)], level + 1)
        grow(idx[x <= cut], conds + [(f, False)], level + 1)

    grow(np.flatnonzero(ok), [], 0)
    rows = []
    for idx, conds in leaves:
        logs = y[idx]
        mean = float(logs.mean())
        hw = _mean_halfwidth(logs)
        if len(idx) == 1:
            r = table.iloc[idx[0]]
            hw = float((math.log(r.ci_high) - math.log(r.ci_low)) / 2) if r.ci_high > 0 and r.ci_low > 0 else math.nan
        direction = np.sign(logs) == np.sign(mean)
        moved = int((sig[idx] & direction).sum())
        bounds = table["bound"].iloc[idx] if "bound" in table.columns else pd.Series(dtype=object)
        rows.append({
            "region": _describe(conds, idx) if conds else "all configs",
            "configs": len(idx), "ratio": math.exp(mean),
            "ci_low": math.exp(mean - hw) if np.isfinite(hw) else math.nan,
            "ci_high": math.exp(mean + hw) if np.isfinite(hw) else math.nan,
            "changed": bool(moved * 2 > len(idx)),
            "regressions": int((table["verdict"].iloc[idx] == "regression").sum()) if "verdict" in table else 0,
            "significant": moved, "bound": _bound_text(bounds),
        })
    regions = pd.DataFrame(rows, columns=cols)
    regions = regions.reindex(regions["ratio"].map(lambda r: -abs(math.log(r))).sort_values(kind="mergesort").index)
    regions = regions.reset_index(drop=True)
    return Localisation(_sentence(regions, n, int(sig.sum()), threshold), regions)


def _bound_text(bounds: pd.Series) -> str:
    known = bounds.dropna()
    if known.empty:
        return "roofline class unknown"
    parts = []
    for b in ("memory", "compute"):
        k = int((known == b).sum())
        if k == len(bounds):
            return f"all {b}-bound"
        if k:
            parts.append(f"{k} of {len(bounds)} {b}-bound")
    return ", ".join(parts)


def _sentence(regions: pd.DataFrame, n: int, n_sig: int, threshold: float) -> str:
    if n == 0:
        return "No config has a finite ratio."
    if n_sig == 0:
        all_r = regions["ratio"].to_numpy(dtype=float)
        w = regions["configs"].to_numpy(dtype=float)
        gm = math.exp(float(np.average(np.log(all_r), weights=w)))
        return (f"No significant change in any of the {n} configs (geometric mean "
                f"{gm:.3f}x NEW/BASE step time).")
    changed = regions[regions["changed"]]
    if changed.empty:
        return (f"{n_sig} of {n} configs changed significantly, scattered: no region of the "
                "hyperparameters (or roofline class) holds most of them.")
    parts = []
    for r in changed.itertuples():
        word = "Slower" if r.ratio > 1 else "Faster"
        where = "across all configs" if r.region == "all configs" else f"in {r.region}"
        beyond = "" if abs(math.log(r.ratio)) >= math.log(threshold) else \
            f", within the {threshold:g}x threshold"
        parts.append(f"{word if not parts else word.lower()} by {_change(r.ratio, r.ci_low, r.ci_high)} "
                     f"{where} ({r.configs} configs, {r.bound}{beyond})")
    text = "; ".join(parts)
    rest = regions[~regions["changed"]]
    if len(rest):
        k = int(rest["configs"].sum())
        text += f"; no significant change elsewhere ({k} configs)"
    return text + "."


# -- change points over a history of versions -----------------------------------------------------

def pool(sides: Sequence[Side]) -> Side:
    """One :class:`Side` of several (their runs together; samples only if every one has them)."""
    runs = None if any(s.run_samples is None for s in sides) else \
        tuple(r for s in sides for r in s.run_samples)
    return Side(runs, *(np.concatenate([getattr(s, name) for s in sides])
                        for name in ("medians", "ci_low", "ci_high", "cvs")))


@dataclass(frozen=True)
class Step:
    """A change point of one config's history: the first version after it (``index``), the
    ratio of the segment after it over the segment before (x, step time) with its interval,
    ``p`` (Bonferroni-corrected over the candidate splits of its segment) and the ``noise``
    floor of the versions around it (relative)."""

    index: int
    ratio: float
    ci_low: float
    ci_high: float
    p: float
    noise: float
    method: str


def change_points(versions: Sequence[Side], alpha: float = DEFAULT_ALPHA,
                  level: float = LEVEL) -> list[Step]:
    """Change points of one config measured at successive ``versions`` (oldest first), by
    binary segmentation: in a segment, every split into "before" and "after" is tested
    (:func:`compare_samples` on the pooled runs of each part); the split with the smallest
    p-value is a change point when that p, times the number of splits tried (Bonferroni), is
    below ``alpha`` and the change exceeds the noise floor of the versions around it (the
    largest own spread of one version, so a step between versions is not taken for noise);
    each part is then segmented again. This is asv's step detection idea with the tests of
    :func:`compare_samples`; steps across configs are corrected together by the caller."""
    steps: list[Step] = []
    own = [_side_noise(v) for v in versions]

    def segment(s: int, e: int) -> None:
        if e - s < 2:
            return
        best: tuple[float, float, int, Estimate] | None = None
        for t in range(s + 1, e):
            est = compare_samples(pool(versions[s:t]), pool(versions[t:e]), level)
            if not np.isfinite(est.p):
                continue
            rank = (est.p, -abs(math.log(est.ratio)))
            if best is None or rank < best[:2]:
                best = (*rank, t, est)
        if best is None:
            return
        p, _, t, est = best
        p = min(1.0, p * (e - s - 1))
        floor = max((v for v in own[s:e] if np.isfinite(v)), default=0.0)
        if p < alpha and abs(math.log(est.ratio)) > math.log1p(floor):
            steps.append(Step(t, est.ratio, est.ci_low, est.ci_high, p, floor, est.method))
            segment(s, t)
            segment(t, e)

    segment(0, len(versions))
    return sorted(steps, key=lambda st: st.index)
