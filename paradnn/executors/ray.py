"""Run sweep configs on a Ray cluster: one task per config, results streamed back to the driver.

Each task runs its config the way the process executor does, in a child process of its worker
with the time limit, so a config that crashes or hangs is recorded ``crashed`` or ``timeout`` on
the worker and the worker survives. A task that Ray itself loses (its worker or node died) is an
infrastructure fault, not the config's result: it is left unrecorded (its claim released) and
the next run of the sweep measures it again. An address that cannot be reached fails within
``CONNECT_TIMEOUT_S`` seconds with one line. The driver alone writes the store, one committed row per
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
import socket
import time
from collections.abc import Iterator
from typing import Any

from paradnn import backends
from paradnn.errors import ParadnnError
from paradnn.executors import Executor, Fault, Outcome, RunFn, Task
from paradnn.record import Record

#: Seconds to wait for a Ray cluster's address to accept a connection before giving up.
CONNECT_TIMEOUT_S = 30.0


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ParadnnError unless ``HOST:PORT`` accepts a TCP connection within ``timeout_s``
    seconds (a refused connection fails at once). Ray's own connect retries for minutes; other
    address forms (``auto``, ``local``, ``ray://...``) are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or "://" in address:
        return
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        try:
            socket.create_connection((host.strip("[]"), int(port)),
                                     timeout=max(0.1, min(remaining, 5.0))).close()
            return
        except ConnectionRefusedError:
            reason = "connection refused (nothing listens there)"
        except socket.gaierror as exc:
            reason = f"unknown host ({exc.strerror})"
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            if time.monotonic() < deadline:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
                continue
        raise ParadnnError(f"cannot reach the Ray cluster at address={address!r} within "
                           f"{timeout_s:g} s: {reason}; is `ray start --head` running there?")


class WorkerSetupError(RuntimeError):
    """A worker node could not start a child process: an environment problem, not a config's."""


def _remote_probe(cache_dir: str | None, run_fn: RunFn | None, framework: str) -> tuple[dict, dict]:
    """(platform, software) of ``framework`` in a child process of a worker, as its configs
    would run there."""
    from paradnn.executors.process import Child

    try:
        child = Child(cache_dir, run_fn)
        try:
            return child.context(framework)
        finally:
            child.stop()
    except ParadnnError as exc:
        raise WorkerSetupError(str(exc)) from None


def _remote_run(task: Task, timeout_s: float, cache_dir: str | None,
                run_fn: RunFn | None) -> Record:
    from paradnn.executors.process import ProcessExecutor

    ex = ProcessExecutor(timeout_s=timeout_s, cache_dir=cache_dir, run_fn=run_fn)
    try:
        try:
            ex.context(task.workload.framework)
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
            if address:
                check_reachable(address)
            try:
                ray.init(address=address, logging_level="WARNING", log_to_driver=True)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise ParadnnError(f"cannot connect to the Ray cluster at address={address!r}: "
                                   f"{exc}") from None
            self._owns_ray = True
        self._probe = ray.remote(max_retries=0)(_remote_probe)
        self._run = ray.remote(max_retries=0)(_remote_run)
        self._contexts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

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

    def context(self, framework: str = backends.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
        """Platform and software of ``framework`` on a worker that takes these tasks (one probe
        task per framework): the cluster is assumed uniform for the resources asked, as the
        resume keys need."""
        if framework not in self._contexts:
            ref = self._probe.options(**self._options(1)).remote(self.cache_dir, self.run_fn, framework)
            try:
                self._contexts[framework] = tuple(self.ray.get(ref))  # type: ignore[assignment]
            except self.ray.exceptions.RayTaskError as exc:
                raise ParadnnError(f"a Ray worker could not start {framework}: {exc}") from None
        return self._contexts[framework]

    def _failed(self, task: Task, exc: BaseException) -> Record:
        platform, software = self.context(task.workload.framework)
        return Record.failed(task.workload, "crashed",
                             f"its Ray task failed: {type(exc).__name__}: {exc}"[:4000],
                             platform=dict(platform), software=dict(software),
                             settings=task.settings.to_dict(task.workload.framework))

    @staticmethod
    def _lost(exc: BaseException) -> Fault:
        # The worker or node died or the result object was lost: the cluster's fault, so the
        # config is retried by the next run of the sweep rather than stored as crashed.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Fault(f"Ray lost a task ({type(exc).__name__}: {first[:300]})", retry=True)

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Outcome]]:
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
                    outcome: Outcome
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        if isinstance(exc.cause, WorkerSetupError):
                            raise ParadnnError(f"a Ray worker could not run paradnn: "
                                               f"{exc.cause}") from None
                        outcome = self._failed(task, exc)
                    except ray.exceptions.RayError as exc:  # worker or node died, object lost
                        outcome = self._lost(exc)
                    yield task, outcome
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
