"""The child process of the process executor: ``python -m paradnn.executors.child IN OUT``.

It reads pickled messages from file descriptor IN and writes replies to OUT:

* ``("init", cache_dir, run_fn)`` -> ``("ready", platform, software)``, or ``("fault",
  Fault)`` and exit when the environment cannot run anything (an unwritable cache folder, a JAX
  platform that cannot start)
* ``("run", workload, settings, memory_limit_bytes)`` -> ``("record", Record)`` or ``("fault",
  Fault)`` (an infrastructure fault, see :mod:`paradnn.executors`)
* ``("exit",)`` -> exits

Its own stdout and stderr stay the user's, so warnings from JAX are seen. If the parent dies
(even by SIGKILL) the child exits within about half a second rather than measuring for nobody.
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
    from paradnn.errors import InfrastructureError
    from paradnn.executors import (Fault, check_environment, configure_cache, local_context,
                                   run_config)

    try:
        configure_cache(cache_dir)
        context = local_context()
        check_environment(context[0])
    except InfrastructureError as exc:
        conn_out.send(("fault", Fault(str(exc), retry=exc.retry)))
        return 0
    except OSError as exc:
        conn_out.send(("fault", Fault(f"the sweep's child process cannot start: "
                                      f"{exc.strerror or exc} ({exc.filename})")))
        return 0
    conn_out.send(("ready", *context))
    import jax

    while True:
        try:
            message = conn_in.recv()
        except EOFError:  # the parent went away
            return 0
        if message[0] == "exit":
            return 0
        _, workload, settings, memory_limit_bytes = message
        outcome = run_config(run_fn, workload, settings, memory_limit_bytes,
                             context if workload.framework == "jax" else local_context(workload.framework))
        conn_out.send(("fault" if isinstance(outcome, Fault) else "record", outcome))
        # Each config jits new closures; drop their executables so a long-lived child does not
        # grow with the sweep.
        jax.clear_caches()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
