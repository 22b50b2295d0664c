"""Depthwise convolutions whose weight gradient a CPU computes from the useful taps only.

XLA:CPU computes the weight gradient of a convolution with ``feature_group_count`` equal to
its channels C as a dense C x C convolution and keeps the diagonal: C times the useful
multiply-adds. Summing ``x_shifted * dy`` over batch and space for each of the 9 taps does only
the useful work and reads each element a few times; on the 2-core CI host (batch 8, MobileNet
v1's layer shapes, ``benchmarks/bench_depthwise.py``) it took 0.6x XLA's time at 56x56x128,
0.4x at 28x28x256 and 0.02-0.08x at 14x14x512 and 7x7x1024, but 2.7x at 112x112x32. On the
whole MobileNet (224 px, batch 8) taking the taps from 64 channels up was 1.01-1.05x faster
than from 128 and from 32 slower (docs/performance.md "Depthwise weight gradients on a CPU"):
hence :data:`MIN_CHANNELS`.

:func:`conv_general_dilated` is a drop-in for ``jax.lax.conv_general_dilated`` (Flax's
``nn.Conv(conv_general_dilated=...)``): the same forward convolution and input gradient; only
the weight gradient of a 2-D depthwise convolution (NHWC input, HWIO kernel with one input
feature per group, no dilation, non-negative padding, at least :data:`MIN_CHANNELS`
channels) is chosen by platform with ``jax.lax.platform_dependent``: the taps on a CPU, JAX's
own transpose everywhere else (their compilers have depthwise kernels of their own; the taps were
measured on CPUs only).
The traced program holds both branches, so the jaxpr FLOP count (``jaxpr_flops``, which counts a
``cond``'s branches in full) still counts the weight gradient's convolution, as before. (The
max-pool gradient of :mod:`pooling` is chosen by ``jax.default_backend()`` when a step is
traced: it has no FLOPs to count, while here a CPU trace without the convolution would drop
the weight gradient from the analytic count.)
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from paradnn.backends.jax.models.pooling import spatial_pads

#: Fewest channels at which the weight gradient is computed from its taps on a CPU.
MIN_CHANNELS = 64
_NHWC = ("NHWC", "HWIO", "NHWC")


def conv_general_dilated(lhs: jax.Array, rhs: jax.Array, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         precision: Any = None, **kwargs: Any) -> jax.Array:
    """``jax.lax.conv_general_dilated``, with a depthwise convolution's weight gradient taken
    from its taps on a CPU (module notes); anything else goes to JAX's as it is."""
    plain = functools.partial(lax.conv_general_dilated, lhs, rhs, window_strides, padding,
                              lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                              dimension_numbers=dimension_numbers, feature_group_count=feature_group_count,
                              precision=precision, **kwargs)
    channels = lhs.shape[-1] if lhs.ndim == 4 else 0
    if (kwargs or lhs.ndim != 4 or channels < MIN_CHANNELS or feature_group_count != channels
            or rhs.shape[2:] != (1, channels) or any(d != 1 for d in (*(lhs_dilation or ()), *(rhs_dilation or ())))
            or lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
            != lax.conv_dimension_numbers(lhs.shape, rhs.shape, _NHWC)):
        return plain()
    pads = tuple((int(lo), int(hi)) for lo, hi in
                 spatial_pads(lhs.shape, tuple(rhs.shape[:2]), tuple(window_strides), padding))
    if any(p < 0 for pair in pads for p in pair):
        return plain()
    return _depthwise(lhs, rhs, tuple(int(s) for s in window_strides), pads, precision)


def _forward(x: jax.Array, w: jax.Array, strides: tuple[int, ...], pads: tuple[tuple[int, int], ...],
             precision: Any) -> jax.Array:
    return lax.conv_general_dilated(x, w, strides, pads, dimension_numbers=_NHWC,
                                    feature_group_count=x.shape[-1], precision=precision)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _depthwise(x, w, strides, pads, precision):
    return _forward(x, w, strides, pads, precision)


def _depthwise_fwd(x, w, strides, pads, precision):
    return _forward(x, w, strides, pads, precision), (x, w)


def _depthwise_bwd(strides, pads, precision, residuals, dy):
    x, w = residuals
    dx = jax.vjp(lambda x: _forward(x, w, strides, pads, precision), x)[1](dy)[0]

    def transposed(x, dy):  # JAX's own weight gradient (a batch-grouped convolution)
        return jax.vjp(lambda w: _forward(x, w, strides, pads, precision), w)[1](dy)[0]

    def taps(x, dy):
        return weight_grad_from_taps(x, dy, w.shape[:2], strides, pads).astype(w.dtype)

    return dx, lax.platform_dependent(x, dy, cpu=taps, default=transposed)


_depthwise.defvjp(_depthwise_fwd, _depthwise_bwd)


def weight_grad_from_taps(x: jax.Array, dy: jax.Array, kernel: Sequence[int], strides: Sequence[int],
                          pads: Sequence[tuple[int, int]]) -> jax.Array:
    """The weight gradient (kh, kw, 1, C) of a depthwise NHWC convolution: for each tap, the sum
    over batch and output positions of the input element it reads times the output gradient,
    accumulated in float32 (as the convolution accumulates)."""
    (kh, kw), (sh, sw) = kernel, strides
    ho, wo = dy.shape[1:3]
    padded = jnp.pad(x, ((0, 0), *pads, (0, 0)))
    grad = dy.astype(jnp.float32)
    taps = [jnp.sum(padded[:, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw, :].astype(jnp.float32) * grad,
                    axis=(0, 1, 2))
            for i in range(kh) for j in range(kw)]
    return jnp.stack(taps).reshape(kh, kw, 1, x.shape[-1])
