"""The least a hand-written JAX script does to measure a sweep file's configs: the floor of
``benchmarks/bench_sweep.py --plain`` (issue 20).

    PYTHONPATH=. python benchmarks/plain_sweep.py sweeps/smoke.yaml [--cache DIR]

One process, JAX configs only. For each config of the file, in order: paradnn's Flax network
and optax optimizer (``bench_gpu_peers.plain_jax``, the peers' hand-written loop), its state
and batch initialized by programs compiled with paradnn's cheap options for untimed programs
(what paradnn does; XLA's defaults take several times longer on a CPU), the one-step training
program compiled with XLA's default options on its first call (paradnn's default preset on a
CPU), then ``warmup_calls x steps_per_call`` untimed steps and ``min_calls x steps_per_call``
timed ones, from the file's ``settings`` (1 where a value is missing or automatic). Nothing
else: no cost analysis, no memory breakdown, no peak, no record, no store, no failure
isolation. Its wall time is what any tool must spend to compile and run these programs, so the
old main's cold sweep over this one bounds how much faster any sweeper can make a cold sweep.

``--cache DIR`` turns on JAX's persistent compilation cache in DIR (every program, however
quick to compile): a second run with the same DIR is the hand-written script's warm run.
Prints one JSON line: configs, steps run, wall time of the loop over configs (s).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", help="sweep file (docs/sweeps.md)")
    parser.add_argument("--cache", default=None, help="JAX persistent compilation cache folder")
    args = parser.parse_args(argv)

    import jax

    if args.cache:
        jax.config.update("jax_compilation_cache_dir", args.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    from bench_gpu_peers import plain_jax

    from paradnn.backends.jax.step import untimed_compile_options
    from paradnn.grids.sweepfile import load_sweep_file

    plan = load_sweep_file(args.sweep)
    k = plan.settings.get("steps_per_call") or 1
    warm, timed = plan.settings.get("warmup_calls") or 1, plan.settings.get("min_calls") or 1
    t0, steps = time.perf_counter(), 0
    for w in plan.workloads:
        if w.framework != "jax":
            raise SystemExit(f"plain_sweep: {w.framework} config in {args.sweep}: JAX configs only")
        run_steps, sync, _ = plain_jax(w.spec, w.batch, w.dtype, w.optimizer, untimed_compile_options())
        run_steps(warm * k)
        sync()
        run_steps(timed * k)
        sync()
        steps += (warm + timed) * k
    print(json.dumps({"configs": len(plan.workloads), "steps": steps, "loop_wall_s": time.perf_counter() - t0}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
