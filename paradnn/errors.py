"""The error types users see. The CLI turns any ParadnnError into one line and exit status 2.

Two kinds of failure never become a workload's result (a stored row):

* :class:`ParadnnError` (and :class:`SpecError`): bad input from the user;
* :class:`InfrastructureError`: a fault of the environment the workload runs in (an unwritable
  cache or store, a full disk, a JAX platform that cannot start, a worker that died). A sweep
  stops on one, or leaves the config unrecorded so that the next run of the sweep retries it.

A workload's own outcomes (``ok``, ``oom``, ``error``, ``timeout``, ``crashed``) are rows.
"""

from __future__ import annotations

import reprlib
import signal

#: Longest echo of a user's value in a message, in characters.
ECHO_CHARS = 80

_REPR = reprlib.Repr()
# reprlib stops at these sizes without walking the rest, so echoing a huge or self-similar value
# (a YAML alias bomb) costs a bounded amount of time and memory.
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple, _REPR.maxset = 3, 6, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = ECHO_CHARS, ECHO_CHARS, 40


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """``repr(value)`` bounded to ``limit`` characters (an ellipsis marks the cut)."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class ParadnnError(Exception):
    """Bad input from the user (a parameter, a file, a store): the message says what is allowed."""


class SpecError(ParadnnError, ValueError):
    """A parameter value that paradnn cannot build; the message names it and what is allowed."""

    def __init__(self, parameter: str, value: object, allowed: str):
        self.parameter, self.value, self.allowed = parameter, value, allowed
        super().__init__(f"invalid {parameter}={echo(value)}: allowed {allowed}")


class InfrastructureError(ParadnnError):
    """A fault of the environment, not of the workload: never stored as a workload's result.

    ``retry`` True means the config that met it is left unrecorded and the sweep goes on (a lost
    worker); False means the sweep stops, because every config would meet it (an unwritable cache
    directory, a full disk, a JAX platform that cannot start).
    """

    def __init__(self, message: str, retry: bool = False):
        self.retry = retry
        super().__init__(message)


class StoreError(ParadnnError):
    """The results store cannot be read or written (read-only, full disk, corrupt file)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a job scheduler's time limit, a container's stop) or
    SIGHUP (the terminal of a sweep started without ``nohup`` closed) as the command line
    receives it: raised in the main thread, so the clean-up of a Ctrl-C runs (child processes
    stopped, the store closed) before the command exits with status 128 + ``signum`` (143,
    129). A subclass of KeyboardInterrupt because that is what it is to the code it unwinds: an
    outside stop, which no ``except Exception`` may take for a workload's failure."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = int(signum)  # the signal's number: the exit status is 128 + it


class ParadnnWarning(UserWarning):
    """Something the user should know that did not stop the command (a skipped corrupt row, a
    store opened immutable); the CLI prints it as one line ``paradnn: warning: ...``."""
