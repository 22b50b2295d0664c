"""How a timed call runs its K training steps on XLA (the ``step_loop`` option of the JAX and
TensorFlow backends), and what ``auto`` picks. Framework-free.

* ``device``: one compiled program holding a loop of K steps, K a run-time argument (one
  program for every K the timing protocol picks); a call dispatches once.
* ``host``: a one-step program called K times without waiting between calls (the state
  donated); the calls queue on the device, as in a plain training loop.
* ``auto`` (:func:`auto_step_loop`): ``device``, except where the device loop is known to be
  slower:

  - convolutions on XLA:CPU (JAX and TensorFlow): XLA:CPU emits a convolution's weight
    gradient inside a loop body with a slow generic emitter (jax-ml/jax#12868). Measured on a
    2-core x86 host: a residual CNN (filters 16, image 64, batch 32) ran 7.5x slower per step
    in JAX's device loop (jax 0.10.2) and 10-11x slower in TensorFlow's (0.37-0.38 s against
    0.034-0.037 s, 2026-11-27), while FC and LSTM steps were as fast or faster in the loop
    (``benchmarks/bench_step_loops.py``, docs/performance.md).
  - JAX on GPUs: XLA:GPU runs a while loop whose trip count it
    cannot prove at compile time (ours: K is an argument) by copying the loop condition to the
    host and blocking until the device is done after every iteration (``WhileThunk`` in
    ``xla/backends/gpu/runtime/while_thunk.cc`` of openxla/xla: ``Memcpy`` of the predicate,
    then ``BlockHostUntilDone``, each iteration; only a loop with a known trip count skips
    it). The GPU idles for that round trip and the next kernel launch once per step, which a
    step of tens of microseconds would record as a slower platform. JAX's host loop keeps the
    device fed the way a user's loop does (the same dispatch path as a ``jax.jit`` loop). (Not yet
    measured on a GPU by paradnn: ``benchmarks/bench_gpu_peers.py --jax-step-loops device``
    measures the device loop beside it.) Not TensorFlow: a ``tf.function`` call costs about
    0.5 ms of host time (a tiny FC: 0.49-0.68 ms per step from the host, 19-24 us in the
    device loop, same host), more than a GPU's per-iteration wait,
    and neither loop has been measured with TensorFlow on a GPU.
"""

from __future__ import annotations

#: The values of the ``step_loop`` option.
STEP_LOOPS = ("auto", "device", "host")

#: framework -> what its ``auto`` means: the platforms (``device_platform``: "cpu", "gpu",
#: "tpu") where every program runs from the host, and those where a program with a convolution
#: does (module notes: XLA:GPU synchronizes with the host once per loop iteration and JAX's
#: host calls are cheap; XLA:CPU's loop bodies are slow for convolutions).
AUTO_RULES: dict[str, dict[str, tuple[str, ...]]] = {
    "jax": {"host_on": ("gpu",), "host_for_convolutions_on": ("cpu",)},
    "tensorflow": {"host_on": (), "host_for_convolutions_on": ("cpu",)},
}


def auto_rule(framework: str) -> dict[str, list[str]]:
    """What ``auto`` means for ``framework``, as data (:data:`AUTO_RULES`; a software field of
    the framework's records where the rule changed after records existed: a new rule is a new
    key)."""
    return {k: sorted(v) for k, v in AUTO_RULES[framework].items()}


def auto_step_loop(platform: str, has_convolution: bool = False, framework: str = "jax") -> str:
    """The loop ``auto`` means for a ``framework`` program on ``platform`` ("cpu", "gpu",
    "tpu"), a program with a convolution when ``has_convolution`` (:data:`AUTO_RULES`): "host"
    or "device"."""
    rule = AUTO_RULES[framework]
    if platform in rule["host_on"] or (has_convolution and platform in rule["host_for_convolutions_on"]):
        return "host"
    return "device"


__all__ = ["AUTO_RULES", "STEP_LOOPS", "auto_rule", "auto_step_loop"]
