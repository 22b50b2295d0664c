"""ParaDnn fully connected model (the ParaDnn paper's FC family: docs/models.md)."""

from __future__ import annotations

from functools import partial
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.models.base import ModelDef, softmax_xent
from paradnn.specs import FC


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


def param_count(spec: FC) -> int:
    """Weights + biases: input*nodes + (layers-1)*nodes^2 + nodes*output, plus biases."""
    weights = spec.input * spec.nodes + (spec.layers - 1) * spec.nodes**2 + spec.nodes * spec.output
    return weights + spec.layers * spec.nodes + spec.output


def train_flops_per_example(spec: FC) -> float:
    """Matmul FLOPs of one training step per example (2 per multiply-add).

    Forward 2W, weight gradients 2W, input gradients 2W less the first layer's (nobody needs
    the gradient of the data): 6W - 2*input*nodes, W the weight count. The original ParaDnn used
    6W; the difference is the data gradient XLA never computes.
    """
    w = spec.input * spec.nodes + (spec.layers - 1) * spec.nodes**2 + spec.nodes * spec.output
    return 6.0 * w - 2.0 * spec.input * spec.nodes


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
