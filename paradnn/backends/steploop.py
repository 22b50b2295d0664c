"""How a timed call runs its K training steps on XLA (the ``step_loop`` option of the JAX and
TensorFlow backends), and what ``auto`` picks. Framework-free.

* ``device``: one compiled program holding a loop of K steps, K a run-time argument (one
  program for every K the timing protocol picks); a call dispatches once.
* ``host``: a one-step program called K times without waiting between calls (the state
  donated); the calls queue on the device, as in a plain training loop.
* ``auto`` (:func:`auto_step_loop`, the JAX backend's rule): ``device``, except where the
  device loop is known to be slower:

  - GPUs (:data:`HOST_LOOP_PLATFORMS`): XLA:GPU runs a while loop whose trip count it cannot
    prove at compile time (ours: K is an argument) by copying the loop condition to the host
    and blocking until the device is done after every iteration (``WhileThunk`` in
    ``xla/backends/gpu/runtime/while_thunk.cc`` of openxla/xla: ``Memcpy`` of the predicate,
    then ``BlockHostUntilDone``, each iteration; only a loop with a known trip count skips
    it). The GPU idles for that round trip and the next kernel launch once per step, which a
    step of tens of microseconds would record as a slower platform. The host loop keeps the
    device fed the way a user's loop does. (Not yet measured on a GPU by paradnn:
    ``benchmarks/bench_gpu_peers.py --jax-step-loops device`` measures the device loop beside
    it.)
  - convolutions on XLA:CPU: XLA:CPU emits a convolution's weight gradient inside a loop body
    with a slow generic emitter (jax-ml/jax#12868; docs/performance.md has the measurements).

TensorFlow's ``auto`` is the device loop on every platform: a ``tf.function`` call costs the
host more than a JAX call, so the trade differs, and neither loop has been measured with
TensorFlow on a GPU (docs/frameworks-tensorflow.md).
"""

from __future__ import annotations

#: The values of the ``step_loop`` option.
STEP_LOOPS = ("auto", "device", "host")

#: Platforms (``device_platform``: "cpu", "gpu", "tpu") where ``auto`` runs the host loop for
#: every program (module notes: XLA:GPU synchronizes with the host once per loop iteration).
HOST_LOOP_PLATFORMS = frozenset({"gpu"})


def auto_step_loop(platform: str, has_convolution: bool = False) -> str:
    """The loop ``auto`` means for a program on ``platform`` ("cpu", "gpu", "tpu"):
    "host" on :data:`HOST_LOOP_PLATFORMS`, and on "cpu" for a program with a convolution
    (``has_convolution``); else "device"."""
    if platform in HOST_LOOP_PLATFORMS or (platform == "cpu" and has_convolution):
        return "host"
    return "device"


__all__ = ["HOST_LOOP_PLATFORMS", "STEP_LOOPS", "auto_step_loop"]
