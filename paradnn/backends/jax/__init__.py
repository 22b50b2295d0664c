"""The JAX framework: JAX + Flax + optax on XLA, paradnn's reference backend.

This ``__init__`` is framework-free (the registry reads ``INFO`` without importing JAX); the
backend, training step, models, cost and memory analysis and the JAX side of the system
experiments live in the modules beside it and import JAX.
"""

from paradnn.backends.jax.options import JaxOptions
from paradnn.frameworks import FrameworkInfo

INFO = FrameworkInfo(
    extra="",  # JAX, Flax and optax are paradnn's own dependencies
    description="jax (XLA, ahead-of-time compiled)",
    software_fields=("jax_version", "jaxlib_version", "flax_version", "optax_version", "xla_flags",
                     "xla_compile_options"),
    version_fields=("jax_version", "jaxlib_version", "flax_version", "optax_version", "xla_flags"),
    mark="",  # inside a figure's points where several frameworks are drawn
    # The families this framework builds: family -> "module:function" (spec, dtype) -> model.
    builders={
        "fc": "paradnn.backends.jax.models.fc:build",
        "cnn": "paradnn.backends.jax.models.cnn:build",
        "rnn": "paradnn.backends.jax.models.rnn:build",
        "transformer": "paradnn.backends.jax.models.transformer_lm:build",
        "real": "paradnn.backends.jax.models:build_real",
    },
    options=JaxOptions,
)
