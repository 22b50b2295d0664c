"""The PyTorch backend's options (framework-free: read to build CLI flags and settings keys)."""

from __future__ import annotations

from dataclasses import dataclass

from paradnn.backends import Options, choice, setting

#: Values of ``torch_compile``: eager execution, or a ``torch.compile`` mode.
COMPILE_MODES = ("default", "eager", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class TorchOptions(Options):
    """Options of the measured PyTorch step (record column ``torch_compile``)."""

    torch_compile: str = setting("default", choice(*COMPILE_MODES),
                                 "torch.compile mode of the step (default, reduce-overhead, "
                                 "max-autotune, max-autotune-no-cudagraphs) or eager (no compilation)")


__all__ = ["COMPILE_MODES", "TorchOptions"]
