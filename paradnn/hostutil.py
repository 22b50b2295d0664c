"""Host and device utilization over a timed window (TBD's GPU and CPU utilization).

* Host: per-core CPU utilization from ``/proc/stat`` (Linux): for each core, the share of the
  window's clock ticks that were neither idle nor waiting for I/O; all processes of the host
  count, so a busy neighbour shows. ``process_cpu_s`` is this process's own CPU time (user +
  system, all its threads), which on a CPU backend is XLA's compute; ``process_system_cpu_s``
  the kernel's share of it, and the window's minor page faults give ``page_faults_per_step``:
  memory the step gets fresh from the kernel each time (:mod:`paradnn.hostmem`). All three
  come from one ``getrusage`` reading at each end of the window.
* Contention: ``host_other_busy_cores`` is what the host's busy ticks leave after this
  process's own CPU time (the cores other processes kept busy during the window), and on
  NVIDIA GPUs ``device_other_processes`` counts other processes with compute contexts on the
  run's devices (NVML). A run over :func:`max_other_cores` (or with another process on its GPU)
  is ``contended``: a fact of the run, recorded beside its numbers, not a failure of the config.
* Device: :func:`device_busy_fraction` reads a ``jax.profiler.trace`` directory and returns the
  share of the traced span during which at least one kernel ran on an accelerator (overlapping
  kernels on several streams count once). CPU backends have no device events: unavailable.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paradnn.units import positive_env

PROC_STAT = Path("/proc/stat")

#: A run (or a probe of the peak) is contended when other processes kept more than this many CPU
#: cores busy on average while it was timed: one neighbour spinning on one core of a 2-core host
#: reads about 1.0, a quiet host 0.0-0.1. ``PARADNN_PROBE_MAX_LOAD`` overrides it.
MAX_OTHER_CORES = 0.5
#: The environment variable that overrides :data:`MAX_OTHER_CORES`.
MAX_OTHER_CORES_ENV = "PARADNN_PROBE_MAX_LOAD"


def max_other_cores() -> float:
    """The contention threshold on other processes' CPU use (cores): ``$PARADNN_PROBE_MAX_LOAD``
    or :data:`MAX_OTHER_CORES`; ParadnnError naming the variable for a value that is not a
    positive number."""
    return positive_env(MAX_OTHER_CORES_ENV, MAX_OTHER_CORES, "CPU cores")


def nvml_indices(devices: Sequence[Any]) -> list[int]:
    """NVML indices of JAX GPU devices. NVML numbers every GPU of the host; CUDA (and JAX)
    number the visible ones, so CUDA_VISIBLE_DEVICES (when it lists integers) maps one to the
    other."""
    local = [int(d.id if getattr(d, "local_hardware_id", None) is None else d.local_hardware_id)
             for d in devices]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        ids = [v.strip() for v in visible.split(",")]
        if all(v.isdigit() for v in ids):
            return [int(ids[i]) for i in local]
    return local


def other_device_processes(devices: Sequence[Any], nvml: Any = None) -> int | None:
    """Processes other than this one with a compute context on the NVIDIA GPUs ``devices``
    (JAX or framework devices with an ``id``), from NVML's running-process lists; None where
    NVML is not installed or cannot tell (no GPU, a driver without the call, a container that
    hides other processes' ids)."""
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver, no GPU: NVML cannot tell
        return None
    try:
        pids: set[int] = set()
        for index in nvml_indices(devices):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            pids.update(int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        return len(pids - {os.getpid()})
    except Exception:  # noqa: BLE001 - any NVMLError: not known
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down what failed to start
            pass


def read_proc_stat(path: Path = PROC_STAT) -> dict[str, tuple[int, int]]:
    """Per-core ``(busy, total)`` clock ticks since boot from a ``/proc/stat`` file: keys
    ``cpu0``, ``cpu1``, ... Busy is total minus idle and iowait; guest time is already part of
    user time, so it is not added again."""
    cores: dict[str, tuple[int, int]] = {}
    for line in Path(path).read_text().splitlines():
        name, *fields = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue  # the aggregate "cpu" line and other statistics
        ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
        total = sum(ticks)
        cores[name] = (total - ticks[3] - ticks[4], total)
    return cores


def _usage() -> tuple[float, int | None, float | None]:
    """This process so far, all its threads: (s of CPU time, user + system; minor page faults;
    s of system CPU time). One source for all three (``getrusage``, microsecond resolution) so
    that the kernel's share divides like by like; where it is missing (not Unix) the CPU time
    comes from ``os.times`` and the other two are None."""
    try:
        import resource
    except ImportError:
        t = os.times()
        return t.user + t.system, None, None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt, usage.ru_stime


@dataclass(frozen=True)
class HostReading:
    """Host utilization of one window: ``per_core`` (0-1 per core, in core order, None where
    the core did not tick), ``process_cpu_s`` (s of CPU time of this process), ``note``,
    ``wall_s`` (the window's wall time, s)."""

    per_core: list[float | None] | None
    process_cpu_s: float
    note: str
    wall_s: float = 0.0
    #: Minor page faults of this process in the window (None: not known).
    minor_faults: int | None = None
    #: Of ``process_cpu_s``, s spent in the kernel (page faults among it; None: not known).
    system_cpu_s: float | None = None

    @property
    def other_busy_cores(self) -> float | None:
        """Cores other processes kept busy on average over the window: the host's busy cores
        (the sum of ``per_core``) minus this process's (its CPU time over the wall time), at
        least 0; None without per-core readings or wall time."""
        ticked = [u for u in self.per_core or [] if u is not None]
        if not ticked or not self.wall_s > 0:
            return None
        return max(0.0, sum(ticked) - self.process_cpu_s / self.wall_s)

    def metrics(self) -> dict[str, Any]:
        """``host_cpu_utilization`` (mean over cores, 0-1), ``host_cpu_utilization_per_core``
        (comma-separated, 3 decimals), ``process_cpu_s`` (s), ``host_other_busy_cores``
        (cores)."""
        ticked = [u for u in self.per_core or [] if u is not None]
        return {
            "host_cpu_utilization": sum(ticked) / len(ticked) if ticked else None,
            "host_cpu_utilization_per_core": (",".join("" if u is None else f"{u:.3f}" for u in self.per_core)
                                              if ticked else None),
            "process_cpu_s": self.process_cpu_s,
            "process_system_cpu_s": self.system_cpu_s,
            "host_other_busy_cores": self.other_busy_cores,
        }


class HostWindow:
    """``start()`` and ``stop()`` around the timed phase; ``stop()`` returns the :class:`HostReading`.
    ``proc_stat`` is the statistics file (a test's copy of its layout)."""

    def __init__(self, proc_stat: Path = PROC_STAT) -> None:
        self.proc_stat = Path(proc_stat)
        self._stat0: dict[str, tuple[int, int]] | None = None
        self._usage0: tuple[float, int | None, float | None] = (0.0, None, None)
        self._t0 = 0.0
        self.why = ""

    def _stat(self) -> dict[str, tuple[int, int]] | None:
        try:
            return read_proc_stat(self.proc_stat)
        except (OSError, ValueError) as exc:
            self.why = f"per-core utilization unavailable: {self.proc_stat} not readable ({exc})"
            return None

    def start(self) -> None:
        self._stat0 = self._stat()
        self._usage0 = _usage()
        self._t0 = time.perf_counter()

    def stop(self) -> HostReading:
        (cpu1, faults1, system1), (cpu0, faults0, system0) = _usage(), self._usage0
        stat1 = self._stat()
        wall = time.perf_counter() - self._t0
        cpu = cpu1 - cpu0
        faults = faults1 - faults0 if faults1 is not None and faults0 is not None else None
        system = system1 - system0 if system1 is not None and system0 is not None else None
        if self._stat0 is None or stat1 is None:
            return HostReading(None, cpu, self.why, wall, faults, system)
        per_core: list[float | None] = []
        for name in sorted(self._stat0, key=lambda n: int(n[3:])):
            if name not in stat1:
                per_core.append(None)  # a core went offline during the window
                continue
            busy = stat1[name][0] - self._stat0[name][0]
            total = stat1[name][1] - self._stat0[name][1]
            per_core.append(min(1.0, max(0.0, busy / total)) if total > 0 else None)
        return HostReading(per_core, cpu, f"/proc/stat over the window, {len(per_core)} cores, all processes", wall,
                           faults, system)


def _kernel_threads(events: list[dict[str, Any]], devices: set[Any]) -> set[tuple[Any, Any]]:
    """(pid, tid) of the threads of the accelerator processes that carry kernels: the CUDA
    streams ("Stream #...") on GPUs, else "XLA Ops" (TPUs). Threads such as "XLA Modules" or
    "Steps" span whole programs and would count every gap as busy."""
    threads = {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name", "") for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in devices}
    streams = {k for k, n in threads.items() if n.startswith("Stream")}
    return streams or {k for k, n in threads.items() if n == "XLA Ops"}


def device_busy_fraction(trace_dir: str | Path, elapsed_s: float | None = None) -> tuple[float | None, str]:
    """Share of time an accelerator ran a kernel, from the ``plugins/profile/*/*.trace.json.gz``
    that ``jax.profiler.trace`` writes: the union of kernel intervals (concurrent kernels count
    once) over ``elapsed_s`` (s, the traced window's wall time) or, when None, over the span
    from the first kernel's start to the last one's end. Returns ``(fraction 0-1, note)``, or
    ``(None, why)`` where the trace has no accelerator kernels (CPU backends)."""
    files = sorted(glob.glob(os.path.join(str(trace_dir), "plugins", "profile", "*", "*.trace.json.gz")))
    if not files:
        return None, f"no *.trace.json.gz under {trace_dir}/plugins/profile"
    with gzip.open(files[-1], "rt") as f:
        events = json.load(f).get("traceEvents", [])
    names = {e.get("pid"): e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    devices = {pid for pid, n in names.items() if "/device:" in n and "CPU" not in n.upper()}
    if not devices:
        return None, "the trace has no accelerator device events (CPU backend: host threads only)"
    threads = _kernel_threads(events, devices)
    # Trace times are microseconds.
    spans = sorted((float(e["ts"]) * 1e-6, (float(e["ts"]) + float(e.get("dur", 0.0))) * 1e-6) for e in events
                   if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in threads and "ts" in e)
    if not spans:
        return None, "the trace's accelerator processes have no kernel events"
    busy, (cur0, cur1) = 0.0, spans[0]
    for s0, s1 in spans[1:]:
        if s0 > cur1:
            busy += cur1 - cur0
            cur0, cur1 = s0, s1
        else:
            cur1 = max(cur1, s1)
    busy += cur1 - cur0
    span = elapsed_s if elapsed_s is not None else max(s1 for _, s1 in spans) - spans[0][0]
    if not span > 0:
        return None, "the traced window has no duration"
    over = "the window's wall time" if elapsed_s is not None else "the span of the kernels"
    return min(1.0, busy / span), f"kernel time on {len(threads)} device stream(s) of the profiler trace over {over}"
