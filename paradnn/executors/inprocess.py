"""Run sweep configs in the calling process: the cheapest executor, with no isolation.

A config that crashes the interpreter ends the sweep (its earlier records are already committed)
and there is no time limit. Use it in notebooks for small grids and for debugging; sweeps default
to the child-process executor.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from paradnn import backends
from paradnn.executors import (Caches, Executor, Outcome, RunFn, Task, check_environment, local_context,
                               run_config)


class InProcessExecutor(Executor):
    name = "inprocess"

    def __init__(self, cache_dir: str | os.PathLike | None, run_fn: RunFn | None = None):
        self.run_fn = run_fn
        # Compilation caches are process-wide framework settings: each framework's is pointed at
        # cache_dir when it first runs here, and the caller's settings come back on close.
        self._caches = Caches(cache_dir)
        self._contexts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

    def context(self, framework: str = backends.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
        if framework not in self._contexts:
            self._caches.ensure(framework)
            context = local_context(framework)
            check_environment(context[0])
            self._contexts[framework] = context
        return self._contexts[framework]

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Outcome]]:
        for task in tasks:
            yield task, run_config(self.run_fn, task.workload, task.settings,
                                   task.memory_limit_bytes, self.context(task.workload.framework))

    def close(self) -> None:
        self._caches.restore()
