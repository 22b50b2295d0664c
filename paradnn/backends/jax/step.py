"""Workload -> initialized state, synthetic batch on the device, and a jitted training step.

The step is forward, float32 loss, gradients and optimizer update. Parameters stay float32
(master weights); modules compute in the workload's dtype. With ``devices > 1`` the global batch
is split over a 1-D ``data`` mesh, the state is replicated, and XLA's SPMD partitioner inserts
the gradient all-reduce (and cross-device batch-norm statistics).
"""

from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import optax

from paradnn import precision
from paradnn.backends.jax import xla_stack as xla_stack
from paradnn.errors import SpecError
from paradnn.backends.steploop import STEP_LOOPS, auto_step_loop
from paradnn.sizes import optimizer as optimizer_entry
from paradnn.backends.jax.models import ModelDef, build
from paradnn.workload import Workload

SEED = 0


def make_optimizer(name: str) -> optax.GradientTransformation:
    """The optimizer a workload names, with the hyperparameters of its row in
    ``paradnn.sizes.OPTIMIZERS`` (rmsprop is ParaDnn's: TF1 semantics, epsilon inside the
    square root). SpecError for a name the table does not have."""
    o = optimizer_entry(name)
    if o.algorithm == "rmsprop":
        return optax.rmsprop(o.learning_rate, decay=o.decay, eps=o.epsilon, momentum=o.momentum,
                             eps_in_sqrt=o.epsilon_in_sqrt)
    if o.algorithm == "sgd":
        return optax.sgd(o.learning_rate, momentum=o.momentum)
    if o.algorithm == "adam":
        return optax.adam(o.learning_rate, b1=o.beta1, b2=o.beta2, eps=o.epsilon)
    if o.algorithm == "adafactor":
        return optax.adafactor(o.learning_rate, min_dim_size_to_factor=o.factor_min_dim,
                               decay_rate=o.decay_rate, clipping_threshold=o.clipping_threshold,
                               eps=o.epsilon)
    raise SpecError("optimizer", name, f"an optimizer whose algorithm JAX implements ({o.algorithm} is not)")


@dataclass
class Prepared:
    """Everything needed to run and measure a workload on the device."""

    workload: Workload
    model: ModelDef
    optimizer_name: str
    state: dict[str, Any]  # {"params", "extra" (e.g. batch_stats), "opt_state"}
    batch: dict[str, jax.Array]
    step: Callable  # jitted (state, batch) -> (state, loss)
    mesh: jax.sharding.Mesh | None


def step_fn(model: ModelDef, optimizer_name: str) -> Callable:
    """The training step ``(state, batch) -> (state, loss)`` of ``model`` with the named
    optimizer, not jitted (the jaxpr FLOP counter traces it; :func:`jit_step` compiles it)."""
    tx = make_optimizer(optimizer_name)

    def step(state, batch):
        def loss_fn(params):
            variables = {"params": params, **state["extra"]}
            outputs, updates = model.module.apply(
                variables, batch["inputs"], train=True, mutable=list(state["extra"])
            )
            return model.loss(outputs, batch), updates

        (loss, extra), grads = jax.value_and_grad(loss_fn, has_aux=True)(state["params"])
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        return {"params": params, "extra": dict(extra), "opt_state": opt_state}, loss

    return step


def _repeat_k(step: Callable, state, batch, k):
    def body(_, carry):
        return step(carry[0], batch)

    return jax.lax.fori_loop(0, k, body, (state, jnp.zeros((), jnp.float32)))


#: The abstract steps-per-call argument of :func:`jit_multi_step`: an int32 scalar.
STEPS_ARG = jax.ShapeDtypeStruct((), jnp.int32)


def _shardings(mesh: jax.sharding.Mesh | None):
    """(replicated, batch-split) shardings over ``mesh``; (None, None) on one device."""
    if mesh is None:
        return None, None
    P = jax.sharding.PartitionSpec
    return jax.sharding.NamedSharding(mesh, P()), jax.sharding.NamedSharding(mesh, P("data"))


def device_mesh(devices: int) -> jax.sharding.Mesh | None:
    """A 1-D ``data`` mesh over the first ``devices`` devices of the default backend."""
    available = jax.devices()
    if devices > len(available):
        raise SpecError("devices", devices, f"at most {len(available)} on backend {available[0].platform}")
    if devices == 1:
        return None
    return jax.sharding.Mesh(np.array(available[:devices]), ("data",))


def _init_fn(model: ModelDef, optimizer_name: str) -> Callable:
    tx = make_optimizer(optimizer_name)

    def init(key):
        inputs = model.make_batch(key, 1)["inputs"]
        variables = model.module.init(key, inputs, train=False)
        params = variables["params"]
        extra = {k: v for k, v in variables.items() if k != "params"}
        return {"params": params, "extra": extra, "opt_state": tx.init(params)}

    return init


def abstract_inputs(workload: Workload, model: ModelDef, optimizer_name: str, mesh=None):
    """(state, batch) as ``jax.ShapeDtypeStruct`` trees with their shardings: nothing allocated."""
    replicated, split = _shardings(mesh)
    key = jax.random.key(SEED)
    state = jax.eval_shape(_init_fn(model, optimizer_name), key)
    batch = jax.eval_shape(lambda k: model.make_batch(k, workload.batch), key)
    if mesh is not None:
        state = jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=replicated), state)
        batch = jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=split), batch)
    return state, batch


def jit_multi_step(model: ModelDef, optimizer_name: str, mesh=None, step: Callable | None = None) -> Callable:
    """The jitted ``(state, batch, k) -> (state, loss)`` running ``k`` training steps, ``k`` an
    int32 scalar chosen at run time (one compiled program for every K), the state donated.
    XLA keeps the dynamic loop as a while loop, whose cost analysis counts one step. ``step``:
    the training step to repeat, when already at hand (:func:`replay`); by default
    :func:`step_fn`'s."""
    replicated, split = _shardings(mesh)
    kwargs: dict[str, Any] = {"donate_argnums": (0,)}
    if replicated is not None:
        kwargs.update(in_shardings=(replicated, split, replicated), out_shardings=(replicated, replicated))
    return jax.jit(partial(_repeat_k, step or step_fn(model, optimizer_name)), **kwargs)


def replay(traced: jax.stages.Traced) -> Callable:
    """The function that ``traced`` recorded, as one that binds its recorded operations again
    (same arguments, same outputs). Tracing it runs none of the model's Python (Flax modules,
    optax): a second program around an already traced step, the K-step loop, costs a fraction of
    a trace (``benchmarks/bench_trace.py``) and lowers to the same program text
    (tests/test_xla_stack.py)."""
    run = jax.extend.core.jaxpr_as_fun(traced.jaxpr)

    def step(*args: Any) -> Any:
        return jax.tree_util.tree_unflatten(traced.out_tree, run(*jax.tree_util.tree_leaves(args)))

    return step


def jit_step(model: ModelDef, optimizer_name: str, mesh=None, donate: bool = False) -> Callable:
    """The jitted single training step ``(state, batch) -> (state, loss)`` (costs, profiles;
    with ``donate`` the state is donated, as the measured host loop needs)."""
    replicated, split = _shardings(mesh)
    kwargs: dict[str, Any] = {"donate_argnums": (0,)} if donate else {}
    if replicated is not None:
        kwargs.update(in_shardings=(replicated, split), out_shardings=(replicated, replicated))
    return jax.jit(step_fn(model, optimizer_name), **kwargs)


def compile_step(call: Callable, *args: Any, preset: str = xla_stack.DEFAULT_PRESET) -> jax.stages.Compiled:
    """Compile the jitted ``call`` ahead of time for ``args`` (arrays or ``jax.ShapeDtypeStruct``
    trees) with the XLA options of ``preset`` on the default backend (its fallback included:
    :func:`paradnn.backends.jax.xla_stack.compile_lowered`)."""
    return xla_stack.compile_lowered(call.lower(*args), preset, jax.default_backend())[0]


def _likely_convolutional(batch: Any) -> bool:
    """Whether a step on ``batch`` (arrays or ``jax.ShapeDtypeStruct``s) most likely convolves:
    its inputs are real numbers of rank 3 or more (images, spectrograms), not (examples,
    features) or token ids. Only the order of tracing depends on it (:func:`compile_measured`);
    the step loop is chosen from the program's own operations (:func:`_has_convolution`)."""
    inputs = batch["inputs"]
    return len(inputs.shape) >= 3 and jnp.issubdtype(inputs.dtype, jnp.floating)


def _has_convolution(jaxpr: Any) -> bool:
    """Whether a (closed) jaxpr or any jaxpr nested in it (loop bodies, branches, custom
    derivatives) has a convolution: the operations its lowering turns into
    ``stablehlo.convolution``."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "conv_general_dilated":
            return True
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    if _has_convolution(sub):
                        return True
    return False


#: JAX's ``jax_default_matmul_precision`` for each ``matmul_precision`` setting
#: (:mod:`paradnn.precision`); None leaves JAX's own default (and a user's
#: ``JAX_DEFAULT_MATMUL_PRECISION``) untouched.
JAX_MATMUL_PRECISION: dict[str, str | None] = {"default": None, "highest": "highest", "tf32": "tensorfloat32"}


def matmul_precision(setting: str) -> Any:
    """The context in which programs are traced for the ``matmul_precision`` setting: JAX reads
    its default precision when it traces, so a program lowered inside keeps it."""
    if setting not in JAX_MATMUL_PRECISION:
        raise SpecError("matmul_precision", setting, "one of " + ", ".join(JAX_MATMUL_PRECISION))
    name = JAX_MATMUL_PRECISION[setting]
    return jax.default_matmul_precision(name) if name else contextlib.nullcontext()


@functools.cache
def precision_bits(setting: str) -> dict[str, float]:
    """Effective mantissa bits (:func:`paradnn.precision.effective_bits`) of a float32 matmul
    and convolution on the default device, traced under ``setting``: the precision the measured
    program's float32 products use. Measured once per process and setting (two tiny programs)."""
    ops = precision.probe_operands()
    conv = partial(jax.lax.conv_general_dilated, window_strides=(1, 1), padding="VALID",
                   dimension_numbers=("NHWC", "HWIO", "NHWC"))
    with matmul_precision(setting):
        results = {"matmul": jax.jit(jnp.matmul)(*ops["matmul"][:2]), "conv": jax.jit(conv)(*ops["conv"][:2])}
    return {op: precision.effective_bits(np.asarray(r), ops[op][2]) for op, r in results.items()}


def compile_measured(model: ModelDef, optimizer_name: str, mesh, state, batch,
                     preset: str = xla_stack.DEFAULT_PRESET, loop: str = "auto",
                     phases: dict[str, float] | None = None, precision_setting: str = "default",
                     ) -> tuple[jax.stages.Compiled, str, dict[str, Any]]:
    """The measured program, compiled ahead of time for abstract ``state``/``batch`` with the XLA
    options of ``preset`` (:func:`paradnn.backends.jax.xla_stack.compile_lowered`) and the
    ``matmul_precision`` setting ``precision_setting``, the step loop it uses (``STEP_LOOPS``:
    "device" or "host") and the XLA options it was compiled with. The runner, ``maxbatch`` and
    ``plan`` all compile it here, so what fits is what runs. ``phases``, when given, gets the
    seconds spent tracing and lowering (``"trace"``) and compiling (``"compile"``) added to it."""
    if loop not in STEP_LOOPS:
        raise SpecError("step_loop", loop, "one of " + ", ".join(STEP_LOOPS))
    phases = {} if phases is None else phases
    platform = jax.default_backend()
    matmul_precision(precision_setting)  # a bad setting fails before any tracing

    def timed(phase: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            if phase == "compile":  # the precision is in the lowered program already
                return fn()
            with matmul_precision(precision_setting):
                return fn()
        finally:
            phases[phase] = phases.get(phase, 0.0) + time.perf_counter() - t0

    def trace_single() -> jax.stages.Traced:
        return timed("trace", lambda: jit_step(model, optimizer_name, mesh, donate=True).trace(state, batch))

    def trace_multi(step: Callable | None = None) -> jax.stages.Traced:
        return timed("trace", lambda: jit_multi_step(model, optimizer_name, mesh, step=step)
                     .trace(state, batch, STEPS_ARG))

    single = multi = None  # the traced single step and K-step loop, once traced
    if loop == "auto":
        by_platform = {auto_step_loop(platform, convolution, "jax") for convolution in (False, True)}
        if len(by_platform) == 1:
            loop = by_platform.pop()  # the platform decides alone (a GPU: host), no program read
        else:
            # The program decides (a CPU): a convolution is slow in an XLA:CPU loop body. The
            # model is traced once, in the form it most likely runs in: a batch of images or
            # spectrograms as the host loop's single step (whose trace the K-step loop replays if
            # the step has no convolution after all), any other batch as the K-step loop.
            if _likely_convolutional(batch):
                single = traced = trace_single()
            else:
                multi = traced = trace_multi()
            loop = auto_step_loop(platform, _has_convolution(traced.jaxpr), "jax")
    if loop == "device":
        if multi is None:
            multi = trace_multi(replay(single) if single is not None else None)
        lowered = timed("trace", multi.lower)
    else:
        if single is None:
            single = trace_single()
        lowered = timed("trace", single.lower)
    compiled, used = timed("compile", lambda: xla_stack.compile_lowered(lowered, preset, platform))
    return compiled, loop, used


def k_step_call(compiled: jax.stages.Compiled, loop: str) -> Callable:
    """``call(state, batch, k) -> (state, loss)`` running k steps of a program from
    :func:`compile_measured` (the timing protocol's interface)."""
    if loop == "device":
        return lambda state, batch, k: compiled(state, batch, np.int32(k))

    def call(state, batch, k):
        loss = None
        for _ in range(k):  # no synchronization in between: the calls queue on the device
            state, loss = compiled(state, batch)
        return state, loss

    return call


# Initialization runs once and is never timed, yet XLA:CPU spends most of a small model's
# set-up optimizing it (threefry kernels for every parameter: 16.6 s -> 2.5 s for a tiny
# bottleneck CNN at level 0). The measured training step is compiled by ``compile_step``.
_CHEAP_CPU_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def untimed_compile_options() -> dict[str, Any] | None:
    """XLA options for programs that are never timed (initialization, the cost analysis's loop
    variants): on XLA:CPU a cheap LLVM back end (these options change code generation only, not
    the optimized HLO that cost analysis reads); elsewhere the defaults (None)."""
    return dict(_CHEAP_CPU_COMPILE) if jax.default_backend() == "cpu" else None


def _run_once(fn: Callable, out_shardings, *args):
    lowered = jax.jit(fn, out_shardings=out_shardings).lower(*args)
    return lowered.compile(untimed_compile_options())(*args)


def init_inputs(workload: Workload, model: ModelDef, optimizer_name: str, mesh=None):
    """Initialized state and synthetic batch, created on the device(s) from a fixed seed."""
    replicated, split = _shardings(mesh)
    key_init, key_data = jax.random.split(jax.random.key(SEED))
    state = _run_once(_init_fn(model, optimizer_name), replicated, key_init)
    batch = _run_once(lambda k: model.make_batch(k, workload.batch), split, key_data)
    return state, batch


def compile_init(workload: Workload, model: ModelDef, optimizer_name: str, mesh=None) -> None:
    """Compile, without running, the two programs of :func:`init_inputs` (state and batch) with
    the same options, so that JAX's persistent cache holds them: what a worker compiling ahead
    does where it must not allocate on the device (an accelerator)."""
    replicated, split = _shardings(mesh)
    key = jax.random.key(SEED)
    for fn, sharding in ((_init_fn(model, optimizer_name), replicated),
                         (lambda k: model.make_batch(k, workload.batch), split)):
        jax.jit(fn, out_shardings=sharding).lower(key).compile(untimed_compile_options())


def prepare(workload: Workload, model: ModelDef | None = None) -> Prepared:
    """Build the model, initialize the state and batch on the device(s), jit one step."""
    model = model or build(workload.spec, workload.dtype)
    optimizer_name = workload.optimizer or model.default_optimizer
    mesh = device_mesh(workload.devices)
    state, batch = init_inputs(workload, model, optimizer_name, mesh)
    return Prepared(workload, model, optimizer_name, state, batch, jit_step(model, optimizer_name, mesh), mesh)
