"""The ParaDnn fully connected family: spec, analytic counts, memory estimates, ranges (no
framework imported)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from paradnn.families import Axis, Family, register
from paradnn.families.ranges import geometric, linear
from paradnn.families.spec import Spec


@dataclass(frozen=True)
class FC(Spec):
    """Fully connected network: ``layers`` hidden Dense(nodes, ReLU) layers, then Dense(output).

    ``layers`` counts every hidden layer, the first (input -> nodes) included; ``input`` is the
    number of input features and ``output`` the number of classes.
    """

    layers: int
    nodes: int
    input: int
    output: int
    family: ClassVar[str] = "fc"
    _ints: ClassVar[tuple[str, ...]] = ("layers", "nodes", "input", "output")


def weights(spec: FC) -> int:
    """Weight-matrix entries: input*nodes + (layers-1)*nodes^2 + nodes*output."""
    return spec.input * spec.nodes + (spec.layers - 1) * spec.nodes**2 + spec.nodes * spec.output


def param_count(spec: FC) -> int:
    """Weights + biases: input*nodes + (layers-1)*nodes^2 + nodes*output, plus biases."""
    return weights(spec) + spec.layers * spec.nodes + spec.output


def train_flops_per_example(spec: FC) -> float:
    """Matmul FLOPs of one training step per example (2 per multiply-add).

    Forward 2W, weight gradients 2W, input gradients 2W less the first layer's (nobody needs
    the gradient of the data): 6W - 2*input*nodes, W the weight count. The original ParaDnn used
    6W; the difference is the data gradient no framework computes.
    """
    return 6.0 * weights(spec) - 2.0 * spec.input * spec.nodes


def activation_elements(spec: FC) -> tuple[float, float]:
    """Estimated activations one example keeps for the backward pass, as (elements in the
    compute dtype, float32 elements): the input, each hidden layer's pre- and post-ReLU output
    (2 x layers x nodes), and the float32 logits and their softmax (2 x output). An estimate,
    not a compiler's buffer plan (tests/test_plan.py compares it with XLA's)."""
    return float(spec.input + 2 * spec.layers * spec.nodes), 2.0 * spec.output


def example_bytes(spec: FC, itemsize: int) -> int:
    """Bytes of one example of the synthetic batch: ``input`` features in the compute dtype
    (``itemsize`` B each) and an int32 label."""
    return spec.input * itemsize + 4


FAMILY = register(Family(
    name="fc",
    spec=FC,
    description="fully connected: --layers --nodes --input --output",
    axes=(
        Axis("layers", "layers", "hidden layers, a count"),
        Axis("nodes", "units/layer", "units per hidden layer, a count"),
        Axis("input", "features", "input features per example, a count"),
        Axis("output", "classes", "classes of the output layer, a count"),
    ),
    param_count=param_count,
    train_flops_per_example=train_flops_per_example,
    activation_elements=activation_elements,
    example_bytes=example_bytes,
    default_batch=lambda spec: 256,
    # Table 2 of the ParaDnn paper (Wang, Wei and Brooks); bounds inclusive.
    paper={"layers": geometric(4, 128, 2), "nodes": geometric(32, 8192, 2),
           "input": linear(2000, 8000, 2000), "output": linear(200, 1000, 200),
           "batch": geometric(64, 16384, 2)},
    paper_fixed={"layers": 32, "input": 2000, "output": 1000},
    presets={"smoke": {"layers": 2, "nodes": [32, 64], "input": 64, "output": 10, "batch": 8},
             "small": {"layers": [2, 4], "nodes": [64, 256], "input": 512, "output": 100,
                       "batch": [32, 128]}},
    width="nodes",
    suggested_grid=({"layers": 2, "input": 512, "output": 100},
                    {"nodes": [64, 128, 256], "batch": [32, 64, 128, 256]}),
    # Tiny, yet wide enough that matmuls outweigh the element-wise work (the contract test
    # compares executed and analytic FLOPs).
    tiny=({"layers": 2, "nodes": 64, "input": 32, "output": 8, "batch": 8},),
    display="FC",
    marker="o",
))
