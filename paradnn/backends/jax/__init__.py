"""The JAX framework: JAX + Flax + optax on XLA, paradnn's reference backend.

This ``__init__`` is framework-free (the registry reads ``INFO`` without importing JAX); the
backend, training step, models, cost and memory analysis and the JAX side of the system
experiments live in the modules beside it and import JAX.
"""

from paradnn.backends import FrameworkInfo
from paradnn.backends.jax.options import JaxOptions

INFO = FrameworkInfo(
    extra="",  # JAX, Flax and optax are paradnn's own dependencies
    description="jax (XLA, ahead-of-time compiled)",
    software_fields=("jax_version", "jaxlib_version", "flax_version", "optax_version", "xla_flags",
                     "xla_compile_options"),
    version_fields=("jax_version", "jaxlib_version", "flax_version", "optax_version", "xla_flags"),
    options=JaxOptions,
)
