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

from typing import Any, Callable, Sequence

import numpy as np

from paradnn import frameworks
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

#: Most devices one CPU host may simulate. JAX starts 256 forced host devices in about 3.6 s
#: and 260 MB (measured with jax 0.12 on a 2-core host: 8 devices 3.0 s and 170 MB, 1024
#: devices 5.4 s and 470 MB, growing linearly), and every collective step then runs one thread
#: per device on the host's cores; 65,536 grew past 4 GB before anything was measured.
MAX_SIMULATED_DEVICES = 256

#: Default sizes (a FROM..TO range for :func:`parse_sizes`) and timing settings of the
#: collectives: on accelerators NCCL-tests' range, 1 KB to 1 GB (21 sizes); on one CPU host
#: whose devices are simulated, 1 KB to 1 MB and a short budget, so that the four collectives
#: over 8 simulated devices finish in about a minute on a 2-core host (the simulated numbers
#: are not a multi-device measurement anyway). Keys of the settings are MeasureSettings fields.
DEFAULT_SIZES = {"accelerator": "1KB..1GB", "cpu": "1KB..1MB"}
DEFAULT_SETTINGS: dict[str, dict[str, Any]] = {
    "accelerator": {},
    "cpu": {"time_budget_s": 0.3, "warmup_s": 0.05, "min_calls": 6, "max_calls": 20},
}
#: Copies of the per-device buffer one collective holds on each device (input, output and the
#: broadcast's masked input): the memory check before compiling.
BUFFER_COPIES = 3


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


def simulated_devices(framework: str = frameworks.DEFAULT) -> bool:
    """Whether this process's devices of ``framework`` are simulated on one CPU host (JAX:
    forced host-platform devices); False for a framework that cannot simulate devices."""
    simulated = getattr(frameworks.get(framework), "simulated_devices", None)
    return bool(simulated()) if simulated is not None else False


def collective_elements(collective: str, devices: int, size_bytes: int, dtype: str,
                        device_count: int) -> int:
    """The elements of ``dtype`` one collective of ``size_bytes`` moves per device over
    ``devices`` of ``device_count`` devices (rounded down to whole elements, divisible by
    ``devices`` where the collective splits the buffer): every check of a job that needs no
    measurement. SpecError naming the collective, the device count or the size, and what is
    allowed."""
    if collective not in BUS_FACTORS:
        raise SpecError("collective", collective, "one of " + ", ".join(COLLECTIVES))
    if not 2 <= devices <= device_count:
        raise SpecError("devices", devices, f"an integer from 2 to {device_count} (devices of this process)")
    itemsize = np.dtype(dtype).itemsize
    unit = devices if collective in ("all_gather", "reduce_scatter") else 1
    elements = size_bytes // itemsize // unit * unit
    if elements < 1:
        split = ", at least one per device" if unit > 1 else ""
        raise SpecError("size", size_bytes, f"at least {unit * itemsize} B for {collective} over "
                        f"{devices} devices ({dtype}: {itemsize} B per element{split})")
    return elements


def measure_collective(collective: str, devices: int, size_bytes: int, dtype: str = "float32",
                       settings: MeasureSettings | None = None, framework: str = frameworks.DEFAULT) -> Record:
    """Time one collective of ``size_bytes`` (NCCL-tests convention, see the module) over the
    first ``devices`` devices of ``framework``; return its row (``family = "collective"``). The
    size is rounded down to whole elements (divisible by ``devices`` where the collective splits
    the buffer); ``size_bytes`` in the row is the size actually moved."""
    from paradnn.runner import context

    if collective not in BUS_FACTORS:
        raise SpecError("collective", collective, "one of " + ", ".join(COLLECTIVES))
    backend = frameworks.get(framework)
    program = frameworks.capability(framework, "collective_program", "run collectives")
    platform, software = context(framework)
    elements = collective_elements(collective, devices, size_bytes, dtype, platform["device_count"])
    settings = settings or MeasureSettings()
    itemsize = np.dtype(dtype).itemsize
    # Per-device input elements: the all-gather's input is 1/n of its output.
    per_device_in = elements // devices if collective == "all_gather" else elements
    workload = {"family": COLLECTIVE_FAMILY, "collective": collective,
                "size_bytes": elements * itemsize, "dtype": dtype, "devices": devices}
    context = {"platform": platform, "software": software, "settings": settings.to_dict(framework),
               "tags": {"kind": "collective"}}
    simulated = simulated_devices(framework)
    # Simulated devices share the host's memory: all their buffers must fit in it together.
    need = BUFFER_COPIES * elements * itemsize * (devices if simulated else 1)
    memory = backend.device_memory_bytes()
    if memory is not None and need > memory:
        where = f"the host's memory shared by {devices} simulated devices" if simulated else "device memory"
        return Record(status="oom", workload=workload,
                      metrics={"simulated_devices": simulated, "oom_predicted": True},
                      error=f"predicted before compiling: {BUFFER_COPIES} buffers of "
                      f"{elements * itemsize} B{f' x {devices} devices' if simulated else ''} = "
                      f"{need} B > {where} {memory} B", **context)
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


def check_collectives(devices: Sequence[int], sizes: Sequence[int],
                      collectives: Sequence[str] = COLLECTIVES, dtype: str = "float32",
                      framework: str = frameworks.DEFAULT) -> list[tuple[str, int, int]]:
    """The jobs (collective, device count, size in B) of :func:`run_collectives`, each checked by
    :func:`collective_elements` against the devices ``framework`` sees in this process, before
    any is measured: the first one that cannot run is its SpecError."""
    from paradnn.runner import context

    jobs = [(c, n, s) for n in devices for c in collectives for s in sizes]
    count = context(framework)[0]["device_count"] if jobs else 0
    for c, n, s in jobs:
        collective_elements(c, n, s, dtype, count)
    return jobs


def run_collectives(devices: Sequence[int], sizes: Sequence[int], collectives: Sequence[str] = COLLECTIVES,
                    dtype: str = "float32", settings: MeasureSettings | None = None,
                    framework: str = frameworks.DEFAULT,
                    progress: Callable[[int, int, Record], None] | None = None) -> list[Record]:
    """Every collective at every size over every device count, in this process; ``progress``
    is called after each with (done, total, its record). Every job is checked
    (:func:`collective_elements`) before the first is measured: a size one collective cannot
    split over a device count is a SpecError before anything runs, never after minutes of
    measurements that are then lost."""
    jobs = check_collectives(devices, sizes, collectives, dtype, framework)
    records = []
    for i, (c, n, s) in enumerate(jobs, 1):
        records.append(measure_collective(c, n, s, dtype, settings, framework))
        if progress is not None:
            progress(i, len(jobs), records[-1])
    return records
