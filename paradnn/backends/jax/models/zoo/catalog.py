"""The zoo as a table: every registered real model with its trainable parameter count.

Counts come from ``jax.eval_shape`` of each model's init at its default input size: nothing is
allocated or compiled (a few seconds for the whole zoo, all of it tracing).
"""

from __future__ import annotations

from typing import Any

from paradnn.families.real import ZOO
from paradnn.backends.jax.models import build, count_from_shapes
from paradnn.families.real import Real


def catalog(names: list[str] | None = None) -> list[dict[str, Any]]:
    """One dict per model, sorted by name: ``name``, ``params`` (trainable parameters, from
    shapes), ``default_image`` (pixels, 0 for none), ``default_length`` (tokens or frames, 0
    for none), ``default_batch`` (examples), ``default_optimizer``, ``frameworks`` (that build it),
    ``train_flops`` (FLOP of one training step per example at the default input, as paradnn counts
    them: convolution taps on padding not counted), ``task`` and ``description`` (all but params and
    task from ``paradnn.families.real.ZOO``)."""
    rows = []
    for name in names or sorted(ZOO):
        entry = ZOO[name]
        model = build(Real(name))
        rows.append({
            "name": name,
            "params": count_from_shapes(model),
            "default_image": entry.default_image,
            "default_length": entry.default_length,
            "default_batch": entry.default_batch,
            "default_optimizer": entry.default_optimizer,
            "frameworks": list(entry.frameworks),
            "train_flops": entry.train_flops,
            "task": model.tags.get("task", ""),
            "description": entry.description,
        })
    return rows
