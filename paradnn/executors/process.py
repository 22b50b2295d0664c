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
import sys
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from paradnn import backends
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

    def __init__(self, cache_dir: str | None, run_fn: RunFn | None):
        try:
            init = pickle.dumps(("init", cache_dir, run_fn))
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise ParadnnError(f"run_fn={run_fn!r} cannot be sent to a child process ({exc}); "
                               "use a top-level function of an importable module") from None
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ)
        # The child must import what this process imports: paradnn, and the module of run_fn.
        paths = [p or os.getcwd() for p in sys.path]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "paradnn.executors.child", str(to_child_r),
                 str(from_child_w), str(os.getpid())],
                pass_fds=(to_child_r, from_child_w), env=env,
                # Own process group: a timeout kills the child and anything it started, and a
                # Ctrl-C in the terminal reaches only the driver, which then stops the child.
                start_new_session=True)
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.to_child = Connection(to_child_w, readable=False)
        self.from_child = Connection(from_child_r, writable=False)
        self.configs = 0
        #: Seconds this child took to start that no record has been charged yet.
        self.unbilled_startup_s = 0.0
        #: Frameworks this child has started (their contexts, by name).
        self.contexts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.to_child.send_bytes(init)
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
        """Kill the child's process group; returns its exit code."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        self._close_pipes()
        return code

    def stop(self) -> None:
        """Ask the child to exit; kill it if it does not."""
        try:
            self.to_child.send(("exit",))
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def _close_pipes(self) -> None:
        for conn in (self.to_child, self.from_child):
            try:
                conn.close()
            except OSError:
                pass


class ProcessExecutor(Executor):
    """Configs run one at a time in child processes, each with a time limit in seconds: one
    long-lived child per framework, so that no child ever hosts two frameworks (issue 24: a
    clash of native libraries is paradnn's fault, never a config's ``crashed`` row) and a sweep
    that alternates frameworks does not start one again for each switch."""

    name = "process"

    def __init__(self, timeout_s: float, cache_dir: str | os.PathLike | None,
                 run_fn: RunFn | None = None):
        self.timeout_s = float(timeout_s)
        self.cache_dir = None if cache_dir is None else str(cache_dir)
        self.run_fn = run_fn
        #: framework -> the child that runs its configs (it has run no other framework).
        self._children: dict[str, Child] = {}
        # Contexts outlive children: every child runs on this host with this installation.
        self._contexts: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

    def _child_for(self, framework: str) -> Child:
        """The child of ``framework``, started (and the framework started in it) if there is
        none: a child never runs two frameworks, so none can clash with another there
        (``FrameworkInfo.exclusive_with`` names the known clashes; unknown ones are avoided too)."""
        child = self._children.get(framework)
        if child is None:
            t0 = time.perf_counter()
            child = Child(self.cache_dir, self.run_fn)
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

    def context(self, framework: str = backends.DEFAULT) -> tuple[dict[str, Any], dict[str, Any]]:
        if framework not in self._contexts:
            self._contexts[framework] = self._child_for(framework).context(framework)
        return self._contexts[framework]

    def run_one(self, task: Task) -> Outcome:
        """Run one config in its framework's child; a dead or late child becomes a
        crashed/timeout record, an infrastructure fault the child met a :class:`Fault`. The
        record's ``phase_startup_s`` is the time its child took to start (and start the
        framework) if this is the child's first config, else 0, and ``phase_executor_s`` the
        time outside the child's own run."""
        framework = task.workload.framework
        platform, software = self.context(framework)
        child = self._child_for(framework)
        startup_s, child.unbilled_startup_s = child.unbilled_startup_s, 0.0
        context = {"platform": dict(platform), "software": dict(software),
                   "settings": task.settings.to_dict(framework)}
        t0 = time.monotonic()
        t_run = time.perf_counter()
        try:
            child.to_child.send(("run", task.workload, task.settings, task.memory_limit_bytes))
            reply = child.wait(self.timeout_s)
        except (BrokenPipeError, OSError):
            reply = None
        run_s = time.perf_counter() - t_run
        if reply == "timeout":
            child.kill()
            self._drop(framework, "gone")
            return charge(Record.failed(task.workload, "timeout",
                                        f"exceeded the time limit of {self.timeout_s:g} s (compile and "
                                        "measurement); its child process was killed", **context),
                          startup_s, run_s)
        if reply is None:
            elapsed = time.monotonic() - t0
            code, killed = child.reap()
            self._drop(framework, "gone")
            return charge(Record.failed(task.workload, "crashed",
                                        f"the child process running this config "
                                        f"{_describe_exit(code, killed)} after {elapsed:.1f} s",
                                        metrics=_exit_fields(code), **context),
                          startup_s, run_s)
        if reply[0] == "fault":
            self._drop(framework)  # the environment failed; a fresh child checks it again
            return reply[1]
        record: Record = charge(reply[1], startup_s, run_s)
        child.configs += 1
        # A predicted oom never allocated anything (typed field from paradnn.sizes); any
        # other failure may leave state behind, so the child is replaced.
        dirty = record.status == "error" or (
            record.status == "oom" and not record.metrics.get("oom_predicted"))
        if dirty or child.configs >= MAX_CONFIGS_PER_CHILD:
            self._drop(framework)
        return record

    def execute(self, tasks: Iterator[Task]) -> Iterator[tuple[Task, Outcome]]:
        for task in tasks:
            yield task, self.run_one(task)

    def close(self) -> None:
        for framework in list(self._children):
            self._drop(framework)
