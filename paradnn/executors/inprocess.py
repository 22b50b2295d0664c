"""Run sweep configs in the calling process: the cheapest executor, with no isolation.

A config that crashes the interpreter ends the sweep (its earlier records are already committed)
and there is no time limit. Use it in notebooks for small grids and for debugging; sweeps default
to the child-process executor.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from paradnn.executors import (Executor, Outcome, RunFn, Task, check_environment,
                               configure_cache, local_context, restore_cache, run_config)


class InProcessExecutor(Executor):
    name = "inprocess"

    def __init__(self, cache_dir: str | os.PathLike | None, run_fn: RunFn | None = None):
        self.run_fn = run_fn
        # The compilation cache is a process-wide JAX setting: restore the caller's on close.
        self._previous: dict[str, Any] | None = None
        self._previous = configure_cache(cache_dir)
        self._context: tuple[dict[str, Any], dict[str, Any]] | None = None

    def context(self, framework: str = "jax") -> tuple[dict[str, Any], dict[str, Any]]:
        if self._context is None:
            context = local_context()
            check_environment(context[0])
            self._context = context
        return self._context if framework == "jax" else local_context(framework)

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Outcome]]:
        for task in tasks:
            yield task, run_config(self.run_fn, task.workload, task.settings,
                                   task.memory_limit_bytes, self.context(task.workload.framework))

    def close(self) -> None:
        if self._previous is not None:
            restore_cache(self._previous)
            self._previous = None
