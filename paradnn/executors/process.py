"""Run sweep configs in a child Python process with a time limit (the default executor).

Each framework has its own child, reused across that framework's configs, so the Python and
framework start-up cost is paid once per framework, not per config, and no child ever hosts two
frameworks (TensorFlow and PyTorch abort in one process: ``FrameworkInfo.exclusive_with``). A config that kills the child (a segfault, the kernel's out-of-memory killer, an abort in
XLA, or an exit with a status of its own) is recorded ``crashed``, with the exit status or the
signal as typed fields (``child_exit_status``, ``child_signal``) and in words that say which of
the two happened; one that runs past ``timeout_s`` has its child killed and is recorded
``timeout``. A child that cannot start, or that reports an infrastructure fault, gives a
:class:`~paradnn.executors.Fault`, never a record. Either way a fresh child takes the next config. After an ``error`` or an
out-of-memory failure that was not predicted, the child is also replaced, so no state left behind
by a failure can leak into the next measurement.

The child is started with ``subprocess`` running :mod:`paradnn.executors.child` rather than with
``multiprocessing``: spawn would re-import the user's main script, which breaks scripts without
an ``if __name__ == "__main__"`` guard.
"""


from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterator
from multiprocessing import connection as mp_connection
from typing import Any

from paradnn import frameworks, progress, spawn
from paradnn.executors import Executor, Outcome, RunFn, Task, charge
from paradnn.executors.ahead import Ahead, CompileAhead, Preparer
from paradnn.executors.lifecycle import MAX_CONFIGS_PER_CHILD, Child, describe_exit, exit_fields
from paradnn.record import Record

__all__ = ["ProcessExecutor"]


class ProcessExecutor(CompileAhead, Executor):
    """Configs run one at a time in child processes, each with a time limit in seconds: one
    long-lived child per framework, so that no child ever hosts two frameworks (issue 24: a
    clash of native libraries is paradnn's fault, never a config's ``crashed`` row) and a sweep
    that alternates frameworks does not start one again for each switch.

    ``overlap`` (``"auto"`` or a count of workers): prepare workers that compile the next configs
    of the task iterator while the current one is measured (docs/performance.md, "Compiling
    ahead"). The iterator is read lazily, at most ``overlap + 1`` configs ahead; configs are
    measured and yielded in its order. A prepare worker's outcome is never a record: when it
    fails, crashes or times out, the measuring worker compiles the config itself. On a CPU, prepare
    workers sharing cores with the measuring worker are stopped (SIGSTOP of their process groups)
    for its warm-up and timed calls and resumed after them, whatever their outcome. ``"auto"`` is
    1 worker where the framework's device platform is in ``AUTO_OVERLAP_PLATFORMS``, else 0.
    """

    name = "process"

    def __init__(self, timeout_s: float, cache_dir: str | os.PathLike | None,
                 run_fn: RunFn | None = None, overlap: int | str = 0):
        self.timeout_s = float(timeout_s)
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.run_fn = run_fn
        self.overlap = overlap
        #: framework -> the child that runs its configs (it has run no other framework).
        self._children: dict[str, Child] = {}
        # Contexts outlive children: every child runs on this host with this installation.
        self._contexts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        #: framework -> its prepare workers.
        self._preparers: dict[str, list[Preparer]] = {}
        #: framework -> why its configs are not compiled ahead (no capability, an environment fault).
        self._no_prepare: dict[str, str] = {}
        #: Prepare workers stopped now (SIGSTOP) for a measuring worker's timed calls.
        self._stopped_now: list[Preparer] = []
        #: Whether a measuring worker's timed calls run now with others stopped: no prepare
        #: worker starts and none is given work meanwhile.
        self._timing_now = False
        self._started_cb: Any = None
        self._waiting_cb: Any = None
        self._every_s = progress.EVERY_S

    def watch(self, started: Any = None, waiting: Any = None, every_s: float | None = None) -> bool:
        self._started_cb, self._waiting_cb = started, waiting
        if every_s is not None:
            self._every_s = float(every_s)
        return True

    def _child_for(self, framework: str) -> Child:
        """The child of ``framework``, started (and the framework started in it) if there is
        none: a child never runs two frameworks, so none can clash with another there
        (``FrameworkInfo.exclusive_with`` names the known clashes; unknown ones are avoided too)."""
        child = self._children.get(framework)
        if child is None:
            t0 = time.perf_counter()
            # The worker `paradnn sweep` started for this framework while it imported its own
            # modules, if any: only the wait from here on is this sweep's start-up cost.
            child = Child(self.cache_dir, self.run_fn, started=spawn.take(framework))
            self._children[framework] = child
            try:
                child.context(framework)
            except BaseException:
                self._drop(framework)
                raise
            # Charged to the first config this child runs (phase_startup_s), whoever asked.
            child.unbilled_startup_s = time.perf_counter() - t0
        return child

    def _drop(self, framework: str, how: str = "stop") -> None:
        """Forget the child of ``framework``; ``stop`` asks it to exit, ``gone`` only closes
        what is left of one that was killed or reaped."""
        child = self._children.pop(framework, None)
        if child is not None and how == "stop":
            child.stop()

    def context(self, framework: str = frameworks.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
        if framework not in self._contexts:
            self._contexts[framework] = self._child_for(framework).context(framework)
        return self._contexts[framework]

    def _beat(self, task: Task, phase: tuple[str, float], t_begin: float, beats: list[float]) -> None:
        """Call the ``waiting`` callback if the heartbeat is due (``beats[0]``), and schedule
        the next one."""
        now = time.monotonic()
        if now < beats[0]:
            return
        beats[0] = max(beats[0] + self._every_s, now)
        if self._waiting_cb is not None:
            self._waiting_cb(task, phase[0], now - phase[1], now - t_begin)

    def _wait_record(self, child: Child, task: Task, ahead: deque[Ahead], t_begin: float,
                     stopped: list[bool], beats: list[float]) -> Any:
        """The measuring child's reply (None: it died; "timeout"), forwarding its phases to the
        heartbeat, stopping prepare workers for its timed calls, and serving them meanwhile."""
        framework = task.workload.framework
        deadline = time.monotonic() + self.timeout_s
        phase = ("starting", time.monotonic())
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "timeout"
            conns = [child.from_child] + [p.child.from_child for p in self._all_preparers()]
            try:
                ready = list(mp_connection.wait(conns, timeout=max(0.0, min(deadline, beats[0], now + 1.0) - now)))
            except OSError:
                return None
            if child.from_child in ready:
                ready.remove(child.from_child)
                try:
                    message = child.from_child.recv()
                except (EOFError, OSError):
                    return None
                if not (isinstance(message, tuple) and message[0] == "phase"):
                    return message
                self._resume_preparers()  # the phase after the timed calls (or any other)
                phase = (message[1], time.monotonic())
                if message[2]:
                    self._timing_now = True
                    pgids = self._stop_preparers(child, framework)
                    stopped[0] = stopped[0] or bool(pgids)
                    child.to_child.send(("go", pgids))
            self._service(ready, ahead)
            if child.proc.poll() is not None and not child.from_child.poll(0):
                return None
            self._beat(task, phase, t_begin, beats)

    # -- measuring ------------------------------------------------------------------------------

    def run_one(self, task: Task) -> Outcome:
        """Run one config in its framework's child; a dead or late child becomes a
        crashed/timeout record, an infrastructure fault the child met a :class:`Fault`. The
        record's ``phase_startup_s`` is the time its child took to start (and start the
        framework) if this is the child's first config, else 0, and ``phase_executor_s`` the
        time outside the child's own run."""
        return self._measure(Ahead(task, "skipped"), deque())

    def _measure(self, entry: Ahead, ahead: deque[Ahead]) -> Outcome:
        task = entry.task
        framework = task.workload.framework
        platform, software = self.context(framework)
        t_begin = time.monotonic()
        if self._started_cb is not None:
            self._started_cb(task)
        beats = [t_begin + self._every_s]
        self._wait_prepared(entry, ahead, t_begin, beats)
        wait_s = time.monotonic() - t_begin
        child = self._child_for(framework)
        startup_s, child.unbilled_startup_s = child.unbilled_startup_s, 0.0
        context = {"platform": dict(platform), "software": dict(software),
                   "settings": task.settings.to_dict(framework)}
        # On a CPU with compiling ahead, the child waits before its timed calls until the prepare
        # workers on its cores are stopped.
        handshake = platform["device_platform"] == "cpu" and self.overlap != "auto" and int(self.overlap) > 0
        stopped = [False]
        t0 = time.monotonic()
        t_run = time.perf_counter()
        try:
            child.to_child.send(("run", task.workload, task.settings, task.memory_limit_bytes, handshake))
            reply = self._wait_record(child, task, ahead, t_begin, stopped, beats)
        except (BrokenPipeError, OSError):
            reply = None
        finally:
            self._resume_preparers()  # whatever happened to the measuring child
        run_s = time.perf_counter() - t_run
        overlap_metrics = {"overlap_workers": self.workers(framework),
                           "prepared_ahead": entry.state == "prepared",
                           "preparers_stopped": stopped[0], "prepare_wait_s": wait_s}
        if reply == "timeout":
            child.kill()
            self._drop(framework, "gone")
            return charge(Record.failed(task.workload, "timeout",
                                        f"exceeded the time limit of {self.timeout_s:g} s (compile and "
                                        "measurement); its child process was killed",
                                        metrics=dict(overlap_metrics), **context),
                          startup_s, run_s)
        if reply is None:
            elapsed = time.monotonic() - t0
            code, killed = child.reap()
            self._drop(framework, "gone")
            return charge(Record.failed(task.workload, "crashed",
                                        f"the child process running this config "
                                        f"{describe_exit(code, killed)} after {elapsed:.1f} s",
                                        metrics={**exit_fields(code), **overlap_metrics}, **context),
                          startup_s, run_s)
        if reply[0] == "fault":
            self._drop(framework)  # the environment failed; a fresh child checks it again
            return reply[1]
        record: Record = charge(reply[1], startup_s, run_s)
        record = record.with_metrics(overlap_metrics)
        child.configs += 1
        # A predicted oom never allocated anything (typed field from paradnn.sizes); any
        # other failure may leave state behind, so the child is replaced.
        dirty = record.status == "error" or (
            record.status == "oom" and not record.metrics.get("oom_predicted"))
        if dirty or child.configs >= MAX_CONFIGS_PER_CHILD:
            self._drop(framework)
        return record

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Outcome]]:
        source = iter(tasks)
        ahead: deque[Ahead] = deque()
        exhausted = False
        try:
            while True:
                # Look ahead: the config to measure and up to `workers` after it, pulled lazily
                # (each pull claims its config in the store).
                while not exhausted:
                    wanted = 1 + max((self.workers(e.task.workload.framework) for e in ahead), default=0)
                    if len(ahead) >= wanted:
                        break
                    try:
                        ahead.append(Ahead(next(source)))
                    except StopIteration:
                        exhausted = True
                if not ahead:
                    return
                entry = ahead.popleft()
                self._dispatch(ahead)
                outcome = self._measure(entry, ahead)
                yield entry.task, outcome
        finally:
            self._resume_preparers()

    def close(self) -> None:
        self._resume_preparers()
        for p in self._all_preparers():
            self._drop_preparer(p)
        for framework in list(self._children):
            self._drop(framework)
