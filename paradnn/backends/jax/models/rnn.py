"""ParaDnn RNN: Embedding -> ``layers`` stacked cells over ``length`` steps -> Dense(vocab).

Cells follow the TF1 cells the original ParaDnn used (one fused kernel over ``[x, h]``):

* rnn:  h' = tanh([x, h] W + b)
* lstm: i, j, f, o = [x, h] W + b; c' = c*sigmoid(f + 1) + sigmoid(i)*tanh(j); h' = tanh(c')*sigmoid(o)
* gru:  r, u = sigmoid([x, h] Wg + bg); h~ = tanh([x, r*h] Wc + bc); h' = u*h + (1-u)*h~

The hidden size equals ``embed``. Each layer is one ``lax.scan`` over time; ``unroll`` exists
so the cost model can compile fully unrolled 1- and 2-step variants (see ModelDef.unrolled).

Every layer has a hand-written gradient (:func:`one_kernel_layer` for rnn and lstm,
:func:`gru_layer`) that computes the kernels' and the inputs' gradients as one matmul each over
all time steps, as cuDNN and PyTorch's fused LSTM do; JAX's own transpose of the scan
accumulates each kernel's gradient inside the loop, one matmul contracting only the batch per
time step. Same math and FLOPs; float rounding differs (summation order).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.families.rnn import GATES, LSTM_FORGET_BIAS, RNN, train_flops_per_example


def _lstm_update(gates: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """TF1 LSTM cell: pre-activation gates ``[B, 4H]`` (i, j, f, o) and cell ``c`` -> (c', h')."""
    i, j, f, o = jnp.split(gates, 4, axis=-1)
    c = c * jax.nn.sigmoid(f + LSTM_FORGET_BIAS) + jax.nn.sigmoid(i) * jnp.tanh(j)
    return c, jnp.tanh(c) * jax.nn.sigmoid(o)


def _tanh_update(gates: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Basic RNN cell: h' = tanh(gates); ``c`` is an empty ``[B, 0]`` placeholder, passed through."""
    return c, jnp.tanh(gates)


#: Cells whose one kernel over ``[x, h]`` feeds an element-wise update (gates, c) -> (c', h').
UPDATES: dict[str, Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]] = {
    "rnn": _tanh_update, "lstm": _lstm_update}


def _one_kernel_scan(cell: str, w: jax.Array, b: jax.Array, xs: jax.Array, unroll: int | bool):
    """The layer's forward scan: outputs ``[T, B, H]`` and what the gradient needs per step (the
    kernel's input ``[x, h]``, the pre-activation gates, the cell state before the step)."""
    update = UPDATES[cell]
    h0 = jnp.zeros((xs.shape[1], w.shape[1] // GATES[cell]), xs.dtype)
    c0 = h0 if cell == "lstm" else h0[:, :0]

    def step(carry, x):
        c, h = carry
        z = jnp.concatenate([x, h], -1)
        gates = z @ w + b
        c_next, h_next = update(gates, c)
        return (c_next, h_next), (h_next, z, gates, c)

    _, (ys, zs, gates, cs) = jax.lax.scan(step, (c0, h0), xs, unroll=unroll)
    return ys, (zs, gates, cs)


@partial(jax.custom_vjp, nondiff_argnums=(0, 4))
def one_kernel_layer(cell: str, w: jax.Array, b: jax.Array, xs: jax.Array, unroll: int | bool) -> jax.Array:
    """An rnn or lstm layer (``cell``) with kernel ``w`` ``[in + H, G*H]`` and bias ``b`` over a
    time-major sequence ``xs`` ``[T, B, in]`` -> ``[T, B, H]``, from zero states.

    Its gradient (:func:`_one_kernel_bwd`) runs only the hidden state's gradient in the loop
    (``[B, G*H] @ [G*H, H]`` per step); the kernel's gradient is one ``[in + H, T*B] @ [T*B, G*H]``
    matmul after it and the inputs' one ``[T*B, G*H] @ [G*H, in]``. On the 2-core CPU host this
    made the bench LSTM's training step 1.07x faster (docs/performance.md)."""
    return _one_kernel_scan(cell, w, b, xs, unroll)[0]


def _one_kernel_fwd(cell, w, b, xs, unroll):
    ys, saved = _one_kernel_scan(cell, w, b, xs, unroll)
    return ys, (w, saved)


def _one_kernel_bwd(cell, unroll, residuals, dys):
    w, (zs, gates, cs) = residuals
    steps, batch, in_dim = dys.shape[0], dys.shape[1], zs.shape[-1] - dys.shape[-1]
    w_x, w_h = w[:in_dim], w[in_dim:]

    def step(carry, inputs):
        dc, dh = carry
        dy, g, c = inputs
        _, pullback = jax.vjp(UPDATES[cell], g, c)  # recomputes the element-wise update: cheap
        dg, dc_prev = pullback((dc, dh + dy))
        return (dc_prev, dg @ w_h.T), dg

    _, dgates = jax.lax.scan(step, (jnp.zeros_like(cs[0]), jnp.zeros_like(dys[0])), (dys, gates, cs),
                             reverse=True, unroll=unroll)
    dg = dgates.reshape(steps * batch, -1)
    dw = zs.reshape(steps * batch, -1).T @ dg
    dxs = (dg @ w_x.T).reshape(steps, batch, in_dim)
    return dw, dg.sum(0), dxs


one_kernel_layer.defvjp(_one_kernel_fwd, _one_kernel_bwd)


def _gru_gates(a: jax.Array, h: jax.Array) -> tuple[jax.Array, jax.Array]:
    """TF1 GRU gates from ``a = [x, h] Wg + bg``: (r * h, u)."""
    r, u = jnp.split(jax.nn.sigmoid(a), 2, axis=-1)
    return r * h, u


def _gru_output(c: jax.Array, u: jax.Array, h: jax.Array) -> jax.Array:
    """TF1 GRU output from the candidate's ``c = [x, r*h] Wc + bc``: u*h + (1-u)*tanh(c)."""
    return u * h + (1 - u) * jnp.tanh(c)


def _gru_scan(wg, bg, wc, bc, xs, unroll):
    """The gru layer's forward scan: outputs and, per step, h before it, ``a``, ``r*h`` and ``c``."""

    def step(h, x):
        a = jnp.concatenate([x, h], -1) @ wg + bg
        rh, u = _gru_gates(a, h)
        c = jnp.concatenate([x, rh], -1) @ wc + bc
        h_next = _gru_output(c, u, h)
        return h_next, (h_next, (h, a, rh, c))

    _, (ys, saved) = jax.lax.scan(step, jnp.zeros((xs.shape[1], wc.shape[1]), xs.dtype), xs, unroll=unroll)
    return ys, saved


@partial(jax.custom_vjp, nondiff_argnums=(5,))
def gru_layer(wg: jax.Array, bg: jax.Array, wc: jax.Array, bc: jax.Array, xs: jax.Array,
              unroll: int | bool) -> jax.Array:
    """The TF1 gru layer (gates kernel ``wg`` ``[in + H, 2H]``, candidate kernel ``wc`` ``[in + H,
    H]``, biases) over ``xs`` ``[T, B, in]`` -> ``[T, B, H]`` from a zero state. As
    :func:`one_kernel_layer`: only the hidden state's gradient in the loop (two ``[B, .] @ [., H]``
    products per step), each kernel's and the inputs' gradients one matmul over all time steps."""
    return _gru_scan(wg, bg, wc, bc, xs, unroll)[0]


def _gru_fwd(wg, bg, wc, bc, xs, unroll):
    ys, saved = _gru_scan(wg, bg, wc, bc, xs, unroll)
    return ys, (wg, wc, xs, saved)


def _gru_bwd(unroll, residuals, dys):
    wg, wc, xs, (hs, a, rhs, c) = residuals
    steps, batch, in_dim = xs.shape
    wg_h, wc_h = wg[in_dim:], wc[in_dim:]

    def step(dh, inputs):
        dy, h, a_t, c_t = inputs
        (_, u), pull_gates = jax.vjp(_gru_gates, a_t, h)  # recomputes the element-wise parts
        _, pull_output = jax.vjp(_gru_output, c_t, u, h)
        dc, du, dh_output = pull_output(dh + dy)
        da, dh_gates = pull_gates((dc @ wc_h.T, du))
        return dh_output + dh_gates + da @ wg_h.T, (da, dc)

    _, (das, dcs) = jax.lax.scan(step, jnp.zeros_like(dys[0]), (dys, hs, a, c), reverse=True, unroll=unroll)
    n = steps * batch
    da, dc, x = das.reshape(n, -1), dcs.reshape(n, -1), xs.reshape(n, in_dim)
    dwg = jnp.concatenate([x, hs.reshape(n, -1)], -1).T @ da
    dwc = jnp.concatenate([x, rhs.reshape(n, -1)], -1).T @ dc
    dxs = (da @ wg[:in_dim].T + dc @ wc[:in_dim].T).reshape(steps, batch, in_dim)
    return dwg, da.sum(0), dwc, dc.sum(0), dxs


gru_layer.defvjp(_gru_fwd, _gru_bwd)


class Recurrent(nn.Module):
    """One recurrent layer over a time-major sequence ``[length, batch, features]``."""

    cell: str
    hidden: int
    unroll: int | bool = 1
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, xs: jax.Array) -> jax.Array:
        h_dim, in_dim = self.hidden, xs.shape[-1]
        glorot, zeros = nn.initializers.glorot_uniform(), nn.initializers.zeros
        if self.cell in UPDATES:
            g = GATES[self.cell]
            w = self.param("kernel", glorot, (in_dim + h_dim, g * h_dim)).astype(self.dtype)
            b = self.param("bias", zeros, (g * h_dim,)).astype(self.dtype)
            return one_kernel_layer(self.cell, w, b, xs, self.unroll)
        wg = self.param("gates_kernel", glorot, (in_dim + h_dim, 2 * h_dim)).astype(self.dtype)
        bg = self.param("gates_bias", nn.initializers.ones, (2 * h_dim,)).astype(self.dtype)
        wc = self.param("candidate_kernel", glorot, (in_dim + h_dim, h_dim)).astype(self.dtype)
        bc = self.param("candidate_bias", zeros, (h_dim,)).astype(self.dtype)
        return gru_layer(wg, bg, wc, bc, xs, self.unroll)


class RNNLM(nn.Module):
    cell: str
    layers: int
    embed: int
    vocab: int
    unroll: int | bool = 1
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array, train: bool = True) -> jax.Array:
        x = nn.Embed(self.vocab, self.embed, dtype=self.dtype)(tokens)
        x = jnp.swapaxes(x, 0, 1)  # time-major for scan
        for i in range(self.layers):
            x = Recurrent(self.cell, self.embed, self.unroll, self.dtype, name=f"layer_{i}")(x)
        return nn.Dense(self.vocab, dtype=self.dtype)(jnp.swapaxes(x, 0, 1))


def build(spec: RNN, dtype: str, unroll: int | bool = 1) -> ModelDef:
    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        ids = jax.random.randint(key, (batch, spec.length + 1), 0, spec.vocab)
        return {"inputs": ids[:, :-1], "labels": ids[:, 1:]}

    return ModelDef(
        name="rnn",
        module=RNNLM(spec.cell, spec.layers, spec.embed, spec.vocab, unroll, dtype=jnp.dtype(dtype)),
        make_batch=make_batch,
        loss=lambda logits, batch: softmax_xent(logits, batch["labels"]),
        train_flops_per_example=train_flops_per_example(spec),
        loop_length=spec.length,
        unrolled=lambda n: build(spec.replace(length=n), dtype, unroll=True),
        tags={"kind": "generated"},
    )
