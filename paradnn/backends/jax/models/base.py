"""The one interface between a model and the training harness.

Every model, generated (FC, CNN, RNN) or real (the zoo), is described by a :class:`ModelDef`.
The harness (``paradnn.backends.jax.step``) turns it into an initialized state, a synthetic batch on the
device and a jitted training step; it never looks inside the module.

Conventions every model follows:

* ``module`` is a Flax Linen module called as ``module.apply(variables, batch["inputs"],
  train=True, mutable=[...])``. Parameters are created in float32 (``param_dtype``) and the
  module computes in its ``dtype`` attribute (mixed precision: float32 master weights, compute
  in bfloat16/float16). Mutable collections other than ``params`` (``batch_stats``) are updated
  through ``mutable``.
* ``make_batch(key, batch)`` returns a dict of arrays, each with the batch on axis 0 (so a
  data-parallel run can split every entry along it); ``"inputs"`` is what the module takes.
* ``loss(outputs, batch)`` returns a float32 scalar; cast outputs to float32 before softmax.
* ``train_flops_per_example`` is an analytic count (FLOPs, 2 per multiply-add) of one training
  step per example, forward + backward, matmuls and convolutions only; ``None`` lets the harness
  count the step's jaxpr instead (still analytic: no XLA optimization, loops scaled by length).
* ``loop_length`` and ``unrolled`` exist because XLA's cost analysis counts a loop body once.
  A model whose step contains a ``lax.scan`` over ``loop_length`` iterations gives
  ``unrolled(n)``: the same model with a loop of ``n`` iterations, fully unrolled. The harness
  compiles ``unrolled(1)`` and ``unrolled(2)`` and extrapolates linearly to ``loop_length``
  (every cost of such a model is affine in the loop length).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import jax


@dataclass(frozen=True)
class ModelDef:
    name: str
    module: Any  # flax.linen.Module
    make_batch: Callable[[jax.Array, int], dict[str, jax.Array]]
    loss: Callable[[Any, dict[str, jax.Array]], jax.Array]
    default_optimizer: str = "rmsprop"
    train_flops_per_example: float | None = None
    loop_length: int = 0
    unrolled: Callable[[int], "ModelDef"] | None = None
    tags: dict[str, Any] = field(default_factory=dict)  # e.g. {"kind": "real", "task": "vision"}


def softmax_xent(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy in float32 over integer ``labels`` (any leading shape)."""
    import optax

    return optax.softmax_cross_entropy_with_integer_labels(logits.astype("float32"), labels).mean()
