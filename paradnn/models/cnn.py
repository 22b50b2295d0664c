"""ParaDnn CNN: ResNet v1 (post-activation) with residual or bottleneck blocks.

Channels-last. Stem 7x7/2 conv, BN, ReLU, 3x3/2 max-pool; four groups with filters x1, x2, x4,
x8 and strides 1, 2, 2, 2; the first block of each group has a 1x1 projection shortcut; the last
BN of each block starts with gamma = 0; global average pool (not the original's fixed 7x7 pool,
which fails below 193 px) and Dense(output). Convs have no bias; BN momentum 0.9, epsilon 1e-5.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Iterator

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.models.base import ModelDef, softmax_xent
from paradnn.specs import CNN

GROUP_WIDTH = (1, 2, 4, 8)
GROUP_STRIDE = (1, 2, 2, 2)


class Block(nn.Module):
    filters: int
    strides: int
    bottleneck: bool
    project: bool
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        conv = partial(nn.Conv, use_bias=False, dtype=self.dtype, padding="SAME")
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5,
                       dtype=self.dtype)
        out_ch = self.filters * 4 if self.bottleneck else self.filters
        shortcut = x
        if self.project:
            shortcut = norm()(conv(out_ch, (1, 1), (self.strides, self.strides))(x))
        if self.bottleneck:
            y = nn.relu(norm()(conv(self.filters, (1, 1))(x)))
            y = nn.relu(norm()(conv(self.filters, (3, 3), (self.strides, self.strides))(y)))
            y = norm(scale_init=nn.initializers.zeros)(conv(out_ch, (1, 1))(y))
        else:
            y = nn.relu(norm()(conv(self.filters, (3, 3), (self.strides, self.strides))(x)))
            y = norm(scale_init=nn.initializers.zeros)(conv(self.filters, (3, 3))(y))
        return nn.relu(y + shortcut)


class ResNetV1(nn.Module):
    block: str
    blocks: int
    filters: int
    output: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        x = nn.Conv(self.filters, (7, 7), (2, 2), padding="SAME", use_bias=False, dtype=self.dtype)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5, dtype=self.dtype)(x)
        x = nn.max_pool(nn.relu(x), (3, 3), (2, 2), padding="SAME")
        for width, stride in zip(GROUP_WIDTH, GROUP_STRIDE):
            for i in range(self.blocks):
                x = Block(self.filters * width, stride if i == 0 else 1,
                          self.block == "bottleneck", project=(i == 0), dtype=self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.output, dtype=self.dtype)(x)


def valid_taps(size: int, kernel: int, stride: int) -> int:
    """Kernel taps that land inside the input, summed over the output positions of one
    dimension of a SAME-padded convolution (taps on padding multiply zeros: XLA skips them)."""
    out = math.ceil(size / stride)
    pad_lo = max((out - 1) * stride + kernel - size, 0) // 2
    return sum(
        min(kernel, size + pad_lo - i * stride) - max(0, pad_lo - i * stride) for i in range(out)
    )


def _convs(spec: CNN) -> Iterator[tuple[int, int, int, int, int, bool]]:
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
    for k, cin, cout, *_ in _convs(spec):
        total += k * k * cin * cout + 2 * cout
    return total + final_channels(spec) * spec.output + spec.output


def train_flops_per_example(spec: CNN) -> float:
    """Conv and Dense FLOPs of one training step per example: 3x forward less the stem's data
    gradient. Only kernel taps inside the image count (padding contributes no work)."""
    fwd = stem = 0.0
    for k, cin, cout, side, stride, is_stem in _convs(spec):
        flops = 2.0 * valid_taps(side, k, stride) ** 2 * cin * cout
        fwd += flops
        stem += flops if is_stem else 0.0
    fwd += 2.0 * final_channels(spec) * spec.output
    return 3.0 * fwd - stem


def build(spec: CNN, dtype: str) -> ModelDef:
    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        kx, ky = jax.random.split(key)
        x = jax.random.uniform(kx, (batch, spec.image, spec.image, 3), jnp.float32).astype(dtype)
        y = jax.random.randint(ky, (batch,), 0, spec.output)
        return {"inputs": x, "labels": y}

    return ModelDef(
        name="cnn",
        module=ResNetV1(spec.block, spec.blocks, spec.filters, spec.output, dtype=jnp.dtype(dtype)),
        make_batch=make_batch,
        loss=lambda logits, batch: softmax_xent(logits, batch["labels"]),
        train_flops_per_example=train_flops_per_example(spec),
        tags={"kind": "generated"},
    )
