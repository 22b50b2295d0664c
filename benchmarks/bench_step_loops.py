"""The two step loops side by side: seconds per step of the same workloads measured by
``paradnn.run`` with ``step_loop`` device (K steps in a loop inside the compiled program) and
host (a one-step program called K times), interleaved, the order alternating between rounds.
The evidence behind ``auto``'s rule (``paradnn/backends/steploop.py``, docs/performance.md).

    PYTHONPATH=. python benchmarks/bench_step_loops.py [--framework tensorflow] [--rounds 2]

Models (``--models``, comma list; float32, the framework's default optimizer):

* cnn:     CNN(residual, blocks 1, filters 16, image 64, output 100), batch 32
* fc:      FC(layers 4, nodes 1024, input 2000, output 1000), batch 256
* lstm:    RNN(lstm, layers 1, embed 256, length 20, vocab 1024), batch 64
* fc-tiny: FC(layers 2, nodes 64, input 32, output 10), batch 16 (the host's dispatch cost)

Prints a table and, with ``--json``, writes the rows (step_time_s in s, K = steps per call).
"""

from __future__ import annotations

import argparse
import json
import sys

import paradnn
from paradnn.measure import MeasureSettings

MODELS = {
    "cnn": (paradnn.CNN("residual", 1, 16, 64, 100), 32),
    "fc": (paradnn.FC(layers=4, nodes=1024, input=2000, output=1000), 256),
    "lstm": (paradnn.RNN(cell="lstm", layers=1, embed=256, length=20, vocab=1024), 64),
    "fc-tiny": (paradnn.FC(layers=2, nodes=64, input=32, output=10), 16),
}
LOOPS = ("device", "host")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", default="tensorflow", help="jax or tensorflow")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--time-budget", type=float, default=5.0, help="paradnn time_budget_s per run (s)")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    settings = MeasureSettings(warmup_calls=1, min_calls=6, max_calls=8, ci_target=0.05,
                               time_budget_s=args.time_budget)
    rows = []
    for r in range(args.rounds):
        for name in args.models.split(","):
            spec, batch = MODELS[name]
            for loop in LOOPS if r % 2 == 0 else tuple(reversed(LOOPS)):
                rec = paradnn.run(spec, batch=batch, framework=args.framework, settings=settings, step_loop=loop)
                m = rec.metrics
                rows.append({"round": r + 1, "model": name, "step_loop": loop, "status": rec.status,
                             "step_loop_used": m.get("step_loop_used"), "step_time_s": m.get("step_time_s"),
                             "steps_per_call": m.get("steps_per_call_used")})
                print(f"round {r + 1} {name} {loop}: {rec.status} {m.get('step_time_s')} s/step "
                      f"(K {m.get('steps_per_call_used')})", file=sys.stderr, flush=True)
    print(f"{args.framework}, seconds per step by round (device loop | host loop):")
    for name in args.models.split(","):
        cells = {loop: [x["step_time_s"] for x in rows if x["model"] == name and x["step_loop"] == loop]
                 for loop in LOOPS}
        print(f"  {name:8s} " + " | ".join(", ".join(f"{t:.3g}" if t else "-" for t in cells[loop])
                                            for loop in LOOPS))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"framework": args.framework, "rows": rows}, f, indent=1)
    return 0 if all(x["status"] == "ok" for x in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
