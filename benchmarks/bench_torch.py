"""PyTorch backend overhead: paradnn's torch backend against a plain torch.compile loop.

FC(layers 4, nodes 1024, input 2000, output 1000), batch 256, float32, rmsprop with ParaDnn's
constants, synthetic data resident on the device. The paradnn side is exactly what a run times:
``torch_backend.BACKEND.compile`` (torch.compile, mode default) + ``init`` + the timing protocol
``paradnn.measure.time_calls`` on ``Program.call``. The reference is a hand-written loop of
the same model: ``torch.compile(model)``, ``torch.compile(optimizer.step)``, zero_grad,
cross-entropy, backward, in a Python loop, each call K steps (K as the protocol chose), timed
with ``time.perf_counter`` after synchronizing. The two alternate round by round in one process
(which goes first alternates too), so machine load affects both alike. Target: ratio >= 0.95.

    python benchmarks/bench_torch.py [--rounds 5] [--budget 5] [--clock wall|cpu] [--threads N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from paradnn.backends.torch import backend as torch_backend
from paradnn.measure import MeasureSettings, time_calls
from paradnn.families.fc import FC
from paradnn.workload import Workload

SPEC = FC(layers=4, nodes=1024, input=2000, output=1000)
BATCH = 256
#: --clock: wall seconds (what paradnn records) or this process's CPU seconds (all its threads),
#: steadier on a host shared with other work, where wall time includes waiting for a core.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def settings(budget_s: float, mode: str) -> MeasureSettings:
    return MeasureSettings(time_budget_s=budget_s, torch_compile=mode)


def paradnn_side(budget_s: float, mode: str, clock=time.perf_counter):
    """Compile through the backend; returns (compile seconds, round() -> (s/step, K))."""
    backend = torch_backend.BACKEND
    cfg = settings(budget_s, mode)
    program = backend.compile(Workload(SPEC, BATCH, optimizer="rmsprop", framework="torch"), cfg)
    state, batch = backend.init(program)

    def one_round() -> tuple[float, int]:
        timing = time_calls(program.call, state, batch, cfg, sync=backend.sync, clock=clock)
        return float(statistics.median(timing.step_times_s)), timing.steps_per_call

    return program.metrics["compile_s"], one_round


def plain_side(clock=time.perf_counter):
    """A hand-written torch.compile training loop of the same FC (Glorot weights, RMSprop with
    ParaDnn's constants: torch adds epsilon outside the square root, the same work)."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    width = SPEC.input
    for _ in range(SPEC.layers):
        layers += [nn.Linear(width, SPEC.nodes), nn.ReLU()]
        width = SPEC.nodes
    model = nn.Sequential(*layers, nn.Linear(width, SPEC.output))
    opt = torch.optim.RMSprop(model.parameters(), lr=0.1, alpha=0.9, eps=1.0, momentum=0.9)
    x = torch.rand(BATCH, SPEC.input) - 0.5
    y = torch.randint(0, SPEC.output, (BATCH,))
    forward = torch.compile(model)
    opt_step = torch.compile(opt.step)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(forward(x), y)
        loss.backward()
        opt_step()
        return loss.detach()

    t0 = time.perf_counter()
    for _ in range(2):  # compile, and recompile once the optimizer has created its state
        float(step())
    compile_s = time.perf_counter() - t0

    def one_round(k: int, calls: int = 5) -> float:
        times = []
        for _ in range(calls):
            t0 = clock()
            for _ in range(k):
                loss = step()
            float(loss)  # synchronizes (a no-op on the CPU, where the steps ran in this thread)
            times.append((clock() - t0) / k)
        return float(statistics.median(times))

    return compile_s, one_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=5.0, help="time_budget_s of paradnn's protocol per round (s)")
    parser.add_argument("--mode", default="default", help="torch_compile setting of the paradnn side")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: wall seconds; cpu: CPU seconds of this process (a shared host)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads for both sides (0: torch's default)")
    parser.add_argument("--json", help="write the per-round numbers here")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {SPEC}, batch {BATCH}; "
          f"clock {args.clock}")
    clock = CLOCKS[args.clock]
    unit = "examples/s" if args.clock == "wall" else "examples/CPU-s"
    paradnn_compile_s, paradnn_round = paradnn_side(args.budget, args.mode, clock)
    plain_compile_s, plain_round = plain_side(clock)
    print(f"compile (s): paradnn {paradnn_compile_s:.1f}, plain {plain_compile_s:.1f}")
    rows = []
    for r in range(args.rounds):
        if r % 2 == 0:
            p_s, k = paradnn_round()
            q_s = plain_round(k)
        else:
            q_s = plain_round(rows[-1]["k"])
            p_s, k = paradnn_round()
        rows.append({"round": r, "k": k, "paradnn_s_per_step": p_s, "plain_s_per_step": q_s,
                     "ratio": q_s / p_s})
        print(f"round {r}: K={k}  paradnn {BATCH / p_s:8.1f} {unit}  plain {BATCH / q_s:8.1f} {unit}  "
              f"ratio {q_s / p_s:.3f}")
    paradnn_eps = statistics.median(BATCH / row["paradnn_s_per_step"] for row in rows)
    plain_eps = statistics.median(BATCH / row["plain_s_per_step"] for row in rows)
    ratio = statistics.median(row["ratio"] for row in rows)
    print(f"median {unit}: paradnn {paradnn_eps:.1f}, plain torch.compile {plain_eps:.1f}; "
          f"paradnn / plain (median of per-round ratios) = {ratio:.3f} (target >= 0.95)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "ratio": ratio, "paradnn_examples_per_s": paradnn_eps,
                       "plain_examples_per_s": plain_eps, "clock": args.clock, "torch": torch.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
