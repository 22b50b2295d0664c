"""Compiling ahead (docs/performance.md, "Compiling ahead"): prepare workers compile the next
configs of a sweep while the current one is measured. :class:`CompileAhead` is the process
executor's share of it: handing queued configs to workers, reading their replies, their time
limits, and stopping them (SIGSTOP) while a measuring worker on the same CPU cores times."""

from __future__ import annotations

import os
import signal
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing import connection as mp_connection
from pathlib import Path
from typing import Any

from paradnn.errors import ParadnnError
from paradnn.executors import Task
from paradnn.executors.lifecycle import MAX_CONFIGS_PER_CHILD, STARTUP_TIMEOUT_S, Child, describe_exit

__all__ = ["AUTO_OVERLAP_PLATFORMS", "STOP_CONFIRM_S", "Ahead", "Preparer", "CompileAhead", "all_stopped"]

#: Device platforms on which ``overlap="auto"`` compiles ahead with one prepare worker: where
#: the measurement runs on a device that compiling does not use. Not on a CPU (compiling and
#: timing share the cores) and not on a TPU (one process holds a host's TPU chips; a second
#: process cannot open them to compile for them).
AUTO_OVERLAP_PLATFORMS = ("gpu",)
#: Seconds to wait for stopped prepare workers to be seen stopped (``/proc``) before timing.
STOP_CONFIRM_S = 2.0



@dataclass
class Ahead:
    """A config pulled from the task iterator and not measured yet, and how far compiling it
    ahead got: ``queued``, ``preparing`` (by ``preparer``), ``prepared``, ``failed`` (``note``
    says why; the measuring worker then compiles it itself) or ``skipped`` (not compiled ahead)."""

    task: Task
    state: str = "queued"
    preparer: "Preparer | None" = None
    note: str = ""


class Preparer:
    """A prepare worker (a child of role ``prepare``) and the config it is compiling."""

    def __init__(self, child: Child, framework: str):
        self.child, self.framework = child, framework
        self.entry: Ahead | None = None
        self.deadline = float("inf")  # time.monotonic() by which its config must be prepared
        self.stopped_since: float | None = None  # time.monotonic() of its SIGSTOP, while stopped
        self.configs = 0

    @property
    def pid(self) -> int:
        return self.child.proc.pid


def all_stopped(pid: int) -> bool:
    """Whether every thread of process ``pid`` is stopped (``/proc``: state T or t), or gone."""
    try:
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
            if state not in ("T", "t", "X", "Z"):
                return False
    except (OSError, IndexError):
        return True  # gone: nothing of it runs
    return True



class CompileAhead:
    """The prepare workers of a :class:`~paradnn.executors.process.ProcessExecutor` (a mixin:
    the executor holds the state, ``overlap``, ``timeout_s``, ``cache_dir``, ``run_fn`` and
    ``context``, and calls these between its measurements)."""

    overlap: int | str
    timeout_s: float
    cache_dir: str | None
    run_fn: Any
    _preparers: dict[str, list[Preparer]]
    _no_prepare: dict[str, str]
    _stopped_now: list[Preparer]
    _timing_now: bool

    def context(self, framework: str) -> tuple[dict[str, Any], dict[str, Any]]:
        raise NotImplementedError

    def _beat(self, task: Task, phase: tuple[str, float], t_begin: float, beats: list[float]) -> None:
        raise NotImplementedError

    def workers(self, framework: str) -> int:
        """Prepare workers that compile ahead configs of ``framework`` (0: none)."""
        if framework in self._no_prepare:
            return 0
        if self.overlap == "auto":
            return 1 if self.context(framework)[0]["device_platform"] in AUTO_OVERLAP_PLATFORMS else 0
        return int(self.overlap)


    def _all_preparers(self) -> list[Preparer]:
        return [p for pool in self._preparers.values() for p in pool]

    def _drop_preparer(self, p: Preparer) -> None:
        """Kill a prepare worker (SIGKILL reaches a stopped one too) and forget it."""
        pool = self._preparers.get(p.framework, [])
        if p in pool:
            pool.remove(p)
        if p in self._stopped_now:
            self._stopped_now.remove(p)
        p.child.kill()

    def _dispatch(self, ahead: deque[Ahead]) -> None:
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
                    idle = Preparer(Child(self.cache_dir, self.run_fn, role="prepare", wait_ready=False),
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

    def _on_preparer(self, p: Preparer, message: Any) -> None:
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
                          f"its prepare worker {describe_exit(code)}" if message is None else
                          f"its prepare worker sent {message!r}")

    def _service(self, ready: list[Any], ahead: deque[Ahead]) -> None:
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
        stopped: list[Preparer] = []
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
        while time.monotonic() < deadline and not all(all_stopped(p.pid) for p in stopped):
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

    def _wait_prepared(self, entry: Ahead, ahead: deque[Ahead], t_begin: float,
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
