"""Progress for long, otherwise silent work: the one progress display of paradnn.

* :class:`Bar`, a bar of work done out of a total (a sweep's configs), built on tqdm: redrawn
  in place on a terminal, a widget in Jupyter (``tqdm.auto``), and on any other stream (a log
  file, CI, a pipe) one plain line per update, so a log keeps the history and no carriage
  returns pile up in it.
* :func:`heartbeat`: ``paradnn run`` compiling a large model or timing it for minutes prints one
  line every few seconds on stderr, naming the phase. The measuring code only names its phase
  (:func:`phase`: a variable set, free when nobody listens); a command that wants the lines
  wraps its work in :func:`heartbeat`, whose thread prints the phase in force and the time
  spent so far. A sweep forwards its workers' phases to its bar (:meth:`Bar.note`).

stdout stays clean (``--json``): progress goes to stderr.
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


#: The bar's layout: ``[####......] 3/10 | <text>``; ``#`` done, ``.`` to do.
BAR_FORMAT = "[{bar:20}] {n_fmt}/{total_fmt} | {desc}"
_ASCII = ".#"


def render(done: int, total: int, text: str) -> str:
    """The bar as one line of text, as :class:`Bar` draws it (tqdm's layout)."""
    from tqdm.std import tqdm as std_tqdm  # loaded by the processes that draw a bar only

    if total <= 0:  # nothing (left) to do: the bar is full, which tqdm draws only for a total
        return std_tqdm.format_meter(1, 1, 0.0, bar_format=BAR_FORMAT, ascii=_ASCII,
                                     prefix=text).replace("1/1", f"{done}/{total}", 1)
    return std_tqdm.format_meter(min(done, total), total, 0.0, bar_format=BAR_FORMAT, ascii=_ASCII,
                                 prefix=text)


def _notebook() -> Any:
    """tqdm's notebook class when running in a Jupyter kernel with widgets (``tqdm.auto``'s
    choice), else None: plain lines (without ipywidgets, tqdm.auto would only warn)."""
    import importlib.util

    if "ipykernel" not in sys.modules or importlib.util.find_spec("ipywidgets") is None:
        return None
    from tqdm.auto import tqdm as auto_tqdm

    return auto_tqdm if auto_tqdm.__module__.startswith("tqdm.notebook") else None


class Bar:
    """A progress bar of ``done`` out of ``total`` with a line of ``text`` (counts, ETA, what
    runs now), on ``stream`` (None: nothing is drawn).

    On a terminal the bar is redrawn in place; in Jupyter (when ``stream`` is stderr) it is a
    tqdm widget; on any other stream each :meth:`show` writes one line (``render``), so a log
    has one line per update and no carriage returns. :meth:`note` writes a line of its own
    above the bar (a heartbeat), which is drawn again below it."""

    def __init__(self, stream: IO[str] | None):
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._widget = _notebook() if stream is not None and stream is sys.stderr and not self.tty else None
        self._bar: Any = None  # the tqdm bar, made at the first show (after the lines before it)

    @property
    def live(self) -> bool:
        """Whether the bar is redrawn in place (a terminal, a notebook) rather than printed."""
        return self.tty or self._widget is not None

    def show(self, done: int, total: int, text: str) -> None:
        """Draw the bar: ``done`` of ``total``, then ``text``."""
        if self.stream is None:
            return
        if not self.live:
            self.stream.write(render(done, total, text) + "\n")
            self.stream.flush()
            return
        if self._bar is None:
            from tqdm.std import tqdm as std_tqdm

            cls = self._widget or std_tqdm
            # mininterval 0: the bar is redrawn at each event only (a config started or ended).
            self._bar = cls(total=max(total, 0), file=self.stream, bar_format=BAR_FORMAT,
                            ascii=_ASCII, mininterval=0, leave=True, desc=text, dynamic_ncols=False)
        self._bar.total = max(total, 0)
        self._bar.n = done
        self._bar.set_description_str(text, refresh=False)
        self._bar.refresh()

    def note(self, text: str) -> None:
        """Write ``text`` as a line of its own; a live bar is drawn again below it."""
        if self.stream is None:
            return
        if self._bar is not None:
            type(self._bar).write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar (a live one keeps its last state on its line)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


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
