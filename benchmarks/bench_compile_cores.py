"""How many cores XLA:CPU's compiler keeps busy (docs/performance.md, "Tried and not kept"):
process CPU time over wall time of compiling small jitted programs, one at a time.

    PYTHONPATH=. python benchmarks/bench_compile_cores.py [--programs 5]

A ratio near the number of cores means a second thread compiling beside it has no idle core to
use. Printed per program: wall (s), CPU (s), CPU / wall; then the median ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp


def program(depth: int):
    def f(x):
        for i in range(depth):
            x = jnp.tanh(x @ x + i)
        return x

    return jax.jit(f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=5)
    args = parser.parse_args()
    x = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    program(3).lower(x).compile()  # the compiler's own start-up, not measured
    ratios = []
    for n in range(args.programs):
        lowered = program(40 + n).lower(x)  # a new program each time: no cache hit
        c0, t0 = time.process_time(), time.perf_counter()
        lowered.compile()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        ratios.append(cpu / wall)
        print(f"program {n}: wall {wall:.3f} s, CPU {cpu:.3f} s, CPU / wall {cpu / wall:.2f}")
    print(f"median CPU / wall {statistics.median(ratios):.2f} ({len(os.sched_getaffinity(0))} CPUs "
          "in this process's affinity)")


if __name__ == "__main__":
    main()
