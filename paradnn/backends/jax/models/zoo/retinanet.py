"""RetinaNet (Lin et al. 2017) with a ResNet-50 FPN backbone, 640x640 input, COCO's 80 classes.

Backbone: ResNet-50 v1.5 (``resnet.Backbone``) giving C3-C5. FPN: 1x1 lateral convs and
nearest-neighbour top-down sums give P3-P5 (each smoothed by a 3x3 conv); P6 is a 3x3/2 conv on
C5 and P7 a 3x3/2 conv on ReLU(P6), as in the paper, all 256 channels with biases. Heads shared
over the five levels: a classification subnet (four 3x3 convs + ReLU, then a 3x3 conv to
9 anchors x 80 classes, bias initialised to the prior 0.01) and a box subnet (four 3x3 convs,
then 9 x 4). About 38.0 M trainable parameters (37,968,692).

Loss: the paper's sigmoid focal loss (alpha 0.25, gamma 2) over every anchor plus smooth-L1
(beta 0.1) box regression on the positive anchors, both normalised by the number of positive
anchors. The targets are synthetic: each anchor is positive with probability 1/500 (about 150
positives per 640 px image, COCO-like) with a uniform class and standard-normal box deltas;
the rest are background. There is no anchor matching: it is data preparation, not training.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax.models.base import ModelDef
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import conv, image_size, no_length, real_tags
from paradnn.backends.jax.models.zoo.resnet import DEPTHS, Backbone
from paradnn.families.real import Real

CLASSES = 80
ANCHORS = 9  # 3 scales x 3 aspect ratios per location
FPN_CHANNELS = 256
LEVELS = (3, 4, 5, 6, 7)
POSITIVE_FRACTION = 1 / 500
PRIOR = 0.01
FOCAL_ALPHA, FOCAL_GAMMA, SMOOTH_L1_BETA = 0.25, 2.0, 0.1


def _upsample_to(x: jax.Array, like: jax.Array) -> jax.Array:
    # nearest x2, cropped: odd sides round up at every stride-2 layer, so 2x covers ``like``
    x = jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)
    return x[:, : like.shape[1], : like.shape[2], :]


def anchor_count(image: int) -> int:
    """Anchors per image: 9 per location of P3..P7 (strides 8..128, sides rounded up)."""
    total, side = 0, image
    for level in range(1, max(LEVELS) + 1):
        side = math.ceil(side / 2)
        if level in LEVELS:
            total += side * side * ANCHORS
    return total


class Head(nn.Module):
    outputs: int
    bias_init: Any = nn.initializers.zeros
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, levels: list[jax.Array]) -> jax.Array:
        convs = [conv(FPN_CHANNELS, 3, 1, 1, use_bias=True, dtype=self.dtype,
                      kernel_init=nn.initializers.normal(0.01)) for _ in range(4)]
        final = conv(self.outputs, 3, 1, 1, use_bias=True, dtype=self.dtype,
                     kernel_init=nn.initializers.normal(0.01), bias_init=self.bias_init)
        out = []
        for x in levels:  # the same weights on every level
            for layer in convs:
                x = nn.relu(layer(x))
            x = final(x)
            out.append(x.reshape(x.shape[0], -1, self.outputs // ANCHORS))
        return jnp.concatenate(out, axis=1)


class RetinaNet(nn.Module):
    classes: int = CLASSES
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> tuple[jax.Array, jax.Array]:
        """Returns ``(class_logits [B, anchors, classes], box_deltas [B, anchors, 4])``."""
        block, blocks = DEPTHS["resnet50"]
        c3, c4, c5 = Backbone(block, blocks, dtype=self.dtype, name="backbone")(x, train)
        lateral = [conv(FPN_CHANNELS, 1, padding=0, use_bias=True, dtype=self.dtype)(c) for c in (c3, c4, c5)]
        p5 = lateral[2]
        p4 = lateral[1] + _upsample_to(p5, lateral[1])
        p3 = lateral[0] + _upsample_to(p4, lateral[0])
        p3, p4, p5 = (conv(FPN_CHANNELS, 3, 1, 1, use_bias=True, dtype=self.dtype)(p) for p in (p3, p4, p5))
        p6 = conv(FPN_CHANNELS, 3, 2, 1, use_bias=True, dtype=self.dtype)(c5)
        p7 = conv(FPN_CHANNELS, 3, 2, 1, use_bias=True, dtype=self.dtype)(nn.relu(p6))
        levels = [p3, p4, p5, p6, p7]
        prior_bias = nn.initializers.constant(-math.log((1 - PRIOR) / PRIOR))
        logits = Head(ANCHORS * self.classes, prior_bias, dtype=self.dtype, name="class_head")(levels)
        boxes = Head(ANCHORS * 4, dtype=self.dtype, name="box_head")(levels)
        return logits, boxes


def loss(outputs: tuple[jax.Array, jax.Array], batch: dict[str, jax.Array]) -> jax.Array:
    """Focal loss + smooth-L1, both per positive anchor, float32."""
    logits, boxes = (o.astype(jnp.float32) for o in outputs)
    labels = batch["labels"]  # [B, anchors], -1 = background
    positive = labels >= 0
    num_pos = jnp.maximum(jnp.sum(positive), 1).astype(jnp.float32)
    targets = jax.nn.one_hot(labels, logits.shape[-1], dtype=jnp.float32)  # -1 -> all zeros
    p = jax.nn.sigmoid(logits)
    ce = jnp.maximum(logits, 0) - logits * targets + jnp.log1p(jnp.exp(-jnp.abs(logits)))
    p_t = p * targets + (1 - p) * (1 - targets)
    alpha_t = FOCAL_ALPHA * targets + (1 - FOCAL_ALPHA) * (1 - targets)
    focal = jnp.sum(alpha_t * (1 - p_t) ** FOCAL_GAMMA * ce) / num_pos
    diff = jnp.abs(boxes - batch["boxes"])
    smooth = jnp.where(diff < SMOOTH_L1_BETA, 0.5 * diff**2 / SMOOTH_L1_BETA, diff - 0.5 * SMOOTH_L1_BETA)
    box = jnp.sum(smooth * positive[..., None]) / num_pos
    return focal + box


def build(spec: Real, dtype: str) -> ModelDef:
    no_length(spec)
    image = image_size(spec, 640, 64)
    anchors = anchor_count(image)

    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        kx, kp, kc, kb = jax.random.split(key, 4)
        x = jax.random.normal(kx, (batch, image, image, 3), jnp.float32).astype(dtype)
        positive = jax.random.uniform(kp, (batch, anchors)) < POSITIVE_FRACTION
        classes = jax.random.randint(kc, (batch, anchors), 0, CLASSES)
        return {
            "inputs": x,
            "labels": jnp.where(positive, classes, -1),
            "boxes": jax.random.normal(kb, (batch, anchors, 4), jnp.float32),
        }

    return ModelDef(
        name=spec.model,
        module=RetinaNet(dtype=jnp.dtype(dtype)),
        make_batch=make_batch,
        loss=loss,
        default_optimizer="momentum",
        tags=real_tags("object_detection", image=image),
    )


register(Entry(name="retinanet", factory=build))
