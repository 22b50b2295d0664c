"""Operation-level roofline and breakdown (ParaDnn Fig 3b, 3d).

Works on the per-operation table of :func:`paradnn.experiments.profile.capture`: one row per optimized-HLO
instruction that ran, with ``name``, ``opcode``, ``category``, ``flops`` (FLOP per step),
``bytes`` (B per step), ``time_s`` (s per step), ``time_fraction``, ``flops_per_sec`` and
``arithmetic_intensity``. As in the paper, only operations above 1% of the time and with FLOPs
go on the roofline.
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from paradnn.analysis.columns import require_columns
from paradnn.analysis.roofline import roofline

MATMUL = "matmul/convolution fusion"
ELEMENTWISE = "elementwise fusion"
REDUCE = "reduce"
COLLECTIVE = "collective"
FORMATTING = "data formatting"
CONTROL = "control flow"
CATEGORIES = (MATMUL, ELEMENTWISE, REDUCE, COLLECTIVE, FORMATTING, CONTROL)

_COLLECTIVES = {
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast", "all-reduce-start", "all-reduce-done", "all-gather-start",
    "all-gather-done", "collective-permute-start", "collective-permute-done", "send", "recv",
    "send-done", "recv-done", "ragged-all-to-all",
}
_REDUCES = {"reduce", "reduce-window", "select-and-scatter", "reduce-precision-sum"}
# Operations that move or reshape data without arithmetic.
_FORMATTING = {
    "copy", "copy-start", "copy-done", "transpose", "reshape", "bitcast", "broadcast",
    "concatenate", "slice", "dynamic-slice", "dynamic-update-slice", "pad", "gather", "scatter",
    "iota", "convert", "reverse", "tuple", "get-tuple-element", "parameter", "constant",
    "bitcast-convert", "sort", "dynamic-reshape", "copy-to-device", "optimization-barrier",
    "async-start", "async-done", "infeed", "outfeed",
}
_CONTROL = {"while", "conditional", "call"}
_MATMUL_TARGETS = ("gemm", "matmul", "conv", "dot", "cublas", "cudnn")


def categorize(opcode: str, inner_opcodes: Iterable[str] = (), custom_call_target: str = "") -> str:
    """The category of an HLO instruction from its opcode and, for a fusion, the opcodes of its
    fused computation (``custom_call_target`` for custom calls such as cuBLAS GEMMs)."""
    ops = set(inner_opcodes) | {opcode}
    if opcode in _CONTROL:
        return CONTROL
    if ops & {"dot", "convolution", "ragged-dot", "scaled-dot"}:
        return MATMUL
    target = custom_call_target.lower()
    if opcode == "custom-call" and any(t in target for t in _MATMUL_TARGETS):
        return MATMUL
    if ops & _COLLECTIVES:
        return COLLECTIVE
    if ops & _REDUCES:
        return REDUCE
    if ops - {"fusion"} <= _FORMATTING:
        return FORMATTING
    return ELEMENTWISE


def op_roofline(
    ops: pd.DataFrame,
    peak_flops: float,
    peak_bytes_per_sec: float,
    min_time_fraction: float = 0.01,
) -> pd.DataFrame:
    """The operations that take at least ``min_time_fraction`` of the step time and do FLOPs,
    classified against the roof of one device (``peak_flops`` FLOP/s, ``peak_bytes_per_sec``
    B/s); see :func:`paradnn.analysis.roofline`. Sorted by time, longest first."""
    require_columns(ops, ("time_fraction", "flops", "flops_per_sec", "arithmetic_intensity"), "op_roofline")
    rows = ops[(ops["time_fraction"] >= min_time_fraction) & (ops["flops"] > 0)]
    out = roofline(rows, peak_flops=peak_flops, peak_bytes_per_sec=peak_bytes_per_sec)
    out = out.sort_values("time_s", ascending=False).reset_index(drop=True)
    out.attrs.update(ops.attrs, min_time_fraction=min_time_fraction)
    return out


def above_roof(ops: pd.DataFrame, peak_flops: float, peak_bytes_per_sec: float) -> dict[str, list[str]]:
    """The operations that do FLOPs and lie above the roof of one device, however short, by the
    part of the roof they pass (names, longest first):

    * ``compute``: FLOP/s above ``peak_flops``: impossible, so the FLOP count or the time is
      wrong (the H200's first profile counted each two-kernel GEMM twice);
    * ``memory``: under the compute peak but above intensity x ``peak_bytes_per_sec``: the
      ``bytes`` column (XLA's bytes accessed: every operand and output at its full size) is more
      than the operation moved through device memory. An in-place update moves only what it
      updates (an FC's softmax-gradient scatter on an H200: 65.6 MB counted in 1.7 us, 38 TB/s
      against 4.8), and an operand the previous kernel left in the on-chip cache is read from
      there. Not a physics error of the measurement, but a byte count that is only an upper bound.
    """
    every = op_roofline(ops, peak_flops, peak_bytes_per_sec, min_time_fraction=0.0)
    above = every[every["roof_fraction"] > 1 + 1e-9]
    compute = above["flops_per_sec"] > peak_flops * (1 + 1e-9)
    return {"compute": above.loc[compute, "name"].tolist(), "memory": above.loc[~compute, "name"].tolist()}


def op_breakdown(ops: pd.DataFrame) -> pd.DataFrame:
    """Time, FLOPs and bytes per category: ``DataFrame[category, ops, time_s, time_fraction,
    flops, bytes]`` (s, FLOP, B per step), longest first."""
    require_columns(ops, ("category", "time_s", "flops", "bytes"), "op_breakdown")
    g = ops.groupby("category")
    out = pd.DataFrame({
        "ops": g.size(), "time_s": g["time_s"].sum(), "flops": g["flops"].sum(),
        "bytes": g["bytes"].sum(),
    }).reset_index()
    total = out["time_s"].sum()
    out["time_fraction"] = out["time_s"] / total if total > 0 else float("nan")
    out = out[["category", "ops", "time_s", "time_fraction", "flops", "bytes"]]
    out = out.sort_values("time_s", ascending=False).reset_index(drop=True)
    out.attrs.update(ops.attrs)
    return out


def top_ops(ops: pd.DataFrame, n: int = 15) -> pd.DataFrame:
    """The ``n`` operations with the most time per step, with their category and roofline
    columns."""
    require_columns(ops, ("time_s",), "top_ops")
    cols = [c for c in ("name", "category", "opcode", "time_s", "time_fraction", "flops", "bytes",
                        "flops_per_sec", "arithmetic_intensity", "executions", "bound",
                        "roof_fraction") if c in ops.columns]
    out = ops.sort_values("time_s", ascending=False).head(n)[cols].reset_index(drop=True)
    out.attrs.update(ops.attrs)
    return out
