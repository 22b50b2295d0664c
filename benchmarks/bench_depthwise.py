"""The weight gradient of a depthwise 3x3 convolution on XLA:CPU: XLA's own lowering against
writing it by hand with the useful multiply-adds only (docs/performance.md, "Depthwise weight
gradients on a CPU").

XLA:CPU computes the weight gradient of a convolution with ``feature_group_count = C`` as a
dense C x C convolution and keeps its diagonal: C times the useful FLOPs (why MobileNet's
training step executed 3-4x its analytic count on a CPU and carried ``flops_mismatch``). The
hand-written variants compute only the 9 taps per channel (the useful count): ``taps-reduce``
multiplies each shifted input by the output gradient and sums over batch and space (what
``paradnn/backends/jax/models/depthwise.py`` does on a CPU), ``taps-einsum`` writes the same
as one ``einsum`` per tap, ``taps-cfirst`` moves channels first so that each sum runs along the
minor dimensions, and ``taps-dot`` stacks the 9 shifted copies into one batched matmul. For MobileNet v1's depthwise layer
shapes at batch 8 (stride 1), every variant is compiled once, then the variants are timed in
turn (``--rounds`` interleaved rounds, each the best of ``--calls`` calls); printed: each
variant's median milliseconds, its executed FLOPs (XLA cost analysis) and the median of its
per-round ratio to XLA's lowering (above 1: the variant is slower), with the largest difference
between the variants' gradients.

    python benchmarks/bench_depthwise.py [--rounds 5] [--calls 10] [--batch 8]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

DN = ("NHWC", "HWIO", "NHWC")
#: (spatial side, channels) of MobileNet v1's stride-1 depthwise layers at 224 px.
LAYERS = ((112, 32), (56, 128), (28, 256), (14, 512), (7, 1024))


def depthwise(x: jax.Array, w: jax.Array) -> jax.Array:
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=DN,
                                        feature_group_count=x.shape[-1])


def xla_lowering(x: jax.Array, dy: jax.Array) -> jax.Array:
    """The weight gradient as JAX differentiates the convolution (what paradnn runs)."""
    w = jnp.zeros((3, 3, 1, x.shape[-1]), x.dtype)
    return jax.vjp(lambda w: depthwise(x, w), w)[1](dy)[0]


def _taps(x: jax.Array, dy: jax.Array, product) -> jax.Array:
    side = x.shape[1]
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    taps = [product(padded[:, i:i + side, j:j + side, :], dy) for i in range(3) for j in range(3)]
    return jnp.stack(taps).reshape(3, 3, 1, x.shape[-1])


def taps_reduce(x: jax.Array, dy: jax.Array) -> jax.Array:
    return _taps(x, dy, lambda a, b: (a * b).sum(axis=(0, 1, 2)))


def taps_einsum(x: jax.Array, dy: jax.Array) -> jax.Array:
    return _taps(x, dy, lambda a, b: jnp.einsum("nhwc,nhwc->c", a, b))


def taps_channels_first(x: jax.Array, dy: jax.Array) -> jax.Array:
    """The taps with channels leading: each sum runs along the minor dimensions."""
    side = x.shape[1]
    xt = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))).transpose(3, 0, 1, 2)
    dyt = dy.transpose(3, 0, 1, 2)
    taps = [(xt[:, :, i:i + side, j:j + side] * dyt).sum(axis=(1, 2, 3)) for i in range(3) for j in range(3)]
    return jnp.stack(taps).reshape(3, 3, 1, x.shape[-1])


def taps_dot(x: jax.Array, dy: jax.Array) -> jax.Array:
    """The taps as one batched matmul: 9 shifted copies against the output gradient, per channel."""
    side, c = x.shape[1], x.shape[-1]
    padded = jnp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    shifted = jnp.stack([padded[:, i:i + side, j:j + side, :] for i in range(3) for j in range(3)])
    return jnp.einsum("tnhwc,nhwc->tc", shifted, dy).reshape(3, 3, 1, c)


VARIANTS = {"xla": xla_lowering, "taps-reduce": taps_reduce, "taps-einsum": taps_einsum,
            "taps-cfirst": taps_channels_first, "taps-dot": taps_dot}


def _flops(compiled) -> float:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost.get("flops", float("nan")))


def _best_ms(compiled, args, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--batch", type=int, default=8)
    args = p.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; batch {args.batch}, "
          f"{args.rounds} interleaved rounds, best of {args.calls} calls each")
    print(f"{'layer':>12s} {'variant':>12s} {'ms (median)':>12s} {'executed FLOP':>14s} "
          f"{'/ useful':>9s} {'ratio to xla':>13s} {'max |diff|':>11s}")
    for side, channels in LAYERS:
        kx, kd = jax.random.split(jax.random.key(side))
        x = jax.random.normal(kx, (args.batch, side, side, channels))
        dy = jax.random.normal(kd, (args.batch, side, side, channels))
        useful = 2 * 9 * args.batch * side * side * channels  # 9 taps per output element
        compiled = {name: jax.jit(f).lower(x, dy).compile() for name, f in VARIANTS.items()}
        reference = compiled["xla"](x, dy)
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(args.rounds):
            for name, c in compiled.items():
                times[name].append(_best_ms(c, (x, dy), args.calls))
        for name, c in compiled.items():
            ratio = statistics.median(t / r for t, r in zip(times[name], times["xla"]))
            diff = float(jnp.abs(c(x, dy) - reference).max())
            flops = _flops(c)
            print(f"{f'{side}x{side}x{channels}':>12s} {name:>12s} {statistics.median(times[name]):12.2f} "
                  f"{flops:14.3g} {flops / useful:9.1f} {ratio:13.2f} {diff:11.2g}")


if __name__ == "__main__":
    main()
