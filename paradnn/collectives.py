"""Collective-communication bandwidth: all-reduce, all-gather, reduce-scatter and broadcast.

Each collective is the framework's (``Backend.collective_program``; JAX's by default: ``jax.lax.psum``,
``all_gather``, ``psum_scatter``, the broadcast as a psum of the root's buffer, inside
``jax.shard_map`` over a 1-D mesh of ``devices`` devices), compiled once and timed with
:func:`paradnn.measure.time_calls`. Everything else here is framework-free.

Sizes follow NCCL-tests (its PERFORMANCE.md): ``size_bytes`` is the per-device buffer of the
all-reduce and broadcast, the per-device *output* of the all-gather and the per-device *input*
of the reduce-scatter. Then

* algorithm bandwidth ``algbw = size_bytes / time`` (B/s), and
* bus bandwidth ``busbw = algbw x factor``, with factor ``2(n-1)/n`` (all-reduce), ``(n-1)/n``
  (all-gather, reduce-scatter) and ``1`` (broadcast): the rate each link would need for a
  ring algorithm, comparable across device counts and with the hardware's link bandwidth.

With ``--xla_force_host_platform_device_count`` (JAX's simulated devices) on one CPU host the
"devices" are threads of one process sharing one memory: such rows carry ``simulated_devices =
True`` and their times are not a multi-device measurement (no link is crossed).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from paradnn import backends
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


def simulated_devices(framework: str = backends.DEFAULT) -> bool:
    """Whether this process's devices of ``framework`` are simulated on one CPU host (JAX:
    forced host-platform devices); False for a framework that cannot simulate devices."""
    simulated = getattr(backends.get(framework), "simulated_devices", None)
    return bool(simulated()) if simulated is not None else False


def measure_collective(collective: str, devices: int, size_bytes: int, dtype: str = "float32",
                       settings: MeasureSettings | None = None, framework: str = backends.DEFAULT) -> Record:
    """Time one collective of ``size_bytes`` (NCCL-tests convention, see the module) over the
    first ``devices`` devices of ``framework``; return its row (``family = "collective"``). The
    size is rounded down to whole elements (divisible by ``devices`` where the collective splits
    the buffer); ``size_bytes`` in the row is the size actually moved."""
    from paradnn.runner import context

    if collective not in BUS_FACTORS:
        raise SpecError("collective", collective, "one of " + ", ".join(COLLECTIVES))
    backend = backends.get(framework)
    program = backends.capability(framework, "collective_program", "run collectives")
    platform, software = context(framework)
    count = platform["device_count"]
    if not 2 <= devices <= count:
        raise SpecError("devices", devices, f"an integer from 2 to {count} (devices of this process)")
    settings = settings or MeasureSettings()
    itemsize = np.dtype(dtype).itemsize
    unit = devices if collective in ("all_gather", "reduce_scatter") else 1
    elements = size_bytes // itemsize // unit * unit
    if elements < 1:
        raise SpecError("size", size_bytes, f"at least {unit * itemsize} B for {collective} over {devices} devices")
    # Per-device input elements: the all-gather's input is 1/n of its output.
    per_device_in = elements // devices if collective == "all_gather" else elements
    workload = {"family": COLLECTIVE_FAMILY, "collective": collective,
                "size_bytes": elements * itemsize, "dtype": dtype, "devices": devices}
    context = {"platform": platform, "software": software, "settings": settings.to_dict(framework),
               "tags": {"kind": "collective"}}
    simulated = simulated_devices(framework)
    try:
        op = program(collective, devices, per_device_in, dtype)
        timing = time_calls(op["call"], op["state"], op["batch"], settings, sync=backend.sync)
    except Exception as exc:  # noqa: BLE001 - a size that does not fit becomes a row
        return Record(status="oom" if backend.is_oom(exc) else "error", workload=workload,
                      metrics={"simulated_devices": simulated},
                      error=f"{type(exc).__name__}: {exc}"[:4000], **context)
    stats = timing.stats()
    moved = elements * itemsize
    algbw = moved / stats["step_time_s"]
    metrics = {**stats, "size_bytes": moved, "algbw_bytes_per_sec": algbw,
               "busbw_bytes_per_sec": bus_bandwidth(collective, algbw, devices),
               "bus_factor": BUS_FACTORS[collective](devices),
               "simulated_devices": simulated, "final_loss": timing.final_loss}
    if op.get("implementation"):
        metrics["implementation"] = op["implementation"]
    return Record(status="ok", workload=workload, metrics=metrics, **context)


def run_collectives(devices: Sequence[int], sizes: Sequence[int], collectives: Sequence[str] = COLLECTIVES,
                    dtype: str = "float32", settings: MeasureSettings | None = None,
                    framework: str = backends.DEFAULT) -> list[Record]:
    """Every collective at every size over every device count, in this process."""
    return [measure_collective(c, n, s, dtype, settings, framework)
            for n in devices for c in collectives for s in sizes]
