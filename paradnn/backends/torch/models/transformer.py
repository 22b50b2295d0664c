"""The Transformer family in PyTorch: a pre-LayerNorm language model (docs/transformer.md).

tokens -> embedding + positions -> ``layers`` x [x + Attention(LN(x)); x + FF(LN(x))] -> LN ->
Linear(vocab, no bias), layer for layer as ``paradnn/backends/jax/models/transformer_lm.py``:
the same parameters (a test copies the Flax weights in and compares the losses), the same
initializer distributions, the same synthetic batches and loss.

Attention is ``torch.nn.functional.scaled_dot_product_attention`` (``attention="fused"``;
``is_causal`` for the decoder), which picks its kernel at run time (flash, memory-efficient or
cuDNN attention on a GPU where they apply, a fused CPU kernel, else the math composition), or
explicit matmul, float32 softmax, matmul (``"einsum"``), as the JAX model's einsum path.

Torch layouts, not Flax's: the Q/K/V projection is one ``Linear(d, 3d)`` whose outputs are
ordered (q/k/v, head, head dimension), Flax's ``DenseGeneral((3, heads, head_dim))`` flattened;
the output projection a ``Linear(d, d)`` whose inputs are ordered (head, head dimension).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from paradnn.backends.torch.models import TorchModel, dense, softmax_xent
from paradnn.families.transformer import EMBED_STD, MASK_RATE, MASK_TOKEN, Transformer, sinusoid

#: Flax's LayerNorm epsilon (torch's default is 1e-5).
LN_EPS = 1e-6


def _layer_norm(d: int) -> nn.LayerNorm:
    return nn.LayerNorm(d, eps=LN_EPS)  # scale ones, bias zeros: Flax's defaults


class SelfAttention(nn.Module):
    """Multi-head self-attention over ``[batch, length, d_model]``: fused Q/K/V projection,
    attention, output projection (all with biases)."""

    def __init__(self, d_model: int, heads: int, causal: bool, attention: str) -> None:
        super().__init__()
        self.heads, self.causal, self.attention = heads, causal, attention
        self.qkv = dense(d_model, 3 * d_model)
        self.out = dense(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, d = x.shape
        head_dim = d // self.heads
        # [batch, length, 3, heads, head_dim] -> three [batch, heads, length, head_dim]
        qkv = self.qkv(x).view(batch, length, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        if self.attention == "fused":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            # The scores and their softmax in float32 (as the JAX einsum path and XLA's fused
            # path do): under autocast the products run in the compute dtype.
            scores = (q @ k.transpose(-2, -1)).float() * head_dim**-0.5
            if self.causal:
                keep = torch.ones((length, length), dtype=torch.bool, device=x.device).tril()
                scores = scores.masked_fill(~keep, torch.finfo(torch.float32).min)
            out = scores.softmax(dim=-1).to(v.dtype) @ v
        # [batch, heads, length, head_dim] -> [batch, length, heads * head_dim]
        return self.out(out.transpose(1, 2).reshape(batch, length, d))


class Block(nn.Module):
    """Pre-LayerNorm block: x + Attention(LN(x)), then x + Linear(GELU(Linear(LN(x))))."""

    def __init__(self, spec: Transformer) -> None:
        super().__init__()
        d = spec.d_model
        # Registration order = the Flax module's creation order (the weight-copy test pairs
        # parameters by position).
        self.attention_norm = _layer_norm(d)
        self.attention = SelfAttention(d, spec.heads, spec.stack == "decoder", spec.attention)
        self.ff_norm = _layer_norm(d)
        self.ff_in = dense(d, spec.d_ff)
        self.ff_out = dense(spec.d_ff, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        # Flax's nn.gelu defaults to the tanh approximation.
        return x + self.ff_out(F.gelu(self.ff_in(self.ff_norm(x)), approximate="tanh"))


class TransformerLM(nn.Module):
    """``tokens [batch, length]`` (int64) -> logits ``[batch, length, vocab]``."""

    positions: nn.Embedding | None
    sinusoid: torch.Tensor | None

    def __init__(self, spec: Transformer) -> None:
        super().__init__()
        d = spec.d_model
        self.embedding = nn.Embedding(spec.vocab, d)
        nn.init.normal_(self.embedding.weight, std=EMBED_STD)
        if spec.positions == "learned":
            # An Embedding only to hold the [length, d_model] table as a child module, so that
            # it follows the token embedding in named_parameters() (Flax's order).
            self.positions = nn.Embedding(spec.length, d)
            nn.init.normal_(self.positions.weight, std=EMBED_STD)
            self.sinusoid = None
        else:
            self.positions = None
            # A constant, not state: not in the state_dict (nor in the weights' bytes).
            # torch.tensor, not from_numpy: it follows a default-device context (the FLOP count builds on meta).
            self.register_buffer("sinusoid", torch.tensor(sinusoid(spec.length, d)), persistent=False)
        self.blocks = nn.ModuleList(Block(spec) for _ in range(spec.layers))
        self.final_norm = _layer_norm(d)
        self.head = dense(d, spec.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        table = self.positions.weight if self.positions is not None else self.sinusoid
        assert table is not None
        x = self.embedding(tokens) + table[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))


def build(spec: Transformer, dtype: str) -> TorchModel:
    """The TorchModel of ``spec``; ``dtype`` is applied by the backend's autocast.

    Batches as the JAX model's: decoder, a random sequence of length+1 tokens whose first
    ``length`` are the inputs and the next ones the labels; encoder, random tokens with
    ``MASK_RATE`` of the positions replaced by ``MASK_TOKEN`` in the inputs, every position's
    label its original token. The loss is the mean float32 cross-entropy over all positions.
    """

    def make_batch(gen: torch.Generator | None, batch: int, device: Any) -> dict[str, torch.Tensor]:
        if spec.stack == "decoder":
            ids = torch.randint(0, spec.vocab, (batch, spec.length + 1), generator=gen, device=device)
            return {"inputs": ids[:, :-1].contiguous(), "labels": ids[:, 1:].contiguous()}
        ids = torch.randint(0, spec.vocab, (batch, spec.length), generator=gen, device=device)
        corrupt = torch.rand((batch, spec.length), generator=gen, device=device) < MASK_RATE
        return {"inputs": ids.masked_fill(corrupt, MASK_TOKEN), "labels": ids}

    attention = "sdpa" if spec.attention == "fused" else "einsum"
    return TorchModel("transformer", lambda: TransformerLM(spec), make_batch,
                      lambda out, batch: softmax_xent(out, batch["labels"]),
                      tags={"kind": "generated", "attention_implementation": attention})


__all__ = ["SelfAttention", "TransformerLM", "build"]
