"""``paradnn.sweep``: run a grid of workloads into a store, resumably, without losing a config.

>>> import paradnn
>>> from paradnn.grids import grid
>>> df = paradnn.sweep(grid("fc", layers=2, nodes=[32, 64], input=64, output=10, batch=8),
...                    store="results.db")                        # doctest: +SKIP
>>> df = paradnn.sweep("sweeps/smoke.yaml", store="results.db")  # doctest: +SKIP

Resume is the default: a config whose record key (workload, platform without the host name,
software versions, measurement settings) already has ``repeat`` rows in the store, whatever their
status, is skipped. Two sweeps writing one store at the same time split the work through claims
in the store. Each record is committed the moment it exists.

Faults (docs/reliability.md): an infrastructure fault (:class:`~paradnn.executors.Fault`: an
unwritable cache, an absent JAX platform, a lost worker) is never stored as a config's result;
the sweep either stops with one :class:`~paradnn.errors.InfrastructureError` or goes on without
that config and names it missing at the end (``attrs["missing"]`` of the returned frame; the
command line exits 1), and the next run measures it. A store that cannot take a row (a full disk) stops the
sweep with one :class:`~paradnn.errors.StoreError`; every row committed before is kept.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import pandas as pd

from paradnn import frameworks
from paradnn import progress as progress_lines
from paradnn.analysis.cost import estimate
from paradnn.errors import InfrastructureError, SpecError, StoreError
from paradnn.executors import EXECUTORS, Fault, RunFn, Task, default_cache_dir, make_executor
from paradnn.grids.sweepfile import MAX_REPEAT, GridLike, parse_overlap, parse_retry_unstable, resolve, resolve_settings
from paradnn.measure import MeasureSettings
from paradnn.record import (
    STATUSES,
    FrozenDict,
    Record,
    format_phase_totals,
    is_retry,
    phase_totals,
    record_key,
    row_key,
    unstable_ok,
)
from paradnn.runner import platform_problem
from paradnn.store import Store, current_rows
from paradnn.units import duration, parse_bytes, parse_duration, parse_int
from paradnn.workload import Workload, short_name

__all__ = ["sweep", "SweepConfig", "DEFAULT_TIMEOUT_S", "DEFAULT_CACHE",
           "DEFAULT_RETRY_UNSTABLE_S", "RETRY_BUDGET_FACTOR", "is_retry", "check_platform"]

#: Seconds one config (compile + measurement) may take in the process and Ray executors.
DEFAULT_TIMEOUT_S = 1800.0

#: A config that came back ``ok`` but unstable is measured once more with this many times its
#: ``time_budget_s``: a longer warm-up, room for more timed calls (the CV rule stops it as soon
#: as the target is met), and a later moment than the first try, when the burst of other work
#: that spoiled it may be over.
RETRY_BUDGET_FACTOR = 4

#: Extra seconds a sweep spends on those retries unless told otherwise (``retry_unstable_s``):
#: ten minutes whatever the sweep's size. A retry costs about its first measurement plus 3x
#: the time budget (about 20 s for a small model at the default 5 s budget on a 2-core host:
#: docs/sweeps.md), so this is a few dozen retries, a bounded cost on a small sweep and a few
#: percent of a sweep of the paper's grids (hours), where a larger value is a deliberate
#: choice; 0 turns the retry off.
DEFAULT_RETRY_UNSTABLE_S = 600.0


def default_retry_unstable_s() -> float:
    """``retry_unstable_s`` when neither the caller nor the sweep file names it:
    ``$PARADNN_RETRY_UNSTABLE_S`` where set (a site's or a test suite's own default, checked as
    the setting is), else :data:`DEFAULT_RETRY_UNSTABLE_S`."""
    text = os.environ.get("PARADNN_RETRY_UNSTABLE_S", "").strip()
    return parse_retry_unstable(text, "$PARADNN_RETRY_UNSTABLE_S") if text else DEFAULT_RETRY_UNSTABLE_S


class _Default:
    def __repr__(self) -> str:
        return "<default: ~/.cache/paradnn/xla>"


#: Sentinel for "the sweep file's cache_dir, else ``executors.default_cache_dir()``".
DEFAULT_CACHE: Any = _Default()


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """A sweep, resolved and checked: what :func:`sweep` measures, where, and how.

    Build it with :meth:`resolve` (a grid or a sweep file plus overrides); constructing it
    directly checks the same values (``__post_init__``) but applies no file and no defaults
    beyond the fields' own.
    """

    #: The configs in grid order (a config listed twice is measured once).
    workloads: tuple[Workload, ...]
    #: The SQLite results store, created if missing (docs/schema.md).
    store: Path
    #: The measurement protocol's settings, recorded with every row.
    settings: MeasureSettings = dataclasses.field(default_factory=MeasureSettings)
    #: Where configs run: ``"process"`` (a child process per config, with crash and time-limit
    #: isolation), ``"inprocess"`` or ``"ray"`` (``EXECUTORS``).
    executor: str = "process"
    #: Records wanted per config in the store (1 to ``MAX_REPEAT``); configs that have them are
    #: skipped (resume).
    repeat: int = 1
    #: Device memory in bytes against which models are recorded ``oom`` before running; None:
    #: the device's own where known.
    memory_limit_bytes: int | None = None
    #: Seconds one config (compile + measurement) may take; not enforced in-process.
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: Persistent compilation cache directory; None disables it.
    cache_dir: Path | None = None
    #: Ray cluster address HOST:PORT (only with ``executor="ray"``; None: a local cluster).
    address: str | None = None
    #: Ray resources per task, e.g. ``{"num_gpus": 1}`` (only with ``executor="ray"``). Read-only.
    resources: Mapping[str, Any] | None = None
    #: The grid-size cap a sweep file was expanded under (None: the file's or ``MAX_CONFIGS``).
    max_configs: int | None = None
    #: ``ok`` rows that missed their precision target (``stable`` false) do not count towards
    #: ``repeat``, so those configs are measured again (their rows stay in the store).
    remeasure_unstable: bool = False
    #: Extra seconds (>= 0; 0 turns it off) this sweep may spend, after the other configs,
    #: measuring once more with ``RETRY_BUDGET_FACTOR`` times the time budget each config whose
    #: ``ok`` rows all missed their precision target and that has no retry yet. The retry's row
    #: keeps the settings asked for (so the config's record key: it counts on resume) and says
    #: the budget it ran with in ``time_budget_used_s``.
    retry_unstable_s: float = dataclasses.field(default_factory=default_retry_unstable_s)
    #: The sweep file's path, or ``"<grid>"`` for a list of workloads (named in progress lines).
    source: str = "<grid>"
    #: Workers compiling the next configs while one is measured (process executor): ``"auto"``
    #: (1 on a GPU host, else 0) or a count from 0 to the CPU cores (docs/performance.md,
    #: "Compiling ahead").
    overlap: int | str = "auto"

    def __post_init__(self) -> None:
        # Checked here, not only in resolve(), so that no unchecked config reaches the sweep;
        # values are normalized in place (a frozen dataclass's own __init__ is the only writer).
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("workloads", tuple(self.workloads))
        for item in self.workloads:
            if not isinstance(item, Workload):
                raise SpecError("grid item", item,
                                "Workload values (paradnn.grid(...) builds them)")
        if not isinstance(self.executor, str) or self.executor not in EXECUTORS:
            raise SpecError("executor", self.executor, "one of " + ", ".join(EXECUTORS))
        if not isinstance(self.repeat, int):  # the input layer parses text; the API takes ints
            raise SpecError("repeat", self.repeat,
                            f"an integer from 1 to {MAX_REPEAT} (records wanted per config)")
        put("repeat", parse_int(self.repeat, "repeat", maximum=MAX_REPEAT))
        if self.memory_limit_bytes is not None:
            put("memory_limit_bytes", parse_bytes(self.memory_limit_bytes))
        if isinstance(self.timeout_s, (bool, str)):
            raise SpecError("timeout_s", self.timeout_s, "a positive, finite number of seconds")
        put("timeout_s", parse_duration(self.timeout_s, "timeout_s"))
        if self.cache_dir is not None:
            if not isinstance(self.cache_dir, (str, os.PathLike)) or not str(self.cache_dir):
                raise SpecError("cache_dir", self.cache_dir,
                                "a directory path, or None to disable the compilation cache")
            put("cache_dir", Path(os.path.expanduser(str(self.cache_dir))))
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise SpecError("address", self.address, "a Ray cluster address HOST:PORT")
        if self.resources is not None:
            if not isinstance(self.resources, Mapping):
                raise SpecError("resources", self.resources,
                                "Ray resources per task, e.g. {'num_gpus': 1}")
            put("resources", FrozenDict(self.resources))
        if self.executor != "ray" and (self.address is not None or self.resources is not None):
            raise SpecError("address" if self.address is not None else "resources",
                            self.address if self.address is not None else dict(self.resources),
                            "only with executor='ray'")
        if not isinstance(self.settings, MeasureSettings):
            raise SpecError("settings", self.settings, "a MeasureSettings")
        if self.max_configs is not None:
            put("max_configs", parse_int(self.max_configs, "max_configs"))
        if not isinstance(self.remeasure_unstable, bool):
            raise SpecError("remeasure_unstable", self.remeasure_unstable, "True or False")
        put("retry_unstable_s", parse_retry_unstable(self.retry_unstable_s))
        put("overlap", parse_overlap(self.overlap))
        if self.executor != "process" and self.overlap not in (0, "auto"):
            raise SpecError("overlap", self.overlap, f"0 or auto with executor={self.executor!r} "
                            "(compiling ahead needs executor='process')")
        if not isinstance(self.store, (str, os.PathLike)) or not str(self.store):
            raise SpecError("store", self.store, "the path of a SQLite store file")
        put("store", Path(self.store))

    @property
    def stale_after_s(self) -> float:
        """Seconds after which another host's claim on a config counts as dead (its sweep was
        killed): twice the time limit of one config, plus ten minutes."""
        return float(self.timeout_s) * 2 + 600

    @classmethod
    def resolve(
        cls,
        grid_or_file: GridLike,
        store: str | os.PathLike = "results.db",
        *,
        executor: str | None = None,
        repeat: int | None = None,
        memory_limit_bytes: int | str | None = None,
        timeout_s: float | None = None,
        settings: MeasureSettings | dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = DEFAULT_CACHE,
        address: str | None = None,
        resources: Mapping[str, Any] | None = None,
        max_configs: int | None = None,
        remeasure_unstable: bool = False,
        retry_unstable_s: float | None = None,
        overlap: int | str | None = None,
    ) -> SweepConfig:
        """Resolve a grid or a sweep file plus overrides into a SweepConfig.

        ``grid_or_file``: a list of :class:`~paradnn.workload.Workload` (``paradnn.grid(...)``)
        or the path of a YAML sweep file (docs/sweeps.md). Each value is the argument given
        here, else the file's ``run`` / ``settings`` value, else the default: ``executor``
        ``"process"``; ``repeat`` 1 (records wanted per config); ``memory_limit_bytes`` (bytes,
        or text such as ``"2GB"``) the device's own; ``timeout_s`` 1800 seconds per config;
        ``settings`` (a MeasureSettings replaces the file's, a dict of its fields overrides
        them) the protocol's defaults; ``cache_dir`` ``~/.cache/paradnn/xla`` (None disables
        the cache); ``address`` and ``resources`` none (Ray only); ``max_configs`` (checked
        before a file's grid is expanded) the file's ``run.max_configs``, else
        ``paradnn.grids.MAX_CONFIGS``; ``retry_unstable_s`` (seconds, 0 = off) the file's
        ``run.retry_unstable_s``, else :func:`default_retry_unstable_s`; ``overlap`` ``"auto"``
        (workers compiling the next configs while one is measured: 1 on a GPU host, else 0; a
        count from 0 to the CPU cores forces it; process executor only). SpecError (naming the
        parameter, the value and what is allowed) or the sweep file's ParadnnError for anything
        it cannot use.
        """
        plan = resolve(grid_or_file, max_configs)
        run = plan.run

        def pick(given: Any, key: str, default: Any) -> Any:
            """The argument, else the file's run value, else the default."""
            return given if given is not None else run.get(key, default)

        # Executor first: an unknown one is the likeliest typo, and the original order of the
        # checks (executor, repeat, limit, timeout) is what users' error messages show.
        executor = pick(executor, "executor", "process")
        if not isinstance(executor, str) or executor not in EXECUTORS:
            raise SpecError("executor", executor, "one of " + ", ".join(EXECUTORS))
        if cache_dir is DEFAULT_CACHE:
            cache_dir = run.get("cache_dir", default_cache_dir())
        retry = pick(retry_unstable_s, "retry_unstable_s", None)
        return cls(
            workloads=tuple(plan.workloads),
            store=store,
            settings=resolve_settings(plan, settings),
            executor=executor,
            repeat=pick(repeat, "repeat", 1),
            memory_limit_bytes=pick(memory_limit_bytes, "memory_limit", None),
            timeout_s=pick(timeout_s, "timeout_s", DEFAULT_TIMEOUT_S),
            cache_dir=cache_dir,
            address=pick(address, "address", None),
            resources=pick(resources, "resources", None),
            max_configs=pick(max_configs, "max_configs", None),
            remeasure_unstable=remeasure_unstable,
            retry_unstable_s=default_retry_unstable_s() if retry is None else retry,
            source=plan.path,
            overlap=pick(overlap, "overlap", "auto"),
        )


class Progress:
    """A one-line progress bar on a stream (stderr): done/total, counts by status, elapsed,
    ETA and the config running now.

    A line is written at once when the sweep starts (configs to measure, configs already in
    the store, and the estimated time). On a terminal the line is redrawn in place; otherwise
    one line is written per started and per finished config, so logs of long sweeps show the
    history.

    ETA: with ``estimates`` (workload key -> estimated seconds of one measurement, from
    :func:`paradnn.analysis.cost.estimate`, the estimator ``paradnn plan`` uses) and ``planned`` (the
    measurements to make per workload key, repeats included, or a list of one key per measurement), the estimates of the measurements left, scaled by how long the
    finished ones took against their estimates; without them, the mean time per finished
    config times the configs left. With ``retry_bound_s`` (the sweep's ``retry_unstable_s``)
    and ``retry_budget_s`` (a retry's time budget), the line adds the automatic retries the
    finished configs call for (:func:`retry_would_help`), extrapolated to all configs and at
    most the bound: ``ETA 3m (+ retries ~40s)``.
    """

    def __init__(self, total: int, skipped: int, stream: IO[str] | None, width: int = 20,
                 estimates: dict[str, float] | None = None,
                 planned: dict[str, int] | list[str] | None = None,
                 calibration: str | None = None, retry_bound_s: float = 0.0,
                 retry_budget_s: float = 0.0, frameworks: Collection[str] = ()):
        self.total, self.skipped, self.stream, self.width = total, skipped, stream, width
        # The sweep's frameworks: a config is named with its framework where that tells configs
        # apart (progress_lines.config_name).
        self.frameworks = frozenset(frameworks)
        self.retry_bound_s, self.retry_budget_s = retry_bound_s, retry_budget_s
        self.retry_called_s = 0.0  # estimated seconds of the retries the finished configs call for
        self.counts = {s: 0 for s in STATUSES}
        self.done = 0
        self.missing = 0  # configs left unrecorded by infrastructure faults (Progress.miss)
        self.start = time.monotonic()
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.estimates = dict(estimates or {})
        self.pending: dict[str, int] = {}
        if isinstance(planned, dict):
            self.pending.update(planned)
        else:
            for key in planned or []:
                self.pending[key] = self.pending.get(key, 0) + 1
        self.estimated_done = 0.0  # estimated seconds of the finished measurements
        self.running: str | None = None
        self._drawn = 0  # length of the line on the terminal
        if stream is not None:
            total_s = self._remaining_estimate()
            estimate = ("" if not total else
                        f"; estimated {duration(total_s)} ({calibration})" if total_s is not None
                        else f"; no time estimate yet ({calibration})" if calibration else "")
            stream.write(f"paradnn sweep: {total} config(s) to measure, {skipped} already in the "
                         f"store (skipped: resume; --repeat N measures again){estimate}\n")
            stream.flush()

    @staticmethod
    def announce(stream: IO[str] | None, configs: int, source: str) -> None:
        """The first line, before the executor starts (a child process takes seconds)."""
        if stream is not None:
            where = "the grid" if source == "<grid>" else source
            stream.write(f"paradnn sweep: {configs} config(s) in {where}; starting the "
                         "executor and checking the store\n")
            stream.flush()

    def _remaining_estimate(self) -> float | None:
        """Estimated seconds of the measurements not finished, None without estimates."""
        if not self.estimates or not self.pending:
            return None
        known = [self.estimates[k] for k in self.pending if k in self.estimates]
        if not known:
            return None
        mean = sum(known) / len(known)  # for the few keys the time model could not estimate
        return sum(self.estimates.get(k, mean) * n for k, n in self.pending.items())

    def eta(self) -> float | None:
        """Estimated seconds left, None when nothing can be said yet."""
        elapsed = time.monotonic() - self.start
        remaining = self._remaining_estimate()
        if remaining is not None:
            if self.done and self.estimated_done > 0:
                remaining *= elapsed / self.estimated_done  # this host today vs the model
            return remaining
        if not self.done:
            return None
        return elapsed / self.done * (self.total - self.done)

    def retries_s(self) -> float:
        """Expected seconds of the automatic retries after the last config: those the finished
        configs call for, scaled to all configs, at most ``retry_bound_s``."""
        if not self.done or self.retry_bound_s <= 0:
            return 0.0
        return min(self.retry_bound_s, self.retry_called_s * max(self.total, self.done) / self.done)

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        eta = self.eta()
        counts = " ".join(f"{s} {n}" for s, n in self.counts.items() if n or s in ("ok", "oom",
                                                                                 "error"))
        if self.missing:
            counts += f" missing {self.missing}"
        running = f" | running {self.running}" if self.running else ""
        retries = self.retries_s()
        return (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"| {counts} | elapsed {duration(elapsed)} ETA "
                f"{'?' if eta is None else duration(eta)}"
                f"{f' (+ retries ~{duration(retries)})' if retries > 0 else ''}{running}")

    def begin(self, workload: Workload) -> None:
        """A config is handed to the executor: name it on the line."""
        self.running = progress_lines.config_name(workload, self.frameworks)
        self._draw()

    def _finish_key(self, key: str | None) -> None:
        if key is not None and self.pending.get(key):
            self.pending[key] -= 1
            if not self.pending[key]:
                del self.pending[key]
            self.estimated_done += self.estimates.get(key, 0.0)

    def update(self, record: Record | None) -> None:
        if record is not None:
            self.done += 1
            self.counts[record.status] = self.counts.get(record.status, 0) + 1
            self._finish_key(record.workload_key)
            if self.retry_bound_s > 0 and record.status == "ok":
                row = record.to_dict()
                if retry_would_help(row):
                    self.retry_called_s += _retry_estimate_s(row, self.retry_budget_s)
            self.running = None
        self._draw()

    def miss(self) -> None:
        """A config an infrastructure fault left unrecorded: done here, counted as missing,
        and still in the total (it was not measured elsewhere, unlike a skipped one)."""
        self.done += 1
        self.missing += 1
        self.running = None
        self._draw()

    def skip(self, workload: Workload | None = None) -> None:
        """A config another sweep on the same store measured: one less to do here."""
        self.total -= 1
        if workload is not None and self.pending.get(workload.key):
            self.pending[workload.key] -= 1
            if not self.pending[workload.key]:
                del self.pending[workload.key]
        self._draw()

    def _draw(self) -> None:
        if self.stream is None:
            return
        if self.tty:
            line = self.line()
            # Pad so that a shorter line fully covers the previous one.
            self.stream.write("\r" + line.ljust(self._drawn))
            self._drawn = len(line)
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """Write ``text`` as a line of its own (a heartbeat); on a terminal the progress line
        is drawn again below it."""
        if self.stream is None:
            return
        if self.tty:
            self.stream.write("\r" + text.ljust(self._drawn) + "\n")
            self._drawn = 0
            self._draw()
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def progress_estimates(workloads: list[Workload], frame: pd.DataFrame, platform: dict[str, Any],
                       settings: Any, label: str = "the store") -> tuple[dict[str, float], str]:
    """Estimated seconds of one measurement of each workload (workload key -> s) from the store
    rows ``frame`` of ``platform``, for the progress line, and the sentence saying what the
    estimate rests on (``label`` names the store): :func:`paradnn.analysis.cost.estimate`, the
    estimator ``paradnn plan`` uses, so that both say the same for the same store and configs.
    Workloads without an estimate are left out (the progress line uses the mean of the others)."""
    if not len(frame) or not workloads:
        return {}, "no records of this platform in the store yet"
    est = estimate(frame, workloads, settings, platform, label=label)
    out = {w.key: float(s) for w, s in zip(workloads, est.table["wall_s"]) if s == s}
    return out, est.basis


def sweep(config: SweepConfig | GridLike, store: str | os.PathLike | None = None, *,
          progress: bool | IO[str] = True, run_fn: RunFn | None = None,
          **overrides: Any) -> pd.DataFrame:
    """Measure every workload of a sweep into its store; return their rows.

    ``config``: a resolved :class:`SweepConfig`, or what :meth:`SweepConfig.resolve` takes (a
    list of :class:`~paradnn.workload.Workload` from ``paradnn.grid(...)`` or the path of a YAML
    sweep file, docs/sweeps.md), resolved here with ``store`` (default ``results.db``) and the
    keyword ``overrides`` (``executor``, ``repeat``, ``memory_limit_bytes``, ``timeout_s``,
    ``settings``, ``cache_dir``, ``address``, ``resources``, ``max_configs``,
    ``remeasure_unstable``, ``retry_unstable_s``, ``overlap``: their meaning and defaults are
    :meth:`SweepConfig.resolve`'s), so
    ``paradnn.sweep("sweeps/smoke.yaml", store="smoke.db", repeat=2)`` works as before. A
    SweepConfig is already resolved: ``store`` and overrides are refused with it
    (``dataclasses.replace(config, ...)`` changes a field).

    ``progress``: a progress line on stderr (True), on a given stream, or none (False).
    ``run_fn``: replaces ``paradnn.runner.run_workload`` (for tests: a picklable top-level
    function ``(workload, settings, memory_limit_bytes) -> Record``).

    After the configs, the ones that came back ``ok`` but unstable are measured once more with a
    longer time budget, within ``retry_unstable_s`` seconds (:func:`_retry_unstable`).

    Every config is checked against the platform the executor gives its framework (the devices
    it sees: :func:`check_platform`) before the store is opened: a config the runner would
    refuse is one SpecError naming it, and nothing is measured or stored.

    Returns the store's rows for this sweep's configs (all repeats, earlier runs included), one
    column per field, as :func:`paradnn.load` gives them. ``attrs["written"]`` lists the rows
    this call added itself, as ``(key, time_utc)`` pairs: the others were in the store before,
    or a concurrent sweep on the same store wrote them. ``attrs["missing"]`` lists, as
    ``(config name, record key, why)``, the configs an infrastructure fault left unrecorded (a
    Ray task lost on every attempt): not measured, never stored; the next run measures them.
    ``attrs["timing"]``: ``setup_s`` (s before the first config was handed out: workers
    started, platforms probed, store read), ``store_s`` (s committing rows), ``wall_s`` and
    ``rows`` (records committed) of this call.
    """
    if isinstance(config, SweepConfig):
        if store is not None or overrides:
            given = "store" if store is not None else sorted(overrides)[0]
            raise SpecError(given, store if store is not None else overrides[given],
                            "nothing besides a resolved SweepConfig (dataclasses.replace(config, "
                            "...) changes one of its fields)")
    else:
        config = SweepConfig.resolve(config, "results.db" if store is None else store,
                                     **overrides)
    stream: IO[str] | None = (sys.stderr if progress is True else None if progress is False
                              else progress)
    Progress.announce(stream, len(config.workloads), config.source)
    tally = _Tally(start=time.perf_counter())
    with make_executor(config.executor, timeout_s=config.timeout_s,
                       cache_dir=config.cache_dir, run_fn=run_fn, address=config.address,
                       resources=None if config.resources is None else dict(config.resources),
                       overlap=config.overlap) as ex:
        # Before the store is opened: a config the platform refuses is bad input, never a row.
        check_platform(config.workloads, ex.context, config.source)
        with Store(config.store) as db:
            resume = _key_configs(config, ex, db)
            bar = _progress_bar(config, resume, db, stream)
            tally.setup_s = time.perf_counter() - tally.start
            _execute(config, resume, ex, db, bar, stream, tally)
            _retry_unstable(config, resume, ex, db, stream, tally)
            frame = db.frame()
    _summarize(stream, tally)
    keys = resume.all_keys() | tally.written
    result = frame[frame["key"].isin(keys)].reset_index(drop=True)
    result.attrs["written"] = list(tally.rows)
    result.attrs["missing"] = list(tally.missing)
    # Where this run's wall time went on the driver's side (benchmarks/bench_ray.py reads it).
    result.attrs["timing"] = {"setup_s": tally.setup_s or 0.0, "store_s": tally.store_s,
                              "wall_s": time.perf_counter() - tally.start,
                              "rows": tally.committed}
    return result


def check_platform(workloads: Sequence[Workload],
                   context: Callable[[str], tuple[dict[str, Any], dict[str, Any]]],
                   source: str = "<grid>") -> None:
    """Refuse, before anything is measured or stored, a sweep with a config that the runner
    would refuse on the platform ``context(framework)`` gives (an executor's ``context``: the
    devices its workers see): one SpecError naming the first such config (its position in the
    grid and its name), the parameter, the value and what is allowed, and how many others fail
    too. A platform that cannot start is the InfrastructureError of the executor."""
    platforms: dict[str, dict[str, Any]] = {}
    bad: list[tuple[int, Workload, SpecError]] = []
    for i, w in enumerate(workloads, 1):
        if w.framework not in platforms:
            try:
                platforms[w.framework] = context(w.framework)[0]
            except InfrastructureError as exc:
                raise InfrastructureError(f"{exc}; nothing was run or recorded: fix it and run "
                                          "the sweep again to resume", retry=exc.retry) from None
        problem = platform_problem(w, platforms[w.framework])
        if problem is not None:
            bad.append((i, w, problem))
    if bad:
        i, w, problem = bad[0]
        where = "the grid" if source == "<grid>" else source
        others = f" ({len(bad) - 1} other config(s) too)" if len(bad) > 1 else ""
        # The runner's own SpecError (parameter, value, what is allowed), placed in the sweep.
        problem.args = (f"{where}: config {i} of {len(workloads)} ({short_name(w)} on "
                        f"{w.framework}): {problem}{others}; nothing was measured or stored",)
        raise problem


@dataclasses.dataclass(frozen=True)
class _Resume:
    """Which configs a sweep measures and how many records each still needs."""

    keyed: dict[str, Workload]  # record key -> workload (a config listed twice is measured once)
    counts: dict[str, int]  # record key -> records the store has (that count towards repeat)
    platform: dict[str, Any]  # the executor's platform (of the default framework)
    #: record key -> time_utc of the unstable row a remeasurement replaces (remeasure_unstable)
    replaces: dict[str, str] = dataclasses.field(default_factory=dict)
    #: record key -> every key the config's records may have, one per measuring platform of a
    #: mixed cluster (``Executor.contexts``), the key itself first; absent: only the key.
    alternates: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def all_keys(self) -> set[str]:
        """Every key a record of this sweep's configs may have."""
        return set(self.keyed).union(*self.alternates.values())

    def missing(self, key: str, repeat: int) -> int:
        """Records config ``key`` still needs to reach ``repeat``."""
        return max(0, repeat - self.counts.get(key, 0))


@dataclasses.dataclass
class _Tally:
    """What one sweep run did, for its end summary (a mutable accumulator, private to a run)."""

    start: float  # time.perf_counter() at the sweep's start, s
    setup_s: float | None = None  # seconds before the first config was handed out
    store_s: float = 0.0  # seconds spent committing rows (in no record: they come after it)
    committed: int = 0
    #: (config name, record key, why) of each config an infrastructure fault left unrecorded
    #: (a Ray task lost on every attempt): named at the end; the next run measures them.
    missing: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    phase_rows: list[Mapping[str, Any]] = dataclasses.field(default_factory=list)
    written: set[str] = dataclasses.field(default_factory=set)  # record keys committed
    #: (key, time_utc) of each row this run added to the store: what it measured itself, as
    #: opposed to rows a concurrent sweep on the same store wrote meanwhile.
    rows: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    # The automatic retry of unstable configs (_retry_unstable):
    retry_candidates: int = 0  # configs unstable, without a retry, when the retries began
    retried: int = 0  # retry records committed
    retried_stable: int = 0  # of which ok and stable
    retry_left: int = 0  # candidates not retried: the extra time would have passed the bound
    #: retries an infrastructure fault left unrecorded (the config keeps its first row)
    retry_lost: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    retry_useless: int = 0  # unstable configs whose timing ended at max_calls: not retried
    retry_contended: int = 0  # unstable configs measured on a busy host: not retried
    retry_busy: int = 0  # candidates not retried because the host stayed busy
    retry_busy_cores: float = 0.0  # other processes' busy cores when the sweep gave up waiting
    retry_budget_s: float = 0.0  # the time budget a retry runs with, s
    retry_bound_s: float = 0.0  # retry_unstable_s, s
    retry_s: float = 0.0  # wall time of the retries, s


def _key_configs(config: SweepConfig, ex: Any, db: Store) -> _Resume:
    """Key every config with the executor's platform and software (what resume compares) and
    count the store's records of each."""
    # The sweep's platform (its progress estimates) is that of its first config's framework: a
    # torch-only sweep starts no JAX worker.
    first = config.workloads[0].framework if config.workloads else frameworks.DEFAULT
    try:
        platform, _software = ex.context(first)
    except InfrastructureError as exc:
        raise InfrastructureError(f"{exc}; nothing was run or recorded: fix it and run "
                                  "the sweep again to resume", retry=exc.retry) from None
    settings_dict = config.settings.to_dict()
    keyed: dict[str, Workload] = {}
    alternates: dict[str, tuple[str, ...]] = {}
    for w in config.workloads:
        # Each framework's records carry its own context (devices it sees, versions); the
        # executor keeps each framework's contexts once started. On a mixed cluster each
        # measuring platform gives its own key: a record under any of them counts (resume per
        # measuring platform), the first one keys the config's claims.
        keys = tuple(dict.fromkeys(record_key(w.to_dict(), p, sw, settings_dict)
                                   for p, sw in ex.contexts(w.framework)))
        if keys[0] not in keyed:
            keyed[keys[0]] = w
            if len(keys) > 1:
                alternates[keys[0]] = keys
    found = db.counts_by_key(set(keyed).union(*alternates.values()),
                             unstable=not config.remeasure_unstable)
    counts = {key: sum(found.get(k, 0) for k in alternates.get(key, (key,))) for key in keyed}
    counts = {key: n for key, n in counts.items() if n}
    replaces: dict[str, str] = {}
    if config.remeasure_unstable:
        # The newest unstable ok row of each config is the attempt its remeasurement replaces:
        # the same computation on the same platform and software, under these settings or
        # others (a recipe's sweep file asks for a longer budget than the unstable run had).
        newest: dict[str, tuple[str, str]] = {}
        for row in current_rows(db.rows()):
            identity = row_key(row, settings=False)
            if identity is not None and unstable_ok(row):
                when = str(row.get("time_utc"))
                if when > newest.get(identity, ("", ""))[1]:
                    newest[identity] = (str(row["key"]), when)
        for key, w in keyed.items():
            fw_platform, fw_software = ex.context(w.framework)
            found = newest.get(record_key(w.to_dict(), fw_platform, fw_software, {}))
            if found is not None and counts.get(key, 0) == 0:
                replaces[key] = found[1] if found[0] == key else f"{found[0]}@{found[1]}"
    return _Resume(keyed, counts, platform, replaces, alternates)


def _progress_bar(config: SweepConfig, resume: _Resume, db: Store,
                  stream: IO[str] | None) -> Progress:
    """The progress line: configs to measure, configs skipped, and the time estimate."""
    repeat = config.repeat
    todo = sum(resume.missing(k, repeat) for k in resume.keyed)
    skipped = sum(1 for k in resume.keyed if not resume.missing(k, repeat))
    # Measurements left per workload key: O(configs), whatever ``repeat`` is.
    planned: dict[str, int] = {}
    for key, w in resume.keyed.items():
        if resume.missing(key, repeat):
            planned[w.key] = planned.get(w.key, 0) + resume.missing(key, repeat)
    estimates: dict[str, float] = {}
    calibration = None
    if stream is not None and planned:
        estimates, calibration = progress_estimates(
            [w for k, w in resume.keyed.items() if resume.missing(k, repeat)], db.frame(),
            resume.platform, config.settings, label=str(config.store))
    return Progress(todo, skipped, stream, estimates=estimates, planned=planned,
                    calibration=calibration, retry_bound_s=config.retry_unstable_s,
                    retry_budget_s=retry_budget_s(config.settings),
                    frameworks={w.framework for w in config.workloads})


def _execute(config: SweepConfig, resume: _Resume, ex: Any, db: Store, bar: Progress,
             stream: IO[str] | None, tally: _Tally) -> None:
    """Hand the configs to the executor and commit each record the moment it exists."""
    counts, repeat = resume.counts, config.repeat
    claimed: dict[int, Task] = {}

    def beat(task: Task, phase: str, phase_s: float, total_s: float) -> None:
        bar.note(progress_lines.line(progress_lines.config_name(task.workload, bar.frameworks),
                                     phase, phase_s, total_s,
                                     prefix="paradnn sweep"))

    # An executor that looks ahead (overlap) says itself when a config starts.
    reports_starts = ex.watch(started=lambda task: bar.begin(task.workload), waiting=beat,
                              every_s=progress_lines.EVERY_S)

    def tasks() -> Iterator[Task]:
        # Claims are taken lazily, just before a config is handed to the executor, so
        # a concurrent sweep on the same store takes whatever this one has not started.
        # Start at the fewest records any config has: a resumed sweep does not walk
        # the repeats every config already has.
        first = min((counts.get(k, 0) for k in resume.keyed), default=repeat)
        for rep in range(first, repeat):
            for key, w in resume.keyed.items():
                if counts.get(key, 0) > rep:
                    continue
                claim = db.claim(key, rep + 1, config.stale_after_s,
                                 unstable=not config.remeasure_unstable)
                if claim is None:
                    bar.skip(w)
                    continue
                task = Task(w, config.settings, config.memory_limit_bytes, key, claim,
                            resume.alternates.get(key, ()))
                claimed[claim] = task
                if not reports_starts:
                    bar.begin(w)
                yield task

    def replacing(task: Task, record: Record) -> Record:
        # A remeasurement of an unstable config names the attempt it replaces (once per config).
        named = resume.replaces.pop(task.key, None)
        return record.with_metrics(retry_of=named) if named and record.key == task.key else record

    _commit(ex.execute(tasks()), claimed, db, bar, stream, tally, replacing if resume.replaces else None)


def _commit(results: Iterator[tuple[Task, Any]], claimed: dict[int, Task], db: Store,
            bar: Progress, stream: IO[str] | None, tally: _Tally,
            stored: Callable[[Task, Record], Record] | None = None,
            lost: list[tuple[str, str, str]] | None = None) -> None:
    """Commit each record of the executor's ``results`` the moment it exists (``stored`` turns
    it into the record to store); a fault gives its claim back, and one the sweep goes on from
    is listed in ``lost`` (default ``tally.missing``). Claims left in ``claimed``
    (the tasks handed out and not finished) are released at the end, whatever happened."""
    warned = False
    try:
        for task, record in results:
            if isinstance(record, Fault):
                # Not the workload's result: nothing is stored and the claim goes back,
                # so the next run of the sweep measures this config.
                claimed.pop(task.claim, None)
                if task.claim is not None:
                    db.release(task.claim)
                if not record.retry:
                    raise InfrastructureError(
                        f"{record.message}; the sweep stopped without recording this "
                        f"config ({tally.committed} record(s) of this run are committed); "
                        "fix it and run the sweep again to resume")
                # Named and counted, never dropped: the progress total keeps it, the summary
                # names it and `paradnn sweep` exits 1.
                name = progress_lines.config_name(task.workload, bar.frameworks)
                (tally.missing if lost is None else lost).append((name, task.key, record.message))
                bar.miss()
                if stream is not None:
                    stream.write(f"\nparadnn sweep: missing {name} (not recorded; the next run "
                                 f"measures it): {record.message}\n")
                continue
            if stored is not None:
                record = stored(task, record)
            t_store = time.perf_counter()
            if db.add(record, claim=task.claim):  # False: that exact row was already stored
                tally.rows.append((record.key, record.time_utc))
            tally.store_s += time.perf_counter() - t_store
            tally.phase_rows.append(record.metrics)
            tally.committed += 1
            claimed.pop(task.claim, None)
            tally.written.add(record.key)
            if record.key not in (task.key, *task.keys) and not warned and stream is not None:
                warned = True
                stream.write(
                    "\nparadnn sweep: warning: a record's key differs from the one "
                    "predicted from this host's platform and software; resume will "
                    "not recognise such records\n")
            bar.update(record)
    except StoreError as exc:
        raise StoreError(f"{exc} ({tally.committed} record(s) of this run were committed "
                         "before and are kept)") from None
    finally:
        bar.close()
        for claim in list(claimed):
            try:
                db.release(claim)
            except Exception:  # noqa: BLE001 - best effort; dead claims expire anyway
                pass


def retry_budget_s(settings: Any) -> float:
    """The time budget (s) of an automatic retry under ``settings`` (a MeasureSettings):
    ``RETRY_BUDGET_FACTOR`` times its ``time_budget_s``, capped by the setting's own maximum
    (a day)."""
    return min(settings.time_budget_s * RETRY_BUDGET_FACTOR, max(settings.time_budget_s, 86_400.0))


def retry_would_help(row: Mapping[str, Any]) -> bool:
    """Whether the automatic retry would measure the config of stored row ``row`` again (before
    counting the time bound): an ok row whose timing missed its precision target and ended at
    its time budget on a quiet host. A timing that ended at ``max_calls`` is not retried: a
    longer budget would time the same calls again (a longer warm-up aside); nor is one measured
    while other processes kept the host busy (``contended``): its spread is the load's.
    ``paradnn plan`` and the progress line estimate the retries with it."""
    return (unstable_ok(row) and not _number(row.get("timed_calls")) >= _number(row.get("max_calls")) > 0
            and not row.get("contended"))


def _number(value: Any) -> float:
    """A stored number (seconds, a count), 0.0 where none was recorded."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return value if value == value else 0.0


def _retry_estimate_s(row: Mapping[str, Any], budget_s: float) -> float:
    """Seconds a retry of the config of stored row ``row`` should take: the row's own wall time
    (``phase_total_s``, else compile + timing) with its timing phase replaced by the longer
    budget (or by its own timing, when a slow model's minimum of calls outlasted the budget)."""
    timing = _number(row.get("timing_s"))
    wall = _number(row.get("phase_total_s")) or _number(row.get("compile_s")) + timing
    return max(wall - timing, 0.0) + max(budget_s, timing)


def _retry_unstable(config: SweepConfig, resume: _Resume, ex: Any, db: Store,
                    stream: IO[str] | None, tally: _Tally) -> None:
    """Measure once more, with ``RETRY_BUDGET_FACTOR`` times the time budget, each config of this
    sweep whose ok rows all missed their precision target and that has no retry yet (so resume
    never repeats one, and a sweep stopped before its retries does them on resume), in grid
    order, while the extra time stays within ``config.retry_unstable_s``.

    A retry starts only if the time spent on retries so far, plus the estimates of the retries
    running, plus its own estimate (:func:`_retry_estimate_s`) fit in the bound; one that takes
    longer than estimated is not cut short, so the bound can be passed by that error only. The
    retry's row keeps the settings asked for (the config's record key: it counts for the
    config on resume) and ``time_budget_used_s`` says the budget it ran with; both rows stay."""
    if config.retry_unstable_s <= 0:
        return
    rows: dict[str, list[dict[str, Any]]] = {}
    # A config's rows under any measuring platform's key (a mixed Ray cluster) are its rows.
    primary = {alt: key for key, alts in resume.alternates.items() for alt in alts}
    for row in db.rows():
        key = primary.get(row.get("key"), row.get("key"))
        if key in resume.keyed:
            rows.setdefault(key, []).append(row)
    candidates = []
    for key in resume.keyed:
        mine = rows.get(key, [])
        ok = [r for r in mine if r.get("status") == "ok"]
        if ok and all(unstable_ok(r) for r in ok) and not any(is_retry(r) for r in mine):
            if ok[-1].get("contended"):
                # Measured while other processes were busy: its spread is theirs, and a longer
                # budget under the same load buys little; measured again once the host is quiet.
                tally.retry_contended += 1
                continue
            if not retry_would_help(ok[-1]):  # its timing ended at max_calls
                tally.retry_useless += 1
                continue
            candidates.append((key, ok[-1], len(current_rows(mine))))
    if not candidates:
        return
    # The host whose load matters is the one the configs run on: this one, except on Ray (whose
    # nodes record their own load in each row, and a contended row is not retried above).
    busy = (None if config.executor == "ray"
            else _wait_for_quiet(min(QUIET_WAIT_S, config.retry_unstable_s), stream))
    if busy is not None:
        tally.retry_busy, tally.retry_busy_cores = len(candidates), busy
        return
    asked = config.settings
    budget_s = retry_budget_s(asked)
    longer = asked.replace(time_budget_s=budget_s)
    tally.retry_candidates, tally.retry_budget_s = len(candidates), budget_s
    tally.retry_bound_s = config.retry_unstable_s
    if stream is not None:
        stream.write(f"paradnn sweep: {len(candidates)} config(s) came back unstable (step time "
                     f"cv above cv_target {asked.cv_target * 100:.3g}%); measuring them once more with "
                     f"a {budget_s:g} s time budget ({RETRY_BUDGET_FACTOR}x), within "
                     f"{config.retry_unstable_s:g} s of extra time (retry_unstable_s)\n")
        stream.flush()
    claimed: dict[int, Task] = {}
    running: dict[int, float] = {}  # claim -> estimated seconds of a retry handed out
    start = time.perf_counter()

    def tasks() -> Iterator[Task]:
        for key, row, stored_rows in candidates:
            estimate_s = _retry_estimate_s(row, budget_s)
            spent = time.perf_counter() - start + sum(running.values())
            if spent + estimate_s > config.retry_unstable_s:
                tally.retry_left += 1
                continue
            # One more row than the store has: a concurrent sweep retrying it takes it first.
            claim = db.claim(key, stored_rows + 1, config.stale_after_s, unstable=True)
            if claim is None:
                continue
            task = Task(resume.keyed[key], longer, config.memory_limit_bytes, key, claim,
                        resume.alternates.get(key, ()))
            claimed[claim] = task
            running[claim] = estimate_s
            yield task

    replaced = {key: str(row.get("time_utc")) for key, row, _ in candidates}
    frameworks = {w.framework for w in config.workloads}  # named in the lines where they differ

    def as_asked(task: Task, record: Record) -> Record:
        running.pop(task.claim, None)
        record = dataclasses.replace(record, settings={**record.settings,
                                                       "time_budget_s": asked.time_budget_s},
                                     metrics={**record.metrics, "time_budget_used_s": budget_s,
                                              "retry_of": replaced.get(task.key)})
        tally.retried += 1
        stable = record.status == "ok" and bool(record.metrics.get("stable"))
        tally.retried_stable += stable
        if stream is not None:
            cv = record.metrics.get("step_time_cv")
            how = (record.status if record.status != "ok" else
                   f"{'stable now' if stable else 'still unstable'}"
                   + (f" (cv {cv:.2%})" if isinstance(cv, (int, float)) else ""))
            stream.write(f"paradnn sweep: retried {progress_lines.config_name(task.workload, frameworks)}: "
                         f"{how}\n")
            stream.flush()
        return record

    def beat(task: Task, phase: str, phase_s: float, total_s: float) -> None:
        if stream is not None:  # no progress bar is drawn for the retries: plain lines
            stream.write(progress_lines.line(progress_lines.config_name(task.workload, frameworks),
                                             phase, phase_s, total_s,
                                             prefix="paradnn sweep") + "\n")
            stream.flush()

    ex.watch(started=None, waiting=beat, every_s=progress_lines.EVERY_S)
    try:
        # A lost retry leaves the config's first row: it is not missing, only not retried.
        _commit(ex.execute(tasks()), claimed, db, Progress(0, 0, None), stream, tally, as_asked,
                lost=tally.retry_lost)
    finally:
        tally.retry_s = time.perf_counter() - start


#: Seconds a sweep waits, before its automatic retries, for the host to become quiet (other
#: processes' CPU cores within the contention threshold); at most its ``retry_unstable_s``.
QUIET_WAIT_S = 30.0
#: Seconds of one reading of the host's load while waiting.
_QUIET_SAMPLE_S = 1.0


def _wait_for_quiet(wait_s: float, stream: IO[str] | None) -> float | None:
    """Wait up to ``wait_s`` seconds for the host to be quiet: other processes' busy CPU cores
    over one :data:`_QUIET_SAMPLE_S` reading within :func:`paradnn.hostutil.max_other_cores`.
    Returns None once quiet (or where /proc/stat cannot tell), else the cores the last reading
    saw busy: a retry under that load would measure the load, not the config."""
    from paradnn import hostutil

    limit = hostutil.max_other_cores()
    deadline = time.perf_counter() + wait_s
    said = False
    while True:
        window = hostutil.HostWindow()
        window.start()
        time.sleep(_QUIET_SAMPLE_S)
        other = window.stop().other_busy_cores
        if other is None or other <= limit:
            return None
        if time.perf_counter() + _QUIET_SAMPLE_S > deadline:
            return other
        if not said and stream is not None:
            stream.write(f"paradnn sweep: the host is busy (other processes keep {other:.2f} CPU cores "
                         f"busy > {limit:g}); waiting up to {wait_s:.0f} s for quiet before retrying "
                         "unstable configs\n")
            stream.flush()
            said = True


def _summarize(stream: IO[str] | None, tally: _Tally) -> None:
    """The sweep's last lines: where this run's time went, the retries of unstable configs, and
    the configs not recorded."""
    if stream is not None and tally.phase_rows:
        totals = phase_totals(tally.phase_rows)
        stream.write(f"paradnn sweep: where the time went, summed over the "
                     f"{len(tally.phase_rows)} record(s) of this run: "
                     f"{format_phase_totals(totals)}; store writes {tally.store_s:.2f} s; "
                     f"set-up before the first config {tally.setup_s or 0.0:.2f} s (its "
                     "worker start-up is also its first record's startup); "
                     f"sweep wall time {time.perf_counter() - tally.start:.2f} s "
                     "(docs/metrics.md, Phases)\n")
    if stream is not None and tally.retry_useless:
        stream.write(f"paradnn sweep: {tally.retry_useless} unstable config(s) not retried: their "
                     "timing ended at max_calls timed calls, which a longer time budget does not "
                     "change (raise max_calls, or measure them again on a quieter host with "
                     "--remeasure-unstable)\n")
    if stream is not None and tally.retry_contended:
        stream.write(f"paradnn sweep: {tally.retry_contended} unstable config(s) not retried: they were "
                     "measured while other processes kept the host busy (contended), where a longer "
                     "budget measures the load; measure them again on a quiet host with "
                     "--remeasure-unstable (`paradnn status` prints the recipe)\n")
    if stream is not None and tally.retry_busy:
        stream.write(f"paradnn sweep: {tally.retry_busy} unstable config(s) not retried: the host stayed "
                     f"busy ({tally.retry_busy_cores:.2f} CPU cores of other processes) for "
                     f"{QUIET_WAIT_S:g} s; measure them again on a quiet host with --remeasure-unstable\n")
    if stream is not None and tally.retry_candidates:
        left = tally.retry_left
        stream.write(f"paradnn sweep: {tally.retried} of {tally.retry_candidates} unstable "
                     f"config(s) measured again with a {tally.retry_budget_s:g} s time budget "
                     f"({RETRY_BUDGET_FACTOR}x) in {tally.retry_s:.1f} s, {tally.retried_stable} "
                     "of them stable now"
                     + (f"; {left} not retried within the {tally.retry_bound_s:g} s of extra time "
                        "(--retry-unstable-s / run.retry_unstable_s: more time; `paradnn status` "
                        "prints the --remeasure-unstable recipe)" if left else "")
                     + (f"; {len(tally.retry_lost)} retry(ies) lost to infrastructure faults"
                        if tally.retry_lost else "") + "\n")
    if tally.missing and stream is not None:
        stream.write(f"paradnn sweep: {len(tally.missing)} config(s) missing: infrastructure "
                     "faults left them unrecorded (never stored as results); run the sweep again "
                     "to measure them:\n"
                     + "".join(f"  {name} [key {key}]: {why}\n" for name, key, why in tally.missing))
