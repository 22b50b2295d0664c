"""FLOPs and bytes of one training step: XLA cost analysis (with loops handled) and analytic counts.

XLA's cost analysis counts a loop body once (docs/metrics.md, "Loops"): a K-step call reports one
step, and an RNN scanned over T steps reports about 1/T of its work. So:

* models without inner loops take the cost of the measured program: the K-step call, whose trip
  count is a run-time argument, so XLA keeps it a while loop and counts one step (tested), or
  the one-step program of the host loop;
* models with a ``lax.scan`` of ``loop_length`` iterations compile their fully unrolled 1- and
  2-iteration variants; every cost of such a step is affine in the loop length, so
  ``cost(T) = cost(1) + (T - 1) * (cost(2) - cost(1))``.

Sharded programs report per-device costs; totals here are per step over all devices.

XLA's cost analysis gives a custom call no FLOPs. On a GPU the matmuls and convolutions of the
optimized module are custom calls to cuBLAS and cuDNN, so the cost analysis of an FC step there
holds its element-wise work alone (an H100, jax 0.11.2: 2.7e11 of 1.25e13 FLOPs, a utilization
of 1.3% for 58%); cuDNN's fused attention is such a call too. Those calls' FLOPs are counted from
their shapes in the HLO text (:func:`paradnn.experiments.profile.custom_call_flops`) and added.
(Until 2026-11-29 they were added only where the cost analysis came to less than the calls'
FLOPs, meant to catch a version that costs them itself; on an H200 that dropped a small
Transformer's cuDNN attention, most likely because XLA had counted its matmuls (Triton fusions
there, not custom calls) and those alone came to more. XLA's cost analysis gives a custom call
-1 FLOPs, "unknown": on that H200 the program of one cuDNN convolution read -1, so the calls are
never in its sum.)
"""

from __future__ import annotations

import jax

from paradnn.backends.jax import analyses
from paradnn.backends.jax import step as wl
from paradnn.backends.jax.models import ModelDef
from paradnn.workload import Workload


def _cost_dict(compiled: jax.stages.Compiled) -> dict[str, float]:
    """FLOPs and bytes of one execution of ``compiled``: XLA's cost analysis plus the FLOPs of
    the GEMM, convolution and attention custom calls it leaves uncounted (``custom_call_flops``: FLOP)."""
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):  # older jaxlibs return one dict per program
        cost = cost[0] if cost else {}
    flops = float(cost.get("flops", 0.0))
    text = compiled.as_text()
    custom = 0.0
    if "custom-call" in text:
        # Imported here: the HLO walk builds a pandas table, which most runs (no custom calls,
        # every CPU run here) never need before their first line is out.
        from paradnn.experiments import profile

        custom = profile.custom_call_flops(text)
    return {"flops": flops + custom, "bytes": float(cost.get("bytes accessed", 0.0)), "custom_call_flops": custom}


def has_while_loop(compiled: jax.stages.Compiled) -> bool:
    """Whether the optimized HLO still contains a while loop."""
    return " while(" in compiled.as_text()


def lower_single_step(workload: Workload, model: ModelDef, optimizer_name: str) -> jax.stages.Lowered:
    """Lower one training step of ``model`` on abstract inputs (nothing allocated)."""
    mesh = wl.device_mesh(workload.devices)
    state, batch = wl.abstract_inputs(workload, model, optimizer_name, mesh)
    return wl.jit_step(model, optimizer_name, mesh).lower(state, batch)


def xla_step_costs(
    workload: Workload,
    model: ModelDef,
    optimizer_name: str,
    multi_step_compiled: jax.stages.Compiled,
) -> dict[str, float]:
    """``flops_per_step`` and ``bytes_per_step`` (FLOP, B; all devices) from XLA cost analysis."""
    if model.loop_length and model.unrolled is not None:
        def variants() -> dict[str, float]:
            # Compiled with the cheap back end of untimed programs: cost analysis reads the
            # optimized HLO, which those options leave as it is (rnn, lstm and gru, float32 and
            # bfloat16: equal flops and bytes with jax 0.12, 1.4-2.3x less compile time).
            options = wl.untimed_compile_options()
            c1, c2 = (
                _cost_dict(lower_single_step(workload, model.unrolled(n), optimizer_name).compile(options))
                for n in (1, 2)
            )
            return {k: c1[k] + (model.loop_length - 1) * (c2[k] - c1[k]) for k in c1}

        # Two compiles whose answer depends on the workload alone: kept by its key.
        per_device = analyses.cached_json("loop_costs", workload.key, variants)
    else:
        # The measured program is one step: a while loop over a run-time K (its body counted
        # once) or the one-step program of the host loop.
        per_device = _cost_dict(multi_step_compiled)
    return {
        "flops_per_step": per_device["flops"] * workload.devices,
        "bytes_per_step": per_device["bytes"] * workload.devices,
        "custom_call_flops_per_step": per_device.get("custom_call_flops", 0.0) * workload.devices,
    }


def model_flops_per_step(workload: Workload) -> float:
    """Analytic FLOPs of one training step over the global batch (matmuls and convolutions),
    the same for every framework.

    From the family's closed form (:mod:`paradnn.families`) where it has one, else from a walk
    over the JAX step's jaxpr (dot_general and conv_general_dilated, scan bodies multiplied by
    their length): still analytic, no compiler optimization involved. The walk is kept under the
    workload's key (:mod:`paradnn.backends.jax.analyses`): it traces the whole step again (3 s
    of DenseNet-121's first run on a 2-core CPU), which a warm run otherwise never does.
    """
    from paradnn import families

    closed_form = families.of(workload.spec).train_flops_per_example
    if closed_form is not None:
        return float(closed_form(workload.spec)) * workload.batch
    from paradnn.backends.jax.jaxpr_flops import count_matmul_flops
    from paradnn.backends.jax.models import build

    model = build(workload.spec, workload.dtype)
    if model.train_flops_per_example is not None:
        return float(model.train_flops_per_example) * workload.batch

    def count() -> float:
        single = Workload(workload.spec, workload.batch, workload.dtype, workload.optimizer, devices=1)
        state, batch = wl.abstract_inputs(single, model, workload.optimizer)
        return float(count_matmul_flops(wl.step_fn(model, workload.optimizer), state, batch))

    return float(analyses.cached_json("model_flops", workload.key, count))


def hlo_cost_analysis(serialized_hlo: bytes) -> dict[str, float]:
    """XLA's HloCostAnalysis of a serialized HloModuleProto as XLA:CPU compiles it, through
    jax's public extension API (``jax.extend``: HLO to StableHLO, then a compile by the CPU
    client, whose executable reports its cost analysis)."""
    import jax.extend as jex

    client = jex.backend.get_backend("cpu")
    executable = client.compile_and_load(jex.mlir.hlo_to_stablehlo(serialized_hlo), client.local_devices()[:1],
                                         jex.backend.get_compile_options(1, 1))
    cost = executable.cost_analysis()
    if isinstance(cost, (list, tuple)):  # one dict per program in some jaxlibs
        cost = cost[0] if cost else {}
    return cost or {}
