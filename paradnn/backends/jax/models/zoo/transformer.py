"""Transformer base (Vaswani et al. 2017) for translation, tensor2tensor's ``transformer_base``.

d_model 512, 8 heads, feed-forward 2048, 6 encoder and 6 decoder layers, pre-layer-norm with a
final layer norm on each stack (tensor2tensor v1.x), sinusoidal positions, one 37,000-token
embedding shared by source, target and the output softmax (scaled by sqrt(d_model) on input).
63,084,544 trainable parameters. Adafactor is the default optimizer, as in the study.

Inputs are ``[batch, 2, length]`` token ids: row 0 the source sentence, row 1 the decoder input
(the target shifted right behind a start token 0); ``targets`` are the next tokens. Every
sentence fills ``length`` tokens (no padding), so ``length`` x batch tokens go through each
stack per step. The loss is plain softmax cross-entropy (no label smoothing).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import no_image, real_tags, sequence_length
from paradnn.families.real import Real
from paradnn.families.transformer import sinusoid

VOCAB = 37000
D_MODEL, HEADS, D_FF, LAYERS = 512, 8, 2048, 6


class FeedForward(nn.Module):
    hidden: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, activation=nn.relu) -> jax.Array:
        y = activation(nn.Dense(self.hidden, dtype=self.dtype)(x))
        return nn.Dense(x.shape[-1], dtype=self.dtype)(y)


def attention(heads: int, dtype: Any, name: str | None = None) -> nn.MultiHeadDotProductAttention:
    return nn.MultiHeadDotProductAttention(num_heads=heads, dtype=dtype, deterministic=True, name=name)


class EncoderLayer(nn.Module):
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.LayerNorm(dtype=self.dtype)(x)
        x = x + attention(HEADS, self.dtype)(y, y)
        return x + FeedForward(D_FF, dtype=self.dtype)(nn.LayerNorm(dtype=self.dtype)(x))


class DecoderLayer(nn.Module):
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, memory: jax.Array, causal: jax.Array) -> jax.Array:
        y = nn.LayerNorm(dtype=self.dtype)(x)
        x = x + attention(HEADS, self.dtype, "self_attention")(y, y, mask=causal)
        y = nn.LayerNorm(dtype=self.dtype)(x)
        x = x + attention(HEADS, self.dtype, "cross_attention")(y, memory)
        return x + FeedForward(D_FF, dtype=self.dtype)(nn.LayerNorm(dtype=self.dtype)(x))


class Transformer(nn.Module):
    """``inputs [B, 2, L]`` -> logits ``[B, L, vocab]`` over the next target tokens."""

    vocab: int = VOCAB
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, inputs: jax.Array, train: bool = True) -> jax.Array:
        source, decoder_in = inputs[:, 0], inputs[:, 1]
        length = inputs.shape[-1]
        embed = nn.Embed(self.vocab, D_MODEL, dtype=self.dtype,
                         embedding_init=nn.initializers.normal(D_MODEL**-0.5), name="shared_embedding")
        positions = jnp.asarray(sinusoid(length, D_MODEL), self.dtype)

        def embed_tokens(ids: jax.Array) -> jax.Array:
            return embed(ids) * jnp.asarray(D_MODEL**0.5, self.dtype) + positions

        x = embed_tokens(source)
        for i in range(LAYERS):
            x = EncoderLayer(dtype=self.dtype, name=f"encoder_{i}")(x)
        memory = nn.LayerNorm(dtype=self.dtype, name="encoder_norm")(x)
        causal = nn.make_causal_mask(decoder_in)
        y = embed_tokens(decoder_in)
        for i in range(LAYERS):
            y = DecoderLayer(dtype=self.dtype, name=f"decoder_{i}")(y, memory, causal)
        y = nn.LayerNorm(dtype=self.dtype, name="decoder_norm")(y)
        return embed.attend(y)  # tied output projection


def build(spec: Real, dtype: str) -> ModelDef:
    no_image(spec)
    length = sequence_length(spec, 256, 1)

    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        ks, kt = jax.random.split(key)
        source = jax.random.randint(ks, (batch, length), 1, VOCAB)
        targets = jax.random.randint(kt, (batch, length), 1, VOCAB)
        decoder_in = jnp.pad(targets[:, :-1], ((0, 0), (1, 0)))  # start token 0
        return {"inputs": jnp.stack([source, decoder_in], axis=1), "targets": targets}

    return ModelDef(
        name=spec.model,
        module=Transformer(dtype=jnp.dtype(dtype)),
        make_batch=make_batch,
        loss=lambda logits, batch: softmax_xent(logits, batch["targets"]),
        default_optimizer="adafactor",
        tags=real_tags("translation", length=length),
    )


register(Entry(name="transformer", factory=build))
