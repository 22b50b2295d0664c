"""PyTorch builds of paradnn's model families (the ``torch`` framework).

Every builder ``build_*(spec, dtype) -> TorchModel`` describes a network with the same layout
and the same trainable parameter count as the JAX model of the spec (tests compare them with
``paradnn.families.param_count`` and ``paradnn.backends.jax.models.param_count``). The harness
(``paradnn.backends.torch.backend``) turns it into a module, an optimizer, a synthetic batch on
the device and a (compiled) training step; it never looks inside the module.

Conventions: modules are built in float32 (master weights) and run under ``torch.autocast``
in the workload's dtype; tensors are channels-first (NCHW), torch's native layout; the loss
casts logits to float32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

#: Seed of parameter initialization and of the synthetic batch (as ``paradnn.backends.jax.step.SEED``).
SEED = 0


@dataclass(frozen=True)
class TorchModel:
    """One model as the torch backend needs it.

    ``make_module()`` builds the ``torch.nn.Module`` (float32 parameters, on the current default
    device). ``make_batch(generator, batch, device)`` returns ``{"inputs", "labels"}`` tensors
    drawn on ``device`` from ``generator``. ``loss(outputs, batch)`` is a float32 scalar.
    """

    name: str
    make_module: Callable[[], Any]
    make_batch: Callable[[Any, int, Any], dict[str, Any]]
    loss: Callable[[Any, dict[str, Any]], Any]
    tags: dict[str, Any] = field(default_factory=dict)


def softmax_xent(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy in float32 over integer ``labels`` (any leading shape)."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))


def lecun_normal_(w: Any, fan_in: int) -> Any:
    """Fill ``w`` in place as Flax's ``lecun_normal`` (the default of Dense, DenseGeneral and
    Conv): a normal truncated at 2 std, rescaled to variance 1/fan_in (0.8796... is the std of
    a standard normal truncated at +-2)."""
    import math

    from torch import nn

    std = math.sqrt(1.0 / fan_in) / 0.87962566103423978
    return nn.init.trunc_normal_(w, std=std, a=-2 * std, b=2 * std)


def dense(fan_in: int, out: int, bias: bool = True) -> Any:
    """A ``Linear(fan_in, out)`` initialized as Flax's Dense: LeCun-normal weight, zero bias."""
    from torch import nn

    layer = nn.Linear(fan_in, out, bias=bias)
    lecun_normal_(layer.weight, fan_in)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


__all__ = ["SEED", "TorchModel", "dense", "lecun_normal_", "softmax_xent"]
