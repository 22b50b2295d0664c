"""The FC family in numpy: forward, backward, and the rmsprop/sgd update of one training step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paradnn.errors import SpecError

SEED = 0


@dataclass
class NumpyFC:
    """Dense(nodes, ReLU) x layers, then Dense(output); softmax cross-entropy on integer labels."""

    sizes: tuple[int, ...]  # input, nodes x layers, output

    def init(self, rng: np.random.Generator) -> list[np.ndarray]:
        """Glorot-uniform weights and zero biases, float32: [w0, b0, w1, b1, ...]."""
        params = []
        for n_in, n_out in zip(self.sizes[:-1], self.sizes[1:]):
            limit = np.sqrt(6.0 / (n_in + n_out))
            params += [rng.uniform(-limit, limit, (n_in, n_out)).astype(np.float32),
                       np.zeros(n_out, np.float32)]
        return params

    def loss_and_grads(self, params: list[np.ndarray], x: np.ndarray, y: np.ndarray):
        """(mean cross-entropy, gradients in the order of ``params``)."""
        acts = [x]
        for i in range(0, len(params), 2):
            z = acts[-1] @ params[i] + params[i + 1]
            acts.append(np.maximum(z, 0.0) if i + 2 < len(params) else z)
        logits = acts[-1] - acts[-1].max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        n = x.shape[0]
        loss = float(-np.log(p[np.arange(n), y] + 1e-12).mean())
        delta = p
        delta[np.arange(n), y] -= 1.0
        delta /= n
        grads: list[np.ndarray] = [None] * len(params)  # type: ignore[list-item]
        for i in range(len(params) - 2, -1, -2):
            grads[i] = acts[i // 2].T @ delta
            grads[i + 1] = delta.sum(axis=0)
            if i:
                delta = (delta @ params[i].T) * (acts[i // 2] > 0)
        return loss, grads


def build_fc(spec, dtype: str) -> NumpyFC:
    """The toy's FC model for an ``FC`` spec (float32 only)."""
    if dtype != "float32":
        raise SpecError("dtype", dtype, "float32 with framework numpy (the toy)")
    return NumpyFC((spec.input, *([spec.nodes] * spec.layers), spec.output))


class Optimizer:
    """paradnn's optimizers (``paradnn.backends.jax.step.make_optimizer``'s hyperparameters)."""

    def __init__(self, name: str, params: list[np.ndarray]):
        if name not in ("sgd", "rmsprop"):
            raise SpecError("optimizer", name, "sgd or rmsprop with framework numpy (the toy)")
        self.name = name
        self.slots = [np.zeros_like(p) for p in params for _ in range(2 if name == "rmsprop" else 0)]

    def apply(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        """Update ``params`` in place: sgd lr 0.1; rmsprop TF1's (lr 0.1, decay 0.9, momentum
        0.9, epsilon 1.0 inside the square root)."""
        for i, (p, g) in enumerate(zip(params, grads)):
            if self.name == "sgd":
                p -= 0.1 * g
                continue
            ms, mom = self.slots[2 * i], self.slots[2 * i + 1]
            ms *= 0.9
            ms += 0.1 * g * g
            mom *= 0.9
            mom += 0.1 * g / np.sqrt(ms + 1.0)
            p -= mom
