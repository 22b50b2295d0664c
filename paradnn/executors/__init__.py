"""Executors run sweep configs and hand back one Record per config.

* ``inprocess``: in the calling process; no isolation (a crash ends the sweep, no timeout).
* ``process`` (default): in child Python processes, one per framework, each reused across that
  framework's configs; a config that kills its process is recorded ``crashed``, one that exceeds the time limit ``timeout``, and a fresh
  child continues with the next config.
* ``ray``: one Ray task per config on a cluster; each task runs its config in a child process on
  its worker node the same way, and results stream back to the driver, which writes the store.

An executor never writes the store: the sweep driver does, one committed row per record, so a
driver killed at any point loses at most the configs in flight.

Failure taxonomy. A config's own outcomes are records: ``oom``, ``error`` (an exception of the
workload), ``timeout``, ``crashed`` (its process died; the record says whether by a signal or by
exiting with a status). A fault of the environment is a :class:`Fault`, never a record: an
``OSError`` (an unwritable cache, a full disk, a permission), a framework's device platform that
cannot start, a Ray task lost on every attempt. The sweep driver releases the config's claim and either
stops with one line (``retry=False``: every config would meet the same fault) or goes on without
it (``retry=True``), naming it as missing at the end (``paradnn sweep`` exits 1); either way the
next run of the sweep measures the config.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from paradnn import frameworks, hardware, spawn
from paradnn.errors import InfrastructureError, ParadnnError
from paradnn.record import PHASES, Record, phase_metric
from paradnn.workload import Workload

__all__ = ["Task", "Fault", "Outcome", "Executor", "Caches", "make_executor", "default_cache_dir",
           "check_environment", "run_config", "charge", "EXECUTORS"]

#: ``run_fn(workload, settings, memory_limit_bytes) -> Record``; None means
#: ``paradnn.runner.run_workload``. Must be a picklable top-level function for the process and
#: Ray executors.
RunFn = Callable[..., Record]


@dataclass(frozen=True)
class Task:
    """One measurement to make: a workload, its settings, the key its record is expected to have,
    and the store claim that reserves it."""

    workload: Workload
    settings: Any  # paradnn.measure.MeasureSettings
    memory_limit_bytes: int | None
    key: str
    claim: int | None = None
    #: Every key a record of this config may have (``key`` first): one per measuring platform
    #: of a mixed cluster (:meth:`Executor.contexts`); empty means ``(key,)``.
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fault:
    """An infrastructure fault met while running a task: not the workload's result, never stored.

    ``retry`` True: leave the config unrecorded, go on, and name it missing at the end (a Ray task
    lost on every attempt); False: stop the sweep,
    since every config would meet it (an unwritable cache, a full disk, an absent platform).
    """

    message: str
    retry: bool = False


#: What running one task gives: the workload's record, or an infrastructure fault.
Outcome = Union[Record, Fault]


class Executor:
    """Interface: ``context(framework)`` gives (platform, software) of where configs of that
    framework run (what their records and resume keys carry); ``execute``
    yields ``(task, outcome)`` as configs finish (a Record, or a :class:`Fault`), pulling tasks
    lazily from the iterator."""

    name = "executor"

    def context(self, framework: str = frameworks.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
        raise NotImplementedError

    def contexts(self, framework: str = frameworks.DEFAULT) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Every distinct (platform, software) where configs of ``framework`` may run, the one
        of :meth:`context` first: more than one on a mixed cluster, whose nodes' records carry
        their own platform (and so their own keys, all of which resume counts)."""
        return [self.context(framework)]

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Outcome]]:
        raise NotImplementedError

    def watch(self, started: Callable[[Task], None] | None = None,
              waiting: Callable[[Task, str, float, float], None] | None = None,
              every_s: float | None = None) -> bool:
        """Ask to be told when a config's measurement starts (``started(task)``) and, every
        ``every_s`` seconds (default :data:`paradnn.progress.EVERY_S`) while one runs,
        ``waiting(task, phase, phase_s, total_s)``: the phase in force (its name, seconds in it)
        and the seconds since the config started. Returns whether this executor calls
        ``started``; one that does not (the base) starts a config when it pulls it from the
        iterator, so the caller says so itself then."""
        return False

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/paradnn/xla`` (default ``~/.cache/paradnn/xla``): the folder every
    framework's compilation cache is pointed at (``Backend.configure_cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "paradnn" / "xla"


class Caches:
    """The compilation caches of the frameworks one process runs: each framework's is pointed
    at ``cache_dir`` (``Backend.configure_cache``; None leaves them as they are) the first time
    a config of that framework runs here, and :meth:`restore` gives back the previous settings.
    An unwritable folder is an InfrastructureError from the framework that met it."""

    def __init__(self, cache_dir: str | os.PathLike | None):
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self._restore: dict[str, Callable[[], None]] = {}

    def ensure(self, framework: str) -> None:
        """Point ``framework``'s compilation cache at the folder (once). The folder is checked
        here for every framework, before its ``configure_cache``: a framework that only sets a
        variable (torch's Inductor) would otherwise meet the unwritable folder while compiling a
        config, and the environment's fault would look like the config's."""
        if framework not in self._restore:
            if self.cache_dir is not None:
                hardware.check_writable(Path(self.cache_dir), "the compilation cache folder",
                                        "pass --cache-dir DIR with a writable folder, or --no-cache")
            self._restore[framework] = frameworks.get(framework).configure_cache(self.cache_dir)

    def restore(self) -> None:
        for framework in reversed(list(self._restore)):
            self._restore.pop(framework)()


def check_environment(platform: dict[str, Any]) -> None:
    """Faults of the environment that would make every config fail, found before the first one
    runs: where the device has no spec-sheet peak (a CPU), utilization needs the measured peak of
    ``paradnn probe``, which is cached in a file; that folder must be writable."""
    if platform["device_platform"] == "cpu" or hardware.spec_peak(platform["device_kind"]) is None:
        hardware.check_cache_folder()


def exclusive(framework: str, loaded: set[str]) -> bool:
    """Whether ``framework`` must not join a process that has run ``loaded`` frameworks (their
    native libraries clash: ``FrameworkInfo.exclusive_with``, declared by either side)."""
    return any(other in frameworks.meta(framework).exclusive_with or framework in frameworks.meta(other).exclusive_with
               for other in loaded if other != framework)


def charge(record: Record, startup_s: float, wall_s: float) -> Record:
    """A copy of ``record`` with the executor's share of its phases (``paradnn.record.PHASES``):
    ``phase_startup_s`` (s a worker took to start for it), ``phase_executor_s`` (``wall_s``, the
    seconds the executor waited for the worker's reply, minus the worker's own run) and
    ``phase_total_s``. A record the worker did not time (a crash, a timeout, a test's
    ``run_fn``) gets the whole wait as ``phase_other_s``."""
    m = dict(record.metrics)  # a record is frozen: the charged copy is a new record
    worker_s = m.get("phase_total_s")
    if worker_s is None:
        m["phase_other_s"] = wall_s
        m["phase_executor_s"] = 0.0
    else:
        worker_s -= (m.get("phase_startup_s") or 0.0) + (m.get("phase_executor_s") or 0.0)
        m["phase_executor_s"] = max(wall_s - worker_s, 0.0)
    m["phase_startup_s"] = startup_s
    m["phase_total_s"] = sum(m.get(phase_metric(p)) or 0.0 for p in PHASES)
    return record.with_metrics(m)


def resolve_run_fn(run_fn: RunFn | None) -> RunFn:
    if run_fn is not None:
        return run_fn
    from paradnn.runner import run_workload

    return run_workload


def local_context(framework: str = frameworks.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
    """(platform, software) of ``framework`` in this process, as the runner records them. A
    backend that cannot start (``JAX_PLATFORMS`` naming a platform this host lacks) is an
    InfrastructureError: it is the first use of the backend, so its RuntimeError is that. A
    framework that is not installed is a SpecError (the user's choice), naming the extra."""
    from paradnn.runner import context

    try:
        return context(framework)
    except ParadnnError:
        raise
    except Exception as exc:  # noqa: BLE001 - the framework's first use: its failure is the environment's
        # JAX raises RuntimeError for an unknown platform, and an AssertionError with no message
        # when a platform's plugin is installed but cannot start (JAX_PLATFORMS=cuda, no GPU).
        text = str(exc).strip()
        first = f"{type(exc).__name__}: {text.splitlines()[0]}" if text else (
            f"{type(exc).__name__} (no message) while starting its devices")
        platforms = {k: v for k, v in os.environ.items() if k.endswith("_PLATFORMS")}
        raise InfrastructureError(
            f"{framework} cannot start a backend ({', '.join(f'{k}={v!r}' for k, v in platforms.items()) or 'no *_PLATFORMS set'}): "
            f"{first[:300]}") from None


def run_config(run_fn: RunFn | None, workload: Workload, settings: Any,
               memory_limit_bytes: int | None,
               context: tuple[dict[str, Any], dict[str, Any]]) -> Outcome:
    """Run one config. An exception of the workload (a bug, or a SpecError such as too many
    devices for this host) becomes an ``error`` record so that the sweep goes on; an OSError or
    InfrastructureError (the environment's fault: a cache, a disk, a permission) becomes a
    :class:`Fault`, which is never stored."""
    try:
        record = resolve_run_fn(run_fn)(workload, settings, memory_limit_bytes)
    except InfrastructureError as exc:
        return Fault(str(exc), retry=exc.retry)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        return Fault(f"{type(exc).__name__}: {exc.strerror or exc}{where} while running "
                     f"{workload.key}; an environment fault, not the workload's")
    except Exception as exc:  # noqa: BLE001 - every outcome of the workload is a row
        platform, software = context
        return Record.failed(workload, "error", f"{type(exc).__name__}: {exc}"[:4000],
                             platform=dict(platform), software=dict(software),
                             settings=settings.to_dict(workload.framework))
    if not isinstance(record, Record):
        platform, software = context
        return Record.failed(workload, "error",
                             f"run function returned {type(record).__name__}, not a Record",
                             platform=dict(platform), software=dict(software),
                             settings=settings.to_dict(workload.framework))
    return record


def _process(*, timeout_s: float, cache_dir: str | os.PathLike | None, run_fn: RunFn | None,
             overlap: int | str, **_ray: Any) -> Executor:
    from paradnn.executors.process import ProcessExecutor

    return ProcessExecutor(timeout_s=timeout_s, cache_dir=cache_dir, run_fn=run_fn, overlap=overlap)


def _inprocess(*, cache_dir: str | os.PathLike | None, run_fn: RunFn | None, **_other: Any) -> Executor:
    from paradnn.executors.inprocess import InProcessExecutor

    return InProcessExecutor(cache_dir=cache_dir, run_fn=run_fn)


def _ray(*, timeout_s: float, cache_dir: str | os.PathLike | None, run_fn: RunFn | None,
         address: str | None, resources: dict[str, Any] | None, **_other: Any) -> Executor:
    from paradnn.executors.ray import RayExecutor

    return RayExecutor(timeout_s=timeout_s, cache_dir=cache_dir, run_fn=run_fn, address=address,
                       resources=resources)


#: The executors by name: each a factory taking the keywords of :func:`make_executor` (the
#: ones it does not use are ignored). The ``executor`` run setting
#: (:mod:`paradnn.grids.runsettings`), the flag and the sweep file's key accept these names.
EXECUTORS: dict[str, Callable[..., Executor]] = {"process": _process, "inprocess": _inprocess, "ray": _ray}


def make_executor(name: str, *, timeout_s: float, cache_dir: str | os.PathLike | None,
                  run_fn: RunFn | None = None, address: str | None = None,
                  resources: dict[str, Any] | None = None, overlap: int | str = 0) -> Executor:
    """An executor by name (:data:`EXECUTORS`). ``overlap`` (``"auto"`` or a count, as
    :func:`paradnn.grids.runsettings.parse_overlap` gives it): prepare workers compiling ahead,
    process executor only (docs/performance.md, "Compiling ahead")."""
    from paradnn.grids.runsettings import check_overlap, parse_executor, parse_overlap

    name = parse_executor(name)
    overlap = parse_overlap(overlap)
    check_overlap(name, overlap)
    if name != "process":
        # A measuring worker `paradnn sweep` pre-started is of no use to the others: it goes now,
        # rather than import a framework beside them.
        spawn.discard()
    return EXECUTORS[name](timeout_s=timeout_s, cache_dir=cache_dir, run_fn=run_fn, address=address,
                           resources=resources, overlap=overlap)
