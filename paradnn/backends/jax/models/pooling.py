"""Max pooling whose gradient XLA:CPU runs several times faster, with the same values.

JAX differentiates ``lax.reduce_window(max)`` (``flax.linen.max_pool``) into XLA's
select-and-scatter, which XLA:CPU runs as a loop over index tuples: in the bench CNN of
``benchmarks/bench_peers.py`` (residual, blocks 1, filters 16, image 64, batch 32) the stem's
3x3/2 max-pool gradient took 3.8 ms of a 43.5 ms step (docs/performance.md, "Max pooling's
gradient"). :func:`max_pool` computes the same gradient as element-wise work XLA fuses: for each
window the first tap holding the maximum (row-major order, strictly greater replaces: the
choice of select-and-scatter with ``ge``, which JAX uses), then each tap's share of the output
gradient added into the strided slice of the input grid that tap reads, in the order in which
select-and-scatter adds overlapping windows (window order, so descending tap order at any one
input position). The result is bitwise the same (tested for float32 and bfloat16, overlapping
and strided windows, SAME and explicit padding, ties from ReLU zeros).

Used on the platforms in :data:`FUSED_GRADIENT_PLATFORMS` (CPUs, where it was measured:
``benchmarks/bench_pool.py``); elsewhere (GPU, TPU) the model keeps XLA's select-and-scatter.
The forward pass is ``flax.linen.max_pool`` everywhere. The choice is made when a step is
traced.
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

Padding = str | Sequence[tuple[int, int]]
#: JAX platforms whose max-pool gradient is the fused one (a benchmark empties it to trace XLA's).
FUSED_GRADIENT_PLATFORMS: set[str] = {"cpu"}


def spatial_pads(shape: Sequence[int], window: tuple[int, int], strides: tuple[int, int],
                 padding: Padding) -> list[tuple[int, int]]:
    """(low, high) padding of the two spatial dimensions of ``shape`` (NHWC), as
    ``lax.reduce_window`` and ``lax.conv_general_dilated`` resolve ``padding``."""
    if isinstance(padding, str):
        return list(lax.padtype_to_pads(tuple(shape[1:3]), window, strides, padding))
    return [tuple(p) for p in padding]


@partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _max_pool(x: jax.Array, window: tuple[int, int], strides: tuple[int, int],
              padding: tuple[tuple[int, int], ...]) -> jax.Array:
    return nn.max_pool(x, window, strides, padding=padding)


def _forward(x, window, strides, padding):
    return _max_pool(x, window, strides, padding), x


def _backward(window, strides, padding, x, g):
    (lo_h, hi_h), (lo_w, hi_w) = padding
    sh, sw = strides
    oh, ow = g.shape[1], g.shape[2]
    xp = jnp.pad(x, ((0, 0), (lo_h, hi_h), (lo_w, hi_w), (0, 0)), constant_values=-jnp.inf)

    def tap(i: int, j: int) -> jax.Array:
        # The input positions that tap (i, j) of every window reads: [N, oh, ow, C].
        return lax.slice(xp, (0, i, j, 0), (xp.shape[0], i + sh * (oh - 1) + 1, j + sw * (ow - 1) + 1,
                                             xp.shape[3]), (1, sh, sw, 1))

    taps = [(i, j) for i in range(window[0]) for j in range(window[1])]
    best, chosen = tap(*taps[0]), jnp.zeros(g.shape, jnp.int32)
    for k, (i, j) in enumerate(taps[1:], 1):
        value = tap(i, j)
        better = value > best  # a tie keeps the earlier tap, as select-and-scatter's `ge` does
        best, chosen = jnp.where(better, value, best), jnp.where(better, k, chosen)
    zero = jnp.zeros((), g.dtype)
    grad = jnp.zeros(xp.shape, g.dtype)  # select-and-scatter's initial value
    for k in reversed(range(len(taps))):  # window order at any one input position
        i, j = taps[k]
        share = jnp.where(chosen == k, g, zero)
        grad = grad.at[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw, :].add(share)
    return (grad[:, lo_h:lo_h + x.shape[1], lo_w:lo_w + x.shape[2], :],)


_max_pool.defvjp(_forward, _backward)


def max_pool(x: jax.Array, window: tuple[int, int], strides: tuple[int, int],
             padding: Padding = "VALID") -> jax.Array:
    """``flax.linen.max_pool`` of an NHWC array (``window`` and ``strides`` in pixels,
    ``padding`` "SAME", "VALID" or (low, high) pairs), with the fused gradient above on a CPU."""
    pads = spatial_pads(x.shape, tuple(window), tuple(strides), padding)
    if jax.default_backend() not in FUSED_GRADIENT_PLATFORMS:
        return nn.max_pool(x, tuple(window), tuple(strides), padding=pads)
    return _max_pool(x, tuple(window), tuple(strides), tuple(tuple(p) for p in pads))


__all__ = ["FUSED_GRADIENT_PLATFORMS", "max_pool", "spatial_pads"]
