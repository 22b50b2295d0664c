"""One run of one workload on one platform, as a flat, versioned row.

``Record.to_dict()`` is the row the store keeps and ``paradnn.load`` returns: one key per field,
no nesting. Spec fields keep their names (``layers``, ``nodes``, ...), metrics keep the names of
``METRICS``, platform and software fields keep the names below. Never rename a field without a
store migration (``paradnn.store.migrate_row``); add new ones and bump ``SCHEMA_VERSION`` when a
field's name or meaning changes.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from paradnn import backends, families
from paradnn.measure import PROTOCOL_FIELDS
from paradnn.units import si
from paradnn.workload import Workload, stable_hash

# 2: device platform field `backend` -> `device_platform`, plus `framework`.
# 3: the key covers a record's own framework only: its software fields (no other framework's
#    versions, no None placeholders for them) and its options (no other framework's settings).
# 4: the option matmul_precision (every built-in framework); rows before it ran at each
#    framework's default precision and read as matmul_precision "default" (SETTINGS_ADDED).
SCHEMA_VERSION = 4
#: Framework options added after the first schema: schema version -> {option: the value rows of
#: earlier versions ran with}. Migration (``paradnn.store.migrate_row``) fills them in where the
#: row's framework declares the option, so that an old row keys as the same config run now.
SETTINGS_ADDED: dict[int, dict[str, Any]] = {4: {"matmul_precision": "default"}}

#: A predicted row (paradnn.predictor) is not a measurement: no analysis or figure of measured
#: rows uses it (they take ``ok`` rows), and it never counts as a config's record on resume.
PREDICTED = "predicted"
STATUSES = ("ok", "oom", "error", "timeout", "crashed", PREDICTED)

# name -> (unit, where it comes from). Names are a contract (docs/metrics.md): added, never renamed.
METRICS: dict[str, tuple[str, str]] = {
    "examples_per_sec": ("examples/s", "measured: global batch / median step time"),
    "step_time_s": ("s", "measured: median time of one training step"),
    "step_time_p10_s": ("s", "measured: 10th percentile step time"),
    "step_time_p90_s": ("s", "measured: 90th percentile step time"),
    "step_time_cv": ("1", "measured: coefficient of variation of the step time"),
    "flops_per_step": ("FLOP", "executed FLOPs of one step, all devices, counted by the framework "
                       "(see flops_source): XLA cost analysis with loops scaled for jax"),
    "flops_source": ("", "where flops_per_step and bytes_per_step come from (XLA cost analysis, "
                     "torch.utils.flop_counter, ...), or why the framework gives none"),
    "model_flops_per_step": ("FLOP", "analytic count of one step (matmul/conv), all devices"),
    "elementwise_flops_per_step": ("FLOP", "analytic upper estimate of one step's work besides "
                                   "matmuls and convolutions (optimizer update, activations, "
                                   "normalizations, loss), all devices; the slack of flops_mismatch"),
    "bytes_per_step": ("B", "XLA cost analysis: bytes accessed by one step, all devices"),
    "flops_per_sec": ("FLOP/s", "flops_per_step / step_time_s"),
    "flops_utilization": ("1", "flops_per_sec / (peak_flops x devices)"),
    "peak_flops": ("FLOP/s", "peak of one device for the dtype; see peak_source"),
    "peak_bytes_per_sec": ("B/s", "peak memory bandwidth of one device; see peak_source"),
    "peak_source": ("", "spec (vendor table), measured (paradnn probe) or none (only contended "
                    "probes on record: no utilization)"),
    "peak_id": ("", "the peak measurement divided by: the probe's id in the probe cache, or "
                "spec:<table entry>; two records with one peak_id share their denominator"),
    "peak_measured_utc": ("", "when that probe was measured (UTC; empty for the vendor table)"),
    "peak_spread": ("1", "coefficient of variation of that probe's winning GEMM (0 for the vendor "
                    "table); above the run's cv_target raises peak_spread_above_target"),
    "ceiling_flops": ("FLOP/s", "measured ceiling of one device for the dtype: the best quiet GEMM of "
                      "paradnn probe on this host, device and software (the peak's own probe where "
                      "peak_source is measured, as on a CPU; probed beside the vendor peak on a known "
                      "accelerator); None where no quiet probe is on record"),
    "ceiling_bytes_per_sec": ("B/s", "that probe's streaming memory bandwidth of one device"),
    "ceiling_id": ("", "the probe the ceiling is (its id in the probe cache); equal to peak_id where "
                   "the peak is measured"),
    "ceiling_method": ("", "how ceiling_flops was measured (the probe's methods, the winner and when), "
                       "or why there is none"),
    "ceiling_utilization": ("1", "flops_per_sec / (ceiling_flops x devices): executed FLOP/s over "
                            "the measured ceiling; above 1 raises above_ceiling"),
    "model_ceiling_utilization": ("1", "model_flops_per_step / step_time_s / (ceiling_flops x devices): "
                                  "useful FLOP/s over the measured ceiling; above 1 raises above_ceiling"),
    "arithmetic_intensity": ("FLOP/B", "flops_per_step / bytes_per_step"),
    "params": ("1", "trainable parameters, from shapes"),
    "memory_argument_bytes": ("B", "XLA memory analysis, per device"),
    "memory_output_bytes": ("B", "XLA memory analysis, per device"),
    "memory_temp_bytes": ("B", "XLA memory analysis, per device"),
    "memory_peak_bytes": ("B", "XLA memory analysis, per device: its peak, else argument+output+temp-alias"),
    "compile_s": ("s", "measured: wall time of ahead-of-time lowering and compilation"),
    "compile_source": ("", "where the measured program came from: compiled (here), JAX persistent "
                       "cache, or paradnn program cache (JAX: kept by an earlier run on this host "
                       "and software, loaded without tracing); compile_s is then the load"),
    "final_loss": ("1", "measured: loss after the last timed step"),
    "timed_calls": ("1", "measured: number of timed compiled calls"),
    "step_times_s": ("s", "measured: time of one training step in each timed call (the call's "
                     "wall time / steps_per_call_used), in call order, as a list of timed_calls "
                     "numbers (6 significant digits); the samples paradnn compare tests"),
    "model_flops_utilization": ("1", "useful (analytic) FLOP/s over the peak: model_flops_per_step / "
                                "step_time_s / (peak x devices); the headline utilization (MFU)"),
    "useful_flops_ratio": ("1", "model_flops_per_step / flops_per_step (analytic over XLA-executed)"),
    "stable": ("bool", "measured: the precision target was met (step_time_cv <= cv_target)"),
    "step_time_ci_low_s": ("s", "measured: 95% distribution-free confidence bound of the median step "
                           "time (order statistics), lower"),
    "step_time_ci_high_s": ("s", "measured: as step_time_ci_low_s, upper"),
    "steps_per_call_used": ("1", "measured: training steps per timed call (K) the protocol chose"),
    "step_loop_used": ("", "measured program: device (K steps in a loop inside the compiled program) "
                       "or host (a one-step program called K times); settings step_loop"),
    "matmul_precision_used": ("", "measured: the internal precision of the run's float32 matmuls and "
                              "convolutions (highest, bf16x3, tf32, bf16; 'matmul X, conv Y' where "
                              "they differ), from a probe matmul and convolution run by the "
                              "framework with the run's settings against exact products "
                              "(paradnn.precision); a reduced compute dtype's name (bfloat16, "
                              "float16) where the run multiplies in it; settings matmul_precision"),
    "matmul_precision_bits": ("bits", "measured: effective mantissa bits of that probe (the fewer of "
                              "matmul and convolution): about 22-24 full float32, 16 bf16x3, 11 "
                              "tf32, 8 bf16; empty for a reduced compute dtype"),
    "warmup_calls_used": ("1", "measured: untimed warm-up calls"),
    "warmup_elapsed_s": ("s", "measured: wall time of the warm-up calls (the setting warmup_s is "
                         "their minimum)"),
    "timing_s": ("s", "measured: wall time of the whole timing phase (warm-up and timed calls)"),
    "time_budget_used_s": ("s", "the time budget the timing protocol ran with: the settings' "
                           "time_budget_s, or a multiple of it in a sweep's automatic retry of an "
                           "unstable config (retry_unstable_s, docs/sweeps.md)"),
    "memory_limit_bytes": ("B", "the memory of one device that the run's out-of-memory predictions "
                           "were checked against: given (--memory-limit, a sweep's memory_limit) "
                           "or the device's as its framework reports it"),
    "memory_limit_source": ("", "given, or device: JAX's runtime limit (memory_stats bytes_limit on a "
                            "GPU), else the vendor table's memory, else the host's memory on a CPU; "
                            "PyTorch's CUDA total memory; TensorFlow's vendor table or host memory"),
    "oom_predicted": ("bool", "an oom status predicted without running: from the analytic weights and "
                      "optimizer state, or the compiled memory analysis, against the memory limit"),
    "peak_method": ("", "how peak_flops was obtained: the vendor table entry, or the probe's methods "
                    "and which one was best"),
    # Memory breakdown of the step (paradnn.backends.jax.memory; TBD's categories), B per device. The five
    # parts sum to the compiled total argument + output + temp - alias.
    "memory_weights_bytes": ("B", "shapes: parameters + model state (batch-norm statistics) + the "
                             "compute-dtype weight copies the backward pass keeps, per device"),
    "memory_gradients_bytes": ("B", "weight gradients: what the compiled total leaves after weights, "
                               "optimizer state and feature maps, at most the parameters' bytes"),
    "memory_optimizer_bytes": ("B", "shapes: optimizer state (momentum, moments), per device"),
    "memory_activations_bytes": ("B", "feature maps: input batch + the residuals JAX's autodiff saves "
                                 "for the backward pass (jax.vjp under jax.eval_shape), per device"),
    "memory_workspace_bytes": ("B", "compiled total minus the other four parts (0 if they exceed it)"),
    # Energy over the timed window (paradnn.energy); None with energy_source "unavailable".
    "energy_per_step_j": ("J", "measured: energy counter over the timed window / training steps in it"),
    "energy_per_example_j": ("J/example", "measured: energy over the timed window / examples in it"),
    "power_w": ("W", "measured: energy over the timed window / its wall time (average power)"),
    "examples_per_joule": ("examples/J", "measured: examples in the timed window / its energy"),
    "energy_source": ("", "nvml (GPU energy counter), nvml-power (sampled GPU power), rapl (CPU "
                      "package counters) or unavailable"),
    "energy_note": ("", "which counters were read, or why no energy was measured"),
    # Host and device utilization over the timed window (paradnn.hostutil).
    "host_cpu_utilization": ("1", "measured: /proc/stat, busy share of the window's ticks, mean over "
                             "the host's cores (all processes)"),
    "host_cpu_utilization_per_core": ("1", "measured: as host_cpu_utilization per core, comma-separated"),
    "process_cpu_s": ("s", "measured: CPU time (user + system, all threads) of the measuring process in "
                      "the timed window"),
    "device_busy_fraction": ("1", "measured: union of kernel times on the device streams of a profiler "
                             "trace / the window's wall time (GPU/TPU only)"),
    "device_busy_note": ("", "how device_busy_fraction was obtained, or why not"),
    "meter_window_s": ("s", "measured: wall time of the metered window (energy and utilization)"),
    # Compiling ahead (the process executor's overlap; docs/performance.md "Compiling ahead").
    "overlap_workers": ("1", "prepare workers that compiled configs ahead while this one was "
                        "measured (0: a sequential sweep; the run option overlap)"),
    "prepared_ahead": ("bool", "a prepare worker compiled this config's programs and filled its "
                       "analyses before it was measured (its compile phases are cache loads)"),
    "preparers_stopped": ("bool", "prepare workers sharing this config's CPU cores were stopped "
                          "(SIGSTOP) during its warm-up and timed calls"),
    "prepare_wait_s": ("s", "measured: seconds this config waited for its prepare worker before "
                       "its measurement began (not in phase_total_s)"),
}

#: Where a config's wall time goes, in the order the work happens: phase -> what it covers. Each
#: is the metric ``phase_<name>_s`` (s, measured with ``time.perf_counter`` in the process that did
#: the work; None where the phase did not run). Together they sum to ``phase_total_s``; the store
#: write comes after the record exists, so only the sweep's own totals carry it (docs/metrics.md).
PHASES: dict[str, str] = {
    "startup": "a fresh worker process: interpreter start, framework import and device discovery, "
               "charged to the first config that worker runs (0 for the others)",
    "trace": "building the model and tracing and lowering the training step (abstract inputs)",
    "compile": "compiling the measured program (a hit in the persistent compilation cache is a load)",
    "init": "initializing the state and the synthetic batch on the device(s)",
    "warmup": "untimed warm-up calls (warmup_elapsed_s)",
    "timed": "the timed calls (timing_s - warmup_elapsed_s)",
    "costs": "the framework's cost analysis (XLA's, with the loop variants of scanned models) and "
             "the analytic FLOP count",
    "memory": "the memory breakdown (residuals from abstract evaluations)",
    "other": "the rest of the config's run in its worker: context, checks, derived metrics",
    "executor": "handing the config to the worker and its record back (pickling, pipes, Ray)",
}


def phase_metric(phase: str) -> str:
    """The metric name of ``phase`` (a :data:`PHASES` key): ``phase_<phase>_s``."""
    return f"phase_{phase}_s"


def phase_totals(rows: Any) -> dict[str, float]:
    """Seconds per phase (:data:`PHASES` order, then ``total``) summed over ``rows`` (mappings
    of metrics: record metrics or store rows); rows without a breakdown (older records) add
    nothing, NaN and None count as 0."""
    out = {p: 0.0 for p in [*PHASES, "total"]}
    for row in rows:
        for p in out:
            value = row.get("phase_total_s" if p == "total" else phase_metric(p))
            if isinstance(value, (int, float)) and value == value:
                out[p] += float(value)
    return out


def format_phase_totals(totals: dict[str, float]) -> str:
    """One line of :func:`phase_totals` with units, largest share named first, e.g.
    ``compile 5.3 s (41%), init 2.0 s (15%), ...``; phases under 0.5% are left out."""
    total = totals.get("total") or sum(v for k, v in totals.items() if k != "total")
    if not total:
        return "no phase breakdown in these rows"
    parts = sorted(((v, k) for k, v in totals.items() if k != "total" and v / total >= 0.005), reverse=True)
    return ", ".join(f"{k} {v:.2f} s ({v / total:.0%})" for v, k in parts) + f"; total {total:.2f} s"


METRICS.update({phase_metric(p): ("s", f"measured: wall time of one config's {p} phase: {what}")
                for p, what in PHASES.items()})
METRICS["phase_total_s"] = ("s", "measured: wall time of one config from the executor's point of "
                            "view: the sum of its phase_*_s (docs/metrics.md, Phases)")

#: The memory breakdown's metrics (``METRICS``), in the order of a stacked bar (bottom to top):
#: they sum to the compiled total where a backend reports the breakdown.
MEMORY_PARTS: tuple[str, ...] = (
    "memory_weights_bytes", "memory_gradients_bytes", "memory_optimizer_bytes",
    "memory_activations_bytes", "memory_workspace_bytes",
)

#: Physics and consistency checks a measured record can fail: code -> what it means and the
#: likely cause. A record lists the codes it fails in ``warnings``; analyses honour them.
WARNINGS: dict[str, str] = {
    "utilization_above_1": (
        "achieved FLOP/s above the device peak, which is impossible: the peak is too low (a "
        "measured CPU peak that missed the machine's fastest library) or "
        "the FLOP count includes work that was not done"),
    "above_roof": (
        "the point lies above its roofline min(peak FLOP/s, intensity x peak bandwidth): the "
        "bandwidth peak is too low, or XLA's bytes-accessed count misses reuse in caches"),
    "flops_mismatch": (
        "executed FLOPs below 0.8x the analytic (useful) matmul count, or above 1.25x the useful "
        "count plus the analytic estimate of the optimizer's and element-wise work: XLA "
        "executes extra work (e.g. XLA:CPU rewrites depthwise weight gradients as dense "
        "convolutions) or the analytic count misses operations; model_flops_utilization, from "
        "useful FLOPs, is the one to quote"),
    "peak_spread_above_target": (
        "the peak this utilization divides by spread more than the run's cv_target over its own "
        "repetitions (a probe accepted under a raised PARADNN_PROBE_MAX_CV): the utilization is "
        "no more precise than that spread; re-probe on a quiet host (paradnn probe --refresh)"),
    "above_ceiling": (
        "ceiling_utilization or model_ceiling_utilization above 1: the run beat the best GEMM "
        "this host measured (the measured ceiling), which is impossible: the probe missed a "
        "faster library or kernel, or the FLOP count includes work that was not done (where "
        "the ceiling is the peak, as on a CPU, utilization_above_1 comes with it)"),
    "peak_below_ceiling": (
        "the vendor peak the utilization divides by is below the GEMM rate measured on this "
        "device (ceiling_flops > peak_flops), which is impossible: the peak table entry is "
        "wrong for this device (another form factor or clocks) or the device kind matched the "
        "wrong entry; paradnn probe names the entry"),
    "no_quiet_peak": (
        "only contended probes of this host's peak are on record, so no utilization was "
        "computed (a peak measured under load would inflate it); run paradnn probe --refresh on "
        "a quiet host: runs measured after it divide by that peak"),
}
#: Tolerance of ``flops_mismatch``: useful over executed FLOPs must lie in this range, once the
#: executed side is granted the analytic estimate of its non-matmul work (:func:`flops_mismatch`).
FLOPS_RATIO_RANGE = (0.8, 1.25)


def flops_mismatch(metrics: dict[str, Any]) -> bool:
    """Whether a record's executed FLOPs disagree with the analytic count, comparing like with
    like: the analytic matmul/convolution count ``m`` (``model_flops_per_step``) explains an
    executed count ``x`` from ``m / 1.25`` (a framework that counts fewer products) up to
    ``(m + e) / 0.8``, where ``e`` (``elementwise_flops_per_step``) estimates the optimizer's
    and element-wise work that XLA counts and torch's matmul counter does not. In terms of
    ``useful_flops_ratio`` ``r = m / x``: flagged when ``r > 1.25`` or ``r < 0.8 * m / (m + e)``.
    Without ``e`` (rows of older versions, zoo models at other sizes) ``e = 0``: the plain
    ratio range."""
    ratio = metrics.get("useful_flops_ratio")
    if ratio is None:
        return False
    useful, extra = metrics.get("model_flops_per_step"), metrics.get("elementwise_flops_per_step")
    share = useful / (useful + extra) if useful and extra and useful > 0 and extra > 0 else 1.0
    return not FLOPS_RATIO_RANGE[0] * share <= ratio <= FLOPS_RATIO_RANGE[1]


def physics_warnings(metrics: dict[str, Any], devices: int = 1, cv_target: float | None = None) -> list[str]:
    """The ``WARNINGS`` codes that a measured record's metrics fail (empty if none); peaks in
    ``metrics`` are per device, achieved FLOP/s over all ``devices``; ``cv_target`` (the run's
    precision target, 1) is what the peak's own spread is held to."""
    codes = []
    if metrics.get("peak_source") == "none":
        codes.append("no_quiet_peak")
    spread = metrics.get("peak_spread")
    if cv_target is not None and spread is not None and spread > cv_target:
        codes.append("peak_spread_above_target")
    utilizations = (metrics.get("flops_utilization"), metrics.get("model_flops_utilization"))
    if any(u is not None and u > 1.0 for u in utilizations):
        codes.append("utilization_above_1")
    against_ceiling = (metrics.get("ceiling_utilization"), metrics.get("model_ceiling_utilization"))
    if any(u is not None and u > 1.0 for u in against_ceiling):
        codes.append("above_ceiling")
    ceiling = metrics.get("ceiling_flops")
    if (metrics.get("peak_source") == "spec" and ceiling is not None
            and metrics.get("peak_flops") is not None and ceiling > metrics["peak_flops"]):
        codes.append("peak_below_ceiling")
    intensity, bandwidth = metrics.get("arithmetic_intensity"), metrics.get("peak_bytes_per_sec")
    peak, achieved = metrics.get("peak_flops"), metrics.get("flops_per_sec")
    if None not in (intensity, bandwidth, peak, achieved):
        if achieved > min(peak, intensity * bandwidth) * devices:
            codes.append("above_roof")
    if flops_mismatch(metrics):
        codes.append("flops_mismatch")
    return codes


def peak_and_ceiling(m: Mapping[str, Any]) -> str:
    """What a record's utilizations divide by, in words with units and sources, from its
    ``peak_flops``, ``peak_source``, ``peak_method``, ``peak_id``, ``ceiling_flops`` and
    ``ceiling_id`` (a record's metrics, a stored row; absent or NaN values are unknown), e.g.
    ``peak 989 TFLOP/s (spec: vendor table: NVIDIA H100 80GB HBM3), ceiling 795 TFLOP/s
    (measured, probe 1a2b3c4d5e6f)``; on a CPU ``peak 199 GFLOP/s (measured, probe ...),
    ceiling: the same probe``. A row written before ceilings were recorded says so."""
    def value(name: str) -> Any:
        v = m.get(name)
        return None if v is None or (isinstance(v, float) and v != v) else v

    def one(flops: Any, source: Any, method: Any, id_: Any) -> str:
        if flops is None:
            return "n/a (no usable probe on record)"
        if source == "spec":
            return f"{si(flops, 'FLOP/s')} (spec: {method})"
        return f"{si(flops, 'FLOP/s')} (measured" + (f", probe {id_})" if id_ else ")")

    peak = one(value("peak_flops"), value("peak_source"), value("peak_method"), value("peak_id"))
    if not value("ceiling_method"):  # every record since ceilings exist says how it got one
        return f"peak {peak}, ceiling not recorded"
    if value("ceiling_id") == value("peak_id"):
        return f"peak {peak}, ceiling: the same probe"
    return f"peak {peak}, ceiling {one(value('ceiling_flops'), 'measured', None, value('ceiling_id'))}"


def warning_codes(value: Any) -> list[str]:
    """The codes of a row's ``warnings`` field (comma-separated; None, NaN or "" for none)."""
    if not isinstance(value, str) or not value:
        return []
    return [code for code in value.split(",") if code]

PLATFORM_FIELDS = ("device_platform", "device_kind", "device_count", "host", "cpu_model")
#: Software fields of every record whatever its framework (``paradnn.hardware.software_info``
#: and ``Backend.software_info``'s ``framework_version``); ``paradnn_revision`` is recorded too
#: but left out of the key.
CORE_SOFTWARE_FIELDS = ("paradnn_version", "framework_version", "python_version")


def _software_columns() -> tuple[str, ...]:
    versions = [f for name in backends.names() for f in backends.meta(name).version_fields]
    return tuple(dict.fromkeys(("paradnn_version", "framework_version", *versions, "python_version")))


#: The software columns every stored row has (None where its framework does not set them): the
#: core fields and every registered framework's ``FrameworkInfo.version_fields``, read at each
#: use. A framework's other software fields are columns of its own rows.
SOFTWARE_FIELDS = families.FieldsView(_software_columns)


def record_key(workload: dict[str, Any], platform: dict[str, Any], software: dict[str, Any],
               settings: dict[str, Any]) -> str:
    """The identity of a run for resume and deduplication: workload + platform + software +
    settings (16 hex digits, :func:`paradnn.workload.stable_hash`).

    ``host`` is left out so that the same run on two identical machines dedups as one
    configuration measured twice is not lost: ``merge`` keys rows on ``key`` + ``time_utc``.
    ``paradnn_revision`` (the source commit, "+dirty" after any edit) is left out too, so a
    sweep resumes across commits and edits of paradnn; every row still stores it. Options of
    frameworks other than the workload's are left out of the settings (a settings dict of
    every framework's options, as a sweep predicts keys with, gives the record's key).
    """
    platform = {k: v for k, v in platform.items() if k != "host"}
    software = {k: v for k, v in software.items() if k != "paradnn_revision"}
    framework = workload.get("framework")
    if framework in backends.names():
        others = set(backends.option_names()) - set(backends.option_names(framework))
        settings = {k: v for k, v in settings.items() if k not in others}
    return stable_hash([workload, platform, software, settings])


def row_key(row: dict[str, Any]) -> str | None:
    """The key the current schema gives a stored row (a flat ``Record.to_dict()``), rebuilt
    from its columns: the workload's fields, the platform, the core software fields and those
    of its framework (``FrameworkInfo.software_fields``), the protocol settings and its
    framework's options. None for a row whose family or framework is not registered here, or
    that is not a model's (operator, collective and infeed rows have no framework)."""
    framework, family = row.get("framework"), row.get("family")
    if framework not in backends.names() or family not in families.names():
        return None
    fields = ("family", *families.get(family).fields(), "batch", "dtype", "optimizer", "devices", "framework")
    if any(f not in row for f in fields):
        return None
    software_names = (*CORE_SOFTWARE_FIELDS, *backends.meta(framework).software_fields)
    setting_names = (*PROTOCOL_FIELDS, *backends.option_names(framework))
    return record_key({f: row[f] for f in fields},
                      {f: row.get(f) for f in PLATFORM_FIELDS},
                      {f: row[f] for f in software_names if f in row},
                      {f: row[f] for f in setting_names if f in row})


class FrozenDict(dict):
    """A read-only dict: the mapping fields of a frozen :class:`Record` (and of other frozen
    values). It is a ``dict`` (``json.dumps``, ``isinstance(x, dict)``, ``{**x}`` and pandas
    work as before) whose mutating methods raise TypeError; it pickles as a plain dict rebuilt
    through the constructor, because records cross process pipes and Ray (an unpickler fills
    a dict subclass with ``__setitem__``, which would raise here)."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a record's fields are read-only: Record.with_metrics(...) or "
                        "dataclasses.replace(record, ...) builds a changed copy")

    __setitem__ = __delitem__ = __ior__ = _readonly  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self  # immutable: a copy is the same value

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return type(self)({k: copy.deepcopy(v, memo) for k, v in self.items()})


def _frozen(value: Any) -> FrozenDict:
    return value if type(value) is FrozenDict else FrozenDict(value or {})


@dataclass(frozen=True)
class Record:
    """One run, a value: ``status`` is one of ``STATUSES``; metrics are absent (None) unless
    measured. Frozen, its mappings read-only (:class:`FrozenDict`) and ``warnings`` a tuple:
    a record is what was measured when it was made, so no later step patches it in place;
    :meth:`with_metrics` (or ``dataclasses.replace``) returns a changed copy."""

    status: str
    workload: Mapping[str, Any]  # Workload.to_dict(): family, hyperparameters, batch, dtype, ...
    platform: Mapping[str, Any]  # PLATFORM_FIELDS
    software: Mapping[str, Any]  # CORE_SOFTWARE_FIELDS + the framework's software_fields
    settings: Mapping[str, Any]  # MeasureSettings.to_dict(framework): protocol + its options
    metrics: Mapping[str, Any] = field(default_factory=FrozenDict)
    error: str | None = None
    tags: Mapping[str, Any] = field(default_factory=FrozenDict)  # model tags, e.g. kind=real
    warnings: tuple[str, ...] = ()  # WARNINGS codes this record fails
    time_utc: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat())
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        # Copies, so that a caller's dict changed later does not change the record; the only
        # writes to a frozen dataclass are these, in its own construction.
        for name in ("workload", "platform", "software", "settings", "metrics", "tags"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "warnings", tuple(self.warnings or ()))

    def with_metrics(self, updates: Mapping[str, Any] | None = None, /,
                     **more: Any) -> Record:
        """A copy of this record with its metrics updated by ``updates`` and ``more`` (later
        wins); every other field, ``time_utc`` included, is kept."""
        return dataclasses.replace(self, metrics={**self.metrics, **(updates or {}), **more})

    @property
    def workload_key(self) -> str:
        """Identity of the computation: spec + batch + dtype + optimizer + devices."""
        return stable_hash(self.workload)

    @property
    def key(self) -> str:
        """Identity for resume and deduplication: :func:`record_key` of the record's workload,
        platform, software and settings."""
        return record_key(self.workload, self.platform, self.software, self.settings)

    def to_dict(self) -> dict[str, Any]:
        """The flat row: identity, status, workload fields, platform, software, settings, metrics."""
        row: dict[str, Any] = {
            "key": self.key,
            "workload_key": self.workload_key,
            "status": self.status,
            "error": self.error,
            "time_utc": self.time_utc,
            "schema_version": self.schema_version,
            "kind": self.tags.get("kind", "generated"),
            "task": self.tags.get("task"),  # real models: vision, detection, translation, ...
            "warnings": ",".join(self.warnings),
        }
        row.update(self.workload)
        row.update(self.platform)
        row.update(self.software)
        row.update(self.settings)
        row.update({name: self.metrics.get(name) for name in METRICS})
        row.update({k: v for k, v in self.metrics.items() if k not in METRICS})
        return row

    @classmethod
    def failed(cls, workload: Workload, status: str, error: str, **context: Any) -> "Record":
        """A record for a run that did not produce metrics (oom, error, timeout, crashed)."""
        assert status in STATUSES and status not in ("ok", PREDICTED), status
        return cls(status=status, workload=workload.to_dict(), error=error, **context)
