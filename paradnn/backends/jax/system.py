"""JAX's side of the system experiments: the probe's GEMMs and bandwidth loop, one operator's
program (``paradnn ops``), one collective's program (``paradnn collectives``, ``scaling``) and
the XLA:CPU device simulation. The drivers (timing, rows, tables) are framework-free:
:mod:`paradnn.hardware`, :mod:`paradnn.experiments.ops`, :mod:`paradnn.experiments.collectives`."""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from paradnn.backends.jax import xla_stack

#: The XLA flag that makes XLA:CPU show several devices (threads of one process).
FORCE_DEVICES_FLAG = "--xla_force_host_platform_device_count"
#: Timed repetitions of the probe's bandwidth loop (its array size and calls per repetition
#: are the platform's: ``paradnn.hardware.PROBE_PLANS``).
BANDWIDTH_REPS = 5
#: Matmuls an accelerator GEMM method of the probe queues per call before it waits for the
#: last (JAX dispatches asynchronously): one host-device synchronisation, tens of microseconds,
#: would otherwise count against each 0.2-1.4 ms matmul (4096^3 to 8192^3 bfloat16 on an H100).
ACCELERATOR_GEMM_QUEUE = 8


# -- the probe ---------------------------------------------------------------------------------

def xla_gemm(options: dict[str, Any] | None, queue: int = 1) -> Callable[[str, int], Callable[[], Any]]:
    """A probe GEMM method: ``jnp.dot`` of two NxN matrices compiled with XLA ``options``; each
    call queues ``queue`` of them and waits for the last (its attribute ``matmuls``, which the
    probe counts FLOPs by)."""
    def make(dtype: str, n: int) -> Callable[[], Any]:
        key = jax.random.key(n)
        a = jax.random.normal(key, (n, n), jnp.float32).astype(dtype)
        b = jax.random.normal(jax.random.fold_in(key, 1), (n, n), jnp.float32).astype(dtype)
        compiled = jax.jit(jnp.dot).lower(a, b).compile(options)

        def call() -> Any:
            out = None
            for _ in range(queue):  # the device runs them back to back; one wait for all
                out = compiled(a, b)
            return jax.block_until_ready(out)

        call.matmuls = queue  # type: ignore[attr-defined]
        return call

    return make


def xla_preset_gemms() -> dict[str, Callable[[str, int], Callable[[], Any]]]:
    """XLA under each distinct CPU option set of the ``xla_preset`` presets; presets with the
    same options share one method, named after all of them (``xla-best/stock``)."""
    names: dict[str, list[str]] = {}
    for preset in xla_stack.PRESETS:
        options = xla_stack.compile_options(preset, "cpu")
        names.setdefault(json.dumps(options, sort_keys=True), []).append(preset)
    return {"xla-" + "/".join(presets): xla_gemm(json.loads(key)) for key, presets in names.items()}


def measure_bandwidth(megabytes: int, calls: int = 1, reps: int = BANDWIDTH_REPS) -> dict[str, Any]:
    """Best streaming bandwidth (``bytes_per_sec``, B/s: read and write one float32 array of
    ``megabytes`` MiB in place, donated; ``calls`` calls queued per timed repetition, each
    depending on the last, and one wait), the coefficient of variation of the ``reps``
    repetitions (``cv``) and ``method`` (in words)."""
    n = megabytes * 2**20 // 4
    f = jax.jit(lambda x: x * 1.0001 + 1.0, donate_argnums=0)
    x = jnp.zeros((n,), jnp.float32)
    x = jax.block_until_ready(f(x))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            x = f(x)
        x = jax.block_until_ready(x)
        times.append(time.perf_counter() - t0)
    return {"bytes_per_sec": 2.0 * n * 4 * calls / min(times), "cv": float(np.std(times) / np.mean(times)),
            "method": (f"in-place x*a+b on {megabytes} MiB float32, donated, "
                       + (f"{calls} calls queued per repetition, " if calls > 1 else "") + f"best of {reps}")}


# -- one operator (paradnn.experiments.ops) ----------------------------------------------------------------

def op_program(shape: Any, dtype: str, precision_setting: str = "default") -> dict[str, Any]:
    """The compiled program of one operator ``shape`` (a :class:`paradnn.experiments.ops.OpShape`) in
    ``dtype`` on the default device, traced under the ``matmul_precision`` setting
    ``precision_setting``: ``call(state, operands, k)`` runs it ``k`` times (queued
    asynchronously; the timing protocol waits for the last), ``state`` and ``operands`` to
    start from, XLA's cost analysis of one op: ``flops`` (FLOP) and ``bytes`` (B accessed;
    None where XLA reports none), and the precision it measured itself using:
    ``matmul_precision_used`` and ``matmul_precision_bits`` (:func:`paradnn.precision.used`)."""
    from paradnn import precision
    from paradnn.backends.jax import step

    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    if shape.op == "matmul":
        lead = (shape.batch,) if shape.batch > 1 else ()
        a = jax.random.normal(key_a, (*lead, shape.m, shape.k), jnp.float32).astype(dtype)
        b = jax.random.normal(key_b, (*lead, shape.k, shape.n), jnp.float32).astype(dtype)

        def f(a, b):
            y = jnp.matmul(a, b)
            return y, y.reshape(-1)[0].astype(jnp.float32)
    else:
        a = jax.random.normal(key_a, (shape.batch, shape.height, shape.width, shape.channels),
                              jnp.float32).astype(dtype)
        b = jax.random.normal(key_b, (shape.kernel_h, shape.kernel_w, shape.channels,
                                      shape.out_channels), jnp.float32).astype(dtype)

        def f(a, b):
            y = jax.lax.conv_general_dilated(a, b, (shape.stride, shape.stride), "VALID",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            return y, y.reshape(-1)[0].astype(jnp.float32)
    with step.matmul_precision(precision_setting):
        compiled = jax.jit(f).lower(a, b).compile()
    cost = compiled.cost_analysis()
    cost = (cost[0] if isinstance(cost, (list, tuple)) else cost) or {}
    kind = "matmul" if shape.op == "matmul" else "conv"
    used, bits = precision.used(dtype, step.precision_bits(precision_setting) if dtype == "float32" else None, (kind,))

    def call(state, operands, k):
        out = state
        for _ in range(k):  # queued asynchronously; time_calls waits for the last one
            out = compiled(*operands)
        return out, out[1]

    return {"call": call, "state": compiled(a, b), "operands": (a, b),
            "flops": float(cost.get("flops", 0.0)) or None,
            "bytes": float(cost.get("bytes accessed", 0.0)) or None,
            "matmul_precision_used": used, "matmul_precision_bits": bits}


def cpu_child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child process that must run on exactly one XLA:CPU device (the thread scan
    of ``paradnn ops``): a forced device count would split the cores among devices."""
    env = dict(env)
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split()
                                if not f.startswith(FORCE_DEVICES_FLAG))
    env["JAX_PLATFORMS"] = "cpu"
    return env


# -- one collective (paradnn.experiments.collectives) -------------------------------------------------------

def simulated_devices() -> bool:
    """Whether this process's devices are forced host-platform devices on one CPU host."""
    return jax.default_backend() == "cpu" and jax.device_count() > 1


def simulate_host_devices(count: int) -> None:
    """Ask XLA:CPU for ``count`` host devices (``--xla_force_host_platform_device_count``);
    takes effect only if JAX has not started its backend in this process yet."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(FORCE_DEVICES_FLAG)]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{FORCE_DEVICES_FLAG}={count}"])


def collective_program(collective: str, devices: int, elements: int, dtype: str) -> dict[str, Any]:
    """One collective over the first ``devices`` devices, through ``jax.shard_map`` over a 1-D
    mesh, for ``elements`` input elements per device: ``call(state, batch, k)`` runs it ``k``
    times (queued asynchronously), ``state`` and ``batch`` to start from, and ``implementation``
    (how a broadcast is done, None for the others)."""
    mesh = Mesh(np.array(jax.devices()[:devices]), ("d",))
    implementation = None
    if collective == "all_reduce":
        body = functools.partial(jax.lax.psum, axis_name="d")
    elif collective == "all_gather":
        body = functools.partial(jax.lax.all_gather, axis_name="d", tiled=True)
    elif collective == "reduce_scatter":
        body = functools.partial(jax.lax.psum_scatter, axis_name="d", tiled=True)
    else:
        # jax.lax.pbroadcast has no lowering on XLA:CPU (jax 0.10): the portable broadcast is
        # the psum of the root's buffer with zeros elsewhere. It moves as much data as an
        # all-reduce, so its bus bandwidth (factor 1) is a lower bound on a native broadcast's.
        implementation = ("psum of the root's buffer, zeros elsewhere (no native broadcast "
                          "lowering on every backend)")

        def body(x):
            root = jax.lax.axis_index("d") == 0
            return jax.lax.psum(jnp.where(root, x, jnp.zeros_like(x)), "d")
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    x = jax.device_put(jnp.ones((devices * elements,), dtype), NamedSharding(mesh, P("d")))
    compiled = f.lower(x).compile()

    def call(state, batch, k):
        out = state
        for _ in range(k):  # queued asynchronously; time_calls waits for the last one
            out = compiled(batch)
        return out, out[0].astype("float32")

    return {"call": call, "state": compiled(x), "batch": x, "implementation": implementation}


__all__ = ["FORCE_DEVICES_FLAG", "collective_program", "cpu_child_env", "measure_bandwidth", "op_program",
           "simulate_host_devices", "simulated_devices", "xla_gemm", "xla_preset_gemms"]
