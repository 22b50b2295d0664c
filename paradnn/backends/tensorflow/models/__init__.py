"""Keras 3 (TensorFlow) builds of paradnn's models: the same layouts as the JAX models.

Every builder ``build_*(spec, dtype) -> TFModel`` returns a Keras model with the same trainable
parameters as the JAX definition (tests compare the counts), a synthetic-batch maker and the
float32 loss. Importing this package imports TensorFlow and Keras (``KERAS_BACKEND`` is set to
``tensorflow`` first); ``paradnn.backends.tensorflow.backend`` is the only caller.

Mixed precision is Keras's dtype policy on every layer: ``float32`` stays float32,
``bfloat16`` -> ``mixed_bfloat16`` and ``float16`` -> ``mixed_float16`` (float32 variables,
compute in the low-precision dtype), as the JAX models keep float32 master weights.
"""

from __future__ import annotations

import math
import os

os.environ["KERAS_BACKEND"] = "tensorflow"  # Keras 3 reads it once, at its first import

from dataclasses import dataclass, field  # noqa: E402
from typing import Any, Callable  # noqa: E402

from paradnn.backends.tensorflow import startup  # noqa: E402

with startup.quiet():  # TensorFlow's C++ start-up lines, where this is its first import
    import keras  # noqa: E402
    import tensorflow as tf  # noqa: E402

#: workload dtype -> Keras dtype policy name.
POLICIES: dict[str, str] = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


@dataclass
class TFModel:
    """A Keras model plus what the training step needs around it.

    ``make_batch(seed, batch)`` returns ``{"inputs", "labels"}`` tensors (batch on axis 0) from
    a fixed integer seed; ``loss(outputs, batch)`` returns a float32 scalar.
    """

    name: str
    model: keras.Model
    make_batch: Callable[[int, int], dict[str, tf.Tensor]]
    loss: Callable[[Any, dict[str, tf.Tensor]], tf.Tensor]
    default_optimizer: str = "rmsprop"
    #: Inner time loop of the step (tokens): costs compile unrolled 1- and 2-step variants.
    loop_length: int = 0
    unrolled: Callable[[int], "TFModel"] | None = None
    tags: dict[str, Any] = field(default_factory=dict)


def policy(dtype: str) -> str:
    """The Keras dtype policy of a workload dtype."""
    return POLICIES[dtype]


def compute_dtype(dtype: str) -> tf.DType:
    """The dtype layers compute in (and synthetic inputs are stored in)."""
    return tf.as_dtype(dtype)


def softmax_xent(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Mean softmax cross-entropy in float32 over integer ``labels`` (any leading shape)."""
    logits = tf.cast(logits, tf.float32)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def trainable_params(model: keras.Model) -> int:
    """Trainable parameters of a built Keras model, from its variables' shapes."""
    return int(sum(math.prod(v.shape) for v in model.trainable_variables))


__all__ = ["POLICIES", "TFModel", "compute_dtype", "policy", "softmax_xent", "trainable_params"]
