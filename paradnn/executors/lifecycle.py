"""The life of a sweep's child process (:class:`Child`): started with its pipes (or adopted
from :mod:`paradnn.spawn`), asked for a framework's context, waited on with a time limit,
reaped, killed and stopped; and the words and typed fields of how a child ended."""

from __future__ import annotations

import pickle
import signal
import subprocess
import time
from typing import Any

from paradnn import spawn
from paradnn.errors import InfrastructureError, ParadnnError
from paradnn.executors import Fault, RunFn

__all__ = ["Child", "STARTUP_TIMEOUT_S", "MAX_CONFIGS_PER_CHILD", "EXIT_GRACE_S", "PREPARE_ENV",
           "describe_exit", "exit_fields", "signal_name"]

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


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_exit(code: int | None, killed_by_paradnn: bool = False) -> str:
    """Words for a child's end, from its exit status (``Popen.returncode``: negative = signal)."""
    if code is None:
        return "did not exit"
    if code < 0:
        name = signal_name(-code)
        if killed_by_paradnn:
            return f"stopped answering and was killed by paradnn ({name})"
        hint = (" from outside the process (often the kernel's out-of-memory killer)"
                if -code == signal.SIGKILL else "")
        return f"was killed by {name}{hint}"
    return f"exited by itself with status {code}"


def exit_fields(code: int | None) -> dict[str, Any]:
    """Typed fields of a crashed record: the exit status, or the signal's name."""
    if code is None:
        return {"child_exit_status": None, "child_signal": None}
    return {"child_exit_status": code, "child_signal": signal_name(-code) if code < 0 else None}


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
               else describe_exit(code, killed))
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
