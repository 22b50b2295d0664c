"""Keras builds of zoo models, layer for layer the JAX definitions in ``paradnn.backends.jax.models.zoo``.

``keras.applications`` is not used: its layouts differ from the torchvision layouts the JAX
zoo follows (ResNet50 has conv biases and a post-1.5 stride placement, DenseNet121 and
InceptionV3 differ in BN and head details), so trainable parameter counts would not match.
The builds here reproduce the JAX models exactly: PyTorch-style integer padding as explicit
zero padding (max-pools pad with -inf, so padding never wins), the same adaptive average pool,
Inception v3's auxiliary head and its 0.4-weighted loss. Tests compare every model's trainable
parameters with ``paradnn.backends.jax.models.param_count(Real(name))``.
"""

from __future__ import annotations

from typing import Any, Callable

import keras
import tensorflow as tf

from paradnn.errors import SpecError
from paradnn.families.real import ZOO
from paradnn.backends.tensorflow.models import TFModel, compute_dtype, policy, softmax_xent
from paradnn.families.real import Real

IMAGENET_CLASSES = 1000
AUX_WEIGHT = 0.4  # Inception v3's auxiliary loss weight


# ---------------------------------------------------------------------------- shared layers

class MaxPoolTorch(keras.layers.Layer):
    """Max pooling with PyTorch's output size (floor mode): ``padding`` pixels of -inf on each
    side, a VALID window over the padded map."""

    def __init__(self, window: int, stride: int, padding: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        self.window, self.stride, self.padding = window, stride, padding

    def call(self, x):
        p = self.padding
        if p:
            x = tf.pad(x, ((0, 0), (p, p), (p, p), (0, 0)), constant_values=float("-inf"))
        return tf.nn.max_pool2d(x, self.window, self.stride, "VALID")

    def compute_output_shape(self, shape):
        side = lambda s: None if s is None else (s + 2 * self.padding - self.window) // self.stride + 1  # noqa: E731
        return (shape[0], side(shape[1]), side(shape[2]), shape[3])


class PaddedConv2D(keras.layers.Conv2D):
    """Conv2D with PyTorch's symmetric integer padding as the convolution's own padding, as the
    JAX models write it (a separate zero-pad op would make XLA count the taps on the padding as
    work, and materialize the padded map)."""

    def __init__(self, filters: int, kernel_size: Any, strides: int, pad: int, **kw: Any) -> None:
        super().__init__(filters, kernel_size, strides, padding="valid", **kw)
        self.pad = pad

    def convolution_op(self, inputs, kernel):
        p = self.pad
        return tf.nn.conv2d(inputs, kernel, self.strides, [[0, 0], [p, p], [p, p], [0, 0]])

    def compute_output_shape(self, input_shape):
        grow = lambda s: None if s is None else s + 2 * self.pad  # noqa: E731
        n, h, w, c = input_shape
        return super().compute_output_shape((n, grow(h), grow(w), c))


class AdaptiveAvgPool(keras.layers.Layer):
    """PyTorch's AdaptiveAvgPool2d to ``out x out`` (bins may overlap on small inputs)."""

    def __init__(self, out: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.out = out

    def call(self, x):
        h, w = int(x.shape[1]), int(x.shape[2])
        n = self.out
        if (h, w) == (n, n):
            return x
        if h % n == 0 and w % n == 0:
            return tf.nn.avg_pool2d(x, (h // n, w // n), (h // n, w // n), "VALID")
        rows = []
        for i in range(n):
            r0, r1 = (i * h) // n, -((-(i + 1) * h) // n)
            cols = [tf.reduce_mean(x[:, r0:r1, (j * w) // n:-((-(j + 1) * w) // n), :], axis=(1, 2))
                    for j in range(n)]
            rows.append(tf.stack(cols, axis=1))
        return tf.stack(rows, axis=1)

    def compute_output_shape(self, shape):
        return (shape[0], self.out, self.out, shape[3])


class _Ctx:
    """Layer factories bound to one dtype policy."""

    def __init__(self, dtype: str) -> None:
        self.pol = policy(dtype)

    def conv(self, x, filters: int, kernel, stride: int = 1, padding: Any = "same", bias: bool = False,
             groups: int = 1):
        """A conv; an integer ``padding`` pads that many zeros on every side (PyTorch style)."""
        if isinstance(padding, int):
            if padding:
                return PaddedConv2D(filters, kernel, stride, padding, use_bias=bias, dtype=self.pol)(x)
            padding = "valid"
        if groups > 1:  # depthwise (groups == channels): MobileNet
            return keras.layers.DepthwiseConv2D(kernel, stride, padding=padding.lower(), use_bias=bias,
                                                dtype=self.pol)(x)
        return keras.layers.Conv2D(filters, kernel, stride, padding=padding.lower(), use_bias=bias,
                                   dtype=self.pol)(x)

    def bn(self, x, momentum: float = 0.9, epsilon: float = 1e-5, zero_gamma: bool = False):
        return keras.layers.BatchNormalization(momentum=momentum, epsilon=epsilon, dtype=self.pol,
                                               gamma_initializer="zeros" if zero_gamma else "ones")(x)

    def relu(self, x, max_value: float | None = None):
        return keras.layers.ReLU(max_value, dtype=self.pol)(x)

    def dense(self, x, units: int):
        return keras.layers.Dense(units, dtype=self.pol)(x)

    def gap(self, x):
        return keras.layers.GlobalAveragePooling2D(dtype=self.pol)(x)

    def max_pool(self, x, window: int, stride: int, padding: int = 0):
        return MaxPoolTorch(window, stride, padding, dtype=self.pol)(x)

    def concat(self, xs):
        return keras.layers.Concatenate(axis=-1, dtype=self.pol)(xs)

    def add(self, xs):
        return keras.layers.Add(dtype=self.pol)(xs)


# ---------------------------------------------------------------------------- models

RESNET_DEPTHS: dict[str, tuple[str, tuple[int, ...]]] = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
    "resnet152": ("bottleneck", (3, 8, 36, 3)),
}


def _resnet(c: _Ctx, x, name: str):
    """ResNet v1.5 (torchvision): stride on the 3x3 conv, projection where the shape changes."""
    block, blocks = RESNET_DEPTHS[name]
    x = c.relu(c.bn(c.conv(x, 64, 7, 2, 3)))
    x = c.max_pool(x, 3, 2, 1)
    for stage, (width, n) in enumerate(zip((64, 128, 256, 512), blocks)):
        for i in range(n):
            stride = 2 if (stage > 0 and i == 0) else 1
            out_ch = width * (4 if block == "bottleneck" else 1)
            shortcut = x
            if stride != 1 or x.shape[-1] != out_ch:
                shortcut = c.bn(c.conv(x, out_ch, 1, stride, 0))
            if block == "bottleneck":
                y = c.relu(c.bn(c.conv(x, width, 1, 1, 0)))
                y = c.relu(c.bn(c.conv(y, width, 3, stride, 1)))
                y = c.conv(y, out_ch, 1, 1, 0)
            else:
                y = c.relu(c.bn(c.conv(x, width, 3, stride, 1)))
                y = c.conv(y, out_ch, 3, 1, 1)
            x = c.relu(c.add([c.bn(y, zero_gamma=True), shortcut]))
    return c.dense(c.gap(x), IMAGENET_CLASSES)


def _densenet121(c: _Ctx, x, name: str):
    growth, layers = 32, (6, 12, 24, 16)

    def bn_relu(y):
        return c.relu(c.bn(y))

    x = c.max_pool(bn_relu(c.conv(x, 64, 7, 2, 3)), 3, 2, 1)
    for block, n in enumerate(layers):
        for _ in range(n):
            y = c.conv(bn_relu(x), 4 * growth, 1, 1, 0)
            y = c.conv(bn_relu(y), growth, 3, 1, 1)
            x = c.concat([x, y])
        if block < len(layers) - 1:
            x = c.conv(bn_relu(x), x.shape[-1] // 2, 1, 1, 0)
            x = keras.layers.AveragePooling2D(2, 2, dtype=c.pol)(x)
    return c.dense(c.gap(bn_relu(x)), IMAGENET_CLASSES)


MOBILENET_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))


def _mobilenet(c: _Ctx, x, name: str):
    def bn_relu6(y):
        return c.relu(c.bn(y, momentum=0.997, epsilon=1e-3), max_value=6.0)

    x = bn_relu6(c.conv(x, 32, 3, 2))
    for channels, stride in MOBILENET_BLOCKS:
        x = bn_relu6(c.conv(x, x.shape[-1], 3, stride, groups=x.shape[-1]))
        x = bn_relu6(c.conv(x, channels, 1))
    return c.dense(c.gap(x), IMAGENET_CLASSES)


def _vgg16(c: _Ctx, x, name: str):
    for channels, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            x = c.relu(c.conv(x, channels, 3, 1, 1, bias=True))
        x = keras.layers.MaxPooling2D(2, 2, dtype=c.pol)(x)
    x = keras.layers.Flatten(dtype=c.pol)(AdaptiveAvgPool(7, dtype=c.pol)(x))
    x = c.relu(c.dense(x, 4096))
    x = c.relu(c.dense(x, 4096))
    return c.dense(x, IMAGENET_CLASSES)


def _inception_v3(c: _Ctx, x, name: str):
    def cbr(y, f, k, s=1, p="same"):
        return c.relu(c.bn(c.conv(y, f, k, s, p), epsilon=1e-3))

    def avg3(y):  # 3x3/1 average pool padded by 1, the padding counted (torchvision)
        return keras.layers.AveragePooling2D(3, 1, dtype=c.pol)(keras.layers.ZeroPadding2D(1, dtype=c.pol)(y))

    def inception_a(y, pool_features):
        b1 = cbr(y, 64, 1)
        b5 = cbr(cbr(y, 48, 1), 64, 5)
        b3 = cbr(cbr(cbr(y, 64, 1), 96, 3), 96, 3)
        return c.concat([b1, b5, b3, cbr(avg3(y), pool_features, 1)])

    def inception_b(y):
        b3 = cbr(y, 384, 3, 2, "valid")
        bd = cbr(cbr(cbr(y, 64, 1), 96, 3), 96, 3, 2, "valid")
        return c.concat([b3, bd, c.max_pool(y, 3, 2)])

    def inception_c(y, c7):
        b1 = cbr(y, 192, 1)
        b7 = cbr(cbr(cbr(y, c7, 1), c7, (1, 7)), 192, (7, 1))
        bd = cbr(y, c7, 1)
        for k in ((7, 1), (1, 7), (7, 1)):
            bd = cbr(bd, c7, k)
        bd = cbr(bd, 192, (1, 7))
        return c.concat([b1, b7, bd, cbr(avg3(y), 192, 1)])

    def inception_d(y):
        b3 = cbr(cbr(y, 192, 1), 320, 3, 2, "valid")
        b7 = cbr(cbr(cbr(y, 192, 1), 192, (1, 7)), 192, (7, 1))
        b7 = cbr(b7, 192, 3, 2, "valid")
        return c.concat([b3, b7, c.max_pool(y, 3, 2)])

    def inception_e(y):
        b1 = cbr(y, 320, 1)
        b3 = cbr(y, 384, 1)
        b3 = c.concat([cbr(b3, 384, (1, 3)), cbr(b3, 384, (3, 1))])
        bd = cbr(cbr(y, 448, 1), 384, 3)
        bd = c.concat([cbr(bd, 384, (1, 3)), cbr(bd, 384, (3, 1))])
        return c.concat([b1, b3, bd, cbr(avg3(y), 192, 1)])

    def aux_head(y):
        window = min(5, y.shape[1])
        y = keras.layers.AveragePooling2D(window, 3, dtype=c.pol)(y)
        y = cbr(y, 128, 1)
        y = cbr(y, 768, 5, p="valid" if y.shape[1] >= 5 else "same")
        return c.dense(c.gap(y), IMAGENET_CLASSES)

    x = cbr(x, 32, 3, 2, "valid")
    x = cbr(x, 32, 3, 1, "valid")
    x = c.max_pool(cbr(x, 64, 3), 3, 2)
    x = cbr(x, 80, 1)
    x = c.max_pool(cbr(x, 192, 3, 1, "valid"), 3, 2)
    for pool_features in (32, 64, 64):
        x = inception_a(x, pool_features)
    x = inception_b(x)
    for c7 in (128, 160, 160, 192):
        x = inception_c(x, c7)
    aux = aux_head(x)
    x = inception_e(inception_e(inception_d(x)))
    return c.dense(c.gap(x), IMAGENET_CLASSES), aux


def _inception_loss(outputs, batch):
    logits, aux = outputs
    return softmax_xent(logits, batch["labels"]) + AUX_WEIGHT * softmax_xent(aux, batch["labels"])


# name -> (network, smallest image side in pixels the layout allows, loss or None)
MODELS: dict[str, tuple[Callable, int, Callable | None]] = {
    **{name: (_resnet, 32, None) for name in RESNET_DEPTHS},
    "densenet121": (_densenet121, 32, None),
    "mobilenet": (_mobilenet, 32, None),
    "vgg16": (_vgg16, 32, None),
    "inception_v3": (_inception_v3, 75, _inception_loss),
}


def build(spec: Real, dtype: str) -> TFModel:
    """A zoo model in Keras for ``spec`` (its image side in pixels, the model's default when 0),
    1000 classes, standard-normal synthetic images and uniform labels from a fixed seed."""
    if spec.model not in MODELS:
        raise SpecError("model", spec.model, "one of " + ", ".join(sorted(MODELS)) + " with framework tensorflow")
    network, minimum, loss = MODELS[spec.model]
    if spec.length:
        raise SpecError("length", spec.length, f"0 (model {spec.model} takes no sequence)")
    image = spec.image or ZOO[spec.model].default_image
    if image < minimum:
        raise SpecError("image", image, f"an integer >= {minimum} for {spec.model}")
    c = _Ctx(dtype)
    inputs = keras.Input((image, image, 3), dtype=compute_dtype(dtype))
    model = keras.Model(inputs, network(c, inputs, spec.model), name=spec.model)

    def make_batch(seed: int, batch: int) -> dict[str, tf.Tensor]:
        x = tf.random.stateless_normal((batch, image, image, 3), (seed, 1), dtype=tf.float32)
        y = tf.random.stateless_uniform((batch,), (seed, 2), 0, IMAGENET_CLASSES, tf.int32)
        return {"inputs": tf.cast(x, compute_dtype(dtype)), "labels": y}

    return TFModel(spec.model, model, make_batch,
                   loss=loss or (lambda logits, batch: softmax_xent(logits, batch["labels"])),
                   default_optimizer=ZOO[spec.model].default_optimizer,
                   tags={"kind": "real", "task": "image_classification", "image": image})


__all__ = ["MODELS", "build"]
