"""The metrics a record carries: every name with its unit and where it comes from
(:data:`METRICS`, the contract docs/metrics.md lists), and the vocabularies that name some of
them: a config's phases (:data:`PHASES`, ``phase_<name>_s``), the memory breakdown's parts
(:data:`MEMORY_PARTS`) and the time ledger's parts (:data:`LEDGER_PARTS`, ``ledger_<part>_s``).
:mod:`paradnn.record` gives every name here too."""

from __future__ import annotations

from typing import Any

from paradnn import hostmem, sizes

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
    "model_flops_per_step": ("FLOP", "analytic count of one step (matmuls and convolutions; convolution taps "
                             "on padding do not count), all devices"),
    "flops_count_rule": ("1", "revision of the family's rule behind model_flops_per_step "
                         "(paradnn.families.Family.count_rule; absent: 1, rows written before it "
                         "was recorded); rows of one family counted by different rules are not "
                         "comparable (flops_count_changed)"),
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
    "xla_options_used": ("", "JAX: the XLA compile options of the measured program, as JSON ({}: XLA's "
                         "defaults): the xla_preset's options, plus its fallback's where the preset's "
                         "own options compiled a known slow path (software field xla_compile_options "
                         "says what each preset and fallback means; paradnn.backends.jax.xla_stack)"),
    "matmul_precision_used": ("", "measured: the internal precision of the run's float32 matmuls and "
                              "convolutions (highest, bf16x3, tf32, bf16; 'matmul X, conv Y' where "
                              "they differ), from a probe matmul and convolution run by the "
                              "framework with the run's settings against exact products "
                              "(paradnn.precision); a reduced compute dtype's name (bfloat16, "
                              "float16) where the run multiplies in it; settings matmul_precision"),
    "matmul_precision_bits": ("bits", "measured: effective mantissa bits of that probe (the fewer of "
                              "matmul and convolution): about 22-24 full float32, 16 bf16x3, 11 "
                              "tf32, 8 bf16; empty for a reduced compute dtype"),
    "cpu_allocator_used": ("", "PyTorch on a CPU: how malloc served the run's tensors (glibc "
                           "thresholds that keep freed memory for reuse, or the system's), "
                           "settings cpu_allocator; empty on a GPU and for other frameworks"),
    "memory_format_used": ("", "PyTorch, image models: the layout their input, convolution weights and "
                           "activations ran in (channels_last: NHWC in memory; contiguous: NCHW), "
                           "settings memory_format; empty for models without image inputs and for other "
                           "frameworks"),
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
    # What held a GPU's clocks down over the timed window (paradnn.gpuclocks); None off NVIDIA GPUs.
    "gpu_power_limited_fraction": ("1", "measured: share of the timed window during which the power "
                                   "limit held the GPU's clocks below the requested ones (NVML "
                                   "violation counter, NVML_PERF_POLICY_POWER; the most of the run's GPUs)"),
    "gpu_thermal_limited_fraction": ("1", "measured: as gpu_power_limited_fraction, for temperature "
                                     "(NVML_PERF_POLICY_THERMAL)"),
    "gpu_sm_clock_mhz": ("MHz", "measured: the GPU's SM clock at the end of the timed window (NVML; the "
                         "lowest of the run's GPUs)"),
    "gpu_max_sm_clock_mhz": ("MHz", "the GPU's maximum SM clock (NVML nvmlDeviceGetMaxClockInfo)"),
    "power_limit_w": ("W", "the enforced board power limit (NVML), summed over the run's GPUs as power_w is"),
    "gpu_clocks_note": ("", "which NVML clock readings were taken, or why none was"),
    # Host and device utilization over the timed window (paradnn.hostutil).
    "host_cpu_utilization": ("1", "measured: /proc/stat, busy share of the window's ticks, mean over "
                             "the host's cores (all processes)"),
    "host_cpu_utilization_per_core": ("1", "measured: as host_cpu_utilization per core, comma-separated"),
    "process_cpu_s": ("s", "measured: CPU time (user + system, all threads) of the measuring process in "
                      "the timed window"),
    "process_system_cpu_s": ("s", "measured: of process_cpu_s, the CPU time the kernel spent for the "
                             "measuring process (page faults, system calls) in the timed window"),
    "page_faults_per_step": ("faults", "measured: minor page faults of the measuring process in the "
                             "timed window (getrusage) / training steps in it: memory the step gets "
                             "fresh from the kernel each time (a few hundred are usual; tens of "
                             "thousands cost tens of ms of kernel time per step, host_huge_pages)"),
    "host_huge_pages": ("", "how the measuring process's malloc'd memory was backed (paradnn sets "
                        "glibc.malloc.hugetlb=1 for the processes it starts): "
                        + "; ".join(f"{state}: {meaning}" for state, meaning in hostmem.STATES.items())),
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
#: attempt replaces exists only for a retry or a remeasurement; how malloc served the tensors
#: only for PyTorch on a CPU; the layout of an image model's tensors only for PyTorch; the XLA
#: options that compiled the program only for JAX; the time ledger's metrics and its phase only
#: for a run with the ``ledger`` setting (added below, with the ledger's metrics).
ONLY_SOME_METRICS: frozenset[str] = frozenset({"retry_of", "cpu_allocator_used", "memory_format_used",
                                               "xla_options_used"})

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
#: they sum to the compiled total where a backend reports the breakdown.
MEMORY_PARTS: tuple[str, ...] = tuple(sizes.MEMORY_PARTS)  # named, with their labels, in paradnn.sizes

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
