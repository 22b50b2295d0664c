"""SqueezeNet 1.0 (Iandola et al. 2016), as in torchvision; version 1.0 because the TPU
reference model the ParaDnn study ran is 1.0 (96-filter 7x7/2 first conv).

Conv 7x7/2 (96), eight fire modules (1x1 squeeze, then 1x1 and 3x3 expands concatenated),
3x3/2 max-pools with ceil rounding, a final 1x1 conv to the classes, ReLU and global average
pooling. Convs have biases; no batch norm. 1,248,424 trainable parameters; 0.82 GMAC per 224 px
example as published (0.80 without the taps on padding, as paradnn counts).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import IMAGENET_CLASSES, conv, image_classifier, max_pool
from paradnn.families.real import Real

# (squeeze, expand) channels of fire2..fire9; a max-pool follows fire4 and fire8.
FIRES = ((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192), (64, 256), (64, 256))
POOL_AFTER = (2, 6)  # indices into FIRES


class Fire(nn.Module):
    squeeze: int
    expand: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        s = nn.relu(conv(self.squeeze, 1, padding=0, use_bias=True, dtype=self.dtype)(x))
        e1 = nn.relu(conv(self.expand, 1, padding=0, use_bias=True, dtype=self.dtype)(s))
        e3 = nn.relu(conv(self.expand, 3, 1, 1, use_bias=True, dtype=self.dtype)(s))
        return jnp.concatenate([e1, e3], axis=-1)


class SqueezeNet(nn.Module):
    classes: int = IMAGENET_CLASSES
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        x = x.astype(self.dtype)
        x = max_pool(nn.relu(conv(96, 7, 2, 0, use_bias=True, dtype=self.dtype)(x)), 3, 2, ceil_mode=True)
        for i, (squeeze, expand) in enumerate(FIRES):
            x = Fire(squeeze, expand, dtype=self.dtype)(x)
            if i in POOL_AFTER:
                x = max_pool(x, 3, 2, ceil_mode=True)
        x = nn.relu(conv(self.classes, 1, padding=0, use_bias=True, dtype=self.dtype)(x))
        return jnp.mean(x, axis=(1, 2))


def build(spec: Real, dtype: str) -> ModelDef:
    return image_classifier(spec, dtype, lambda d: SqueezeNet(dtype=d), min_image=35)


register(Entry(name="squeezenet", factory=build))
