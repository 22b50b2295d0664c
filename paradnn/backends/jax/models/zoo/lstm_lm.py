"""Two-layer LSTM language model, PTB "large" (Zaremba et al. 2014).

Embedding (10,000 x 1,500), two LSTM layers of 1,500 units, a dense softmax layer to the
10,000-word vocabulary (untied). 66,022,000 trainable parameters (about 66 M). Sequences of 35
tokens by default (Zaremba's unroll length; paper 000 used 20: ``--length 20``); labels are the
next tokens. The LSTM loops are ``lax.scan``s over ``length`` steps, so the model gives
``loop_length`` and ``unrolled(n)`` for the cost model.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import no_image, real_tags, sequence_length
from paradnn.backends.jax.models.zoo.recurrent import LSTM
from paradnn.families.real import Real

VOCAB, HIDDEN, LAYERS = 10_000, 1_500, 2


class LSTMLanguageModel(nn.Module):
    unroll: int | bool = 1
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, ids: jax.Array, train: bool = True) -> jax.Array:
        x = nn.Embed(VOCAB, HIDDEN, dtype=self.dtype)(ids)
        for _ in range(LAYERS):
            x = LSTM(HIDDEN, self.unroll, dtype=self.dtype)(x)
        return nn.Dense(VOCAB, dtype=self.dtype)(x)


def _build(length: int, dtype: str, unroll: int | bool) -> ModelDef:
    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        tokens = jax.random.randint(key, (batch, length + 1), 0, VOCAB)
        return {"inputs": tokens[:, :-1], "labels": tokens[:, 1:]}

    return ModelDef(
        name="lstm_lm",
        module=LSTMLanguageModel(unroll, dtype=jnp.dtype(dtype)),
        make_batch=make_batch,
        loss=lambda logits, batch: softmax_xent(logits, batch["labels"]),
        default_optimizer="sgd",
        loop_length=length,
        unrolled=lambda n: _build(n, dtype, True),
        tags=real_tags("language_model", length=length),
    )


def build(spec: Real, dtype: str) -> ModelDef:
    no_image(spec)
    return _build(sequence_length(spec, 35, 1), dtype, 1)


register(Entry(name="lstm_lm", factory=build))
