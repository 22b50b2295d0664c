"""``paradnn.plan``: what a sweep would do (configs, size, memory, time) without running it.

>>> from paradnn.plan import plan
>>> p = plan("sweeps/fc.yaml", store="results.db")   # doctest: +SKIP
>>> p.table[["layers", "nodes", "batch", "params", "memory_bytes", "predicted", "wall_s"]]  # doctest: +SKIP
>>> p.summary["wall_s"], p.summary["calibration"]["method"]  # doctest: +SKIP

Per config, cheaply (``paradnn.sizes``: closed forms and the zoo's table, nothing built,
traced or compiled):

* ``params``: trainable parameters; ``model_flops_per_step``: analytic matmul and convolution
  FLOPs of one training step (per-example count times the batch; the number records carry).
  A zoo model at a non-default input size has no table entry: its counts come from a stored
  record of the same workload, else they are unknown (NaN).
* ``memory_bytes``: predicted bytes per device, the sum of ``state_bytes`` (float32 weights,
  optimizer slots as ``sizes.OPTIMIZERS`` estimates them, and batch-norm statistics),
  ``gradient_bytes`` (float32, one per parameter), ``batch_bytes`` (the synthetic input batch)
  and ``activation_bytes`` (the family's estimate of what the forward pass keeps for the
  backward pass, ``Family.activation_elements``). A family without an activation or batch
  estimate (the zoo, families registered without one) has ``memory_bytes`` NaN (unknown, and
  ``memory_source`` says so); ``memory_floor_bytes`` is the sum of the parts that are known, a
  lower bound. With ``compile=True`` each config's training program is compiled instead and
  the backend's memory analysis gives the bytes (slow: seconds per config).
* ``predicted``: ``oom`` when ``memory_bytes`` (or, where it is unknown, the floor) exceeds the
  memory limit (the argument, the sweep file's ``memory_limit``, the device's memory, or on a
  CPU the host's memory), else ``run``; ``stored`` when the store already has the records the
  sweep wants (resume skips it).
* ``compile_s``, ``timing_s``, ``overhead_s``, ``wall_s``: the estimated wall time of the config
  (:func:`paradnn.analysis.cost.estimate`, the estimator the sweep's progress line uses), 0 for
  ``stored`` configs.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from paradnn import frameworks, hardware, sizes
from paradnn.analysis.columns import ok_rows
from paradnn.analysis.cost import TimeModel, estimate, fit_time_model
from paradnn.calibration import calibrate as calibration_run
from paradnn.calibration import calibration_configs
from paradnn.errors import ParadnnError, SpecError
from paradnn.grids.sweepfile import GridLike
from paradnn.measure import MeasureSettings
from paradnn.record import record_key
from paradnn.runner import context
from paradnn.store import load
from paradnn.sweeper import SweepConfig, expected_retries
from paradnn.workload import Workload, short_name

__all__ = ["Plan", "TimeModel", "plan", "config_table", "compiled_memory", "fit_time_model",
           "calibration_configs", "short_name"]

_SIZE_COLUMNS = ("params", "model_flops_per_step", "state_bytes", "gradient_bytes", "batch_bytes",
                 "activation_bytes", "memory_bytes", "memory_floor_bytes", "counts_source",
                 "memory_source")


def config_table(workloads: Iterable[Workload], known: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per workload: its fields, ``workload_key``, and :func:`paradnn.sizes.config_sizes`:
    ``params``, ``model_flops_per_step`` (FLOP), ``state_bytes``, ``gradient_bytes``,
    ``batch_bytes``, ``activation_bytes``, ``memory_bytes`` and ``memory_floor_bytes`` (B per
    device; NaN where unknown), ``counts_source`` and ``memory_source``.

    ``known``: store rows; a workload whose counts need a framework (a zoo model at another
    input size) takes them from an ``ok`` row of the same ``workload_key``.
    """
    stored = sizes.known_counts(known)
    rows = []
    for w in workloads:
        row = w.to_dict()
        row["workload_key"] = w.key
        row.update(sizes.config_sizes(w, stored))
        rows.append(row)
    return pd.DataFrame.from_records(rows, columns=None if rows else ["workload_key", *_SIZE_COLUMNS])


def compiled_memory(workload: Workload, xla_preset: str = "best", step_loop: str = "auto") -> tuple[int, float]:
    """(bytes per device, compile seconds) of ``workload``'s training program, compiled as the
    runner compiles it, from the compiled memory analysis (``Backend.compile``)."""
    program = frameworks.get(workload.framework).compile(
        workload, MeasureSettings(xla_preset=xla_preset, step_loop=step_loop))
    peak = program.metrics.get("memory_peak_bytes")
    if peak is None:
        raise ParadnnError(f"--compile: {workload.framework} gives no memory analysis; use the "
                           "analytic estimate (drop --compile)")
    return int(peak), float(program.metrics["compile_s"])


@dataclass
class Plan:
    """What a sweep would do: ``table`` (one row per config, see the module docstring) and
    ``summary`` (counts, ranges, the memory limit and its source, the total estimated wall time
    in seconds, and the calibration used)."""

    table: pd.DataFrame
    summary: dict[str, Any]


def memory_limit(config: SweepConfig, platform: dict[str, Any]) -> tuple[int, str]:
    """(bytes per device, where that number comes from) of the limit a plan predicts ``oom``
    against: the sweep's ``memory_limit_bytes`` (an argument, or the sweep file's
    ``run.memory_limit``), else the runner's default (one device's memory; the host's on a
    CPU)."""
    if config.memory_limit_bytes is not None:
        origin = config.origins.get("memory_limit_bytes", "argument")
        return config.memory_limit_bytes, ("argument" if origin == "argument" else origin)
    device = hardware.device_memory_bytes()
    if device is not None and platform["device_platform"] != "cpu":
        return device, f"memory of one {platform['device_kind']} device"
    host = device if device is not None else hardware.host_memory_bytes()
    if host is None:
        raise ParadnnError("this host reports no memory size: pass a memory limit (--memory-limit)")
    return host, "host memory (CPU backend; what the runner uses unless given --memory-limit)"


def plan(
    config: SweepConfig | GridLike,
    store: str | os.PathLike | None = "results.db",
    *,
    compile: bool = False,
    calibrate: bool = False,
    calibrate_configs: int = 2,
    **overrides: Any,
) -> Plan:
    """Plan a sweep on this host without timing it.

    ``config``: a resolved :class:`~paradnn.sweeper.SweepConfig` (its ``store``, settings and
    run settings are the plan's), or what :meth:`SweepConfig.resolve` takes (a sweep file path
    or a list of Workloads), resolved here with the keyword ``overrides`` (``settings``,
    ``repeat``, ``memory_limit_bytes`` bytes or text such as "16GB" per device for the ``oom``
    prediction, ``retry_unstable_s``, ...: as in :func:`paradnn.sweep`). ``store``: results
    store whose records say which configs are done (resume) and calibrate the time model (None
    or a missing file: none); with a SweepConfig, its own store. The memory limit is the
    sweep's, else the device's, or on a CPU the host's memory. ``compile``:
    compile every config for the backend's memory analysis instead of the analytic estimate
    (seconds per config); a config whose analytic floor (weights + optimizer state) already
    exceeds the limit is not compiled: its memory is that floor and it is predicted ``oom``. ``calibrate``: time ``calibrate_configs`` configs per family first (in
    a temporary store; minutes) and fit the time model to them instead of the store's records.

    Frameworks: JAX is started (its device platform gives the memory limit and the calibration)
    and so is each framework the store holds records of (a config's record key, which says
    whether it is stored, holds its framework's platform and versions); any other framework of
    the sweep is not imported: its configs' ``key`` is None and all of them are to measure
    (``summary["frameworks_not_started"]``).
    """
    t_start = time.perf_counter()
    if isinstance(config, SweepConfig):
        if overrides:
            name = sorted(overrides)[0]
            raise SpecError(name, overrides[name], "nothing besides a resolved SweepConfig "
                            "(dataclasses.replace(config, ...) changes one of its fields)")
        store = config.store
    else:
        config = SweepConfig.resolve(config, "results.db" if store is None else store, **overrides)
    measure, repeat, workloads = config.settings, config.repeat, list(config.workloads)
    platform, _ = context(frameworks.DEFAULT)  # the default framework's device platform: memory limit and calibration
    frame = pd.DataFrame()
    # A missing store is the one the sweep will create: nothing stored yet. Anything else is read
    # as every command reads a store (load: a zero-byte file is a store without rows, as a sweep
    # adopts it; a foreign or damaged file is one line).
    if store is not None and os.path.exists(store):
        frame = load(store)

    table = config_table(workloads, frame)
    limit, limit_source = memory_limit(config, platform)
    if compile:
        memory, compile_s, source = [], [], []
        for i, w in enumerate(workloads):
            if sizes.predicted_oom(w, limit) is not None:
                # Cheapest check first: weights + optimizer state alone exceed the limit, so the
                # config is never traced (a CNN of 10^9 blocks would trace for hours).
                memory.append(float(np.nanmax([table["memory_floor_bytes"].iat[i],
                                               sizes.floor_bytes(w)["total_bytes"]])))
                compile_s.append(math.nan)
                source.append("analytic floor (weights + optimizer state) above the limit: "
                              "not compiled")
                continue
            peak, seconds = compiled_memory(w, measure.xla_preset, measure.step_loop)
            memory.append(peak)
            compile_s.append(seconds)
            source.append("compiled memory analysis")
        table["memory_bytes"] = memory
        table["memory_floor_bytes"] = table["memory_bytes"]
        table["measured_compile_s"] = compile_s
        table["memory_source"] = source

    # Resume: the record key the sweep would give each config here. It holds the framework's
    # platform and versions, which only starting the framework tells (TensorFlow: 10 s and more):
    # a framework the store holds no record of is not started, since none of its configs can be
    # stored; their key is unknown (None) and every one of them is to measure.
    settings_dict = measure.to_dict()
    stored_frameworks = set(frame["framework"].dropna()) if "framework" in frame.columns else set()
    started = {frameworks.DEFAULT} | stored_frameworks
    keys = [record_key(w.to_dict(), *context(w.framework), settings_dict)
            if w.framework in started else None for w in workloads]
    not_started = sorted({w.framework for w in workloads} - started)
    table.insert(0, "key", keys)
    have = frame.groupby("key").size().to_dict() if len(frame) else {}
    table["stored_records"] = [int(have.get(k, 0)) if k is not None else 0 for k in keys]
    table["to_measure"] = [max(0, repeat - have.get(k, 0)) if k is not None else repeat for k in keys]
    # Where the estimate is unknown, the known parts (a lower bound) can still tell an oom.
    over = (table["memory_bytes"] > limit) | (table["memory_floor_bytes"] > limit)
    table["predicted"] = np.where(table["to_measure"] == 0, "stored", np.where(over, "oom", "run"))

    if calibrate:
        model = calibration_run(workloads, table, measure, calibrate_configs, platform)
    elif len(frame):
        model = fit_time_model(frame, platform, label=str(store))
    else:
        model = TimeModel(source="no store records to calibrate from: no time estimate (use "
                                 "--calibrate, or run a few configs first)")
    est = estimate(frame, table[["family", "dtype", "model_flops_per_step"]], measure, platform,
                   model=model).table
    for col in ("compile_s", "timing_s", "overhead_s", "wall_s"):
        table[col] = est[col].to_numpy(float)
    # A predicted oom is refused after the floor check or the compile: overhead (+ compile).
    oom = table["predicted"] == "oom"
    floor = table["state_bytes"].where(table["state_bytes"].notna(), np.inf)
    floor_oom = oom & (floor > limit)
    fitted = (est["basis"] == "fit").to_numpy()
    table.loc[oom, "timing_s"] = 0.0
    table.loc[floor_oom, "compile_s"] = 0.0
    parts = table["overhead_s"] + table["compile_s"] + table["timing_s"]
    table["wall_s"] = np.where(fitted, parts, table["wall_s"]) * table["to_measure"]
    table.loc[table["predicted"] == "stored", ["compile_s", "timing_s", "overhead_s", "wall_s"]] = 0.0
    rows = ok_rows(frame) if len(frame) else frame
    if len(rows) and "device_kind" in rows.columns:
        rows = rows[rows["device_kind"] == platform["device_kind"]]
    # The sweep's automatic retry of unstable configs (paradnn.sweeper.estimates, the estimate
    # the sweep's own progress line makes).
    retry = expected_retries(rows, table[table["predicted"] == "run"], config.retry_unstable_s)

    lo_hi = [model.flops_range.get(f) for f in table["family"]]
    table["extrapolated"] = [r is None or not (r[0] / 2 <= x <= r[1] * 2)
                             for r, x in zip(lo_hi, table["model_flops_per_step"])]
    counts = table["predicted"].value_counts().to_dict()
    unknown = table[table["memory_bytes"].isna()]
    summary: dict[str, Any] = {
        "source": config.source,
        "description": config.description,
        "configs": len(table),
        "by_family": table["family"].value_counts().to_dict(),
        "by_framework": (table["framework"].value_counts().to_dict()
                         if "framework" in table.columns else {}),
        # Frameworks of the sweep not started to plan it (the store holds none of their
        # records): their configs' record keys are unknown and none of them is stored.
        "frameworks_not_started": not_started,
        "stored": int(counts.get("stored", 0)),
        "to_run": int(counts.get("run", 0)),
        "oom": int(counts.get("oom", 0)),
        "repeat": repeat,
        # best_stack: the configs are the default framework's until the sweep's calibration
        # chooses one per family (paradnn.sweeper.stacks); the plan does not calibrate.
        "best_stack": bool(config.best_stack),
        "params_min": _extreme(table["params"], min),
        "params_max": _extreme(table["params"], max),
        "flops_min": _extreme(table["model_flops_per_step"], min, float),
        "flops_max": _extreme(table["model_flops_per_step"], max, float),
        "counts_unknown": int(table["params"].isna().sum()),
        "memory_max_bytes": _extreme(table["memory_bytes"], max, float),
        "memory_floor_max_bytes": _extreme(table["memory_floor_bytes"], max, float),
        # Configs whose memory estimate is unknown (no activation or batch estimate), by family.
        "memory_unknown": int(len(unknown)),
        "memory_unknown_by_family": unknown["family"].value_counts().to_dict(),
        "memory_limit_bytes": int(limit),
        "memory_limit_source": limit_source,
        "memory_method": "compiled" if compile else "analytic",
        # Seconds; None without a calibrated time model.
        "wall_s": (None if model.method == "none"
                   else _total(table, "wall_s", model) + retry["retry_s"]),
        # The sweep's automatic retry of unstable configs (seconds, inside wall_s): its bound
        # and the expected share (the store's unstable share of ok rows on this platform).
        **retry,
        "compile_s": _total(table, "compile_s", model),
        "timing_s": _total(table, "timing_s", model),
        "calibration": {"method": model.method, "records": model.records, "source": model.source,
                        "flops_range": dict(model.flops_range)},
        # Configs to measure whose FLOPs lie outside 1/2..2x the calibrated range.
        "extrapolated": int((table["extrapolated"] & (table["predicted"] == "run")).sum()),
        "settings": settings_dict,
        "platform": f"{platform['device_platform']}/{platform['device_kind']}",
        "plan_s": time.perf_counter() - t_start,
    }
    return Plan(table, summary)


def _extreme(column: pd.Series, pick: Any, cast: Any = int) -> Any:
    """min or max of the known values of ``column``, 0 when there are none (an empty plan) and
    NaN when every value is unknown."""
    if not len(column):
        return cast(0)
    known = column.dropna()
    return cast(pick(known)) if len(known) else math.nan


def _total(table: pd.DataFrame, column: str, model: TimeModel) -> float | None:
    if model.method == "none":
        return None
    weights = table["to_measure"] if column != "wall_s" else 1
    return float((table[column] * weights).sum())
