"""Tracing and lowering the measured program: this checkout against a reference checkout.

    PYTHONPATH=. python benchmarks/bench_trace.py --reference /path/to/old/checkout --rounds 3

``paradnn.backends.jax.step.compile_measured`` traces the model's training step and lowers the
program that the timing protocol runs (the K-step loop, or the single step for the host loop).
This measures that part alone, the ``phase_trace_s`` of a cold config's record, leaving out
XLA's compile (the same program text either way: tests/test_xla_stack.py): each round runs one
fresh process per checkout, in an order that alternates between rounds, and each process
measures every model below once, in the order given, with the step loop ``auto`` on the default
backend, after tracing a tiny FC and a tiny CNN unmeasured (JAX's first trace of a loop or a
convolution in a process costs more than the next ones, whichever model comes first), each after
a full garbage collection (without it, Python's collector ran in whichever model's time it
happened to, not the same one on both sides). Printed: one JSON object with each side's seconds
per model and round, the medians and the ratio ``this / reference`` per model (below 1: this
checkout is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The models measured, by name: paradnn spec expressions (batch 2, float32, their default optimizer).
MODELS = {
    "cnn_residual": 'CNN("residual", 1, 16, 64, 100)',
    "cnn_bottleneck": 'CNN("bottleneck", 1, 4, 96, 5)',
    "fc": "FC(4, 1024, 2000, 1000)",
    "lstm": 'RNN("lstm", 2, 256, 20, 10000)',
    "transformer": "Transformer(2, 128, 4, 512, 32, 1000)",
    "resnet50_96px": 'Real("resnet50", image=96)',
    "densenet121_96px": 'Real("densenet121", image=96)',
}

#: What one process runs: the trace-and-lower seconds of each model, as one JSON line.
CHILD = """
import gc, json, sys
from paradnn import CNN, FC, RNN, Real, Transformer, Workload
from paradnn.backends.jax import step as wl
from paradnn.backends.jax import xla_stack
from paradnn.backends.jax.models import build

# Only tracing and lowering are measured: the compile is replaced by a no-op.
xla_stack.compile_lowered = lambda lowered, preset, platform: (None, {})


def trace(expr):
    gc.collect()  # the garbage of the model before is not collected in this one's time
    workload = Workload(eval(expr), batch=2)
    model = build(workload.spec, workload.dtype)
    opt = model.default_optimizer
    state, batch = wl.abstract_inputs(workload, model, opt)
    phases = {}
    _, loop, _ = wl.compile_measured(model, opt, None, state, batch, phases=phases)
    return {"trace_s": phases["trace"], "loop": loop}


# JAX's first trace of each kind in a process (a loop, a convolution) costs more than the next
# ones: two tiny models take those costs, so that no measured model carries them.
for expr in ('FC(1, 8, 8, 2)', 'CNN("residual", 1, 4, 32, 5)'):
    trace(expr)
print(json.dumps({name: trace(expr) for name, expr in json.loads(sys.argv[1]).items()}))
"""


def measure(checkout: Path, models: dict[str, str]) -> dict[str, dict]:
    """Each model's trace-and-lower seconds and step loop, from one fresh process importing
    paradnn from ``checkout``."""
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(models)], cwd=checkout,
                         env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(MODELS), help="comma-separated names of MODELS")
    args = parser.parse_args(argv)
    models = {name: MODELS[name] for name in args.only.split(",")}
    sides = {"this": ROOT, "reference": args.reference.resolve()}
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for r in range(args.rounds):
        for side in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            runs[side].append(measure(sides[side], models))
    median = {side: {m: statistics.median(run[m]["trace_s"] for run in runs[side]) for m in models}
              for side in sides}
    print(json.dumps({
        "trace_s": {side: {m: [round(run[m]["trace_s"], 3) for run in runs[side]] for m in models} for side in sides},
        "loop": {side: {m: runs[side][0][m]["loop"] for m in models} for side in sides},
        "median_s": {side: {m: round(v, 3) for m, v in median[side].items()} for side in sides},
        "this_over_reference": {m: round(median["this"][m] / median["reference"][m], 3) for m in models},
    }, indent=1))


if __name__ == "__main__":
    main()
