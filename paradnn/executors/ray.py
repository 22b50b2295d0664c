"""Run sweep configs on a Ray cluster: one task per config, results streamed back to the driver.

Each task runs its config the way the process executor does, in a child process of its worker
with the time limit, so a config that crashes or hangs is recorded ``crashed`` or ``timeout`` on
the worker and the worker survives. A task that Ray itself loses (its worker or node died) is
recorded ``crashed`` by the driver. The driver alone writes the store, one committed row per
finished task, so stores never need a shared file system.

Resources per task (``resources``): Ray ``.options()`` keywords such as ``{"num_gpus": 1}``,
``{"num_cpus": 16}`` or ``{"resources": {"TPU": 4}}``. The default asks for ``devices`` GPUs when
the cluster has GPUs, ``devices`` TPU chips when it has TPUs, and one CPU otherwise. For
faithful CPU timings give each task a whole node (``num_cpus`` = the node's cores), so that two
configs never share cores.

Workers need paradnn installed (or on ``PYTHONPATH`` when ``ray start`` runs); see
sweeps/cloud_tpu/README.md.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

from paradnn.errors import ParadnnError
from paradnn.executors import Executor, RunFn, Task
from paradnn.record import Record


class WorkerSetupError(RuntimeError):
    """A worker node could not start a child process: an environment problem, not a config's."""


def _remote_probe(cache_dir: str | None, run_fn: RunFn | None) -> tuple[dict, dict]:
    from paradnn.executors.process import _Child

    try:
        child = _Child(cache_dir, run_fn)
    except ParadnnError as exc:
        raise WorkerSetupError(str(exc)) from None
    try:
        return child.platform, child.software
    finally:
        child.stop()


def _remote_run(task: Task, timeout_s: float, cache_dir: str | None,
                run_fn: RunFn | None) -> Record:
    from paradnn.executors.process import ProcessExecutor

    ex = ProcessExecutor(timeout_s=timeout_s, cache_dir=cache_dir, run_fn=run_fn)
    try:
        try:
            ex.context()
        except ParadnnError as exc:
            raise WorkerSetupError(str(exc)) from None
        return ex.run_one(task)
    finally:
        ex.close()


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, timeout_s: float, cache_dir: str | os.PathLike | None,
                 run_fn: RunFn | None = None, address: str | None = None,
                 resources: dict[str, Any] | None = None):
        try:
            import ray
        except ImportError:
            raise ParadnnError("executor='ray' needs Ray: pip install 'ray[default]>=2.40' "
                               "(or paradnn[ray])") from None
        self.ray = ray
        self.timeout_s = float(timeout_s)
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.run_fn = run_fn
        self.resources = resources
        self._owns_ray = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, logging_level="WARNING", log_to_driver=True)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise ParadnnError(f"cannot connect to the Ray cluster at address={address!r}: "
                                   f"{exc}") from None
            self._owns_ray = True
        self._probe = ray.remote(max_retries=0)(_remote_probe)
        self._run = ray.remote(max_retries=0)(_remote_run)
        self._context: tuple[dict[str, Any], dict[str, Any]] | None = None

    def _options(self, devices: int) -> dict[str, Any]:
        if self.resources is not None:
            return dict(self.resources)
        total = self.ray.cluster_resources()
        if total.get("GPU", 0) > 0:
            return {"num_gpus": devices, "num_cpus": 1}
        if total.get("TPU", 0) > 0:
            return {"resources": {"TPU": devices}, "num_cpus": 1}
        return {"num_cpus": 1}

    def _slots(self, options: dict[str, Any]) -> int:
        """How many tasks with ``options`` the cluster runs at once (at least 1)."""
        total = self.ray.cluster_resources()
        wanted = {"CPU": options.get("num_cpus", 1), "GPU": options.get("num_gpus", 0),
                  **options.get("resources", {})}
        fits = [total.get(name, 0) / amount for name, amount in wanted.items() if amount]
        return max(1, int(math.floor(min(fits)))) if fits else 1

    def context(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Platform and software of a worker that takes these tasks (one probe task): the
        cluster is assumed uniform for the resources asked, as the resume keys need."""
        if self._context is None:
            ref = self._probe.options(**self._options(1)).remote(self.cache_dir, self.run_fn)
            try:
                self._context = tuple(self.ray.get(ref))  # type: ignore[assignment]
            except self.ray.exceptions.RayTaskError as exc:
                raise ParadnnError(f"a Ray worker could not start paradnn: {exc}") from None
        assert self._context is not None
        return self._context

    def _failed(self, task: Task, exc: BaseException) -> Record:
        platform, software = self.context()
        return Record.failed(task.workload, "crashed",
                             f"Ray lost the task: {type(exc).__name__}: {exc}"[:4000],
                             platform=dict(platform), software=dict(software),
                             settings=task.settings.to_dict())

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Record]]:
        ray = self.ray
        in_flight: dict[Any, Task] = {}
        pending = iter(tasks)
        exhausted = False
        slots: int | None = None
        try:
            while True:
                # Keep the cluster busy plus one queued task; claims of queued configs stay
                # few, so a concurrent sweep on the same store still finds work.
                while not exhausted and (slots is None or len(in_flight) < slots + 1):
                    task = next(pending, None)
                    if task is None:
                        exhausted = True
                        break
                    options = self._options(task.workload.devices)
                    if slots is None:
                        slots = self._slots(options)
                    ref = self._run.options(**options).remote(task, self.timeout_s,
                                                             self.cache_dir, self.run_fn)
                    in_flight[ref] = task
                if not in_flight:
                    return
                done, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in done:
                    task = in_flight.pop(ref)
                    try:
                        record = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        if isinstance(exc.cause, WorkerSetupError) or "WorkerSetupError" in str(
                                exc):
                            raise ParadnnError(f"a Ray worker could not run paradnn: "
                                               f"{exc.cause or exc}") from None
                        record = self._failed(task, exc)
                    except ray.exceptions.RayError as exc:  # worker or node died, object lost
                        record = self._failed(task, exc)
                    yield task, record
        finally:
            for ref in in_flight:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass

    def close(self) -> None:
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False
