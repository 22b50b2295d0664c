"""VGG-16 (Simonyan and Zisserman 2015), configuration D, as in torchvision (no batch norm).

Thirteen 3x3 convs with biases in five groups (64, 128, 256, 512, 512), each group ended by a
2x2 max-pool, an adaptive average pool to 7x7 (the identity at 224 px), and three dense layers
(4096, 4096, 1000). 138,357,544 trainable parameters; 15.5 GMAC per 224 px example as published
(14.97 without the taps on padding, as paradnn counts).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import IMAGENET_CLASSES, adaptive_avg_pool, conv, image_classifier, max_pool
from paradnn.families.real import Real

GROUPS = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))  # (channels, convs)


class VGG16(nn.Module):
    classes: int = IMAGENET_CLASSES
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        x = x.astype(self.dtype)
        for channels, convs in GROUPS:
            for _ in range(convs):
                x = nn.relu(conv(channels, 3, 1, 1, use_bias=True, dtype=self.dtype)(x))
            x = max_pool(x, 2, 2)
        x = adaptive_avg_pool(x, 7).reshape(x.shape[0], -1)
        x = nn.relu(nn.Dense(4096, dtype=self.dtype)(x))
        x = nn.relu(nn.Dense(4096, dtype=self.dtype)(x))
        return nn.Dense(self.classes, dtype=self.dtype)(x)


def build(spec: Real, dtype: str) -> ModelDef:
    return image_classifier(spec, dtype, lambda d: VGG16(dtype=d), min_image=32)  # five 2x2 pools


register(Entry(name="vgg16", factory=build))
