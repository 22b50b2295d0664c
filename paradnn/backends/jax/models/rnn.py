"""ParaDnn RNN: Embedding -> ``layers`` stacked cells over ``length`` steps -> Dense(vocab).

Cells follow the TF1 cells the original ParaDnn used (one fused kernel over ``[x, h]``):

* rnn:  h' = tanh([x, h] W + b)
* lstm: i, j, f, o = [x, h] W + b; c' = c*sigmoid(f + 1) + sigmoid(i)*tanh(j); h' = tanh(c')*sigmoid(o)
* gru:  r, u = sigmoid([x, h] Wg + bg); h~ = tanh([x, r*h] Wc + bc); h' = u*h + (1-u)*h~

The hidden size equals ``embed``. Each layer is one ``lax.scan`` over time; ``unroll`` exists
so the cost model can compile fully unrolled 1- and 2-step variants (see ModelDef.unrolled).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.families.rnn import GATES, LSTM_FORGET_BIAS, train_flops_per_example
from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.families.rnn import RNN



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
        if self.cell == "gru":
            wg = self.param("gates_kernel", glorot, (in_dim + h_dim, 2 * h_dim)).astype(self.dtype)
            bg = self.param("gates_bias", nn.initializers.ones, (2 * h_dim,)).astype(self.dtype)
            wc = self.param("candidate_kernel", glorot, (in_dim + h_dim, h_dim)).astype(self.dtype)
            bc = self.param("candidate_bias", zeros, (h_dim,)).astype(self.dtype)
        else:
            g = GATES[self.cell]
            w = self.param("kernel", glorot, (in_dim + h_dim, g * h_dim)).astype(self.dtype)
            b = self.param("bias", zeros, (g * h_dim,)).astype(self.dtype)
        batch = xs.shape[1]
        h0 = jnp.zeros((batch, h_dim), self.dtype)

        def rnn_step(h, x):
            h = jnp.tanh(jnp.concatenate([x, h], -1) @ w + b)
            return h, h

        def lstm_step(carry, x):
            c, h = carry
            i, j, f, o = jnp.split(jnp.concatenate([x, h], -1) @ w + b, 4, axis=-1)
            c = c * jax.nn.sigmoid(f + LSTM_FORGET_BIAS) + jax.nn.sigmoid(i) * jnp.tanh(j)
            h = jnp.tanh(c) * jax.nn.sigmoid(o)
            return (c, h), h

        def gru_step(h, x):
            r, u = jnp.split(jax.nn.sigmoid(jnp.concatenate([x, h], -1) @ wg + bg), 2, axis=-1)
            cand = jnp.tanh(jnp.concatenate([x, r * h], -1) @ wc + bc)
            h = u * h + (1 - u) * cand
            return h, h

        step, carry = {"rnn": (rnn_step, h0), "lstm": (lstm_step, (h0, h0)), "gru": (gru_step, h0)}[self.cell]
        _, ys = jax.lax.scan(step, carry, xs, unroll=self.unroll)
        return ys


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
