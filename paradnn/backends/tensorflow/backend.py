"""The TensorFlow backend: Keras 3 models on TensorFlow, the training step compiled by XLA.

A workload becomes a Keras model (``paradnn.backends.tensorflow.models``), paradnn's optimizer written in
TensorFlow (the same update rules and hyperparameters as ``paradnn.backends.jax.step.make_optimizer``,
whose optax definitions they follow term by term), and one ``tf.function(jit_compile=True)``
that runs K training steps in a ``tf.while_loop`` over a run-time K: one XLA program for every
K, the loop inside it ("device" step loop), as the JAX backend does. Keras and TensorFlow
variables are stateful, so the "state" passed through ``Program.call`` is a handle to them:
they are updated in place (TensorFlow's equivalent of donation).

Ahead of time: TensorFlow has no public ahead-of-time compile for a ``tf.function``, so
``compile`` traces the function (``get_concrete_function``) and runs it once with K = 0, which
makes XLA compile the whole program (the loop body included) without changing a variable;
``compile_s`` is the wall time of both. The model's variables and the synthetic batch exist
from then on: Keras creates variables when it builds a model, and tracing needs them.

Threads: TensorFlow sizes its intra-op pool (where XLA:CPU's compiled code runs) and inter-op
pool to every core of the machine by default. This backend sets both explicitly, before
TensorFlow starts, to the CPUs this process may run on (``os.sched_getaffinity``), or to
``$PARADNN_TF_INTRA_OP_THREADS`` / ``$PARADNN_TF_INTER_OP_THREADS``, and records the values
in ``software_info`` (``tf_intra_op_threads``, ``tf_inter_op_threads``).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from paradnn import frameworks, hardware, precision
from paradnn.backends.steploop import auto_rule, auto_step_loop
from paradnn.backends.tensorflow import pipeline, startup
from paradnn.backends.tensorflow.optimizers import Optimizer, make_optimizer
from paradnn.backends.tensorflow.threads import thread_setting
from paradnn.errors import ParadnnError, SpecError
from paradnn.frameworks import Program

#: Seed of the model's initial values and of the synthetic batch.
SEED = 0
#: ``flops_source`` of executed FLOPs: XLA's own HLO cost analysis, run on TensorFlow's HLO.
FLOPS_SOURCE = ("xla-cost-analysis: XLA's HloCostAnalysis of the step's HLO (TensorFlow's "
                "tf.function.experimental_get_compiler_ir) as XLA:CPU compiles it, through jaxlib's "
                "public jax.extend API; the K-step loop body counted once, RNN time loops from "
                "unrolled 1- and 2-step variants")

_threads: dict[str, int] = {}


def check() -> None:
    """Raise ImportError if TensorFlow or Keras 3 is missing."""
    for module in ("tensorflow", "keras"):
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"no module named {module!r}")


def start_tf():
    """TensorFlow, imported with Keras on TensorFlow and the thread pools sized (once)."""
    os.environ["KERAS_BACKEND"] = "tensorflow"
    if _threads:  # started before in this process
        import tensorflow as tf

        return tf
    # The first call imports TensorFlow and finds its devices with its C++ start-up lines
    # filtered from stderr (startup.quiet: TF_CPP_MIN_LOG_LEVEL alone does not hide them).
    with startup.quiet():
        import keras
        import tensorflow as tf

        if keras.backend.backend() != "tensorflow":
            raise ParadnnError(f"Keras was imported with the {keras.backend.backend()} backend before paradnn's "
                               "TensorFlow backend; set KERAS_BACKEND=tensorflow (Keras reads it once per process)")
        intra, inter = thread_setting("intra"), thread_setting("inter")
        try:
            tf.config.threading.set_intra_op_parallelism_threads(intra)
            tf.config.threading.set_inter_op_parallelism_threads(inter)
        except RuntimeError:
            pass  # TensorFlow already started in this process: record what it runs with
        tf.config.list_physical_devices()  # the platforms start here (CUDA's cuInit among them)
        _threads["intra"] = tf.config.threading.get_intra_op_parallelism_threads()
        _threads["inter"] = tf.config.threading.get_inter_op_parallelism_threads()
    return tf


#: TensorFlow's TensorFloat-32 switch for each ``matmul_precision`` setting (None: as found).
_TF32_ENABLED = {"default": None, "highest": False, "tf32": True}
#: The switch as TensorFlow started (its default, on: TF32 on Ampere and later GPUs).
_TF32_DEFAULT: dict[str, bool] = {}


def apply_matmul_precision(setting: str) -> None:
    """Set TensorFlow's TensorFloat-32 switch (``tf.config.experimental.
    enable_tensor_float_32_execution``, process-wide; XLA reads it when it compiles a function)
    for the ``matmul_precision`` setting; ``default`` restores the value paradnn found."""
    tf = start_tf()
    _TF32_DEFAULT.setdefault("enabled", tf.config.experimental.tensor_float_32_execution_enabled())
    wanted = _TF32_ENABLED[setting]
    tf.config.experimental.enable_tensor_float_32_execution(_TF32_DEFAULT["enabled"] if wanted is None else wanted)


#: :func:`precision_bits` by the switch's value: two XLA compiles per process and value, not per run.
_BITS: dict[bool, dict[str, float]] = {}


def precision_bits() -> dict[str, float]:
    """Effective mantissa bits (:func:`paradnn.precision.effective_bits`) of a float32 matmul
    and convolution compiled by XLA (``jit_compile``, as the measured step) with the current
    switch, on TensorFlow's default device."""
    tf = start_tf()
    enabled = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    if enabled not in _BITS:
        _BITS[enabled] = _measure_bits(tf)
    return _BITS[enabled]


def _measure_bits(tf: Any) -> dict[str, float]:
    ops = precision.probe_operands()
    matmul = tf.function(tf.linalg.matmul, jit_compile=True, autograph=False)
    conv = tf.function(lambda x, w: tf.nn.conv2d(x, w, strides=1, padding="VALID"), jit_compile=True,
                       autograph=False)
    return {"matmul": precision.effective_bits(matmul(*ops["matmul"][:2]).numpy(), ops["matmul"][2]),
            "conv": precision.effective_bits(conv(*ops["conv"][:2]).numpy(), ops["conv"][2])}


# --------------------------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------------------------

@dataclass
class _Handle:
    """What a TensorFlow Program keeps: the model, optimizer, batch and compiled functions."""

    tfm: Any  # paradnn.backends.tensorflow.models.TFModel
    optimizer: Optimizer
    batch: dict[str, Any]
    function: Any  # the tf.function(jit_compile=True) of the measured call
    step_loop: str
    stepped: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _nbytes(variables) -> int:
    tf = start_tf()
    return int(sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in variables))


def _device_platform() -> str:
    """Where TensorFlow runs: "gpu" where it sees a GPU, else "tpu" where it sees a TPU, else
    "cpu" (``device_platform``, as JAX names platforms)."""
    tf = start_tf()
    if tf.config.list_physical_devices("GPU"):
        return "gpu"
    return "tpu" if tf.config.list_logical_devices("TPU") else "cpu"


def _step_fn(tfm, optimizer: Optimizer) -> Callable:
    """One training step (x, y) -> float32 loss, updating the variables in place."""
    tf = start_tf()
    params = tfm.model.trainable_variables

    def step(x, y):
        with tf.GradientTape() as tape:
            outputs = tfm.model(x, training=True)
            loss = tfm.loss(outputs, {"inputs": x, "labels": y})
        optimizer.apply(tape.gradient(loss, params), params)
        return loss

    return step


def _signature(batch: dict[str, Any]) -> list:
    tf = start_tf()
    return [tf.TensorSpec(batch["inputs"].shape, batch["inputs"].dtype),
            tf.TensorSpec(batch["labels"].shape, batch["labels"].dtype)]


def _multi_step_function(step: Callable, batch: dict[str, Any]):
    """tf.function(jit_compile=True) (x, y, k) -> loss of the k-th step: a while loop over a
    run-time int32 k, so one compiled program serves every K."""
    tf = start_tf()

    @tf.function(jit_compile=True, autograph=False,
                 input_signature=[*_signature(batch), tf.TensorSpec((), tf.int32)])
    def multi_step(x, y, k):
        def body(i, _loss):
            return i + 1, step(x, y)

        _, loss = tf.while_loop(lambda i, _loss: i < k, body, (tf.constant(0), tf.constant(0.0, tf.float32)))
        return loss

    return multi_step


def _one_step_function(step: Callable, batch: dict[str, Any]):
    tf = start_tf()
    return tf.function(step, jit_compile=True, autograph=False, input_signature=_signature(batch))


def _build(workload, tfm=None) -> tuple[Any, Optimizer, dict[str, Any]]:
    """The Keras model (from the fixed seed), its optimizer's slots and the synthetic batch."""
    from paradnn import families

    start_tf()
    import keras

    keras.utils.set_random_seed(SEED)
    if tfm is None:
        tfm = families.builder(workload.spec, "tensorflow")(workload.spec, workload.dtype)
    optimizer = make_optimizer(workload.optimizer)
    optimizer.build(tfm.model.trainable_variables)
    batch = tfm.make_batch(SEED, workload.batch)
    return tfm, optimizer, batch


class TensorFlowBackend:
    """paradnn.backends.Backend for TensorFlow 2 + Keras 3 with XLA (jit_compile=True)."""

    name = "tensorflow"

    def device_info(self) -> dict[str, Any]:
        """``device_platform`` (gpu where TensorFlow sees one, else cpu), ``device_kind`` (the
        GPU's name; "cpu" on a CPU, as JAX names it), ``device_count``, ``host``, ``cpu_model``."""
        tf = start_tf()
        platform = _device_platform()
        if platform == "gpu":
            gpus = tf.config.list_physical_devices("GPU")
            details = tf.config.experimental.get_device_details(gpus[0])
            kind, count = details.get("device_name", "gpu"), len(gpus)
        elif platform == "tpu":
            kind, count = "tpu", len(tf.config.list_logical_devices("TPU"))
        else:
            kind, count = "cpu", 1
        return {"device_platform": platform, "device_kind": kind, "device_count": count,
                "host": socket.gethostname(), "cpu_model": hardware.cpu_model()}

    def software_info(self) -> dict[str, Any]:
        """Versions (``framework_version`` = ``tf_version``, ``keras_version``), the XLA flag
        variables TensorFlow read at start-up (``tf_xla_flags``, ``xla_flags``), the thread
        pools (``tf_intra_op_threads``, ``tf_inter_op_threads``: threads) and what the step
        loops mean (``tf_step_loops``, JSON: ``auto``'s rule, and the host loop compiled in
        ``compile``), part of the key since both changed (2026-11-27) under the same setting."""
        tf = start_tf()
        import keras

        return {"framework_version": tf.__version__, "tf_version": tf.__version__,
                "keras_version": keras.__version__, "keras_backend": keras.backend.backend(),
                "tf_xla_flags": os.environ.get("TF_XLA_FLAGS", ""),
                "xla_flags": os.environ.get("XLA_FLAGS", ""),
                "tf_intra_op_threads": _threads["intra"], "tf_inter_op_threads": _threads["inter"],
                "tf_step_loops": json.dumps({"auto": auto_rule(self.name), "host": "compiled in compile"},
                                            sort_keys=True, separators=(",", ":"))}

    def device_memory_bytes(self) -> int | None:
        """One GPU's memory (B) from paradnn's vendor table by its name; on a CPU the host's
        memory (cgroup-aware); None where neither is known."""
        info = self.device_info()
        if info["device_platform"] == "cpu":
            return hardware.host_memory_bytes()
        entry = hardware.spec_peak(info["device_kind"])
        return int(entry["mem"]) if entry else None

    def compile(self, workload: Any, settings: Any) -> Program:
        """Build the Keras model, optimizer and batch, trace the K-step function and compile it
        (run once with K = 0). The option ``step_loop`` host, and auto for a model with
        convolutions on a CPU (:mod:`paradnn.backends.steploop`), compiles a one-step function
        called K times instead (run once, its variables then restored)."""
        if workload.devices != 1:
            raise SpecError("devices", workload.devices, "1 with framework tensorflow (data "
                            "parallelism over several devices is implemented for jax only)")
        options = settings.options_for(self.name)
        tf = start_tf()
        apply_matmul_precision(options.matmul_precision)
        from paradnn.backends.tensorflow.models import trainable_params

        tfm, optimizer, batch = _build(workload)
        ops = precision.ops_in(v.shape for v in tfm.model.trainable_variables)
        used, bits = precision.used(workload.dtype, precision_bits() if workload.dtype == "float32" else None, ops)
        loop = options.step_loop
        if loop == "auto":  # convolutions on XLA:CPU run from the host (paradnn.backends.steploop)
            loop = auto_step_loop(_device_platform(), "conv" in ops, self.name)
        step = _step_fn(tfm, optimizer)
        variables = list(tfm.model.variables) + optimizer.slots
        # XLA compiles the host loop's one-step program at its first call, and it has no K = 0:
        # compile runs one step and puts every variable back, so that the compile is in
        # compile_s (with that one step) and not in the timing protocol's first call (which
        # sets K and spends the time budget), and init still hands out the fixed-seed state.
        initial = [v.numpy() for v in variables] if loop == "host" else []
        t0 = time.perf_counter()
        if loop == "device":
            function = _multi_step_function(step, batch)
            function.get_concrete_function()
            function(batch["inputs"], batch["labels"], tf.constant(0, tf.int32)).numpy()
        else:
            function = _one_step_function(step, batch)
            function.get_concrete_function()
            function(batch["inputs"], batch["labels"]).numpy()
        compile_s = time.perf_counter() - t0
        for v, value in zip(variables, initial):
            v.assign(value)
        handle = _Handle(tfm, optimizer, batch, function, loop)

        def call(state, batch, k):
            handle.stepped = handle.stepped or k > 0
            if loop == "device":
                return state, function(batch["inputs"], batch["labels"], tf.constant(k, tf.int32))
            loss = None
            for _ in range(k):  # no synchronization in between: the calls queue on the device
                loss = function(batch["inputs"], batch["labels"])
            return state, loss

        return Program(
            workload=workload, call=call, state_bytes=_nbytes(variables),
            metrics={"params": trainable_params(tfm.model), "compile_s": compile_s, "step_loop_used": loop,
                     "matmul_precision_used": used, "matmul_precision_bits": bits},
            tags={"framework": "tensorflow", "keras_model": tfm.model.name}, handle=handle,
        )

    def init(self, program: Program) -> tuple[Any, Any]:
        """(state, batch): the model's variables (created from the fixed seed when ``compile``
        built the model; the state is a handle to them) and the synthetic batch on the device.
        TensorFlow variables are updated in place, so a program whose steps ran cannot hand out
        its initial state again: ParadnnError then (compile a new program)."""
        handle: _Handle = program.handle
        if handle.stepped:
            raise ParadnnError("init: this TensorFlow program's variables were already trained in "
                               "place; compile the workload again for a fresh state")
        return handle, handle.batch

    def sync(self, value: Any) -> Any:
        """Wait until every device has finished its queued work (covers ``value``)."""
        tf = start_tf()
        tf.test.experimental.sync_devices()
        return value

    def loss_value(self, loss: Any) -> float:
        """The loss as a Python float (waits for it)."""
        return float(loss.numpy() if hasattr(loss, "numpy") else loss)

    def costs(self, program: Program) -> dict[str, Any]:
        """Executed FLOPs and bytes of one step (all devices): XLA's HloCostAnalysis of the
        program TensorFlow compiled for the step (see :func:`hlo_costs`); RNNs from unrolled 1-
        and 2-step variants (XLA counts a loop body once), as the JAX backend does."""
        handle: _Handle = program.handle
        tf = start_tf()
        if importlib.util.find_spec("jax") is None:
            return {"flops_per_step": None, "bytes_per_step": None,
                    "flops_source": "unavailable: XLA's cost analysis is reached through jax, not installed"}
        if handle.tfm.loop_length and handle.tfm.unrolled is not None:
            cost = step_costs(program.workload, handle.tfm)
        else:  # the measured program itself: its K-step loop body is one step
            args = [*_signature(handle.batch)]
            if handle.step_loop == "device":
                args.append(tf.TensorSpec((), tf.int32))
            cost = hlo_costs(handle.function.experimental_get_compiler_ir(*args))
        source = cost["source"]
        n = program.workload.devices
        return {"flops_per_step": cost["flops"] * n,
                "bytes_per_step": None if cost["bytes"] is None else cost["bytes"] * n,
                "flops_source": source}

    def memory_breakdown(self, program: Program) -> dict[str, Any]:
        """{}: TensorFlow exposes no memory analysis of a compiled XLA cluster (the sizes of
        its arguments, outputs and temporaries) before it runs."""
        return {}

    def is_oom(self, exc: BaseException) -> bool:
        """TensorFlow reports an allocation failure as ``tf.errors.ResourceExhaustedError``."""
        tf = start_tf()
        return isinstance(exc, tf.errors.ResourceExhaustedError)

    def configure_cache(self, path: str | None) -> Callable[[], None]:
        """A no-op (returns a no-op restore): TensorFlow's persistent XLA cache is the
        ``--tf_xla_persistent_cache_directory`` flag of ``TF_XLA_FLAGS``, read once when
        TensorFlow starts, so it cannot be pointed elsewhere per run."""
        return lambda: None

    # -- the host input pipeline of paradnn infeed (paradnn.backends.tensorflow.pipeline) ------

    make_jpegs = staticmethod(pipeline.make_jpegs)
    host_batches = staticmethod(pipeline.host_batches)
    pipeline_version = staticmethod(pipeline.tf_version)


def _cost_analysis(serialized_hlo: bytes) -> dict[str, float]:
    """XLA's HloCostAnalysis of a serialized HloModuleProto as XLA:CPU compiles it: a capability
    of the JAX backend (jax's public ``jax.extend`` API), asked through the registry, since no
    framework package imports another's."""
    return frameworks.capability("jax", "hlo_cost_analysis", "count the FLOPs of TensorFlow's HLO")(serialized_hlo)


def hlo_costs(compiler_ir: Callable[..., Any]) -> dict[str, Any]:
    """``{"flops", "bytes", "source"}`` of one step from a ``tf.function``'s
    ``experimental_get_compiler_ir(...)`` (FLOP and B of one device).

    TensorFlow's HLO before optimization (every dot and convolution still one, no device
    library calls) is compiled by XLA:CPU and counted by XLA's cost model, as JAX's cost analysis
    counts JAX's programs. Where TensorFlow runs on an accelerator, the FLOPs are those of the
    same HLO (the same matmuls and convolutions), but the bytes accessed of a CPU program do not
    describe the accelerator's, so bytes are None there."""
    cost = _cost_analysis(compiler_ir(stage="hlo_serialized"))
    if _device_platform() == "cpu":
        return {"flops": float(cost.get("flops", 0.0)), "bytes": float(cost.get("bytes accessed", 0.0)),
                "source": FLOPS_SOURCE}
    return {"flops": float(cost.get("flops", 0.0)), "bytes": None,
            "source": FLOPS_SOURCE + "; bytes not counted (TensorFlow runs on an accelerator)"}


def _one_step_costs(workload: Any, tfm: Any) -> dict[str, Any]:
    tfm, optimizer, batch = _build(workload, tfm)
    function = _one_step_function(_step_fn(tfm, optimizer), batch)
    return hlo_costs(function.experimental_get_compiler_ir(*_signature(batch)))


def step_costs(workload: Any, tfm: Any = None) -> dict[str, Any]:
    """:func:`hlo_costs` of one training step of ``workload`` (or of the built ``tfm``), built
    and traced afresh: XLA optimizes the HLO but generates no code. A model with a time loop
    (``loop_length`` T) is counted from its unrolled 1- and 2-step variants, every cost being
    affine in T: ``cost(T) = cost(1) + (T - 1) * (cost(2) - cost(1))``."""
    if tfm is None:
        from paradnn import families

        start_tf()
        tfm = families.builder(workload.spec, "tensorflow")(workload.spec, workload.dtype)
    if not (tfm.loop_length and tfm.unrolled is not None):
        return _one_step_costs(workload, tfm)
    c1, c2 = (_one_step_costs(workload, tfm.unrolled(n)) for n in (1, 2))
    t = tfm.loop_length
    return {k: (None if c1[k] is None or c2[k] is None else c1[k] + (t - 1) * (c2[k] - c1[k]))
            for k in ("flops", "bytes")} | {"source": c1["source"]}


BACKEND = TensorFlowBackend()

__all__ = ["BACKEND", "FLOPS_SOURCE", "SEED", "TensorFlowBackend", "check", "hlo_costs", "make_optimizer", "step_costs"]
