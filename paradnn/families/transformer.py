"""The Transformer family (beyond the ParaDnn study): spec, analytic counts, ranges.

A stack of ``layers`` pre-LayerNorm Transformer blocks over ``length`` tokens of a ``vocab``
token vocabulary: a decoder-only language model (causal self-attention, next-token
cross-entropy) by default, an encoder-only model (bidirectional self-attention, every position
predicts its original token of a corrupted sequence) with ``stack="encoder"``. The layout,
the same in every framework that builds it (``docs/transformer.md``):

* token embedding ``[vocab, d_model]``, plus learned positions ``[length, d_model]``
  (``positions="learned"``) or fixed sinusoids (``"sinusoidal"``, no parameters);
* per block: LayerNorm -> self-attention (Q, K, V and output projections with biases,
  ``heads`` heads of ``d_model/heads``) -> residual; LayerNorm -> Dense(d_ff, GELU) ->
  Dense(d_model) -> residual;
* a final LayerNorm and an untied, bias-free output projection ``[d_model, vocab]``.

Nothing here imports a framework: the counts are plain arithmetic, checkable by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from paradnn.errors import SpecError
from paradnn.families import Axis, Family, register
from paradnn.families.ranges import geometric
from paradnn.families.spec import Spec, positive_int
from paradnn.settings import choice

POSITIONS = ("learned", "sinusoidal")
ATTENTION = ("fused", "einsum")
ATTENTION_FLOPS = ("full", "half")
#: ``heads="auto"`` gives heads of this many dimensions (GPT-2, BERT, T5: 64).
HEAD_DIM = 64
#: ``d_ff="auto"`` is this multiple of d_model (Vaswani et al., GPT-2, BERT: 4).
FF_MULTIPLE = 4
#: decoder: causal self-attention, next-token loss; encoder: bidirectional, corrupted tokens.
#: A string, not a ``causal`` bool: a bool column with gaps (other families' rows) loses its
#: type in pandas group-bys and joins, and would pass for a numeric hyperparameter.
STACKS = ("decoder", "encoder")


#: Fraction of positions the encoder-only objective corrupts (BERT's masking rate), and the
#: token id a corrupted position shows the encoder: every framework's batches use these.
MASK_RATE = 0.15
MASK_TOKEN = 0
#: Standard deviation of the token and learned position embeddings' normal initializer (GPT-2's).
EMBED_STD = 0.02


def sinusoid(length: int, dim: int) -> np.ndarray:
    """Sinusoidal position encodings ``[length, dim]`` (float32, computed in float64): sines of
    the positions at ``dim/2`` geometric frequencies on the first half, cosines on the second.
    One table for every framework (``positions="sinusoidal"``, and the zoo's Transformer)."""
    pos = np.arange(length)[:, None]
    inv = np.exp(-np.log(10000.0) * np.arange(dim // 2) / max(dim // 2 - 1, 1))
    return np.concatenate([np.sin(pos * inv), np.cos(pos * inv)], axis=1).astype(np.float32)


def _auto(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == "auto"


@dataclass(frozen=True)
class Transformer(Spec):
    """A pre-LayerNorm Transformer language model (docs/transformer.md).

    ``layers`` blocks of width ``d_model`` with ``heads`` attention heads (``"auto"``:
    d_model/64, at least 1; must divide d_model) and a feed-forward hidden size ``d_ff``
    (``"auto"``: 4*d_model), over sequences of ``length`` tokens from a ``vocab``-token
    vocabulary. ``stack`` ``decoder`` is a decoder-only LM (causal self-attention, next-token
    loss); ``encoder`` an encoder-only model (bidirectional self-attention). ``positions`` is
    ``learned`` or ``sinusoidal``. ``attention`` picks the kernel: ``fused``
    (``jax.nn.dot_product_attention``: cuDNN flash attention on NVIDIA GPUs where it applies,
    XLA elsewhere) or ``einsum`` (plain einsum, softmax, einsum). ``attention_flops`` says how
    :func:`train_flops_per_example` counts the attention products: ``full`` (every score, as
    the program computes them) or ``half`` (decoder only: the useful causal triangle,
    MaxText's convention); it changes no computation.
    """

    layers: int
    d_model: int
    heads: int
    d_ff: int
    length: int
    vocab: int
    stack: str = "decoder"
    positions: str = "learned"
    attention: str = "fused"
    attention_flops: str = "full"
    family: ClassVar[str] = "transformer"
    _ints: ClassVar[tuple[str, ...]] = ("layers", "d_model", "length", "vocab")

    def __post_init__(self) -> None:
        for name in self._ints:
            object.__setattr__(self, name, positive_int(name, getattr(self, name)))
        # "auto" resolves here, so the key and the store hold the number that runs.
        if _auto(self.heads):
            object.__setattr__(self, "heads", max(1, self.d_model // HEAD_DIM))
        if _auto(self.d_ff):
            object.__setattr__(self, "d_ff", FF_MULTIPLE * self.d_model)
        for name in ("heads", "d_ff"):
            try:
                object.__setattr__(self, name, positive_int(name, getattr(self, name)))
            except SpecError:
                raise SpecError(name, getattr(self, name), "a positive integer or auto") from None
        self._validate()

    def _validate(self) -> None:
        if self.d_model % self.heads:
            raise SpecError("heads", self.heads, f"a divisor of d_model={self.d_model} "
                            f"(heads of d_model/heads dimensions; auto gives d_model/{HEAD_DIM})")
        object.__setattr__(self, "stack", choice(STACKS, any_case=True)(self.stack, "stack"))
        object.__setattr__(self, "positions", choice(POSITIONS, any_case=True)(self.positions, "positions"))
        object.__setattr__(self, "attention", choice(ATTENTION, any_case=True)(self.attention, "attention"))
        object.__setattr__(self, "attention_flops",
                           choice(ATTENTION_FLOPS, any_case=True)(self.attention_flops, "attention_flops"))
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise SpecError("d_model", self.d_model, "an even number with positions=sinusoidal "
                            "(a sine and a cosine per frequency)")
        if self.attention_flops == "half" and self.stack != "decoder":
            raise SpecError("attention_flops", self.attention_flops,
                            "full with stack=encoder (half counts only a causal mask's triangle)")


def block_params(spec: Transformer) -> int:
    """One block: two LayerNorms 4d, Q/K/V/output projections 4d^2 + 4d, feed-forward
    2*d*d_ff + d_ff + d (d = d_model)."""
    d, f = spec.d_model, spec.d_ff
    return 4 * d + (4 * d * d + 4 * d) + (2 * d * f + f + d)


def param_count(spec: Transformer) -> int:
    """Trainable parameters, exactly:

    ``vocab*d`` (token embedding) + ``length*d`` (learned positions only)
    + ``layers*(4d^2 + 2*d*d_ff + 9d + d_ff)`` (blocks) + ``2d`` (final LayerNorm)
    + ``d*vocab`` (output projection, no bias).
    """
    d = spec.d_model
    positions = spec.length * d if spec.positions == "learned" else 0
    return spec.vocab * d + positions + spec.layers * block_params(spec) + 2 * d + d * spec.vocab


def forward_flops_per_token(spec: Transformer) -> float:
    """Matmul FLOPs of the forward pass per token (2 per multiply-add).

    Per block: projections 2*4d^2, feed-forward 2*2*d*d_ff, attention scores Q.K 2*T*d and
    value products P.V 2*T*d (T = length; each query meets T keys over all heads), halved with
    ``attention_flops="half"``; then the output projection 2*d*vocab. Embedding lookups,
    LayerNorm, softmax and GELU are not matmuls and are not counted.
    """
    d, t = spec.d_model, spec.length
    attention = 4.0 * t * d * (0.5 if spec.attention_flops == "half" else 1.0)
    block = 8.0 * d * d + 4.0 * d * spec.d_ff + attention
    return spec.layers * block + 2.0 * d * spec.vocab


def train_flops_per_example(spec: Transformer) -> float:
    """Matmul FLOPs of one training step per example (one sequence of ``length`` tokens):
    3x the forward pass, ``3 * length * forward_flops_per_token``.

    Every forward product ``A @ B`` has two backward products of the same size (the gradients
    of A and of B), the first block's input gradient included (the embedding needs it), so the
    backward pass is exactly twice the forward. Written out (d = d_model, T = length, c = 1, or
    1/2 with ``attention_flops="half"``)::

        6 * T * (layers * (4d^2 + 2*d*d_ff + 2*c*T*d) + d*vocab)
    """
    return 3.0 * spec.length * forward_flops_per_token(spec)


def activation_elements(spec: Transformer) -> tuple[float, float]:
    """Estimated activations one example (``length`` tokens) keeps for the backward pass, as
    (elements in the compute dtype, float32 elements), for ``paradnn plan``. An estimate, not
    XLA's buffer plan. Per token: the embedding output d; per block its two LayerNorm outputs
    and residual sums 4d, Q/K/V 3d, the attention output d, the feed-forward input and GELU
    output 2*d_ff, and ``heads * length`` attention probabilities (XLA's composition and the
    einsum path materialize them; cuDNN flash attention does not: an overestimate there);
    then the final LayerNorm d, and float32 logits and their softmax 2*vocab.
    """
    d, t = spec.d_model, spec.length
    per_token = d + spec.layers * (8 * d + 2 * spec.d_ff + spec.heads * t) + d
    return float(t * per_token), float(t * 2 * spec.vocab)


def activation_floor(spec: Transformer) -> tuple[float, float]:
    """A lower bound of the activations one example keeps, as (elements in the compute dtype,
    float32 elements), for the preflight that refuses a model before tracing: whatever XLA
    fuses, each block's input (``d`` per token; the backward pass of its first LayerNorm needs
    it) and the output projection's logits (``vocab`` per token, a matmul's output) exist at
    once, so ``length * (layers * d + vocab)`` elements, counted in the compute dtype."""
    return float(spec.length * (spec.layers * spec.d_model + spec.vocab)), 0.0


def example_bytes(spec: Transformer, itemsize: int) -> int:
    """Bytes of one example of the synthetic batch: ``length`` int32 tokens and as many int32
    targets (the compute dtype does not enter: tokens are integers)."""
    return 2 * spec.length * 4


def _tiny(**overrides: Any) -> dict[str, Any]:
    base = {"layers": 1, "d_model": 32, "heads": 2, "d_ff": 64, "length": 8, "vocab": 64, "batch": 2}
    return {**base, **overrides}


FAMILY = register(Family(
    name="transformer",
    spec=Transformer,
    description="Transformer LM: --layers --d_model --heads --d_ff --length --vocab [--stack --positions "
                "--attention --attention_flops]",
    axes=(
        Axis("layers", "layers", "Transformer blocks, a count"),
        Axis("d_model", "units", "model width (embedding and residual stream), a count"),
        Axis("heads", "heads", "attention heads, a divisor of d_model, or auto (d_model/64)"),
        Axis("d_ff", "units", "feed-forward hidden units, a count, or auto (4*d_model)"),
        Axis("length", "tokens", "sequence length in tokens"),
        Axis("vocab", "tokens", "vocabulary size in tokens"),
        Axis("stack", "", "decoder: decoder-only LM (causal mask, next-token loss); encoder: "
             "encoder-only (bidirectional)", choices=STACKS),
        Axis("positions", "", "position encoding", choices=POSITIONS),
        Axis("attention", "", "attention kernel: fused (jax.nn.dot_product_attention) or einsum",
             choices=ATTENTION),
        Axis("attention_flops", "", "analytic count of the attention products: full, or half "
             "(causal triangle only)", choices=ATTENTION_FLOPS),
    ),
    param_count=param_count,
    train_flops_per_example=train_flops_per_example,
    activation_elements=activation_elements,
    activation_floor=activation_floor,
    example_bytes=example_bytes,
    default_batch=lambda spec: 16,  # sequences: 16 x 1024 tokens = 16k tokens per step
    default_optimizer=lambda spec: "adam",
    # ParaDnn-style ranges for a family the paper did not have (GPT-2 small to GPT-3-class
    # widths; heads of 64 dimensions and d_ff = 4*d_model as in GPT-2 and BERT).
    paper={"layers": [2, 4, 8, 12, 16, 24, 32, 48], "d_model": geometric(256, 8192, 2),
           "heads": ["auto"], "d_ff": ["auto"], "length": geometric(128, 8192, 2),
           "vocab": geometric(1024, 262144, 4), "batch": geometric(1, 256, 4)},
    # heads and d_ff follow d_model ("auto") in the heat maps over d_model.
    paper_fixed={"layers": 12, "length": 1024, "vocab": 32768},
    presets={"smoke": {"layers": 1, "d_model": [32, 64], "heads": 2, "d_ff": "auto", "length": 16,
                       "vocab": 64, "batch": 4},
             "small": {"layers": [2, 4], "d_model": [128, 256], "heads": 2, "d_ff": "auto",
                       "length": [64, 128], "vocab": 1024, "batch": [8, 32]}},
    width="d_model",
    variant="stack",
    suggested_grid=({"layers": 2, "heads": 2, "d_ff": 512, "length": 64, "vocab": 1024},
                    {"d_model": [64, 128, 256], "batch": [4, 8, 16, 32]}),
    tiny=(_tiny(), _tiny(stack="encoder", positions="sinusoidal", attention="einsum")),
    display="Transformer",
))
