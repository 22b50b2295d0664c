"""How long configurations take to measure: the one wall-time estimator, fitted on a store's
own records. ``paradnn plan``, the sweep's progress line (its ETA) and the report's recipes for
missing analyses all call :func:`estimate`, so they give the same seconds for the same store
and configs. Pure: pandas and numpy on a store frame (``paradnn.load``), nothing run.

Per ok record, three measures:

- its *own* seconds (:func:`config_seconds`): compile time plus the timing phase, i.e. the
  warm-up (``warmup_elapsed_s`` where the record has it, else ``warmup_calls`` calls) and the
  timed calls (``timed_calls`` x steps per call x the median step time);
- its *wall* seconds (:func:`wall_seconds`): ``phase_total_s`` where the record has a phase
  breakdown (docs/metrics.md, Phases), else the time since the previous record of the same host
  (records are stamped when they are written, one after the other in a sweep), which includes
  the process start, model initialization and everything else a config costs. A gap shorter
  than the record's own seconds, or longer by more than ``MAX_OVERHEAD_S``, is a pause between
  sessions, not a config, and is not used;
- its *overhead*: wall less own (the rest of a config: building, initializing, cost analysis).

A :class:`TimeModel` fitted on those records predicts a config from its analytic FLOPs per step
(``model_flops_per_step``): ``overhead + compile + timing``, where compile and step time are
power laws in the FLOPs (per family and dtype, else per family, else over all records), the
timing phase is the protocol's bound (``paradnn.measure.timing_bound_s``) for the settings, and
the overhead is the median overhead of the family's records. Where a config's FLOPs are not
known (or no power law could be fitted) it is predicted as the median wall seconds of the
records like it (same family and dtype, then same family, then all), else their own seconds (a
lower bound, said so). Without any record there is no estimate (NaN), except in
:func:`estimate_seconds`, which states a default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from paradnn import sizes
from paradnn.analysis.columns import PLATFORM_KEY, label_columns, ok_rows, platform_label, present
from paradnn.measure import MeasureSettings, timing_bound_s
from paradnn.workload import Workload

DEFAULT_CONFIG_S = 30.0  # per config in estimate_seconds when the store has no record; stated as such
MAX_OVERHEAD_S = 120.0  # a gap longer than compile + timing + this is a pause, not a config
#: Columns a config is matched on when its FLOPs are not known, in order of importance.
MATCH = ("family", "dtype")


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    if col not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[col], errors="coerce")


def config_seconds(df: pd.DataFrame) -> pd.Series:
    """Seconds each ok record spent in compilation and timing (NaN where unknown)."""
    step = _num(df, "step_time_s")
    steps = _num(df, "steps_per_call_used").fillna(_num(df, "steps_per_call"))
    timed = _num(df, "timed_calls") * steps * step
    warm = _num(df, "warmup_elapsed_s").fillna(_num(df, "warmup_calls") * steps * step)
    out = _num(df, "compile_s") + timed + warm.fillna(0.0)
    return out.where(_num(df, "compile_s").notna() & timed.notna())


def wall_seconds(df: pd.DataFrame, start_utc: str | None = None) -> pd.Series:
    """Seconds between each record and the previous record of the same host (NaN for the first,
    and where the gap is implausible for one config: see the module notes). ``start_utc``: when
    the run that wrote the first record began (a calibration run), so that its gap counts too."""
    out = pd.Series(np.nan, index=df.index, dtype=float)
    if "time_utc" not in df.columns or df.empty:
        return out
    t = pd.to_datetime(df["time_utc"], utc=True, errors="coerce", format="mixed")
    own = config_seconds(df)
    hosts = df["host"].fillna("") if "host" in df.columns else pd.Series("", index=df.index)
    for _, idx in t.groupby(hosts).groups.items():
        ts = t.loc[idx].dropna().sort_values()
        prev = ts.shift(1)
        if start_utc is not None and len(prev):
            prev.iloc[0] = pd.Timestamp(start_utc)
        out.loc[ts.index] = (ts - prev).dt.total_seconds()
    low = own.fillna(0.0) * 0.99
    high = own.fillna(0.0) + MAX_OVERHEAD_S
    out = out.where((out > 0) & (out >= low) & (out <= high))
    # A record with a phase breakdown measured its own wall time (phase_total_s: every phase
    # of the config, its worker's start-up included): no gap between records to guess from.
    measured = _num(df, "phase_total_s")
    return measured.where(measured > 0, out)


def _platform_rows(frame: pd.DataFrame, platform: Mapping[str, Any] | None) -> tuple[pd.DataFrame, str]:
    """The rows of ``platform`` (same device platform and kind, and CPU model on a CPU), or
    without one the store's most common platform; and the platform's name."""
    if not len(frame):
        return frame, ""
    if platform is None:
        if not present(frame, PLATFORM_KEY):
            return frame, ""
        # Records of the label's columns only: a row-wise apply over a big store's ~160
        # columns took 0.7 s a call at 10,000 rows.
        labels = pd.Series([platform_label(r) for r in
                            frame[label_columns(frame)].to_dict("records")], index=frame.index)
        name = labels.value_counts().index[0]
        return frame[labels == name], name
    same = pd.Series(True, index=frame.index)
    for col in ("device_platform", "device_kind") + (("cpu_model",) if platform.get("device_platform") == "cpu" else ()):
        same &= (frame[col] == platform.get(col)) if col in frame.columns else False
    name = f"{platform.get('device_platform')}/{platform.get('device_kind')}"
    if platform.get("device_platform") == "cpu":
        name += f" ({platform.get('cpu_model')})"
    return frame[same], name


@dataclass(frozen=True)
class PowerFit:
    """``y = 10**a * x**b`` fitted in log-log space over ``n`` points up to ``x_max``.

    ``floor_rate`` (x per y) bounds it: a prediction is never faster than ``x / floor_rate``.
    With ``rate_above`` (x per y), beyond ``x_max`` y is ``x / rate_above``: the median rate of
    the larger half of the records. A sub-linear slope fitted on small models (where fixed
    costs dominate), or the best rate of one noisy small record, must not promise ever higher
    efficiency for models larger than any measured."""

    a: float
    b: float
    n: int
    floor_rate: float = math.inf
    x_max: float = math.inf
    rate_above: float | None = None

    def __call__(self, x: float) -> float:
        if not x > 0:
            return 10 ** self.a
        if self.rate_above is not None and x > self.x_max:
            return max(x / self.rate_above, 10 ** (self.a + self.b * math.log10(self.x_max)))
        y = 10 ** (self.a + self.b * math.log10(x))
        return max(y, x / self.floor_rate) if math.isfinite(self.floor_rate) else y


def _power_fit(x: np.ndarray, y: np.ndarray, slope: tuple[float, float],
               default_slope: float, bounded: bool) -> PowerFit | None:
    keep = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if not len(x):
        return None
    lx, ly = np.log10(x), np.log10(y)
    if len(x) >= 3 and np.ptp(lx) >= math.log10(4):
        b = float(np.clip(np.polyfit(lx, ly, 1)[0], *slope))
    else:  # too few or too similar points for a slope: assume the default one
        b = default_slope
    a = float(np.median(ly - b * lx))
    if not bounded:
        return PowerFit(a, b, int(len(x)))
    top = x >= np.median(x)
    return PowerFit(a, b, int(len(x)), float(np.max(x / y)), float(np.max(x)),
                    float(np.median(x[top] / y[top])))


@dataclass
class TimeModel:
    """Estimated wall time of one config, in seconds: ``overhead_s + compile_s + timing_s``
    (see the module notes).

    * ``step``: power laws of the step time in the analytic FLOPs per step, keyed (family,
      dtype), (family,) and () (slope 0.5..1, 1 when fewer than 3 records or less than a 4x
      FLOP range), never faster than the best FLOP rate those records reached, and beyond the
      largest record FLOPs over the median rate of the larger half of the records.
    * ``compile``: power laws of the compile time, keyed alike (slope 0..1, 0 = the median
      when few records).
    * ``timing_s`` of a prediction: the timing protocol's bound for the settings (an upper
      bound: a run stops earlier when its times are stable to ``cv_target``).
    * ``overhead``: median overhead per family ("" over all); where no record has a plausible
      gap, 0, and ``source`` says the estimate is then a lower bound.
    * ``records``: the ok records it rests on, with ``own_s`` and ``wall_s`` (predictions for
      configs without FLOPs).
    """

    step: dict[tuple[str, ...], PowerFit] = field(default_factory=dict)
    compile: dict[tuple[str, ...], PowerFit] = field(default_factory=dict)
    #: (min, max) analytic FLOPs per step of the records, per family: outside it, extrapolation.
    flops_range: dict[str, tuple[float, float]] = field(default_factory=dict)
    overhead: dict[str, float] = field(default_factory=dict)
    method: str = "none"  # "store", "calibration run", "none"
    source: str = "no records of this platform: no time estimate"
    records: int = 0
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    platform: str = ""
    _like: dict[tuple, tuple[float, str]] = field(default_factory=dict, repr=False)

    @staticmethod
    def _lookup(fits: dict[tuple[str, ...], PowerFit], family: Any, dtype: Any) -> PowerFit | None:
        for key in ((family, dtype), (family,), ()):
            if key in fits:
                return fits[key]
        return None

    def predict(self, family: str, dtype: str, flops: float | None,
                settings: MeasureSettings | None = None) -> dict[str, Any]:
        """``compile_s``, ``step_s``, ``timing_s``, ``overhead_s``, ``wall_s`` (seconds; NaN
        without records to learn from) and ``basis`` (``fit``, ``records`` or ``none``) of one
        config; ``settings`` default to ``MeasureSettings()``."""
        settings = settings if settings is not None else MeasureSettings()
        step_fit = self._lookup(self.step, family, dtype)
        compile_fit = self._lookup(self.compile, family, dtype)
        if (step_fit is not None and compile_fit is not None and flops is not None
                and math.isfinite(flops) and flops > 0):
            step_s = step_fit(flops)
            compile_s = compile_fit(flops)
            timing_s = timing_bound_s(step_s, settings)
            overhead = self.overhead.get(family, self.overhead.get("", 0.0))
            return dict(compile_s=compile_s, step_s=step_s, timing_s=timing_s, overhead_s=overhead,
                        wall_s=overhead + compile_s + timing_s, basis="fit")
        wall, _ = self.like({"family": family, "dtype": dtype})
        nan = math.nan
        return dict(compile_s=nan, step_s=nan, timing_s=nan, overhead_s=nan, wall_s=wall,
                    basis="records" if math.isfinite(wall) else "none")

    def like(self, config: Mapping[str, Any]) -> tuple[float, str]:
        """``(seconds, basis)`` of one config known only by column values (``MATCH`` columns
        first, then any other given): the median wall seconds of the records that match it on
        the most of them (all, then dropping the last, ...), else their own seconds (a lower
        bound); NaN without records."""
        items = [(k, v) for k, v in config.items() if v is not None and not _nan(v)]
        items.sort(key=lambda kv: MATCH.index(kv[0]) if kv[0] in MATCH else len(MATCH))
        memo = tuple(items)  # a grid asks for the same few (family, dtype) many times
        if memo not in self._like:
            self._like[memo] = self._match(items)
        return self._like[memo]

    def _match(self, items: list[tuple[str, Any]]) -> tuple[float, str]:
        rows = self.table
        if not len(rows):
            return math.nan, "no timed records of this platform"
        for k in range(len(items), -1, -1):
            sel = rows
            for col, v in items[:k]:
                sel = sel[sel[col] == v] if col in sel.columns else sel.iloc[0:0]
            if len(sel):
                what = " ".join(f"{c}={v}" for c, v in items[:k]) or "all"
                where = f" on {self.platform}" if self.platform else ""
                if sel["wall_s"].notna().any():
                    per, n = float(sel["wall_s"].median()), int(sel["wall_s"].notna().sum())
                    how = "wall time between consecutive records"
                else:
                    per, n = float(sel["own_s"].median()), int(sel["own_s"].notna().sum())
                    how = "compile + timing only, a lower bound"
                return per, f"median {per:.3g} s per config ({how}) of {n} {what} records{where}"
        return math.nan, "no timed records of this platform"


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def fit_time_model(frame: pd.DataFrame, platform: Mapping[str, Any] | None = None,
                   method: str = "store", label: str = "the store",
                   start_utc: str | None = None) -> TimeModel:
    """A :class:`TimeModel` from store rows (``paradnn.load``'s frame) of ``platform``
    (``{"device_platform", "device_kind", "cpu_model"}``, e.g. the runner's context; None: the
    store's most common platform). ``start_utc``: when the first record's run began (a
    calibration run), so that its gap counts too. ``label`` names the records in ``source``."""
    if not len(frame):
        return TimeModel(source=f"no records in {label}: no time estimate")
    walls = wall_seconds(frame, start_utc)
    rows = ok_rows(frame)
    rows = rows.assign(own_s=config_seconds(rows), wall_s=walls.loc[rows.index])
    rows = rows[rows["own_s"].notna() | rows["wall_s"].notna()]
    rows, where = _platform_rows(rows, platform)
    if not len(rows):
        what = f"{platform['device_platform']}/{platform['device_kind']}" if platform else "any platform"
        return TimeModel(source=f"no ok records of {what} in {label}: no time estimate "
                                "(use --calibrate, or run a few configs first)")
    model = TimeModel(method=method, records=len(rows), table=rows, platform=where)
    flops = _num(rows, "model_flops_per_step")
    fit = rows[flops.notna() & _num(rows, "step_time_s").notna() & _num(rows, "compile_s").notna()]
    groups: list[tuple[tuple[str, ...], pd.DataFrame]] = []
    if len(fit):
        groups += [((), fit)]
        groups += [((fam,), g) for fam, g in fit.groupby("family")]
        groups += [((fam, dt), g) for (fam, dt), g in fit.groupby(["family", "dtype"])]
        for fam, g in fit.groupby("family"):
            model.flops_range[fam] = (float(g["model_flops_per_step"].min()),
                                      float(g["model_flops_per_step"].max()))
    for key, g in groups:
        x = g["model_flops_per_step"].to_numpy(float)
        step = _power_fit(x, g["step_time_s"].to_numpy(float), (0.5, 1.0), 1.0, bounded=True)
        comp = _power_fit(x, g["compile_s"].to_numpy(float), (0.0, 1.0), 0.0, bounded=False)
        if step is not None and comp is not None:
            model.step[key], model.compile[key] = step, comp
    overhead = (rows["wall_s"] - rows["own_s"]).clip(lower=0.0)
    known = rows.assign(_o=overhead)[overhead.notna()]
    if len(known):
        model.overhead = {str(fam): float(g["_o"].median()) for fam, g in known.groupby("family")}
        model.overhead[""] = float(known["_o"].median())
    overhead_note = ("per-config overhead from the gaps between records" if model.overhead
                     else "no gap between records tells the per-config overhead: compile + "
                          "timing only, a lower bound")
    model.source = (f"{method}: {len(rows)} ok record(s) on {where} in {label}; step time and "
                    f"compile time fitted on analytic FLOPs per step; {overhead_note}")
    return model


@dataclass
class Estimate:
    """What :func:`estimate` says: ``table`` (one row per config, in the given order:
    ``compile_s``, ``step_s``, ``timing_s``, ``overhead_s``, ``wall_s`` in seconds, NaN where
    unknown, and ``basis``: ``fit``, ``records`` or ``none``), ``model`` (the fitted
    :class:`TimeModel`) and ``basis`` (one sentence: which records, how)."""

    table: pd.DataFrame
    model: TimeModel
    basis: str

    @property
    def seconds(self) -> float | None:
        """Total estimated seconds, None when no config has an estimate."""
        known = self.table["wall_s"].dropna() if len(self.table) else self.table
        return float(known.sum()) if len(known) else None


def config_rows(configs: Iterable[Workload | Mapping[str, Any]] | pd.DataFrame,
                frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """Configs as the rows :func:`estimate` reads: ``family``, ``dtype`` and
    ``model_flops_per_step`` (FLOP). A Workload's FLOPs are its analytic count
    (``paradnn.sizes``), else those a stored ok record of the same workload carries
    (``frame``); a mapping (or a DataFrame's row) is taken as it is."""
    if isinstance(configs, pd.DataFrame):
        return configs
    items = list(configs)
    known = sizes.known_counts(frame) if any(isinstance(c, Workload) for c in items) else {}
    rows = []
    for c in items:
        if isinstance(c, Workload):
            flops = sizes.model_flops_per_step(c)
            if flops is None and c.key in known:
                flops = known[c.key][1]
            rows.append({"family": c.family, "dtype": c.dtype,
                         "model_flops_per_step": math.nan if flops is None else flops})
        else:
            rows.append(dict(c))
    return pd.DataFrame.from_records(rows, index=range(len(rows)))


def estimate(frame: pd.DataFrame, configs: Iterable[Workload | Mapping[str, Any]] | pd.DataFrame,
             settings: MeasureSettings | None = None, platform: Mapping[str, Any] | None = None,
             *, model: TimeModel | None = None, label: str = "the store",
             start_utc: str | None = None) -> Estimate:
    """Estimated wall seconds of one measurement of each config, from the store rows
    ``frame`` of ``platform`` (None: the store's most common platform), for the timing
    protocol ``settings`` (None: the defaults). ``configs``: Workloads, or rows with ``family``,
    ``dtype`` and ``model_flops_per_step`` (any may be missing: see :meth:`TimeModel.predict`).
    ``model``: a model fitted before (the planner's calibration run), else fitted here."""
    model = model if model is not None else fit_time_model(frame, platform, label=label,
                                                           start_utc=start_utc)
    rows = config_rows(configs, frame)
    preds = []
    for r in rows.to_dict("records"):
        flops = r.get("model_flops_per_step")
        preds.append(model.predict(r.get("family"), r.get("dtype"),
                                   None if flops is None or _nan(flops) else float(flops), settings))
    cols = ["compile_s", "step_s", "timing_s", "overhead_s", "wall_s", "basis"]
    table = pd.DataFrame.from_records(preds, index=rows.index, columns=cols)
    by = table["basis"].value_counts().to_dict() if len(table) else {}
    parts = [model.source]
    if by.get("records"):
        parts.append(f"{by['records']} config(s) without FLOPs or a fit: the median wall time "
                     "of records like them")
    if by.get("none"):
        parts.append(f"{by['none']} config(s) without an estimate")
    return Estimate(table, model, "; ".join(parts))


def estimate_seconds(df: pd.DataFrame, n_configs: int, like: Mapping[str, Any] | None = None,
                     platform: Mapping[str, Any] | None = None) -> tuple[float, str]:
    """``(seconds, basis)``: the time to measure ``n_configs`` configurations known only by
    column values ``like`` (e.g. ``{"family": "fc", "dtype": "float32"}``), by
    :meth:`TimeModel.like` on the store's records (see :func:`estimate` for configs whose
    workloads are known: it uses their FLOPs). Without any timed record,
    ``DEFAULT_CONFIG_S`` per config, and ``basis`` says so."""
    model = fit_time_model(df, platform)
    per, basis = model.like(dict(like or {}))
    if not math.isfinite(per):
        return DEFAULT_CONFIG_S * n_configs, (f"default {DEFAULT_CONFIG_S:g} s per config: the store "
                                              "has no timed records to learn from")
    return per * n_configs, basis
