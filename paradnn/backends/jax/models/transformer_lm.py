"""The Transformer family in Flax: a pre-LayerNorm language model (docs/transformer.md).

tokens -> embedding + positions -> ``layers`` x [x + Attention(LN(x)); x + FF(LN(x))] -> LN ->
Dense(vocab, no bias). The layout and the analytic counts are those of
:mod:`paradnn.families.transformer`; a test checks that the parameter count from this module's
shapes equals the closed form.

Attention is ``jax.nn.dot_product_attention`` (``attention="fused"``) or a plain einsum,
softmax, einsum (``"einsum"``). ``jax.nn.dot_product_attention`` with no implementation named
runs XLA's composition, so :func:`fused_implementation` names cuDNN (flash attention) where
cuDNN supports the call: an NVIDIA GPU, bfloat16/float16 compute, a head dimension that is a
multiple of 8 and at most 128. Everywhere else the fused path is XLA's.

Parameters are float32; the module computes in its ``dtype`` (mixed precision), the softmax of
the einsum path in float32 (as XLA's fused path does), the loss in float32.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.families.transformer import (EMBED_STD, MASK_RATE, MASK_TOKEN, Transformer, sinusoid,
                                          train_flops_per_example)
from paradnn.backends.jax.models.base import ModelDef, softmax_xent

_INIT = nn.initializers.normal(EMBED_STD)  # the token and position embeddings' initializer


def fused_implementation(head_dim: int, dtype: str, platform: str) -> str:
    """The ``implementation`` passed to ``jax.nn.dot_product_attention``: ``"cudnn"`` where
    cuDNN's flash attention takes the call (NVIDIA GPU, 16-bit compute, head dimension a
    multiple of 8 up to 128, the bound on every architecture cuDNN supports), else ``"xla"``."""
    if platform == "gpu" and dtype in ("bfloat16", "float16") and head_dim % 8 == 0 and head_dim <= 128:
        return "cudnn"
    return "xla"


class SelfAttention(nn.Module):
    """Multi-head self-attention over ``[batch, length, d_model]``: fused Q/K/V projection,
    attention, output projection (all with biases)."""

    heads: int
    causal: bool
    attention: str  # "fused" or "einsum"
    implementation: str = "xla"  # of the fused path
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        d = x.shape[-1]
        head_dim = d // self.heads
        qkv = nn.DenseGeneral((3, self.heads, head_dim), dtype=self.dtype, name="qkv")(x)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [batch, length, heads, head_dim]
        if self.attention == "fused":
            out = jax.nn.dot_product_attention(q, k, v, is_causal=self.causal,
                                               implementation=self.implementation)
        else:
            scores = jnp.einsum("btnh,bsnh->bnts", q, k).astype(jnp.float32) * head_dim**-0.5
            if self.causal:
                length = x.shape[1]
                keep = jnp.tril(jnp.ones((length, length), bool))
                scores = jnp.where(keep, scores, jnp.finfo(jnp.float32).min)
            probs = jax.nn.softmax(scores, axis=-1).astype(self.dtype)
            out = jnp.einsum("bnts,bsnh->btnh", probs, v)
        return nn.DenseGeneral(d, axis=(-2, -1), dtype=self.dtype, name="out")(out)


class Block(nn.Module):
    """Pre-LayerNorm block: x + Attention(LN(x)), then x + Dense(GELU(Dense(LN(x))))."""

    heads: int
    d_ff: int
    causal: bool
    attention: str
    implementation: str = "xla"
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.LayerNorm(dtype=self.dtype, name="attention_norm")(x)
        x = x + SelfAttention(self.heads, self.causal, self.attention, self.implementation,
                              self.dtype, name="attention")(y)
        y = nn.LayerNorm(dtype=self.dtype, name="ff_norm")(x)
        y = nn.gelu(nn.Dense(self.d_ff, dtype=self.dtype, name="ff_in")(y))
        return x + nn.Dense(x.shape[-1], dtype=self.dtype, name="ff_out")(y)


class TransformerLM(nn.Module):
    """``tokens [batch, length]`` -> logits ``[batch, length, vocab]``."""

    layers: int
    d_model: int
    heads: int
    d_ff: int
    length: int
    vocab: int
    causal: bool = True
    positions: str = "learned"
    attention: str = "fused"
    implementation: str = "xla"
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array, train: bool = True) -> jax.Array:
        x = nn.Embed(self.vocab, self.d_model, dtype=self.dtype, embedding_init=_INIT,
                     name="embedding")(tokens)
        if self.positions == "learned":
            pos = self.param("positions", _INIT, (self.length, self.d_model))
        else:
            pos = sinusoid(self.length, self.d_model)
        x = x + jnp.asarray(pos[: tokens.shape[1]], self.dtype)
        for i in range(self.layers):
            x = Block(self.heads, self.d_ff, self.causal, self.attention, self.implementation,
                      self.dtype, name=f"block_{i}")(x)
        x = nn.LayerNorm(dtype=self.dtype, name="final_norm")(x)
        return nn.Dense(self.vocab, use_bias=False, dtype=self.dtype, name="head")(x)


def make_batch_fn(spec: Transformer):
    """Synthetic token batches: ``inputs [batch, length]`` and ``labels [batch, length]``.

    Decoder: a random sequence of length+1 tokens; inputs are its first ``length``
    tokens, labels the next ones. Encoder: random tokens, ``MASK_RATE`` of the positions
    replaced by ``MASK_TOKEN`` in the inputs; every position's label is its original token.
    """

    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        if spec.stack == "decoder":
            ids = jax.random.randint(key, (batch, spec.length + 1), 0, spec.vocab)
            return {"inputs": ids[:, :-1], "labels": ids[:, 1:]}
        k_ids, k_mask = jax.random.split(key)
        ids = jax.random.randint(k_ids, (batch, spec.length), 0, spec.vocab)
        corrupt = jax.random.bernoulli(k_mask, MASK_RATE, ids.shape)
        return {"inputs": jnp.where(corrupt, MASK_TOKEN, ids), "labels": ids}

    return make_batch


def build(spec: Transformer, dtype: str, platform: str | None = None) -> ModelDef:
    """The ModelDef of ``spec`` computing in ``dtype``. ``platform`` (cpu, gpu, tpu; default
    JAX's default backend) decides the fused attention's implementation."""
    dtype = jnp.dtype(dtype).name
    platform = platform or jax.default_backend()
    implementation = fused_implementation(spec.d_model // spec.heads, dtype, platform)
    module = TransformerLM(spec.layers, spec.d_model, spec.heads, spec.d_ff, spec.length, spec.vocab,
                           spec.stack == "decoder", spec.positions, spec.attention, implementation,
                           dtype=jnp.dtype(dtype))
    attention = implementation if spec.attention == "fused" else "einsum"
    return ModelDef(
        name="transformer",
        module=module,
        make_batch=make_batch_fn(spec),
        loss=lambda logits, batch: softmax_xent(logits, batch["labels"]),
        default_optimizer="adam",
        train_flops_per_example=train_flops_per_example(spec),
        tags={"kind": "generated", "attention_implementation": attention},
    )
