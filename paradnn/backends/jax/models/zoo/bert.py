"""BERT-base (Devlin et al. 2019) with the masked-language-model objective.

Word (30,522), position (512) and segment (2) embeddings, layer norm, 12 post-layer-norm
encoder layers (768 wide, 12 heads, GELU feed-forward 3072), then the MLM head: dense 768 +
GELU + layer norm, the output projection tied to the word embeddings plus a bias. No pooler
(the next-sentence objective is left out, so it would get no gradient). 109,514,298 trainable
parameters, the "about 109.5 M" usually quoted.

Masking as in BERT's pre-training data: ``ceil(0.15 x length)`` positions per sequence (20 of
128) hold the [MASK] id; the model gathers the hidden states at those positions (found with
``top_k`` on the mask indicator, a static shape) and predicts the original tokens there.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.errors import SpecError
from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import no_image, real_tags, sequence_length
from paradnn.families.real import Real

VOCAB, MAX_POSITIONS, SEGMENTS = 30522, 512, 2
HIDDEN, HEADS, D_FF, LAYERS = 768, 12, 3072, 12
MASK_ID = 103  # [MASK] in BERT's uncased WordPiece vocabulary
MASK_FRACTION = 0.15
LN_EPSILON = 1e-12


def predictions_per_sequence(length: int) -> int:
    return max(1, math.ceil(MASK_FRACTION * length))


def _init() -> Any:
    return nn.initializers.truncated_normal(0.02)


class EncoderLayer(nn.Module):
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        a = nn.MultiHeadDotProductAttention(num_heads=HEADS, dtype=self.dtype, deterministic=True,
                                            kernel_init=_init())(x, x)
        x = nn.LayerNorm(epsilon=LN_EPSILON, dtype=self.dtype)(x + a)
        y = nn.gelu(nn.Dense(D_FF, dtype=self.dtype, kernel_init=_init())(x))
        y = nn.Dense(HIDDEN, dtype=self.dtype, kernel_init=_init())(y)
        return nn.LayerNorm(epsilon=LN_EPSILON, dtype=self.dtype)(x + y)


class BertMLM(nn.Module):
    """``ids [B, L]`` -> ``(logits [B, P, vocab], positions [B, P])`` at the [MASK] positions."""

    predictions: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, ids: jax.Array, train: bool = True) -> tuple[jax.Array, jax.Array]:
        length = ids.shape[1]
        words = nn.Embed(VOCAB, HIDDEN, dtype=self.dtype, embedding_init=_init(), name="word_embeddings")
        position = self.param("position_embeddings", _init(), (MAX_POSITIONS, HIDDEN))
        segment = self.param("segment_embeddings", _init(), (SEGMENTS, HIDDEN))
        # Single-segment inputs: every token has segment 0.
        x = words(ids) + (position[:length] + segment[0]).astype(self.dtype)
        x = nn.LayerNorm(epsilon=LN_EPSILON, dtype=self.dtype, name="embeddings_norm")(x)
        for i in range(LAYERS):
            x = EncoderLayer(dtype=self.dtype, name=f"layer_{i}")(x)
        _, positions = jax.lax.top_k((ids == MASK_ID).astype(jnp.int32), self.predictions)
        h = jnp.take_along_axis(x, positions[..., None], axis=1)
        h = nn.gelu(nn.Dense(HIDDEN, dtype=self.dtype, kernel_init=_init(), name="mlm_dense")(h))
        h = nn.LayerNorm(epsilon=LN_EPSILON, dtype=self.dtype, name="mlm_norm")(h)
        bias = self.param("mlm_bias", nn.initializers.zeros, (VOCAB,))
        return words.attend(h) + bias.astype(self.dtype), positions


def loss(outputs: tuple[jax.Array, jax.Array], batch: dict[str, jax.Array]) -> jax.Array:
    logits, positions = outputs
    return softmax_xent(logits, jnp.take_along_axis(batch["labels"], positions, axis=1))


def build(spec: Real, dtype: str) -> ModelDef:
    no_image(spec)
    length = sequence_length(spec, 128, 2)
    if length > MAX_POSITIONS:
        raise SpecError("length", length, f"an integer <= {MAX_POSITIONS} (BERT's position table)")
    predictions = predictions_per_sequence(length)

    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        kt, km = jax.random.split(key)
        # Token ids skip MASK_ID so that exactly `predictions` positions carry it.
        tokens = jax.random.randint(kt, (batch, length), 0, VOCAB - 1)
        tokens = tokens + (tokens >= MASK_ID)
        order = jnp.argsort(jax.random.uniform(km, (batch, length)), axis=1)
        masked = jnp.zeros((batch, length), bool).at[jnp.arange(batch)[:, None], order[:, :predictions]].set(True)
        return {"inputs": jnp.where(masked, MASK_ID, tokens), "labels": tokens}

    return ModelDef(
        name=spec.model,
        module=BertMLM(predictions, dtype=jnp.dtype(dtype)),
        make_batch=make_batch,
        loss=loss,
        default_optimizer="adam",
        tags=real_tags("masked_language_model", length=length),
    )


register(Entry(name="bert_base", factory=build))
