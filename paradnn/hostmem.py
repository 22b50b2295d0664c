"""Huge pages for the host memory of paradnn's measuring processes (glibc malloc on Linux).

XLA:CPU allocates a program's temporaries once per execution and frees them after it. A large
program's temporaries are one block of tens or hundreds of MB (Inception v3 at 75 px, batch 4:
161 MB), which glibc's malloc takes from a fresh ``mmap`` and hands back with ``munmap`` at once
(a block over its mmap threshold, 32 MiB at most; and, from a thread outside the main arena, a
block larger than that arena's heap whatever ``mallopt`` says).
On a CPU, where a convolution model's training step is a one-step program called K times, every
step therefore faults its temporaries in again, one 4 KiB page at a time: 39,000 minor page
faults and about 80 ms of kernel time per 150 ms step for that Inception (``strace``, and
``resource.getrusage`` over the steps; docs/performance.md "Page faults on a CPU"). No
``mallopt`` threshold reaches that block (one arena for every thread does, at the cost of
their contention); glibc's tunable ``glibc.malloc.hugetlb=1`` (glibc >=
2.35) has malloc ask the kernel for transparent huge pages (``madvise``) on the memory it maps,
so the same block takes a few hundred 2 MiB faults. Glibc reads its tunables from the
environment when a process starts, so this can only be given to processes paradnn starts:
:func:`child_env` adds it to the environment of a sweep's workers (:mod:`paradnn.spawn`) and
of the best-stack calibration's children, and the measuring commands (``paradnn run``,
``probe``, ``profile``, ...) start themselves again with it (:func:`reexec_args`). A user's own
``glibc.malloc.hugetlb`` in ``GLIBC_TUNABLES`` wins (``=0`` turns it off). The Python API's
in-process runs (``paradnn.run``) keep the process as it was started.

:func:`huge_pages` says, in one word, what the running process got (the metric
``host_huge_pages`` of every record): the kernel's transparent-huge-page mode decides whether the
request matters (``always``: all anonymous memory gets huge pages anyway; ``never``: none does).
This module imports nothing heavy: the command line uses it before any framework starts.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any, Mapping

#: The glibc tunable (and value) that asks for transparent huge pages on malloc's memory.
TUNABLE, WANTED = "glibc.malloc.hugetlb", "1"
#: The environment variable glibc reads its tunables from (``name=value`` pairs joined by ``:``).
ENV = "GLIBC_TUNABLES"
#: The kernel's transparent-huge-page mode ("always [madvise] never": the bracketed one is in force).
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
#: This process's environment as it started (what glibc read), NUL-separated.
START_ENVIRON = Path("/proc/self/environ")
#: The first glibc with the tunable.
MIN_GLIBC = (2, 35)
#: :func:`huge_pages`'s answers: how the process's malloc'd memory is backed.
STATES = {
    "malloc": "malloc asks for transparent huge pages (glibc.malloc.hugetlb=1) and the kernel's "
              "mode is madvise: large blocks are backed by 2 MiB pages",
    "always": "the kernel gives every anonymous mapping transparent huge pages (mode always)",
    "none": "4 KiB pages: the kernel's mode is madvise and malloc does not ask (GLIBC_TUNABLES "
            "without glibc.malloc.hugetlb=1, or a glibc older than 2.35), or the mode is never",
    "unknown": "not Linux with glibc, or the kernel's mode is not readable",
}


#: What a row from before paradnn recorded ``host_huge_pages`` reads as.
NOT_RECORDED = "not recorded"


def recorded(value: object) -> str:
    """A row's ``host_huge_pages`` as analyses show it: the state, or :data:`NOT_RECORDED`
    where the row has none (missing, null, NaN)."""
    return value if isinstance(value, str) and value else NOT_RECORDED


def _tunables(value: str) -> dict[str, str]:
    """``GLIBC_TUNABLES``'s ``name=value`` pairs (later ones win, as glibc reads them)."""
    pairs = (item.partition("=") for item in value.split(":") if item)
    return {name: val for name, _, val in pairs}


def glibc_supports_tunable() -> bool:
    """Whether this process runs on glibc >= 2.35 (Linux), which knows the tunable."""
    if not sys.platform.startswith("linux"):
        return False
    lib, version = platform.libc_ver()
    try:
        return lib == "glibc" and tuple(int(p) for p in version.split(".")[:2]) >= MIN_GLIBC
    except ValueError:
        return False


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to ``environ`` for a process paradnn starts to measure in: ``{}``
    where the tunable is already set there (the user's value wins) or glibc does not know it,
    else ``GLIBC_TUNABLES`` with ``glibc.malloc.hugetlb=1`` appended to what it held."""
    current = environ.get(ENV, "")
    if TUNABLE in _tunables(current) or not glibc_supports_tunable():
        return {}
    return {ENV: f"{current}:{TUNABLE}={WANTED}" if current else f"{TUNABLE}={WANTED}"}


def thp_mode(path: Path = THP_ENABLED) -> str | None:
    """The kernel's transparent-huge-page mode (``always``, ``madvise``, ``never``), None where
    the file is missing or unreadable."""
    try:
        text = path.read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


def start_tunables(path: Path = START_ENVIRON) -> dict[str, str] | None:
    """The tunables this process started with (its ``GLIBC_TUNABLES`` at exec, which is what
    glibc read; a later change of ``os.environ`` changes nothing), None where not readable."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    for item in raw.split(b"\0"):
        if item.startswith(ENV.encode() + b"="):
            return _tunables(item[len(ENV) + 1:].decode(errors="replace"))
    return {}


def huge_pages(thp_path: Path = THP_ENABLED, environ_path: Path = START_ENVIRON) -> str:
    """How this process's malloc'd memory is backed, one key of :data:`STATES`."""
    mode = thp_mode(thp_path)
    if mode == "always":
        return "always"
    if mode == "never":
        return "none"
    tunables = start_tunables(environ_path)
    if mode != "madvise" or tunables is None:
        return "unknown"
    asked = tunables.get(TUNABLE, "0") not in ("", "0") and glibc_supports_tunable()
    return "malloc" if asked else "none"


#: Set in the environment of a command started again by :func:`reexec_args`: it never starts
#: itself a second time, even where something between the two removed ``GLIBC_TUNABLES``.
RESTARTED = "HUGE_PAGES_RESTART_BY_PARADNN"  # not a PARADNN_* setting: no user sets it


def reexec_args(environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """``(argv, env)`` that start this same command again with huge pages (:func:`child_env`),
    or None where nothing would change, it was started again already, or the original command
    line is unknown."""
    extra = child_env(environ)
    argv = list(getattr(sys, "orig_argv", []))
    if not extra or RESTARTED in environ or not argv or not sys.executable:
        return None
    return argv, {**environ, **extra, RESTARTED: "1"}


#: A run whose process took at least this many minor page faults per step and spent at least
#: this share of its CPU time in the kernel, with 4 KiB pages, raises the provenance note
#: ``page_faults`` (paradnn.record): the Inception v3 of docs/performance.md "Page faults on a
#: CPU" took about 39,000 and 30% with them and 500 and 6-11% with huge pages; the peers' small
#: CNN under 30 and about 1% either way.
PAGE_FAULTS_PER_STEP, PAGE_FAULT_KERNEL_SHARE = 1000, 0.10


def faulted_in_each_step(metrics: Mapping[str, Any]) -> bool:
    """Whether a run's process, with 4 KiB pages, faulted memory in on every step at a cost
    (:data:`PAGE_FAULTS_PER_STEP`, :data:`PAGE_FAULT_KERNEL_SHARE`), from its record's
    ``host_huge_pages``, ``page_faults_per_step``, ``process_system_cpu_s`` and ``process_cpu_s``."""
    faults, kernel, cpu = (metrics.get(k) for k in ("page_faults_per_step", "process_system_cpu_s", "process_cpu_s"))
    if metrics.get("host_huge_pages") != "none" or None in (faults, kernel, cpu) or not cpu > 0:
        return False
    return faults >= PAGE_FAULTS_PER_STEP and kernel / cpu >= PAGE_FAULT_KERNEL_SHARE
