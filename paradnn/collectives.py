"""Collective-communication bandwidth: all-reduce, all-gather, reduce-scatter and broadcast.

Each collective runs through JAX's collectives (``jax.lax.psum``, ``all_gather``,
``psum_scatter``; the broadcast as a psum of the root's buffer) inside ``jax.shard_map`` over a 1-D mesh of ``devices``
devices, compiled once and timed with :func:`paradnn.measure.time_calls`.

Sizes follow NCCL-tests (its PERFORMANCE.md): ``size_bytes`` is the per-device buffer of the
all-reduce and broadcast, the per-device *output* of the all-gather and the per-device *input*
of the reduce-scatter. Then

* algorithm bandwidth ``algbw = size_bytes / time`` (B/s), and
* bus bandwidth ``busbw = algbw x factor``, with factor ``2(n-1)/n`` (all-reduce), ``(n-1)/n``
  (all-gather, reduce-scatter) and ``1`` (broadcast): the rate each link would need for a
  ring algorithm, comparable across device counts and with the hardware's link bandwidth.

With ``--xla_force_host_platform_device_count`` on one CPU host the "devices" are threads of one
process sharing one memory: such rows carry ``simulated_devices = True`` and their times are not
a multi-device measurement (no link is crossed).
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

from paradnn.errors import SpecError
from paradnn.measure import MeasureSettings, time_calls
from paradnn.record import Record
from paradnn.units import parse_bytes

#: collective -> bus-bandwidth factor as a function of the device count n (NCCL-tests).
BUS_FACTORS: dict[str, Any] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
COLLECTIVES: tuple[str, ...] = tuple(BUS_FACTORS)
#: How the broadcast is implemented, recorded with its rows: it moves as much data as an
#: all-reduce, so its bus bandwidth (factor 1) is a lower bound on a native broadcast's.
BROADCAST_IMPL = "psum of the root's buffer, zeros elsewhere (no native broadcast lowering on every backend)"
COLLECTIVE_FAMILY = "collective"


def bus_bandwidth(collective: str, algbw: float, n: int) -> float:
    """NCCL-tests bus bandwidth (B/s) from the algorithm bandwidth (B/s) over ``n`` devices."""
    if collective not in BUS_FACTORS:
        raise SpecError("collective", collective, "one of " + ", ".join(COLLECTIVES))
    return algbw * BUS_FACTORS[collective](n)


def parse_sizes(text: str, parameter: str = "sizes", factor: int = 2) -> list[int]:
    """``"1KB..1GB"`` (from, times ``factor``, up to and including the end) or ``"4KB,1MB"``
    -> sizes in bytes, ascending."""
    text = str(text).strip()
    if ".." in text:
        low_text, _, high_text = text.partition("..")
        low, high = parse_bytes(low_text, parameter), parse_bytes(high_text, parameter)
        if high < low:
            raise SpecError(parameter, text, "FROM..TO with FROM <= TO, e.g. 1KB..1GB")
        sizes = [low]
        while sizes[-1] * factor <= high:
            sizes.append(sizes[-1] * factor)
        return sizes
    return sorted({parse_bytes(part, parameter) for part in text.split(",") if part.strip()}) or \
        [parse_bytes(text, parameter)]


def simulated_devices() -> bool:
    """Whether this process's devices are forced host-platform devices on one CPU host."""
    import jax

    return jax.default_backend() == "cpu" and jax.device_count() > 1


def _program(collective: str, n: int, elements: int, dtype: str):
    """(compiled shard_map program, its global input) for ``elements`` per device."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:n]), ("d",))
    if collective == "all_reduce":
        body = functools.partial(jax.lax.psum, axis_name="d")
    elif collective == "all_gather":
        body = functools.partial(jax.lax.all_gather, axis_name="d", tiled=True)
    elif collective == "reduce_scatter":
        body = functools.partial(jax.lax.psum_scatter, axis_name="d", tiled=True)
    else:
        # jax.lax.pbroadcast has no lowering on XLA:CPU (jax 0.10): the portable broadcast is
        # the psum of the root's buffer with zeros elsewhere (see BROADCAST_IMPL).
        def body(x):
            root = jax.lax.axis_index("d") == 0
            return jax.lax.psum(jnp.where(root, x, jnp.zeros_like(x)), "d")
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    x = jax.device_put(jnp.ones((n * elements,), dtype), NamedSharding(mesh, P("d")))
    return f.lower(x).compile(), x


def measure_collective(collective: str, devices: int, size_bytes: int, dtype: str = "float32",
                       settings: MeasureSettings | None = None) -> Record:
    """Time one collective of ``size_bytes`` (NCCL-tests convention, see the module) over the
    first ``devices`` devices; return its row (``family = "collective"``). The size is rounded
    down to whole elements (divisible by ``devices`` where the collective splits the buffer);
    ``size_bytes`` in the row is the size actually moved."""
    import jax
    import numpy as np

    from paradnn.runner import context

    if collective not in BUS_FACTORS:
        raise SpecError("collective", collective, "one of " + ", ".join(COLLECTIVES))
    if not 2 <= devices <= jax.device_count():
        raise SpecError("devices", devices, f"an integer from 2 to {jax.device_count()} (devices of this process)")
    settings = settings or MeasureSettings()
    itemsize = np.dtype(dtype).itemsize
    unit = devices if collective in ("all_gather", "reduce_scatter") else 1
    elements = size_bytes // itemsize // unit * unit
    if elements < 1:
        raise SpecError("size", size_bytes, f"at least {unit * itemsize} B for {collective} over {devices} devices")
    # Per-device input elements: the all-gather's input is 1/n of its output.
    per_device_in = elements // devices if collective == "all_gather" else elements
    platform, software = context()
    workload = {"family": COLLECTIVE_FAMILY, "collective": collective,
                "size_bytes": elements * itemsize, "dtype": dtype, "devices": devices}
    context = {"platform": platform, "software": software, "settings": settings.to_dict(),
               "tags": {"kind": "collective"}}

    def call(state, batch, k):
        out = state
        for _ in range(k):  # queued asynchronously; time_calls waits for the last one
            out = compiled(batch)
        return out, out[0].astype("float32")

    try:
        compiled, x = _program(collective, devices, per_device_in, dtype)
        timing = time_calls(call, compiled(x), x, settings)
    except Exception as exc:  # noqa: BLE001 - a size that does not fit becomes a row
        from paradnn.backends.jax.backend import BACKEND

        return Record(status="oom" if BACKEND.is_oom(exc) else "error", workload=workload,
                      metrics={"simulated_devices": simulated_devices()},
                      error=f"{type(exc).__name__}: {exc}"[:4000], **context)
    stats = timing.stats()
    moved = elements * itemsize
    algbw = moved / stats["step_time_s"]
    metrics = {**stats, "size_bytes": moved, "algbw_bytes_per_sec": algbw,
               "busbw_bytes_per_sec": bus_bandwidth(collective, algbw, devices),
               "bus_factor": BUS_FACTORS[collective](devices),
               "simulated_devices": simulated_devices(), "final_loss": timing.final_loss}
    if collective == "broadcast":
        metrics["implementation"] = BROADCAST_IMPL
    return Record(status="ok", workload=workload, metrics=metrics, **context)


def run_collectives(devices: Sequence[int], sizes: Sequence[int], collectives: Sequence[str] = COLLECTIVES,
                    dtype: str = "float32", settings: MeasureSettings | None = None) -> list[Record]:
    """Every collective at every size over every device count, in this process."""
    return [measure_collective(c, n, s, dtype, settings) for n in devices for c in collectives for s in sizes]
