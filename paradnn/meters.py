"""One window around the timed phase that reads every meter: energy (``paradnn.energy``), host
CPU utilization and contention (other processes' CPU cores, other processes on the GPU), the
process's page faults and kernel time, how its memory is backed (``paradnn.hostmem``), what held
a GPU's clocks down (``paradnn.gpuclocks``) and, when asked, device busy time
(``paradnn.hostutil``).

>>> with window("cpu", program.devices) as w:  # doctest: +SKIP
...     <timed calls, each synchronized>
>>> w.metrics(steps=timed_steps, examples=timed_steps * batch)  # doctest: +SKIP

Open the window after the last untimed call is ready on the device and let it close after the
last timed call is ready: the meters are cumulative counters read at both ends.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Sequence

from paradnn import energy, gpuclocks, hostmem, hostutil


#: Metrics of a window that are null, with the reason in ``energy_note``/``device_busy_note``,
#: where the host has no readable counter (energy), no /proc/stat (host utilization) or no
#: accelerator trace (device busy fraction): a check that every metric is set leaves these out.
MAY_BE_NULL: frozenset[str] = frozenset({
    "energy_per_step_j", "energy_per_example_j", "power_w", "examples_per_joule",
    "host_cpu_utilization", "host_cpu_utilization_per_core", "device_busy_fraction",
    "host_other_busy_cores", "device_other_processes", "page_faults_per_step", "process_system_cpu_s",
    *gpuclocks.METRICS,
})


class Window:
    """The meters of one window; :meth:`metrics` once it closed."""

    def __init__(self, backend: str, devices: Sequence[Any], powercap_root: Path, proc_stat: Path,
                 min_window_s: float) -> None:
        self.backend = backend
        self.energy = energy.EnergyWindow(backend, devices, powercap_root, min_window_s=min_window_s)
        self.host = hostutil.HostWindow(proc_stat)
        self.clocks = gpuclocks.ClockWindow(backend, devices)
        self.energy_reading: energy.EnergyReading | None = None
        self.host_reading: hostutil.HostReading | None = None
        self.busy: tuple[float | None, str] = (None, "")
        self.seconds = 0.0
        self.devices = devices
        #: How the process's malloc'd memory is backed (paradnn.hostmem.STATES).
        self.huge_pages = hostmem.huge_pages()
        #: Most other processes seen on the run's GPUs at the window's ends (None: not known).
        self.other_processes: int | None = None

    def metrics(self, steps: int, examples: int) -> dict[str, Any]:
        """Energy, host and device metrics of the closed window, for ``steps`` training steps
        that processed ``examples`` examples in it (``paradnn.record.METRICS`` names them)."""
        if self.energy_reading is None or self.host_reading is None:
            raise RuntimeError("meters.Window.metrics() before the window closed")
        out = self.energy_reading.metrics(steps, examples)
        out.update(self.host_reading.metrics())
        faults = self.host_reading.minor_faults
        out["page_faults_per_step"] = faults / steps if faults is not None and steps > 0 else None
        out["host_huge_pages"] = self.huge_pages
        out["device_busy_fraction"], out["device_busy_note"] = self.busy
        out["meter_window_s"] = self.seconds
        out["device_other_processes"] = self.other_processes
        out.update(self.clocks.metrics())
        out["contended"] = self.contended
        return out

    @property
    def contended(self) -> bool:
        """Whether other work shared the platform during the window: other processes' CPU cores
        above :func:`paradnn.hostutil.max_other_cores` where the run computes on the CPU, another
        process on the run's GPUs where NVML tells. (A busy host slows an accelerator's run only
        through its host work, which the step time already shows.)"""
        if self.backend == "cpu":
            other = self.host_reading.other_busy_cores if self.host_reading is not None else None
            return other is not None and other > hostutil.max_other_cores()
        return bool(self.other_processes)


@contextlib.contextmanager
def window(backend: str, devices: Sequence[Any] = (),
           trace: Callable[[str], ContextManager[Any]] | None = None,
           powercap_root: Path = energy.POWERCAP_ROOT, proc_stat: Path = hostutil.PROC_STAT,
           min_window_s: float = energy.MIN_WINDOW_S) -> Iterator[Window]:
    """Meter the enclosed (synchronized) phase on ``backend`` (the device platform: ``cpu``,
    ``gpu``, ``tpu``) and the framework's ``devices`` (``Program.devices``). ``trace`` (the
    framework's ``Backend.profiler_trace``: directory -> context writing a TensorBoard trace)
    also traces the phase for ``device_busy_fraction`` (GPU/TPU only; the profiler slows the
    phase down, so use it on a separate pass, not on the one whose time is recorded)."""
    w = Window(backend, devices, Path(powercap_root), Path(proc_stat), min_window_s)
    traced = trace is not None and backend != "cpu"
    with tempfile.TemporaryDirectory(prefix="paradnn-busy-") as tmp:
        with contextlib.ExitStack() as profiler:
            if traced:
                profiler.enter_context(trace(tmp))
            gpu = backend in ("gpu", "cuda")
            before = hostutil.other_device_processes(devices) if gpu else None
            w.host.start()
            w.energy.start()
            w.clocks.start()
            try:
                yield w
            finally:
                w.clocks.stop()
                w.energy_reading = w.energy.stop()
                w.host_reading = w.host.stop()
                after = hostutil.other_device_processes(devices) if gpu else None
                known = [n for n in (before, after) if n is not None]
                w.other_processes = max(known) if known else None
                w.seconds = w.energy_reading.seconds  # one clock for power and busy fraction
        # The profiler has written its trace once its context closed.
        if traced:
            w.busy = hostutil.device_busy_fraction(tmp, w.seconds)
        elif backend == "cpu":
            w.busy = (None, "CPU backend: no device kernels to trace (see host_cpu_utilization)")
        else:
            w.busy = (None, "not traced: pass trace=Backend.profiler_trace on a separate pass (the profiler slows the timed phase)")
