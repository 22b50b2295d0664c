"""Recurrent layers of the zoo's sequence models (LSTM for lstm_lm, GRU for deepspeech2).

The input projection of every time step is one large matmul before the loop (as cuDNN does);
only the hidden-state matmul stays inside the ``lax.scan``. The LSTM's loop has a hand-written
gradient whose hidden-kernel gradient is one matmul over all time steps
(:func:`paradnn.backends.jax.models.zoo.recurrence.hidden_recurrence`); the GRU's hidden bias sits
inside its reset gate's product, so it keeps JAX's gradient. ``unroll=True`` unrolls the scan
fully, which the cost model uses (ModelDef.unrolled). Hidden and cell states are carried in
float32; matmul operands are cast to the compute dtype.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.zoo.recurrence import hidden_recurrence


class LSTM(nn.Module):
    """One LSTM layer over ``[B, T, in]`` -> ``[B, T, hidden]``. Parameters 4 x hidden x
    (in + hidden + 1): input kernel, hidden kernel, one bias (forget gate bias starts at 1)."""

    hidden: int
    unroll: int | bool = 1
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, xs: jax.Array) -> jax.Array:
        h = self.hidden
        w_in = self.param("input_kernel", nn.initializers.glorot_uniform(), (xs.shape[-1], 4 * h))
        w_h = self.param("hidden_kernel", nn.initializers.orthogonal(), (h, 4 * h))
        bias = self.param("bias", lambda k, s: jnp.zeros(s).at[h:2 * h].set(1.0), (4 * h,))
        gates_x = (xs.astype(self.dtype) @ w_in.astype(self.dtype) + bias.astype(self.dtype)).swapaxes(0, 1)
        init = partial(_zero_states, h)
        out = hidden_recurrence(_lstm_update, init, w_h.astype(self.dtype), gates_x, self.unroll)
        return out.astype(self.dtype).swapaxes(0, 1)


def _lstm_update(gx: jax.Array, gh: jax.Array, cell: jax.Array, hid: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Gates (i, f, c, o) ``gx + gh`` summed in the compute dtype, the states in float32."""
    i, f, c_new, o = jnp.split((gx + gh).astype(jnp.float32), 4, axis=-1)
    cell = jax.nn.sigmoid(f) * cell + jax.nn.sigmoid(i) * jnp.tanh(c_new)
    return cell, jax.nn.sigmoid(o) * jnp.tanh(cell)


def _zero_states(hidden: int, batch: int) -> tuple[jax.Array, jax.Array]:
    zeros = jnp.zeros((batch, hidden), jnp.float32)
    return zeros, zeros


class GRU(nn.Module):
    """One GRU layer (PyTorch/cuDNN formulation: the reset gate multiplies the hidden
    projection) over ``[B, T, in]``. Parameters 3 x hidden x (in + hidden + 2)."""

    hidden: int
    reverse: bool = False
    unroll: int | bool = 1
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, xs: jax.Array) -> jax.Array:
        h = self.hidden
        w_in = self.param("input_kernel", nn.initializers.glorot_uniform(), (xs.shape[-1], 3 * h))
        b_in = self.param("input_bias", nn.initializers.zeros, (3 * h,))
        w_h = self.param("hidden_kernel", nn.initializers.orthogonal(), (h, 3 * h))
        b_h = self.param("hidden_bias", nn.initializers.zeros, (3 * h,))
        gates_x = (xs.astype(self.dtype) @ w_in.astype(self.dtype) + b_in.astype(self.dtype)).swapaxes(0, 1)
        w_h, b_h = w_h.astype(self.dtype), b_h.astype(self.dtype)

        def step(hid, gx):
            gh = (hid.astype(self.dtype) @ w_h + b_h).astype(jnp.float32)
            xr, xz, xn = jnp.split(gx.astype(jnp.float32), 3, axis=-1)
            hr, hz, hn = jnp.split(gh, 3, axis=-1)
            r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
            n = jnp.tanh(xn + r * hn)
            hid = (1 - z) * n + z * hid
            return hid, hid.astype(self.dtype)

        zeros = jnp.zeros((xs.shape[0], h), jnp.float32)
        _, out = jax.lax.scan(step, zeros, gates_x, reverse=self.reverse, unroll=self.unroll)
        return out.swapaxes(0, 1)
