"""Which XLA:CPU options give the fastest correct training step (paradnn.backends.jax.xla_stack's "best").

For each config, every candidate option set compiles paradnn's K-step training call (exactly
the program ``paradnn.run`` times) through ``Lowered.compile(compiler_options)``; the candidates
then run interleaved round by round (order alternating) in this one process. Printed per
candidate: examples/s (median), the median over rounds of its speedup over XLA's stock options
(wall clock, and process CPU time, which a busy shared host disturbs less), the library fusions
in its optimized HLO, and its first losses from the same seed (correctness: they must match
stock's to rounding).

    python benchmarks/bench_stack.py [--only fc,cnn,lstm] [--rounds 16] [--steps-per-call 2]
        [--candidates stock,ynn-dot,...] [--fc-vjp both]

``--single-step`` also runs each candidate as K calls of a one-step program (no ``while`` loop
around the step: XLA:CPU leaves convolutions inside a loop body in slow, non-canonical layouts).
``--fc-vjp both`` also runs the FC with a kernel gradient that materializes x^T before the
GEMM (the custom VJP paradnn used for XLA:CPU before YNNPACK took its dots) under each
candidate, suffix ``/materialized-xT``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import re
import statistics
import time

from functools import partial

import flax.linen as nn
import jax

import paradnn
from paradnn.backends.jax import step as wl
from paradnn.backends.jax.models import build
from paradnn.workload import Workload

YNN = "xla_cpu_experimental_ynn_fusion_type"
CANDIDATES = {
    "stock": {},
    "ynn-dot": {YNN: "LIBRARY_FUSION_TYPE_DOT"},
    "ynn-dot-eltwise": {YNN: "LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_ELTWISE"},
    "ynn-dot-conv": {YNN: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_INDIVIDUAL_CONVOLUTION"},
    "ynn-dot+conv": {YNN: "LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_INDIVIDUAL_CONVOLUTION"},
    "eigen": {YNN: ""},  # no library fusions: XLA's own dot and convolution emitters
    "onednn": {"xla_cpu_use_onednn": True},
    "onednn-fusion": {YNN: "", "xla_cpu_experimental_onednn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"},
    "xnnpack": {YNN: "", "xla_cpu_experimental_xnn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"},
    "vector-512": {"xla_cpu_prefer_vector_width": 512},
    "ynn-dot+vector-512": {YNN: "LIBRARY_FUSION_TYPE_DOT", "xla_cpu_prefer_vector_width": 512},
    "no-fusion-emitters": {"xla_cpu_use_fusion_emitters": False},
    "concurrency-scheduler": {"xla_cpu_enable_concurrency_optimized_scheduler": True},
    # The best preset's fallback on a CPU (paradnn/backends/jax/xla_stack.py, FALLBACKS): no
    # algebraic simplifier, so no operand-swapped, loop-emitted convolutions.
    "no-algsimp": {"xla_disable_hlo_passes": "algsimp"},
    # XLA's oneDNN custom calls for convolutions and some dots (docs/performance.md, "XLA:CPU's
    # oneDNN custom calls"): not in "best" while paradnn cannot count their FLOPs.
    "onednn-conv": {"xla_cpu_experimental_onednn_custom_call": True},
    "onednn-conv+no-algsimp": {"xla_cpu_experimental_onednn_custom_call": True, "xla_disable_hlo_passes": "algsimp"},
}
CONFIGS = {
    "fc": (paradnn.FC(layers=4, nodes=1024, input=2000, output=1000), 256),
    # The compute-bound FC at a batch a shared 2-core host runs in about a second per step.
    "fc-big": (paradnn.FC(layers=4, nodes=4096, input=2000, output=1000), 512),
    "cnn": (paradnn.CNN(block="residual", blocks=1, filters=16, image=64, output=100), 32),
    # CNNs whose last stage is smaller than the 3x3 kernel (images 32 and 64: 1x1 and 2x2) or not
    # (96 and 224: 3x3 and 7x7), for the fallback's measurements (docs/performance.md).
    "cnn-tiny": (paradnn.CNN(block="residual", blocks=1, filters=4, image=32, output=10), 8),
    "cnn-f16-32": (paradnn.CNN(block="residual", blocks=1, filters=16, image=32, output=10), 32),
    "cnn-32": (paradnn.CNN(block="residual", blocks=2, filters=32, image=32, output=10), 32),
    "cnn-bn-32": (paradnn.CNN(block="bottleneck", blocks=1, filters=8, image=32, output=10), 16),
    "cnn-bneck": (paradnn.CNN(block="bottleneck", blocks=1, filters=16, image=64, output=100), 32),
    "cnn-f64-64": (paradnn.CNN(block="residual", blocks=1, filters=64, image=64, output=100), 16),
    "cnn-96": (paradnn.CNN(block="residual", blocks=1, filters=16, image=96, output=100), 16),
    "cnn-224": (paradnn.CNN(block="residual", blocks=1, filters=16, image=224, output=100), 8),
    "lstm": (paradnn.RNN(cell="lstm", layers=1, embed=256, length=20, vocab=1024), 64),
}


def library_ops(hlo: str) -> dict[str, int]:
    """Counts of dots, convolutions and library (custom) fusions by name in optimized HLO."""
    counts: collections.Counter = collections.Counter()
    for line in hlo.splitlines():
        m = re.search(r"%([\w.\-]+) = \S+ (dot|convolution|fusion)\(", line)
        if not m:
            continue
        if m.group(2) != "fusion":
            counts[m.group(2)] += 1
        elif "kind=kCustom" in line:
            counts[m.group(1).split("_fusion")[0] + "-fusion"] += 1
    return dict(sorted(counts.items()))


@jax.custom_vjp
def _matmul_materialized(x, w):
    return x @ w


def _mm_fwd(x, w):
    return x @ w, (x, w)


def _mm_bwd(residuals, g):
    x, w = residuals
    # x^T copied into a plain row-major operand first (a memory pass), then a plain GEMM.
    return g @ w.T, jax.lax.optimization_barrier(x.T) @ g


_matmul_materialized.defvjp(_mm_fwd, _mm_bwd)


class MaterializedFC(nn.Module):
    """paradnn's FCNet with the kernel gradient x^T @ dy computed on a materialized x^T."""

    layers: int
    nodes: int
    output: int

    @nn.compact
    def __call__(self, x, train: bool = True):
        dense = partial(nn.Dense, kernel_init=nn.initializers.glorot_uniform(),
                        dot_general=lambda lhs, rhs, *_, **__: _matmul_materialized(lhs, rhs))
        for _ in range(self.layers):
            x = nn.relu(dense(self.nodes)(x))
        return dense(self.output)(x)


@dataclasses.dataclass
class Variant:
    call: object  # (state, batch) -> (state, loss) running K steps
    state: object
    batch: object
    losses: list[float]
    ops: dict[str, int]
    wall: list[float] = dataclasses.field(default_factory=list)
    cpu: list[float] = dataclasses.field(default_factory=list)


def prepare(name: str, label: str, options: dict, k: int, materialized: bool, single: bool = False) -> Variant:
    spec, batch = CONFIGS[name]
    work = Workload(spec, batch, "float32", None, 1)
    model = build(spec, "float32")
    if materialized:
        model = dataclasses.replace(model, module=MaterializedFC(spec.layers, spec.nodes, spec.output))
    opt = model.default_optimizer
    state, data = wl.init_inputs(work, model, opt)
    # single: one step per compiled call, K calls from Python (no while loop in the program);
    # else the K-step while loop inside the program.
    loop = "host" if single else "device"
    if single:
        compiled = wl.jit_step(model, opt, donate=True).lower(state, data).compile(options or None)
    else:
        compiled = wl.jit_multi_step(model, opt).lower(state, data, wl.STEPS_ARG).compile(options or None)
    k_steps = wl.k_step_call(compiled, loop)

    def call(state, data):
        return k_steps(state, data, k)
    losses = []
    for _ in range(3):
        state, loss = call(state, data)
        losses.append(float(loss))
    return Variant(call, state, data, losses, library_ops(compiled.as_text()))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="fc,cnn,lstm")
    p.add_argument("--rounds", type=int, default=16)
    p.add_argument("--steps-per-call", type=int, default=2)
    p.add_argument("--candidates", default="stock,ynn-dot,eigen,onednn,xnnpack,vector-512")
    p.add_argument("--fc-vjp", choices=("plain", "both"), default="plain")
    p.add_argument("--single-step", action="store_true",
                   help="also run each candidate as K one-step calls (suffix /single-step)")
    args = p.parse_args(argv)
    k = args.steps_per_call
    for name in args.only.split(","):
        spec, batch = CONFIGS[name]
        variants: dict[str, Variant] = {}
        for label in args.candidates.split(","):
            variants[label] = prepare(name, label, CANDIDATES[label], k, False)
            if name.startswith("fc") and args.fc_vjp == "both":
                variants[label + "/materialized-xT"] = prepare(name, label, CANDIDATES[label], k, True)
            if args.single_step:
                variants[label + "/single-step"] = prepare(name, label, CANDIDATES[label], k, False, single=True)
        order = list(variants)
        for r in range(args.rounds):
            for label in (order if r % 2 == 0 else order[::-1]):
                v = variants[label]
                c0, t0 = time.process_time(), time.perf_counter()
                v.state, loss = v.call(v.state, v.batch)
                jax.block_until_ready(loss)
                v.wall.append((time.perf_counter() - t0) / k)
                v.cpu.append((time.process_time() - c0) / k)
        ref = variants[order[0]]
        print(f"\n{name}: {spec}, batch {batch}; K={k}; {args.rounds} interleaved rounds; "
              f"speedups vs {order[0]} (median of per-round ratios)")
        print(f"  {'candidate':34s} {'examples/s':>10s} {'wall x':>7s} {'cpu x':>7s}  losses (first 3 calls)   library ops")
        for label, v in variants.items():
            wall = statistics.median(a / b for a, b in zip(ref.wall, v.wall))
            cpu = statistics.median(a / b for a, b in zip(ref.cpu, v.cpu))
            same = max(abs(a - b) / abs(b) for a, b in zip(v.losses, ref.losses))
            print(f"  {label:34s} {batch / statistics.median(v.wall):10.1f} {wall:7.3f} {cpu:7.3f}  "
                  f"{' '.join(f'{x:.5f}' for x in v.losses)} (rel diff {same:.1e})  {v.ops}")


if __name__ == "__main__":
    main()
