"""The child process of the process executor: ``python -m paradnn.executors.child IN OUT``.

It reads pickled messages from file descriptor IN and writes replies to OUT:

* ``("init", cache_dir, run_fn)`` -> ``("ready",)``
* ``("context", framework)`` -> ``("context", platform, software)`` of that framework here (its
  compilation cache pointed at ``cache_dir`` first), or ``("fault", Fault)`` when the
  environment cannot run it (an unwritable cache folder, a device platform that cannot start),
  or ``("error", ParadnnError)`` for the user's mistake (a framework that is not installed)
* ``("run", workload, settings, memory_limit_bytes)`` -> ``("record", Record)`` or ``("fault",
  Fault)`` (an infrastructure fault, see :mod:`paradnn.executors`)
* ``("exit",)`` -> exits

Nothing here knows a framework: each is reached through :mod:`paradnn.backends`, and plugins
named in ``$PARADNN_PLUGINS`` (inherited from the parent) are registered when the registries
load. Its own stdout and stderr stay the user's, so a framework's warnings are seen. If the
parent dies (even by SIGKILL) the child exits within about half a second rather than measuring
for nobody.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from multiprocessing.connection import Connection


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(3)
        time.sleep(0.5)


def main(argv: list[str]) -> int:
    conn_in = Connection(int(argv[0]), writable=False)
    conn_out = Connection(int(argv[1]), readable=False)
    parent = int(argv[2]) if len(argv) > 2 else os.getppid()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()

    message = conn_in.recv()
    assert message[0] == "init", message
    _, cache_dir, run_fn = message
    from paradnn import backends
    from paradnn.errors import InfrastructureError, ParadnnError
    from paradnn.executors import Caches, Fault, check_environment, local_context, run_config
    from paradnn.record import Record

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
        _, workload, settings, memory_limit_bytes = message
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
        outcome = run_config(run_fn, workload, settings, memory_limit_bytes, here)
        conn_out.send(("fault" if isinstance(outcome, Fault) else "record", outcome))
        # Each config compiles new programs: drop what the framework keeps of them, so a
        # long-lived child does not grow with the sweep.
        clear = getattr(backends.get(workload.framework), "clear_caches", None)
        if clear is not None:
            clear()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
