"""TensorFlow's thread pools as the environment sizes them (framework-free: ``paradnn.envcheck``
checks the variables at a command's start without importing TensorFlow)."""

from __future__ import annotations

import os

from paradnn.errors import SpecError

#: The pool (intra- or inter-op) -> the environment variable that sizes it.
THREAD_ENV: dict[str, str] = {"intra": "PARADNN_TF_INTRA_OP_THREADS", "inter": "PARADNN_TF_INTER_OP_THREADS"}


def usable_cpus() -> int:
    """CPU cores this process may use (its affinity), at least 1."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_setting(kind: str) -> int:
    """Threads of TensorFlow's ``kind`` pool (``intra`` or ``inter``): its variable of
    :data:`THREAD_ENV`, else the CPU cores this process may use; SpecError naming the variable
    for a value that is not a positive integer."""
    text = os.environ.get(THREAD_ENV[kind], "").strip()
    if not text:
        return usable_cpus()
    if not text.isdigit() or int(text) < 1:
        raise SpecError(THREAD_ENV[kind], text, "a positive integer (threads)")
    return int(text)


def check_environment() -> None:
    """Each pool's variable checked (SpecError naming the first bad one): the framework's
    ``FrameworkInfo.check_environment``, run at every command's start without TensorFlow."""
    for kind in THREAD_ENV:
        thread_setting(kind)
