"""``paradnn.run``: one workload in, one :class:`~paradnn.record.Record` out.

Order of work, cheapest check first: validate (raises SpecError), count parameters from shapes,
refuse a model whose weights and optimizer state alone exceed the memory limit (``oom`` before
compiling), compile the K-step program ahead of time, refuse it if its memory analysis exceeds
the limit (``oom`` before running), allocate and time it, then take costs and peaks. Any failure
after validation becomes a record (``oom`` or ``error``), never an exception: a sweep goes on.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import jax
import numpy as np

from paradnn import costs, hardware, memory, meters
from paradnn.errors import InfrastructureError, ParadnnError, SpecError
from paradnn.measure import MeasureSettings, time_calls
from paradnn.models import ModelDef, build, count_from_shapes
from paradnn.record import Record, physics_warnings
from paradnn.specs import CNN, FC, RNN, ModelSpec, Real, Workload
from paradnn import workload as wl

DEFAULT_BATCH = {"fc": 256, "cnn": 64, "rnn": 64}


@functools.lru_cache(maxsize=1)
def _context() -> tuple[dict[str, Any], dict[str, Any]]:
    return hardware.platform_info(), hardware.software_info()


def is_oom(exc: BaseException) -> bool:
    """Whether an exception means the device ran out of memory."""
    text = f"{type(exc).__name__}: {exc}"
    return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def state_bytes(state: Any) -> int:
    """Bytes of a state tree (arrays or shapes). The weights and optimizer state are arguments
    of the step, so this is a true lower bound on its memory. (Gradients are not: XLA fuses
    them into the update without materializing them.)"""
    return sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(state))


def peak_bytes(mem: Any) -> int:
    """``memory_peak_bytes`` (B per device): XLA's peak where it reports one, else argument +
    output + temp - alias. On XLA:CPU the reported peak leaves the temporaries out (about the
    arguments alone: a ResNet-18 step reports 89 MiB against 142 MiB of buffers with jax 0.10),
    so there the larger of the two is taken."""
    reported = int(getattr(mem, "peak_memory_in_bytes", 0) or 0)
    total = int(mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
                - mem.alias_size_in_bytes)
    if not reported or jax.default_backend() == "cpu":
        return max(reported, total)
    return reported


def run(
    spec: ModelSpec,
    batch: int | None = None,
    dtype: str = "float32",
    optimizer: str | None = None,
    devices: int = 1,
    settings: MeasureSettings | None = None,
    memory_limit_bytes: int | None = None,
    **setting_overrides: Any,
) -> Record:
    """Build, compile and measure one training workload; return its record.

    ``batch`` is the global batch in examples (default: 256 FC, 64 CNN/RNN, the model's own for
    real models); ``dtype`` the compute dtype; ``optimizer`` None for the model's default;
    ``devices`` data-parallel devices. ``settings`` (or keyword overrides such as
    ``steps_per_call=5``) control the timing protocol. ``memory_limit_bytes`` (default: the
    device's memory where known) turns a model that would not fit into an ``oom`` record.

    >>> rec = run(FC(layers=4, nodes=256, input=2000, output=1000), batch=128)  # doctest: +SKIP
    >>> rec.status, rec.metrics["examples_per_sec"]  # doctest: +SKIP
    """
    if batch is None:
        if isinstance(spec, Real):
            from paradnn.models import registry

            batch = registry.get(spec.model).default_batch
        else:
            batch = DEFAULT_BATCH[spec.family]
    settings = (settings or MeasureSettings()).replace(**setting_overrides)
    return run_workload(Workload(spec, batch, dtype, optimizer, devices), settings, memory_limit_bytes)


def param_count(spec: ModelSpec, model: ModelDef) -> int:
    """Closed form for generated models (tested against shapes), shapes for real ones."""
    if isinstance(spec, (FC, CNN, RNN)):
        from paradnn.models import param_count as closed_form

        return closed_form(spec)
    return count_from_shapes(model)


def run_workload(
    workload: Workload,
    settings: MeasureSettings | None = None,
    memory_limit_bytes: int | None = None,
) -> Record:
    """Measure a validated :class:`Workload`. Never raises for runtime failures."""
    settings = settings or MeasureSettings()
    platform, software = _context()
    context = {"platform": platform, "software": software, "settings": settings.to_dict()}
    if workload.devices > platform["device_count"]:
        raise SpecError("devices", workload.devices, f"at most {platform['device_count']} on this host")
    limit = memory_limit_bytes if memory_limit_bytes is not None else hardware.device_memory_bytes()
    # Cheapest check first (paradnn.preflight): the analytic weights + optimizer state
    # against the limit, before anything is traced; --layers 1000000000 must not trace for hours.
    from paradnn.preflight import predicted_oom

    too_big = predicted_oom(workload, limit)
    if too_big is not None:
        return Record.failed(workload, "oom", too_big["error"], metrics=too_big["metrics"], **context)
    metrics: dict[str, Any] = {"oom_predicted": False}
    tags: dict[str, Any] = {}
    try:
        model = build(workload.spec, workload.dtype)
        tags = dict(model.tags)
        optimizer_name = workload.optimizer or model.default_optimizer
        metrics["params"] = param_count(workload.spec, model)
        mesh = wl.device_mesh(workload.devices)
        state_shapes, batch_shapes = wl.abstract_inputs(workload, model, optimizer_name, mesh)
        floor = state_bytes(state_shapes)
        if limit is not None and floor > limit:
            return Record.failed(
                workload, "oom",
                f"predicted before compiling: weights+optimizer state {floor} B > limit {limit} B",
                metrics={**metrics, "oom_predicted": True}, tags=tags, **context)

        t0 = time.perf_counter()
        compiled, loop = wl.compile_measured(model, optimizer_name, mesh, state_shapes, batch_shapes,
                                             settings.xla_preset, settings.step_loop)
        metrics["step_loop_used"] = loop
        metrics["compile_s"] = time.perf_counter() - t0
        mem = compiled.memory_analysis()
        if mem is not None:
            metrics.update(
                memory_argument_bytes=int(mem.argument_size_in_bytes),
                memory_output_bytes=int(mem.output_size_in_bytes),
                memory_temp_bytes=int(mem.temp_size_in_bytes),
                memory_peak_bytes=peak_bytes(mem),
            )
            if limit is not None and metrics["memory_peak_bytes"] > limit:
                return Record.failed(
                    workload, "oom",
                    f"predicted from compiled memory analysis: peak {metrics['memory_peak_bytes']} B > limit {limit} B",
                    metrics={**metrics, "oom_predicted": True}, tags=tags, **context)

        state, batch = wl.init_inputs(workload, model, optimizer_name, mesh)
        devices = jax.devices()[:workload.devices]
        timing = time_calls(wl.k_step_call(compiled, loop), state, batch, settings,
                            window=lambda: meters.window(platform["backend"], devices))
        del state, batch  # free device memory before compiling the cost variants
        metrics.update(timing.stats())
        metrics.update(timing.meter.metrics(steps=timing.timed_steps,
                                            examples=timing.timed_steps * workload.batch))
        metrics["final_loss"] = timing.final_loss
        if not np.isfinite(timing.final_loss):
            return Record.failed(workload, "error", f"non-finite loss {timing.final_loss}",
                                 metrics=metrics, tags=tags, **context)

        metrics.update(costs.xla_step_costs(workload, model, optimizer_name, compiled))
        metrics.update(memory.memory_breakdown(workload, model, state_shapes, batch_shapes, compiled).metrics())
        metrics["model_flops_per_step"] = costs.model_flops_per_step(workload, model, optimizer_name)
        metrics.update(derived_metrics(metrics, workload, platform))
        warnings = physics_warnings(metrics, workload.devices)
    except ParadnnError:
        raise  # bad input (e.g. an image too small for a zoo model) is the user's to fix, not data
    except OSError as exc:
        # The file system, a cache, a pipe: the environment failed, not the workload. Never a
        # row; the executor stops the sweep with one line (or retries), and resume runs it.
        raise InfrastructureError(f"{type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - every failure becomes data
        status = "oom" if is_oom(exc) else "error"
        message = f"{type(exc).__name__}: {exc}"
        return Record.failed(workload, status, message[:4000], metrics=metrics, tags=tags, **context)
    return Record(status="ok", workload=workload.to_dict(), metrics=metrics, tags=tags,
                  warnings=warnings, **context)


def derived_metrics(m: dict[str, Any], workload: Workload, platform: dict[str, Any]) -> dict[str, Any]:
    """Throughput, FLOPS, utilization and intensity from the measured and counted quantities."""
    peak = hardware.peaks(platform["device_kind"], workload.dtype, platform["backend"])
    peak_flops = peak.flops
    step = m["step_time_s"]
    flops_per_sec = m["flops_per_step"] / step
    return {
        "examples_per_sec": workload.batch / step,
        "flops_per_sec": flops_per_sec,
        "peak_flops": peak_flops,
        "peak_bytes_per_sec": peak.bytes_per_sec,
        "peak_source": peak.source,
        "peak_method": peak.method,
        "useful_flops_ratio": m["model_flops_per_step"] / m["flops_per_step"] if m["flops_per_step"] else None,
        "flops_utilization": flops_per_sec / (peak_flops * workload.devices),
        "model_flops_utilization": m["model_flops_per_step"] / step / (peak_flops * workload.devices),
        "arithmetic_intensity": m["flops_per_step"] / m["bytes_per_step"] if m["bytes_per_step"] else None,
    }
