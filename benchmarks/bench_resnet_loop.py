"""ResNet-50 training throughput: paradnn's measurement against a hand-written Flax training loop
of the same network, in the same process (issue 11's harness check on a GPU; target >= 0.97x).

The reference is what a Flax user writes, the plain JAX loop of ``bench_gpu_peers.py``
(:func:`bench_gpu_peers.plain_jax`): the same ``nn.Module`` (paradnn's ResNet-50, so the
comparison is the harness, not two models), paradnn's default optimizer for it (SGD with
momentum) with paradnn's hyperparameters, the float32 loss, a jitted step with the state donated,
and a plain Python loop over one synthetic batch. It is timed for a fixed number of steps before
and after paradnn's run (interleaved), and the ratio is paradnn's examples/s over the mean of
the two.

    python benchmarks/bench_resnet_loop.py [--batch 256] [--image 224] [--dtype bfloat16]
        [--steps 30] [--json out.json]

On a CPU use tiny sizes (``--batch 4 --image 32 --dtype float32 --steps 2 --steps-per-call 1``):
the code paths are the same. (Two images in bfloat16 diverge to NaN within a few steps of
learning rate 0.1, and paradnn then records an error, as it should.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import jax

import paradnn
from paradnn.measure import MeasureSettings
from paradnn.workload import Workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gpu_peers import plain_jax  # noqa: E402 - the peers' hand-written loop, one copy


def time_loop(run_steps: Callable[[int], None], sync: Callable[[], None], steps: int) -> float:
    """Seconds per step over ``steps`` steps of a plain loop after two warm-up steps."""
    run_steps(2)
    sync()
    t0 = time.perf_counter()
    run_steps(steps)
    sync()
    return (time.perf_counter() - t0) / steps


def compare(batch: int, image: int, dtype: str, steps: int, settings: MeasureSettings) -> dict[str, Any]:
    spec = paradnn.Real("resnet50", image=image)
    t0 = time.perf_counter()
    run_steps, sync, info = plain_jax(spec, batch, dtype, Workload(spec, batch, dtype).optimizer)
    before = time_loop(run_steps, sync, steps)
    hand_setup_s = time.perf_counter() - t0
    record = paradnn.run(spec, batch=batch, dtype=dtype, settings=settings)
    if record.status != "ok":
        raise SystemExit(f"paradnn run failed: {record.status}: {record.error}")
    after = time_loop(run_steps, sync, steps)
    loss_after = info["final_loss"]()
    hand = batch / ((before + after) / 2)
    ours = record.metrics["examples_per_sec"]
    return {
        "model": "resnet50", "batch": batch, "image": image, "dtype": dtype,
        "device_kind": jax.devices()[0].device_kind, "backend": jax.default_backend(),
        "paradnn_examples_per_sec": ours,
        "hand_examples_per_sec": hand,
        "hand_examples_per_sec_before_after": [batch / before, batch / after],
        "hand_steps_timed": steps, "hand_final_loss": loss_after, "hand_setup_s": hand_setup_s,
        "ratio": ours / hand, "target_ratio": 0.97,
        "paradnn_flops_utilization": record.metrics.get("flops_utilization"),
        "paradnn_peak_source": record.metrics.get("peak_source"),
        "paradnn_record": record.to_dict(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256, help="examples per step")
    parser.add_argument("--image", type=int, default=224, help="image side in pixels")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--steps", type=int, default=30, help="timed steps of the hand-written loop, per side")
    parser.add_argument("--steps-per-call", type=int, default=5, help="paradnn steps_per_call")
    parser.add_argument("--time-budget", type=float, default=5.0, help="paradnn time_budget_s (s)")
    parser.add_argument("--json", default=None, help="write the result here")
    args = parser.parse_args(argv)
    settings = MeasureSettings(steps_per_call=args.steps_per_call, warmup_calls=1, min_calls=6, max_calls=50,
                               ci_target=0.02, time_budget_s=args.time_budget)
    result = compare(args.batch, args.image, args.dtype, args.steps, settings)
    print(f"ResNet-50 {args.dtype} batch {args.batch} image {args.image} on {result['device_kind']}: "
          f"paradnn {result['paradnn_examples_per_sec']:.1f} examples/s, hand-written Flax loop "
          f"{result['hand_examples_per_sec']:.1f} examples/s (before/after "
          f"{result['hand_examples_per_sec_before_after'][0]:.1f}/{result['hand_examples_per_sec_before_after'][1]:.1f}), "
          f"ratio {result['ratio']:.3f} (target >= 0.97)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
