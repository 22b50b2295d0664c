"""Pieces the zoo's models share: layer presets, pooling variants, synthetic batches, losses.

Every layer computes in the model's ``dtype`` and keeps float32 parameters (Flax's default
``param_dtype``). Dropout is left out of every model: the training-step contract passes no
``dropout`` RNG, and dropout is element-wise work that adds no matmul or convolution FLOPs.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.errors import SpecError
from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.backends.jax.models import pooling
from paradnn.families.real import Real

IMAGENET_CLASSES = 1000


def batch_norm(train: bool, dtype: Any, momentum: float = 0.9, epsilon: float = 1e-5, **kw: Any) -> nn.BatchNorm:
    """BatchNorm with trainable scale and offset (2 parameters per channel); running statistics
    live in the non-trainable ``batch_stats`` collection."""
    return nn.BatchNorm(use_running_average=not train, momentum=momentum, epsilon=epsilon, dtype=dtype, **kw)


def conv(features: int, kernel: int | tuple[int, int], stride: int = 1, padding: Any = "SAME",
         use_bias: bool = False, dtype: Any = jnp.float32, **kw: Any) -> nn.Conv:
    """A 2-D convolution; an integer ``padding`` pads that many pixels on every side (PyTorch
    style), which keeps output sizes equal to the reference implementations'."""
    k = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
    if isinstance(padding, int):
        padding = ((padding, padding), (padding, padding))
    return nn.Conv(features, k, (stride, stride), padding=padding, use_bias=use_bias, dtype=dtype, **kw)


def max_pool(x: jax.Array, window: int, stride: int, padding: int = 0, ceil_mode: bool = False) -> jax.Array:
    """Max pooling with PyTorch's output size: ``floor`` (or ``ceil``) of
    ``(side + 2*padding - window) / stride`` + 1. Padding never wins a max (it is -inf)."""
    pads = []
    for side in x.shape[1:3]:
        span = side + 2 * padding - window
        out = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
        if ceil_mode and (out - 1) * stride >= side + padding:  # last window must start inside
            out -= 1
        extra = max(0, (out - 1) * stride + window - (side + 2 * padding))
        pads.append((padding, padding + extra))
    return pooling.max_pool(x, (window, window), (stride, stride), padding=pads)


def adaptive_avg_pool(x: jax.Array, out: int) -> jax.Array:
    """PyTorch's AdaptiveAvgPool2d to ``out x out`` (bins may overlap when the input is small):
    the identity when the input already is ``out x out``."""
    h, w = x.shape[1:3]
    if (h, w) == (out, out):
        return x
    if h % out == 0 and w % out == 0:
        return nn.avg_pool(x, (h // out, w // out), (h // out, w // out))
    rows = []
    for i in range(out):
        r0, r1 = (i * h) // out, -((-(i + 1) * h) // out)
        cols = []
        for j in range(out):
            c0, c1 = (j * w) // out, -((-(j + 1) * w) // out)
            cols.append(jnp.mean(x[:, r0:r1, c0:c1, :], axis=(1, 2)))
        rows.append(jnp.stack(cols, axis=1))
    return jnp.stack(rows, axis=1)


def image_size(spec: Real, default: int, minimum: int) -> int:
    """The spec's image side in pixels (its default when 0), checked against the model's minimum."""
    image = spec.image or default
    if image < minimum:
        raise SpecError("image", image, f"an integer >= {minimum} for {spec.model}")
    return image


def sequence_length(spec: Real, default: int, minimum: int = 1) -> int:
    """The spec's sequence length (its default when 0), checked against the model's minimum."""
    length = spec.length or default
    if length < minimum:
        raise SpecError("length", length, f"an integer >= {minimum} for {spec.model}")
    return length


def no_image(spec: Real) -> None:
    if spec.image:
        raise SpecError("image", spec.image, f"0 (model {spec.model} takes no image)")


def no_length(spec: Real) -> None:
    if spec.length:
        raise SpecError("length", spec.length, f"0 (model {spec.model} takes no sequence)")


def image_batch(image: int, classes: int, dtype: str) -> Callable[[jax.Array, int], dict[str, jax.Array]]:
    """Synthetic image classification: standard-normal images (NHWC, in the compute dtype) and
    uniform integer labels, drawn from ``key`` on the device."""

    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        kx, ky = jax.random.split(key)
        x = jax.random.normal(kx, (batch, image, image, 3), jnp.float32).astype(dtype)
        return {"inputs": x, "labels": jax.random.randint(ky, (batch,), 0, classes)}

    return make_batch


def classification_loss(logits: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    return softmax_xent(logits, batch["labels"])


def real_tags(task: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "real", "task": task, **extra}


def image_classifier(spec: Real, dtype: str, make_module: Callable[[Any], nn.Module], *,
                     default_image: int = 224, min_image: int = 32, optimizer: str = "momentum",
                     loss: Callable | None = None) -> ModelDef:
    """The ModelDef of an ImageNet classifier: square RGB images of ``spec.image`` pixels
    (``default_image`` when 0, at least ``min_image``), 1000 classes, softmax cross-entropy
    unless ``loss`` says otherwise. ``make_module(compute_dtype)`` builds the network."""
    no_length(spec)
    image = image_size(spec, default_image, min_image)
    return ModelDef(
        name=spec.model,
        module=make_module(jnp.dtype(dtype)),
        make_batch=image_batch(image, IMAGENET_CLASSES, dtype),
        loss=loss or classification_loss,
        default_optimizer=optimizer,
        tags=real_tags("image_classification", image=image),
    )
