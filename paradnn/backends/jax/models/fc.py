"""ParaDnn fully connected model (the ParaDnn paper's FC family: docs/models.md)."""

from __future__ import annotations

from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.families.fc import train_flops_per_example
from paradnn.backends.jax.models.base import ModelDef, softmax_xent
from paradnn.families.fc import FC


class FCNet(nn.Module):
    """``layers`` x Dense(nodes, ReLU) then Dense(output); Glorot-uniform weights, biases on.

    XLA's own kernel gradient ``x^T @ dy`` is used on every backend. (A custom VJP that
    materialized ``x^T`` for XLA:CPU's old transposed-operand GEMM no longer wins now that
    XLA:CPU hands dots to YNNPACK: ``benchmarks/bench_stack.py --fc-vjp both``.)
    """

    layers: int
    nodes: int
    output: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        dense = partial(nn.Dense, dtype=self.dtype, kernel_init=nn.initializers.glorot_uniform())
        for _ in range(self.layers):
            x = nn.relu(dense(self.nodes)(x))
        return dense(self.output)(x)


def build(spec: FC, dtype: str) -> ModelDef:
    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        kx, ky = jax.random.split(key)
        x = jax.random.uniform(kx, (batch, spec.input), jnp.float32, -0.5, 0.5).astype(dtype)
        y = jax.random.randint(ky, (batch,), 0, spec.output)
        return {"inputs": x, "labels": y}

    return ModelDef(
        name="fc",
        module=FCNet(spec.layers, spec.nodes, spec.output, dtype=jnp.dtype(dtype)),
        make_batch=make_batch,
        loss=lambda logits, batch: softmax_xent(logits, batch["labels"]),
        train_flops_per_example=train_flops_per_example(spec),
        tags={"kind": "generated"},
    )
