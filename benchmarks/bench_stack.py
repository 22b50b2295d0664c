"""Which XLA:CPU options give the fastest correct training step (paradnn.xla_stack's "best").

For each config, every candidate option set compiles paradnn's K-step training call (exactly
the program ``paradnn.run`` times) through ``Lowered.compile(compiler_options)``; the candidates
then run interleaved round by round (order alternating) in this one process. Printed per
candidate: examples/s (median), the median over rounds of its speedup over XLA's stock options
(wall clock, and process CPU time, which a busy shared host disturbs less), the library fusions
in its optimized HLO, and its first losses from the same seed (correctness: they must match
stock's to rounding).

    python benchmarks/bench_stack.py [--only fc,cnn,lstm] [--rounds 16] [--steps-per-call 2]
        [--candidates stock,ynn-dot,...] [--fc-vjp both]

``--fc-vjp both`` also runs the FC with XLA's own kernel gradient (``cpu_gemm=False``, no
materialized x^T) under each candidate, suffix ``/plain-vjp``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import re
import statistics
import time

import jax

import paradnn
from paradnn import workload as wl
from paradnn.models import build
from paradnn.specs import Workload

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
    "concurrency-scheduler": {"xla_cpu_enable_concurrency_optimized_scheduler": True},
}
CONFIGS = {
    "fc": (paradnn.FC(layers=4, nodes=1024, input=2000, output=1000), 256),
    "cnn": (paradnn.CNN(block="residual", blocks=1, filters=16, image=64, output=100), 32),
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


@dataclasses.dataclass
class Variant:
    call: jax.stages.Compiled
    state: object
    batch: object
    losses: list[float]
    ops: dict[str, int]
    wall: list[float] = dataclasses.field(default_factory=list)
    cpu: list[float] = dataclasses.field(default_factory=list)


def prepare(name: str, label: str, options: dict, k: int, plain_vjp: bool) -> Variant:
    spec, batch = CONFIGS[name]
    work = Workload(spec, batch, "float32", None, 1)
    model = build(spec, "float32")
    if plain_vjp:
        model = dataclasses.replace(model, module=model.module.clone(cpu_gemm=False))
    opt = model.default_optimizer
    state, data = wl.init_inputs(work, model, opt)
    call = wl.jit_step(model, opt, steps=k).lower(state, data).compile(options or None)
    losses = []
    for _ in range(3):
        state, loss = call(state, data)
        losses.append(float(loss))
    return Variant(call, state, data, losses, library_ops(call.as_text()))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="fc,cnn,lstm")
    p.add_argument("--rounds", type=int, default=16)
    p.add_argument("--steps-per-call", type=int, default=2)
    p.add_argument("--candidates", default="stock,ynn-dot,eigen,onednn,xnnpack,vector-512")
    p.add_argument("--fc-vjp", choices=("materialized", "both"), default="materialized")
    args = p.parse_args(argv)
    k = args.steps_per_call
    for name in args.only.split(","):
        spec, batch = CONFIGS[name]
        variants: dict[str, Variant] = {}
        for label in args.candidates.split(","):
            variants[label] = prepare(name, label, CANDIDATES[label], k, False)
            if name == "fc" and args.fc_vjp == "both":
                variants[label + "/plain-vjp"] = prepare(name, label, CANDIDATES[label], k, True)
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
