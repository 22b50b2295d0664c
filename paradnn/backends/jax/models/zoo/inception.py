"""Inception v3 (Szegedy et al. 2016) with its auxiliary classifier, as in torchvision.

Every conv is conv (no bias) + BN (epsilon 1e-3) + ReLU. Stem, three InceptionA (35x35), a
grid reduction, four InceptionC with factorized 7x7 convs (17x17), the auxiliary head on the
last 17x17 map, a second reduction, two InceptionE (8x8), global average pooling and a dense
layer to 1000 classes. 27,161,264 trainable parameters with the auxiliary head (23,834,568
without); 5.7 GMAC per 299 px example as published (5.47 without the taps on padding, as
paradnn counts). The loss is the main cross-entropy plus 0.4 x the
auxiliary one, as in the paper's training setup.

Below 299 px the 17x17 map shrinks; the auxiliary head then pools with a smaller window and
pads its 5x5 conv so that any side >= 75 px works. At 299 px it is torchvision's head exactly.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import IMAGENET_CLASSES, batch_norm, conv, image_classifier, max_pool
from paradnn.families.real import Real

AUX_WEIGHT = 0.4


class ConvBN(nn.Module):
    features: int
    kernel: Sequence[int] | int
    stride: int = 1
    padding: Any = "SAME"
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        x = conv(self.features, self.kernel, self.stride, self.padding, dtype=self.dtype)(x)
        return nn.relu(batch_norm(train, self.dtype, epsilon=1e-3)(x))


def _avg3(x: jax.Array) -> jax.Array:
    # 3x3 stride-1 average pool padded by 1; padding counts in the average (torchvision default)
    return nn.avg_pool(x, (3, 3), (1, 1), padding=((1, 1), (1, 1)), count_include_pad=True)


class InceptionA(nn.Module):
    pool_features: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        c = lambda f, k: ConvBN(f, k, dtype=self.dtype)  # noqa: E731
        b1 = c(64, 1)(x, train)
        b5 = c(64, 5)(c(48, 1)(x, train), train)
        b3 = c(96, 3)(c(96, 3)(c(64, 1)(x, train), train), train)
        bp = c(self.pool_features, 1)(_avg3(x), train)
        return jnp.concatenate([b1, b5, b3, bp], axis=-1)


class InceptionB(nn.Module):
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        b3 = ConvBN(384, 3, 2, "VALID", dtype=self.dtype)(x, train)
        bd = ConvBN(96, 3, dtype=self.dtype)(ConvBN(64, 1, dtype=self.dtype)(x, train), train)
        bd = ConvBN(96, 3, 2, "VALID", dtype=self.dtype)(bd, train)
        return jnp.concatenate([b3, bd, max_pool(x, 3, 2)], axis=-1)


class InceptionC(nn.Module):
    c7: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        c = lambda f, k: ConvBN(f, k, dtype=self.dtype)  # noqa: E731
        c7 = self.c7
        b1 = c(192, 1)(x, train)
        b7 = c(192, (7, 1))(c(c7, (1, 7))(c(c7, 1)(x, train), train), train)
        bd = c(c7, 1)(x, train)
        for k in ((7, 1), (1, 7), (7, 1)):
            bd = c(c7, k)(bd, train)
        bd = c(192, (1, 7))(bd, train)
        bp = c(192, 1)(_avg3(x), train)
        return jnp.concatenate([b1, b7, bd, bp], axis=-1)


class InceptionD(nn.Module):
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        c = lambda f, k, s=1, p="SAME": ConvBN(f, k, s, p, dtype=self.dtype)  # noqa: E731
        b3 = c(320, 3, 2, "VALID")(c(192, 1)(x, train), train)
        b7 = c(192, (7, 1))(c(192, (1, 7))(c(192, 1)(x, train), train), train)
        b7 = c(192, 3, 2, "VALID")(b7, train)
        return jnp.concatenate([b3, b7, max_pool(x, 3, 2)], axis=-1)


class InceptionE(nn.Module):
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        c = lambda f, k: ConvBN(f, k, dtype=self.dtype)  # noqa: E731
        b1 = c(320, 1)(x, train)
        b3 = c(384, 1)(x, train)
        b3 = jnp.concatenate([c(384, (1, 3))(b3, train), c(384, (3, 1))(b3, train)], axis=-1)
        bd = c(384, 3)(c(448, 1)(x, train), train)
        bd = jnp.concatenate([c(384, (1, 3))(bd, train), c(384, (3, 1))(bd, train)], axis=-1)
        bp = c(192, 1)(_avg3(x), train)
        return jnp.concatenate([b1, b3, bd, bp], axis=-1)


class AuxHead(nn.Module):
    classes: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        window = min(5, x.shape[1])
        x = nn.avg_pool(x, (window, window), (3, 3))
        x = ConvBN(128, 1, dtype=self.dtype)(x, train)
        x = ConvBN(768, 5, padding="VALID" if x.shape[1] >= 5 else "SAME", dtype=self.dtype)(x, train)
        return nn.Dense(self.classes, dtype=self.dtype)(jnp.mean(x, axis=(1, 2)))


class InceptionV3(nn.Module):
    """Returns ``(logits, aux_logits)``; the auxiliary head runs in every mode so that the
    parameters exist whichever mode initializes them."""

    classes: int = IMAGENET_CLASSES
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> tuple[jax.Array, jax.Array]:
        c = lambda f, k, s=1, p="SAME": ConvBN(f, k, s, p, dtype=self.dtype)  # noqa: E731
        x = x.astype(self.dtype)
        x = c(32, 3, 2, "VALID")(x, train)
        x = c(32, 3, 1, "VALID")(x, train)
        x = max_pool(c(64, 3)(x, train), 3, 2)
        x = c(80, 1)(x, train)
        x = max_pool(c(192, 3, 1, "VALID")(x, train), 3, 2)
        for pool_features in (32, 64, 64):
            x = InceptionA(pool_features, dtype=self.dtype)(x, train)
        x = InceptionB(dtype=self.dtype)(x, train)
        for c7 in (128, 160, 160, 192):
            x = InceptionC(c7, dtype=self.dtype)(x, train)
        aux = AuxHead(self.classes, dtype=self.dtype)(x, train)
        x = InceptionD(dtype=self.dtype)(x, train)
        x = InceptionE(dtype=self.dtype)(x, train)
        x = InceptionE(dtype=self.dtype)(x, train)
        return nn.Dense(self.classes, dtype=self.dtype)(jnp.mean(x, axis=(1, 2))), aux


def loss(outputs: tuple[jax.Array, jax.Array], batch: dict[str, jax.Array]) -> jax.Array:
    logits, aux = outputs
    return softmax_xent(logits, batch["labels"]) + AUX_WEIGHT * softmax_xent(aux, batch["labels"])


def build(spec: Real, dtype: str) -> ModelDef:
    return image_classifier(spec, dtype, lambda d: InceptionV3(dtype=d), default_image=299, min_image=75, optimizer="rmsprop", loss=loss)


register(Entry(name="inception_v3", factory=build))
