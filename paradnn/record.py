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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from paradnn import families, frameworks, sizes
from paradnn.measure import PROTOCOL_FIELDS, UNKEYED_SETTINGS
from paradnn.units import si
from paradnn.workload import Workload, stable_hash

# 2: device platform field `backend` -> `device_platform`, plus `framework`.
# 3: the key covers a record's own framework only: its software fields (no other framework's
#    versions, no None placeholders for them) and its options (no other framework's settings).
# 4: the option matmul_precision (every built-in framework); rows before it ran at each
#    framework's default precision and read as matmul_precision "default" (SETTINGS_ADDED).
# 5: the protocol settings stop_rule and ci_target (the timed phase stops on the precision of
#    the median, not the spread of calls); rows before it stopped by the spread and read as
#    stop_rule "cv" (their ci_target was not used: the value the setting had when it came).
SCHEMA_VERSION = 5
#: Settings added after the first schema: schema version -> {setting: the value rows of earlier
#: versions ran with}. Migration (``paradnn.store.migrate_row``) fills in a protocol setting on
#: every row and a framework option where the row's framework declares it, so that an old row
#: keys as the same config run now with those values.
SETTINGS_ADDED: dict[int, dict[str, Any]] = {4: {"matmul_precision": "default"},
                                             5: {"stop_rule": "cv", "ci_target": 0.02}}

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
    "step_time_ci_halfwidth": ("1", "measured: relative half-width of the median step time's 95% "
                               "confidence interval, (step_time_ci_high_s - step_time_ci_low_s) / 2 / "
                               "step_time_s: the precision stop_rule ci holds to ci_target"),
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
    "peak_source": ("", "spec (vendor table), measured (the best quiet paradnn probe of this host "
                    "and software), nominal (a CPU without a quiet probe on record: cores x clock x "
                    "vector lanes x FMA units, peak_method gives the figures) or none (no usable "
                    "peak: no utilization)"),
    "peak_bytes_source": ("", "where peak_bytes_per_sec comes from: spec, measured (a quiet probe) or "
                          "measured under load (the best bandwidth of the probes on record, all "
                          "taken while other processes were busy: a lower bound; points above it "
                          "are noted roof_under_load, not judged)"),
    "peak_id": ("", "the peak measurement divided by: the probe's id in the probe cache, or "
                "spec:<table entry>; two records with one peak_id share their denominator"),
    "peak_measured_utc": ("", "when that probe was measured (UTC; empty for the vendor table)"),
    "peak_spread": ("1", "coefficient of variation of that probe's winning GEMM (0 for the vendor "
                    "table); above the probe's default threshold (10%, accepted under a raised "
                    "PARADNN_PROBE_MAX_CV) raises peak_spread_above_target"),
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
    "stable": ("bool", "measured: the stopping rule's precision target was met (stop_rule ci: "
               "step_time_ci_halfwidth <= ci_target; cv: step_time_cv <= cv_target)"),
    "host_other_busy_cores": ("cores", "measured: CPU cores other processes kept busy on average during "
                              "the timed calls (/proc/stat busy ticks of the host minus this "
                              "process's CPU time, over the window's wall time)"),
    "device_other_processes": ("1", "measured: other processes with compute contexts on this run's GPUs "
                               "during the timed calls (NVML); empty where NVML does not tell"),
    "contended": ("bool", "measured: the host was busy during the timed calls: host_other_busy_cores "
                  "above the contention threshold (0.5 cores, PARADNN_PROBE_MAX_LOAD) on a CPU, or "
                  "device_other_processes above 0 on a GPU; a fact of the run, not a failure"),
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
    "retry_of": ("", "time_utc of the earlier row of the same config (key) that this attempt "
                 "replaces: it missed its precision target and was measured again (a sweep's "
                 "automatic retry, --remeasure-unstable); paradnn.load gives the newer row only "
                 "unless attempts=True"),
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

#: Metrics that only some measured records carry (None on the others, by design): the row an
#: attempt replaces exists only for a retry or a remeasurement; the time ledger's metrics and
#: its phase only for a run with the ``ledger`` setting (added below, with the ledger's metrics).
ONLY_SOME_METRICS: frozenset[str] = frozenset({"retry_of"})

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
    "ledger": "the time ledger's profile: a few more steps of the measured program under the "
              "framework's profiler and the join of its events to the operations (setting "
              "ledger; None where it was off)",
    "probe": "reading the peak: the host's probe of its peak FLOP/s and bandwidth when none is "
             "cached for this host and software (paradnn probe, at most once an hour), and the "
             "derived metrics",
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
#: they sum to the compiled total where a backend reports the breakdown (named in paradnn.sizes).
MEMORY_PARTS: tuple[str, ...] = tuple(sizes.MEMORY_PARTS)

#: The time ledger's parts (paradnn.ledger, docs/ledger.md), in the order of a stacked bar
#: (bottom to top): part -> (label, what it is and where it comes from). Each is the metric
#: ``ledger_<part>_s`` (s per step and per device); together they add up to ``step_time_s``.
LEDGER_PARTS: dict[str, tuple[str, str]] = {
    "useful": ("useful work at the peak", "analytic FLOPs of the step (model_flops_per_step) / "
               "(devices x peak_flops)"),
    "extra": ("extra work at the peak", "FLOPs the profiled operations executed beyond the useful "
              "ones (optimizer, element-wise, padding, rematerialisation), counted from the "
              "framework's operations (XLA: the optimized HLO), / peak_flops; negative where the "
              "analytic count exceeds the executed one"),
    "memory": ("memory-bound time", "per operation, how far its bandwidth bound (bytes / "
               "peak_bytes_per_sec) exceeds its compute bound (FLOPs / peak_flops), at most its "
               "measured time beyond the compute bound; summed"),
    "below_roof": ("kernels below their roof", "per operation, measured time beyond its roofline "
                   "bound; summed (negative where operations beat their compute bound: "
                   "ledger_faster_than_roof_s)"),
    "communication": ("communication", "measured time of collective operations (all-reduce, "
                      "all-gather, ...)"),
    "input": ("input pipeline", "time feeding data: 0, the runs train on a synthetic batch "
              "already on the device"),
    "outside": ("outside operations", "step time minus the operations' summed time where positive: "
                "dispatch, host work, synchronisation gaps"),
    "overlap": ("overlap", "step time minus the operations' summed time where negative: operations "
                "that ran concurrently (or were slowed by the profiler), reported, not hidden"),
}


def ledger_metric(part: str) -> str:
    """The metric name of ledger part ``part`` (a :data:`LEDGER_PARTS` key): ``ledger_<part>_s``."""
    return f"ledger_{part}_s"


METRICS.update({ledger_metric(p): ("s", f"time ledger, per step and device: {label}: {what}")
                for p, (label, what) in LEDGER_PARTS.items()})
METRICS.update({
    "ledger_ops_s": ("s", "time ledger: the profiled operations' summed time per step and device "
                     "(profiler events joined to the program's operations)"),
    "ledger_faster_than_roof_s": ("s", "time ledger: summed time by which operations ran below their "
                                  "compute bound (<= 0; below -5% of the step time raises "
                                  "ledger_faster_than_roof)"),
    "ledger_largest_part": ("", "time ledger: the largest part (a LEDGER_PARTS name): what limits "
                            "this config"),
    "ledger_largest_loss": ("", "time ledger: the largest part besides useful work: where most of "
                            "the missing time goes"),
    "ledger_split": ("bool", "time ledger: the operations' time was split by the roof (needs a "
                     "peak FLOP/s)"),
    "ledger_time_scale": ("1", "time ledger: factor the operations' profiled times were scaled by: the "
                          "timed step over the step under the profiler, where the profiler slowed it (else 1)"),
    "ledger_opaque_s": ("s", "time ledger: time of operations compiled as one call (XLA:CPU runs a "
                        "small region as one function, without events of its own); their FLOPs and bytes "
                        "are the step's executed ones beyond the listed operations"),
    "ledger_steps": ("1", "time ledger: training steps profiled after the timed calls"),
    "ledger_traced_step_s": ("s", "time ledger: wall time of one step under the profiler (its "
                             "cost shows as the excess over step_time_s)"),
    "ledger_flops_matched": ("1", "time ledger: share of the program's counted FLOPs whose "
                             "operations appeared in the profile"),
    "ledger_source": ("", "time ledger: the profiler, the counts, the peak (its peak_source) and the "
                      "step time it comes from; None where no ledger was taken"),
    "ledger_note": ("", "time ledger: how its times were taken, why the operations' sum is outside "
                    "the stated bound of the step time, or why no ledger was taken"),
})
ONLY_SOME_METRICS = ONLY_SOME_METRICS | {m for m in METRICS if m.startswith("ledger_")}


class Flag(NamedTuple):
    """One code of a record's ``warnings``: its kind (a :data:`WARNING_KINDS` key) and what it
    means, with the likely cause."""

    kind: str
    text: str


#: The kinds of warning, by what they mean for a number: kind -> what a reader should do.
WARNING_KINDS: dict[str, str] = {
    "physics": "an impossible value (above a bound no run can pass, or counts that disagree): "
               "the run's numbers are not to be published until the cause is found",
    "provenance": "where a number's denominator came from, or what the host did while it was "
                  "measured: the number stands, and is read with this note",
    "precision": "the timing missed its precision target: the number is less precise than asked",
}

#: The checks a measured record can fail: code -> :class:`Flag` (kind, meaning and likely
#: cause). A record lists the codes it fails in ``warnings``; analyses honour them by kind
#: (only ``physics`` marks a figure's cell or point as not to be published).
WARNINGS: dict[str, Flag] = {
    "utilization_above_1": Flag("physics", (
        "achieved FLOP/s above the device peak (a vendor peak or a quiet measured probe), which "
        "is impossible: the peak is too low (a measured CPU peak that missed the machine's "
        "fastest library) or the FLOP count includes work that was not done")),
    "above_roof": Flag("physics", (
        "the point lies above its roofline min(peak FLOP/s, intensity x peak bandwidth), both "
        "from a vendor table or a quiet probe: the bandwidth peak is too low, or XLA's "
        "bytes-accessed count misses reuse in caches")),
    "flops_mismatch": Flag("physics", (
        "executed FLOPs below 0.8x the analytic (useful) matmul count, or above 1.25x the useful "
        "count plus the analytic estimate of the optimizer's and element-wise work: XLA "
        "executes extra work (e.g. XLA:CPU rewrites depthwise weight gradients as dense "
        "convolutions) or the analytic count misses operations; model_flops_utilization, from "
        "useful FLOPs, is the one to quote")),
    "above_ceiling": Flag("physics", (
        "ceiling_utilization or model_ceiling_utilization above 1: the run beat the best GEMM "
        "this host measured (the measured ceiling), which is impossible: the probe missed a "
        "faster library or kernel, or the FLOP count includes work that was not done (where "
        "the ceiling is the peak, as on a CPU, utilization_above_1 comes with it)")),
    "peak_below_ceiling": Flag("physics", (
        "the vendor peak the utilization divides by is below the GEMM rate measured on this "
        "device (ceiling_flops > peak_flops), which is impossible: the peak table entry is "
        "wrong for this device (another form factor or clocks) or the device kind matched the "
        "wrong entry; paradnn probe names the entry")),
    "nominal_peak": Flag("provenance", (
        "no quiet probe of this host's peak is on record, so utilization divides by the CPU's "
        "nominal peak (cores x clock x vector lanes x FMA units, peak_method says which): a "
        "stable, named denominator, not a measurement; paradnn probe --refresh on a quiet host "
        "gives runs measured after it a measured peak")),
    "above_nominal_peak": Flag("provenance", (
        "achieved FLOP/s above the nominal peak it divides by: the nominal is computed from the "
        "clock the host reports, which boost clocks exceed (a virtual machine may report its "
        "base clock only), so this is no impossibility; a quiet probe (paradnn probe --refresh) "
        "gives a measured bound")),
    "roof_under_load": Flag("provenance", (
        "the roofline's bandwidth comes from a probe taken while other processes were busy (a "
        "lower bound of the host's bandwidth), and the point lies above intensity x that "
        "bandwidth: not judged as a physics error; a quiet probe gives a bound that is")),
    "contended": Flag("provenance", (
        "other processes kept CPU cores (or the device) busy during the timed calls "
        "(host_other_busy_cores, device_other_processes): the step time is this platform's "
        "under that load, slower than on a quiet host; measure again on a quiet host to "
        "publish the platform's own figure")),
    "peak_spread_above_target": Flag("provenance", (
        "the peak this utilization divides by spread more than the probe's default contention "
        "threshold (10%) over its own repetitions: a probe accepted under a raised "
        "PARADNN_PROBE_MAX_CV; the utilization is no more precise than that spread; re-probe on "
        "a quiet host (paradnn probe --refresh)")),
    "no_quiet_peak": Flag("provenance", (
        "no usable peak for this run: only contended probes of this host are on record and no "
        "nominal peak could be computed (or, on an accelerator, no vendor entry and no quiet "
        "probe), so no utilization was computed; run paradnn probe --refresh on a quiet host")),
    "ledger_faster_than_roof": Flag("physics", (
        "in the time ledger, operations ran faster than their compute bound (FLOPs / peak) by "
        "more than 5% of the step time: the peak is too low for them (a nominal or measured "
        "peak below the host's fastest library) or the operations' FLOP counts include work "
        "that was not done")),
    "ledger_counts_disagree": Flag("physics", (
        "in the time ledger, the analytic (useful) FLOPs exceed those the profiled operations "
        "executed by more than 5% of the step time (extra work negative) although every "
        "counted operation appeared in the profile: one of the two counts is wrong")),
    "unstable": Flag("precision", (
        "the timed calls missed the precision target of the stopping rule within the time "
        "budget (stable false: step_time_ci_halfwidth above ci_target, or step_time_cv above "
        "cv_target under stop_rule cv): the step time's interval is wider than asked; measure "
        "again with a longer time_budget_s (paradnn status writes the sweep file)")),
}


def warning_kind(code: str) -> str | None:
    """The kind (:data:`WARNING_KINDS`) of warning ``code``; None for a code this version does
    not know (a row written by a newer paradnn)."""
    flag = WARNINGS.get(code)
    return flag.kind if flag is not None else None


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


#: Sources of a peak that bound what a run can reach (a vendor datasheet, a quiet probe): only
#: these make a point above them a physics error; a nominal or loaded figure is a note.
TRUSTED_SOURCES = ("spec", "measured")


def record_warnings(metrics: Mapping[str, Any], devices: int = 1,
                    peak_spread_limit: float | None = None) -> list[str]:
    """The :data:`WARNINGS` codes that a measured record's metrics raise (empty if none), of
    every kind; peaks in ``metrics`` are per device, achieved FLOP/s over all ``devices``;
    ``peak_spread_limit`` (1: the probe's default contention threshold on its GEMM's spread,
    ``paradnn.hardware.PROBE_MAX_CV``) is what the peak's own spread is held to: a probe above
    it was accepted only under a raised ``PARADNN_PROBE_MAX_CV``.
    A bound that is not trusted (:data:`TRUSTED_SOURCES`: a nominal peak, a bandwidth from a
    loaded probe) raises a provenance note where a trusted one would raise a physics error."""
    codes = []
    source = metrics.get("peak_source")
    trusted_peak = source in TRUSTED_SOURCES
    if source == "none":
        codes.append("no_quiet_peak")
    if source == "nominal":
        codes.append("nominal_peak")
    spread = metrics.get("peak_spread")
    if peak_spread_limit is not None and spread is not None and spread > peak_spread_limit:
        codes.append("peak_spread_above_target")
    utilizations = (metrics.get("flops_utilization"), metrics.get("model_flops_utilization"))
    if any(u is not None and u > 1.0 for u in utilizations):
        codes.append("utilization_above_1" if trusted_peak else "above_nominal_peak")
    against_ceiling = (metrics.get("ceiling_utilization"), metrics.get("model_ceiling_utilization"))
    if any(u is not None and u > 1.0 for u in against_ceiling):
        codes.append("above_ceiling")
    ceiling = metrics.get("ceiling_flops")
    if (source == "spec" and ceiling is not None
            and metrics.get("peak_flops") is not None and ceiling > metrics["peak_flops"]):
        codes.append("peak_below_ceiling")
    intensity, bandwidth = metrics.get("arithmetic_intensity"), metrics.get("peak_bytes_per_sec")
    peak, achieved = metrics.get("peak_flops"), metrics.get("flops_per_sec")
    if None not in (intensity, bandwidth, achieved):
        trusted_bandwidth = metrics.get("peak_bytes_source", source) in TRUSTED_SOURCES
        roof = [intensity * bandwidth] if trusted_bandwidth else []
        if trusted_peak and peak is not None:
            roof.append(peak)
        if roof and achieved > min(roof) * devices:
            codes.append("above_roof")
        elif not trusted_bandwidth and achieved > intensity * bandwidth * devices:
            codes.append("roof_under_load")
    if flops_mismatch(metrics):
        codes.append("flops_mismatch")
    codes += ledger_warnings(metrics, trusted_peak)
    if metrics.get("contended"):
        codes.append("contended")
    if metrics.get("stable") is False:
        codes.append("unstable")
    return codes


#: Fraction of the step time by which a time-ledger figure may break a bound before it is
#: flagged: per-operation times come from a profile of other steps than the timed ones.
LEDGER_SLACK = 0.05


def ledger_warnings(metrics: Mapping[str, Any], trusted_peak: bool) -> list[str]:
    """The time ledger's :data:`WARNINGS` codes: operations beating a trusted compute bound
    (a nominal peak is no bound: boost clocks pass it), and an analytic count above the
    executed one where every counted operation was profiled."""
    step = metrics.get("step_time_s")
    if not metrics.get("ledger_split") or not step:
        return []
    codes = []
    faster = metrics.get("ledger_faster_than_roof_s")
    if trusted_peak and faster is not None and faster < -LEDGER_SLACK * step:
        codes.append("ledger_faster_than_roof")
    extra, matched = metrics.get(ledger_metric("extra")), metrics.get("ledger_flops_matched")
    if (extra is not None and extra < -LEDGER_SLACK * step
            and matched is not None and matched >= 0.99):
        codes.append("ledger_counts_disagree")
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


def is_retry(row: Mapping[str, Any]) -> bool:
    """Whether a stored row (a record's ``to_dict()``, a DataFrame row) is a new attempt at a
    config whose earlier row missed its precision target: it names that row (``retry_of``: its
    ``time_utc``), or, for rows written before ``retry_of`` existed, it is a sweep's automatic
    retry: it ran with a longer time budget (``time_budget_used_s``) than its settings name
    (``time_budget_s``, the one the sweep asked for)."""
    if isinstance(row.get("retry_of"), str) and row.get("retry_of"):
        return True
    try:
        return float(row.get("time_budget_used_s")) > float(row.get("time_budget_s")) * (1 + 1e-9)
    except (TypeError, ValueError):
        return False  # not recorded (older rows, predicted rows): not a retry


def unstable_ok(row: Mapping[str, Any]) -> bool:
    """An ok row whose timing missed its precision target (``stable`` false; unknown is not)."""
    stable = row.get("stable")
    return row.get("status") == "ok" and isinstance(stable, (bool, int, float)) and stable == 0


def superseded(rows: Sequence[Mapping[str, Any]]) -> set[int]:
    """The positions in ``rows`` (stored rows) of the attempts a later attempt replaced: a
    config (a record ``key``) measured again because its row missed its precision target keeps
    one row, the newer. A retry names the row it replaces (``retry_of``: that row's
    ``time_utc``, or ``key@time_utc`` where a remeasurement under other settings replaced a row
    of another key); a retry of an older version (:func:`is_retry` without ``retry_of``)
    replaces the newest earlier unstable ok row of its key that nothing replaced yet. Rows a
    config was asked to have several of (``repeat``) are not attempts of each other: each
    stays."""
    by_key: dict[Any, list[int]] = {}
    at: dict[tuple[str, str], int] = {}
    for i, row in enumerate(rows):
        by_key.setdefault(row.get("key"), []).append(i)
        at[(str(row.get("key")), str(row.get("time_utc")))] = i
    out: set[int] = set()
    for row in rows:
        named = row.get("retry_of")
        if isinstance(named, str) and "@" in named:
            key, _, when = named.rpartition("@")
            if (key, when) in at:
                out.add(at[(key, when)])
    for positions in by_key.values():
        if len(positions) < 2:
            continue
        order = sorted(positions, key=lambda i: str(rows[i].get("time_utc")))
        when = {str(rows[i].get("time_utc")): i for i in order}
        for n, i in enumerate(order):
            row = rows[i]
            if not is_retry(row):
                continue
            named = row.get("retry_of")
            if isinstance(named, str) and "@" in named:
                continue  # named above
            if isinstance(named, str) and named in when:
                out.add(when[named])
                continue
            earlier = [j for j in order[:n] if j not in out and not is_retry(rows[j]) and unstable_ok(rows[j])]
            if earlier:
                out.add(earlier[-1])
    return out


def warning_codes(value: Any, kind: str | None = None) -> list[str]:
    """The codes of a row's ``warnings`` field (comma-separated; None, NaN or "" for none),
    only those of ``kind`` (a :data:`WARNING_KINDS` key) when given."""
    if not isinstance(value, str) or not value:
        return []
    return [code for code in value.split(",") if code and (kind is None or warning_kind(code) == kind)]

PLATFORM_FIELDS = ("device_platform", "device_kind", "device_count", "host", "cpu_model")
#: Software fields of every record whatever its framework (``paradnn.hardware.software_info``
#: and ``Backend.software_info``'s ``framework_version``); ``paradnn_revision`` is recorded too
#: but left out of the key.
CORE_SOFTWARE_FIELDS = ("paradnn_version", "framework_version", "python_version")


#: Software field of the records made where a plugin replaced a built-in framework or family
#: (``frameworks.register(..., replaces=True)``, ``families.register(..., replaces=True)``): which
#: ones, and the module that registered each (``framework jax: mylab.fastjax; family fc:
#: mylab.fc``). Part of the key (another implementation is another config), and absent where
#: nothing was replaced, so that rows of the built-ins keep the keys they always had and old
#: stores resume. A family replaced in a process marks the records of every family there: a
#: record's software is its framework's (:func:`paradnn.runner.context`), not its family's.
REPLACED_BY = "replaced_by"


def replaced_by(framework: str) -> dict[str, str]:
    """``{REPLACED_BY: text}`` for the records of ``framework`` made in this process, or ``{}``
    where no plugin replaced ``framework`` or any built-in family."""
    parts = []
    module = frameworks.replaced_by(framework)
    if module is not None:
        parts.append(f"framework {framework}: {module}")
    parts += [f"family {name}: {module}" for name, module in families.replaced().items()]
    return {REPLACED_BY: "; ".join(parts)} if parts else {}


def _software_columns() -> tuple[str, ...]:
    versions = [f for name in frameworks.names() for f in frameworks.meta(name).version_fields]
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
    sweep resumes across commits and edits of paradnn; every row still stores it. So are the
    settings that do not change the timed calls (``measure.UNKEYED_SETTINGS``: ``ledger``). Options of
    frameworks other than the workload's are left out of the settings (a settings dict of
    every framework's options, as a sweep predicts keys with, gives the record's key).
    """
    platform = {k: v for k, v in platform.items() if k != "host"}
    software = {k: v for k, v in software.items() if k != "paradnn_revision"}
    settings = {k: v for k, v in settings.items() if k not in UNKEYED_SETTINGS}
    framework = workload.get("framework")
    if framework in frameworks.names():
        others = set(frameworks.option_names()) - set(frameworks.option_names(framework))
        settings = {k: v for k, v in settings.items() if k not in others}
    return stable_hash([workload, platform, software, settings])


def row_key(row: Mapping[str, Any], settings: bool = True) -> str | None:
    """The key the current schema gives a stored row (a flat ``Record.to_dict()``), rebuilt
    from its columns: the workload's fields, the platform, the core software fields and those
    of its framework (``FrameworkInfo.software_fields``), the protocol settings and its
    framework's options (without them when ``settings`` is False: the identity of the
    computation on its platform and software, whatever the protocol, :func:`record_key` with
    ``{}`` for the settings). None for a row whose family or framework is not registered here,
    or that is not a model's (operator, collective and infeed rows have no framework)."""
    framework, family = row.get("framework"), row.get("family")
    if framework not in frameworks.names() or family not in families.names():
        return None
    fields = ("family", *families.get(family).fields(), "batch", "dtype", "optimizer", "devices", "framework")
    if any(f not in row for f in fields):
        return None
    software_names = (*CORE_SOFTWARE_FIELDS, *frameworks.meta(framework).software_fields)
    setting_names = (*PROTOCOL_FIELDS, *frameworks.option_names(framework))
    software = {f: row[f] for f in software_names if f in row}
    # Keyed only where set: a table of rows (a store's frame) has the column as NaN or None on
    # the rows of built-ins, whose records never had the field.
    if isinstance(row.get(REPLACED_BY), str) and row[REPLACED_BY]:
        software[REPLACED_BY] = row[REPLACED_BY]
    return record_key({f: row[f] for f in fields},
                      {f: row.get(f) for f in PLATFORM_FIELDS},
                      software,
                      {f: row[f] for f in setting_names if f in row} if settings else {})


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
