"""Two sets of records compared config by config (:func:`compare_frames`): usable rows, the join,
each config's runs as arrays, the table of ratios and verdicts with notes, and the roofline
class of a config."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from paradnn import hostmem, precision
from paradnn.analysis.columns import FAMILY_FIELDS, WORKLOAD_FIELDS, ok_rows, unstable_mask
from paradnn.analysis.compare.axes import (
    Join,
    config_columns,
    config_keys,
    config_label,
    join_columns,
    unmatched_reason,
)
from paradnn.analysis.compare.localisation import Localisation, localise
from paradnn.analysis.compare.stats import LEVEL, Side, as_samples, compare_samples, mann_whitney_many
from paradnn.analysis.compare.verdicts import (
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    VERDICTS,
    benjamini_hochberg,
    verdict,
)
from paradnn.errors import ParadnnError


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


#: The columns :func:`compare_frames` reads of a config's rows (with the join columns).
_LOOP_COLUMNS = ("step_times_s", "step_time_s", "step_time_ci_low_s", "step_time_ci_high_s",
                 "step_time_cv", "stable", "steps_per_call_used", "matmul_precision_used",
                 "host_huge_pages", "device_platform",
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
        self.samples = ([as_samples(v) for v in rows["step_times_s"]]
                        if "step_times_s" in rows.columns else [None] * n)
        self.unstable = unstable_mask(rows).to_numpy(dtype=bool)
        self.precision = (rows["matmul_precision_used"].tolist()
                          if "matmul_precision_used" in rows.columns else None)
        # How a CPU run's host memory was backed (paradnn.hostmem); None off the CPU, where it
        # does not move the step time, and "not recorded" in rows before paradnn recorded it.
        cpu = (rows["device_platform"] == "cpu").tolist() if "device_platform" in rows.columns else [False] * n
        pages = rows["host_huge_pages"].tolist() if "host_huge_pages" in rows.columns else [None] * n
        self.pages = [hostmem.recorded(p) if c else None for p, c in zip(pages, cpu)]

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

    def huge_pages(self, idx: np.ndarray) -> set[str]:
        """The ``host_huge_pages`` of the CPU runs at ``idx`` (empty: none ran on a CPU)."""
        return {p for p in (self.pages[i] for i in idx) if p is not None}

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
                           f"{unmatched_reason(b_rows, n_rows, join.on)}; allowed: two sets of records "
                           "of the same configs, one axis apart")
    vary = [c for c in join.on if len({k[join.on.index(c)] for k in common}) > 1]
    shown = [c for c in WORKLOAD_FIELDS if c in join.on] + [c for c in vary if c not in WORKLOAD_FIELDS]
    out: list[dict[str, Any]] = []
    methods: dict[str, int] = {}
    k_differs: list[str] = []
    precision_differs: list[str] = []
    pages_differ: list[str] = []
    superseded = 0
    # Each side's columns as arrays once, each config's runs as positions into them: a pandas
    # frame per config and side cost ~6 ms a config (20,000 configs: two minutes).
    arr_b, arr_n = _Runs(b_rows), _Runs(n_rows)
    runs = {k: (arr_b.prefer_stable(groups_b[k]), arr_n.prefer_stable(groups_n[k])) for k in common}
    sides = {k: (arr_b.side(ib), arr_n.side(i_n)) for k, (ib, i_n) in runs.items()}
    # The rank tests of every config with per-call times, in a few calls of scipy (one per
    # sample sizes) instead of one a config (about 1 ms each).
    sampled = [k for k, (sb, sn) in sides.items() if sb.samples is not None and sn.samples is not None]
    p_calls = dict(zip(sampled, map(float, mann_whitney_many(
        [(np.log(sides[k][0].samples), np.log(sides[k][1].samples)) for k in sampled]))))
    for k in common:
        ib, i_n = runs[k]
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
        hb, hn = arr_b.huge_pages(ib), arr_n.huge_pages(i_n)
        if hb and hn and hb != hn:
            pages_differ.append(f"{config_label(first, vary)} (BASE {', '.join(sorted(hb))}; "
                                f"NEW {', '.join(sorted(hn))})")
        est = compare_samples(*sides[k], level, p_calls.get(k))
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
    if pages_differ:
        notes.append(f"{len(pages_differ)} CPU config(s) ran with their host memory backed differently "
                     f"on the two sides (host_huge_pages), e.g. {pages_differ[0]}: a large model's "
                     "step differs by that alone (1.17-1.20x on the 2-core host, docs/metrics.md "
                     "\"Page faults and huge pages\"); measure both sides with the same setting")
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
