"""Framework-neutral sizes of a workload, known without building it: parameters, analytic
FLOPs, the bytes of its training state, batch and activations, and the memory floor that
refuses a model before anything is traced.

Everything here is arithmetic on a workload's fields and its family's entry
(:mod:`paradnn.families`); no framework is imported, so the planner, the sweep's progress line
and the runner's first check cost microseconds per config, whatever the size of the model
(``--layers 1000000000`` included).

Three tables live here, one place each: :data:`DTYPE_BYTES` (the compute dtypes a workload may
name), :data:`MEMORY_PARTS` (the parts a step's memory splits into, as record metrics and
figure labels) and :data:`OPTIMIZERS` (the optimizers a workload may name: how much state each keeps,
as a lower bound and as an estimate, and the hyperparameters that every framework's
implementation reads, so that JAX, TensorFlow and PyTorch train with the same settings).

Units: counts are parameters or elements, FLOPs count 2 per multiply-add, bytes are B per
device unless a name says otherwise.

>>> from paradnn import sizes
>>> sizes.OPTIMIZERS["adam"].floor_slots, sizes.OPTIMIZERS["adam"].learning_rate
(2, 0.001)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from paradnn import families
from paradnn.errors import ParadnnError, SpecError

#: The memory breakdown's parts (record metrics, B per device) -> the label figures give them,
#: in the order of a stacked bar (bottom to top): they sum to the compiled total where a backend
#: reports the breakdown (TBD's categories: weights, weight gradients, optimizer state, feature
#: maps, workspace).
MEMORY_PARTS: dict[str, str] = {
    "memory_weights_bytes": "weights", "memory_gradients_bytes": "weight gradients",
    "memory_optimizer_bytes": "optimizer state", "memory_activations_bytes": "feature maps",
    "memory_workspace_bytes": "workspace / other",
}

#: Bytes per element of each compute dtype a workload may name.
DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}
#: Bytes of a float32 value: master weights, gradients, optimizer slots, batch-norm statistics,
#: logits and the loss are float32 in every framework, whatever the compute dtype.
F32_BYTES = 4


@dataclass(frozen=True)
class Optimizer:
    """One optimizer a workload may name (``Workload.optimizer``).

    ``algorithm`` is the update rule a framework implements (``sgd``, ``rmsprop``, ``adam``,
    ``adafactor``); the other fields are its hyperparameters (None where the rule has no such
    parameter), read by ``make_optimizer`` of every backend. ``floor_slots`` and
    ``estimate_slots`` count full-size float32 copies of the parameters the optimizer keeps:
    the floor is a lower bound (the runner refuses a model before tracing only when it surely
    does not fit), the estimate is what the planner adds up. ``update_flops`` is the update's
    work per parameter and step (FLOP), as XLA's cost analysis counts optax's implementation of
    the rule on a float32 vector (measured with jax 0.12; transcendentals such as the square
    root are not FLOPs there): the optimizer's share of a step's executed FLOPs.
    """

    name: str
    algorithm: str
    description: str
    floor_slots: int
    estimate_slots: int
    update_flops: int
    learning_rate: float
    momentum: float | None = None  # momentum trace coefficient; None: no momentum
    decay: float | None = None  # rmsprop: decay of the squared-gradient average
    epsilon: float | None = None  # added to the denominator (adafactor: to the squared gradient)
    epsilon_in_sqrt: bool = False  # rmsprop: epsilon inside the square root (TF1's RMSProp)
    beta1: float | None = None  # adam: first-moment decay
    beta2: float | None = None  # adam: second-moment decay
    factor_min_dim: int | None = None  # adafactor: factor parameters whose 2 largest dims are >= this
    decay_rate: float | None = None  # adafactor: second-moment decay 1 - (step+1)**-decay_rate
    clipping_threshold: float | None = None  # adafactor: update clipped to this block RMS
    min_scale: float | None = None  # adafactor: the update scales by max(RMS(param), min_scale)


#: The optimizers a workload may name, in the order help texts list them.
OPTIMIZERS: dict[str, Optimizer] = {o.name: o for o in (
    # ParaDnn's optimizer, as its TF1 code built it: RMSProp with momentum, epsilon 1.0 inside
    # the square root (optax's eps_in_sqrt; Keras 3 and torch put it outside, so TensorFlow and
    # PyTorch run paradnn's own implementation). Slots: the squared-gradient average and the
    # momentum trace.
    Optimizer("rmsprop", "rmsprop", "RMSProp with momentum (TF1 semantics, ParaDnn's)",
              floor_slots=2, estimate_slots=2, update_flops=10, learning_rate=0.1, momentum=0.9, decay=0.9,
              epsilon=1.0, epsilon_in_sqrt=True),
    Optimizer("sgd", "sgd", "plain SGD", floor_slots=0, estimate_slots=0, update_flops=2,
              learning_rate=0.1),
    # m = g + momentum * m; p -= lr * m (optax.sgd with momentum, torch.optim.SGD's default
    # dampening 0).
    Optimizer("momentum", "sgd", "SGD with momentum", floor_slots=1, estimate_slots=1,
              update_flops=4, learning_rate=0.1, momentum=0.9),
    Optimizer("adam", "adam", "Adam (bias-corrected moments, epsilon outside the root)",
              floor_slots=2, estimate_slots=2, update_flops=13, learning_rate=1e-3, beta1=0.9, beta2=0.999,
              epsilon=1e-8),
    # optax.adafactor's defaults (Shazeer and Stern, 2018). Factored second moments: row and
    # column vectors for parameters whose two largest dimensions are >= 128, far smaller than
    # the parameters, so the floor counts none; the estimate counts one full copy (the unfactored
    # small matrices and vectors). optax applies min_scale inside multiply_by_parameter_scale
    # (not an argument). torch.optim.Adafactor is torch's variant: it takes decay_rate,
    # clipping_threshold and min_scale, factors every matrix, and keeps its own epsilon for g^2.
    Optimizer("adafactor", "adafactor", "Adafactor (factored second moments, no momentum)",
              floor_slots=0, estimate_slots=1, update_flops=20, learning_rate=1e-3, epsilon=1e-30,
              factor_min_dim=128, decay_rate=0.8, clipping_threshold=1.0, min_scale=1e-3),
)}


def optimizer(name: str) -> Optimizer:
    """The table entry of optimizer ``name``; SpecError naming the known ones otherwise."""
    if name not in OPTIMIZERS:
        raise SpecError("optimizer", name, "one of " + ", ".join(OPTIMIZERS))
    return OPTIMIZERS[name]


# -- counts ------------------------------------------------------------------------------------

def param_count(spec: Any) -> int | None:
    """Trainable parameters of ``spec`` from its family (a closed form, or the zoo's table);
    None where the family has no count that needs no framework."""
    return families.param_count(spec)


def train_flops_per_example(spec: Any) -> float | None:
    """Analytic FLOPs of one training step per example (matmuls and convolutions, forward and
    backward): the family's closed form, else its table of the reference backend's count (the
    zoo at its default input size); None where neither applies (a zoo model at another input
    size: the reference backend counts it from its jaxpr when it runs)."""
    fam = families.of(spec)
    if fam.train_flops_per_example is not None:
        return float(fam.train_flops_per_example(spec))
    if fam.reference_flops_per_example is not None:
        value = fam.reference_flops_per_example(spec)
        return None if value is None else float(value)
    return None


def model_flops_per_step(workload: Any) -> float | None:
    """Analytic FLOPs of one training step over the global batch (``workload.batch``
    examples): :func:`train_flops_per_example` times the batch, the same for every framework,
    dtype and optimizer (updates have no matmuls); None where it is not known without a
    framework."""
    per_example = train_flops_per_example(workload.spec)
    return None if per_example is None else per_example * workload.batch


#: Upper estimate of the non-matmul FLOPs per activation element a training step keeps for the
#: backward pass (``activation_elements``): activation functions, normalizations, residual sums,
#: softmax and loss, forward and backward. Measured as (XLA-executed - analytic matmul - optimizer
#: update) / (batch x activation elements) with jax 0.12 on the CPU over sweeps/smoke.yaml,
#: sweeps/small.yaml, tiny Transformers and a few larger configs: 1.6-2.7 (FC), 4.3-16.2 (RNN,
#: LSTM, GRU), 9.3-15.8 (Transformer), 9.5-14 (CNN with batch norm); docs/metrics.md,
#: "flops_mismatch compares like with like".
ELEMENTWISE_FLOPS_PER_ACTIVATION = 16


def elementwise_flops_per_step(workload: Any) -> float | None:
    """Analytic upper estimate of the work of one training step besides matmuls and
    convolutions, in FLOP over all devices: the optimizer's update (``update_flops`` of its
    table entry per parameter, on every device: data parallelism replicates it) plus
    :data:`ELEMENTWISE_FLOPS_PER_ACTIVATION` per kept activation element of each example of the
    global batch (0 where the family gives no activation estimate: a zoo model). None where the
    parameter count needs a framework. A framework that counts only matmuls (torch's
    flop_counter) executes none of it in its count; XLA counts all of it."""
    params = param_count(workload.spec)
    if params is None:
        return None
    update = optimizer(workload.optimizer).update_flops * float(params) * workload.devices
    elements = families.of(workload.spec).activation_elements
    per_example = sum(elements(workload.spec)) if elements is not None else 0.0
    return update + ELEMENTWISE_FLOPS_PER_ACTIVATION * per_example * workload.batch


def non_trainable_count(spec: Any) -> int:
    """float32 entries of the non-trainable state the step keeps besides the parameters and the
    optimizer's slots (batch-norm running means and variances); 0 where the family has none or
    does not count them (a lower bound)."""
    return int(families.of(spec).non_trainable_count(spec))


# -- bytes -------------------------------------------------------------------------------------

def state_bytes(params: int, optimizer_name: str, non_trainable: int = 0, bound: str = "estimate") -> int:
    """Bytes of the training state: float32 weights, the optimizer's float32 slots
    (``bound`` ``"estimate"`` or ``"floor"``: the table's ``estimate_slots`` or
    ``floor_slots``) and ``non_trainable`` float32 entries (batch-norm statistics)."""
    entry = optimizer(optimizer_name)
    slots = entry.estimate_slots if bound == "estimate" else entry.floor_slots
    return F32_BYTES * (params * (1 + slots) + non_trainable)


def gradient_bytes(params: int) -> int:
    """Bytes of the float32 gradients, one per parameter."""
    return F32_BYTES * params


def batch_bytes(spec: Any, batch: int, dtype: str) -> float:
    """Bytes of a synthetic input batch of ``batch`` examples (inputs in the compute dtype,
    int32 labels or tokens); NaN where the family gives no per-example size."""
    example = families.of(spec).example_bytes
    if example is None:
        return math.nan
    return float(batch * example(spec, DTYPE_BYTES[dtype]))


def activation_bytes(spec: Any, batch: int, dtype: str) -> float:
    """Estimated bytes of the activations ``batch`` examples keep from the forward pass for the
    backward pass (the family's ``activation_elements``: elements in the compute dtype plus
    float32 elements per example); NaN where the family has no estimate."""
    elements = families.of(spec).activation_elements
    if elements is None:
        return math.nan
    compute, f32 = elements(spec)
    return batch * (compute * DTYPE_BYTES[dtype] + f32 * F32_BYTES)


def known_counts(rows: Any) -> dict[str, tuple[float, float]]:
    """``workload_key -> (params, model FLOPs per step)`` of the ``ok`` rows of a store frame
    (``paradnn.load``) that hold both: the counts a run of that workload recorded, for the
    workloads whose sizes are not known without a framework."""
    out: dict[str, tuple[float, float]] = {}
    if rows is None or not len(rows) or "workload_key" not in rows:
        return out
    for status, key, params, flops in zip(rows["status"], rows["workload_key"], rows["params"],
                                          rows["model_flops_per_step"]):
        if status == "ok" and _finite(params) and _finite(flops):
            out[key] = (float(params), float(flops))
    return out


def config_sizes(workload: Any, known: Mapping[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """The sizes of one workload, per device: ``params``, ``model_flops_per_step`` (FLOP, the
    global batch), ``state_bytes``, ``gradient_bytes``, ``batch_bytes``, ``activation_bytes``,
    ``memory_bytes`` (their sum; NaN where a part is unknown), ``memory_floor_bytes`` (the sum
    of the known parts: a lower bound), ``counts_source`` and ``memory_source`` (sentences).

    ``known``: counts recorded by earlier runs (:func:`known_counts`), used where the spec has
    no count that needs no framework.
    """
    spec = workload.spec
    per_device = workload.batch // workload.devices
    params: float | None = param_count(spec)
    flops = model_flops_per_step(workload)
    source = "analytic"
    if (params is None or flops is None) and known and workload.key in known:
        # What sizes cannot count, a run of the same workload recorded (the reference count).
        stored_params, stored_flops = known[workload.key]
        params = stored_params if params is None else params
        flops = stored_flops if flops is None else flops
        source = "a stored record of the same workload"
    if params is None or flops is None:
        source = "unknown without a framework (no closed form, no table, no stored record)"
    nan = math.nan
    if params is None:
        return {"params": nan, "model_flops_per_step": nan if flops is None else flops,
                "state_bytes": nan, "gradient_bytes": nan,
                "batch_bytes": batch_bytes(spec, per_device, workload.dtype),
                "activation_bytes": activation_bytes(spec, per_device, workload.dtype),
                "memory_bytes": nan, "memory_floor_bytes": nan, "counts_source": source,
                "memory_source": "unknown: no parameter count"}
    params = int(params)
    state = state_bytes(params, workload.optimizer, non_trainable_count(spec))
    grads = gradient_bytes(params)
    batch_b = batch_bytes(spec, per_device, workload.dtype)
    act = activation_bytes(spec, per_device, workload.dtype)
    parts = {"batch": batch_b, "activations": act}
    missing = [name for name, value in parts.items() if math.isnan(value)]
    floor = state + grads + sum(v for v in parts.values() if not math.isnan(v))
    memory = nan if missing else floor
    memory_source = ("analytic estimate" if not missing else
                     f"unknown: family {workload.family} gives no estimate of its "
                     f"{' or '.join(missing)}; floor = weights + optimizer state + gradients"
                     + (" + batch" if "batch" not in missing else ""))
    return {"params": params, "model_flops_per_step": nan if flops is None else flops,
            "state_bytes": state, "gradient_bytes": grads, "batch_bytes": batch_b,
            "activation_bytes": act, "memory_bytes": memory, "memory_floor_bytes": floor,
            "counts_source": source, "memory_source": memory_source}


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


# -- the preflight floor -----------------------------------------------------------------------
# A model whose weights and optimizer state alone exceed the memory limit cannot run, and
# finding that out by tracing it can take minutes or never end (``--layers 1000000000``). The
# floor is a lower bound, so it never refuses a model that would fit: float32 master weights
# and the optimizer's ``floor_slots``, the synthetic batch one device holds (its inputs are on
# the device before the step runs), and the family's ``activation_floor`` where it has one (a
# Transformer at a 10^9-token length has few weights but its activations cannot fit; tracing
# it would exhaust the host first). Everything else is left to the compiled memory analysis.

def floor_bytes(workload: Any) -> dict[str, Any] | None:
    """Lower bound of one device's memory in bytes, without tracing: ``{"params",
    "weights_bytes", "optimizer_bytes", "batch_bytes", "activations_bytes", "total_bytes"}``
    (data parallelism replicates the state, so this is per device; the batch and activations
    of the per-device batch, 0 where the family gives no size); None where the parameter count
    needs a framework."""
    count = param_count(workload.spec)
    if count is None:
        return None
    params = int(count)
    weights = params * F32_BYTES
    optimizer_b = state_bytes(params, workload.optimizer, bound="floor") - weights
    per_device = max(workload.batch // workload.devices, 1)
    inputs = batch_bytes(workload.spec, per_device, workload.dtype)
    inputs = 0.0 if math.isnan(inputs) else inputs
    floor = families.of(workload.spec).activation_floor
    activations = 0.0
    if floor is not None:
        compute, f32 = floor(workload.spec)
        activations = per_device * (compute * DTYPE_BYTES[workload.dtype] + f32 * F32_BYTES)
    return {"params": params, "weights_bytes": weights, "optimizer_bytes": optimizer_b,
            "batch_bytes": int(inputs), "activations_bytes": int(activations),
            "total_bytes": weights + optimizer_b + int(inputs) + int(activations)}


def predicted_oom(workload: Any, memory_limit_bytes: int | None) -> dict[str, Any] | None:
    """``{"error": reason, "metrics": {...}}`` when ``workload`` cannot fit in
    ``memory_limit_bytes`` (B, one device) by the analytic floor alone; None when it may fit or
    cannot be told without tracing. The metrics carry ``oom_predicted=True`` (typed data that
    the executors read instead of the message) and the analytic ``params``."""
    if memory_limit_bytes is None:
        return None
    floor = floor_bytes(workload)
    if floor is None or floor["total_bytes"] <= memory_limit_bytes:
        return None
    parts = [f"weights {floor['weights_bytes']} B", f"{workload.optimizer} state {floor['optimizer_bytes']} B"]
    if floor["batch_bytes"]:
        parts.append(f"input batch {floor['batch_bytes']} B")
    if floor["activations_bytes"]:
        parts.append(f"activations at least {floor['activations_bytes']} B")
    reason = (f"predicted before compiling (analytic, nothing traced): {' + '.join(parts)} = "
              f"{floor['total_bytes']} B per device > limit {memory_limit_bytes} B "
              f"({floor['params']} parameters, counted without building the model)")
    return {"error": reason, "metrics": {"params": floor["params"], "oom_predicted": True}}


def refuse_oom(workload: Any, memory_limit_bytes: int | None, command: str) -> None:
    """For a command that traces ``workload`` without giving a record (``profile``, ``infeed``):
    raise ParadnnError (one line) when :func:`predicted_oom` says it cannot fit in
    ``memory_limit_bytes`` (B, one device), before anything is traced."""
    too_big = predicted_oom(workload, memory_limit_bytes)
    if too_big is not None:
        raise ParadnnError(f"{command}: the {workload.spec.family} model cannot fit: {too_big['error']}")


__all__ = ["DTYPE_BYTES", "ELEMENTWISE_FLOPS_PER_ACTIVATION", "F32_BYTES", "OPTIMIZERS", "Optimizer",
           "activation_bytes", "batch_bytes", "config_sizes", "elementwise_flops_per_step", "floor_bytes", "gradient_bytes", "known_counts", "model_flops_per_step",
           "non_trainable_count", "optimizer", "param_count", "predicted_oom", "refuse_oom",
           "state_bytes",
           "train_flops_per_example"]
