"""JAX's side of operation-level profiles (:mod:`paradnn.profile`) and of the device busy
fraction (:mod:`paradnn.meters`): the compiled step's optimized HLO and a ``jax.profiler``
trace of it. Parsing the HLO and the trace, and joining them, is framework-free
(:mod:`paradnn.profile`)."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, ContextManager

import jax

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


def trace_step(step: Any, state: Any, batch: Any, steps: int, warmup: int,
               trace_dir: str) -> dict[str, Any]:
    """Compile the jitted ``step(state, batch) -> (state, loss)``, run ``warmup`` steps, then
    ``steps`` steps under the profiler writing into ``trace_dir`` (the state is threaded
    through, so a donating step works). Returns ``hlo`` (the optimized HLO text),
    ``wall_step_s`` (s, wall time per step under the profiler), ``device_platform`` and
    ``device_kind``."""
    if steps < 1 or warmup < 0:
        raise ParadnnError(f"profile: steps={steps}, warmup={warmup}; allowed: steps >= 1, warmup >= 0")
    compiled = step.lower(state, batch).compile()
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


__all__ = ["profile_inputs", "profiler_trace", "trace_step"]
