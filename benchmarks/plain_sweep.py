"""The least a hand-written JAX script does to measure a sweep file's configs: the floor side
of ``benchmarks/bench_sweep.py --plain`` (issue 20).

    PYTHONPATH=. python benchmarks/plain_sweep.py sweeps/smoke.yaml [--cache DIR]

One process, single-device JAX configs at the default JAX options only (anything else is
refused: the script would run another program). For each config of the file, in order:
paradnn's Flax network and optax optimizer (``bench_gpu_peers.plain_jax``, the peers'
hand-written loop), its parameters and batch initialized by programs compiled with paradnn's
cheap options for untimed programs (what paradnn does; XLA's defaults take several times longer
on a CPU), the one-step training program compiled with XLA's default options on its first call
(paradnn's default preset on a CPU and a GPU), then ``warmup_calls x K`` untimed steps and
``min_calls x K`` more, from the file's ``settings`` (K = ``steps_per_call``, 1 where it is
automatic). Nothing else: no cost analysis, no memory breakdown, no peak, no adaptive timing,
no record, no store, no failure isolation. Its wall time is what a one-process sweeper that
traces, compiles and runs these programs (and initializes with compiled JAX programs) spends,
so the old main's cold sweep over this one bounds how much faster such a sweeper can make a
cold sweep.

``--cache DIR`` turns on JAX's persistent compilation cache in DIR (every program, however
quick to compile): a second run with the same DIR is the hand-written script's warm run.
Prints one JSON line: configs, steps run, each config's final loss, wall time of the loop over
configs (s).
"""

from __future__ import annotations

import argparse
import dataclasses
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

    from paradnn.backends.jax.options import JaxOptions
    from paradnn.backends.jax.step import untimed_compile_options
    from paradnn.grids.sweepfile import load_sweep_file
    from paradnn.measure import MeasureSettings

    plan = load_sweep_file(args.sweep)
    settings = MeasureSettings(**plan.settings)
    options = settings.options_for("jax")
    if dataclasses.replace(options, step_loop="auto") != JaxOptions():  # the loop is this script's own
        raise SystemExit(f"plain_sweep: {args.sweep} sets JAX options {options}: default options only")
    k = settings.steps_per_call or 1
    t0, steps, losses = time.perf_counter(), 0, []
    for w in plan.workloads:
        if w.framework != "jax" or w.devices != 1:
            raise SystemExit(f"plain_sweep: a {w.framework} config on {w.devices} device(s) in "
                             f"{args.sweep}: single-device JAX configs only")
        run_steps, sync, info = plain_jax(w.spec, w.batch, w.dtype, w.optimizer, untimed_compile_options())
        for n in (settings.warmup_calls * k, settings.min_calls * k):  # untimed, then "timed"
            run_steps(n)
            sync()
            steps += n
        losses.append(info["final_loss"]())  # a loss exists only once a step ran
    print(json.dumps({"configs": len(plan.workloads), "steps": steps, "final_losses": losses,
                      "loop_wall_s": time.perf_counter() - t0}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
