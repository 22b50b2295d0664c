"""JAX/Flax behind the backend interface: XLA ahead-of-time compilation with its memory and cost
analysis, the K-step program of :mod:`paradnn.backends.jax.step`, and the memory breakdown of
:mod:`paradnn.backends.jax.memory`. Behaviour and speed are those of the direct JAX path it replaced.

Besides training it has JAX's side of the system experiments: the probe's GEMMs and bandwidth
loop, operator and collective programs (:mod:`paradnn.backends.jax.system`), profiles
(:mod:`paradnn.backends.jax.profile`) and the infeed trainer (:mod:`paradnn.backends.jax.infeed`),
and the persistent compilation cache."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import os
import pickle
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import flax
import jax
import jaxlib
import optax
from jax.experimental import serialize_executable

from paradnn import hardware, precision
from paradnn.backends.jax import analyses, infeed, memory, profile, system, xla_stack
from paradnn.backends.jax import costs as costs
from paradnn.backends.jax import step as wl
from paradnn.backends.jax.models import ModelDef, build
from paradnn import frameworks
from paradnn.frameworks import Program


def check() -> None:
    """JAX is a core dependency: always importable where paradnn is."""


def state_bytes(state: Any) -> int:
    """Bytes of a state tree (arrays or shapes). The weights and optimizer state are arguments
    of the step, so this is a true lower bound on its memory. (Gradients are not: XLA fuses
    them into the update without materializing them.)"""
    return memory.tree_bytes(state)


def peak_bytes(mem: Any) -> int:
    """``memory_peak_bytes`` (B per device): XLA's peak where it reports one, else argument +
    output + temp - alias. On XLA:CPU the reported peak leaves the temporaries out (about the
    arguments alone: a ResNet-18 step reports 89 MiB against 142 MiB of buffers with jax 0.10),
    so there the larger of the two is taken."""
    reported = int(getattr(mem, "peak_memory_in_bytes", 0) or 0)
    total = int(mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
                - mem.alias_size_in_bytes)
    if not reported or jax.default_backend() == "cpu":
        return max(reported, total)
    return reported


@dataclass
class _Compiled:
    """The JAX side of a Program."""

    model: ModelDef
    optimizer: str
    mesh: Any
    state_shapes: Any
    batch_shapes: Any
    compiled: jax.stages.Compiled


#: Persistent-cache lookups JAX reported in this process (``jax.monitoring`` events), by
#: outcome: a compile that raised only ``misses`` was compiled here.
_JAX_CACHE_EVENTS = {"/jax/compilation_cache/cache_hits": "hits",
                     "/jax/compilation_cache/cache_misses": "misses"}
_JAX_CACHE_COUNTS = {"hits": 0, "misses": 0}


def _count_cache_event(event: str, **_: Any) -> None:
    name = _JAX_CACHE_EVENTS.get(event)
    if name is not None:
        _JAX_CACHE_COUNTS[name] += 1


jax.monitoring.register_event_listener(_count_cache_event)


def _load_program(key: str) -> tuple[Any, str, dict[str, Any], Any, Any] | None:
    """(compiled, loop, XLA options used, state shapes, batch shapes) of a measured program kept by
    :func:`_save_program` under ``key``, or None. An entry that cannot be loaded (damaged, or
    written by another jaxlib) is a miss: the program is compiled again."""
    blob = analyses.load_blob("program", key)
    if blob is None:
        return None
    try:
        payload, in_tree, out_tree, loop, used, state_shapes, batch_shapes = pickle.loads(blob)
        compiled = serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    except Exception:  # noqa: BLE001 - any unreadable entry is a cache miss, never a result
        return None
    return compiled, loop, used, state_shapes, batch_shapes


def _save_program(key: str, compiled: Any, loop: str, used: dict[str, Any], state_shapes: Any,
                  batch_shapes: Any) -> None:
    """Keep a measured program that this process has just compiled, serialized with its step
    loop and abstract inputs, so that a warm run neither traces nor lowers it. Only fresh
    compiles are kept (the caller checks): an XLA:CPU executable that JAX loaded from its own
    persistent cache serializes without its compiled functions, and another process's first
    call of such a blob fails ("Function ... fusion not found")."""
    try:
        payload, in_tree, out_tree = serialize_executable.serialize(compiled)
        blob = pickle.dumps((payload, in_tree, out_tree, loop, used, state_shapes, batch_shapes))
    except Exception:  # noqa: BLE001 - a program that cannot be serialized is compiled each time
        return
    analyses.save_blob("program", key, blob)


#: JAX's persistent-cache settings that :meth:`JaxBackend.configure_cache` changes.
_CACHE_OPTIONS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                  "jax_persistent_cache_min_entry_size_bytes")


class JaxBackend:
    """The reference backend: JAX + Flax + optax on XLA."""

    name = "jax"

    def device_info(self) -> dict[str, Any]:
        """``device_platform`` (cpu|gpu|tpu), ``device_kind``, ``device_count`` of the default
        JAX backend, ``host``, ``cpu_model``."""
        devices = jax.devices()
        return {
            "device_platform": devices[0].platform,
            "device_kind": devices[0].device_kind,
            "device_count": len(devices),
            "host": socket.gethostname(),
            "cpu_model": hardware.cpu_model(),
        }

    def software_info(self) -> dict[str, Any]:
        """Versions of JAX, jaxlib, Flax and optax, ``XLA_FLAGS``, and what each ``xla_preset``
        means on this device platform (``xla_compile_options``: the preset a record ran is in
        its settings)."""
        return {
            "framework_version": jax.__version__,
            "jax_version": jax.__version__,
            "jaxlib_version": jaxlib.__version__,
            "flax_version": flax.__version__,
            "optax_version": optax.__version__,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "xla_compile_options": xla_stack.describe(jax.default_backend()),
        }

    def device_memory_bytes(self) -> int | None:
        """Memory of one device in bytes: from the runtime where it reports it, else the spec
        table, else, on a CPU, the host's memory; None if none is known."""
        device = jax.devices()[0]
        try:
            stats = device.memory_stats()
        except Exception:  # some backends raise instead of returning None
            stats = None
        if stats and stats.get("bytes_limit"):
            return int(stats["bytes_limit"])
        entry = hardware.spec_peak(device.device_kind)
        if entry:
            return int(entry["mem"])
        return hardware.host_memory_bytes() if device.platform == "cpu" else None

    def compile(self, workload: Any, settings: Any) -> Program:
        options = settings.options_for(self.name)
        t_build = time.perf_counter()
        model = build(workload.spec, workload.dtype)
        optimizer = workload.optimizer
        mesh = wl.device_mesh(workload.devices)
        # A warm run loads the measured program this host compiled before (analyses cache,
        # keyed by the workload and everything that could change the executable) instead of
        # tracing and lowering it to find it in JAX's cache; a multi-device program is not kept.
        program_key = f"{workload.key}-{options.xla_preset}-{options.step_loop}-{options.matmul_precision}"
        t_load = time.perf_counter()
        kept = _load_program(program_key) if mesh is None and analyses.enabled() else None
        if kept is not None:
            compiled, loop, xla_used, state_shapes, batch_shapes = kept
            t0 = time.perf_counter()
            # Loading the kept program is this run's compile.
            phases: dict[str, float] = {"trace": t_load - t_build, "compile": t0 - t_load}
            source = "paradnn program cache"
        else:
            state_shapes, batch_shapes = wl.abstract_inputs(workload, model, optimizer, mesh)
            t0 = time.perf_counter()
            phases = {"trace": t0 - t_build}
            # Which loop "auto" picks depends on the program and the platform (both in the
            # analyses cache's key): once known, it is not looked for again (a trace saved).
            known = analyses.lookup("step_loop", workload.key) if options.step_loop == "auto" else None
            before = dict(_JAX_CACHE_COUNTS)
            compiled, loop, xla_used = wl.compile_measured(model, optimizer, mesh, state_shapes, batch_shapes,
                                                 options.xla_preset, known or options.step_loop,
                                                 phases=phases, precision_setting=options.matmul_precision)
            hit = _JAX_CACHE_COUNTS["hits"] > before["hits"]
            # Fresh: JAX looked in its persistent cache, missed, and compiled here (no hit).
            fresh = not hit and _JAX_CACHE_COUNTS["misses"] > before["misses"]
            source = "JAX persistent cache" if hit else "compiled"
            if options.step_loop == "auto" and known is None:
                analyses.store("step_loop", workload.key, loop)
            if fresh and mesh is None and analyses.enabled():
                t_save = time.perf_counter()
                _save_program(program_key, compiled, loop, xla_used, state_shapes, batch_shapes)
                phases["compile"] = phases.get("compile", 0.0) + time.perf_counter() - t_save
        used, bits = precision.used(workload.dtype, wl.precision_bits(options.matmul_precision)
                                    if workload.dtype == "float32" else None,
                                    precision.ops_in(x.shape for x in jax.tree_util.tree_leaves(state_shapes["params"])))
        metrics: dict[str, Any] = {
            "params": sum(math.prod(x.shape) for x in jax.tree_util.tree_leaves(state_shapes["params"])),
            "matmul_precision_used": used,
            "matmul_precision_bits": bits,
            # Loading a kept program is the warm run's compile, and keeping one part of it.
            "compile_s": phases.get("compile", 0.0) if kept is not None else time.perf_counter() - t0,
            "compile_source": source,
            "step_loop_used": loop,
            "xla_options_used": xla_stack.options_text(xla_used),
            "phase_trace_s": phases["trace"],
            "phase_compile_s": phases.get("compile", 0.0),
        }
        mem = compiled.memory_analysis()
        if mem is not None:
            metrics.update(
                memory_argument_bytes=int(mem.argument_size_in_bytes),
                memory_output_bytes=int(mem.output_size_in_bytes),
                memory_temp_bytes=int(mem.temp_size_in_bytes),
                memory_peak_bytes=peak_bytes(mem),
            )
        handle = _Compiled(model, optimizer, mesh, state_shapes, batch_shapes, compiled)
        return Program(workload, wl.k_step_call(compiled, loop), state_bytes(state_shapes),
                       metrics=metrics, tags=dict(model.tags), handle=handle,
                       devices=tuple(jax.devices()[:workload.devices]))

    def init(self, program: Program) -> tuple[Any, Any]:
        h: _Compiled = program.handle
        workload = program.workload
        # The state and batch come from a fixed seed: the same bytes every time, so a small
        # one is kept (analyses) and put on the device again instead of compiling its init.
        shapes = (h.state_shapes, h.batch_shapes)
        if h.mesh is None:
            kept = analyses.load_arrays("init", workload.key, shapes)
            if kept is not None:
                # may_alias=False: device-owned copies, donated by the step like computed ones.
                return jax.device_put(kept, may_alias=False)
        state, batch = wl.init_inputs(workload, h.model, h.optimizer, h.mesh)
        if h.mesh is None and analyses.storable(shapes):
            analyses.save_arrays("init", workload.key, (state, batch))
        return state, batch

    def prepare(self, workload: Any, settings: Any, limit_bytes: int | None) -> str:
        """Fill the caches a measurement of ``workload`` reads, allocating nothing on an
        accelerator (``paradnn.runner.prepare_workload``): the measured program compiled by
        :meth:`compile` itself (same options: JAX's persistent cache keeps the executable, the
        analyses cache the step-loop choice), the cost analysis and its loop variants, the
        memory breakdown's residual split, and the initial state: on a CPU, whose device memory
        is the host's, computed and kept (``analyses``, as a measurement would), elsewhere its
        programs only compiled. Returns what was done, in words."""
        program = self.compile(workload, settings)
        peak = program.metrics.get("memory_peak_bytes")
        if limit_bytes is not None and (program.state_bytes > limit_bytes
                                        or (peak is not None and peak > limit_bytes)):
            return "compiled; predicted out of memory from the compiled program"
        self.costs(program)
        self.memory_breakdown(program)
        h: _Compiled = program.handle
        if h.mesh is None and jax.default_backend() == "cpu" and analyses.storable((h.state_shapes, h.batch_shapes)):
            self.init(program)  # computes and keeps the state and batch (loads them if kept)
            return "compiled, analysed, initial state kept"
        wl.compile_init(workload, h.model, h.optimizer, h.mesh)
        return "compiled, analysed, init compiled"

    def sync(self, value: Any) -> Any:
        return jax.block_until_ready(value)

    def loss_value(self, loss: Any) -> float:
        return float(loss)

    def model_flops_per_step(self, workload: Any) -> float:
        """FLOPs of one training step of ``workload`` over its global batch (FLOP), counted from
        the reference model's jaxpr: the analytic count of models without a closed form or a
        published count (:func:`paradnn.runner.model_flops_per_step` asks the default backend)."""
        return costs.model_flops_per_step(workload)

    def hlo_cost_analysis(self, serialized_hlo: bytes) -> dict[str, float]:
        """XLA's HloCostAnalysis (``flops``, ``bytes accessed``...) of a serialized HloModuleProto
        as XLA:CPU compiles it: how another XLA framework (TensorFlow) has its HLO counted as
        JAX's programs are."""
        return costs.hlo_cost_analysis(serialized_hlo)

    def costs(self, program: Program) -> dict[str, Any]:
        h: _Compiled = program.handle
        out: dict[str, Any] = costs.xla_step_costs(program.workload, h.model, h.optimizer, h.compiled)
        added = out.pop("custom_call_flops_per_step")
        out["flops_source"] = ("XLA cost analysis + GEMM/convolution/attention custom calls counted from HLO shapes "
                               f"({added / out['flops_per_step']:.0%} of the FLOPs)" if added else "XLA cost analysis")
        return out

    def memory_breakdown(self, program: Program) -> dict[str, Any]:
        h: _Compiled = program.handle
        return memory.memory_breakdown(program.workload, h.model, h.state_shapes, h.batch_shapes,
                                       h.compiled, workload_key=program.workload.key).metrics()

    def is_oom(self, exc: BaseException) -> bool:
        # XLA raises XlaRuntimeError with status RESOURCE_EXHAUSTED: its type carries no code,
        # so the status name in the message is the one classification XLA offers.
        text = f"{type(exc).__name__}: {exc}"
        return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()

    def configure_cache(self, path: str | None) -> Callable[[], None]:
        """Turn on JAX's persistent compilation cache in ``path`` (None: leave it as it is) for
        every compile, however short; returns the function that restores the previous settings.
        An unwritable folder is an InfrastructureError."""
        previous = {n: getattr(jax.config, n) for n in _CACHE_OPTIONS}
        if path is not None:
            hardware.check_writable(Path(path), "the XLA compilation cache folder",
                                    "pass --cache-dir DIR with a writable folder, or --no-cache")
            jax.config.update("jax_compilation_cache_dir", str(path))
            # Sweep configs compile in well under JAX's default 1 s threshold on small models,
            # and a second run of a sweep is exactly when those compiles should be skipped.
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        restore_analyses = analyses.configure(path) if path is not None else (lambda: None)

        def restore() -> None:
            for name, value in previous.items():
                jax.config.update(name, value)
            restore_analyses()

        return restore

    def clear_caches(self) -> None:
        """Drop the executables of jitted closures: each config jits new ones, and a long-lived
        executor child must not grow with the sweep."""
        jax.clear_caches()

    # -- the probe (paradnn.hardware.probe) ---------------------------------------------------

    def gemm_methods(self, device_platform: str) -> dict[str, Callable[[str, int], Callable[[], Any] | None]]:
        """How the probe multiplies matrices: name -> factory(dtype, N) of a zero-argument call
        that multiplies two NxN matrices and waits for the result (None: not for that dtype).
        On a CPU: XLA under each distinct option set of the ``xla_preset`` presets (so the peak
        is at least what the measured step's own stack reaches), XLA with oneDNN, and numpy's
        BLAS; on an accelerator XLA's own default GEMM (cuBLAS/cuBLASLt on a GPU) at JAX's
        default matmul precision, ``ACCELERATOR_GEMM_QUEUE`` matmuls queued per call (its
        measured ceiling stands beside the vendor peak), and on a GPU where PyTorch is installed
        also ``torch.matmul`` (cuBLAS picked by torch; bfloat16 and float16), so that the
        ceiling is the best of the frameworks present."""
        if device_platform != "cpu":
            methods = {"xla-stock": system.xla_gemm(None, queue=system.ACCELERATOR_GEMM_QUEUE)}
            if device_platform == "gpu" and "torch" in frameworks.names() and frameworks.available("torch") is None:
                # Through the registry: no framework package imports another's.
                torch_gemm = frameworks.capability("torch", "accelerator_gemm", "multiply matrices for the probe")
                method = torch_gemm(system.ACCELERATOR_GEMM_QUEUE)
                method.version = importlib.metadata.version("torch")  # type: ignore[attr-defined]
                methods["torch-cublas"] = method
            return methods
        return {**system.xla_preset_gemms(), "xla-onednn": system.xla_gemm({"xla_cpu_use_onednn": True}),
                "numpy-blas": hardware.numpy_gemm}

    def probe_precision(self) -> str:
        """The internal precision of the probe's float32 GEMMs (JAX's default matmul precision
        on this device), a :mod:`paradnn.precision` level: measured, not assumed."""
        return precision.label(wl.precision_bits("default")["matmul"])

    def measure_bandwidth(self, megabytes: int, calls: int = 1) -> dict[str, Any]:
        """``bytes_per_sec`` (B/s, best streaming rate over an array of ``megabytes`` MiB,
        ``calls`` queued per timed repetition), ``cv`` (spread of the repetitions) and
        ``method`` (in words)."""
        return system.measure_bandwidth(megabytes, calls)

    def probe_versions(self) -> dict[str, Any]:
        """What a probed peak depends on in this framework: JAX and jaxlib versions, XLA_FLAGS,
        and JAX's default matmul precision where it is set (``JAX_DEFAULT_MATMUL_PRECISION``:
        the float32 GEMMs' precision, so a TF32 probe never stands for a full-float32 one)."""
        versions = {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
                    "xla_flags": os.environ.get("XLA_FLAGS", "")}
        default_precision = jax.config.jax_default_matmul_precision
        if default_precision is not None:  # unset: the key of earlier probes stays valid
            versions["default_matmul_precision"] = str(default_precision)
        return versions

    # -- the system experiments (paradnn.experiments.ops, collectives, scaling, profile, meters, infeed) ---

    op_program = staticmethod(system.op_program)
    cpu_child_env = staticmethod(system.cpu_child_env)
    collective_program = staticmethod(system.collective_program)
    simulated_devices = staticmethod(system.simulated_devices)
    simulate_host_devices = staticmethod(system.simulate_host_devices)
    profile_inputs = staticmethod(profile.profile_inputs)
    trace_step = staticmethod(profile.trace_step)
    profiler_trace = staticmethod(profile.profiler_trace)
    ledger_ops = staticmethod(profile.ledger_ops)
    infeed_trainer = staticmethod(infeed.trainer)

    @staticmethod
    def model_catalog() -> list[dict[str, Any]]:
        """The real models (``paradnn list models``): name, params (from this framework's
        shapes), default image, length and batch, description."""
        from paradnn.backends.jax.models.zoo.catalog import catalog

        return catalog()


BACKEND = JaxBackend()
