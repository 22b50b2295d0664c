"""``paradnn.predict``: step times of configs that were not measured, from a store's measurements,
with calibrated intervals; and ``adaptive_sweep``, which measures only the configs a fit needs.

>>> import paradnn
>>> pred = paradnn.predict("sweeps/fc.yaml", store="fc.db")       # doctest: +SKIP
>>> pred[["nodes", "batch", "predicted_examples_per_sec", "prediction_out_of_range"]]  # doctest: +SKIP
>>> from paradnn.predictor import adaptive_sweep
>>> df = adaptive_sweep("sweeps/fc.yaml", budget=36, store="fc.db")  # doctest: +SKIP

The model is :mod:`paradnn.analysis.prediction` (pure); this module reads the stores, adds the
closed-form sizes of every config (:func:`paradnn.analysis.prediction.sized`), decides which platform a
prediction is for, measures through :func:`paradnn.sweeper.sweep` and stores the predictions as
rows of their own, ``status = "predicted"`` (docs/prediction.md). A predicted row has a key of
its own (never a measurement's), no host, and its numbers only in the ``predicted_*`` columns
(``paradnn.analysis.prediction.PREDICTION_COLUMNS``), so no analysis of measured rows can take it
for a measurement, and a sweep still measures the config.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any, Union

import numpy as np
import pandas as pd

from paradnn import families
from paradnn.analysis import prediction as P
from paradnn.analysis.columns import PLATFORM_KEY, platform_label
from paradnn.analysis.prediction import sized
from paradnn.errors import ParadnnError, SpecError
from paradnn.grids import load_sweep_file
from paradnn.measure import KEYED_SETTINGS, SETTINGS_FIELDS
from paradnn.record import PLATFORM_FIELDS, PREDICTED, SCHEMA_VERSION, SOFTWARE_FIELDS, Record
from paradnn.store import Store, load
from paradnn.sweeper import sweep as run_sweep
from paradnn.units import parse_int
from paradnn.workload import Workload, stable_hash

__all__ = ["predict", "score", "adaptive_sweep", "platform_of"]

StoreLike = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]], pd.DataFrame]
TargetsLike = Union[str, os.PathLike, Workload, Iterable[Workload]]


# -- inputs -----------------------------------------------------------------------------------

def _rows(source: StoreLike) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    return load(source)


def _workloads(targets: TargetsLike) -> tuple[list[Workload], dict[str, Any], dict[str, Any]]:
    """(workloads, the file's settings, the file's run options) of a sweep file or a grid."""
    if isinstance(targets, (str, os.PathLike)):
        plan = load_sweep_file(targets)
        return list(plan.workloads), dict(plan.settings), dict(plan.run)
    items = [targets] if isinstance(targets, Workload) else list(targets)
    for item in items:
        if not isinstance(item, Workload):
            raise SpecError("targets", item, "a sweep file path or a list of Workloads "
                            "(paradnn.grid(...))")
    return items, {}, {}


def _mode(rows: pd.DataFrame, cols: Iterable[str]) -> dict[str, Any]:
    """The most common value of each column of ``cols`` present in ``rows`` (None if none)."""
    out = {}
    for c in cols:
        if c in rows.columns:
            v = rows[c].dropna()
            out[c] = v.astype(object).value_counts().index[0] if len(v) else None
    return out


def platform_of(rows: pd.DataFrame, dtype: str | None = None) -> dict[str, Any]:
    """The platform of measured ``rows`` (one platform): its ``PLATFORM_FIELDS`` (no host), the
    peaks of one device for ``dtype`` (medians of the rows' ``peak_flops`` FLOP/s and
    ``peak_bytes_per_sec`` B/s) and where they come from."""
    meas, _ = P.measured(rows, include_unstable=True)
    if dtype is not None and "dtype" in meas.columns and (meas["dtype"] == dtype).any():
        meas = meas[meas["dtype"] == dtype]
    if not len(meas):
        raise ParadnnError("predict: no measured rows to take a platform from")
    plat = _mode(meas, [c for c in PLATFORM_FIELDS if c != "host"])
    peaks = {c: float(pd.to_numeric(meas[c], errors="coerce").median())
             for c in ("peak_flops", "peak_bytes_per_sec") if c in meas.columns}
    source = _mode(meas, ["peak_source"]).get("peak_source") or "unknown"
    return {**plat, **peaks, "peak_source": source}


def _platforms(rows: pd.DataFrame) -> list[dict[str, Any]]:
    cols = [c for c in PLATFORM_KEY if c in rows.columns]
    if not len(rows) or not cols:
        return []
    return [dict(zip(cols, v)) for v in rows[cols].drop_duplicates().itertuples(index=False, name=None)]


# -- predicted rows ---------------------------------------------------------------------------

def _fit_id(model: P.StepTimeModel, train: pd.DataFrame) -> str:
    keys = sorted(map(str, P.measured(P.select(train, model.group), include_unstable=True)[0]
                      .get("key", pd.Series(dtype=str)).dropna()))
    return stable_hash([keys, model.correction, model.level])


def _records(pred: pd.DataFrame, workloads: dict[str, Workload], platform: dict[str, Any],
             context: pd.DataFrame, now: str) -> list[dict[str, Any]]:
    """Store rows (``status = "predicted"``) of the predictions ``pred``: the config, the
    platform predicted for, the software and settings of the rows it rests on (``context``)."""
    software = _mode(context, SOFTWARE_FIELDS)
    settings = _mode(context, SETTINGS_FIELDS)
    plat = {c: platform.get(c) for c in PLATFORM_FIELDS}
    plat["host"] = None  # run on no host: keeps measured rows' time gaps (wall-time estimates) clean
    out = []
    for _, r in pred.iterrows():
        w = workloads[r["workload_key"]]
        metrics = {c: r[c] for c in P.PREDICTION_COLUMNS if c in r.index}
        metrics["params"] = r["params"]  # analytic, as a measured row's
        metrics["model_flops_per_step"] = r["model_flops_per_step"]
        metrics["flops_count_rule"] = families.of(w.spec).count_rule  # counted now, by this rule
        rec = Record(status=PREDICTED, workload=w.to_dict(), platform=plat, software=software,
                     settings=settings, metrics=metrics, time_utc=now)
        row = rec.to_dict()
        # A key of the prediction's own (config, platform, fit), never a measurement's: a
        # predicted row never counts as a measurement of its config when a sweep resumes.
        row["key"] = stable_hash([PREDICTED, w.key, [plat.get(c) for c in PLATFORM_KEY],
                                  r["prediction_fit_id"]])
        row["schema_version"] = SCHEMA_VERSION
        out.append(row)
    return out


def _write(store: str | os.PathLike, rows: list[dict[str, Any]]) -> int:
    """Add the predicted rows the store does not hold yet (same config and fit); the count."""
    with Store(store) as db:
        have = db.counts_by_key([r["key"] for r in rows])
        new = [r for r in rows if r["key"] not in have]
        if new:
            db.add_rows(new)
    return len(new)


# -- predict ----------------------------------------------------------------------------------

def _target_platform(train: pd.DataFrame, store_rows: pd.DataFrame | None) -> dict[str, Any] | None:
    """The platform to predict for when it is not the training one: the store's measured
    platform, when the store has measured rows of exactly one platform absent from ``train``."""
    if store_rows is None:
        return None
    meas, _ = P.measured(store_rows, include_unstable=True)
    known = {tuple(str(p.get(c)) for c in PLATFORM_KEY) for p in _platforms(P.measured(train, True)[0])}
    others = [p for p in _platforms(meas) if tuple(str(p.get(c)) for c in PLATFORM_KEY) not in known]
    if not others:
        return None
    if len(others) > 1:
        raise ParadnnError("predict: the store holds measurements of several platforms the "
                           "training rows lack (" + ", ".join(platform_label(p) for p in others)
                           + "); predict for one at a time (one store per platform)")
    return others[0]


def _cross_basis(model: P.StepTimeModel, target: dict[str, Any]) -> str:
    return (f"cross-platform estimate for {platform_label(target)}: efficiencies, overhead and "
            f"correction learned on {platform_label(model.group)} ({model.n_configs} configs) "
            f"applied to {platform_label(target)}'s peaks {target['peak_flops']:.3g} FLOP/s and "
            f"{target['peak_bytes_per_sec']:.3g} B/s ({target.get('peak_source', 'unknown')}); "
            "assumes that platform reaches the same fraction of its peaks and the same per-step "
            "overhead; the interval is this platform's, not calibrated across platforms")


def predict(
    targets: TargetsLike,
    store: str | os.PathLike = "results.db",
    train: StoreLike | None = None,
    family: str | None = None,
    correction: str = P.DEFAULT_CORRECTION,
    level: float = P.DEFAULT_LEVEL,
    write: bool = True,
    include_unstable: bool = False,
) -> pd.DataFrame:
    """Predict the step time and throughput of every config of ``targets`` (a sweep file or a
    list of Workloads) from measured rows.

    ``train``: stores (or a frame) to fit on; default ``store``. One model per (platform,
    framework, dtype, family) of the training rows' ``ok`` and stable rows (all ``ok`` rows with
    ``include_unstable``). The platform predicted for is the training rows', unless ``store``
    holds measurements of another platform: then each prediction is a **cross-platform
    estimate** for that platform (its peaks from its rows), labelled so in
    ``prediction_basis``. ``family`` restricts fitting and targets to one family.
    ``correction``: a name of ``paradnn.analysis.prediction.CORRECTIONS``; ``level``: the
    intervals' nominal coverage.

    Returns one row per target config that a model covers: its fields and sizes, the
    ``PREDICTION_COLUMNS`` (s, examples/s), ``measured_step_time_s`` (s; NaN where the config
    has no measured ``ok`` row on the platform predicted for) and ``stored`` (True where
    ``store`` holds this prediction as a row, written now or by an earlier call of the same
    fit). ``attrs``: ``models`` (each fit's description),
    ``skipped`` (groups not fitted, with the reason), ``uncovered`` (target configs no model
    covers), ``written`` (rows added). With ``write`` (default), the predictions of configs not
    measured on that platform are added to ``store`` as ``status = "predicted"`` rows (a
    prediction already stored from the same fit is not added twice).
    """
    workloads, _settings, _run = _workloads(targets)
    if family is not None:
        workloads = [w for w in workloads if w.family == family]
        if not workloads:
            raise ParadnnError(f"predict: family={family!r} has no configs among the targets")
    if not workloads:
        raise ParadnnError("predict: no target configs (an empty grid)")
    store_rows = _rows(store) if os.path.exists(str(store)) else None
    train_rows = sized(_rows(train) if train is not None else
                       (store_rows if store_rows is not None else pd.DataFrame()))
    if train is None and store_rows is None:
        raise ParadnnError(f"predict: store {store} does not exist and no train= store is "
                           "given: nothing to fit on")
    predictor = P.fit_all(train_rows, correction, level, family, include_unstable)
    target = _target_platform(train_rows, store_rows) if train is not None else None
    for m in predictor.models:
        m.fit_id = _fit_id(m, train_rows)

    cand = pd.DataFrame([{**w.to_dict(), "workload_key": w.key} for w in workloads])
    cand = cand.drop_duplicates("workload_key").reset_index(drop=True)
    cand = cand.merge(P.size_table(workloads), on="workload_key", how="left")
    by_key = {w.key: w for w in workloads}
    parts, uncovered = [], 0
    now = _dt.datetime.now(_dt.timezone.utc).isoformat()
    records: list[dict[str, Any]] = []
    for (fw, dtype, fam), rows in cand.groupby(["framework", "dtype", "family"], sort=True):
        models = [m for m in predictor.models
                  if (m.group.get("framework"), m.group.get("dtype"), m.group.get("family")) == (fw, dtype, fam)]
        if not models:
            uncovered += len(rows)
            continue
        for model in models if target is None else models[:1]:
            if target is not None:
                plat = platform_of(P.select(store_rows, {k: target[k] for k in PLATFORM_KEY}), dtype)
                pred = model.predict(rows, plat["peak_flops"], plat["peak_bytes_per_sec"],
                                     _cross_basis(model, plat))
                context = P.measured(P.select(store_rows, {k: target[k] for k in PLATFORM_KEY}), True)[0]
            else:
                plat = platform_of(P.select(train_rows, model.group), dtype)
                pred = model.predict(rows)
                context = P.measured(P.select(train_rows, model.group), True)[0]
            on = {k: plat.get(k) for k in PLATFORM_KEY}
            pred = pred.assign(**on)
            meas = P.config_table(P.measured(P.select(
                store_rows if store_rows is not None else train_rows,
                {**on, "framework": fw, "dtype": dtype, "family": fam}), include_unstable=True)[0])
            done = dict(zip(meas.get("workload_key", []), meas.get("step_time_s", [])))
            pred["measured_step_time_s"] = pred["workload_key"].map(done).astype(float)
            recs = _records(pred[pred["measured_step_time_s"].isna()], by_key, plat, context, now)
            records.extend(recs)
            parts.append(pred)
    if not parts:
        fitted = ", ".join(P.group_label(m.group) for m in predictor.models)
        raise ParadnnError(f"predict: no fitted model covers the targets (fitted: {fitted}); "
                           "measure some configs of their family and dtype first")
    out = pd.concat(parts, ignore_index=True)
    written = _write(store, records) if write and records else 0
    out["stored"] = out["measured_step_time_s"].isna() & bool(write)
    out.attrs.update(models=[m.describe() for m in predictor.models], skipped=predictor.skipped,
                     uncovered=uncovered, written=written, cross_platform=target is not None)
    return out


def score(
    store: StoreLike = "results.db",
    train: StoreLike | None = None,
    family: str | None = None,
    correction: str = P.DEFAULT_CORRECTION,
    level: float = P.DEFAULT_LEVEL,
    include_unstable: bool = False,
    keep_predictions: bool = False,
) -> pd.DataFrame:
    """Held-out errors (:func:`paradnn.analysis.prediction.score`) of the models of ``store``'s
    measured rows, beside the pure-roofline baseline. With ``train`` (another platform's
    stores), instead fits on all of ``train`` and scores the cross-platform estimate on every
    measured config of ``store`` (scheme ``cross-platform``)."""
    rows = sized(_rows(store))
    if family is not None:
        have = sorted(map(str, rows["family"].dropna().unique())) if "family" in rows else []
        rows = rows[rows["family"] == family] if "family" in rows else rows
        if not len(rows):
            raise ParadnnError(f"predict: family={family!r} has no rows in the store; families "
                               f"present: {', '.join(have) or 'none'}")
    if train is None:
        fitted = P.fit_all(rows, correction, level, family, include_unstable)  # the clear error, if any
        table = P.score(rows, correction, level, include_unstable=include_unstable,
                        keep_predictions=keep_predictions)
        if not len(table):
            raise ParadnnError(f"predict: no group has the {2 * P.MIN_CONFIGS} measured configs "
                               "a held-out score needs")
        # Which peak each group's roofline divides by (a vendor peak, a quiet probe, a nominal
        # CPU peak), said with the scores.
        table.attrs["models"] = [m.describe() for m in fitted.models]
        return table
    train_rows = sized(_rows(train))
    predictor = P.fit_all(train_rows, correction, level, family, include_unstable)
    out, preds = [], []
    for model in predictor.models:
        g = model.group
        test = P.select(rows, {"framework": g["framework"], "dtype": g["dtype"], "family": g["family"]})
        for plat in _platforms(P.measured(test, include_unstable)[0]):
            if all(str(plat.get(k)) == str(g.get(k)) for k in PLATFORM_KEY):
                continue
            on = P.select(test, plat)
            target = platform_of(on, g["dtype"])
            for m, name in ((model, f"roofline + {model.correction}"),
                            (_baseline_of(model, train_rows), "roofline only")):
                errs, pred = P.score_on(m, on, target["peak_flops"], target["peak_bytes_per_sec"],
                                        _cross_basis(m, target), include_unstable)
                label = f"{P.group_label(g)} -> {platform_label(target)}"
                out.append({"group": label, "scheme": "cross-platform",
                            "held_out": "every measured config of the other platform",
                            "model": name, **errs})
                preds.append(pred.assign(group=label, scheme="cross-platform", model=name))
    table = pd.DataFrame(out, columns=list(P.SCORE_COLUMNS))
    if not len(table):
        raise ParadnnError("predict: the store has no measured configs on a platform other than "
                           "the training one, of a fitted family and dtype")
    if keep_predictions:
        table.attrs["predictions"] = pd.concat(preds, ignore_index=True)
    return table


def _baseline_of(model: P.StepTimeModel, train_rows: pd.DataFrame) -> P.StepTimeModel:
    return P.fit(P.select(train_rows, model.group), "none", model.level)


# -- the adaptive sweep -----------------------------------------------------------------------

def _measured_keys(frame: pd.DataFrame, keys: set[str], like: pd.DataFrame) -> set[str]:
    """Workload keys of ``keys`` that have a measured (not predicted) row in ``frame`` on the
    platform and with the settings of the rows ``like``."""
    if not len(frame) or not len(like):
        return set()
    rows = frame[(frame["status"] != PREDICTED) & frame["workload_key"].isin(keys)]
    for col in (*PLATFORM_KEY, *KEYED_SETTINGS):
        if col in like.columns and col in rows.columns and like[col].notna().any():
            rows = rows[rows[col].astype(str).isin(set(like[col].dropna().astype(str)))]
    return set(rows["workload_key"])


def adaptive_sweep(
    file_or_grid: TargetsLike,
    budget: int,
    store: str | os.PathLike = "results.db",
    target_width: float | None = None,
    start: int | None = None,
    per_round: int = 1,
    correction: str = P.DEFAULT_CORRECTION,
    level: float = P.DEFAULT_LEVEL,
    predict_rest: bool = True,
    retry_unstable: bool = True,
    progress: bool | IO[str] = True,
    **sweep_options: Any,
) -> pd.DataFrame:
    """Measure at most ``budget`` configs of a sweep file or grid, chosen for the model, then
    predict the others into ``store``.

    First a space-filling start (``start`` configs, default ``START_FRACTION`` of the budget: the
    config nearest the centre of each group's log-scaled axes, then repeatedly the farthest
    from those chosen), then rounds of ``per_round`` configs: the model is fitted on what is
    measured and the configs whose ``level`` interval is widest relative to the predicted step
    time are measured next (within a round, each pick counts as measured for the next one).
    It stops at ``budget`` measured configs, or when every interval is at most
    ``target_width`` (relative: (high - low) / predicted), or when every config is measured.
    Resumable like every sweep: configs measured before (same platform and settings) count
    towards the budget and are not measured again; a stopped sweep goes on where it stopped.
    The model fits only runs that met their precision target, so with ``retry_unstable`` a
    chosen config whose run missed it is measured once more at once (the budget counts configs,
    not runs; its unstable row stays in the store).
    ``sweep_options`` go to :func:`paradnn.sweeper.sweep` (``executor``, ``timeout_s``,
    ``memory_limit_bytes``, ``cache_dir``, ...); a sweep file's ``settings`` and ``run``
    apply as in a sweep.

    Returns the store's rows of this grid's configs: the measured ones and, with
    ``predict_rest``, the predicted ones (``status = "predicted"``); ``attrs["rounds"]`` lists
    what each round measured and why; ``attrs["missing"]`` the configs an infrastructure fault
    left unrecorded (as :func:`paradnn.sweeper.sweep` names them: config, record key, why), each
    chosen once and not again by this sweep; ``paradnn sweep --budget`` exits 1 when any is.
    """
    workloads, settings, run = _workloads(file_or_grid)
    budget = parse_int(budget, "budget")
    if per_round is not None:
        per_round = parse_int(per_round, "per_round")
    if target_width is not None and not (isinstance(target_width, (int, float)) and target_width > 0):
        raise ParadnnError(f"target_width={target_width!r}; allowed: a positive relative "
                           "width (0.2: the interval spans 20 percent of the prediction)")
    if not workloads:
        raise ParadnnError("adaptive sweep: the grid has no configs")
    if budget < P.MIN_CONFIGS:
        raise ParadnnError(f"budget={budget}; allowed: at least {P.MIN_CONFIGS} configs (the "
                           "fewest a model is fitted on)")
    stream: IO[str] | None = (sys.stderr if progress is True else None if progress is False
                              else progress)
    # Each chosen config is measured once (``retry_unstable`` below is this sweep's own second
    # try): no automatic retry of the sweeper's on top.
    options = {"executor": run.get("executor"), "timeout_s": run.get("timeout_s"),
               "memory_limit_bytes": run.get("memory_limit"), "repeat": 1,
               "settings": settings or None, "retry_unstable_s": 0, **sweep_options}
    if "cache_dir" in run and "cache_dir" not in sweep_options:
        options["cache_dir"] = run["cache_dir"]
    by_key = {w.key: w for w in workloads}
    cand = pd.DataFrame([{**w.to_dict(), "workload_key": k} for k, w in by_key.items()])
    cand = cand.merge(P.size_table(list(by_key.values())), on="workload_key", how="left")

    def say(text: str) -> None:
        if stream is not None:
            stream.write(f"paradnn sweep --budget: {text}\n")
            stream.flush()

    # Configs an infrastructure fault left unrecorded (a lost Ray worker): named at the end, as a
    # plain sweep names them, unless a later run recorded them; never chosen again by this sweep
    # (a config lost every time would otherwise be chosen every round).
    lost: list[tuple[str, str, str]] = []  # (config, record key, why), as sweep's attrs["missing"]
    lost_keys: set[str] = set()  # their workload keys

    def note_lost(keys: list[str], got: pd.DataFrame) -> None:
        if got.attrs.get("missing"):
            lost.extend(got.attrs["missing"])
            have = set(got["workload_key"]) if "workload_key" in got.columns else set()
            lost_keys.update(k for k in keys if k not in have)

    def finish(frame: pd.DataFrame) -> pd.DataFrame:
        keys = set(frame["key"]) if "key" in frame.columns else set()
        frame.attrs["missing"] = [m for m in lost if m[1] not in keys]
        return frame

    def measure(keys: list[str]) -> pd.DataFrame:
        got = run_sweep([by_key[k] for k in keys], store=store, progress=stream or False, **options)
        note_lost(keys, got)
        if not retry_unstable or not len(got):
            return got
        steady = set(P.measured(got)[0]["workload_key"])
        again = [k for k in keys if k not in steady
                 and (got.loc[got["workload_key"] == k, "status"] == "ok").any()]
        if not again:
            return got
        say(f"{len(again)} config(s) missed the precision target: measuring them once more")
        note_lost(again, run_sweep([by_key[k] for k in again], store=store,
                                   progress=stream or False, remeasure_unstable=True, **options))
        return load(store).pipe(lambda f: f[f["key"].isin(set(got["key"])) | (
            f["workload_key"].isin(set(keys)) & (f["status"] != PREDICTED))])

    if budget >= len(by_key):
        say(f"the budget ({budget}) covers all {len(by_key)} configs: measuring them all")
        return finish(measure(list(by_key)))
    n_start = min(budget, start) if start is not None else P.start_size(budget)
    first = P.space_filling(cand, n_start)[:budget]
    say(f"{len(by_key)} configs, budget {budget}: a space-filling start of {len(first)}, then "
        f"{per_round} per round where the {level:.0%} interval is widest")
    like = measure(first)
    rounds = [{"round": 0, "measured": list(first), "why": "space-filling start"}]
    while True:
        frame = load(store)
        done = _measured_keys(frame, set(by_key), like)
        left = cand[~cand["workload_key"].isin(done | lost_keys)]
        if len(done) >= budget or not len(left):
            break
        rows = sized(frame[frame["workload_key"].isin(done) & (frame["status"] != PREDICTED)])
        try:
            predictor = P.fit_all(rows, correction, level)
        except ParadnnError as exc:
            # Too few usable configs yet (failures, unstable runs): more of the start.
            say(f"no model yet ({exc}); measuring more of the space-filling start")
            extra = [k for k in P.space_filling(cand, len(done) + len(lost_keys) + per_round)
                     if k not in done and k not in lost_keys][:per_round]
            extra = extra or list(left["workload_key"].iloc[:per_round])
            measure(extra)
            rounds.append({"round": len(rounds), "measured": extra, "why": "no model yet"})
            continue
        picks, widest = P.next_configs(predictor, left, min(per_round, budget - len(done)))
        if target_width is not None and np.isfinite(widest) and widest <= target_width:
            say(f"every interval is at most {target_width:g} wide (widest {widest:.3g}): done "
                f"with {len(done)} measured")
            break
        say(f"round {len(rounds)}: {len(done)} measured; widest relative interval {widest:.3g}; "
            f"measuring {len(picks)}")
        measure(picks)
        rounds.append({"round": len(rounds), "measured": picks, "why": f"widest {widest:.3g}"})
    if predict_rest:
        frame = load(store)
        done = _measured_keys(frame, set(by_key), like)
        rest = [by_key[k] for k in by_key if k not in done]
        if rest:
            try:
                pred = predict(rest, store=store, correction=correction, level=level)
                say(f"{len(done)} configs measured; {pred.attrs['written']} predicted rows "
                    f"written to {store}")
            except ParadnnError as exc:
                say(f"the rest is not predicted: {exc}")
    frame = load(store)
    out = frame[frame["workload_key"].isin(set(by_key))].reset_index(drop=True)
    out.attrs["rounds"] = rounds
    return finish(out)
