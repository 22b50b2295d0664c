"""Energy over a timed window, from the hardware's own counters; never a made-up number.

Sources, first readable one wins:

* ``nvml`` (NVIDIA GPUs): the total-energy counter of NVML (``nvidia-ml-py``:
  ``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded, Volta and newer), summed
  over the devices of the run; ``nvml-power`` samples the board power
  (``nvmlDeviceGetPowerUsage``, mW) every :data:`SAMPLE_S` seconds and integrates it where the
  counter is not supported.
* ``rapl`` (CPUs): the Intel RAPL package counters under ``/sys/class/powercap``
  (``intel-rapl:<n>/energy_uj``, uJ, one zone per CPU package), summed over packages; a counter
  that wrapped (passed ``max_energy_range_uj``) during the window is unwrapped once. Subzones
  (core, uncore, dram) are not added: ``core``/``uncore`` are part of the package.
* otherwise ``unavailable``, with the reason (no counter, permission denied: many kernels make
  ``energy_uj`` root-only, TPUs expose no counter to JAX, ...).

The counters are cumulative, so a window costs two reads; the caller opens the window after
the device finished its previous work and closes it once the timed outputs are ready. Windows
shorter than :data:`MIN_WINDOW_S` are refused: NVML's counter and RAPL update every few to tens
of milliseconds, and a short window is mostly quantization.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from paradnn import hostutil

#: Shortest window whose energy is reported (s).
MIN_WINDOW_S = 1.0
#: Power sampling interval of the ``nvml-power`` fallback (s).
SAMPLE_S = 0.05
POWERCAP_ROOT = Path("/sys/class/powercap")
UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class EnergyReading:
    """Energy of one window: ``joules`` (J, None when unavailable), ``seconds`` (s, wall time of
    the window), ``source`` (nvml, nvml-power, rapl or unavailable) and ``note`` (which counters,
    or why none)."""

    joules: float | None
    seconds: float
    source: str
    note: str

    def metrics(self, steps: int, examples: int) -> dict[str, Any]:
        """``energy_per_step_j``, ``energy_per_example_j``, ``power_w``, ``examples_per_joule``
        (None when unavailable), ``energy_source`` and ``energy_note``."""
        j = self.joules
        ok = j is not None and j > 0 and steps > 0 and examples > 0 and self.seconds > 0
        return {
            "energy_per_step_j": j / steps if ok else None,
            "energy_per_example_j": j / examples if ok else None,
            "power_w": j / self.seconds if ok else None,
            "examples_per_joule": examples / j if ok else None,
            "energy_source": self.source if ok else UNAVAILABLE,
            "energy_note": self.note if ok or j is None else f"{self.note}; counter did not advance",
        }


class _Counter:
    """A cumulative energy counter: ``read()`` returns its raw value (J); ``delta(a, b)`` the
    energy between two reads (J); ``close()`` releases it."""

    source = UNAVAILABLE
    note = ""

    def read(self) -> Any:
        raise NotImplementedError

    def delta(self, start: Any, end: Any) -> float:
        raise NotImplementedError

    def close(self) -> None:
        pass


class RaplCounter(_Counter):
    """The package zones of a powercap directory (``root``: ``/sys/class/powercap`` or a test's
    copy of its layout). Raises ``PermissionError``/``OSError`` from the constructor if a
    counter cannot be read, ``LookupError`` if there is no package zone."""

    source = "rapl"

    def __init__(self, root: Path = POWERCAP_ROOT) -> None:
        root = Path(root)
        # Top-level zones are "intel-rapl:<n>" (one colon); "intel-rapl:<n>:<m>" are subzones.
        zones = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
        self.zones = [z for z in zones if _read_text(z / "name", "package").startswith("package")]
        if not self.zones:
            raise LookupError(f"no RAPL package zone under {root}")
        self.ranges = [int((z / "max_energy_range_uj").read_text()) for z in self.zones]
        self.read()  # raises PermissionError where the kernel keeps energy_uj root-only
        names = ", ".join(f"{z.name} ({_read_text(z / 'name', '?')})" for z in self.zones)
        self.note = f"RAPL package counters {names} under {root}, summed"

    def read(self) -> list[int]:
        return [int((z / "energy_uj").read_text()) for z in self.zones]

    def delta(self, start: list[int], end: list[int]) -> float:
        total = 0
        for a, b, wrap in zip(start, end, self.ranges):
            # The counter restarts from 0 after max_energy_range_uj; one wrap per window is the
            # most a window of minutes can see (the range is hundreds of kJ per package).
            total += b - a if b >= a else b + wrap - a
        return total * 1e-6


def _read_text(path: Path, default: str) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default


class NvmlCounter(_Counter):
    """NVML's total-energy counter (mJ) summed over ``devices`` (JAX devices); ``nvml`` is the
    ``pynvml`` module. Raises ``nvml.NVMLError`` if the counter is not supported."""

    source = "nvml"

    def __init__(self, nvml: Any, devices: Sequence[Any]) -> None:
        self.nvml = nvml
        self.indices = hostutil.nvml_indices(devices)
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
        self.read()
        self.note = f"NVML total energy counter of GPU {', '.join(map(str, self.indices))}, summed"

    def read(self) -> list[int]:
        return [int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self.handles]

    def delta(self, start: list[int], end: list[int]) -> float:
        return sum(b - a for a, b in zip(start, end)) * 1e-3

    def close(self) -> None:
        self.nvml.nvmlShutdown()


class NvmlPowerSampler(_Counter):
    """Board power sampled every :data:`SAMPLE_S` s on a thread and integrated (trapezoids):
    the fallback for GPUs without the energy counter. ``read()`` returns the integral so far."""

    source = "nvml-power"

    def __init__(self, nvml: Any, devices: Sequence[Any], interval_s: float = SAMPLE_S) -> None:
        self.nvml = nvml
        self.indices = hostutil.nvml_indices(devices)
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
        self.interval_s = interval_s
        self.joules = 0.0
        self._last = (time.perf_counter(), self._watts())
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paradnn-power", daemon=True)
        self._thread.start()
        self.note = (f"NVML board power of GPU {', '.join(map(str, self.indices))} sampled every "
                     f"{interval_s * 1e3:.0f} ms and integrated (no energy counter on this GPU)")

    def _watts(self) -> float:
        return sum(self.nvml.nvmlDeviceGetPowerUsage(h) for h in self.handles) * 1e-3

    def _sample(self) -> None:
        now, watts = time.perf_counter(), self._watts()
        with self._lock:
            t0, w0 = self._last
            self.joules += (now - t0) * (w0 + watts) / 2
            self._last = (now, watts)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def read(self) -> float:
        self._sample()
        return self.joules

    def delta(self, start: float, end: float) -> float:
        return end - start

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.nvml.nvmlShutdown()


def open_counter(backend: str, devices: Sequence[Any] = (), powercap_root: Path = POWERCAP_ROOT,
                 nvml: Any = None) -> tuple[_Counter | None, str]:
    """The energy counter for a run on ``backend`` (``cpu``, ``gpu``/``cuda``, ``tpu``) and its
    JAX ``devices``: ``(counter, note)``, or ``(None, why not)``. ``nvml`` is the ``pynvml``
    module (imported when None)."""
    if backend == "tpu":
        return None, "TPUs expose no energy or power counter to JAX"
    if backend in ("gpu", "cuda"):
        if nvml is None:
            try:
                import pynvml as nvml  # nvidia-ml-py
            except ImportError:
                return None, "GPU energy needs nvidia-ml-py (pip install nvidia-ml-py): not installed"
        try:
            nvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError subclasses per cause; any one means no counter
            return None, f"NVML could not start: {type(exc).__name__}: {exc}"
        try:
            return NvmlCounter(nvml, devices), ""
        except nvml.NVMLError:
            pass  # no energy counter (before Volta): sample the power instead
        try:
            return NvmlPowerSampler(nvml, devices), ""
        except nvml.NVMLError as exc:
            nvml.nvmlShutdown()
            return None, f"NVML has neither energy nor power readings: {type(exc).__name__}: {exc}"
    if backend == "cpu":
        try:
            return RaplCounter(powercap_root), ""
        except PermissionError as exc:
            return None, f"RAPL counter not readable ({exc.filename}: permission denied; root-only on this kernel)"
        except (LookupError, OSError, ValueError) as exc:
            return None, f"no readable RAPL counter: {exc}"
    return None, f"no energy counter known for backend {backend!r}"


class EnergyWindow:
    """Energy over one window: ``start()`` after the device is idle, ``stop()`` once the timed
    outputs are ready; ``reading`` is then the :class:`EnergyReading`."""

    def __init__(self, backend: str, devices: Sequence[Any] = (), powercap_root: Path = POWERCAP_ROOT,
                 nvml: Any = None, min_window_s: float = MIN_WINDOW_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.counter, self.why = open_counter(backend, devices, powercap_root, nvml)
        self.min_window_s = min_window_s
        self.clock = clock
        self.reading: EnergyReading | None = None
        self._start: Any = None
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = self.clock()
        if self.counter is not None:
            self._start = self.counter.read()

    def stop(self) -> EnergyReading:
        end = self.counter.read() if self.counter is not None else None
        seconds = self.clock() - self._t0
        counter, self.counter = self.counter, None
        if counter is None:
            self.reading = EnergyReading(None, seconds, UNAVAILABLE, self.why)
            return self.reading
        counter.close()
        if seconds < self.min_window_s:
            self.reading = EnergyReading(
                None, seconds, UNAVAILABLE,
                f"window of {seconds:.3f} s shorter than the {self.min_window_s:g} s that {counter.source} "
                "needs (counter updates are too coarse); raise time_budget_s")
        else:
            self.reading = EnergyReading(counter.delta(self._start, end), seconds, counter.source, counter.note)
        return self.reading
