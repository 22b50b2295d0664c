"""PyTorch's side of the time ledger (:mod:`paradnn.ledger`): ``torch.profiler`` around a few
steps of the measured program, one row per operator.

What ``torch.profiler`` gives, and what it does not: per operator its self time (device kernel
time on a GPU, the calling thread's time on a CPU) and, for matmuls and convolutions, its FLOPs
(``with_flops``); no bytes, so memory-bound time is not split from "below roof". Only ATen
operators and the kernels torch.compile generates are operations here: the wrappers around them
(the compiled region, autograd's engine, Python) are time outside operations, which is what
they are.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pandas as pd

from paradnn.analysis.oplevel import COLLECTIVE, ELEMENTWISE, MATMUL

#: Name fragments of the operators that are operations of the ledger (ATen's; Inductor's kernels).
_OPERATION = ("aten::", "cpp_fused", "triton_", "kernel", "nccl", "c10d::")
_COLLECTIVE = ("nccl", "c10d::", "all_reduce", "allreduce", "all_gather", "reduce_scatter")
_MATMUL = ("mm", "matmul", "conv", "linear", "gemm", "bmm", "addmm")


def _category(name: str) -> str:
    low = name.lower()
    if any(f in low for f in _COLLECTIVE):
        return COLLECTIVE
    if any(f in low for f in _MATMUL):
        return MATMUL
    return ELEMENTWISE


def ledger_ops(program: Any, state: Any, batch: Any, steps: int, trace_dir: str) -> pd.DataFrame:
    """``steps`` steps of the measured program (``program.call``: nothing compiled again) under
    ``torch.profiler``, one row per operator that is an operation (ATen operators, Inductor's
    kernels): ``name``, ``category``, ``flops`` (per step; 0 where torch counts none), ``bytes``
    (NaN: torch.profiler gives none), ``time_s`` (self time per step: device time on a GPU, host
    thread time on a CPU). ``attrs``: ``steps``, ``wall_step_s``, ``source``, ``note``,
    ``flops_matched_fraction`` (the rows' FLOPs over torch's count of the step, when it has one).
    ``trace_dir`` is unused: the profile stays in memory."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    cuda = program.handle["device"].type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def run() -> float:
        start = time.perf_counter()
        _, loss = program.call(state, batch, steps)
        if cuda:
            torch.cuda.synchronize()
        float(loss)
        return (time.perf_counter() - start) / steps

    # One profiled warm-up round first: the profiler's first events carry its own start-up
    # (tens of times a small step on a CPU), which only the recorded round must not see.
    with profile(activities=activities, with_flops=True,
                 schedule=schedule(wait=0, warmup=1, active=1, repeat=1)) as prof:
        run()
        prof.step()
        wall = run()
        prof.step()
    rows = []
    for evt in prof.key_averages():
        name = str(evt.key)
        if not any(f in name for f in _OPERATION):
            continue
        micro = (getattr(evt, "self_device_time_total", None) or getattr(evt, "self_cuda_time_total", 0.0)
                 if cuda else evt.self_cpu_time_total)
        if not micro or micro <= 0:
            continue
        rows.append({"name": name, "category": _category(name), "flops": float(evt.flops or 0) / steps,
                     "bytes": math.nan, "time_s": float(micro) * 1e-6 / steps})
    ops = pd.DataFrame(rows, columns=["name", "category", "flops", "bytes", "time_s"])
    counted = program.metrics.get("flops_per_step")
    ops.attrs.update(
        steps=steps, wall_step_s=wall,
        source="torch.profiler (self time per ATen operator and Inductor kernel"
               + (", device time)" if cuda else ", host thread time)"),
        note=("per-operator times from torch.profiler; no bytes per operator, so memory-bound time "
              "is counted as below roof"),
        flops_matched_fraction=(float(ops["flops"].sum()) / counted if counted else None),
    )
    return ops
