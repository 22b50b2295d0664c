"""What one sweep run keeps while it runs: which configs it measures (:class:`Resume`), what
it did for its end summary (:class:`Tally`), and the commit of each record the moment the
executor gives it (:func:`commit`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

from paradnn import progress as progress_lines
from paradnn.errors import InfrastructureError, StoreError
from paradnn.executors import Fault, Task
from paradnn.record import Record
from paradnn.store import Store
from paradnn.sweeper.display import Progress
from paradnn.workload import Workload

__all__ = ["Resume", "Tally", "commit"]


@dataclasses.dataclass(frozen=True)
class Resume:
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
class Tally:
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


def commit(results: Iterator[tuple[Task, Any]], claimed: dict[int, Task], db: Store,
            bar: Progress, stream: IO[str] | None, tally: Tally,
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

