"""Cheap checks that run before anything is traced or compiled.

A model whose weights and optimizer state alone exceed the memory limit cannot run, and finding
that out by tracing it can take minutes or never end (``--layers 1000000000``). For the generated
families the parameter count has a closed form (:func:`paradnn.backends.jax.models.param_count`), so the
check costs microseconds. It is a lower bound, so it never refuses a model that would fit:
parameters are float32 master weights (4 B each) and the optimizer keeps
``OPTIMIZER_STATE_SLOTS`` float32 copies of them. The batch is left to the compiled memory
analysis that follows (its inputs are arguments of the step, so that analysis sees them without
running anything).
"""

from __future__ import annotations

from typing import Any

from paradnn.specs import Workload

#: Full-size float32 optimizer slots per parameter (what ``paradnn.backends.jax.step.make_optimizer``
#: builds): rmsprop with momentum keeps the squared-gradient average and the momentum trace;
#: adam its two moments; momentum its trace; sgd nothing; adafactor factored second moments,
#: far smaller than the parameters, so it counts 0 here (a lower bound stays a lower bound).
OPTIMIZER_STATE_SLOTS: dict[str, int] = {"rmsprop": 2, "adam": 2, "momentum": 1, "sgd": 0,
                                         "adafactor": 0}
#: Bytes of a master weight and of an optimizer slot entry.
PARAM_BYTES = 4


def floor_bytes(workload: Workload) -> dict[str, Any] | None:
    """Lower bound of one device's memory in bytes for a generated workload, without tracing:
    ``{"params", "weights_bytes", "optimizer_bytes", "total_bytes"}`` (data parallelism
    replicates the state, so this is per device); None for real models (their parameters are
    known only from shapes, which needs a trace)."""
    from paradnn import families

    count = families.param_count(workload.spec)  # the family's closed form, if it has one
    if count is None:
        return None
    params = int(count)
    weights = params * PARAM_BYTES
    optimizer = weights * OPTIMIZER_STATE_SLOTS[workload.optimizer]
    return {"params": params, "weights_bytes": weights, "optimizer_bytes": optimizer,
            "total_bytes": weights + optimizer}


def predicted_oom(workload: Workload, memory_limit_bytes: int | None) -> dict[str, Any] | None:
    """``{"error": reason, "metrics": {...}}`` when ``workload`` cannot fit in
    ``memory_limit_bytes`` (B, one device) by the analytic floor alone; None when it may fit or
    cannot be told without tracing. The metrics carry ``oom_predicted=True`` (typed data that
    the executors read instead of the message) and the analytic ``params``."""
    if memory_limit_bytes is None:
        return None
    floor = floor_bytes(workload)
    if floor is None or floor["total_bytes"] <= memory_limit_bytes:
        return None
    reason = (f"predicted before compiling (analytic, nothing traced): weights "
              f"{floor['weights_bytes']} B + {workload.optimizer} state "
              f"{floor['optimizer_bytes']} B = {floor['total_bytes']} B per device > limit "
              f"{memory_limit_bytes} B ({floor['params']} parameters, closed form)")
    return {"error": reason, "metrics": {"params": floor["params"], "oom_predicted": True}}
