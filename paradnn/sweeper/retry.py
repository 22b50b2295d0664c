"""The automatic retry of unstable configs: after the other configs, each config whose ok rows
all missed their precision target is measured once more with ``RETRY_BUDGET_FACTOR`` times its
time budget, within the sweep's ``retry_unstable_s``; and the one estimate of what a retry
costs (:func:`retry_estimate_s`), which the progress line and ``paradnn plan`` use too."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import IO, Any

from paradnn import progress as progress_lines
from paradnn.executors import Task
from paradnn.grids.runsettings import RETRY_BUDGET_FACTOR
from paradnn.measure import precision_text, rule_text
from paradnn.record import Record, is_retry, unstable_ok
from paradnn.store import Store, current_rows
from paradnn.sweeper.config import SweepConfig
from paradnn.sweeper.display import Progress
from paradnn.sweeper.estimates import retry_budget_s, retry_estimate_s, retry_would_help
from paradnn.sweeper.stacks import with_calibration
from paradnn.sweeper.state import Resume, Tally, commit

__all__ = ["RETRY_BUDGET_FACTOR", "QUIET_WAIT_S", "retry_budget_s", "retry_would_help",
           "retry_estimate_s", "retry_unstable", "wait_for_quiet"]


def retry_unstable(config: SweepConfig, resume: Resume, ex: Any, db: Store,
                    stream: IO[str] | None, tally: Tally) -> None:
    """Measure once more, with ``RETRY_BUDGET_FACTOR`` times the time budget, each config of this
    sweep whose ok rows all missed their precision target and that has no retry yet (so resume
    never repeats one, and a sweep stopped before its retries does them on resume), in grid
    order, while the extra time stays within ``config.retry_unstable_s``.

    A retry starts only if the time spent on retries so far, plus the estimates of the retries
    running, plus its own estimate (:func:`retry_estimate_s`) fit in the bound; one that takes
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
            else wait_for_quiet(min(QUIET_WAIT_S, config.retry_unstable_s), stream))
    if busy is not None:
        tally.retry_busy, tally.retry_busy_cores = len(candidates), busy
        return
    asked = config.settings
    budget_s = retry_budget_s(asked)
    longer = asked.replace(time_budget_s=budget_s)
    tally.retry_candidates, tally.retry_budget_s = len(candidates), budget_s
    tally.retry_bound_s = config.retry_unstable_s
    if stream is not None:
        stream.write(f"paradnn sweep: {len(candidates)} config(s) came back unstable (their precision target "
                     f"missed: {rule_text(asked)}); measuring them once more with "
                     f"a {budget_s:g} s time budget ({RETRY_BUDGET_FACTOR}x), within "
                     f"{config.retry_unstable_s:g} s of extra time (retry_unstable_s)\n")
        stream.flush()
    claimed: dict[int, Task] = {}
    running: dict[int, float] = {}  # claim -> estimated seconds of a retry handed out
    start = time.perf_counter()

    def tasks() -> Iterator[Task]:
        for key, row, stored_rows in candidates:
            estimate_s = retry_estimate_s(row, budget_s)
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
        record = with_calibration(config, task.workload, record)
        record = dataclasses.replace(record, settings={**record.settings,
                                                       "time_budget_s": asked.time_budget_s},
                                     metrics={**record.metrics, "time_budget_used_s": budget_s,
                                              "retry_of": replaced.get(task.key)})
        tally.retried += 1
        stable = record.status == "ok" and bool(record.metrics.get("stable"))
        tally.retried_stable += stable
        if stream is not None:
            how = (record.status if record.status != "ok" else
                   f"{'stable now' if stable else 'still unstable'}"
                   + (f" ({precision_text({**asked.to_dict(), **record.settings, **record.metrics})})"
                      if isinstance(record.metrics.get("step_time_cv"), (int, float)) else ""))
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
        commit(ex.execute(tasks()), claimed, db, Progress(0, 0, None), stream, tally, as_asked,
                lost=tally.retry_lost)
    finally:
        tally.retry_s = time.perf_counter() - start


#: Seconds a sweep waits, before its automatic retries, for the host to become quiet (other
#: processes' CPU cores within the contention threshold); at most its ``retry_unstable_s``.
QUIET_WAIT_S = 30.0
#: Seconds of one reading of the host's load while waiting.
_QUIET_SAMPLE_S = 1.0


def wait_for_quiet(wait_s: float, stream: IO[str] | None) -> float | None:
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

