"""The largest power-of-two batch of a workload that fits on the device.

The study runs its real models "at the largest batch supported on the platform". Finding it by
running every batch would be slow and, on an accelerator, a real out-of-memory can leave the
device in a poor state; so the search is on compiled programs first:

1. for ``start, 2*start, 4*start, ... <= limit``: the weights, optimizer state and gradients
   alone (from shapes) must fit, then the training program the runner would execute is compiled
   ahead of time and its memory analysis (peak bytes, per device) compared with the limit;
   the search stops at the first batch that does not fit (memory grows with the batch);
2. the largest batch that fitted is then run for real through
   :func:`paradnn.runner.run_workload`; if the run reports ``oom`` (the memory analysis can
   under-estimate what the runtime allocates), the next smaller power of two is tried.

>>> from paradnn import Real
>>> max_batch(Real("resnet50"), dtype="bfloat16")["batch"]  # doctest: +SKIP
256
"""

from __future__ import annotations

from typing import Any

import numpy as np

from paradnn import frameworks, sizes
from paradnn.errors import ParadnnError, SpecError
from paradnn.measure import MIN_TIMED_CALLS, MeasureSettings
from paradnn.workload import ModelSpec, Workload

# A short, cheap trial: it only has to show that the batch runs.
TRIAL_SETTINGS = MeasureSettings(steps_per_call=2, warmup_calls=1, warmup_s=0.0, min_calls=MIN_TIMED_CALLS,
                                 max_calls=MIN_TIMED_CALLS, ci_target=0.5, time_budget_s=1.0)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise SpecError(name, value, "a positive integer")
    return int(value)


def probe_batch(workload: Workload, memory_limit_bytes: int, settings: MeasureSettings = TRIAL_SETTINGS) -> dict[str, Any]:
    """Whether ``workload`` fits in ``memory_limit_bytes`` (B, per device), without running it.

    Returns ``{"batch", "fits", "floor_bytes", "peak_bytes", "compile_s", "reason"}``: the
    resident floor (weights + optimizer state, B) from shapes, and the compiled
    program's peak (B; None when the floor already fails or compilation ran out of memory).
    """
    # Cheapest check first: the closed-form weights + optimizer state, before any trace.
    too_big = sizes.predicted_oom(workload, memory_limit_bytes)
    if too_big is not None:
        return {"batch": workload.batch, "fits": False,
                "floor_bytes": sizes.floor_bytes(workload)["total_bytes"], "peak_bytes": None,
                "compile_s": None, "reason": too_big["error"]}
    backend = frameworks.get(workload.framework)
    out: dict[str, Any] = {"batch": workload.batch, "fits": False, "floor_bytes": None,
                           "peak_bytes": None, "compile_s": None, "reason": ""}
    try:
        # The runner's own compile (one pipeline): what fits here is what runs there.
        program = backend.compile(workload, settings)
    except Exception as exc:  # noqa: BLE001 - a compile-time OOM is an answer; anything else is not
        if not backend.is_oom(exc):
            raise
        out["reason"] = f"compilation ran out of memory: {type(exc).__name__}: {str(exc)[:200]}"
        return out
    floor = out["floor_bytes"] = program.state_bytes
    out["compile_s"] = program.metrics.get("compile_s")
    if floor > memory_limit_bytes:
        out["reason"] = f"weights+optimizer state {floor} B > limit {memory_limit_bytes} B"
        return out
    peak = program.metrics.get("memory_peak_bytes")
    if peak is None:  # a framework without memory analysis: only the trial run can tell
        out["fits"], out["reason"] = True, "no memory analysis in this framework; fit assumed until the trial run"
        return out
    out["peak_bytes"] = peak
    out["fits"] = peak <= memory_limit_bytes
    out["reason"] = f"compiled peak {peak} B {'<=' if out['fits'] else '>'} limit {memory_limit_bytes} B"
    return out


def max_batch(
    spec: ModelSpec,
    dtype: str = "float32",
    optimizer: str | None = None,
    devices: int = 1,
    memory_limit_bytes: int | None = None,
    start: int = 1,
    limit: int = 65536,
    trial: bool = True,
    settings: MeasureSettings | None = None,
    framework: str = frameworks.DEFAULT,
) -> dict[str, Any]:
    """The largest global batch ``start * 2**k <= limit`` whose training step fits in memory.

    ``memory_limit_bytes`` is the memory of one device in bytes (default: what the device
    reports, or its spec-sheet memory; on a CPU the host's memory). ``start`` must be
    a multiple of ``devices`` (the batch is split over them); ``framework`` builds and compiles it. With ``trial`` the chosen batch is
    also run through :func:`paradnn.runner.run_workload` (``settings`` or a short default).

    Returns a dict: ``batch`` (examples, None when not even ``start`` fits), ``memory_limit_bytes``
    and ``limit_source`` ("argument" or "device"), ``probes`` (one dict per compiled batch, see
    :func:`probe_batch`), ``trial_status`` (the trial record's status, None without a trial),
    ``trial_examples_per_sec`` and ``trial_error``, and the workload fields (family, model,
    dtype, optimizer, devices).
    """
    start = _positive_int("start", start)
    limit = _positive_int("limit", limit)
    if limit < start:
        raise SpecError("limit", limit, f"an integer >= start={start}")
    if start % _positive_int("devices", devices):
        raise SpecError("start", start, f"a multiple of devices={devices}")
    if memory_limit_bytes is None:
        memory_limit_bytes = frameworks.get(framework).device_memory_bytes()
        source = "device"
        if memory_limit_bytes is None:
            raise ParadnnError(
                "memory_limit_bytes: this device reports no memory size (a CPU?); pass one "
                "explicitly (paradnn maxbatch --memory-limit BYTES)")
    else:
        memory_limit_bytes = _positive_int("memory_limit_bytes", memory_limit_bytes)
        source = "argument"
    settings = settings or TRIAL_SETTINGS

    probes: list[dict[str, Any]] = []
    batch = start
    best: int | None = None
    while batch <= limit:
        # Workload validates spec/dtype/optimizer/devices (SpecError on bad input).
        probe = probe_batch(Workload(spec, batch, dtype, optimizer, devices, framework), memory_limit_bytes, settings)
        probes.append(probe)
        if not probe["fits"]:
            break
        best, batch = batch, batch * 2

    workload = Workload(spec, start, dtype, optimizer, devices, framework)
    result: dict[str, Any] = {
        **{k: v for k, v in workload.to_dict().items() if k != "batch"},
        "batch": best,
        "memory_limit_bytes": memory_limit_bytes,
        "limit_source": source,
        "probes": probes,
        "trial_status": None,
        "trial_examples_per_sec": None,
        "trial_error": None,
    }
    if best is None or not trial:
        return result

    from paradnn.runner import run_workload

    while best is not None:
        record = run_workload(Workload(spec, best, dtype, optimizer, devices, framework), settings, memory_limit_bytes)
        result.update(trial_status=record.status, trial_error=record.error,
                      trial_examples_per_sec=record.metrics.get("examples_per_sec"))
        if record.status != "oom":
            break
        best = best // 2 if best // 2 >= start else None
    result["batch"] = best
    return result
