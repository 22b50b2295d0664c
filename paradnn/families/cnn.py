"""The ParaDnn CNN family (ResNet v1): spec, analytic counts, ranges (no framework imported).

Every framework builds the same network: stem 7x7/2 conv, BN, ReLU, 3x3/2 max-pool; four
groups with filters x1, x2, x4, x8 and strides 1, 2, 2, 2; the first block of each group has a
1x1 projection shortcut; global average pool and Dense(output); convs without bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Iterator

from paradnn import convolution
from paradnn.errors import SpecError
from paradnn.families import Axis, Family, register
from paradnn.families.ranges import geometric, linear
from paradnn.families.spec import Spec
from paradnn.settings import choice

CNN_BLOCKS = ("residual", "bottleneck")
GROUP_WIDTH = (1, 2, 4, 8)
GROUP_STRIDE = (1, 2, 2, 2)


@dataclass(frozen=True)
class CNN(Spec):
    """ResNet-v1 CNN: a stem, four groups of ``blocks`` blocks each, global pool, Dense(output).

    ``filters`` is the width of the first group (x1, x2, x4, x8 for the four groups); ``image``
    is the side of a square 3-channel input in pixels; ``output`` the number of classes.
    """

    block: str
    blocks: int
    filters: int
    image: int
    output: int
    family: ClassVar[str] = "cnn"
    _ints: ClassVar[tuple[str, ...]] = ("blocks", "filters", "image", "output")

    def _validate(self) -> None:
        object.__setattr__(self, "block", choice(CNN_BLOCKS, any_case=True)(self.block, "block"))
        # Stem stride 2, max-pool stride 2 and three stride-2 groups: 32x downsampling.
        if self.image < 32:
            raise SpecError("image", self.image, "an integer >= 32 (the network downsamples 32x)")


def valid_taps(size: int, kernel: int, stride: int) -> int:
    """Kernel taps that land inside the input, summed over the output positions of one
    dimension of a SAME-padded convolution (taps on padding multiply zeros: XLA skips them);
    :func:`paradnn.convolution.valid_taps` with SAME's output size and low padding, O(kernel)
    whatever ``size``."""
    out = -(-size // stride)
    pad_lo = max((out - 1) * stride + kernel - size, 0) // 2
    return convolution.valid_taps(size, out, kernel, stride, pad_lo)


def network_blocks(spec: CNN) -> Iterator[tuple[tuple[tuple[int, int, int, int, int, bool], ...], int]]:
    """The network as (convs of one block, how many times that block repeats), in order. Each
    conv is (kernel side, in channels, out channels, input side, stride, is_stem). The stem is
    a block of one conv; the first block of a group changes channels and stride (and has the
    1x1 projection shortcut); its other ``blocks - 1`` blocks are identical, so they come as
    one entry: sums over the network cost O(1) in ``blocks``."""
    yield ((7, 3, spec.filters, spec.image, 2, True),), 1
    side = math.ceil(math.ceil(spec.image / 2) / 2)  # stem stride 2, then max-pool stride 2
    ch = spec.filters
    for width, stride in zip(GROUP_WIDTH, GROUP_STRIDE):
        f = spec.filters * width
        out_ch = 4 * f if spec.block == "bottleneck" else f
        out_side = math.ceil(side / stride)
        projection = ((1, ch, out_ch, side, stride, False),)
        for repeats, cin, s, in_side, extra in ((1, ch, stride, side, projection),
                                                (spec.blocks - 1, out_ch, 1, out_side, ())):
            if not repeats:
                continue
            if spec.block == "bottleneck":
                body = ((1, cin, f, in_side, 1, False), (3, f, f, in_side, s, False),
                        (1, f, out_ch, out_side, 1, False))
            else:
                body = ((3, cin, f, in_side, s, False), (3, f, f, out_side, 1, False))
            yield extra + body, repeats
        ch, side = out_ch, out_side


def conv_counts(spec: CNN) -> Iterator[tuple[int, int, int, int, int, bool, int]]:
    """Every distinct conv as (kernel side, in channels, out channels, input side, stride,
    is_stem, how many times the network has it): :func:`network_blocks` flattened, O(1) in ``blocks``."""
    for convs_of_block, repeats in network_blocks(spec):
        for conv in convs_of_block:
            yield (*conv, repeats)


def convs(spec: CNN) -> Iterator[tuple[int, int, int, int, int, bool]]:
    """Every conv as (kernel side, in channels, out channels, input side, stride, is_stem), in
    network order (:func:`network_blocks` expanded: as long as the network)."""
    for convs_of_block, repeats in network_blocks(spec):
        for _ in range(repeats):
            yield from convs_of_block


def final_channels(spec: CNN) -> int:
    return spec.filters * 8 * (4 if spec.block == "bottleneck" else 1)


def param_count(spec: CNN) -> int:
    """Conv kernels + BN scale and offset (2 per channel) + the Dense head's weights and bias."""
    total = sum(n * (k * k * cin * cout + 2 * cout) for k, cin, cout, *_, n in conv_counts(spec))
    return total + final_channels(spec) * spec.output + spec.output


def train_flops_per_example(spec: CNN) -> float:
    """Conv and Dense FLOPs of one training step per example: 3x forward less the stem's data
    gradient. Only kernel taps inside the image count (padding contributes no work)."""
    fwd = stem = 0.0
    for k, cin, cout, side, stride, is_stem, n in conv_counts(spec):
        flops = 2.0 * valid_taps(side, k, stride) ** 2 * cin * cout
        fwd += n * flops
        stem += flops if is_stem else 0.0
    fwd += 2.0 * final_channels(spec) * spec.output
    return 3.0 * fwd - stem


def batch_norm_statistics(spec: CNN) -> int:
    """float32 running means and variances: every conv is followed by a batch norm that keeps
    one of each per output channel."""
    return sum(n * 2 * cout for _k, _cin, cout, *_rest, n in conv_counts(spec))


def activation_elements(spec: CNN) -> tuple[float, float]:
    """Estimated activations one example keeps for the backward pass, as (elements in the
    compute dtype, float32 elements): the input image (3 x image^2) and three tensors per
    convolution (its output, the batch norm's and the ReLU's: 3 x side^2 x channels), then
    the float32 logits and their softmax (2 x output)."""
    elements = 3.0 * spec.image ** 2
    for _k, _cin, cout, side, stride, _stem, n in conv_counts(spec):
        elements += n * 3.0 * math.ceil(side / stride) ** 2 * cout
    return elements, 2.0 * spec.output


def example_bytes(spec: CNN, itemsize: int) -> int:
    """Bytes of one example of the synthetic batch: a 3 x image x image input in the compute
    dtype (``itemsize`` B per element) and an int32 label."""
    return 3 * spec.image ** 2 * itemsize + 4


FAMILY = register(Family(
    name="cnn",
    spec=CNN,
    description="ResNet-v1 CNN: --block --blocks --filters --image --output",
    axes=(
        Axis("block", "", "block type of the ResNet groups", choices=CNN_BLOCKS),
        Axis("blocks", "blocks/group", "blocks per group, a count"),
        Axis("filters", "channels", "filters of the first group (x1, x2, x4, x8 for the four groups), a count"),
        Axis("image", "pixels", "side of the square input image in pixels"),
        Axis("output", "classes", "classes of the output layer, a count"),
    ),
    param_count=param_count,
    train_flops_per_example=train_flops_per_example,
    activation_elements=activation_elements,
    example_bytes=example_bytes,
    non_trainable_count=batch_norm_statistics,
    default_batch=lambda spec: 64,
    paper={"block": ["residual", "bottleneck"], "blocks": linear(1, 8, 1),
           "filters": geometric(16, 64, 2), "image": linear(200, 300, 50),
           "output": linear(500, 1500, 500), "batch": geometric(64, 1024, 2)},
    paper_fixed={"blocks": 6, "image": 300, "output": 1000},
    presets={"smoke": {"block": "residual", "blocks": 1, "filters": 4, "image": 32, "output": 10,
                       "batch": 2},
             "small": {"block": ["residual", "bottleneck"], "blocks": 1, "filters": [8, 16],
                       "image": 64, "output": 100, "batch": 8}},
    width="filters",
    variant="block",
    suggested_grid=({"block": "residual", "blocks": 1, "image": 32, "output": 10},
                    {"filters": [4, 8, 16], "batch": [4, 8, 16, 32]}),
    # Image 96, not the smallest (32): its last stage is 3x3, so XLA:CPU compiles the step once.
    # At 32 and 64 pixels the last stage's 3x3 convolutions see 1x1 or 2x2 inputs, which the
    # CPU's `best` preset compiles a second time (its fallback, xla_stack.FALLBACKS: twice the
    # compile time of a test; the fallback has its own tests).
    tiny=({"block": "residual", "blocks": 1, "filters": 4, "image": 96, "output": 4, "batch": 2},
          {"block": "bottleneck", "blocks": 1, "filters": 4, "image": 96, "output": 4, "batch": 2}),
    display="CNN",
    marker="s",
))
