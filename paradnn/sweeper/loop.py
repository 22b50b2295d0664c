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

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import pandas as pd

from paradnn import frameworks
from paradnn import progress as progress_lines
from paradnn.errors import InfrastructureError, SpecError
from paradnn.executors import RunFn, Task, make_executor
from paradnn.grids.runsettings import RETRY_BUDGET_FACTOR
from paradnn.grids.sweepfile import GridLike
from paradnn.record import Record, format_phase_totals, phase_totals, record_key, row_key, unstable_ok
from paradnn.runner import platform_problem
from paradnn.store import Store, current_rows
from paradnn.sweeper import retry
from paradnn.sweeper.config import SweepConfig
from paradnn.sweeper.display import Progress, progress_estimates
from paradnn.sweeper.estimates import retry_budget_s
from paradnn.sweeper.stacks import resolve_best, with_calibration
from paradnn.sweeper.state import Resume, Tally, commit
from paradnn.workload import Workload, short_name

__all__ = ["sweep", "check_platform"]


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
    tally = Tally(start=time.perf_counter())
    # best_stack: each family's framework chosen (a stored calibration, or one measured now)
    # before any worker starts, so that the calibration has the machine to itself.
    config = resolve_best(config, stream)
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
            retry.retry_unstable(config, resume, ex, db, stream, tally)
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


def _key_configs(config: SweepConfig, ex: Any, db: Store) -> Resume:
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
    return Resume(keyed, counts, platform, replaces, alternates)


def _progress_bar(config: SweepConfig, resume: Resume, db: Store,
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


def _execute(config: SweepConfig, resume: Resume, ex: Any, db: Store, bar: Progress,
             stream: IO[str] | None, tally: Tally) -> None:
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

    def stored(task: Task, record: Record) -> Record:
        record = with_calibration(config, task.workload, record)
        # A remeasurement of an unstable config names the attempt it replaces (once per config).
        named = resume.replaces.pop(task.key, None)
        return record.with_metrics(retry_of=named) if named and record.key == task.key else record

    commit(ex.execute(tasks()), claimed, db, bar, stream, tally,
           stored if resume.replaces or config.calibrations else None)



def _summarize(stream: IO[str] | None, tally: Tally) -> None:
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
                     f"{retry.QUIET_WAIT_S:g} s; measure them again on a quiet host with --remeasure-unstable\n")
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
