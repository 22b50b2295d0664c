"""Run sweep configs in the calling process: the cheapest executor, with no isolation.

A config that crashes the interpreter ends the sweep (its earlier records are already committed)
and there is no time limit. Use it in notebooks for small grids and for debugging; sweeps default
to the child-process executor.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from paradnn import frameworks
from paradnn.errors import ParadnnError
from paradnn.executors import (
    Caches,
    Executor,
    Outcome,
    RunFn,
    Task,
    charge,
    check_environment,
    exclusive,
    local_context,
    run_config,
)
from paradnn.record import Record


class InProcessExecutor(Executor):
    name = "inprocess"

    def __init__(self, cache_dir: str | os.PathLike | None, run_fn: RunFn | None = None):
        self.run_fn = run_fn
        # Compilation caches are process-wide framework settings: each framework's is pointed at
        # cache_dir when it first runs here, and the caller's settings come back on close.
        self._caches = Caches(cache_dir)
        self._contexts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        #: framework -> seconds its start took that no record has been charged yet.
        self._unbilled: dict[str, float] = {}

    def context(self, framework: str = frameworks.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
        if framework not in self._contexts:
            if exclusive(framework, set(self._contexts)):
                # Their native libraries abort the process (TensorFlow and PyTorch): say so
                # before anything runs, rather than lose the sweep to a SIGABRT mid-way.
                raise ParadnnError(
                    f"framework {framework!r} cannot run in the same process as "
                    f"{', '.join(sorted(self._contexts))} (their native libraries clash); use "
                    "executor='process', which gives each framework its own child process")
            t0 = time.perf_counter()
            self._caches.ensure(framework)
            context = local_context(framework)
            check_environment(context[0])
            self._contexts[framework] = context
            # Starting the framework here is charged to its first config (phase_startup_s).
            self._unbilled[framework] = time.perf_counter() - t0
        return self._contexts[framework]

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Outcome]]:
        for task in tasks:
            context = self.context(task.workload.framework)  # starts the framework the first time
            t_run = time.perf_counter()
            outcome = run_config(self.run_fn, task.workload, task.settings,
                                 task.memory_limit_bytes, context)
            if isinstance(outcome, Record):
                outcome = charge(outcome, self._unbilled.pop(task.workload.framework, 0.0),
                                 time.perf_counter() - t_run)
            yield task, outcome

    def close(self) -> None:
        self._caches.restore()
