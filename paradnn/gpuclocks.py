"""What held a GPU's clocks down during a timed window, from NVML's own counters.

A GPU at its board power limit lowers its clocks, and its GEMMs slow with them; the vendor's
peak assumes the boost clock. On an H200 (700 W limit, 2026-11-29) the compute-bound bfloat16
FC drew 693 W on average over its timed calls, its step times rose from 37.7 to 45.0 ms within
the run, and it reached 63% of the spec peak, while a 3-step profile of the same FC at half the
batch ran its GEMMs at 813 TFLOP/s (82% of the spec). This meter tells such a run (the board at
its limit: the platform's sustained figure) from a software shortfall:

* ``gpu_power_limited_fraction``, ``gpu_thermal_limited_fraction``: the share of the window's
  wall time during which the clocks were held below the requested ones by the power limit, or
  by temperature: NVML's cumulative violation counters (``nvmlDeviceGetViolationStatus`` with
  ``NVML_PERF_POLICY_POWER`` / ``NVML_PERF_POLICY_THERMAL``, ns) read at both ends of the
  window, over NVML's own reference clock (us) between the reads; the most of the run's GPUs.
* ``gpu_sm_clock_mhz``: the SM clock at the window's end (``nvmlDeviceGetClockInfo``, the lowest
  of the run's GPUs); ``gpu_max_sm_clock_mhz``: its maximum (``nvmlDeviceGetMaxClockInfo``).
* ``power_limit_w``: the enforced board power limits (``nvmlDeviceGetEnforcedPowerLimit``, mW),
  summed over the run's GPUs as ``power_w`` is.
* ``gpu_clocks_note``: which readings were taken, or why none was (no NVIDIA GPU, no
  nvidia-ml-py, a call the driver does not support).

Every reading is null where NVML cannot give it; nothing is estimated.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from paradnn import hostutil

#: The window's metrics (docs/metrics.md, "What held a GPU's clocks down"), null off NVIDIA GPUs.
METRICS: tuple[str, ...] = ("gpu_power_limited_fraction", "gpu_thermal_limited_fraction",
                            "gpu_sm_clock_mhz", "gpu_max_sm_clock_mhz", "power_limit_w")
#: Metric -> the NVML performance policy whose violation counter it reads (pynvml's constants:
#: NVML_PERF_POLICY_POWER = 0, NVML_PERF_POLICY_THERMAL = 1).
POLICIES: dict[str, int] = {"gpu_power_limited_fraction": 0, "gpu_thermal_limited_fraction": 1}
#: pynvml's NVML_CLOCK_SM.
CLOCK_SM = 1
#: Share of the timed window from which clocks held down earn a record the ``clocks_limited``
#: note (paradnn.record): a moment at the limit is usual under load; a tenth of the window
#: changes the clocks the steps ran at.
LIMITED_SHARE = 0.1


def _empty(note: str) -> dict[str, Any]:
    return {**dict.fromkeys(METRICS), "gpu_clocks_note": note}


class ClockWindow:
    """The clock meters of one window on the NVIDIA GPUs ``devices`` (JAX or framework devices
    with an ``id``): ``start()`` and ``stop()`` around the timed calls, then :meth:`metrics`.
    ``nvml`` is the ``pynvml`` module (imported when None). On any other backend, or without
    NVML, every metric is null and ``gpu_clocks_note`` says why."""

    def __init__(self, backend: str, devices: Sequence[Any], nvml: Any = None) -> None:
        self.nvml, self.handles, self.why = None, [], ""
        self._start: dict[str, list[Any]] = {}
        self._result: dict[str, Any] | None = None
        if backend not in ("gpu", "cuda"):
            self.why = f"{backend} backend: clocks are read from NVML on NVIDIA GPUs only"
            return
        if nvml is None:
            try:
                import pynvml as nvml  # nvidia-ml-py
            except ImportError:
                self.why = "GPU clocks need nvidia-ml-py (pip install nvidia-ml-py): not installed"
                return
        try:
            nvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError subclasses per cause; any one means no NVML
            self.why = f"NVML could not start: {type(exc).__name__}: {exc}"
            return
        try:
            self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in hostutil.nvml_indices(devices)]
        except Exception as exc:  # noqa: BLE001 - a device NVML does not know: no readings
            nvml.nvmlShutdown()
            self.why = f"NVML has no handle for the run's GPUs: {type(exc).__name__}: {exc}"
            return
        self.nvml = nvml

    def _violations(self) -> dict[str, list[Any]]:
        """Per policy metric, each device's ``(reference time in us, violation time in ns)``,
        or None for a device whose driver does not give it."""
        out: dict[str, list[Any]] = {}
        for metric, policy in POLICIES.items():
            out[metric] = []
            for h in self.handles:
                try:
                    v = self.nvml.nvmlDeviceGetViolationStatus(h, policy)
                    out[metric].append((int(v.referenceTime), int(v.violationTime)))
                except Exception:  # noqa: BLE001 - NVMLError (not supported): no reading
                    out[metric].append(None)
        return out

    def start(self) -> None:
        if self.nvml is not None:
            self._start = self._violations()

    def stop(self) -> None:
        """Read the counters again and the clocks and limits now, then release NVML."""
        if self.nvml is None:
            self._result = _empty(self.why)
            return
        nvml, end = self.nvml, self._violations()
        out: dict[str, Any] = {}
        missing: list[str] = []
        for metric in POLICIES:
            shares = []
            for a, b in zip(self._start.get(metric, []), end[metric]):
                if a is not None and b is not None and b[0] > a[0]:
                    shares.append((b[1] - a[1]) / ((b[0] - a[0]) * 1e3))  # ns over us
            complete = len(shares) == len(self.handles) and shares
            out[metric] = max(shares) if complete else None
            if not complete:
                missing.append("violation status")

        def each(call: Any, *args: Any) -> list[Any] | None:
            try:
                return [call(h, *args) for h in self.handles]
            except Exception:  # noqa: BLE001 - NVMLError (not supported): no reading
                missing.append(call.__name__)
                return None

        clocks = each(nvml.nvmlDeviceGetClockInfo, CLOCK_SM)
        maxima = each(nvml.nvmlDeviceGetMaxClockInfo, CLOCK_SM)
        limits = each(nvml.nvmlDeviceGetEnforcedPowerLimit)
        out["gpu_sm_clock_mhz"] = float(min(clocks)) if clocks else None
        out["gpu_max_sm_clock_mhz"] = float(min(maxima)) if maxima else None
        out["power_limit_w"] = sum(limits) * 1e-3 if limits else None
        nvml.nvmlShutdown()
        self.nvml = None
        note = f"NVML on {len(self.handles)} GPU(s): violation counters (power, thermal), SM clock, power limit"
        if missing:
            note += "; not read (unsupported, or NVML's clock did not advance): " + ", ".join(dict.fromkeys(missing))
        self._result = {**out, "gpu_clocks_note": note}

    def metrics(self) -> dict[str, Any]:
        """:data:`METRICS` and ``gpu_clocks_note`` of the closed window."""
        if self._result is None:
            raise RuntimeError("gpuclocks.ClockWindow.metrics() before stop()")
        return dict(self._result)


def held_down(metrics: Mapping[str, Any]) -> bool:
    """Whether a record's GPU clocks were held down by its power limit or temperature for at
    least :data:`LIMITED_SHARE` of the timed window."""
    shares = (metrics.get(m) for m in POLICIES)
    return any(x is not None and x >= LIMITED_SHARE for x in shares)


def clocks_text(metrics: Mapping[str, Any]) -> str:
    """What held the clocks down, in words, from a record's metrics or a row (missing and NaN
    values left out), e.g. ``power limit 85% of the window, SM clock 1,590 of 1,980 MHz,
    limit 700 W``."""
    def value(name: str) -> float | None:
        v = metrics.get(name)
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    parts = [f"{label} {share:.0%} of the window" for label, share in (
        ("power limit", value("gpu_power_limited_fraction")), ("temperature", value("gpu_thermal_limited_fraction")))
        if share]
    clock, top, limit = value("gpu_sm_clock_mhz"), value("gpu_max_sm_clock_mhz"), value("power_limit_w")
    if clock is not None:
        parts.append(f"SM clock {clock:,.0f}" + (f" of {top:,.0f} MHz" if top is not None else " MHz"))
    if limit is not None:
        parts.append(f"limit {limit:,.0f} W")
    return ", ".join(parts) or "no clock readings"
