"""AlexNet, single-tower variant (Krizhevsky 2014, "One weird trick"), as in torchvision.

Convs 11x11/4 (64), 5x5 (192), 3x3 (384, 256, 256) with biases and 3x3/2 max-pools, an
adaptive average pool to 6x6, then dense 9216 -> 4096 -> 4096 -> 1000. 61,100,840 trainable
parameters; 0.72 GMAC per 224 px example as published (0.66 without the taps on padding, as paradnn
counts).
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


class AlexNet(nn.Module):
    classes: int = IMAGENET_CLASSES
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        x = x.astype(self.dtype)
        x = max_pool(nn.relu(conv(64, 11, 4, 2, use_bias=True, dtype=self.dtype)(x)), 3, 2)
        x = max_pool(nn.relu(conv(192, 5, 1, 2, use_bias=True, dtype=self.dtype)(x)), 3, 2)
        x = nn.relu(conv(384, 3, 1, 1, use_bias=True, dtype=self.dtype)(x))
        x = nn.relu(conv(256, 3, 1, 1, use_bias=True, dtype=self.dtype)(x))
        x = max_pool(nn.relu(conv(256, 3, 1, 1, use_bias=True, dtype=self.dtype)(x)), 3, 2)
        x = adaptive_avg_pool(x, 6).reshape(x.shape[0], -1)
        x = nn.relu(nn.Dense(4096, dtype=self.dtype)(x))
        x = nn.relu(nn.Dense(4096, dtype=self.dtype)(x))
        return nn.Dense(self.classes, dtype=self.dtype)(x)


def build(spec: Real, dtype: str) -> ModelDef:
    return image_classifier(spec, dtype, lambda d: AlexNet(dtype=d), min_image=63)  # the smallest side that survives the three 3x3/2 pools


register(Entry(name="alexnet", factory=build))
