"""The jax backend: everything paradnn runs in jax (imported only when that framework is used)."""
