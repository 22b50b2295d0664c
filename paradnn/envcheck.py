"""The environment a command runs in: its ``PARADNN_*`` variables, checked at once, and faults of
the file system put in words.

:func:`check` parses every ``PARADNN_*`` variable that paradnn reads (:data:`VARIABLES`), with the
parser its reader uses, at the start of every command (``paradnn.cli.main``), before a framework is
imported or anything is measured: a bad value is one line naming the variable, its value and
what is allowed, not an error after a 20 s probe. :func:`os_cause` says why an ``OSError``
happened, from its ``errno`` (read-only, permission denied, no space, a file where a folder
should be), for the one-line messages of unwritable folders. Nothing here imports a framework.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from paradnn.errors import ParadnnError

#: Every environment variable paradnn reads -> what it holds (docs/reliability.md).
VARIABLES: dict[str, str] = {
    "PARADNN_CACHE": "the folder of the probe cache (default ~/.cache/paradnn)",
    "PARADNN_PLUGINS": "comma-separated plugin modules (paradnn.plugins)",
    "PARADNN_PROBE_MAX_CV": "the probe's contention threshold on the spread (a positive number)",
    "PARADNN_PROBE_MAX_LOAD": "the contention threshold on other processes' busy cores (a positive number)",
    "PARADNN_PROBE_BUDGET_S": "the probe's time budget (positive seconds)",
    "PARADNN_RETRY_UNSTABLE_S": "a sweep's default retry_unstable_s (seconds, 0 for none)",
    "PARADNN_CPUS_MEASURE": "CPU cores of a sweep's measuring worker (benchmarks; e.g. 0,2-3)",
    "PARADNN_CPUS_PREPARE": "CPU cores of a sweep's prepare workers (benchmarks; e.g. 1)",
    "PARADNN_TF_INTRA_OP_THREADS": "TensorFlow's intra-op threads (a positive integer)",
    "PARADNN_TF_INTER_OP_THREADS": "TensorFlow's inter-op threads (a positive integer)",
    "PARADNN_DEBUG": "any non-empty value: show the traceback of an environment fault",
}

_CPU_LIST = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")

# errno -> what it means for a folder paradnn writes to. Classified by number, never by the
# message's text (which depends on the C library and the locale).
_CAUSES = {
    errno.EROFS: "the file system is mounted read-only",
    errno.EACCES: "this user may not write there",
    errno.EPERM: "this user may not write there",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "this user's disk quota is used up",
    errno.EEXIST: "a file is where a folder should be",
    errno.ENOTDIR: "a file is where a folder should be",
}


def os_cause(exc: OSError) -> str:
    """Why ``exc`` happened, in words, from its errno: the system's text first (what the user
    may search for), then what it means (for a file where a folder should be: which file)."""
    text = exc.strerror or type(exc).__name__
    meaning = _CAUSES.get(exc.errno)
    if meaning is None:
        return text
    if exc.errno in (errno.EEXIST, errno.ENOTDIR) and exc.filename:
        blocker = _file_in_the_way(Path(os.fsdecode(exc.filename)))
        if blocker is not None:
            meaning = f"{meaning} ({blocker})"
    return f"{text}: {meaning}"


def _file_in_the_way(path: Path) -> Path | None:
    """The first of ``path`` and its parents that exists and is not a folder, if any."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else candidate
    return None


def _check_cache() -> None:
    text = os.environ.get("PARADNN_CACHE")
    if text is None:
        return
    allowed = "a folder paradnn can write (created if missing), or unset for ~/.cache/paradnn"
    if not text.strip():
        raise ParadnnError(f"invalid PARADNN_CACHE={text!r}: allowed {allowed}")
    blocker = _file_in_the_way(Path(text).expanduser())
    if blocker is not None:
        raise ParadnnError(f"invalid PARADNN_CACHE={text!r}: {blocker} is a file, not a folder; "
                           f"allowed {allowed}")


def _check_cpus(name: str) -> None:
    text = os.environ.get(name, "")
    if not text:
        return
    from paradnn.executors.child import parse_cpus

    usable = os.sched_getaffinity(0)
    if not _CPU_LIST.match(text) or not parse_cpus(text) or not parse_cpus(text) <= usable:
        raise ParadnnError(f"invalid {name}={text!r}: allowed CPU numbers this process may use "
                           f"({', '.join(map(str, sorted(usable)))}) as a list such as 0,2-3")


def check() -> None:
    """Parse every variable of :data:`VARIABLES` that is set, with the parser its reader uses;
    ParadnnError (one line: the variable, its value, what is allowed) for the first bad one."""
    from paradnn import frameworks, hardware, hostutil, plugins

    hardware.probe_max_cv()
    hardware.probe_budget_s()
    hostutil.max_other_cores()
    retry = os.environ.get("PARADNN_RETRY_UNSTABLE_S", "").strip()
    if retry:
        # paradnn.sweeper.default_retry_unstable_s's check, without importing the sweeper
        # (pandas, the store) into every command.
        from paradnn.grids.sweepfile import parse_retry_unstable

        parse_retry_unstable(retry, "$PARADNN_RETRY_UNSTABLE_S")
    plugins.plugin_modules()
    _check_cache()
    for name in ("PARADNN_CPUS_MEASURE", "PARADNN_CPUS_PREPARE"):
        _check_cpus(name)
    frameworks.check_environments()  # each framework's own reader, which imports no framework


__all__ = ["VARIABLES", "check", "os_cause"]
