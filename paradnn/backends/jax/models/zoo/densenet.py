"""DenseNet-121 (Huang et al. 2017), as in torchvision.

Stem 7x7/2 conv (64), BN, ReLU, 3x3/2 max-pool; four dense blocks of 6, 12, 24 and 16 layers
(BN-ReLU-1x1 conv to 4x32, BN-ReLU-3x3 conv to 32, concatenated onto the input), transitions
(BN-ReLU-1x1 conv halving the channels, 2x2 average pool) between them; a final BN, ReLU,
global average pool and a dense layer to 1000 classes. No conv biases. 7,978,856 trainable
parameters; 2.9 GMAC per 224 px example as published (2.78 without the taps on padding, as paradnn
counts).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import IMAGENET_CLASSES, batch_norm, conv, image_classifier, max_pool
from paradnn.families.real import Real

GROWTH = 32
BOTTLENECK = 4  # the 1x1 conv widens to BOTTLENECK * GROWTH channels
LAYERS = (6, 12, 24, 16)


class DenseNet121(nn.Module):
    classes: int = IMAGENET_CLASSES
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        def bn_relu(y):
            return nn.relu(batch_norm(train, self.dtype)(y))

        x = x.astype(self.dtype)
        x = max_pool(bn_relu(conv(64, 7, 2, 3, dtype=self.dtype)(x)), 3, 2, padding=1)
        for block, layers in enumerate(LAYERS):
            for _ in range(layers):
                y = conv(BOTTLENECK * GROWTH, 1, padding=0, dtype=self.dtype)(bn_relu(x))
                y = conv(GROWTH, 3, 1, 1, dtype=self.dtype)(bn_relu(y))
                x = jnp.concatenate([x, y], axis=-1)
            if block < len(LAYERS) - 1:
                x = conv(x.shape[-1] // 2, 1, padding=0, dtype=self.dtype)(bn_relu(x))
                x = nn.avg_pool(x, (2, 2), (2, 2))
        x = jnp.mean(bn_relu(x), axis=(1, 2))
        return nn.Dense(self.classes, dtype=self.dtype)(x)


def build(spec: Real, dtype: str) -> ModelDef:
    return image_classifier(spec, dtype, lambda d: DenseNet121(dtype=d))


register(Entry(name="densenet121", factory=build))
