"""Initialization with JAX's default random-number generator (threefry) against ``unsafe_rbg``:
does a cheaper generator make paradnn's init programs (parameters and synthetic batch) quicker
to trace, compile and run? (issue 20's cold-sweep cost; docs/performance.md)

    PYTHONPATH=. python benchmarks/bench_init_rng.py sweeps/smoke.yaml --rounds 3 [--json FILE]

Each round starts one fresh process per generator, the order alternating between rounds, with
no persistent compilation cache. A process selects its generator with JAX's
``jax_default_prng_impl`` (paradnn's ``jax.random.key(SEED)`` then makes that kind of key),
builds every JAX config of the file, and times ``paradnn.backends.jax.step.init_inputs`` for
each (trace, compile with paradnn's options for untimed programs, run, wait for the arrays),
after one tiny program that starts JAX's backend. It prints the seconds per config. The parent
prints each round's total per generator and the median ratio unsafe_rbg / threefry (below 1:
unsafe_rbg is cheaper). The model builds and the backend start are outside the timed part.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATORS = ("threefry2x32", "unsafe_rbg")  # JAX's default first: the reference side


def child(sweep_file: str, generator: str) -> dict:
    """Seconds of ``init_inputs`` for each JAX config of ``sweep_file``, in this process, with
    ``generator`` as JAX's default random-number generator."""
    import jax

    jax.config.update("jax_default_prng_impl", generator)
    jax.config.update("jax_enable_compilation_cache", False)  # every program compiled here
    from paradnn.backends.jax.models import build
    from paradnn.backends.jax.step import init_inputs
    from paradnn.grids.sweepfile import load_sweep_file

    jax.numpy.zeros(1).block_until_ready()  # the backend's start is not init's cost
    seconds = []
    for w in load_sweep_file(sweep_file).workloads:
        if w.framework != "jax":
            continue
        model = build(w.spec, w.dtype)
        t0 = time.perf_counter()
        jax.block_until_ready(init_inputs(w, model, w.optimizer or model.default_optimizer))
        seconds.append(time.perf_counter() - t0)
    return {"generator": generator, "key_impl": str(jax.random.key_impl(jax.random.key(0))),
            "init_s": seconds}


def run_child(sweep_file: str, generator: str) -> dict:
    """One fresh process's :func:`child` result; SystemExit with its error output if it fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, __file__, sweep_file, "--child", generator],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"bench_init_rng: the {generator} process failed ({done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if out["key_impl"] != generator:  # a JAX that ignored the setting would time the other side twice
        raise SystemExit(f"bench_init_rng: asked for {generator}, the process made {out['key_impl']} keys")
    return out


def measure(sweep_file: str, rounds: int) -> dict:
    """``rounds`` interleaved rounds: each generator's total init seconds per round and the
    median of the per-round ratios unsafe_rbg / threefry."""
    totals: dict[str, list[float]] = {g: [] for g in GENERATORS}
    configs = None
    for r in range(rounds):
        for g in (GENERATORS if r % 2 == 0 else GENERATORS[::-1]):
            out = run_child(sweep_file, g)
            configs = len(out["init_s"])
            totals[g].append(sum(out["init_s"]))
    ratios = [b / a for a, b in zip(totals["threefry2x32"], totals["unsafe_rbg"])]
    return {"sweep": sweep_file, "configs": configs, "rounds": rounds, "init_total_s": totals,
            "ratio_unsafe_rbg_over_threefry": ratios, "median_ratio": statistics.median(ratios)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", help="sweep file (docs/sweeps.md); its JAX configs are initialized")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result to this file")
    parser.add_argument("--child", choices=GENERATORS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.sweep, args.child)))
        return 0
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: at least 1")
    result = measure(args.sweep, args.rounds)
    print(f"init of the {result['configs']} JAX config(s) of {args.sweep}, total seconds per round "
          f"(trace, compile, run; fresh process, no persistent cache):")
    for g in GENERATORS:
        print(f"  {g:>13}: " + ", ".join(f"{s:.2f}" for s in result["init_total_s"][g]))
    print("  unsafe_rbg / threefry by round: " + ", ".join(f"{x:.2f}" for x in result["ratio_unsafe_rbg_over_threefry"])
          + f"; median {result['median_ratio']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
