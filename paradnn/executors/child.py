"""The child process of the process executor: ``python -m paradnn.executors.child IN OUT PARENT
ROLE [PRELOAD]``.

ROLE is ``measure`` (the default: it runs configs and sends their records) or ``prepare`` (a
worker that compiles ahead, :func:`paradnn.runner.prepare_workload`; its outcome is never a
record). If ``$PARADNN_CPUS_MEASURE`` / ``$PARADNN_CPUS_PREPARE`` name CPU cores (``0``,
``0,2-3``), the child of that role keeps to them (``os.sched_setaffinity``): a benchmark's way
to emulate a host whose measuring worker leaves cores free, not a user setting. PRELOAD names a
framework to import while it waits for ``init`` (:func:`paradnn.spawn.prestart`): an import only,
its caches and devices are set up on the ``context`` request as without it.

It reads pickled messages from file descriptor IN and writes replies to OUT:

* ``("init", cache_dir, run_fn)`` -> ``("ready",)`` (an ``("exit",)`` or a closed pipe instead:
  it exits)
* ``("context", framework)`` -> ``("context", platform, software)`` of that framework here (its
  compilation cache pointed at ``cache_dir`` first), or ``("fault", Fault)`` when the
  environment cannot run it (an unwritable cache folder, a device platform that cannot start),
  or ``("error", ParadnnError)`` for the user's mistake (a framework that is not installed)
* ``("run", workload, settings, memory_limit_bytes[, handshake])`` -> ``("phase", name, wait)``
  at every phase of the run (:func:`paradnn.progress.phase`), then ``("record", Record)`` or
  ``("fault", Fault)`` (an infrastructure fault, see :mod:`paradnn.executors`). With
  ``handshake`` true the child waits after announcing the timing phase (``wait`` true) until the
  parent answers ``("go", pgids)``, having stopped the prepare workers whose process groups
  ``pgids`` are; should the parent die before it resumes them, this child resumes them (SIGCONT)
  before it exits, so none is left stopped.
* ``("prepare", workload, settings, memory_limit_bytes)`` -> ``("prepared", words)`` or
  ``("prepare-failed", words, environment)`` (``environment`` true: a fault every config would
  meet, such as a device platform this second process cannot open)
* ``("exit",)`` -> exits

Nothing here knows a framework: each is reached through :mod:`paradnn.frameworks`, and plugins
named in ``$PARADNN_PLUGINS`` (inherited from the parent) are loaded first: one that fails is
answered ``("error", PluginError)`` in place of ``("ready",)``, and the child exits. Its own stdout and stderr stay the user's, so a framework's warnings are seen. If the
parent dies (even by SIGKILL) the child exits within about half a second rather than measuring
for nobody.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection

#: Environment variables naming the CPU cores of each role's children (benchmarks only).
CPUS_ENV = {"measure": "PARADNN_CPUS_MEASURE", "prepare": "PARADNN_CPUS_PREPARE"}

#: Process groups of prepare workers the parent stopped for this child's timed calls: resumed
#: here if the parent dies before it resumes them.
_stopped: list[int] = []


def _resume_stopped() -> None:
    for pgid in list(_stopped):
        try:
            os.killpg(pgid, signal.SIGCONT)
        except OSError:
            pass


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            _resume_stopped()
            os._exit(3)
        time.sleep(0.5)


def parse_cpus(text: str) -> set[int]:
    """CPU numbers from a list such as ``0,2-3`` (taskset's syntax)."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _prepare(message: tuple, context) -> tuple:
    """Run a ``prepare`` message: its reply; any failure is only words (never a record)."""
    _, workload, settings, memory_limit_bytes = message
    from paradnn import frameworks
    from paradnn.errors import InfrastructureError
    from paradnn.runner import prepare_workload

    try:
        context(workload.framework)
        return ("prepared", prepare_workload(workload, settings, memory_limit_bytes))
    except (InfrastructureError, OSError) as exc:
        # The environment (a platform that one process holds, a cache): every config would meet
        # it, so the parent stops compiling ahead for this framework.
        return ("prepare-failed", f"{type(exc).__name__}: {exc}"[:500], True)
    except Exception as exc:  # noqa: BLE001 - compiling ahead only saves time; never fatal here
        return ("prepare-failed", f"{type(exc).__name__}: {exc}"[:500], False)
    finally:
        if frameworks.available(workload.framework) is None:
            clear = getattr(frameworks.get(workload.framework), "clear_caches", None)
            if clear is not None:
                clear()


def pin_process(cpus: set[int]) -> None:
    """Keep every thread of this process to ``cpus``. ``os.sched_setaffinity(0, ...)`` sets the
    calling thread's mask only (and those of threads started later): a BLAS thread pool that
    started when numpy was imported kept both cores, so a worker labelled "affinity 1 of 2"
    multiplied on two (its probe's float32 peak was 199 GFLOP/s, one core's numpy GEMM is 105
    on the host of docs/prediction.md)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            pass  # a thread that ended meanwhile


def main(argv: list[str]) -> int:
    conn_in = Connection(int(argv[0]), writable=False)
    conn_out = Connection(int(argv[1]), readable=False)
    parent = int(argv[2]) if len(argv) > 2 else os.getppid()
    role = argv[3] if len(argv) > 3 else "measure"
    preload = argv[4] if len(argv) > 4 else ""
    cpus = os.environ.get(CPUS_ENV.get(role, ""), "")
    if cpus:
        pin_process(parse_cpus(cpus))  # before any framework starts its threads
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()

    from paradnn import frameworks, progress
    from paradnn.errors import InfrastructureError, ParadnnError
    from paradnn.executors import Caches, Fault, check_environment, local_context, run_config
    from paradnn.plugins import PluginError, load_plugins
    from paradnn.record import Record

    try:
        # First, and explicitly: a plugin that fails here (and not in the parent, which loaded
        # it before starting this child) must stop the sweep with its one line, instead of a
        # traceback here and every config failing on it (its error stored as the configs').
        load_plugins()
    except PluginError as exc:
        # The parent reads this instead of ("ready",) and raises it (Child._expect); a worker
        # pre-started before the parent's own plugins failed is discarded unread.
        conn_out.send(("error", exc))
        return 0

    if preload:
        # Import only, while the parent is busy: its caches are configured and its devices
        # started on the parent's "context" request, after "init" names the cache folder.
        try:
            frameworks.get(preload)
        except Exception:  # noqa: BLE001 - the "context" request meets it again and reports it
            pass
    try:
        message = conn_in.recv()
    except EOFError:  # a pre-started worker nobody adopted
        return 0
    if message[0] == "exit":
        return 0
    assert message[0] == "init", message
    _, cache_dir, run_fn = message
    caches = Caches(cache_dir)
    contexts: dict[str, tuple] = {}

    def context(framework: str) -> tuple:
        if framework not in contexts:
            caches.ensure(framework)
            found = local_context(framework)
            check_environment(found[0])
            contexts[framework] = found
        return contexts[framework]

    conn_out.send(("ready",))
    while True:
        try:
            message = conn_in.recv()
        except EOFError:  # the parent went away
            return 0
        if message[0] == "exit":
            return 0
        if message[0] == "context":
            try:
                conn_out.send(("context", *context(message[1])))
            except InfrastructureError as exc:
                conn_out.send(("fault", Fault(str(exc), retry=exc.retry)))
                return 0
            except OSError as exc:
                conn_out.send(("fault", Fault(f"the sweep's child process cannot start "
                                              f"{message[1]}: {exc.strerror or exc} ({exc.filename})")))
                return 0
            except ParadnnError as exc:
                conn_out.send(("error", exc))
            continue
        if message[0] == "prepare":
            conn_out.send(_prepare(message, context))
            continue
        _, workload, settings, memory_limit_bytes, *rest = message
        handshake = bool(rest and rest[0])

        def forward(name: str) -> None:
            # The parent prints heartbeats from these; before the timed calls it stops the
            # prepare workers on this child's cores and says "go".
            wait = handshake and name == progress.TIMING
            conn_out.send(("phase", name, wait))
            _resume_stopped()  # a phase after the timing one: the parent resumes them too
            _stopped.clear()
            if wait:
                try:
                    reply = conn_in.recv()
                except EOFError:  # the parent went away
                    os._exit(0)
                _stopped.extend(reply[1])

        try:
            here = context(workload.framework)
        except (InfrastructureError, OSError) as exc:
            conn_out.send(("fault", Fault(str(exc), retry=getattr(exc, "retry", False))))
            return 0
        except ParadnnError as exc:  # e.g. a framework not installed here: the config's error
            conn_out.send(("record", Record.failed(workload, "error", f"{type(exc).__name__}: {exc}",
                                                   platform={}, software={},
                                                   settings=settings.to_dict(workload.framework))))
            continue
        with progress.listen(forward):
            outcome = run_config(run_fn, workload, settings, memory_limit_bytes, here)
        _resume_stopped()
        _stopped.clear()
        conn_out.send(("fault" if isinstance(outcome, Fault) else "record", outcome))
        # Each config compiles new programs: drop what the framework keeps of them, so a
        # long-lived child does not grow with the sweep.
        clear = getattr(frameworks.get(workload.framework), "clear_caches", None)
        if clear is not None:
            clear()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
