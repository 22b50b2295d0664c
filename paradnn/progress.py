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
from typing import IO, Iterator

from paradnn.units import duration

#: Seconds between two progress lines of a :func:`heartbeat`.
EVERY_S = 5.0

_phase: list[tuple[str, float]] = [("starting", time.perf_counter())]


def phase(name: str) -> None:
    """Say that the work in this process has entered phase ``name`` ("compiling", "timing", ...).
    A heartbeat reports it from its next line on."""
    _phase[0] = (name, time.perf_counter())


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
            print(f"paradnn: {label}: {name} for {duration(now - max(since, start))} "
                  f"({duration(now - start)} so far)", file=out, flush=True)

    thread = threading.Thread(target=beat, name="paradnn-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
