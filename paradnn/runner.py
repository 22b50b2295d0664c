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
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from paradnn import families, frameworks, hardware, meters, progress, sizes
from paradnn.envcheck import os_cause
from paradnn.errors import InfrastructureError, ParadnnError, SpecError
from paradnn.measure import MeasureSettings, time_calls
from paradnn.record import PHASES, PREDICTED, STATUSES, Record, phase_metric, record_warnings, replaced_by
from paradnn.workload import ModelSpec, Workload, short_name


@functools.lru_cache(maxsize=None)
def context(framework: str = frameworks.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
    """(platform, software) of ``framework`` in this process: the device platform, kind and
    count it sees (``Backend.device_info``), and the versions that shape its numbers: paradnn's
    and Python's (:func:`paradnn.hardware.software_info`), ``framework_version`` and the
    framework's own fields (``Backend.software_info``), and ``replaced_by`` where a plugin
    replaced a built-in framework or family here (:func:`paradnn.record.replaced_by`)."""
    backend = frameworks.get(framework)
    platform = hardware.local_device_info(backend.device_info())
    software = {**hardware.software_info(), **backend.software_info(), **replaced_by(framework)}
    return platform, software


def model_flops_per_step(workload: Workload) -> float:
    """Analytic FLOPs of one training step over the global batch (FLOP): the family's closed form
    or published count (:func:`paradnn.sizes.model_flops_per_step`), else counted from the
    reference model, by the default backend (its ``model_flops_per_step`` capability)."""
    known = sizes.model_flops_per_step(workload)
    if known is not None:
        return known
    # A capability of the default (reference) backend, looked up only here: only families with
    # neither (some real models) need it, so a run of another framework imports no JAX for FC,
    # CNN, RNN or the zoo's published counts.
    count = frameworks.capability(frameworks.DEFAULT, "model_flops_per_step", "count a model's FLOPs from its jaxpr")
    return count(workload)


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
    framework: str = frameworks.DEFAULT,
    **setting_overrides: Any,
) -> Record:
    """Build, compile and measure one training workload; return its record.

    ``batch`` is the global batch in examples (default: the family's, e.g. 256 FC, 64 CNN/RNN,
    the model's own for real models); ``dtype`` the compute dtype; ``optimizer`` None for the
    model's default; ``devices`` data-parallel devices; ``framework`` a registered framework
    (jax, tensorflow, torch, ...: :func:`paradnn.frameworks.names`), or ``"best"``: the
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


#: Metrics of a config measured alone, the values every measurement starts from; an executor that
#: compiles ahead replaces them (paradnn.executors.process).
ALONE: Mapping[str, Any] = {"oom_predicted": False, "overlap_workers": 0, "prepared_ahead": False,
                            "preparers_stopped": False, "prepare_wait_s": 0.0}


@dataclass(frozen=True)
class Outcome:
    """How one measurement ended, which :func:`run_workload` turns into its record: ``status``
    ``ok`` or a failure (``oom``, ``error``), ``error`` why it failed (None when ok),
    ``oom_predicted`` whether the failure is an out-of-memory predicted without running (from
    the compiled program, before allocating), and ``warnings`` the
    :data:`paradnn.record.WARNINGS` codes an ok run's metrics raise."""

    status: str
    error: str | None = None
    oom_predicted: bool = False
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES or self.status == PREDICTED or (self.status == "ok") != (self.error is None):
            raise ValueError(f"Outcome: status {self.status!r} with error {self.error!r}; allowed: ok without "
                             f"an error, or one of {[s for s in STATUSES if s not in ('ok', PREDICTED)]} with one")


@dataclass
class Measured:
    """What one measurement produced, each step's metrics under its own name in the order the
    steps run; a step the measurement did not reach (it ended before) left its part empty.
    :meth:`metrics` assembles a record's metrics from them, the one place they are put together."""

    limit: Mapping[str, Any]  # memory_limit_bytes (B) and memory_limit_source
    predicted: Mapping[str, Any] | None = None  # refused before compiling: the analytic sizes
    tags: Mapping[str, Any] = field(default_factory=dict)  # the program's model tags
    program: Mapping[str, Any] = field(default_factory=dict)  # the compiled program: params, memory analysis
    no_ledger: Mapping[str, Any] = field(default_factory=dict)  # why no time ledger was taken
    timing: Mapping[str, Any] = field(default_factory=dict)  # step-time statistics, meters, final loss
    costs: Mapping[str, Any] = field(default_factory=dict)  # the framework's cost analysis
    memory: Mapping[str, Any] = field(default_factory=dict)  # the memory breakdown
    counts: Mapping[str, Any] = field(default_factory=dict)  # the analytic FLOP counts
    derived: Mapping[str, Any] = field(default_factory=dict)  # throughput, peaks, utilizations
    ledger: Mapping[str, Any] = field(default_factory=dict)  # the time ledger
    phases: dict[str, Any] = field(default_factory=dict)  # phase_<name>_s in s (Phases)

    def metrics(self, outcome: Outcome | None = None) -> dict[str, Any]:
        """The record's metrics: a run refused before compiling has the size prediction and the
        limit only; any other, every part so far over :data:`ALONE` (a later part wins where
        two name one metric), then its phases and, from ``outcome``, ``oom_predicted``."""
        if self.predicted is not None:
            return {**self.predicted, **self.limit}
        out = {**ALONE, **self.limit, **self.program, **self.no_ledger, **self.timing, **self.costs,
               **self.memory, **self.counts, **self.derived, **self.ledger, **self.phases}
        if outcome is not None and outcome.oom_predicted:
            out["oom_predicted"] = True
        return out


def run_workload(
    workload: Workload,
    settings: MeasureSettings | None = None,
    memory_limit_bytes: int | None = None,
) -> Record:
    """Measure a validated :class:`Workload` with its framework's backend. Never raises for
    runtime failures: they become ``oom`` or ``error`` records (:class:`Outcome`)."""
    t_start = time.perf_counter()
    settings = settings or MeasureSettings()
    backend = frameworks.get(workload.framework)
    platform, software = context(workload.framework)
    problem = platform_problem(workload, platform)
    if problem is not None:
        raise problem
    limit = memory_limit_bytes if memory_limit_bytes is not None else backend.device_memory_bytes()
    # The limit every out-of-memory prediction of this run is checked against, and its source.
    measured = Measured(limit={"memory_limit_bytes": limit, "memory_limit_source": (
        None if limit is None else "given" if memory_limit_bytes is not None else "device")})
    outcome = _measure(workload, settings, backend, platform, limit, measured)
    if measured.predicted is None:  # a run refused before compiling has no phases
        Phases(measured.phases).finish(t_start)
    return Record(status=outcome.status, workload=workload.to_dict(), platform=platform, software=software,
                  settings=settings.to_dict(workload.framework), metrics=measured.metrics(outcome),
                  error=outcome.error, tags=measured.tags, warnings=outcome.warnings)


def _measure(workload: Workload, settings: MeasureSettings, backend: frameworks.Backend,
             platform: Mapping[str, Any], limit: int | None, measured: Measured) -> Outcome:
    """Measure ``workload``, filling ``measured`` as each step ends; how it ended. Every failure
    of the run is an Outcome; bad input raises ParadnnError, a failing environment
    InfrastructureError."""
    # Cheapest check first (paradnn.sizes): the analytic weights + optimizer state against the
    # limit, before anything is traced; --layers 1000000000 must not trace for hours.
    too_big = sizes.predicted_oom(workload, limit)
    if too_big is not None:
        measured.predicted = too_big["metrics"]
        return Outcome("oom", too_big["error"])
    try:
        return _steps(workload, settings, backend, platform, limit, measured)
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
        message = f"{type(exc).__name__}: {exc}"
        return Outcome("oom" if backend.is_oom(exc) else "error", message[:4000])


def _steps(workload: Workload, settings: MeasureSettings, backend: frameworks.Backend,
           platform: Mapping[str, Any], limit: int | None, measured: Measured) -> Outcome:
    """The steps of :func:`_measure` after the size check, in order: compile, refuse what the
    compiled program predicts will not fit, initialize, time, profile the ledger, count costs
    and memory, read the peak. Raises what a step raises."""
    phases = Phases(measured.phases)
    progress.phase("compiling")
    t0 = time.perf_counter()
    program = backend.compile(workload, settings)
    compile_wall = time.perf_counter() - t0
    measured.tags, measured.program = dict(program.tags), program.metrics
    # A backend that does not split its compile (TensorFlow, torch) has it all as compile.
    trace, compiled = program.metrics.get("phase_trace_s"), program.metrics.get("phase_compile_s")
    measured.phases[phase_metric("trace")] = trace
    measured.phases[phase_metric("compile")] = compiled if compiled is not None else compile_wall - (trace or 0.0)
    if limit is not None and program.state_bytes > limit:
        return Outcome("oom", f"predicted before running: weights+optimizer state {program.state_bytes} B > "
                       f"limit {limit} B", oom_predicted=True)
    peak = program.metrics.get("memory_peak_bytes")
    if limit is not None and peak is not None and peak > limit:
        return Outcome("oom", f"predicted from compiled memory analysis: peak {peak} B > limit {limit} B",
                       oom_predicted=True)

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
            measured.no_ledger = ledger.unavailable(no_ledger)
    progress.phase("counting costs and memory")
    del state, batch, kept  # free device memory before compiling the cost variants
    measured.timing = timing.stats()
    measured.phases[phase_metric("warmup")] = timing.warmup_s
    measured.phases[phase_metric("timed")] = timing.timing_s - timing.warmup_s
    measured.timing = {**measured.timing, **timing.meter.metrics(steps=timing.timed_steps,
                                                                  examples=timing.timed_steps * workload.batch),
                       "final_loss": timing.final_loss}
    if not np.isfinite(timing.final_loss):
        return Outcome("error", f"non-finite loss {timing.final_loss}")

    measured.costs = phases.run("costs", lambda: backend.costs(program))
    measured.memory = phases.run("memory", lambda: backend.memory_breakdown(program))
    measured.counts = {"model_flops_per_step": phases.run("costs", lambda: model_flops_per_step(workload)),
                       "flops_count_rule": families.of(workload.spec).count_rule,
                       "elementwise_flops_per_step": sizes.elementwise_flops_per_step(workload)}
    progress.phase("reading the peak")
    # The probe of the host's peak runs here when none is cached (once per host and
    # software): its own phase, so a slow first run says where its time went.
    measured.derived = phases.run("probe", lambda: derived_metrics(measured.metrics(), workload, platform))
    if ops is not None:
        from paradnn import ledger

        measured.ledger = ledger.safe_metrics(ops, measured.metrics(), workload.devices)
    return Outcome("ok", warnings=tuple(record_warnings(measured.metrics(), workload.devices,
                                                        hardware.PROBE_MAX_CV)))


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
        prepare = frameworks.capability(workload.framework, "prepare", "compile ahead")
    except ParadnnError:
        return "unsupported"
    platform, _software = context(workload.framework)
    if workload.devices > platform["device_count"]:
        return "nothing to prepare: more devices than this host has (the measurement says so)"
    backend = frameworks.get(workload.framework)
    limit = memory_limit_bytes if memory_limit_bytes is not None else backend.device_memory_bytes()
    if sizes.predicted_oom(workload, limit) is not None:
        return "nothing to prepare: predicted out of memory before compiling"
    return str(prepare(workload, settings, limit))


_T = TypeVar("_T")


class Phases:
    """Seconds of a config's phases (``paradnn.record.PHASES``), written into ``metrics`` (a
    measurement's :attr:`Measured.phases`) as ``phase_<name>_s`` as each one ends."""

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
