"""Host and device utilization over a timed window (TBD's GPU and CPU utilization).

* Host: per-core CPU utilization from ``/proc/stat`` (Linux): for each core, the share of the
  window's clock ticks that were neither idle nor waiting for I/O; all processes of the host
  count, so a busy neighbour shows. ``process_cpu_s`` is this process's own CPU time (user +
  system, all its threads, from ``os.times``), which on a CPU backend is XLA's compute.
* Device: :func:`device_busy_fraction` reads a ``jax.profiler.trace`` directory and returns the
  share of the traced span during which at least one kernel ran on an accelerator (overlapping
  kernels on several streams count once). CPU backends have no device events: unavailable.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC_STAT = Path("/proc/stat")


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


def _process_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


@dataclass(frozen=True)
class HostReading:
    """Host utilization of one window: ``per_core`` (0-1 per core, in core order, None where
    the core did not tick), ``process_cpu_s`` (s of CPU time of this process), ``note``."""

    per_core: list[float | None] | None
    process_cpu_s: float
    note: str

    def metrics(self) -> dict[str, Any]:
        """``host_cpu_utilization`` (mean over cores, 0-1), ``host_cpu_utilization_per_core``
        (comma-separated, 3 decimals), ``process_cpu_s`` (s)."""
        ticked = [u for u in self.per_core or [] if u is not None]
        return {
            "host_cpu_utilization": sum(ticked) / len(ticked) if ticked else None,
            "host_cpu_utilization_per_core": (",".join("" if u is None else f"{u:.3f}" for u in self.per_core)
                                              if ticked else None),
            "process_cpu_s": self.process_cpu_s,
        }


class HostWindow:
    """``start()`` and ``stop()`` around the timed phase; ``stop()`` returns the :class:`HostReading`.
    ``proc_stat`` is the statistics file (a test's copy of its layout)."""

    def __init__(self, proc_stat: Path = PROC_STAT) -> None:
        self.proc_stat = Path(proc_stat)
        self._stat0: dict[str, tuple[int, int]] | None = None
        self._cpu0 = 0.0
        self.why = ""

    def _stat(self) -> dict[str, tuple[int, int]] | None:
        try:
            return read_proc_stat(self.proc_stat)
        except (OSError, ValueError) as exc:
            self.why = f"per-core utilization unavailable: {self.proc_stat} not readable ({exc})"
            return None

    def start(self) -> None:
        self._stat0 = self._stat()
        self._cpu0 = _process_cpu_s()

    def stop(self) -> HostReading:
        cpu = _process_cpu_s() - self._cpu0
        stat1 = self._stat()
        if self._stat0 is None or stat1 is None:
            return HostReading(None, cpu, self.why)
        per_core: list[float | None] = []
        for name in sorted(self._stat0, key=lambda n: int(n[3:])):
            if name not in stat1:
                per_core.append(None)  # a core went offline during the window
                continue
            busy = stat1[name][0] - self._stat0[name][0]
            total = stat1[name][1] - self._stat0[name][1]
            per_core.append(min(1.0, max(0.0, busy / total)) if total > 0 else None)
        return HostReading(per_core, cpu, f"/proc/stat over the window, {len(per_core)} cores, all processes")


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
