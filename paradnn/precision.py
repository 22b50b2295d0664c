"""Float32 matmul precision: the ``matmul_precision`` setting every framework declares, and the
measurement of the precision a framework actually computed with (record column
``matmul_precision_used``).

Why a setting: on NVIDIA Ampere and later GPUs the frameworks' defaults differ. JAX's default
precision computes float32 dot products and convolutions on TF32 tensor cores (JAX
documentation, "Matmul precision": "TF32 on recent GPUs"); TensorFlow enables TF32 by default
(``tf.config.experimental.enable_tensor_float_32_execution``); PyTorch computes float32 matmuls
in full float32 by default (``torch.backends.cuda.matmul``) but convolutions in TF32
(``torch.backends.cudnn.conv``). A "float32" comparison of frameworks at their defaults is a
comparison of precisions. So the setting is part of every record's key, defaults to each
framework's own default, and the precision actually used is *measured*, not assumed:

Each backend applies the setting its own way, then runs the operands of :func:`probe_operands`
through its float32 matmul and convolution on the measured device; :func:`effective_bits`
compares the results with exact (float64) products of the same float32 inputs. A float32 product
computed in full float32 keeps about 22-24 mantissa bits, a 3-pass bfloat16 one about 16, TF32
(10 explicit mantissa bits) about 11, one bfloat16 pass (7 bits) about 8. :func:`label` names
the level; :func:`used` combines matmul and convolution. Framework-free (numpy only).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from paradnn.settings import choice, setting

#: The values of the ``matmul_precision`` setting.
SETTINGS = ("default", "highest", "tf32")
#: What the setting means (CLI help, sweep-file docs).
SETTING_HELP = ("internal precision of float32 matmuls and convolutions: default (the framework's "
                "own; on NVIDIA Ampere and later JAX and TensorFlow use TF32, PyTorch TF32 for "
                "convolutions only), highest (full float32), tf32 (TensorFloat-32 on NVIDIA GPUs "
                "that have it; what a framework makes of it elsewhere differs: full float32 on a "
                "CPU, 3 bfloat16 passes for JAX on a TPU); what was used is measured "
                "(matmul_precision_used)")


def matmul_precision_setting() -> Any:
    """The ``matmul_precision`` field of a framework's options class (one definition for all)."""
    return setting("default", choice(*SETTINGS), SETTING_HELP)


#: Levels by the fewest effective mantissa bits measured, highest first: (at least bits, label).
#: Full float32 keeps about 22-24 bits on the probe's 64-term dot products, 3-pass bfloat16 about
#: 16, TF32 about 11, one bfloat16 pass about 8 (module doc); the bounds sit between them.
LEVELS: tuple[tuple[float, str], ...] = ((19.0, "highest"), (13.5, "bf16x3"), (9.5, "tf32"), (0.0, "bf16"))
#: Operand sizes of the probe: (M, K, N) of the matmul; the convolution's input (N, H, W, C) and
#: kernel (KH, KW, C, O). Short dot products (K = 64, 144 taps), so that float32 accumulation
#: error (about sqrt(K) x 2^-24) stays well above the 19-bit bound.
MATMUL_SHAPE = (64, 64, 64)
CONV_INPUT = (1, 8, 8, 16)
CONV_KERNEL = (3, 3, 16, 8)
#: The operation kinds probed.
OPS = ("matmul", "conv")


def probe_operands(seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``{"matmul": (a, b, exact), "conv": (x, w, exact)}``: float32 operands (standard normal)
    and the exact float64 result of the same float32 values. The matmul is ``a @ b``; the
    convolution is NHWC input, HWIO kernel, stride 1, no padding (VALID), output NHWC."""
    rng = np.random.default_rng(seed)
    m, k, n = MATMUL_SHAPE
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    x = rng.standard_normal(CONV_INPUT, dtype=np.float32)
    w = rng.standard_normal(CONV_KERNEL, dtype=np.float32)
    kh, kw = CONV_KERNEL[:2]
    patches = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (kh, kw), axis=(1, 2))
    # patches: (N, H-kh+1, W-kw+1, C, kh, kw)
    conv = np.einsum("nhwcij,ijco->nhwo", patches, w.astype(np.float64))
    return {"matmul": (a, b, a.astype(np.float64) @ b.astype(np.float64)), "conv": (x, w, conv)}


def effective_bits(result: Any, exact: np.ndarray) -> float:
    """Effective mantissa bits of ``result`` against ``exact``: ``-log2`` of the root-mean-square
    error relative to the root-mean-square of the exact values (capped at 30 bits)."""
    r = np.asarray(result, dtype=np.float64).reshape(exact.shape)
    rel = math.sqrt(float(np.mean((r - exact) ** 2)) / float(np.mean(exact ** 2)))
    if not math.isfinite(rel):  # a NaN or an overflow in the product: no precision at all
        return 0.0
    return min(30.0, -math.log2(rel)) if rel > 0 else 30.0


def label(bits: float) -> str:
    """The level of :data:`LEVELS` that ``bits`` effective mantissa bits reach."""
    return next(name for bound, name in LEVELS if bits >= bound)


def ops_in(param_shapes: Any) -> tuple[str, ...]:
    """The operation kinds of :data:`OPS` a model computes, from the shapes of its parameters
    (an iterable of shape tuples): ``"conv"`` where a parameter has 4 or more dimensions (a 2-D
    or 3-D convolution's kernel: HWIO in JAX and Keras, OIHW in PyTorch), ``"matmul"`` always
    (dense, recurrent, embedding and attention weights have at most 3 dimensions). A model
    without convolutions is labelled by its matmuls alone: PyTorch's default computes float32
    matmuls in full float32 but convolutions in TF32, which an FC never runs."""
    has_conv = any(len(tuple(shape)) >= 4 for shape in param_shapes)
    return OPS if has_conv else ("matmul",)


def used(dtype: str, bits: dict[str, float] | None,
         ops: tuple[str, ...] = OPS) -> tuple[str, float | None]:
    """``(matmul_precision_used, matmul_precision_bits)`` of a run computing in ``dtype``, from
    the effective bits measured per operation kind (``bits``: ``{"matmul": b, "conv": b}``) of
    the kinds the model computes (``ops``, :func:`ops_in`).

    A reduced compute dtype (bfloat16, float16) multiplies in that dtype whatever the setting:
    the label is the dtype, no bits. float32: the level of each kind, one label where they agree
    (``"tf32"``), else both (``"matmul highest, conv tf32"``); the bits are the fewest measured."""
    bits = {op: b for op, b in (bits or {}).items() if op in ops}
    if dtype != "float32" or not bits:
        return dtype, None
    levels = {op: label(b) for op, b in bits.items()}
    names = set(levels.values())
    text = names.pop() if len(names) == 1 else ", ".join(f"{op} {levels[op]}" for op in OPS if op in levels)
    return text, round(min(bits.values()), 1)


def is_level(used_label: Any) -> bool:
    """Whether ``used_label`` names precision levels (a float32 run's label), not a dtype or a
    missing value."""
    names = {name for _, name in LEVELS}
    return isinstance(used_label, str) and bool(used_label) and levels_of(used_label) <= names


def levels_of(used_label: str) -> set[str]:
    """The levels named in a ``matmul_precision_used`` label (``"matmul highest, conv tf32"`` ->
    ``{"highest", "tf32"}``); a dtype label gives the dtype."""
    return {part.split()[-1] for part in str(used_label).split(",")}


__all__ = ["CONV_INPUT", "CONV_KERNEL", "LEVELS", "MATMUL_SHAPE", "OPS", "SETTINGS", "SETTING_HELP",
           "effective_bits", "is_level", "label", "levels_of", "matmul_precision_setting", "ops_in",
           "probe_operands", "used"]
