"""Model builders: a spec and a compute dtype in, a :class:`ModelDef` out."""

from __future__ import annotations

from paradnn.backends.jax.models.base import ModelDef
from paradnn.families.real import Real
from paradnn.workload import ModelSpec


def build(spec: ModelSpec, dtype: str = "float32") -> ModelDef:
    """The JAX ModelDef of any registered family's spec, computing in ``dtype`` (the family's
    ``builders["jax"]``, :mod:`paradnn.families`)."""
    from paradnn import families

    return families.builder(spec, "jax")(spec, dtype)


def build_real(spec: Real, dtype: str = "float32") -> ModelDef:
    """The ModelDef of a zoo model (the ``real`` family's JAX builder)."""
    from paradnn.backends.jax.models import registry

    return registry.get(spec.model).factory(spec, dtype)


def param_count(spec: ModelSpec) -> int:
    """Trainable parameters: the family's closed form (generated families), else from the JAX
    model's shapes (no compile)."""
    from paradnn import families

    count = families.param_count(spec)
    return count if count is not None else count_from_shapes(build(spec))


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


__all__ = ["ModelDef", "build", "build_real", "param_count", "count_from_shapes"]
