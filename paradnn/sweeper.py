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
that config, and the next run measures it. A store that cannot take a row (a full disk) stops the
sweep with one :class:`~paradnn.errors.StoreError`; every row committed before is kept.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pandas as pd

from paradnn.analysis.cost import estimate
from paradnn.errors import InfrastructureError, SpecError, StoreError
from paradnn.executors import EXECUTORS, Fault, RunFn, Task, default_cache_dir, make_executor
from paradnn import progress as progress_lines
from paradnn.grids.sweepfile import MAX_REPEAT, GridLike, parse_overlap, resolve, resolve_settings
from paradnn.units import duration, parse_bytes, parse_duration, parse_int
from paradnn.record import STATUSES, Record, format_phase_totals, phase_totals, record_key
from paradnn.store import Store
from paradnn.workload import Workload, short_name

__all__ = ["sweep", "DEFAULT_TIMEOUT_S", "DEFAULT_CACHE"]

#: Seconds one config (compile + measurement) may take in the process and Ray executors.
DEFAULT_TIMEOUT_S = 1800.0


class _Default:
    def __repr__(self) -> str:
        return "<default: ~/.cache/paradnn/xla>"


#: Sentinel for "the sweep file's cache_dir, else ``executors.default_cache_dir()``".
DEFAULT_CACHE: Any = _Default()

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
    config times the configs left.
    """

    def __init__(self, total: int, skipped: int, stream: IO[str] | None, width: int = 20,
                 estimates: dict[str, float] | None = None,
                 planned: dict[str, int] | list[str] | None = None,
                 calibration: str | None = None):
        self.total, self.skipped, self.stream, self.width = total, skipped, stream, width
        self.counts = {s: 0 for s in STATUSES}
        self.done = 0
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

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        eta = self.eta()
        counts = " ".join(f"{s} {n}" for s, n in self.counts.items() if n or s in ("ok", "oom",
                                                                                 "error"))
        running = f" | running {self.running}" if self.running else ""
        return (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
                f"| {counts} | elapsed {duration(elapsed)} ETA "
                f"{'?' if eta is None else duration(eta)}{running}")

    def begin(self, workload: Workload) -> None:
        """A config is handed to the executor: name it on the line."""
        self.running = short_name(workload)
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


def sweep(
    grid_or_file: GridLike,
    store: str | os.PathLike = "results.db",
    executor: str | None = None,
    repeat: int | None = None,
    memory_limit_bytes: int | str | None = None,
    timeout_s: float | None = None,
    settings: Any = None,
    cache_dir: str | os.PathLike | None = DEFAULT_CACHE,
    progress: bool | IO[str] = True,
    run_fn: RunFn | None = None,
    address: str | None = None,
    resources: dict[str, Any] | None = None,
    max_configs: int | None = None,
    remeasure_unstable: bool = False,
    overlap: int | str | None = None,
) -> pd.DataFrame:
    """Measure every workload of a grid or sweep file into ``store``; return their rows.

    ``grid_or_file``: a list of :class:`~paradnn.workload.Workload` (``paradnn.grid(...)``) or the
    path of a YAML sweep file (docs/sweeps.md). Arguments left at None take the file's ``run``
    and ``settings`` values, then the defaults below.

    ``store``: SQLite file, created if missing (docs/schema.md). ``executor``: ``"process"``
    (default; child process per config with crash and time-limit isolation), ``"inprocess"`` or
    ``"ray"`` (``address`` HOST:PORT of the cluster, ``resources`` per task). ``repeat``: the
    number of records each config should have in the store (default 1): configs that already
    have them are skipped (resume), so ``repeat=2`` after a finished sweep measures each once
    more. ``memory_limit_bytes``: device memory in bytes (or "2GB") against which models are
    recorded ``oom`` before running; default the device's own where known. ``timeout_s``:
    seconds per config, compile included (default 1800; not enforced in-process).
    ``settings``: MeasureSettings or a dict overriding the file's. ``cache_dir``: persistent XLA
    compilation cache directory (default ``~/.cache/paradnn/xla``; None disables it).
    ``progress``: a progress line on stderr (True), on a given stream, or none (False).
    ``run_fn``: replaces ``paradnn.runner.run_workload`` (for tests: a picklable top-level
    function ``(workload, settings, memory_limit_bytes) -> Record``). ``max_configs``: the
    largest grid a sweep file may expand to (default: the file's ``run.max_configs``, else
    ``paradnn.grids.MAX_CONFIGS``), checked before expanding it. ``remeasure_unstable``: ``ok``
    rows that missed their precision target (``stable`` false) do not count towards ``repeat``,
    so those configs are measured again (the unstable rows stay in the store; analyses prefer
    stable rows). ``overlap``: ``"auto"`` (default) or a count of workers compiling the next configs
    while one is measured (process executor; auto is 1 on a GPU host, 0 elsewhere;
    docs/performance.md, "Compiling ahead").

    Returns the store's rows for this sweep's configs (all repeats, earlier runs included), one
    column per field, as :func:`paradnn.load` gives them.
    """
    plan = resolve(grid_or_file, max_configs)
    run = plan.run
    executor = executor if executor is not None else run.get("executor", "process")
    if executor not in EXECUTORS:
        raise SpecError("executor", executor, "one of " + ", ".join(EXECUTORS))
    repeat = repeat if repeat is not None else run.get("repeat", 1)
    if not isinstance(repeat, int):  # the input layer parses text; an API caller passes ints
        raise SpecError("repeat", repeat, f"an integer from 1 to {MAX_REPEAT} (records wanted per config)")
    repeat = parse_int(repeat, "repeat", maximum=MAX_REPEAT)
    limit = memory_limit_bytes if memory_limit_bytes is not None else run.get("memory_limit")
    limit = None if limit is None else parse_bytes(limit)
    timeout_s = timeout_s if timeout_s is not None else run.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout_s, (bool, str)):
        raise SpecError("timeout_s", timeout_s, "a positive, finite number of seconds")
    timeout_s = parse_duration(timeout_s, "timeout_s")
    if cache_dir is DEFAULT_CACHE:
        cache_dir = run.get("cache_dir", default_cache_dir())
    if cache_dir is not None:
        cache_dir = Path(os.path.expanduser(str(cache_dir)))
    address = address if address is not None else run.get("address")
    resources = resources if resources is not None else run.get("resources")
    if executor != "ray" and (address is not None or resources is not None):
        raise SpecError("address" if address is not None else "resources",
                        address if address is not None else resources,
                        "only with executor='ray'")
    overlap = parse_overlap(overlap if overlap is not None else run.get("overlap", "auto"))
    measure_settings = resolve_settings(plan, settings)
    stream: IO[str] | None = (sys.stderr if progress is True else None if progress is False
                              else progress)

    Progress.announce(stream, len(plan.workloads), plan.path)
    t_sweep = time.perf_counter()
    phase_rows: list[dict[str, Any]] = []  # the metrics of this run's records
    store_s = 0.0  # seconds spent committing rows (not in any record: they come after it)
    setup_s = None
    with Store(store) as db:
        with make_executor(executor, timeout_s=timeout_s, cache_dir=cache_dir, run_fn=run_fn,
                           address=address, resources=resources,
                           overlap=overlap) as ex:
            try:
                platform, software = ex.context()
            except InfrastructureError as exc:
                raise InfrastructureError(f"{exc}; nothing was run or recorded: fix it and run "
                                          "the sweep again to resume", retry=exc.retry) from None
            settings_dict = measure_settings.to_dict()
            keyed: dict[str, Workload] = {}
            for w in plan.workloads:
                # Each framework's records carry its own context (devices it sees, versions).
                fw_platform, fw_software = (platform, software) if w.framework == "jax" else ex.context(w.framework)
                key = record_key(w.to_dict(), fw_platform, fw_software, settings_dict)
                keyed.setdefault(key, w)
            counts = db.counts_by_key(keyed, unstable=not remeasure_unstable)
            todo = sum(max(0, repeat - counts.get(k, 0)) for k in keyed)
            skipped = sum(1 for k in keyed if counts.get(k, 0) >= repeat)
            # Measurements left per workload key: O(configs), whatever ``repeat`` is.
            planned: dict[str, int] = {}
            for key, w in keyed.items():
                if counts.get(key, 0) < repeat:
                    planned[w.key] = planned.get(w.key, 0) + repeat - counts.get(key, 0)
            estimates, calibration = ({}, None)
            if stream is not None and planned:
                estimates, calibration = progress_estimates(
                    [keyed[k] for k in keyed if counts.get(k, 0) < repeat], db.frame(),
                    platform, measure_settings, label=str(store))
            bar = Progress(todo, skipped, stream, estimates=estimates, planned=planned,
                           calibration=calibration)
            written: set[str] = set()
            stale_after_s = float(timeout_s) * 2 + 600
            claimed: dict[int, Task] = {}

            def beat(task: Task, phase: str, phase_s: float, total_s: float) -> None:
                bar.note(progress_lines.line(short_name(task.workload), phase, phase_s, total_s,
                                             prefix="paradnn sweep"))

            # An executor that looks ahead says itself when a config starts.
            reports_starts = ex.watch(started=lambda task: bar.begin(task.workload), waiting=beat,
                                      every_s=progress_lines.EVERY_S)

            def tasks() -> Iterator[Task]:
                # Claims are taken lazily, just before a config is handed to the executor, so
                # a concurrent sweep on the same store takes whatever this one has not started.
                # Start at the fewest records any config has: a resumed sweep does not walk
                # the repeats every config already has.
                first = min((counts.get(k, 0) for k in keyed), default=repeat)
                for rep in range(first, repeat):
                    for key, w in keyed.items():
                        if counts.get(key, 0) > rep:
                            continue
                        claim = db.claim(key, rep + 1, stale_after_s, unstable=not remeasure_unstable)
                        if claim is None:
                            bar.skip(w)
                            continue
                        task = Task(w, measure_settings, limit, key, claim)
                        claimed[claim] = task
                        if not reports_starts:
                            bar.begin(w)
                        yield task

            warned = False
            committed = unrecorded = 0
            setup_s = time.perf_counter() - t_sweep
            try:
                for task, record in ex.execute(tasks()):
                    if isinstance(record, Fault):
                        # Not the workload's result: nothing is stored and the claim goes back,
                        # so the next run of the sweep measures this config.
                        claimed.pop(task.claim, None)
                        if task.claim is not None:
                            db.release(task.claim)
                        if not record.retry:
                            raise InfrastructureError(
                                f"{record.message}; the sweep stopped without recording this "
                                f"config ({committed} record(s) of this run are committed); "
                                "fix it and run the sweep again to resume")
                        unrecorded += 1
                        bar.skip()
                        if stream is not None:
                            stream.write(f"\nparadnn sweep: not recorded (retried by the next "
                                         f"run): {record.message}\n")
                        continue
                    t_store = time.perf_counter()
                    db.add(record, claim=task.claim)
                    store_s += time.perf_counter() - t_store
                    phase_rows.append(record.metrics)
                    committed += 1
                    claimed.pop(task.claim, None)
                    written.add(record.key)
                    if record.key != task.key and not warned and stream is not None:
                        warned = True
                        stream.write(
                            "\nparadnn sweep: warning: a record's key differs from the one "
                            "predicted from this host's platform and software; resume will "
                            "not recognise such records\n")
                    bar.update(record)
            except StoreError as exc:
                raise StoreError(f"{exc} ({committed} record(s) of this run were committed "
                                 "before and are kept)") from None
            finally:
                bar.close()
                for claim in list(claimed):
                    try:
                        db.release(claim)
                    except Exception:  # noqa: BLE001 - best effort; dead claims expire anyway
                        pass
        frame = db.frame()
    if stream is not None and phase_rows:
        totals = phase_totals(phase_rows)
        stream.write(f"paradnn sweep: where the time went, summed over the {len(phase_rows)} "
                     f"record(s) of this run: {format_phase_totals(totals)}; store writes "
                     f"{store_s:.2f} s; set-up before the first config {setup_s or 0.0:.2f} s (its "
                     "worker start-up is also its first record's startup); "
                     f"sweep wall time {time.perf_counter() - t_sweep:.2f} s "
                     "(docs/metrics.md, Phases)\n")
    if unrecorded and stream is not None:
        stream.write(f"paradnn sweep: {unrecorded} config(s) met infrastructure faults and were "
                     "not recorded; run the sweep again to measure them\n")
    keys = set(keyed) | written
    return frame[frame["key"].isin(keys)].reset_index(drop=True)
