"""Max pooling's gradient on this JAX platform: XLA's select-and-scatter against paradnn's fused
gradient (``paradnn.backends.jax.models.pooling``; docs/performance.md, "Max pooling's gradient").

Two measurements, interleaved rounds in this one process, each round timing both contenders:

* ``op``: the gradient of the 3x3/2 SAME max-pool alone on the bench CNN's stem output
  (``[32, 32, 32, 16]``, ReLU'd: ties at zero) and on the paper CNN's (image 200, filters 32:
  ``[8, 100, 100, 32]``), also checking that both give bitwise the same gradient;
* ``step``: one SGD training step of the bench CNN of ``benchmarks/bench_peers.py`` (residual,
  blocks 1, filters 16, image 64, output 100, batch 32), its model traced once with and once
  without the fused gradient and compiled as paradnn compiles it (the ``best`` preset with its
  fallback), checking that both give the same loss and gradients.

Prints milliseconds per call (median over rounds) and the median of per-round speedups
(XLA's time / the fused time).

    python benchmarks/bench_pool.py [--rounds 7] [--calls 20] [--only op,step]
"""

from __future__ import annotations

import argparse
import statistics
import time

import flax.linen as nn
import jax
import jax.numpy as jnp

from paradnn.backends.jax import xla_stack
from paradnn.backends.jax.models import build, pooling
from paradnn.families.cnn import CNN

OPS = {"bench CNN stem pool [32,32,32,16]": (32, 32, 32, 16), "paper CNN stem pool [8,100,100,32]": (8, 100, 100, 32)}


def _timed(fn, args, calls: int) -> float:
    """Seconds per call of ``fn(*args)`` over ``calls`` calls (results awaited)."""
    out = fn(*args)
    jax.block_until_ready(out)
    t = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / calls


def _pool_grads(shape):
    """(XLA's, fused) jitted gradient functions and their arguments for one pool."""
    x = jax.nn.relu(jax.random.normal(jax.random.PRNGKey(0), shape))
    g = jax.random.normal(jax.random.PRNGKey(1), (shape[0], shape[1] // 2, shape[2] // 2, shape[3]))

    def xla(x, g):
        return jax.vjp(lambda x: nn.max_pool(x, (3, 3), (2, 2), padding="SAME"), x)[1](g)[0]

    def fused(x, g):
        return jax.vjp(lambda x: pooling.max_pool(x, (3, 3), (2, 2), padding="SAME"), x)[1](g)[0]

    return {"xla": jax.jit(xla), "fused": jax.jit(fused)}, (x, g)


def _cnn_steps():
    """(XLA's, fused) jitted SGD steps of the bench CNN, each traced with its pool gradient."""
    model = build(CNN(block="residual", blocks=1, filters=16, image=64, output=100))
    batch = model.make_batch(jax.random.PRNGKey(0), 32)
    variables = model.module.init(jax.random.PRNGKey(0), batch["inputs"], train=False)

    def make_step():
        # A new function per contender: JAX caches a function's trace, whatever the jit wrapper.
        def step(variables, batch):
            def loss(params):
                logits, state = model.module.apply({**variables, "params": params}, batch["inputs"], train=True,
                                                   mutable=["batch_stats"])
                return model.loss(logits, batch), state

            (value, state), grads = jax.value_and_grad(loss, has_aux=True)(variables["params"])
            params = jax.tree.map(lambda p, g: p - 0.01 * g, variables["params"], grads)
            return {**variables, **state, "params": params}, value, grads

        return step

    steps = {}
    for label, platforms in (("xla", set()), ("fused", {jax.default_backend()})):
        saved = set(pooling.FUSED_GRADIENT_PLATFORMS)
        pooling.FUSED_GRADIENT_PLATFORMS.clear()
        pooling.FUSED_GRADIENT_PLATFORMS.update(platforms)
        try:  # traced and compiled now, while the platform set says which gradient to use
            steps[label], _ = xla_stack.compile_lowered(jax.jit(make_step()).lower(variables, batch), "best",
                                                      jax.default_backend())
        finally:
            pooling.FUSED_GRADIENT_PLATFORMS.clear()
            pooling.FUSED_GRADIENT_PLATFORMS.update(saved)
    return steps, (variables, batch)


def _same(a, b) -> bool:
    return all(bool(jnp.all(x == y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def _compare(name: str, fns: dict, args: tuple, rounds: int, calls: int) -> None:
    same = _same(fns["xla"](*args), fns["fused"](*args))
    times: dict[str, list[float]] = {"xla": [], "fused": []}
    for r in range(rounds):
        for label in (("xla", "fused") if r % 2 == 0 else ("fused", "xla")):
            times[label].append(_timed(fns[label], args, calls))
    speedups = [a / b for a, b in zip(times["xla"], times["fused"])]
    print(f"{name}: XLA {statistics.median(times['xla']) * 1e3:.2f} ms, fused "
          f"{statistics.median(times['fused']) * 1e3:.2f} ms per call; speedup median "
          f"{statistics.median(speedups):.2f}x [{min(speedups):.2f}-{max(speedups):.2f}] over {rounds} rounds; "
          f"bitwise the same results: {same}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--only", default="op,step", help="comma list of op, step")
    a = p.parse_args(argv)
    only = set(a.only.split(","))
    print(f"jax {jax.__version__}, platform {jax.default_backend()}")
    if "op" in only:
        for name, shape in OPS.items():
            fns, args = _pool_grads(shape)
            _compare(name, fns, args, a.rounds, a.calls)
    if "step" in only:
        fns, args = _cnn_steps()
        _compare("bench CNN training step (batch 32)", fns, args, a.rounds, max(a.calls // 2, 5))


if __name__ == "__main__":
    main()
