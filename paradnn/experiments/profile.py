"""Operation-level capture of one training step (ParaDnn Fig 3b, 3d).

:func:`capture` compiles a workload's training step, reads every operation of the *optimized*
HLO (after fusion: the operations that actually run), counts its FLOPs and bytes from the
instruction shapes, runs the step under the framework's profiler (``jax.profiler.trace``: the
backend's ``trace_step``) and joins the per-operation times of the trace to the HLO by
instruction name. The parsing here is framework-free: XLA's HLO text and TensorBoard trace events.

Counting rules (per execution of an operation):

* FLOPs: ``dot`` 2 x output elements x contracted size; ``convolution`` (and the cuDNN and
  oneDNN convolution custom calls, each counted as the forward convolution it computes or
  differentiates) 2 x batch x output features x input features per group x the valid (output
  position, kernel tap) pairs of its window: padding and the holes of a dilated input count
  nothing, as in XLA's cost analysis; elementwise arithmetic 1 per output element; ``reduce`` 1 per input
  element; ``reduce-window`` 1 per output element and window element. A fusion sums its fused
  computation. Transcendentals (exp, log, tanh, ...) are counted apart, as XLA does.
* Bytes: the operands and the output of the top-level (fused) instruction, i.e. the memory
  traffic of the operation if nothing stays in cache; layout-only operations (bitcast, tuple,
  parameter, constant) move nothing.

Where per-operation times are approximate it says so in ``attrs["note"]``: on CPU some
operations run asynchronously and overlap (measured with jax 0.10 on CPU), so times there are
indicative and their sum can exceed the step time.
"""

from __future__ import annotations

import glob
import gzip
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd

from paradnn import frameworks, sizes
from paradnn.analysis.oplevel import categorize
from paradnn.convolution import valid_taps
from paradnn.errors import ParadnnError

CPU_NOTE = ("per-operation times are approximate on CPU: some operations run asynchronously and "
            "overlap, so the times are indicative and their sum can exceed the step time")

_BYTES = {"pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
          "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
          "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16, "token": 0}
_ARRAY = re.compile(r"\b([a-z]+[0-9]*(?:e[0-9]m[0-9](?:fn|fnuz)?)?)\[([0-9,]*)\]")
_ELEMENTWISE = {
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs", "compare",
    "select", "clamp", "and", "or", "xor", "not", "remainder", "sign", "floor", "ceil",
    "round-nearest-afz", "round-nearest-even", "shift-left", "shift-right-logical",
    "shift-right-arithmetic", "is-finite", "real", "imag", "complex",
}
_TRANSCENDENTAL = {
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "rsqrt",
    "sqrt", "cbrt", "power", "sine", "cosine", "tan", "atan2", "erf",
}
_NO_TRAFFIC = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "while",
               "conditional", "call", "after-all", "partition-id", "replica-id",
               "add-dependency", "opt-barrier", "optimization-barrier"}


@dataclass
class Instruction:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str

    def called(self, key: str) -> list[str]:
        m = re.search(key + r"=\{?([^,}]*(?:,\s*%[^,}]*)*)\}?", self.attrs)
        if not m:
            return []
        return [s.strip().lstrip("%") for s in m.group(1).split(",") if s.strip()]


@dataclass
class Computation:
    name: str
    instructions: list[Instruction] = field(default_factory=list)
    shapes: dict[str, str] = field(default_factory=dict)


def _arrays(shape: str) -> list[tuple[str, list[int]]]:
    return [(t, [int(d) for d in dims.split(",") if d]) for t, dims in _ARRAY.findall(shape)]


def _elements(shape: str) -> int:
    return sum(math.prod(d) for _, d in _arrays(shape))


def _nbytes(shape: str) -> int:
    return sum(math.prod(d) * _BYTES.get(t, 4) for t, d in _arrays(shape))


def _matching(text: str, start: int) -> int:
    """Index just past the parenthesis group opening at ``text[start]``."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for c in text:
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*")


def parse_hlo(text: str) -> tuple[dict[str, Computation], str, str]:
    """Parse optimized HLO text into computations; returns (computations, entry name, module
    name)."""
    text = re.sub(r"/\*.*?\*/", "", text)
    comps: dict[str, Computation] = {}
    entry, module, current = "", "", None
    for line in text.splitlines():
        if line.startswith("HloModule "):
            module = line.split()[1].rstrip(",")
            continue
        h = _HEADER.match(line)
        if h and not line.startswith(" "):
            current = Computation(h.group(2))
            comps[current.name] = current
            if h.group(1):
                entry = current.name
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTR.match(line) if current is not None else None
        if not m:
            continue
        rest = line[m.end():]
        if rest.startswith("("):
            end = _matching(rest, 0)
        else:
            end = rest.find(" ")
        shape, rest = rest[:end], rest[end:].lstrip()
        op_end = rest.find("(")
        if op_end < 0:
            continue
        opcode = rest[:op_end].strip()
        close = _matching(rest, op_end)
        operands = []
        for o in _split_top(rest[op_end + 1:close - 1]):
            names = re.findall(r"%([\w.\-]+)", o)
            if names:
                operands.append(names[-1])
        ins = Instruction(m.group(1), shape, opcode, operands, rest[close:])
        current.instructions.append(ins)
        current.shapes[ins.name] = shape
    if not entry:
        raise ParadnnError("profile: no ENTRY computation in the HLO text")
    return comps, entry, module


def _dims_attr(attrs: str, key: str) -> list[int]:
    m = re.search(key + r"=\{([0-9,]*)\}", attrs)
    return [int(x) for x in m.group(1).split(",") if x] if m else []


#: The operands and result of a cuDNN convolution custom call by the kind of convolution it
#: computes: which of them is the forward convolution's input, kernel and output. Its window and
#: ``dim_labels`` describe the forward convolution whatever the kind (XLA:GPU's conv rewriter), so
#: a backward call is counted as the forward convolution it differentiates: the same multiply-adds.
#: Entries: ("operand", i) or ("result", 0). Other convolution calls (forward, bias-activation,
#: oneDNN) take (input, kernel) and give the output.
_CONV_ROLES = {
    "__cudnn$convbackwardinput": (("result", 0), ("operand", 1), ("operand", 0)),
    "__cudnn$convbackwardfilter": (("operand", 0), ("result", 0), ("operand", 1)),
}
_FORWARD_ROLES = (("operand", 0), ("operand", 1), ("result", 0))
_WINDOW_FIELD = re.compile(r"(size|stride|pad|lhs_dilate|rhs_dilate)=([-0-9x_]+)")


def _onednn_conv_flops(ins: Instruction, comp: Computation) -> float:
    """FLOPs of an XLA:CPU oneDNN convolution call (``__onednn$convolution``), counted as
    :func:`_conv_flops` counts a ``convolution``. Its ``backend_config`` JSON replaces
    ``dim_labels``/``window``: ``onednn_conv_config`` names the input's, kernel's and output's
    dimensions and the strides, low padding and kernel dilation (1: none); oneDNN has no input
    dilation. 0.0 where the config or shapes cannot be read."""
    at = ins.attrs.find("backend_config={") + len("backend_config=")
    arrays = [_arrays(comp.shapes.get(o, "")) for o in ins.operands[:2]] + [_arrays(ins.shape)]
    if len(ins.operands) < 2 or not all(arrays):
        return 0.0
    lhs, rhs, out = (a[0][1] for a in arrays)
    try:
        config = json.loads(ins.attrs[at:_matching(ins.attrs, at)])["onednn_conv_config"]
        data_in, data_out = config["input"]["data"], config["output"]["data"]
        kernel, window = config["kernel"]["filter"], config["window"]
        spatial = [(int(i), int(k), int(o)) for i, k, o in
                   zip(data_in["spatial_dims"], kernel["spatial_dims"], data_out["spatial_dims"], strict=True)]
        n = len(spatial)
        stride, pad_lo, dilation = ([int(x) for x in window.get(key) or [default] * n]
                                    for key, default in (("strides", 1), ("pad_left", 0), ("window_dilations", 1)))
        taps = 1
        for d, (i, k, o) in enumerate(spatial):
            taps *= valid_taps(lhs[i], out[o], rhs[k], stride[d], pad_lo[d], 1, dilation[d])
        in_features = lhs[int(data_in["feature_dim"])] // int(config.get("feature_groups") or 1)
        return 2.0 * lhs[int(data_in["batch_dim"])] * out[int(data_out["feature_dim"])] * in_features * taps
    except (KeyError, IndexError, TypeError, ValueError):
        return 0.0


def _conv_flops(ins: Instruction, comp: Computation) -> float:
    """FLOPs of one execution of a convolution (the ``convolution`` instruction or a convolution
    custom call): 2 x batch x output features x input features per group x the valid (output
    position, kernel tap) pairs of its window, so padding and the holes of a dilated input (a
    strided convolution's input gradient) count nothing, as in XLA's cost analysis. 0.0 where the
    shapes or labels cannot be read."""
    if '"onednn_conv_config"' in ins.attrs:
        return _onednn_conv_flops(ins, comp)
    labels = re.search(r"dim_labels=([0-9a-z]+)_([0-9a-z]+)->([0-9a-z]+)", ins.attrs)
    roles = _FORWARD_ROLES
    if ins.opcode == "custom-call":
        target = re.search(r'custom_call_target="([^"]+)"', ins.attrs)
        roles = _CONV_ROLES.get(target.group(1).lower() if target else "", _FORWARD_ROLES)
    shapes = []
    for where, i in roles:
        text = ins.shape if where == "result" else (
            comp.shapes.get(ins.operands[i], "") if i < len(ins.operands) else "")
        arrays = _arrays(text)
        shapes.append(arrays[0][1] if arrays else [])
    lhs, rhs, out = shapes
    if not labels or not all(shapes) or [len(lhs), len(rhs), len(out)] != [len(x) for x in labels.groups()]:
        return 0.0
    lhs_l, rhs_l, out_l = labels.groups()
    window = dict(_WINDOW_FIELD.findall(re.search(r"window=\{([^}]*)\}", ins.attrs).group(1))
                  if "window={" in ins.attrs else "")
    spatial = sorted(c for c in lhs_l if c.isdigit())

    def per_dim(name: str, default: int) -> list[int]:
        return [int(x) for x in window[name].split("x")] if name in window else [default] * len(spatial)

    size = per_dim("size", 1)
    stride, lhs_dil, rhs_dil = per_dim("stride", 1), per_dim("lhs_dilate", 1), per_dim("rhs_dilate", 1)
    pad_lo = [int(p.split("_")[0]) for p in window["pad"].split("x")] if "pad" in window else [0] * len(spatial)
    taps = 1
    for d, c in enumerate(spatial):
        taps *= valid_taps(lhs[lhs_l.index(c)], out[out_l.index(c)], size[d], stride[d], pad_lo[d],
                           lhs_dil[d], rhs_dil[d])
    groups = re.search(r"feature_group_count=(\d+)", ins.attrs)
    batch_groups = re.search(r"batch_group_count=(\d+)", ins.attrs)
    batch = lhs[lhs_l.index("b")] // (int(batch_groups.group(1)) if batch_groups else 1)
    in_features = lhs[lhs_l.index("f")] // (int(groups.group(1)) if groups else 1)
    return 2.0 * batch * out[out_l.index("f")] * in_features * taps


def _attention_flops(ins: Instruction, comp: Computation, backward: bool) -> float:
    """FLOPs of one cuDNN fused-attention call (``__cudnn$fmha*``, what
    ``jax.nn.dot_product_attention(implementation="cudnn")`` compiles to): its matrix products,
    counted from the score matrix ``[batch, heads, queries, keys]`` in the call's
    ``intermediate_tensor_shape`` and the head sizes of Q and V (operands 0 and 2, head
    dimension minor). Forward: ``Q.K^T`` and ``P.V``, 2 x scores x (d_qk + d_v). Backward: the
    scores again (flash attention keeps no score matrix), then the gradients of P, V, Q and K,
    2 x scores x (3 d_qk + 2 d_v). Under a causal mask cuDNN skips the masked scores, so only the
    scores on and below the diagonal count. 0.0 where the shapes cannot be read."""
    scores = re.search(r'"intermediate_tensor_shape":\s*\{[^{}]*?"dimensions":\s*\[([^\]]*)\]', ins.attrs)
    q, v = (_arrays(comp.shapes.get(ins.operands[i], "")) if i < len(ins.operands) else [] for i in (0, 2))
    if not scores or not q or not v:
        return 0.0
    dims = [int(x.strip('" ')) for x in scores.group(1).split(",") if x.strip('" ')]
    if len(dims) != 4:
        return 0.0
    batch, heads, queries, keys = dims
    pairs = queries * keys
    if re.search(r'"mask_type":\s*"[A-Z_]*CAUSAL', ins.attrs):
        pairs = sum(min(i + 1, keys) for i in range(queries))
    d_qk, d_v = q[0][1][-1], v[0][1][-1]
    products = 3 * d_qk + 2 * d_v if backward else d_qk + d_v
    return 2.0 * batch * heads * pairs * products


def _flops(ins: Instruction, comp: Computation, comps: dict[str, Computation]) -> tuple[float, float, set[str]]:
    """(FLOPs, transcendentals, opcodes inside) of one execution of ``ins``."""
    op = ins.opcode
    out = _elements(ins.shape)
    if op == "fusion":
        flops = trans = 0.0
        inner: set[str] = set()
        for callee in ins.called("calls"):
            sub = comps.get(callee)
            if sub is None:
                continue
            for i in sub.instructions:
                f, t, o = _flops(i, sub, comps)
                flops, trans = flops + f, trans + t
                inner |= o | {i.opcode}
        return flops, trans, inner
    if op == "dot":
        lhs = _arrays(comp.shapes.get(ins.operands[0], "")) if ins.operands else []
        dims = lhs[0][1] if lhs else []
        k = math.prod(dims[d] for d in _dims_attr(ins.attrs, "lhs_contracting_dims") if d < len(dims))
        return 2.0 * out * k, 0.0, set()
    if op == "convolution":
        return _conv_flops(ins, comp), 0.0, set()
    if op == "custom-call":
        # What a call computes is read from its target's name, never from the rest of its
        # attributes (metadata names the framework op, which may say "conv" for a GEMM).
        found = re.search(r'custom_call_target="([^"]+)"', ins.attrs)
        target = found.group(1).lower() if found else ""
        if "$fmha" in target:
            return _attention_flops(ins, comp, backward="backward" in target), 0.0, set()
        if "conv" in target:
            return _conv_flops(ins, comp), 0.0, set()
        if any(t in target for t in ("gemm", "matmul", "dot")):
            shapes = [_arrays(comp.shapes.get(o, "")) for o in ins.operands[:2]]
            if all(shapes):
                lhs = shapes[0][0][1]
                m = re.search(r'"lhs_contracting_dimensions":\[([^\]]*)\]', ins.attrs)
                cdims = [int(x.strip('" ')) for x in m.group(1).split(",") if x.strip('" ')] if m else [len(lhs) - 1]
                k = math.prod(lhs[d] for d in cdims if d < len(lhs))
                out_el = math.prod(_arrays(ins.shape)[0][1])
                return 2.0 * out_el * k, 0.0, set()
        return 0.0, 0.0, set()
    if op in _ELEMENTWISE:
        return float(out), 0.0, set()
    if op in _TRANSCENDENTAL:
        return 0.0, float(out), set()
    if op == "reduce":
        src = comp.shapes.get(ins.operands[0], "") if ins.operands else ""
        return float(_elements(src)), 0.0, set()
    if op == "reduce-window":
        m = re.search(r"size=([0-9x]+)", ins.attrs)
        window = math.prod(int(x) for x in m.group(1).split("x")) if m else 1
        return float(out * window), 0.0, set()
    return 0.0, 0.0, set()


_COSTED_CALL = re.compile(r'custom_call_target="[^"]*(gemm|matmul|conv|fmha)', re.IGNORECASE)


def custom_call_flops(text: str) -> float:
    """FLOPs (FLOP per execution; loop bodies once, as XLA's cost analysis counts them) of the
    GEMM, convolution and fused-attention custom calls (cuBLAS, cuBLASLt, cuDNN, oneDNN) of an optimized HLO
    module, counted from their operand shapes; 0.0 when it has none. XLA's cost analysis gives
    custom calls no FLOPs."""
    if not _COSTED_CALL.search(text):
        return 0.0
    ops = hlo_ops(text)
    return float(ops.loc[ops["opcode"] == "custom-call", "flops"].sum())


def hlo_ops(text: str) -> pd.DataFrame:
    """Every operation that runs in an optimized HLO module, with FLOPs and bytes per execution.

    Operations of the entry computation and of the computations it runs through control flow
    (while, conditional, call) are listed; fused computations are folded into their fusion.
    Returns ``DataFrame[name, opcode, category, flops, transcendentals, bytes, computation,
    calls]`` (FLOP and B per execution; ``calls``: the computations a control-flow operation
    runs, comma-separated); ``attrs["module"]`` is the module name.
    """
    comps, entry, module = parse_hlo(text)
    rows = []
    seen: set[str] = set()
    todo = [entry]
    while todo:
        cname = todo.pop()
        if cname in seen or cname not in comps:
            continue
        seen.add(cname)
        comp = comps[cname]
        for ins in comp.instructions:
            called: list[str] = []
            if ins.opcode in ("while", "conditional", "call", "async-start"):
                for key in ("body", "condition", "to_apply", "branch_computations", "calls",
                            "true_computation", "false_computation"):
                    called += ins.called(key)
                todo.extend(called)
            flops, trans, inner = _flops(ins, comp, comps)
            nbytes = 0 if ins.opcode in _NO_TRAFFIC else _nbytes(ins.shape) + sum(
                _nbytes(comp.shapes.get(o, "")) for o in ins.operands)
            target = re.search(r'custom_call_target="([^"]+)"', ins.attrs)
            rows.append({
                "name": ins.name, "opcode": ins.opcode,
                "category": categorize(ins.opcode, inner, target.group(1) if target else ""),
                "flops": flops, "transcendentals": trans, "bytes": float(nbytes),
                "computation": cname, "calls": ",".join(called),
            })
    out = pd.DataFrame(rows, columns=["name", "opcode", "category", "flops", "transcendentals",
                                      "bytes", "computation", "calls"])
    out.attrs["module"] = module
    return out


def trace_times(trace_dir: str, module: str | None = None) -> pd.DataFrame:
    """Per-operation time from a ``jax.profiler.trace`` directory: ``DataFrame[name, events,
    executions, time_s]`` (totals over the trace; s). Reads
    ``plugins/profile/<ts>/*.trace.json.gz``; on a host with accelerator processes only device
    events are kept (host launches would double count).

    ``executions`` counts runs of the operation, not kernels: on a GPU one run can launch
    several kernels (a cuBLAS GEMM with a split-K reduction: two events per run on an H200).
    XLA:GPU runs each operation's thunk inside one profiler annotation, and every kernel
    launched there carries that annotation's ``scope_range_id``; so where every event of an
    operation carries one, its executions are the distinct ids. Otherwise (XLA:CPU: one event
    per run) they are its events."""
    files = sorted(glob.glob(os.path.join(trace_dir, "plugins", "profile", "*", "*.trace.json.gz")))
    if not files:
        raise ParadnnError(f"profile: no *.trace.json.gz under {trace_dir}/plugins/profile; "
                           "the profiler wrote nothing")
    with gzip.open(files[-1], "rt") as f:
        events = json.load(f).get("traceEvents", [])
    names = {e.get("pid"): e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    device_pids = {pid for pid, n in names.items() if "/device:" in n and "CPU" not in n.upper()}
    totals: dict[str, list] = {}  # op -> [events, time (s), scope ids, events without one]
    for e in events:
        args = e.get("args") or {}
        op = args.get("hlo_op")
        if not op or e.get("ph") != "X":
            continue
        if module and args.get("hlo_module") not in (None, module):
            continue
        if device_pids and e.get("pid") not in device_pids:
            continue
        t = totals.setdefault(op, [0, 0.0, set(), 0])
        t[0] += 1
        t[1] += float(e.get("dur", 0.0)) * 1e-6  # trace durations are microseconds
        scope = args.get("scope_range_id")
        if scope is None:
            t[3] += 1
        else:
            t[2].add((e.get("pid"), str(scope)))
    return pd.DataFrame([{"name": k, "events": v[0], "executions": len(v[2]) if v[2] and not v[3] else v[0],
                          "time_s": v[1]} for k, v in totals.items()],
                        columns=["name", "events", "executions", "time_s"])


_CONTROL_OPCODES = ("while", "conditional", "call")
#: The category of a control-flow region whose operations ran without events of their own.
OPAQUE = "compiled as one call"


def _opaque_regions(ops: pd.DataFrame, traced: set[str]) -> set[str]:
    """Names of the traced control-flow operations in ``ops`` (:func:`hlo_ops`) none of whose
    inner operations (through nested control flow) has an event in the trace."""
    by_comp: dict[str, list[tuple[str, list[str]]]] = {}
    for name, comp, calls in zip(ops["name"], ops["computation"], ops["calls"]):
        by_comp.setdefault(comp, []).append((name, [c for c in calls.split(",") if c]))
    out = set()
    for name, calls in zip(ops["name"], ops["calls"]):
        if name not in traced or not calls:
            continue
        todo, seen, inner_traced = [c for c in calls.split(",") if c], set(), False
        while todo and not inner_traced:
            comp = todo.pop()
            if comp in seen:
                continue
            seen.add(comp)
            for inner, inner_calls in by_comp.get(comp, []):
                inner_traced |= inner in traced
                todo += inner_calls
        if not inner_traced:
            out.add(name)
    return out


def op_times(hlo: str, trace_dir: str, steps: int, devices: int = 1) -> pd.DataFrame:
    """Join the operations of an optimized HLO module (:func:`hlo_ops`) with their times in a
    profiler trace of ``steps`` training steps on ``devices`` devices written into ``trace_dir``
    (:func:`trace_times`): one row per operation that appeared in the trace (control flow left
    out: its time is that of the operations inside it, which are listed), per step and per
    device: ``name``, ``opcode``, ``category``, ``flops``, ``transcendentals`` (per step),
    ``bytes`` (B per step), ``executions`` (per step), ``time_s`` (s per step). Longest first.
    A control-flow region none of whose operations has an event (XLA:CPU compiles a small one
    into one function) is one row of category :data:`OPAQUE` with NaN FLOPs and bytes.
    ``attrs``: ``module``, ``hlo_flops_per_step`` (FLOP of one execution of every listed
    operation) and ``flops_matched_fraction`` (the share of those FLOPs whose operation
    appeared in the trace). ParadnnError where the trace has no event of the module."""
    ops = hlo_ops(hlo)
    module = ops.attrs["module"]
    times = trace_times(trace_dir, module)
    if times.empty:
        raise ParadnnError(f"profile: the trace has no events of module {module!r}")
    merged = ops.merge(times, on="name", how="inner")
    # A while/conditional/call event spans the operations inside it, which are rows of their
    # own: keeping it would count their time twice. Unless none of them has an event: XLA:CPU
    # compiles a small region into one function (xla_cpu_small_call), whose operations run
    # unseen; the region is then one opaque operation (OPAQUE, FLOPs and bytes unknown).
    opaque = _opaque_regions(ops, set(times["name"]))
    control = merged["opcode"].isin(_CONTROL_OPCODES)
    merged = merged[~control | merged["name"].isin(opaque)].copy()
    is_opaque = merged["name"].isin(opaque)
    merged.loc[is_opaque, "category"] = OPAQUE
    merged.loc[is_opaque, ["flops", "transcendentals", "bytes"]] = float("nan")
    merged = merged.drop(columns=["calls", "computation"])
    per = steps * devices  # every device traces its own events of each operation
    merged["executions"] = merged["executions"] / per
    merged["flops"] = merged["flops"] * merged["executions"]
    merged["transcendentals"] = merged["transcendentals"] * merged["executions"]
    merged["bytes"] = merged["bytes"] * merged["executions"]
    merged["time_s"] = merged["time_s"] / per
    merged = merged.drop(columns=["events"]).sort_values("time_s", ascending=False).reset_index(drop=True)
    total_flops = float(ops["flops"].sum())
    matched = ops[ops["name"].isin(merged["name"])]["flops"].sum()
    merged.attrs.update(module=module, hlo_flops_per_step=total_flops,
                        flops_matched_fraction=float(matched / total_flops) if total_flops else float("nan"))
    return merged


def capture_step(
    step: Callable, state: Any, batch: Any, steps: int = 5, warmup: int = 2,
    donated: bool = True, framework: str = frameworks.DEFAULT,
) -> pd.DataFrame:
    """Per-operation FLOPs, bytes and time of a ``framework`` step function ``step(state, batch)
    -> (state, loss)`` (for JAX a jitted function).

    The backend (``Backend.trace_step``) compiles the step, runs ``warmup`` steps, then
    ``steps`` steps under its profiler (the state is threaded through, so a donating step
    works) and hands back the optimized HLO; this function counts the HLO's operations and
    joins the trace's times to them (:func:`op_times`). Returns its rows with
    ``time_fraction`` (of the summed operation time), ``flops_per_sec`` and
    ``arithmetic_intensity`` (FLOP/B) added. ``attrs``: those of :func:`op_times`,
    ``device_platform``, ``device_kind``, ``steps``, ``wall_step_s`` (wall time per step under
    the profiler), ``approximate`` and ``note``.
    """
    if steps < 1 or warmup < 0:
        raise ParadnnError(f"profile: steps={steps}, warmup={warmup}; allowed: steps >= 1, warmup >= 0")
    trace = frameworks.capability(framework, "trace_step", "profile a training step")
    with tempfile.TemporaryDirectory(prefix="paradnn-profile-") as tmp:
        run = trace(step, state, batch, steps, warmup, tmp)
        merged = op_times(run["hlo"], tmp, steps)
    op_total = merged["time_s"].sum()
    merged["time_fraction"] = merged["time_s"] / op_total if op_total > 0 else float("nan")
    merged["flops_per_sec"] = merged["flops"] / merged["time_s"].where(merged["time_s"] > 0)
    merged["arithmetic_intensity"] = merged["flops"] / merged["bytes"].where(merged["bytes"] > 0)
    platform = run["device_platform"]
    approximate = platform == "cpu"
    merged.attrs.update(
        device_platform=platform, device_kind=run["device_kind"],
        steps=steps, wall_step_s=run["wall_step_s"], approximate=approximate,
        note=CPU_NOTE if approximate else "per-operation times from device events of the profiler trace",
    )
    return merged


def capture(workload, steps: int = 5, warmup: int = 2,
            memory_limit_bytes: int | None = None) -> pd.DataFrame:
    """:func:`capture_step` of a workload's compiled training step (its framework's
    ``Backend.profile_inputs``), with ``attrs["workload"]`` (its dict) and, when known, the
    device's peaks (``peak_flops`` FLOP/s, ``peak_bytes_per_sec`` B/s, ``peak_source``).
    ``memory_limit_bytes`` (B, one device; default the device's memory, the host's on a CPU):
    a workload whose weights and optimizer state alone exceed it is refused (ParadnnError)
    before anything is built or traced (:func:`paradnn.sizes.refuse_oom`).

    >>> ops = capture(Workload(FC(layers=4, nodes=256, input=2000, output=1000), batch=128))
    >>> analysis.op_roofline(ops, ops.attrs["peak_flops"], ops.attrs["peak_bytes_per_sec"])
    ... # doctest: +SKIP
    """
    inputs = frameworks.capability(workload.framework, "profile_inputs", "profile a training step")
    limit = (memory_limit_bytes if memory_limit_bytes is not None
             else frameworks.get(workload.framework).device_memory_bytes())
    sizes.refuse_oom(workload, limit, "profile")
    step, state, batch = inputs(workload)
    ops = capture_step(step, state, batch, steps=steps, warmup=warmup, framework=workload.framework)
    ops.attrs["workload"] = workload.to_dict()
    return ops


def with_peaks(ops: pd.DataFrame, dtype: str = "float32") -> pd.DataFrame:
    """Add the device's peaks to ``ops.attrs`` from ``paradnn.hardware.peaks`` (the spec table
    for known accelerators, else a measured probe of this host: slow the first time)."""
    from paradnn.hardware import peaks

    peak = peaks(ops.attrs.get("device_kind", ""), dtype, ops.attrs.get("device_platform"))
    ops.attrs.update(peak_flops=peak.flops, peak_bytes_per_sec=peak.bytes_per_sec,
                     peak_source=peak.source, peak_method=peak.method)
    return ops
