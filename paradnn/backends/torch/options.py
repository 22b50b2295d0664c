"""The PyTorch backend's options (framework-free: read to build CLI flags and settings keys)."""

from __future__ import annotations

from dataclasses import dataclass

from paradnn.backends.torch.allocator import CHOICES as ALLOCATORS
from paradnn.precision import matmul_precision_setting
from paradnn.settings import Options, choice, setting

#: Values of ``torch_compile``: eager execution, or a ``torch.compile`` mode.
COMPILE_MODES = ("default", "eager", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class TorchOptions(Options):
    """Options of the measured PyTorch step (record columns ``torch_compile``,
    ``matmul_precision`` and ``cpu_allocator``)."""

    torch_compile: str = setting("default", choice(*COMPILE_MODES),
                                 "torch.compile mode of the step (default, reduce-overhead, "
                                 "max-autotune, max-autotune-no-cudagraphs) or eager (no compilation)")
    matmul_precision: str = matmul_precision_setting()
    cpu_allocator: str = setting("reuse", choice(*ALLOCATORS),
                                 "on a CPU, glibc malloc's thresholds for torch's tensors: reuse (freed "
                                 "memory kept for the next step: no page faults per step) or system "
                                 "(malloc as the process has it); paradnn.backends.torch.allocator")


__all__ = ["COMPILE_MODES", "TorchOptions"]
