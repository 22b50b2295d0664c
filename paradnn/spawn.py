"""Start the process executor's child processes, and pre-start its measuring worker.

:func:`start` is how every child of :mod:`paradnn.executors.process` starts (its environment,
process group and pipes). It lives here, apart from the executor, because it must stay light:
``paradnn sweep`` calls :func:`prestart` before it imports its own modules (pandas, the store,
the sweeper: about half a second), so the measuring worker starts Python and imports the default
framework meanwhile, and the executor adopts it (:func:`take`) instead of starting one. A
pre-started worker has only imported modules: it is sent ``("init", cache_dir, run_fn)`` when
adopted, and configures its caches and starts its devices after that, as any child does. One that
is not adopted (a dry run, bad input, another executor, another framework) is killed and reaped by
:func:`discard`; nothing ran in it. Only the command line pre-starts: ``paradnn.sweep(...)`` from
Python starts its workers when its executor needs them.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection

from paradnn import hostmem


@dataclass
class Started:
    """A child process just started, and its two pipes; ``preload`` is the framework it imports
    before its ``init`` message ("" for none)."""

    proc: subprocess.Popen
    to_child: Connection
    from_child: Connection
    preload: str = ""

    def kill(self) -> int | None:
        """Kill its process group, reap it and close its pipes; returns its exit code (None if
        it did not end within 30 s)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        for conn in (self.to_child, self.from_child):
            try:
                conn.close()
            except OSError:
                pass
        return code


def start(role: str, preload: str = "", env: dict[str, str] | None = None) -> Started:
    """Start ``python -m paradnn.executors.child`` of ``role`` (``measure`` or ``prepare``) with
    ``env`` added to this process's environment; it imports ``preload`` (a framework's name)
    while it waits for its ``init`` message. OSError if it cannot start."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    # Huge pages for malloc (paradnn.hostmem): glibc reads the setting when the child starts.
    child_env = {**os.environ, **hostmem.child_env(os.environ), **(env or {})}
    # The child must import what this process imports: paradnn, and the module of run_fn.
    paths = [p or os.getcwd() for p in sys.path]
    child_env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "paradnn.executors.child", str(to_child_r),
             str(from_child_w), str(os.getpid()), role, preload],
            pass_fds=(to_child_r, from_child_w), env=child_env,
            # Own process group: a timeout kills the child and anything it started, and a
            # Ctrl-C in the terminal reaches only the driver, which then stops the child.
            # A prepare worker's group stays in the driver's session: should the driver die
            # while the worker is stopped (SIGSTOP, for a timed call), its group becomes
            # orphaned with a stopped member and the kernel sends it SIGHUP and SIGCONT, so
            # it exits rather than stay stopped (a new session's group is orphaned from the
            # start and would get neither).
            **({"process_group": 0} if role == "prepare" else {"start_new_session": True}))
    except BaseException:
        os.close(to_child_w)
        os.close(from_child_r)
        raise
    finally:
        os.close(to_child_r)
        os.close(from_child_w)
    return Started(proc, Connection(to_child_w, readable=False),
                   Connection(from_child_r, writable=False), preload)


#: The measuring worker started ahead of its executor, until one adopts it or it is discarded.
_prestarted: Started | None = None


def prestart(framework: str) -> None:
    """Start a measuring worker that imports ``framework`` now, for the executor to adopt
    (:func:`take`); killed at exit if none does. Best effort: if it cannot start, the executor
    starts its worker itself, as without it."""
    global _prestarted
    discard()
    try:
        _prestarted = start("measure", preload=framework)
    except OSError:
        pass


def take(framework: str) -> Started | None:
    """The pre-started measuring worker if it was started for ``framework`` (the caller owns
    it now), else None; one pre-started for another framework is discarded (a child never
    hosts two frameworks, and this one may have imported its framework already)."""
    global _prestarted
    found, _prestarted = _prestarted, None
    if found is not None and found.preload != framework:
        found.kill()
        found = None
    return found


def discard() -> None:
    """Kill and reap the pre-started worker if no executor adopted it."""
    global _prestarted
    found, _prestarted = _prestarted, None
    if found is not None:
        found.kill()


atexit.register(discard)  # a way out that skipped the command's own `finally`
