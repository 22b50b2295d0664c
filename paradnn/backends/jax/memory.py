"""Memory breakdown of one training step, in the five categories of the TBD study (Fig 8).

Per device, in bytes:

* ``weights``: the parameters and the model's other state (e.g. batch-norm statistics), from
  shapes (arguments of the step), plus the copies of the weights in the compute dtype that the
  backward pass keeps (mixed precision: the part of the residuals that does not grow with the
  batch).
* ``optimizer``: the optimizer state (momentum, second moments, ...), from shapes. Arguments.
* ``activations`` (TBD's *feature maps*): the input batch (an argument) plus the residuals
  that JAX's autodiff saves in the forward pass for the backward pass, from shapes. They are
  read from the pullback of ``jax.vjp`` evaluated abstractly with ``jax.eval_shape`` (the
  pullback is a pytree whose leaves are exactly the saved residuals); residuals that are the
  weights themselves are left out, each residual is counted once, and only the part that grows
  with the batch counts here.
* ``gradients``: the weight gradients, at most the size of the parameters. XLA fuses many of
  them into the optimizer update and never holds them all at once, so the gradients get what
  the compiled program's buffers leave after weights, optimizer state and feature maps, capped
  at the parameters' size.
* ``workspace``: the rest of the compiled total (temporaries of kernels, non-donated outputs).

The compiled total is ``argument + output + temp - alias`` of XLA's memory analysis of the
measured program: every buffer the program holds, the donated state counted once. The parts
sum to it exactly unless the feature maps do not fit what the arguments leave of it (XLA
rematerialized or fused some residuals); then the gradients and workspace are 0 and the parts
exceed the total by ``overshoot_bytes``, which the caller can check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from paradnn.backends.jax import analyses
from paradnn.backends.jax.models import ModelDef
from paradnn.sizes import MEMORY_PARTS
from paradnn.workload import Workload


def tree_bytes(tree: Any) -> int:
    """Bytes of a tree of arrays or ``jax.ShapeDtypeStruct``s (B)."""
    return sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree))


def residual_bytes(model: ModelDef, state_shapes: Any, batch_shapes: Any) -> int:
    """Bytes of the values that the backward pass keeps from the forward pass (B, all devices),
    from shapes: nothing is computed or allocated. Residuals that are the state or the batch
    themselves are left out; each residual counts once however often the pullback refers to it.
    This includes copies of the weights in the compute dtype (see :func:`split_residuals`)."""

    def residuals(state: Any, batch: Any) -> list[Any]:
        def loss_fn(params: Any) -> Any:
            # The training step's forward pass and loss (paradnn.backends.jax.step), same call convention.
            outputs, updates = model.module.apply({"params": params, **state["extra"]}, batch["inputs"],
                                                  train=True, mutable=list(state["extra"]))
            return model.loss(outputs, batch), updates

        _, pullback, _ = jax.vjp(loss_fn, state["params"], has_aux=True)
        # The pullback is a pytree whose leaves are the saved residuals (tracers here): identity
        # tells a residual that is an input apart from a new value, and duplicates apart.
        seen = {id(x) for x in jax.tree_util.tree_leaves((state, batch))}
        kept = []
        for leaf in jax.tree_util.tree_leaves(pullback):
            if id(leaf) not in seen:
                seen.add(id(leaf))
                kept.append(leaf)
        return kept

    return tree_bytes(jax.eval_shape(residuals, state_shapes, batch_shapes))


def split_residuals(model: ModelDef, state_shapes: Any, batch_shapes: Any) -> tuple[int, int]:
    """The residuals (B, all devices) split into ``(feature maps, weight copies)``: the part
    that grows with the batch and the part that does not (e.g. bfloat16 casts of float32
    weights). Residual bytes are affine in the batch B, so two abstract evaluations, at B and
    2B, give both exactly."""
    doubled = jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct((2 * s.shape[0],) + tuple(s.shape[1:]), s.dtype), batch_shapes)
    at_b = residual_bytes(model, state_shapes, batch_shapes)
    at_2b = residual_bytes(model, state_shapes, doubled)
    per_batch = at_2b - at_b
    return per_batch, at_b - per_batch


def compiled_total_bytes(compiled: Any) -> int | None:
    """``argument + output + temp - alias`` of a compiled program's memory analysis (B per
    device), or None where the backend gives no analysis."""
    mem = compiled.memory_analysis()
    if mem is None:
        return None
    return int(mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
               - mem.alias_size_in_bytes)


@dataclass(frozen=True)
class Breakdown:
    """A step's memory by category (B per device); ``total_bytes`` is the compiled total, or
    None without a compiled program (then gradients are the parameters' size and the workspace
    is None); ``overshoot_bytes`` how far the parts exceed the total (0 when they sum to it)."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    workspace: int | None
    total_bytes: int | None
    overshoot_bytes: int

    def metrics(self) -> dict[str, int | None]:
        """The record's metrics, named as in :data:`MEMORY_PARTS`."""
        values = (self.weights, self.gradients, self.optimizer, self.activations, self.workspace)
        return dict(zip(MEMORY_PARTS, values))  # dict order: the parts bottom to top


def memory_breakdown(
    workload: Workload,
    model: ModelDef,
    state_shapes: Any,
    batch_shapes: Any,
    compiled: Any | None = None,
    workload_key: str | None = None,
) -> Breakdown:
    """The memory breakdown of ``workload``'s training step (module docstring), per device.

    ``state_shapes``/``batch_shapes`` are the abstract inputs of the step
    (``paradnn.backends.jax.step.abstract_inputs``: state replicated, global batch); ``compiled`` is the
    measured program (``paradnn.backends.jax.step.compile_measured``) or None for the shape-only parts.
    With ``devices > 1`` the batch and the feature maps are split over the devices.
    ``workload_key`` (``Workload.key``): keep the residual split under it
    (:mod:`paradnn.backends.jax.analyses`), so a repeat or re-run does not evaluate it again.
    """
    params = tree_bytes(state_shapes["params"])
    split = lambda: list(split_residuals(model, state_shapes, batch_shapes))  # noqa: E731
    feature_maps, weight_copies = (split() if workload_key is None
                                   else analyses.cached_json("residuals", workload_key, split))
    weights = params + tree_bytes(state_shapes["extra"]) + weight_copies
    optimizer = tree_bytes(state_shapes["opt_state"])
    activations = (tree_bytes(batch_shapes) + feature_maps) // workload.devices
    total = compiled_total_bytes(compiled) if compiled is not None else None
    if total is None:
        return Breakdown(weights, params, optimizer, activations, None, None, 0)
    rest = total - weights - optimizer - activations
    gradients = min(params, max(rest, 0))
    return Breakdown(weights, gradients, optimizer, activations, max(rest - gradients, 0), total, max(-rest, 0))
