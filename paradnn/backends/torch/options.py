"""The PyTorch backend's options (framework-free: read to build CLI flags and settings keys)."""

from __future__ import annotations

from dataclasses import dataclass

from paradnn.backends.torch.allocator import CHOICES as ALLOCATORS
from paradnn.precision import matmul_precision_setting
from paradnn.settings import Options, choice, setting

#: Values of ``torch_compile``: eager execution, or a ``torch.compile`` mode.
COMPILE_MODES = ("default", "eager", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: Values of ``memory_format``: the layout of an image model's input and 4-D weights (and so of
#: the activations its convolutions produce), as ``torch.memory_format`` names them.
MEMORY_FORMATS = ("channels_last", "contiguous")


@dataclass(frozen=True)
class TorchOptions(Options):
    """Options of the measured PyTorch step (record columns ``torch_compile``,
    ``matmul_precision``, ``cpu_allocator`` and ``memory_format``)."""

    torch_compile: str = setting("default", choice(*COMPILE_MODES),
                                 "torch.compile mode of the step (default, reduce-overhead, "
                                 "max-autotune, max-autotune-no-cudagraphs) or eager (no compilation)")
    matmul_precision: str = matmul_precision_setting()
    cpu_allocator: str = setting("reuse", choice(*ALLOCATORS),
                                 "on a CPU, glibc malloc's thresholds for torch's tensors: reuse (freed "
                                 "memory kept for the next step: no page faults per step) or system "
                                 "(malloc as the process has it); paradnn.backends.torch.allocator")
    memory_format: str = setting("channels_last", choice(*MEMORY_FORMATS),
                                 "layout of an image model's input, convolution weights and activations: "
                                 "channels_last (NHWC in memory, the layout oneDNN's and cuDNN's convolutions "
                                 "run in) or contiguous (NCHW, torch's default); models without image inputs "
                                 "run the same either way")


__all__ = ["COMPILE_MODES", "MEMORY_FORMATS", "TorchOptions"]
