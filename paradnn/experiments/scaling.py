"""Multi-device scaling of one workload: weak and strong scaling, overhead share, Amdahl fit.

* **Weak scaling**: a fixed per-device batch ``b``; ``d`` devices train a global batch ``b d``.
* **Strong scaling**: a fixed global batch ``B``; ``d`` devices train ``B / d`` each.

For each device count ``d`` the global throughput ``X(d)`` (examples/s) is measured with
:func:`paradnn.runner.run_workload`. Derived quantities (all dimensionless unless stated):

* per-device throughput ``X(d) / d`` (examples/s per device);
* speedup ``X(d) / X(1)`` and scaling efficiency ``X(d) / (d X(1))`` (1 = linear scaling), for
  both modes (for strong scaling this is ``t(1) / (d t(d))`` of the step times);
* overhead share ``1 - t_c / t(d)``, where ``t_c`` is the step time of the *compute-only
  variant*: the same per-device batch on one device (no collectives, no sharding). It is the
  fraction of the multi-device step not explained by the per-device computation: the gradient
  all-reduce and every other multi-device cost. It is not taken from a profile;
* Amdahl fit of the strong-scaling step times: ``t(d) / t(1) = s + (1 - s) / d``; the serial
  fraction ``s`` by least squares (closed form, clipped to [0, 1]).

On one CPU host with forced host-platform devices all "devices" share the same cores, so the
rows carry ``simulated_devices = True`` and their scaling says nothing about real devices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from paradnn import frameworks
from paradnn.errors import SpecError
from paradnn.measure import MeasureSettings
from paradnn.record import Record
from paradnn.workload import ModelSpec, Workload

MODES = ("weak", "strong")

#: Timing settings (MeasureSettings fields) the scaling command uses unless given: the
#: protocol's own on accelerators; on a CPU host, whose devices are simulated and share its
#: cores (not a multi-device measurement anyway), a 1 s budget per run, so that the default
#: device counts 1, 2, 4, 8 in both modes (about 12 runs) take about a minute, not several.
DEFAULT_SETTINGS: dict[str, dict[str, float]] = {
    "accelerator": {},
    "cpu": {"time_budget_s": 1.0, "warmup_s": 0.1},
}


def efficiency(devices: Sequence[int], throughput: Sequence[float]) -> np.ndarray:
    """Scaling efficiency ``X(d) / (d X(1))`` from global throughputs (any unit) at device counts
    ``devices``; the count 1 must be among them."""
    d = np.asarray(devices, dtype=float)
    x = np.asarray(throughput, dtype=float)
    if 1 not in set(d.tolist()):
        raise SpecError("devices", list(devices), "a list that includes 1 (the baseline)")
    base = x[d == 1][0]
    return x / (d * base)


def amdahl_fit(devices: Sequence[int], step_time_s: Sequence[float]) -> float:
    """Serial fraction ``s`` of Amdahl's law fitted to strong-scaling step times (s): least
    squares of ``t(d)/t(1) - 1/d = s (1 - 1/d)``, clipped to [0, 1]; NaN with no point d > 1."""
    d = np.asarray(devices, dtype=float)
    t = np.asarray(step_time_s, dtype=float)
    if 1 not in set(d.tolist()):
        raise SpecError("devices", list(devices), "a list that includes 1 (the baseline)")
    y = t / t[d == 1][0] - 1.0 / d
    x = 1.0 - 1.0 / d
    denom = float(np.sum(x * x))
    if denom == 0:
        return float("nan")
    return float(np.clip(np.sum(x * y) / denom, 0.0, 1.0))


def amdahl_speedup(devices: Sequence[int] | np.ndarray, serial: float) -> np.ndarray:
    """Amdahl's speedup ``1 / (s + (1 - s) / d)`` at device counts ``devices``."""
    d = np.asarray(devices, dtype=float)
    return 1.0 / (serial + (1.0 - serial) / d)


@dataclass(frozen=True)
class ScalingResult:
    """The records of a scaling experiment (one per measured workload, annotated with
    ``scaling_modes`` and ``weak_``/``strong_`` ``scaling_efficiency`` and ``speedup``) and its
    summary table (one row per mode and device count)."""

    records: list[Record]
    table: pd.DataFrame
    serial_fraction: float  # Amdahl fit of the strong-scaling times, NaN without strong runs
    failed: list[str]  # points left out of the table: "mode d=N batch=B: status: error"


def summarize(points: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """From columns ``mode``, ``devices``, ``batch`` (global), ``step_time_s`` and
    ``compute_step_time_s`` (the compute-only variant's step time, s): adds
    ``examples_per_sec``, ``per_device_examples_per_sec``, ``speedup``, ``scaling_efficiency``
    and ``overhead_share``; returns the table and the strong-scaling serial fraction."""
    out = []
    serial = float("nan")
    for mode, g in points.groupby("mode", sort=False):
        g = g.sort_values("devices").copy()
        if 1 not in set(g["devices"]):
            continue  # no baseline (its run failed): no efficiency for this mode
        g["examples_per_sec"] = g["batch"] / g["step_time_s"]
        g["per_device_examples_per_sec"] = g["examples_per_sec"] / g["devices"]
        g["scaling_efficiency"] = efficiency(g["devices"], g["examples_per_sec"])
        g["speedup"] = g["scaling_efficiency"] * g["devices"]
        g["overhead_share"] = 1.0 - g["compute_step_time_s"] / g["step_time_s"]
        if mode == "strong":
            serial = amdahl_fit(g["devices"], g["step_time_s"])
        out.append(g)
    if not out:
        return points.iloc[0:0].copy(), serial
    return pd.concat(out, ignore_index=True), serial


def run_scaling(spec: ModelSpec, devices: Sequence[int], per_device_batch: int | None = None,
                global_batch: int | None = None, dtype: str = "float32", optimizer: str | None = None,
                settings: MeasureSettings | None = None,
                memory_limit_bytes: int | None = None, framework: str = frameworks.DEFAULT) -> ScalingResult:
    """Weak scaling at ``per_device_batch`` and/or strong scaling at ``global_batch`` (examples)
    over ``devices`` (must include 1). Each distinct (batch, devices) workload is measured once;
    the compute-only variants are the one-device runs at the per-device batch. A point whose
    run (or compute-only variant) fails is left out of the table and listed in ``failed``; its
    record is kept. ``memory_limit_bytes`` as for :func:`paradnn.runner.run_workload`;
    ``framework`` runs the workloads (one that runs data parallelism: JAX)."""
    from paradnn.experiments.collectives import simulated_devices
    from paradnn.runner import run_workload

    devices = sorted(set(devices))
    if devices[0] != 1:
        raise SpecError("devices", devices, "a list that includes 1 (the baseline)")
    if per_device_batch is None and global_batch is None:
        raise SpecError("batch", None, "a per-device batch (weak scaling) and/or a global batch (strong)")
    if global_batch is not None:
        for d in devices:
            if global_batch % d:
                raise SpecError("global_batch", global_batch, f"a multiple of every device count ({devices})")
    settings = settings or MeasureSettings()
    simulated = simulated_devices(framework)
    measured: dict[tuple[int, int], Record] = {}

    def measure(batch: int, d: int) -> Record:
        if (batch, d) not in measured:
            measured[(batch, d)] = run_workload(Workload(spec, batch, dtype, optimizer, d, framework),
                                                settings, memory_limit_bytes)
        return measured[(batch, d)]

    plan = []
    if per_device_batch is not None:
        plan += [("weak", d, per_device_batch * d, per_device_batch) for d in devices]
    if global_batch is not None:
        plan += [("strong", d, global_batch, global_batch // d) for d in devices]
    rows, records, failed = [], [], []
    for mode, d, batch, local in plan:
        rec, compute = measure(batch, d), measure(local, 1)
        if rec.status != "ok" or compute.status != "ok":
            bad = rec if rec.status != "ok" else compute
            failed.append(f"{mode} d={d} batch={batch}: {bad.status}: {bad.error}")
            continue
        rows.append({"mode": mode, "devices": d, "batch": batch, "per_device_batch": local,
                     "step_time_s": rec.metrics["step_time_s"],
                     "compute_step_time_s": compute.metrics["step_time_s"]})
    columns = ["mode", "devices", "batch", "per_device_batch", "step_time_s", "compute_step_time_s"]
    table, serial = summarize(pd.DataFrame(rows, columns=columns))
    table["simulated_devices"] = simulated
    # One record per measured workload (a workload can serve weak and strong scaling and be the
    # compute-only variant of another point): never two rows for one measurement.
    for (batch, d), rec in measured.items():
        metrics = dict(rec.metrics)
        if rec.status != "ok":
            records.append(dataclasses.replace(rec, metrics={**metrics, "simulated_devices": simulated}))
            continue
        uses = table[(table["batch"] == batch) & (table["devices"] == d)]
        metrics.update(scaling_modes=",".join(uses["mode"]) or "compute-only", simulated_devices=simulated,
                       per_device_examples_per_sec=batch / d / rec.metrics["step_time_s"])
        for use in uses.itertuples():
            metrics[f"{use.mode}_scaling_efficiency"] = use.scaling_efficiency
            metrics[f"{use.mode}_speedup"] = use.speedup
            metrics["overhead_share"] = use.overhead_share
            metrics["overhead_source"] = "compute-only variant: the same per-device batch on one device"
            if use.mode == "strong":
                metrics["amdahl_serial_fraction"] = serial
        records.append(dataclasses.replace(rec, metrics=metrics))
    return ScalingResult(records, table, serial, failed)
