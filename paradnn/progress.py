"""Progress lines for long, otherwise silent work: ``paradnn run`` compiling a large model or
timing it for minutes prints one line every few seconds on stderr, naming the phase.

The measuring code only names its phase (:func:`phase`: a variable set, free when nobody
listens); a command that wants the lines wraps its work in :func:`heartbeat`, whose thread
prints the phase in force and the time spent so far. stdout stays clean (``--json``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Collection, Mapping
from typing import IO, Any, Callable, Iterator

from paradnn.units import duration

#: Seconds between two progress lines of a :func:`heartbeat`.
EVERY_S = 5.0

_phase: list[tuple[str, float]] = [("starting", time.perf_counter())]
#: Functions called with each new phase's name (:func:`listen`): an executor's child process
#: forwards its phases to the sweep driver, which prints the lines and, on a CPU, stops the
#: workers compiling ahead while "timing" is in force.
_listeners: list[Callable[[str], None]] = []

#: The phase of the warm-up and timed calls: nothing else may run on their cores meanwhile.
TIMING = "timing"


def phase(name: str) -> None:
    """Say that the work in this process has entered phase ``name`` ("compiling", "timing", ...).
    A heartbeat reports it from its next line on; listeners are called with it (they may block:
    a listener of "timing" returns once the other workers on the same cores are stopped)."""
    _phase[0] = (name, time.perf_counter())
    for listener in list(_listeners):
        listener(name)


@contextlib.contextmanager
def listen(listener: Callable[[str], None]) -> Iterator[None]:
    """Call ``listener(name)`` at every :func:`phase` while the block runs."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def line(label: str, name: str, phase_s: float, total_s: float, prefix: str = "paradnn") -> str:
    """One progress line: ``<prefix>: <label>: <phase> for <t> (<total> so far)`` (durations in
    the units of :func:`paradnn.units.duration`)."""
    return f"{prefix}: {label}: {name} for {duration(phase_s)} ({duration(total_s)} so far)"


def config_name(workload: Any, frameworks: Collection[str] = ()) -> str:
    """A config in one line for progress lines and plans: ``paradnn.workload.short_name`` of a
    Workload or a row, then ``on <framework>`` where the framework is not the default one or
    ``frameworks`` (those of the whole sweep) holds several: the configs of a sweep with a
    ``framework`` axis differ only there, and identical lines would not say which ran."""
    from paradnn.frameworks import DEFAULT
    from paradnn.workload import short_name

    name = short_name(workload)
    framework = (workload.get("framework") if isinstance(workload, Mapping)
                 else getattr(workload, "framework", None))
    if not isinstance(framework, str) or not framework:
        return name
    return name + (f" on {framework}" if framework != DEFAULT or len(set(frameworks)) > 1 else "")


def current() -> tuple[str, float]:
    """The phase in force and the ``time.perf_counter()`` second it began."""
    return _phase[0]


@contextlib.contextmanager
def heartbeat(label: str, every_s: float = EVERY_S, stream: IO[str] | None = None) -> Iterator[None]:
    """While the block runs, print ``paradnn: <label>: <phase> for <t> (<total> so far)`` on
    ``stream`` (stderr) every ``every_s`` seconds; nothing if the block ends sooner."""
    out = stream or sys.stderr
    stop = threading.Event()
    start = time.perf_counter()

    def beat() -> None:
        while not stop.wait(every_s):
            name, since = current()
            now = time.perf_counter()
            print(line(label, name, now - max(since, start), now - start), file=out, flush=True)

    thread = threading.Thread(target=beat, name="paradnn-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
