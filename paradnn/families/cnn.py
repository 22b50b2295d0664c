"""The ParaDnn CNN family (ResNet v1): spec, analytic counts, ranges (no framework imported).

Every framework builds the same network: stem 7x7/2 conv, BN, ReLU, 3x3/2 max-pool; four
groups with filters x1, x2, x4, x8 and strides 1, 2, 2, 2; the first block of each group has a
1x1 projection shortcut; global average pool and Dense(output); convs without bias.
"""

from __future__ import annotations

import math
from typing import Iterator

from paradnn.families import Axis, Family, register
from paradnn.grids import geometric, linear
from paradnn.specs import CNN, CNN_BLOCKS

GROUP_WIDTH = (1, 2, 4, 8)
GROUP_STRIDE = (1, 2, 2, 2)


def valid_taps(size: int, kernel: int, stride: int) -> int:
    """Kernel taps that land inside the input, summed over the output positions of one
    dimension of a SAME-padded convolution (taps on padding multiply zeros: XLA skips them)."""
    out = math.ceil(size / stride)
    pad_lo = max((out - 1) * stride + kernel - size, 0) // 2
    return sum(
        min(kernel, size + pad_lo - i * stride) - max(0, pad_lo - i * stride) for i in range(out)
    )


def convs(spec: CNN) -> Iterator[tuple[int, int, int, int, int, bool]]:
    """Every conv as (kernel side, in channels, out channels, input side, stride, is_stem)."""
    yield 7, 3, spec.filters, spec.image, 2, True
    side = math.ceil(math.ceil(spec.image / 2) / 2)  # stem stride 2, then max-pool stride 2
    ch = spec.filters
    for width, stride in zip(GROUP_WIDTH, GROUP_STRIDE):
        f = spec.filters * width
        out_ch = 4 * f if spec.block == "bottleneck" else f
        for i in range(spec.blocks):
            s = stride if i == 0 else 1
            out_side = math.ceil(side / s)
            if i == 0:
                yield 1, ch, out_ch, side, s, False
            if spec.block == "bottleneck":
                yield 1, ch, f, side, 1, False
                yield 3, f, f, side, s, False
                yield 1, f, out_ch, out_side, 1, False
            else:
                yield 3, ch, f, side, s, False
                yield 3, f, f, out_side, 1, False
            ch, side = out_ch, out_side


def final_channels(spec: CNN) -> int:
    return spec.filters * 8 * (4 if spec.block == "bottleneck" else 1)


def param_count(spec: CNN) -> int:
    """Conv kernels + BN scale and offset (2 per channel) + the Dense head's weights and bias."""
    total = 0
    for k, cin, cout, *_ in convs(spec):
        total += k * k * cin * cout + 2 * cout
    return total + final_channels(spec) * spec.output + spec.output


def train_flops_per_example(spec: CNN) -> float:
    """Conv and Dense FLOPs of one training step per example: 3x forward less the stem's data
    gradient. Only kernel taps inside the image count (padding contributes no work)."""
    fwd = stem = 0.0
    for k, cin, cout, side, stride, is_stem in convs(spec):
        flops = 2.0 * valid_taps(side, k, stride) ** 2 * cin * cout
        fwd += flops
        stem += flops if is_stem else 0.0
    fwd += 2.0 * final_channels(spec) * spec.output
    return 3.0 * fwd - stem


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
    builders={"jax": "paradnn.backends.jax.models.cnn:build", "tensorflow": "paradnn.backends.tensorflow.models.generated:build_cnn",
              "torch": "paradnn.backends.torch.models.generated:build_cnn"},
    param_count=param_count,
    train_flops_per_example=train_flops_per_example,
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
    tiny=({"block": "residual", "blocks": 1, "filters": 4, "image": 32, "output": 4, "batch": 2},
          {"block": "bottleneck", "blocks": 1, "filters": 4, "image": 32, "output": 4, "batch": 2}),
))
