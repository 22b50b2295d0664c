"""ResNet-18, -50, -101 and -152 (He et al. 2016) as in torchvision: ResNet v1.5.

Basic blocks (two 3x3 convs) for ResNet-18, bottleneck blocks (1x1, 3x3, 1x1 with 4x width)
for the others, the stride on the 3x3 conv ("v1.5"), a 1x1 strided projection + BN where the
shape changes, no conv biases, BN after every conv. Trainable parameters equal torchvision's:
11,689,512 / 25,557,032 / 44,549,160 / 60,192,808 at 1000 classes.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import IMAGENET_CLASSES, batch_norm, conv, image_classifier, max_pool
from paradnn.families.real import Real

# name -> (block type, blocks per stage)
DEPTHS: dict[str, tuple[str, tuple[int, ...]]] = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
    "resnet152": ("bottleneck", (3, 8, 36, 3)),
}
STAGE_WIDTH = (64, 128, 256, 512)


class Block(nn.Module):
    width: int
    stride: int
    bottleneck: bool
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        out_ch = self.width * (4 if self.bottleneck else 1)
        shortcut = x
        if self.stride != 1 or x.shape[-1] != out_ch:
            shortcut = conv(out_ch, 1, self.stride, padding=0, dtype=self.dtype)(x)
            shortcut = batch_norm(train, self.dtype)(shortcut)
        if self.bottleneck:
            y = nn.relu(batch_norm(train, self.dtype)(conv(self.width, 1, padding=0, dtype=self.dtype)(x)))
            y = nn.relu(batch_norm(train, self.dtype)(conv(self.width, 3, self.stride, 1, dtype=self.dtype)(y)))
            y = conv(out_ch, 1, padding=0, dtype=self.dtype)(y)
        else:
            y = nn.relu(batch_norm(train, self.dtype)(conv(self.width, 3, self.stride, 1, dtype=self.dtype)(x)))
            y = conv(out_ch, 3, 1, 1, dtype=self.dtype)(y)
        # Zero-initialized last BN: each block starts as the identity (Goyal et al. 2017).
        y = batch_norm(train, self.dtype, scale_init=nn.initializers.zeros)(y)
        return nn.relu(y + shortcut)


class Backbone(nn.Module):
    """Stem and four stages; returns the outputs of stages 2-4 (C3, C4, C5) for detection."""

    block: str
    blocks: Sequence[int]
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> list[jax.Array]:
        x = x.astype(self.dtype)
        x = nn.relu(batch_norm(train, self.dtype)(conv(64, 7, 2, 3, dtype=self.dtype)(x)))
        x = max_pool(x, 3, 2, padding=1)
        features = []
        for stage, (width, n) in enumerate(zip(STAGE_WIDTH, self.blocks)):
            for i in range(n):
                stride = 2 if (stage > 0 and i == 0) else 1
                x = Block(width, stride, self.block == "bottleneck", dtype=self.dtype)(x, train)
            features.append(x)
        return features[1:]


class ResNet(nn.Module):
    block: str
    blocks: Sequence[int]
    classes: int = IMAGENET_CLASSES
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        c5 = Backbone(self.block, tuple(self.blocks), dtype=self.dtype, name="backbone")(x, train)[-1]
        x = jnp.mean(c5, axis=(1, 2))
        return nn.Dense(self.classes, dtype=self.dtype)(x)


def build(spec: Real, dtype: str) -> ModelDef:
    return image_classifier(spec, dtype, lambda d: ResNet(*DEPTHS[spec.model], dtype=d), min_image=32)  # 32x downsampling


for _name, (_block, _blocks) in DEPTHS.items():
    register(Entry(name=_name, factory=build))
