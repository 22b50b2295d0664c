"""TensorFlow backend vs a plain Keras ``model.fit`` loop (issue 10's performance target).

The same FC model (layers 4, nodes 1024, input 2000, output 1000, batch 256, float32): once
through paradnn's TensorFlow backend (``Backend.compile`` -> ``Program.call`` timed by
``paradnn.measure.time_calls``, K steps in one XLA while loop per call), once as a plain Keras
model trained by ``model.fit(..., jit_compile=True, steps_per_execution=K)`` on a repeated
in-memory batch, with Keras's own RMSprop (lr 0.1, rho 0.9, momentum 0.9, epsilon 1.0: the same
work per step as paradnn's TF1-style RMSprop). Rounds alternate between the two in one process
(one TensorFlow, the same thread pools), so machine load affects both alike. Both sides report
the median time per step: paradnn's protocol over its timed calls, Keras's from the wall time
between consecutive ``on_train_batch_end`` callbacks (one per K steps), the epoch's set-up
excluded. Target: paradnn's throughput >= 0.95x Keras's.

    python benchmarks/bench_tf.py [--rounds 3] [--k 4] [--calls 6] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from paradnn.backends.tensorflow import backend as tf_backend
from paradnn.measure import MeasureSettings, time_calls
from paradnn.families.fc import FC
from paradnn.workload import Workload

SPEC, BATCH = FC(layers=4, nodes=1024, input=2000, output=1000), 256


def paradnn_side(k: int, budget_s: float):
    """A function that runs one timed round through the backend: seconds per step (median)."""
    backend = tf_backend.BACKEND
    settings = MeasureSettings(steps_per_call=k, warmup_calls=1, warmup_s=0.0, min_calls=6,
                               max_calls=50, ci_target=0.02, time_budget_s=budget_s)
    program = backend.compile(Workload(SPEC, BATCH, "float32", "rmsprop", framework="tensorflow"), settings)
    state, batch = backend.init(program)

    def round_() -> float:
        return time_calls(program.call, state, batch, settings, sync=backend.sync).median_s

    return round_, program.metrics["compile_s"]


def keras_side(k: int, calls: int):
    """A function that runs one ``model.fit`` round of ``calls`` x K steps: seconds per step."""
    tf = tf_backend.start_tf()
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((SPEC.input,))]
                             + [keras.layers.Dense(SPEC.nodes, activation="relu") for _ in range(SPEC.layers)]
                             + [keras.layers.Dense(SPEC.output)])
    model.compile(optimizer=keras.optimizers.RMSprop(0.1, rho=0.9, momentum=0.9, epsilon=1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True, steps_per_execution=k)
    x = tf.random.stateless_uniform((BATCH, SPEC.input), (0, 1), -0.5, 0.5)
    y = tf.random.stateless_uniform((BATCH,), (0, 2), 0, SPEC.output, tf.int32)
    data = tf.data.Dataset.from_tensors((x, y)).repeat()

    class Clock(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.times = []

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter())

    def round_() -> float:
        clock = Clock()
        model.fit(data, epochs=1, steps_per_epoch=(calls + 1) * k, verbose=0, shuffle=False, callbacks=[clock])
        gaps = [b - a for a, b in zip(clock.times, clock.times[1:])]  # the first call is warm-up
        return statistics.median(gaps) / k

    t0 = time.perf_counter()
    model.fit(data, epochs=1, steps_per_epoch=k, verbose=0, shuffle=False)  # trace and compile
    return round_, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=4, help="training steps per call, both sides")
    ap.add_argument("--calls", type=int, default=6, help="timed calls per Keras round")
    ap.add_argument("--budget", type=float, default=4.0, help="paradnn's time budget per round (s)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    ours, ours_compile = paradnn_side(args.k, args.budget)
    theirs, theirs_compile = keras_side(args.k, args.calls)
    rows = []
    for r in range(args.rounds):
        a, b = ours(), theirs()
        rows.append({"round": r, "paradnn_step_s": a, "keras_fit_step_s": b, "ratio": b / a})
        print(f"round {r}: paradnn {a * 1e3:.1f} ms/step, keras fit {b * 1e3:.1f} ms/step, "
              f"throughput ratio paradnn/keras {b / a:.3f}", flush=True)
    ratio = statistics.median(row["ratio"] for row in rows)
    sw = tf_backend.BACKEND.software_info()
    print(f"FC {SPEC.layers}x{SPEC.nodes} input {SPEC.input} output {SPEC.output}, batch {BATCH}, float32, "
          f"K={args.k}; TensorFlow {sw['tf_version']}, Keras {sw['keras_version']}, "
          f"{sw['tf_intra_op_threads']} intra-op / {sw['tf_inter_op_threads']} inter-op threads")
    print(f"compile: paradnn {ours_compile:.1f} s, keras fit (first call) {theirs_compile:.1f} s")
    print(f"median throughput ratio paradnn/keras fit = {ratio:.3f} (target >= 0.95): "
          f"{'met' if ratio >= 0.95 else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rows, "ratio": ratio, "k": args.k, "software": sw}, f, indent=1)


if __name__ == "__main__":
    main()
