"""The JAX backend's options (framework-free: read to build CLI flags and settings keys)."""

from __future__ import annotations

from dataclasses import dataclass

from paradnn.backends.jax import xla_stack
from paradnn.backends.steploop import STEP_LOOPS
from paradnn.precision import matmul_precision_setting
from paradnn.settings import Options, choice, setting


@dataclass(frozen=True)
class JaxOptions(Options):
    """Options of the measured JAX step (record columns ``step_loop``, ``xla_preset`` and
    ``matmul_precision``)."""

    step_loop: str = setting("auto", choice(*STEP_LOOPS),
                             "how a call runs its K steps: device (a loop in the compiled program), "
                             "host (a one-step program called K times), auto (device, but host on "
                             "GPUs, whose XLA loops wait for the host every step, and for "
                             "convolutions on XLA:CPU, whose loop bodies are slow)")
    xla_preset: str = setting(xla_stack.DEFAULT_PRESET, xla_stack.parse_preset,
                              "XLA compile options of the measured step: best (the platform's "
                              "fastest correct stack) or stock (XLA's defaults)")
    matmul_precision: str = matmul_precision_setting()


__all__ = ["JaxOptions", "STEP_LOOPS"]
