"""The PyTorch backend's options (framework-free: read to build CLI flags and settings keys)."""

from __future__ import annotations

from dataclasses import dataclass

from paradnn.precision import matmul_precision_setting
from paradnn.settings import Options, choice, setting

#: Values of ``torch_compile``: eager execution, or a ``torch.compile`` mode.
COMPILE_MODES = ("default", "eager", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class TorchOptions(Options):
    """Options of the measured PyTorch step (record columns ``torch_compile`` and
    ``matmul_precision``)."""

    torch_compile: str = setting("default", choice(*COMPILE_MODES),
                                 "torch.compile mode of the step (default, reduce-overhead, "
                                 "max-autotune, max-autotune-no-cudagraphs) or eager (no compilation)")
    matmul_precision: str = matmul_precision_setting()


__all__ = ["COMPILE_MODES", "TorchOptions"]
