"""Model builders: a spec and a compute dtype in, a :class:`ModelDef` out."""

from __future__ import annotations

from paradnn.models.base import ModelDef
from paradnn.specs import CNN, FC, RNN, ModelSpec, Real


def build(spec: ModelSpec, dtype: str = "float32") -> ModelDef:
    """The ModelDef of a generated (FC, CNN, RNN) or real (zoo) model, computing in ``dtype``."""
    if isinstance(spec, FC):
        from paradnn.models import fc

        return fc.build(spec, dtype)
    if isinstance(spec, CNN):
        from paradnn.models import cnn

        return cnn.build(spec, dtype)
    if isinstance(spec, RNN):
        from paradnn.models import rnn

        return rnn.build(spec, dtype)
    if isinstance(spec, Real):
        from paradnn.models import registry

        return registry.get(spec.model).factory(spec, dtype)
    raise TypeError(f"not a model spec: {spec!r}")


def param_count(spec: ModelSpec) -> int:
    """Trainable parameters: closed form for FC/CNN/RNN, from shapes (no compile) for real models."""
    if isinstance(spec, FC):
        from paradnn.models import fc

        return fc.param_count(spec)
    if isinstance(spec, CNN):
        from paradnn.models import cnn

        return cnn.param_count(spec)
    if isinstance(spec, RNN):
        from paradnn.models import rnn

        return rnn.param_count(spec)
    return count_from_shapes(build(spec))


def count_from_shapes(model: ModelDef, batch: int = 1) -> int:
    """Trainable parameters of a ModelDef from ``jax.eval_shape`` of its init: nothing is
    allocated or compiled."""
    import math

    import jax

    def init(key):
        inputs = model.make_batch(key, batch)["inputs"]
        return model.module.init(key, inputs, train=False)

    shapes = jax.eval_shape(init, jax.random.key(0))
    return sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(shapes.get("params", {})))


__all__ = ["ModelDef", "build", "param_count", "count_from_shapes"]
