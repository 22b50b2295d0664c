"""The TensorFlow backend's options (framework-free: read to build CLI flags and settings keys).

``xla_preset`` is not one of them: TensorFlow reads its XLA flags from ``TF_XLA_FLAGS`` once at
start-up (recorded as the software field ``tf_xla_flags``), so a per-run preset cannot apply.
"""

from __future__ import annotations

from dataclasses import dataclass

from paradnn.backends.steploop import STEP_LOOPS
from paradnn.precision import matmul_precision_setting
from paradnn.settings import Options, choice, setting


@dataclass(frozen=True)
class TensorFlowOptions(Options):
    """Options of the measured TensorFlow step (record columns ``step_loop`` and
    ``matmul_precision``)."""

    step_loop: str = setting("auto", choice(*STEP_LOOPS),
                             "how a call runs its K steps: device (a tf.while_loop in the XLA "
                             "program), host (a one-step tf.function called K times), auto (device, "
                             "but host for convolutions on XLA:CPU, whose loop bodies are slow)")
    matmul_precision: str = matmul_precision_setting()


__all__ = ["STEP_LOOPS", "TensorFlowOptions"]
