"""``paradnn.run``: one workload in, one :class:`~paradnn.record.Record` out.

Order of work, cheapest check first: validate (raises SpecError), count parameters from shapes,
refuse a model whose weights and optimizer state alone exceed the memory limit (``oom`` before
compiling), compile the K-step program ahead of time, refuse it if its memory analysis exceeds
the limit (``oom`` before running), allocate and time it, then take costs and peaks. Any failure
after validation becomes a record (``oom`` or ``error``), never an exception: a sweep goes on.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from paradnn import backends, families, hardware, meters, progress, sizes
from paradnn.envcheck import os_cause
from paradnn.errors import InfrastructureError, ParadnnError, SpecError
from paradnn.measure import MeasureSettings, time_calls
from paradnn.record import PHASES, Record, phase_metric, record_warnings, replaced_by
from paradnn.workload import ModelSpec, Workload, short_name


@functools.lru_cache(maxsize=None)
def context(framework: str = backends.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
    """(platform, software) of ``framework`` in this process: the device platform, kind and
    count it sees (``Backend.device_info``), and the versions that shape its numbers: paradnn's
    and Python's (:func:`paradnn.hardware.software_info`), ``framework_version`` and the
    framework's own fields (``Backend.software_info``), and ``replaced_by`` where a plugin
    replaced a built-in framework or family here (:func:`paradnn.record.replaced_by`)."""
    backend = backends.get(framework)
    platform = hardware.local_device_info(backend.device_info())
    software = {**hardware.software_info(), **backend.software_info(), **replaced_by(framework)}
    return platform, software


def model_flops_per_step(workload: Workload) -> float:
    """Analytic FLOPs of one training step over the global batch (FLOP): the family's closed form
    or published count (:func:`paradnn.sizes.model_flops_per_step`), else counted from the
    reference (JAX) model's jaxpr (:func:`paradnn.backends.jax.costs.model_flops_per_step`)."""
    known = sizes.model_flops_per_step(workload)
    if known is not None:
        return known
    # Imported here: only families with neither (some real models) need the JAX counter, so a
    # run of another framework imports no JAX for FC, CNN, RNN or the zoo's published counts.
    from paradnn.backends.jax import costs

    return costs.model_flops_per_step(workload)


def platform_problem(workload: Workload, platform: Mapping[str, Any]) -> SpecError | None:
    """Why ``workload`` cannot run on ``platform`` (its framework's, as :func:`context` or an
    executor reports it), as the SpecError :func:`run_workload` raises before measuring; None
    when it can. One rule today: no more data-parallel devices than the platform has. A sweep
    checks every config with it before anything is stored (``paradnn.sweeper.check_platform``)."""
    count = platform.get("device_count")
    if isinstance(count, int) and workload.devices > count:
        return SpecError("devices", workload.devices, f"at most {count} on this host "
                         f"({workload.framework} sees {count} {platform.get('device_platform')} "
                         f"device{'s' if count != 1 else ''})")
    return None


def run(
    spec: ModelSpec,
    batch: int | None = None,
    dtype: str = "float32",
    optimizer: str | None = None,
    devices: int = 1,
    settings: MeasureSettings | None = None,
    memory_limit_bytes: int | None = None,
    framework: str = backends.DEFAULT,
    **setting_overrides: Any,
) -> Record:
    """Build, compile and measure one training workload; return its record.

    ``batch`` is the global batch in examples (default: the family's, e.g. 256 FC, 64 CNN/RNN,
    the model's own for real models); ``dtype`` the compute dtype; ``optimizer`` None for the
    model's default; ``devices`` data-parallel devices; ``framework`` a registered framework
    (jax, tensorflow, torch, ...: :func:`paradnn.backends.names`), or ``"best"``: the
    framework a stored calibration found fastest for the family here
    (:mod:`paradnn.beststack`). ``settings`` (or keyword
    overrides such as ``steps_per_call=5`` or a framework option such as ``xla_preset="stock"``)
    control the timing protocol and the framework. ``memory_limit_bytes`` (default: the
    device's memory where known) turns a model that would not fit into an ``oom`` record.

    >>> rec = run(FC(layers=4, nodes=256, input=2000, output=1000), batch=128)  # doctest: +SKIP
    >>> rec.status, rec.metrics["examples_per_sec"]  # doctest: +SKIP
    """
    if batch is None:
        batch = families.of(spec).default_batch(spec)
    settings = (settings or MeasureSettings()).replace(**setting_overrides)
    if framework == "best":  # the platform's best stack, chosen by a stored calibration
        from paradnn import beststack

        return beststack.run_best(Workload(spec, batch, dtype, optimizer, devices), settings, memory_limit_bytes)
    return run_workload(Workload(spec, batch, dtype, optimizer, devices, framework), settings,
                        memory_limit_bytes)


def run_workload(
    workload: Workload,
    settings: MeasureSettings | None = None,
    memory_limit_bytes: int | None = None,
) -> Record:
    """Measure a validated :class:`Workload` with its framework's backend. Never raises for
    runtime failures: they become ``oom`` or ``error`` records."""
    t_start = time.perf_counter()
    settings = settings or MeasureSettings()
    backend = backends.get(workload.framework)
    platform, software = context(workload.framework)
    context_ = {"platform": platform, "software": software,
                "settings": settings.to_dict(workload.framework)}
    problem = platform_problem(workload, platform)
    if problem is not None:
        raise problem
    limit = memory_limit_bytes if memory_limit_bytes is not None else backend.device_memory_bytes()
    # The limit every out-of-memory prediction of this run is checked against, and its source.
    limit_metrics = {"memory_limit_bytes": limit, "memory_limit_source": (
        None if limit is None else "given" if memory_limit_bytes is not None else "device")}
    # Cheapest check first (paradnn.sizes): the analytic weights + optimizer state against the
    # limit, before anything is traced; --layers 1000000000 must not trace for hours.
    too_big = sizes.predicted_oom(workload, limit)
    if too_big is not None:
        return Record.failed(workload, "oom", too_big["error"], metrics={**too_big["metrics"], **limit_metrics},
                             **context_)
    # Measured alone unless an executor that compiles ahead says otherwise (it replaces these).
    metrics: dict[str, Any] = {"oom_predicted": False, "overlap_workers": 0, "prepared_ahead": False,
                               "preparers_stopped": False, "prepare_wait_s": 0.0, **limit_metrics}
    tags: dict[str, Any] = {}
    phases = Phases(metrics)
    try:
        progress.phase("compiling")
        t0 = time.perf_counter()
        program = backend.compile(workload, settings)
        compile_wall = time.perf_counter() - t0
        tags = dict(program.tags)
        metrics.update(program.metrics)
        # A backend that does not split its compile (TensorFlow, torch) has it all as compile.
        metrics.setdefault("phase_trace_s", None)
        if metrics.get("phase_compile_s") is None:
            metrics["phase_compile_s"] = compile_wall - (metrics["phase_trace_s"] or 0.0)
        if limit is not None and program.state_bytes > limit:
            phases.finish(t_start)
            return Record.failed(
                workload, "oom",
                f"predicted before running: weights+optimizer state {program.state_bytes} B > limit {limit} B",
                metrics={**metrics, "oom_predicted": True}, tags=tags, **context_)
        peak = metrics.get("memory_peak_bytes")
        if limit is not None and peak is not None and peak > limit:
            phases.finish(t_start)
            return Record.failed(
                workload, "oom",
                f"predicted from compiled memory analysis: peak {peak} B > limit {limit} B",
                metrics={**metrics, "oom_predicted": True}, tags=tags, **context_)

        progress.phase("initializing")
        state, batch = phases.run("init", lambda: backend.init(program))
        # The warm-up and timed calls are their own phase: while it is in force, a sweep's workers
        # compiling ahead on the same cores are stopped (paradnn.executors.process).
        progress.phase(progress.TIMING)
        timing = time_calls(program.call, state, batch, settings, sync=backend.sync,
                            loss_value=backend.loss_value,
                            window=lambda: meters.window(platform["device_platform"], program.devices),
                            keep_state=settings.ledger)
        kept, timing = timing.state, dataclasses.replace(timing, state=None)
        ops = None
        if settings.ledger:
            # Imported here: the ledger reads traces with pandas, which a plain run never needs
            # before it has measured (the first line of `paradnn run` comes before heavy imports).
            from paradnn import ledger

            # The ledger profiles the same executable from where the timed calls left it: the
            # timing is done and undisturbed, and nothing is compiled again.
            progress.phase("profiling the time ledger")
            steps = ledger.trace_steps(timing.median_s, timing.steps_per_call)
            ops, no_ledger = phases.run("ledger", functools.partial(ledger.safe_profile, program, kept, batch, steps))
            if ops is None:
                metrics.update(ledger.unavailable(no_ledger))
        progress.phase("counting costs and memory")
        del state, batch, kept  # free device memory before compiling the cost variants
        metrics.update(timing.stats())
        metrics["phase_warmup_s"] = timing.warmup_s
        metrics["phase_timed_s"] = timing.timing_s - timing.warmup_s
        metrics.update(timing.meter.metrics(steps=timing.timed_steps,
                                            examples=timing.timed_steps * workload.batch))
        metrics["final_loss"] = timing.final_loss
        if not np.isfinite(timing.final_loss):
            phases.finish(t_start)
            return Record.failed(workload, "error", f"non-finite loss {timing.final_loss}",
                                 metrics=metrics, tags=tags, **context_)

        metrics.update(phases.run("costs", lambda: backend.costs(program)))
        metrics.update(phases.run("memory", lambda: backend.memory_breakdown(program)))
        metrics["model_flops_per_step"] = phases.run("costs", lambda: model_flops_per_step(workload))
        metrics["elementwise_flops_per_step"] = sizes.elementwise_flops_per_step(workload)
        progress.phase("reading the peak")
        # The probe of the host's peak runs here when none is cached (once per host and
        # software): its own phase, so a slow first run says where its time went.
        metrics.update(phases.run("probe", lambda: derived_metrics(metrics, workload, platform)))
        if ops is not None:
            from paradnn import ledger

            metrics.update(ledger.safe_metrics(ops, metrics, workload.devices))
        warnings = record_warnings(metrics, workload.devices, hardware.PROBE_MAX_CV)
    except ParadnnError:
        raise  # bad input (e.g. an image too small for a zoo model) is the user's to fix, not data
    except OSError as exc:
        # The file system, a cache, a pipe: the environment failed, not the workload. Never a
        # row; the executor stops the sweep with one line (or retries), and resume runs it.
        where = f" ({exc.filename})" if exc.filename else ""
        raise InfrastructureError(f"the environment failed while measuring {short_name(workload)}: "
                                  f"{os_cause(exc)}{where}; an environment fault, not the "
                                  "workload's result") from exc
    except Exception as exc:  # noqa: BLE001 - every failure becomes data
        status = "oom" if backend.is_oom(exc) else "error"
        message = f"{type(exc).__name__}: {exc}"
        phases.finish(t_start)
        return Record.failed(workload, status, message[:4000], metrics=metrics, tags=tags, **context_)
    phases.finish(t_start)
    return Record(status="ok", workload=workload.to_dict(), metrics=metrics, tags=tags,
                  warnings=warnings, **context_)


def prepare_workload(
    workload: Workload,
    settings: MeasureSettings | None = None,
    memory_limit_bytes: int | None = None,
) -> str:
    """Do ahead of time what a measurement of ``workload`` would compute and its framework
    caches, allocating no device state for the measurement: with JAX, trace, lower and compile
    the measured program with exactly its measured options (JAX's persistent cache then holds the
    executable :func:`run_workload` loads), the init program, the cost analysis with its loop
    variants and the memory breakdown (``Backend.prepare``, docs/performance.md "Compiling
    ahead"). Called by the process executor's prepare workers (``overlap``) on the configs after
    the one being measured. Returns in words what was done; nothing of it is ever stored: a
    failure here (an exception, or the worker's crash) only means the measuring worker compiles
    the config itself. A framework without the ``prepare`` capability (TensorFlow, torch) does
    nothing ("unsupported"); so does a config whose weights alone are predicted not to fit (the
    measurement refuses it before compiling)."""
    settings = settings or MeasureSettings()
    try:
        prepare = backends.capability(workload.framework, "prepare", "compile ahead")
    except ParadnnError:
        return "unsupported"
    platform, _software = context(workload.framework)
    if workload.devices > platform["device_count"]:
        return "nothing to prepare: more devices than this host has (the measurement says so)"
    backend = backends.get(workload.framework)
    limit = memory_limit_bytes if memory_limit_bytes is not None else backend.device_memory_bytes()
    if sizes.predicted_oom(workload, limit) is not None:
        return "nothing to prepare: predicted out of memory before compiling"
    return str(prepare(workload, settings, limit))


_T = TypeVar("_T")


class Phases:
    """Seconds of a config's phases (``paradnn.record.PHASES``), written into its metrics as
    ``phase_<name>_s`` as each one ends."""

    def __init__(self, metrics: dict[str, Any]):
        self.metrics = metrics

    def run(self, phase: str, fn: Callable[[], _T]) -> _T:
        """``fn()``, its wall time added to ``phase`` (also when it raises)."""
        name = phase_metric(phase)
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.metrics[name] = (self.metrics.get(name) or 0.0) + time.perf_counter() - t0

    def finish(self, t_start: float) -> None:
        """Close the breakdown of a run that began at ``t_start`` (``time.perf_counter``): the
        worker-side phases not measured are ``other``; ``startup`` and ``executor`` belong to the
        executor (0 until it says otherwise) and ``phase_total_s`` is the sum."""
        total = time.perf_counter() - t_start
        known = sum(self.metrics.get(phase_metric(p)) or 0.0 for p in PHASES if p != "other")
        self.metrics[phase_metric("other")] = max(total - known, 0.0)
        self.metrics.setdefault(phase_metric("ledger"), 0.0)  # 0 without the ledger setting
        self.metrics.setdefault(phase_metric("startup"), 0.0)
        self.metrics.setdefault(phase_metric("executor"), 0.0)
        self.metrics["phase_total_s"] = sum(self.metrics.get(phase_metric(p)) or 0.0 for p in PHASES)


def derived_metrics(m: dict[str, Any], workload: Workload, platform: dict[str, Any]) -> dict[str, Any]:
    """Throughput, FLOPS, utilization and intensity from the measured and counted quantities, and
    which peak the utilizations divide by (``peak_id``: none where only contended probes of
    this host are on record, and then no utilization); the same utilizations against the
    measured ceiling (``ceiling_id``: the peak's own probe where the peak is measured)."""
    peak = hardware.peaks(platform["device_kind"], workload.dtype, platform["device_platform"],
                          m.get("matmul_precision_used"), framework=workload.framework)
    ceiling = hardware.ceiling(platform["device_platform"], workload.dtype, workload.framework, peak,
                               m.get("matmul_precision_used"))
    step = m["step_time_s"]
    executed = m.get("flops_per_step")  # None where the framework does not count them
    flops_per_sec = executed / step if executed else None
    return {
        "examples_per_sec": workload.batch / step,
        "flops_per_sec": flops_per_sec,
        **hardware.utilization_metrics(peak, ceiling, flops_per_sec, m["model_flops_per_step"] / step,
                                       workload.devices),
        "useful_flops_ratio": m["model_flops_per_step"] / executed if executed else None,
        "arithmetic_intensity": executed / m["bytes_per_step"] if executed and m.get("bytes_per_step") else None,
    }
