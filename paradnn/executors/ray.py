"""Run sweep configs on a Ray cluster: one task per config, results streamed back to the driver.

Each task runs its config the way the process executor does, in a child process of its worker
with the time limit, so a config that crashes or hangs is recorded ``crashed`` or ``timeout`` on
the worker and the worker survives. A task that Ray itself loses (its worker or node died, its
result object was lost) is an infrastructure fault, not the config's result: Ray runs it again
(:data:`MAX_ATTEMPTS` attempts in all, Ray's own task retries, so a task whose node died runs on
another node), and a config whose every attempt was lost comes back as a :class:`Fault` with
``retry=True``, which the sweep names as missing (exit status 1 on the command line); it is never
stored. An address that cannot be reached fails within ``CONNECT_TIMEOUT_S`` seconds with one
line. The driver alone writes the store, one committed row per finished task, so stores never
need a shared file system.

Mixed clusters: every alive node that can take the sweep's tasks (its resources, and the
``label_selector`` of ``resources`` where one is given) is probed once per framework, so the
sweep knows each measuring platform: a config's record carries the platform of the node that
measured it, and resume counts a config's records under the key of every such platform.

Resources per task (``resources``): Ray ``.options()`` keywords such as ``{"num_gpus": 1}``,
``{"num_cpus": 16}``, ``{"resources": {"TPU": 4}}`` or ``{"label_selector": {"platform":
"a100"}}`` (nodes started with ``ray start --labels platform=a100``). The default asks for
``devices`` GPUs when the cluster has GPUs, ``devices`` TPU chips when it has TPUs, and
otherwise a whole CPU node's cores (the fewest of any alive node): one config per device, so
that two configs never share cores.

Workers need paradnn installed (or on ``PYTHONPATH`` when ``ray start`` runs); see
sweeps/cloud_tpu/README.md.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from paradnn import frameworks
from paradnn.errors import ParadnnError, SpecError
from paradnn.executors import Executor, Fault, Outcome, RunFn, Task
from paradnn.record import Record

#: Seconds to wait for a Ray cluster's address to accept a connection before giving up.
CONNECT_TIMEOUT_S = 30.0

#: Attempts a config's task gets in all when Ray loses it (its worker or node dies, its result
#: object is lost): Ray's ``max_retries`` is one less. A config whose own code kills the worker
#: every time costs this many attempts before it is named missing.
MAX_ATTEMPTS = 3

#: Seconds between two reads of the cluster's nodes while a sweep runs: a node that joins takes
#: tasks within about this long, and the GCS is not asked on every finished task.
NODES_EVERY_S = 2.0

#: Seconds a sweep waits while no alive node can take its tasks (every node that could died or
#: left) before it names the configs left as missing: Ray itself would keep them pending.
NO_NODE_WAIT_S = 10.0


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


#: This Ray worker process's executors, one per (time limit, cache folder, run function): Ray
#: reuses a worker for the tasks of one job, so its measuring child (and the framework imported
#: there, seconds on a CPU) is started once per worker, not once per config.
_WORKER_EXECUTORS: dict[tuple[float, str | None, bytes], Any] = {}


def _worker_executor(timeout_s: float, cache_dir: str | None, run_fn: RunFn | None) -> Any:
    """This worker's ProcessExecutor for these arguments, started on first use; an environment
    that cannot start a framework is a WorkerSetupError."""
    import pickle

    from paradnn.executors.process import ProcessExecutor

    try:
        fn_id = pickle.dumps(run_fn)  # equal for equal module-level functions and partials
    except Exception:  # noqa: BLE001 - an unpicklable run_fn is keyed by identity
        fn_id = repr(id(run_fn)).encode()
    key = (float(timeout_s), cache_dir, fn_id)
    if key not in _WORKER_EXECUTORS:
        _WORKER_EXECUTORS[key] = ProcessExecutor(timeout_s=timeout_s, cache_dir=cache_dir,
                                                 run_fn=run_fn)
    return _WORKER_EXECUTORS[key]


def _remote_probe(cache_dir: str | None, run_fn: RunFn | None, framework: str,
                  timeout_s: float = 0.0) -> tuple[dict, dict]:
    """(platform, software) of ``framework`` in a child process of a worker, as its configs
    would run there: the child the worker's configs then reuse."""
    try:
        return _worker_executor(timeout_s, cache_dir, run_fn).context(framework)
    except ParadnnError as exc:
        raise WorkerSetupError(str(exc)) from None


def _remote_run(task: Task, timeout_s: float, cache_dir: str | None,
                run_fn: RunFn | None) -> Outcome:
    ex = _worker_executor(timeout_s, cache_dir, run_fn)
    try:
        ex.context(task.workload.framework)
    except ParadnnError as exc:
        raise WorkerSetupError(str(exc)) from None
    return ex.run_one(task)


def label_matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    """Whether a node with ``labels`` satisfies a Ray ``label_selector``: each value is ``v``
    (equal), ``!v`` (not equal or absent), ``in(a, b)`` or ``!in(a, b)``, as Ray reads them."""
    for key, want in selector.items():
        have = labels.get(key)
        negate = want.startswith("!")
        want = want[1:] if negate else want
        if want.startswith("in(") and want.endswith(")"):
            hit = have in {v.strip() for v in want[3:-1].split(",")}
        else:
            hit = have == want
        if hit == negate:
            return False
    return True


def node_fits(node: dict[str, Any], options: dict[str, Any]) -> bool:
    """Whether ``node`` (an entry of ``ray.nodes()``) could ever run a task with ``options``
    (Ray ``.options()`` keywords): its total resources hold what one task asks for, and its
    labels satisfy the ``label_selector``."""
    total = node.get("Resources") or {}
    wanted = {"CPU": options.get("num_cpus", 1), "GPU": options.get("num_gpus", 0),
              **(options.get("resources") or {})}
    if any(amount and total.get(name, 0) < amount for name, amount in wanted.items()):
        return False
    return label_matches(node.get("Labels") or {}, options.get("label_selector") or {})


def _context_id(platform: dict[str, Any], software: dict[str, Any]) -> str:
    """What makes two nodes' contexts give different record keys: the platform without the host
    and the software without the source revision (:func:`paradnn.record.record_key`)."""
    from paradnn.workload import stable_hash

    return stable_hash([{k: v for k, v in platform.items() if k != "host"},
                        {k: v for k, v in software.items() if k != "paradnn_revision"}])


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
            sigterm = signal.getsignal(signal.SIGTERM)
            try:
                ray.init(address=address, logging_level="WARNING", log_to_driver=True)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise ParadnnError(f"cannot connect to the Ray cluster at address={address!r}: "
                                   f"{exc}") from None
            finally:
                # ray.init replaces a SIGTERM handler with its own (sys.exit, then its shutdown at
                # exit). A caller's own handler (the command line's: the sweep stops as on Ctrl-C,
                # clean-up and what is kept, status 143) is put back; the default stays Ray's.
                if callable(sigterm) and threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGTERM, sigterm)
            self._owns_ray = True
        if resources is not None:
            try:  # Ray checks the keywords and their values; its message says what is wrong
                ray.remote(_remote_run).options(**resources)
            except (TypeError, ValueError) as exc:
                raise SpecError("resources", resources,
                                f"Ray .options() keywords such as num_cpus, num_gpus, resources, "
                                f"label_selector ({exc})") from None
        self._probe = ray.remote(max_retries=0)(_remote_probe)
        # Ray's own retries for lost tasks (system failures only: retry_exceptions stays off, so
        # a config's exception is never run twice); a retry goes wherever the task fits, which
        # after a node's death is another node.
        self._run = ray.remote(max_retries=MAX_ATTEMPTS - 1)(_remote_run)
        # framework -> [(node id, platform, software)] of every node probed, distinct contexts
        # first in the order met.
        self._contexts: dict[str, list[tuple[str, dict[str, Any], dict[str, Any]]]] = {}
        self._defaults: dict[int, tuple[float, dict[str, Any]]] = {}  # devices -> (read at, options)

    def _options(self, devices: int) -> dict[str, Any]:
        """Ray ``.options()`` of a task of a config on ``devices`` devices; the default is read
        from the cluster at most every NODES_EVERY_S (not once per task of a long sweep)."""
        now = time.monotonic()
        if devices not in self._defaults or now - self._defaults[devices][0] > NODES_EVERY_S:
            self._defaults[devices] = (now, self._read_options(devices))
        return dict(self._defaults[devices][1])

    def _read_options(self, devices: int) -> dict[str, Any]:
        if self.resources is not None:
            options = dict(self.resources)
            if options.get("label_selector"):
                # Ray 2.60 accepts "in(a, b)" but then matches only the first value: spaces
                # dropped, so that Ray places tasks as label_matches (and the probes) assume.
                options["label_selector"] = {k: "".join(str(v).split())
                                             for k, v in options["label_selector"].items()}
            return options
        total = self.ray.cluster_resources()
        if total.get("GPU", 0) > 0:
            return {"num_gpus": devices, "num_cpus": 1}
        if total.get("TPU", 0) > 0:
            return {"resources": {"TPU": devices}, "num_cpus": 1}
        # A CPU host is one device: a task asks for a whole node's cores (the fewest of any
        # node that has some, so that every node fits), one config per node, so that two
        # configs never share cores and time each other's load.
        cores = [n["Resources"]["CPU"] for n in self._nodes() if (n.get("Resources") or {}).get("CPU", 0) > 0]
        return {"num_cpus": min(cores) if cores else 1}

    def _slots(self, options: dict[str, Any]) -> int:
        """How many tasks with ``options`` the cluster's alive nodes run at once (at least 1)."""
        wanted = {"CPU": options.get("num_cpus", 1), "GPU": options.get("num_gpus", 0),
                  **(options.get("resources") or {})}
        slots = 0
        for node in self._nodes():
            if node_fits(node, options):
                total = node.get("Resources") or {}
                slots += min(math.floor(total.get(name, 0) / amount)
                             for name, amount in wanted.items() if amount) if any(wanted.values()) else 1
        return max(1, slots)

    def _nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.ray.nodes() if n.get("Alive")]

    def _probe_nodes(self, framework: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """(node id, platform, software) of ``framework`` on every alive node that can take
        this sweep's tasks, one probe task pinned to each, all at once."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options = self._options(1)
        nodes = [n for n in self._nodes() if node_fits(n, options)]
        if not nodes:
            raise ParadnnError(f"no alive node of the Ray cluster can take a task with "
                               f"resources={options!r} (its resources and labels: "
                               f"{[(n.get('Resources'), n.get('Labels')) for n in self._nodes()]})")
        pinned = {k: v for k, v in options.items() if k != "label_selector"}
        refs = {self._probe.options(**pinned, scheduling_strategy=NodeAffinitySchedulingStrategy(
                    n["NodeID"], soft=False)).remote(self.cache_dir, self.run_fn, framework, self.timeout_s): n["NodeID"]
                for n in nodes}
        found = []
        for ref, node_id in refs.items():
            try:
                platform, software = self.ray.get(ref)
            except self.ray.exceptions.RayTaskError as exc:
                raise ParadnnError(f"a Ray worker could not start {framework}: {exc}") from None
            except self.ray.exceptions.RayError:
                continue  # the node died while probed: it takes no tasks either
            found.append((node_id, dict(platform), dict(software)))
        if not found:
            raise ParadnnError(f"every Ray node that could take {framework} tasks was lost "
                               "while its platform was probed")
        return found

    def context(self, framework: str = frameworks.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
        """Platform and software of ``framework`` on the first node probed that takes these
        tasks (:meth:`contexts` lists every distinct one of a mixed cluster)."""
        return self.contexts(framework)[0]

    def contexts(self, framework: str = frameworks.DEFAULT) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The distinct (platform, software) of ``framework`` over the cluster's nodes that can
        take these tasks (one probe task per node): each gives its own record keys, so resume
        counts a config's records under every one of them."""
        if framework not in self._contexts:
            self._contexts[framework] = self._probe_nodes(framework)
        distinct: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for _node, platform, software in self._contexts[framework]:
            distinct.setdefault(_context_id(platform, software), (platform, software))
        return list(distinct.values())

    def _failed(self, task: Task, exc: BaseException) -> Record:
        platform, software = self.context(task.workload.framework)
        return Record.failed(task.workload, "crashed",
                             f"its Ray task failed: {type(exc).__name__}: {exc}"[:4000],
                             platform=dict(platform), software=dict(software),
                             settings=task.settings.to_dict(task.workload.framework))

    @staticmethod
    def _lost(exc: BaseException) -> Fault:
        # Every attempt died with its worker or node, or its result object was lost: the
        # cluster's fault, never the config's result. The sweep names the config as missing.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Fault(f"Ray lost its task {MAX_ATTEMPTS} time(s) ({type(exc).__name__}: "
                     f"{first[:300]})", retry=True)

    def _unplaceable(self, task: Task, options: dict[str, Any]) -> Fault:
        return Fault(f"no alive node of the Ray cluster can take its task (resources={options!r}) "
                     f"for {NO_NODE_WAIT_S:g} s: the nodes that could have died or left",
                     retry=True)

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Outcome]]:
        ray = self.ray
        in_flight: dict[Any, Task] = {}
        pending = iter(tasks)
        exhausted = False
        slots: int | None = None
        options: dict[str, Any] | None = None
        nodes_read = -math.inf
        nowhere_since: float | None = None  # when no alive node could take the tasks any more
        try:
            while True:
                # Keep the cluster busy plus one queued task; claims of queued configs stay
                # few, so a concurrent sweep on the same store still finds work. The nodes are
                # read again every NODES_EVERY_S: a node that joins mid-sweep takes tasks, one
                # that died takes none.
                if options is not None and time.monotonic() - nodes_read > NODES_EVERY_S:
                    slots, nodes_read = self._slots(options), time.monotonic()
                    if any(node_fits(n, options) for n in self._nodes()):
                        nowhere_since = None
                    elif nowhere_since is None:
                        nowhere_since = time.monotonic()
                    elif time.monotonic() - nowhere_since > NO_NODE_WAIT_S:
                        # Ray would keep these tasks pending for ever (infeasible): name them
                        # missing rather than hang; the next run measures them.
                        for ref, task in list(in_flight.items()):
                            in_flight.pop(ref)
                            ray.cancel(ref, force=True)
                            yield task, self._unplaceable(task, options)
                        for task in pending:
                            yield task, self._unplaceable(task, options)
                        return
                while not exhausted and (slots is None or len(in_flight) < slots + 1):
                    task = next(pending, None)
                    if task is None:
                        exhausted = True
                        break
                    options = self._options(task.workload.devices)
                    if slots is None:
                        slots, nodes_read = self._slots(options), time.monotonic()
                    ref = self._run.options(**options).remote(task, self.timeout_s,
                                                             self.cache_dir, self.run_fn)
                    in_flight[ref] = task
                if not in_flight:
                    return
                done, _ = ray.wait(list(in_flight), num_returns=1, timeout=NODES_EVERY_S)
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
                    except ray.exceptions.RayError as exc:  # every attempt lost its worker or node
                        outcome = self._lost(exc)
                    yield task, outcome
        finally:
            for ref in in_flight:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001, S110 - best effort on the way out
                    pass

    def close(self) -> None:
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False
