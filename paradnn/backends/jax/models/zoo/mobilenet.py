"""MobileNet v1, width 1.0 (Howard et al. 2017).

A 3x3/2 conv (32) and thirteen depthwise-separable blocks (3x3 depthwise, 1x1 pointwise), each
conv followed by BN and ReLU6, global average pooling and a dense layer to 1000 classes. No conv
biases. 4,231,976 trainable parameters (BN scale and offset counted, running statistics not);
0.57 GMAC per 224 px example as published (0.568 without the taps on padding, as paradnn counts).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models import depthwise
from paradnn.backends.jax.models.base import ModelDef
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import IMAGENET_CLASSES, batch_norm, conv, image_classifier
from paradnn.families.real import Real

# (pointwise channels, depthwise stride) of the thirteen separable blocks
BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
          (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))


class MobileNetV1(nn.Module):
    classes: int = IMAGENET_CLASSES
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        def bn_relu6(y):
            return jnp.clip(batch_norm(train, self.dtype, momentum=0.997, epsilon=1e-3)(y), 0, 6)

        x = x.astype(self.dtype)
        x = bn_relu6(conv(32, 3, 2, dtype=self.dtype)(x))
        for channels, stride in BLOCKS:
            # Its weight gradient from the useful taps on a CPU (models/depthwise.py): XLA:CPU's
            # own is a dense C x C convolution, up to 60x slower on the later layers.
            dw = conv(x.shape[-1], 3, stride, feature_group_count=x.shape[-1], dtype=self.dtype,
                      conv_general_dilated=depthwise.conv_general_dilated)
            x = bn_relu6(dw(x))
            x = bn_relu6(conv(channels, 1, dtype=self.dtype)(x))
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.classes, dtype=self.dtype)(x)


def build(spec: Real, dtype: str) -> ModelDef:
    return image_classifier(spec, dtype, lambda d: MobileNetV1(dtype=d), optimizer="rmsprop")


register(Entry(name="mobilenet", factory=build))
