"""ParaDnn CNN: ResNet v1 (post-activation) with residual or bottleneck blocks.

Channels-last. Stem 7x7/2 conv, BN, ReLU, 3x3/2 max-pool; four groups with filters x1, x2, x4,
x8 and strides 1, 2, 2, 2; the first block of each group has a 1x1 projection shortcut; the last
BN of each block starts with gamma = 0; global average pool (not the original's fixed 7x7 pool,
which fails below 193 px) and Dense(output). Convs have no bias; BN momentum 0.9, epsilon 1e-5.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.families.cnn import GROUP_STRIDE, GROUP_WIDTH, train_flops_per_example
from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.backends.jax.models.pooling import max_pool
from paradnn.families.cnn import CNN



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
        x = max_pool(nn.relu(x), (3, 3), (2, 2), padding="SAME")
        for width, stride in zip(GROUP_WIDTH, GROUP_STRIDE):
            for i in range(self.blocks):
                x = Block(self.filters * width, stride if i == 0 else 1,
                          self.block == "bottleneck", project=(i == 0), dtype=self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.output, dtype=self.dtype)(x)


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
