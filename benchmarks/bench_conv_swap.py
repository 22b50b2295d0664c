"""XLA:CPU's operand-swapped convolutions on a small program (docs/performance.md, "Convolutions
smaller than their kernel").

The gradient of a strided 3x3 convolution down to 2x2 and a 3x3 SAME convolution on that 2x2
image (batch 32, 64 then 128 channels): the convolutions XLA:CPU's algebraic simplifier swaps
into loop fusions. Each variant is compiled in this process and called ``--calls`` times per
repetition; the best repetition's milliseconds per call are printed with the count of
loop-emitted convolutions in its optimized program.

    python benchmarks/bench_conv_swap.py [--calls 50] [--reps 5]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from paradnn.backends.jax.xla_stack import loop_emitted_convolutions

DN = ("NHWC", "HWIO", "NHWC")


def loss(x, w1, w2, explicit_pad: bool):
    conv = jax.lax.conv_general_dilated
    if explicit_pad:  # the same padding written as jnp.pad and VALID convolutions
        y = conv(jnp.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0))), w1, (2, 2), "VALID", dimension_numbers=DN)
        z = conv(jnp.pad(jax.nn.relu(y), ((0, 0), (1, 1), (1, 1), (0, 0))), w2, (1, 1), "VALID",
                 dimension_numbers=DN)
    else:
        y = conv(x, w1, (2, 2), ((0, 1), (0, 1)), dimension_numbers=DN)
        z = conv(jax.nn.relu(y), w2, (1, 1), ((1, 1), (1, 1)), dimension_numbers=DN)
    return jnp.sum(z ** 2)


#: variant -> (explicit padding, XLA compile options)
VARIANTS = {
    "defaults": (False, {}),
    "jnp.pad + VALID": (True, {}),
    "disable conv-operand-swapper": (False, {"xla_disable_hlo_passes": "conv-operand-swapper"}),
    "disable algsimp": (False, {"xla_disable_hlo_passes": "algsimp"}),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    keys = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(keys[0], (32, 4, 4, 64))
    w1 = jax.random.normal(keys[1], (3, 3, 64, 128)) * 0.05
    w2 = jax.random.normal(keys[2], (3, 3, 128, 128)) * 0.05
    print(f"{'variant':30s} {'loop-emitted convolutions':>26s} {'ms per call (best rep)':>23s}")
    for name, (pad, options) in VARIANTS.items():
        grad = jax.jit(jax.grad(lambda a, b, c, pad=pad: loss(a, b, c, pad), argnums=(0, 1, 2)))
        compiled = grad.lower(x, w1, w2).compile(options or None)
        jax.block_until_ready(compiled(x, w1, w2))
        best = float("inf")
        for _ in range(args.reps):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                out = compiled(x, w1, w2)
            jax.block_until_ready(out)
            best = min(best, (time.perf_counter() - t0) / args.calls)
        print(f"{name:30s} {loop_emitted_convolutions(compiled.as_text()):26d} {best * 1e3:23.2f}")


if __name__ == "__main__":
    main()
