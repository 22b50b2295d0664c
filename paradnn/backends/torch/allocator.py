"""Where torch's CPU tensors get their memory: glibc malloc, told to keep freed memory for reuse.

torch allocates CPU tensors with ``posix_memalign`` and frees them at once (no caching
allocator on the CPU, unlike CUDA). With glibc's default thresholds, a training step's large
temporaries (activations, gradients, GEMM packing buffers) are handed back to the kernel when
freed and faulted in again, page by page, on the next step (in some processes: glibc's dynamic
threshold settles in others, so the defaults also make the count vary from one run to the next;
docs/frameworks-torch.md). Measured on the 2-core host
(``resource.getrusage`` over 40 steps, docs/performance.md): the FC of ``bench_peers.py`` took
858 minor page faults per step in a plain ``torch.compile`` loop and 4,029 in paradnn's backend,
the CNN 906 and 2,439; with the thresholds below, 0-51 on both, and the CNN step went from
18.1 ms to 13.9 ms. PyTorch's own CPU tuning advice for this is to preload jemalloc or tcmalloc;
``mallopt`` gets the same reuse from the allocator already loaded, inside the running process.

``reuse`` (the ``cpu_allocator`` option's default) sets ``M_MMAP_THRESHOLD`` to 32 MiB (glibc's
largest: smaller blocks come from the heap, not from fresh mappings) and ``M_TRIM_THRESHOLD``
to 256 MiB (free memory at the top of a heap is kept until that much is free). These settings
are process-wide and cannot be undone exactly: glibc's dynamic threshold stays off once set.
Freed memory stays with the process for its next allocations (its resident size keeps the
step's peak). ``system`` leaves malloc as the process has it.
"""

from __future__ import annotations

import ctypes
import platform
from typing import Any

#: The ``cpu_allocator`` option's values.
CHOICES = ("reuse", "system")
#: Bytes: blocks below this come from malloc's heaps (glibc's maximum for M_MMAP_THRESHOLD on
#: 64-bit hosts: 4 MiB * sizeof(long)).
MMAP_THRESHOLD_B = 32 << 20
#: Bytes of free memory at the top of a heap that malloc keeps before it returns any.
TRIM_THRESHOLD_B = 256 << 20
#: glibc's defaults, set back by ``system`` after ``reuse`` in the same process (fixed, as
#: mallopt leaves them: its dynamic adjustment cannot be turned back on).
DEFAULT_THRESHOLD_B = 128 << 10
# mallopt parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3

_state = {"tuned": False}


def _mallopt() -> Any:
    """glibc's ``mallopt`` (``int mallopt(int param, int value)``, 1 on success), or None on a
    host without glibc."""
    if platform.libc_ver()[0] != "glibc":
        return None
    return getattr(ctypes.CDLL(None), "mallopt", None)


def apply(choice: str) -> str:
    """Configure this process's malloc for ``choice`` (:data:`CHOICES`) and return what is in
    effect, in words (the ``cpu_allocator_used`` metric)."""
    if choice not in CHOICES:
        raise ValueError(f"cpu_allocator {choice!r}: allowed {', '.join(CHOICES)}")
    mallopt = _mallopt()
    if mallopt is None:
        return f"system malloc ({platform.libc_ver()[0] or 'not glibc'}: no mallopt)"
    if choice == "reuse":
        if not (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_B) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_B)):
            return "glibc malloc, defaults (mallopt refused the thresholds)"
        _state["tuned"] = True
        return (f"glibc malloc, freed memory kept for reuse (mallopt M_MMAP_THRESHOLD "
                f"{MMAP_THRESHOLD_B >> 20} MiB, M_TRIM_THRESHOLD {TRIM_THRESHOLD_B >> 20} MiB)")
    if not _state["tuned"]:
        return "glibc malloc, defaults"
    mallopt(_M_MMAP_THRESHOLD, DEFAULT_THRESHOLD_B)
    mallopt(_M_TRIM_THRESHOLD, DEFAULT_THRESHOLD_B)
    return ("glibc malloc, default thresholds (128 KiB) set back; fixed, not adjusting: reuse was "
            "set earlier in this process")


__all__ = ["CHOICES", "MMAP_THRESHOLD_B", "TRIM_THRESHOLD_B", "apply"]
