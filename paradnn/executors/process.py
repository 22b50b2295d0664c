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
import pickle
import signal
import subprocess
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing import connection as mp_connection
from pathlib import Path
from typing import Any

from paradnn import frameworks, progress, spawn
from paradnn.errors import InfrastructureError, ParadnnError
from paradnn.executors import Executor, Fault, Outcome, RunFn, Task, charge
from paradnn.record import Record

#: Seconds a child may take to start, or to import a framework and report its platform.
STARTUP_TIMEOUT_S = 300.0
#: A child is replaced after this many configs, to bound what a long sweep accumulates.
MAX_CONFIGS_PER_CHILD = 200
#: Seconds a child whose pipe closed may take to finish exiting before it is killed; its own
#: exit status is then what it chose, not the SIGKILL paradnn would send.
EXIT_GRACE_S = 5.0
#: The environment of a prepare worker: JAX preallocates 75% of a GPU's memory in every process
#: by default, which would take it from the measuring worker; a prepare worker allocates on
#: demand and at most this share (it compiles; XLA's GPU autotuner allocates a little).
PREPARE_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.10"}
#: Device platforms on which ``overlap="auto"`` compiles ahead with one prepare worker: where
#: the measurement runs on a device that compiling does not use. Not on a CPU (compiling and
#: timing share the cores) and not on a TPU (one process holds a host's TPU chips; a second
#: process cannot open them to compile for them).
AUTO_OVERLAP_PLATFORMS = ("gpu",)
#: Seconds to wait for stopped prepare workers to be seen stopped (``/proc``) before timing.
STOP_CONFIRM_S = 2.0


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _describe_exit(code: int | None, killed_by_paradnn: bool = False) -> str:
    """Words for a child's end, from its exit status (``Popen.returncode``: negative = signal)."""
    if code is None:
        return "did not exit"
    if code < 0:
        name = _signal_name(-code)
        if killed_by_paradnn:
            return f"stopped answering and was killed by paradnn ({name})"
        hint = (" from outside the process (often the kernel's out-of-memory killer)"
                if -code == signal.SIGKILL else "")
        return f"was killed by {name}{hint}"
    return f"exited by itself with status {code}"


def _exit_fields(code: int | None) -> dict[str, Any]:
    """Typed fields of a crashed record: the exit status, or the signal's name."""
    if code is None:
        return {"child_exit_status": None, "child_signal": None}
    return {"child_exit_status": code, "child_signal": _signal_name(-code) if code < 0 else None}


class Child:
    """One child process and its two pipes."""

    def __init__(self, cache_dir: str | None, run_fn: RunFn | None, role: str = "measure",
                 wait_ready: bool = True, started: spawn.Started | None = None):
        """Start a child of ``role`` (``measure`` or ``prepare``, :mod:`paradnn.executors.child`),
        or adopt ``started``, one that :func:`paradnn.spawn.prestart` started (killed here if
        ``run_fn`` cannot be sent); with ``wait_ready`` False its ``("ready",)`` reply is left for
        the caller to read, so a prepare worker starts while the parent goes on."""
        try:
            init = pickle.dumps(("init", cache_dir, run_fn))
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            if started is not None:
                started.kill()
            raise ParadnnError(f"run_fn={run_fn!r} cannot be sent to a child process ({exc}); "
                               "use a top-level function of an importable module") from None
        if started is None:
            started = spawn.start(role, env=PREPARE_ENV if role == "prepare" else None)
        self.role = role
        self._started = started
        self.proc, self.to_child, self.from_child = started.proc, started.to_child, started.from_child
        self.configs = 0
        #: Seconds this child took to start that no record has been charged yet.
        self.unbilled_startup_s = 0.0
        #: Frameworks this child has started (their contexts, by name).
        self.contexts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        try:
            self.to_child.send_bytes(init)
        except OSError:
            pass  # the child is gone (a pre-started one may have died): the wait below says how
        if wait_ready:
            self._expect(self.wait(STARTUP_TIMEOUT_S), "ready", "did not start")

    def _expect(self, reply: Any, kind: str, failed: str) -> Any:
        """The reply if it is a ``kind`` message; otherwise the child is stopped and the fault
        it reported (or its death, or its silence) raised as an InfrastructureError, or the
        user's error it reported raised as it is."""
        if isinstance(reply, tuple) and reply[0] == kind:
            return reply
        if isinstance(reply, tuple) and reply[0] == "error":
            raise reply[1]
        if isinstance(reply, tuple) and reply[0] == "fault":
            self.stop()
            fault: Fault = reply[1]
            raise InfrastructureError(fault.message, retry=fault.retry)
        code, killed = self.reap()
        raise InfrastructureError(
            f"the sweep's child process {failed}: it "
            + ("took longer than {:.0f} s".format(STARTUP_TIMEOUT_S) if reply == "timeout"
               else _describe_exit(code, killed))
            + "; its error output is above")

    def context(self, framework: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(platform, software) of ``framework`` in this child (started there on first use)."""
        if framework not in self.contexts:
            try:
                self.to_child.send(("context", framework))
            except (BrokenPipeError, OSError):
                pass  # the child is gone: the wait below says how it ended
            reply = self._expect(self.wait(STARTUP_TIMEOUT_S), "context", f"could not start {framework}")
            self.contexts[framework] = (reply[1], reply[2])
        return self.contexts[framework]

    def wait(self, timeout_s: float) -> Any:
        """The next message; ``None`` if the child died, ``"timeout"`` if none came in time."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                if self.from_child.poll(min(remaining, 1.0)):
                    return self.from_child.recv()
            except (EOFError, OSError):
                return None
            if self.proc.poll() is not None and not self.from_child.poll(0):
                return None

    def reap(self) -> tuple[int | None, bool]:
        """(exit status, killed by paradnn) of a child that stopped answering: it gets
        ``EXIT_GRACE_S`` to finish exiting by itself before it is killed."""
        try:
            self.proc.wait(timeout=EXIT_GRACE_S)
            killed = False
        except subprocess.TimeoutExpired:
            killed = True
        return self.kill(), killed

    def kill(self) -> int | None:
        """Kill the child's process group and close its pipes; returns its exit code."""
        return self._started.kill()

    def stop(self) -> None:
        """Ask the child to exit; kill it if it does not."""
        try:
            self.to_child.send(("exit",))
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


@dataclass
class _Ahead:
    """A config pulled from the task iterator and not measured yet, and how far compiling it
    ahead got: ``queued``, ``preparing`` (by ``preparer``), ``prepared``, ``failed`` (``note``
    says why; the measuring worker then compiles it itself) or ``skipped`` (not compiled ahead)."""

    task: Task
    state: str = "queued"
    preparer: "_Preparer | None" = None
    note: str = ""


class _Preparer:
    """A prepare worker (a child of role ``prepare``) and the config it is compiling."""

    def __init__(self, child: Child, framework: str):
        self.child, self.framework = child, framework
        self.entry: _Ahead | None = None
        self.deadline = float("inf")  # time.monotonic() by which its config must be prepared
        self.stopped_since: float | None = None  # time.monotonic() of its SIGSTOP, while stopped
        self.configs = 0

    @property
    def pid(self) -> int:
        return self.child.proc.pid


def _stopped(pid: int) -> bool:
    """Whether every thread of process ``pid`` is stopped (``/proc``: state T or t), or gone."""
    try:
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
            if state not in ("T", "t", "X", "Z"):
                return False
    except (OSError, IndexError):
        return True  # gone: nothing of it runs
    return True


class ProcessExecutor(Executor):
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
        self._preparers: dict[str, list[_Preparer]] = {}
        #: framework -> why its configs are not compiled ahead (no capability, an environment fault).
        self._no_prepare: dict[str, str] = {}
        #: Prepare workers stopped now (SIGSTOP) for a measuring worker's timed calls.
        self._stopped_now: list[_Preparer] = []
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

    def workers(self, framework: str) -> int:
        """Prepare workers that compile ahead configs of ``framework`` (0: none)."""
        if framework in self._no_prepare:
            return 0
        if self.overlap == "auto":
            return 1 if self.context(framework)[0]["device_platform"] in AUTO_OVERLAP_PLATFORMS else 0
        return int(self.overlap)

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

    # -- prepare workers ----------------------------------------------------------------------

    def _all_preparers(self) -> list[_Preparer]:
        return [p for pool in self._preparers.values() for p in pool]

    def _drop_preparer(self, p: _Preparer) -> None:
        """Kill a prepare worker (SIGKILL reaches a stopped one too) and forget it."""
        pool = self._preparers.get(p.framework, [])
        if p in pool:
            pool.remove(p)
        if p in self._stopped_now:
            self._stopped_now.remove(p)
        p.child.kill()

    def _dispatch(self, ahead: deque[_Ahead]) -> None:
        """Give the queued configs ahead, in order, to idle prepare workers (started as needed,
        without waiting for them)."""
        if self._timing_now:
            return
        for entry in ahead:
            if entry.state != "queued":
                continue
            framework = entry.task.workload.framework
            wanted = self.workers(framework)
            if wanted == 0:
                entry.state, entry.note = "skipped", self._no_prepare.get(framework, "overlap is 0")
                continue
            pool = self._preparers.setdefault(framework, [])
            idle = next((p for p in pool if p.entry is None), None)
            if idle is None and len(pool) < wanted:
                try:
                    idle = _Preparer(Child(self.cache_dir, self.run_fn, role="prepare", wait_ready=False),
                                     framework)
                except (OSError, ParadnnError) as exc:
                    self._no_prepare[framework] = f"its prepare worker could not start: {exc}"
                    entry.state, entry.note = "skipped", self._no_prepare[framework]
                    continue
                idle.deadline = time.monotonic() + STARTUP_TIMEOUT_S  # its start, before any config
                pool.append(idle)
            if idle is None:
                continue  # every worker of this framework is busy
            try:
                idle.child.to_child.send(("prepare", entry.task.workload, entry.task.settings,
                                          entry.task.memory_limit_bytes))
            except OSError:
                self._drop_preparer(idle)
                entry.state, entry.note = "failed", "its prepare worker was gone"
                continue
            idle.entry, entry.preparer, entry.state = entry, idle, "preparing"
            idle.deadline = max(idle.deadline if idle.configs == 0 else 0.0,
                                time.monotonic()) + self.timeout_s

    def _on_preparer(self, p: _Preparer, message: Any) -> None:
        """Take a prepare worker's message (None: it died; "timeout": it ran past its time)."""
        entry = p.entry
        if isinstance(message, tuple) and message[0] == "ready":
            return
        if isinstance(message, tuple) and message[0] in ("prepared", "prepare-failed"):
            p.entry = None
            p.configs += 1
            if entry is not None:
                entry.state = "prepared" if message[0] == "prepared" else "failed"
                entry.note = message[1]
            if message[0] == "prepared" and message[1] == "unsupported":
                self._no_prepare[p.framework] = f"{p.framework} cannot compile ahead (no prepare capability)"
                if entry is not None:
                    entry.state = "skipped"
                self._drop_preparer(p)
            elif message[0] == "prepare-failed" and message[2]:
                self._no_prepare[p.framework] = f"compiling ahead met an environment fault: {message[1]}"
                self._drop_preparer(p)
            elif p.configs >= MAX_CONFIGS_PER_CHILD:
                self._drop_preparer(p)
            return
        # It died, ran past its time or said something unexpected: it is replaced when needed,
        # and its config is compiled by the measuring worker. Nothing is recorded.
        code = p.child.proc.poll()
        self._drop_preparer(p)
        if entry is not None:
            entry.state = "failed"
            entry.note = (f"compiling ahead took longer than {self.timeout_s:g} s; its worker was killed"
                          if message == "timeout" else
                          f"its prepare worker {_describe_exit(code)}" if message is None else
                          f"its prepare worker sent {message!r}")

    def _service(self, ready: list[Any], ahead: deque[_Ahead]) -> None:
        """Read the prepare workers' messages among ``ready`` connections, kill those past
        their time, and hand out the configs left to prepare."""
        conns = {p.child.from_child: p for p in self._all_preparers()}
        for conn in ready:
            p = conns.get(conn)
            if p is None:
                continue
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = None
            self._on_preparer(p, message)
        now = time.monotonic()
        for p in self._all_preparers():
            if p.stopped_since is None and now > p.deadline and (p.entry is not None or p.configs == 0):
                self._on_preparer(p, "timeout")
        self._dispatch(ahead)

    def _stop_preparers(self, child: Child, framework: str) -> list[int]:
        """Stop (SIGSTOP) the prepare workers that share a CPU core with ``child`` while it times
        on a CPU, and wait until the kernel shows every thread of theirs stopped; returns their
        process groups. Workers pinned to other cores (``os.sched_setaffinity``) go on."""
        if self.context(framework)[0]["device_platform"] != "cpu":
            return []
        try:
            mine: set[int] | None = os.sched_getaffinity(child.proc.pid)
        except OSError:
            mine = None
        stopped: list[_Preparer] = []
        for p in self._all_preparers():
            try:
                theirs: set[int] | None = os.sched_getaffinity(p.pid)
            except OSError:
                theirs = None
            if mine is not None and theirs is not None and not mine & theirs:
                continue
            try:
                os.killpg(p.pid, signal.SIGSTOP)
            except OSError:
                continue
            p.stopped_since = time.monotonic()
            self._stopped_now.append(p)
            stopped.append(p)
        deadline = time.monotonic() + STOP_CONFIRM_S
        while time.monotonic() < deadline and not all(_stopped(p.pid) for p in stopped):
            time.sleep(0.001)
        return [p.pid for p in stopped]

    def _resume_preparers(self) -> None:
        """Resume (SIGCONT) the stopped prepare workers; their time limits did not run meanwhile."""
        self._timing_now = False
        now = time.monotonic()
        for p in self._stopped_now:
            try:
                os.killpg(p.pid, signal.SIGCONT)
            except OSError:
                pass
            if p.stopped_since is not None:
                p.deadline += now - p.stopped_since
            p.stopped_since = None
        self._stopped_now.clear()

    def _beat(self, task: Task, phase: tuple[str, float], t_begin: float, beats: list[float]) -> None:
        """Call the ``waiting`` callback if the heartbeat is due (``beats[0]``), and schedule
        the next one."""
        now = time.monotonic()
        if now < beats[0]:
            return
        beats[0] = max(beats[0] + self._every_s, now)
        if self._waiting_cb is not None:
            self._waiting_cb(task, phase[0], now - phase[1], now - t_begin)

    def _wait_prepared(self, entry: _Ahead, ahead: deque[_Ahead], t_begin: float,
                       beats: list[float]) -> None:
        """Wait while a prepare worker compiles ``entry`` (the config to measure next): the
        measuring worker would only compile the same programs beside it. ``beats[0]`` is the
        ``time.monotonic()`` of the next heartbeat."""
        phase = ("compiling ahead", time.monotonic())
        while entry.state == "preparing":
            now = time.monotonic()
            conns = [p.child.from_child for p in self._all_preparers()]
            ready = mp_connection.wait(conns, timeout=max(0.0, min(beats[0], now + 1.0) - now))
            self._service(list(ready), ahead)
            self._beat(entry.task, phase, t_begin, beats)

    def _wait_record(self, child: Child, task: Task, ahead: deque[_Ahead], t_begin: float,
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
        return self._measure(_Ahead(task, "skipped"), deque())

    def _measure(self, entry: _Ahead, ahead: deque[_Ahead]) -> Outcome:
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
                                        f"{_describe_exit(code, killed)} after {elapsed:.1f} s",
                                        metrics={**_exit_fields(code), **overlap_metrics}, **context),
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
        ahead: deque[_Ahead] = deque()
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
                        ahead.append(_Ahead(next(source)))
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
