"""JAX's side of operation-level profiles (:mod:`paradnn.experiments.profile`) and of the device busy
fraction (:mod:`paradnn.meters`): the compiled step's optimized HLO and a ``jax.profiler``
trace of it. Parsing the HLO and the trace, and joining them, is framework-free
(:mod:`paradnn.experiments.profile`)."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, ContextManager

import jax

from paradnn.backends.jax import xla_stack
from paradnn.errors import ParadnnError


def profile_inputs(workload: Any) -> tuple[Callable, Any, Any]:
    """(jitted one-step function, initialized state, synthetic batch) of ``workload``'s
    training step (:func:`paradnn.backends.jax.step.prepare`), ready for :func:`trace_step`."""
    from paradnn.backends.jax.step import prepare

    prepared = prepare(workload)
    return prepared.step, prepared.state, prepared.batch


def profiler_trace(trace_dir: str) -> ContextManager[Any]:
    """``jax.profiler.trace`` into ``trace_dir``: a TensorBoard trace of what runs inside."""
    return jax.profiler.trace(trace_dir)


#: XLA:GPU runs a step's kernels as CUDA graphs (command buffers), whose kernels the profiler's
#: events attribute to the command buffer, not to the HLO operations inside it (openxla/xprof
#: issue 3070): on an H100 with jax 0.11.2 an FC step's profile matched 0% of its FLOPs. A profile
#: compiles with command buffers off.
_NO_COMMAND_BUFFERS = {"xla_gpu_enable_command_buffer": ""}


def _compile_for_profile(lowered: Any) -> Any:
    """``lowered`` compiled for an operation-level profile: on a GPU with command buffers off
    (:data:`_NO_COMMAND_BUFFERS`), falling back to the default compile where this jaxlib does
    not take the option; elsewhere as a run measures it by default (the default ``xla_preset``,
    its fallback included: a CPU CNN with convolutions smaller than their kernel is profiled
    as the program that runs, not the one XLA's defaults give)."""
    backend = jax.default_backend()
    if backend == "gpu":
        try:
            return lowered.compile(compiler_options=_NO_COMMAND_BUFFERS)
        except Exception:  # noqa: BLE001 - an option this XLA does not know: profile as compiled
            pass
    return xla_stack.compile_lowered(lowered, xla_stack.DEFAULT_PRESET, backend)[0]


def trace_step(step: Any, state: Any, batch: Any, steps: int, warmup: int,
               trace_dir: str) -> dict[str, Any]:
    """Compile the jitted ``step(state, batch) -> (state, loss)``, run ``warmup`` steps, then
    ``steps`` steps under the profiler writing into ``trace_dir`` (the state is threaded
    through, so a donating step works). Returns ``hlo`` (the optimized HLO text),
    ``wall_step_s`` (s, wall time per step under the profiler), ``device_platform`` and
    ``device_kind``."""
    if steps < 1 or warmup < 0:
        raise ParadnnError(f"profile: steps={steps}, warmup={warmup}; allowed: steps >= 1, warmup >= 0")
    compiled = _compile_for_profile(step.lower(state, batch))
    for _ in range(warmup):
        state, loss = compiled(state, batch)
    jax.block_until_ready(state)
    with contextlib.ExitStack() as stack:
        stack.enter_context(jax.profiler.trace(trace_dir))
        start = time.perf_counter()
        for _ in range(steps):
            state, loss = compiled(state, batch)
        jax.block_until_ready((state, loss))
        wall = (time.perf_counter() - start) / steps
    device = jax.devices()[0]
    return {"hlo": compiled.as_text(), "wall_step_s": wall, "device_platform": device.platform,
            "device_kind": getattr(device, "device_kind", device.platform)}


def ledger_ops(program: Any, state: Any, batch: Any, steps: int, trace_dir: str) -> Any:
    """The time ledger's operations (:func:`paradnn.ledger.profile_ops`): ``steps`` steps of the
    measured program itself (``program.call``: the executable that was timed, nothing compiled
    again) run from ``state`` under ``jax.profiler`` into ``trace_dir``, joined to the
    operations of its optimized HLO (:func:`paradnn.experiments.profile.op_times`: per step and device).
    ``attrs`` adds ``steps``, ``wall_step_s`` (s per step under the profiler), ``source`` and
    ``note``."""
    from paradnn.experiments import profile

    with jax.profiler.trace(trace_dir):
        start = time.perf_counter()
        state, loss = program.call(state, batch, steps)
        jax.block_until_ready((state, loss))
        wall = (time.perf_counter() - start) / steps
    del state
    ops = profile.op_times(program.handle.compiled.as_text(), trace_dir, steps, program.workload.devices)
    platform = jax.devices()[0].platform
    ops.attrs.update(
        steps=steps, wall_step_s=wall,
        source=f"jax.profiler trace of the measured program ({steps} steps after the timed calls); "
               "FLOPs and bytes per operation counted from its optimized HLO",
        note=profile.CPU_NOTE if platform == "cpu" else "operation times from device events",
    )
    return ops


__all__ = ["ledger_ops", "profile_inputs", "profiler_trace", "trace_step"]
