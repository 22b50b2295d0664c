"""The ParaDnn RNN family (recurrent language model): spec, analytic counts, ranges.

Cells follow the TF1 cells the original ParaDnn used (one fused kernel over ``[x, h]``), in
every framework: rnn (1 gate), lstm (4, forget bias 1), gru (3: a gates kernel of 2 and a
candidate kernel of 1). The hidden size equals ``embed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from paradnn.families import Axis, Family, register
from paradnn.families.ranges import geometric, linear
from paradnn.families.spec import Spec
from paradnn.settings import choice

#: Gates (weight blocks of the fused kernel) per cell type, in the order the CLI lists them.
GATES = {"rnn": 1, "lstm": 4, "gru": 3}
RNN_CELLS = tuple(GATES)
#: Added to the LSTM forget gate's pre-activation, as TF1's LSTMCell does (every framework).
LSTM_FORGET_BIAS = 1.0


@dataclass(frozen=True)
class RNN(Spec):
    """Recurrent language model: Embedding(vocab, embed), ``layers`` stacked cells, Dense(vocab).

    The hidden size equals ``embed``; ``length`` is the sequence length in tokens.
    """

    cell: str
    layers: int
    embed: int
    length: int
    vocab: int
    family: ClassVar[str] = "rnn"
    _ints: ClassVar[tuple[str, ...]] = ("layers", "embed", "length", "vocab")

    def _validate(self) -> None:
        object.__setattr__(self, "cell", choice(RNN_CELLS, any_case=True)(self.cell, "cell"))


def param_count(spec: RNN) -> int:
    """Embedding vocab*E + per layer g*((E+H)*H + H) with H = E + head E*vocab + vocab."""
    e = spec.embed
    cells = spec.layers * GATES[spec.cell] * (2 * e * e + e)
    return spec.vocab * e + cells + e * spec.vocab + spec.vocab


def train_flops_per_example(spec: RNN) -> float:
    """Cell and head matmul FLOPs of one training step per example (3x forward; the first
    layer's input gradient is needed for the embedding gradient)."""
    e = spec.embed
    per_token = spec.layers * GATES[spec.cell] * 2.0 * (2 * e) * e + 2.0 * e * spec.vocab
    return 3.0 * spec.length * per_token


def activation_elements(spec: RNN) -> tuple[float, float]:
    """Estimated activations one example keeps for the backward pass, as (elements in the
    compute dtype, float32 elements): per time step the embedding and, per layer, the gate
    pre-activations and the cell and hidden states ((gates + 2) x embed), then the float32
    logits and their softmax (2 x vocab per step)."""
    per_step = spec.embed + spec.layers * (GATES[spec.cell] + 2) * spec.embed
    return float(spec.length * per_step), 2.0 * spec.length * spec.vocab


def example_bytes(spec: RNN, itemsize: int) -> int:
    """Bytes of one example of the synthetic batch: ``length`` int32 tokens and as many int32
    targets (the compute dtype does not enter: tokens are integers)."""
    return 2 * spec.length * 4


FAMILY = register(Family(
    name="rnn",
    spec=RNN,
    description="recurrent LM: --cell --layers --embed --length --vocab",
    axes=(
        Axis("cell", "", "recurrent cell type", choices=RNN_CELLS),
        Axis("layers", "layers", "stacked recurrent cells, a count"),
        Axis("embed", "units", "embedding and hidden size, a count"),
        Axis("length", "tokens", "sequence length in tokens"),
        Axis("vocab", "tokens", "vocabulary size in tokens"),
    ),
    param_count=param_count,
    train_flops_per_example=train_flops_per_example,
    activation_elements=activation_elements,
    example_bytes=example_bytes,
    default_batch=lambda spec: 64,
    paper={"cell": ["rnn", "lstm", "gru"], "layers": linear(1, 13, 4), "embed": linear(100, 900, 400),
           "length": linear(10, 90, 40), "vocab": geometric(2, 1024, 4),
           "batch": geometric(16, 1024, 4)},
    paper_fixed={"layers": 9, "vocab": 32, "length": 50},
    presets={"smoke": {"cell": ["rnn", "lstm"], "layers": 1, "embed": 16, "length": 4, "vocab": 32,
                       "batch": 4},
             "small": {"cell": ["rnn", "lstm", "gru"], "layers": [1, 2], "embed": 64, "length": 16,
                       "vocab": 256, "batch": 16}},
    width="embed",
    variant="cell",
    suggested_grid=({"cell": "lstm", "layers": 1, "length": 16, "vocab": 256},
                    {"embed": [32, 64, 128], "batch": [8, 16, 32, 64]}),
    tiny=tuple({"cell": c, "layers": 1, "embed": 32, "length": 3, "vocab": 32, "batch": 4}
               for c in RNN_CELLS),
    display="RNN",
    marker="^",
))
