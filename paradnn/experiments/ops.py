"""Operator micro-benchmarks: one matmul or one 2-D convolution, timed alone.

The shapes are those of Table 4 of "Benchmarking the Performance and Power of AI Accelerators
for AI Training" (Wang et al.): square matmuls N = 2048, 4096, 8192 and three conv2d layers
(batch, height, width, channels; kernel height, width, in, out channels; stride):

* F(256, 224, 224, 3)   K(7, 7, 3, 64)    S2
* F(128, 112, 112, 64)  K(3, 3, 64, 128)  S1
* F(256, 56, 56, 128)   K(3, 3, 128, 256) S1

Each op is compiled once and called K times per timed call (the calls are queued
asynchronously and the clock stops when the last result is ready), under the same timing
protocol as the models (:func:`paradnn.measure.time_calls`). The op itself is the framework's
(``Backend.op_program``; JAX by default); everything else here is framework-free. Achieved
FLOP/s = analytic FLOPs of one op / median time of one op; the fraction of peak divides by the
device's peak for the dtype (:func:`paradnn.hardware.peaks`: the vendor table on accelerators,
the measured probe on CPUs). FLOPs: matmul ``2 m n k`` (times batch); conv2d
``2 B Ho Wo KH KW Cin Cout`` with VALID padding (``Ho = floor((H - KH) / S) + 1``), which
reproduces the FLOPs of the paper's table. Bytes: the compiler's cost analysis of the compiled
op (XLA's bytes accessed).

On CPUs, :func:`thread_scan` measures the same ops with 1, 2, ... cores: XLA:CPU sizes its
thread pools once, when the process starts, from the CPUs the process may run on
(``sched_getaffinity``), so each thread count runs in a child process whose CPU affinity is
restricted before JAX starts; the child records the affinity and the number of OS threads it saw.

Rows are :class:`~paradnn.record.Record` objects with ``family = "op"`` and tag ``kind = "op"``;
analyses that select model families (``fc``, ``cnn``, ``rnn``, ``real``) never see them, and
:func:`roofline_points` puts them on the roofline next to the model points.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from paradnn import frameworks, hardware
from paradnn.errors import ParadnnError, SpecError
from paradnn.measure import MIN_TIMED_CALLS, MeasureSettings, time_calls
from paradnn.record import Record, record_warnings
from paradnn.units import parse_int

OPS = ("matmul", "conv2d")
OP_DTYPES = ("float32", "bfloat16", "float16")
#: The ``family`` of an op row in the store; model analyses select model families and skip it.
OP_FAMILY = "op"
_MAX_DIM = 1 << 20
#: Longest timing phase (s) an op may need at its device's peak (a warm-up call and
#: MIN_TIMED_CALLS timed calls of one op each): bigger ops are refused before compiling. The
#: paper's largest op, an 8192^3 matmul, needs about 150 s on a 30 GFLOP/s CPU.
MAX_OP_TIMING_S = 600.0


@dataclass(frozen=True)
class OpShape:
    """One operator's shape. ``matmul``: ``[batch x] (m x k) @ (k x n)``. ``conv2d``: input
    ``(batch, height, width, channels)`` (NHWC), kernel ``(kernel_h, kernel_w, channels,
    out_channels)``, ``stride`` in both directions, VALID padding (as the paper's FLOP counts)."""

    op: str
    batch: int = 1
    m: int | None = None
    n: int | None = None
    k: int | None = None
    height: int | None = None
    width: int | None = None
    channels: int | None = None
    kernel_h: int | None = None
    kernel_w: int | None = None
    out_channels: int | None = None
    stride: int | None = None

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise SpecError("op", self.op, "one of " + ", ".join(OPS))
        names = (("m", "n", "k") if self.op == "matmul" else
                 ("height", "width", "channels", "kernel_h", "kernel_w", "out_channels", "stride"))
        for name in ("batch", *names):
            object.__setattr__(self, name, parse_int(getattr(self, name), name, 1, _MAX_DIM))
        if self.op == "conv2d" and (self.kernel_h > self.height or self.kernel_w > self.width):
            raise SpecError("kernel", f"{self.kernel_h}x{self.kernel_w}",
                            f"at most the input's {self.height}x{self.width} (VALID padding)")

    def fields(self) -> dict[str, Any]:
        """The shape's fields that apply to its op (the store's workload columns)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def out_hw(self) -> tuple[int, int]:
        """Output height and width of a VALID-padded conv2d."""
        return ((self.height - self.kernel_h) // self.stride + 1,
                (self.width - self.kernel_w) // self.stride + 1)

    def flops(self) -> int:
        """Analytic FLOPs of one op (a multiply-add counts 2)."""
        if self.op == "matmul":
            return 2 * self.batch * self.m * self.n * self.k
        ho, wo = self.out_hw()
        return 2 * self.batch * ho * wo * self.kernel_h * self.kernel_w * self.channels * self.out_channels

    def operand_bytes(self, itemsize: int) -> int:
        """Bytes of the op's operands and result at ``itemsize`` B per element: a lower bound
        of the device memory the op needs."""
        if self.op == "matmul":
            return itemsize * self.batch * (self.m * self.k + self.k * self.n + self.m * self.n)
        ho, wo = self.out_hw()
        return itemsize * (self.batch * self.height * self.width * self.channels
                           + self.kernel_h * self.kernel_w * self.channels * self.out_channels
                           + self.batch * ho * wo * self.out_channels)

    def label(self) -> str:
        if self.op == "matmul":
            head = f"{self.batch}x" if self.batch > 1 else ""
            return f"matmul {head}{self.m}x{self.n}x{self.k}"
        return (f"conv2d F({self.batch},{self.height},{self.width},{self.channels}) "
                f"K({self.kernel_h},{self.kernel_w},{self.channels},{self.out_channels}) S{self.stride}")


#: The paper's shapes (operator table): square matmuls and three conv2d layers.
PAPER_SHAPES: tuple[OpShape, ...] = (
    *(OpShape("matmul", m=n, n=n, k=n) for n in (2048, 4096, 8192)),
    OpShape("conv2d", batch=256, height=224, width=224, channels=3, kernel_h=7, kernel_w=7,
            out_channels=64, stride=2),
    OpShape("conv2d", batch=128, height=112, width=112, channels=64, kernel_h=3, kernel_w=3,
            out_channels=128, stride=1),
    OpShape("conv2d", batch=256, height=56, width=56, channels=128, kernel_h=3, kernel_w=3,
            out_channels=256, stride=1),
)


def _dims(text: str, parameter: str, count: int) -> list[int]:
    parts = text.strip().lower().split("x")
    if len(parts) != count:
        raise SpecError(parameter, text, f"{count} positive integers joined by 'x'")
    return [parse_int(p, parameter, 1, _MAX_DIM) for p in parts]


def parse_matmul(text: str) -> OpShape:
    """``"MxNxK"`` or ``"BxMxNxK"`` (batched) -> a matmul shape."""
    allowed = "MxNxK or BxMxNxK, positive integers, e.g. 1024x1024x1024"
    parts = str(text).strip().lower().split("x")
    if len(parts) not in (3, 4):
        raise SpecError("matmul", text, allowed)
    dims = [parse_int(p, "matmul", 1, _MAX_DIM) for p in parts]
    if len(dims) == 3:
        dims = [1, *dims]
    return OpShape("matmul", batch=dims[0], m=dims[1], n=dims[2], k=dims[3])


def parse_conv2d(text: str) -> OpShape:
    """``"B,H,W,C:KH,KW,COUT:S"`` (the paper's F(B,H,W,C) K(KH,KW,C,COUT) S) -> a conv2d shape;
    ``"256,224,224,3:7,7,64:2"`` is the first paper shape."""
    allowed = "B,H,W,C:KH,KW,COUT:S (positive integers), e.g. 256,224,224,3:7,7,64:2"
    groups = str(text).strip().split(":")
    if len(groups) != 3:
        raise SpecError("conv2d", text, allowed)
    feature, kernel, stride = (g.split(",") for g in groups)
    if len(feature) != 4 or len(kernel) != 3 or len(stride) != 1:
        raise SpecError("conv2d", text, allowed)
    b, h, w, c = (parse_int(v, "conv2d", 1, _MAX_DIM) for v in feature)
    kh, kw, co = (parse_int(v, "conv2d", 1, _MAX_DIM) for v in kernel)
    return OpShape("conv2d", batch=b, height=h, width=w, channels=c, kernel_h=kh, kernel_w=kw,
                   out_channels=co, stride=parse_int(stride[0], "conv2d", 1, _MAX_DIM))


def measure_op(shape: OpShape, dtype: str = "float32", settings: MeasureSettings | None = None,
               extra: dict[str, Any] | None = None, peak: Any = None,
               framework: str = frameworks.DEFAULT) -> Record:
    """Compile and time one op on the default device of ``framework`` (its backend's
    ``op_program``: the compiled op and its compiler's cost analysis); return its op row.

    Metrics: ``step_time_s`` (s, median time of one op), ``flops_per_sec`` (FLOP/s, analytic
    FLOPs / median time), ``flops_utilization`` (achieved / the device's peak for ``dtype``),
    ``bytes_per_step`` (B, the compiler's cost analysis: XLA's for JAX), ``arithmetic_intensity``
    (FLOP/B, analytic FLOPs / those bytes), ``xla_flops_per_op`` (FLOP, the compiler's count),
    ``matmul_precision_used`` and ``matmul_precision_bits`` (the op's measured precision under
    the setting ``matmul_precision``, :mod:`paradnn.precision`).
    ``extra`` adds fields to the metrics (the thread scan's affinity); ``peak`` (a
    :class:`paradnn.hardware.Peak`) replaces this device's peak (the thread scan passes the
    whole host's)."""
    from paradnn.runner import context

    if dtype not in OP_DTYPES:
        raise SpecError("dtype", dtype, "one of " + ", ".join(OP_DTYPES))
    settings = settings or MeasureSettings()
    backend = frameworks.get(framework)
    program = frameworks.capability(framework, "op_program", "run operator micro-benchmarks")
    platform, software = context(framework)
    workload = {"family": OP_FAMILY, **shape.fields(), "dtype": dtype, "devices": 1}
    context = {"platform": platform, "software": software, "settings": settings.to_dict(framework),
               "tags": {"kind": "op"}}
    metrics: dict[str, Any] = dict(extra or {})
    flops = shape.flops()
    # Cheap checks before compiling: operands that cannot fit are an oom row; a fixed number of
    # ops per call that cannot finish within the time budget even at the peak is refused.
    need, memory = shape.operand_bytes(np.dtype(dtype).itemsize), hardware.device_memory_bytes(framework)
    if memory is not None and need > memory:
        return Record(status="oom", workload=workload,
                      metrics={**metrics, "oom_predicted": True, "op_label": shape.label()},
                      error=f"predicted before compiling: operands and result {need} B > device "
                      f"memory {memory} B", **context)
    fastest, basis = _fastest_flops(peak, dtype, platform)
    if fastest is not None:
        one_s = flops / fastest  # the least time one op can take
        if (1 + MIN_TIMED_CALLS) * one_s > MAX_OP_TIMING_S:
            raise SpecError(shape.op, shape.label(), f"an op whose warm-up and {MIN_TIMED_CALLS} timed "
                            f"calls can finish within {MAX_OP_TIMING_S:g} s: {flops:.3g} FLOP take at "
                            f"least {one_s:.3g} s each at {fastest:.3g} FLOP/s ({basis})")
        k = settings.steps_per_call
        most = max(1, int(settings.time_budget_s // one_s))
        if k is not None and k > most:
            raise SpecError("steps_per_call", k, f"at most {most} for {shape.label()} {dtype}: one call "
                            f"of {k} ops takes at least {k * one_s:.3g} s at {fastest:.3g} FLOP/s "
                            f"({basis}), beyond the time budget {settings.time_budget_s:g} s (raise "
                            "--time-budget-s, or leave --steps-per-call out to let the protocol choose)")
    try:
        op = program(shape, dtype, settings.options_for(framework).matmul_precision)
        timing = time_calls(op["call"], op["state"], op["operands"], settings, sync=backend.sync)
    except Exception as exc:  # noqa: BLE001 - a failed op becomes a row, the scan goes on
        status = "oom" if backend.is_oom(exc) else "error"
        return Record(status=status, workload=workload, metrics=metrics,
                      error=f"{type(exc).__name__}: {exc}"[:4000], **context)
    metrics.update(timing.stats())
    step = metrics["step_time_s"]
    used = op.get("matmul_precision_used")
    if peak is None:
        peak = hardware.peaks(platform["device_kind"], dtype, platform["device_platform"], precision_used=used,
                              framework=framework)
    ceiling = hardware.ceiling(platform["device_platform"], dtype, framework, peak, precision_used=used)
    xla_bytes = op["bytes"]
    metrics.update(
        model_flops_per_step=flops,
        flops_per_step=flops,
        xla_flops_per_op=op["flops"],
        bytes_per_step=xla_bytes,
        flops_per_sec=flops / step,
        **hardware.utilization_metrics(peak, ceiling, flops / step, flops / step),
        arithmetic_intensity=flops / xla_bytes if xla_bytes else None,
        useful_flops_ratio=1.0,
        op_label=shape.label(),
        final_loss=timing.final_loss,
        matmul_precision_used=used,
        matmul_precision_bits=op.get("matmul_precision_bits"),
    )
    return Record(status="ok", workload=workload, metrics=metrics,
                  warnings=record_warnings(metrics, peak_spread_limit=hardware.PROBE_MAX_CV), **context)


def _fastest_flops(peak: Any, dtype: str, platform: dict[str, Any]) -> tuple[float | None, str]:
    """An upper bound of the device's FLOP/s for ``dtype`` and where it comes from, for the
    time bounds before compiling (so they never refuse an op that could finish), found without
    running a probe: on a CPU its nominal peak (cores x clock x vector width,
    :func:`paradnn.hardware.nominal_cpu_flops`, which a probe measured under load cannot
    understate), or ``peak``'s where given and larger; elsewhere the device's peak (the vendor
    table); (None, reason) where none is known."""
    candidates = []
    if platform["device_platform"] == "cpu":
        nominal = hardware.nominal_cpu_flops()
        if nominal and nominal[0].get(dtype):
            candidates.append((float(nominal[0][dtype]), f"nominal CPU peak: {nominal[1]}"))
    elif peak is None:
        peak = hardware.peaks(platform["device_kind"], dtype, platform["device_platform"])
    if peak is not None and peak.flops:
        candidates.append((float(peak.flops), f"peak, {peak.source}"))
    return max(candidates) if candidates else (None, "no peak known")


def run_ops(shapes: Sequence[OpShape], dtypes: Sequence[str] = ("float32",),
            settings: MeasureSettings | None = None, framework: str = frameworks.DEFAULT) -> list[Record]:
    """Every shape at every dtype, in this process."""
    return [measure_op(s, d, settings, framework=framework) for s in shapes for d in dtypes]


# ---------------------------------------------------------------------------------------------
# CPU thread-count scan: one child process per thread count.

def _child_main(payload: str) -> None:
    """Entry of a scan child: measure the ops and print one JSON list of rows on stdout."""
    from paradnn.hardware import Peak

    job = json.loads(payload)
    settings = MeasureSettings(**job["settings"])
    framework = job.get("framework", frameworks.DEFAULT)
    cpus = sorted(os.sched_getaffinity(0))
    out = []
    for shape_fields in job["shapes"]:
        shape = OpShape(**shape_fields)
        for dtype in job["dtypes"]:
            extra = {"threads": len(cpus), "thread_limit": "sched_setaffinity",
                     "cpu_affinity": ",".join(map(str, cpus))}
            rec = measure_op(shape, dtype, settings, extra, Peak(*job["peaks"][dtype]), framework)
            out.append(rec.with_metrics(os_threads=_os_threads()).to_dict())
    json.dump(out, sys.stdout, default=str)


def _os_threads() -> int | None:
    """Threads of this process now (Linux ``/proc/self/status``), to show the pool's size."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def thread_scan(shapes: Sequence[OpShape], threads: Sequence[int], dtypes: Sequence[str] = ("float32",),
                settings: MeasureSettings | None = None, timeout_s: float = 600.0,
                framework: str = frameworks.DEFAULT) -> list[dict[str, Any]]:
    """Measure ``shapes`` once per thread count, each in a child process restricted to that
    many CPUs (``os.sched_setaffinity`` before the framework starts; XLA:CPU sizes its thread
    pools from the affinity at start). Returns the children's rows (dicts, as the store keeps them) with
    ``threads`` (count), ``cpu_affinity`` and ``os_threads`` (threads the child ran). The
    fraction of peak divides by the whole host's peak (probed in this process, all CPUs)."""
    if not hasattr(os, "sched_setaffinity"):
        raise ParadnnError("ops --threads: needs os.sched_setaffinity (Linux) to limit XLA:CPU's threads")
    available = sorted(os.sched_getaffinity(0))
    for t in threads:
        if not 1 <= t <= len(available):
            raise SpecError("threads", t, f"an integer from 1 to {len(available)} (CPUs this process may use)")
    settings = settings or MeasureSettings()
    # Every thread count divides by the whole host's peak, measured here with all CPUs: a child
    # restricted to fewer CPUs must never probe, or its lower peak would be cached for the host.
    from paradnn.runner import context

    child_env = frameworks.capability(framework, "cpu_child_env", "scan CPU thread counts")
    platform, _ = context(framework)
    if platform["device_platform"] != "cpu":
        raise ParadnnError(f"ops --threads scans CPU threads: {framework} runs on "
                           f"{platform['device_platform']} here; run it on the CPU (JAX: JAX_PLATFORMS=cpu)")
    kind = platform["device_kind"]
    peaks = {}
    for dtype in dtypes:
        p = hardware.peaks(kind, dtype, "cpu")
        peaks[dtype] = p._replace(method=f"{p.method}; the whole host ({len(available)} CPUs)")
    payload = json.dumps({"shapes": [s.fields() for s in shapes], "dtypes": list(dtypes),
                          "settings": settings.to_dict(framework), "peaks": peaks, "framework": framework})
    rows: list[dict[str, Any]] = []
    for t in threads:
        cpus = set(available[:t])
        # One CPU device per child, on the CPU (the framework's own environment variables).
        env = child_env(dict(os.environ))
        # The child restricts itself before anything imports the framework (no preexec_fn:
        # forking a process whose framework threads run may deadlock).
        code = ("import os, sys; os.sched_setaffinity(0, {cpus!r}); "
                "from paradnn.experiments.ops import _child_main; _child_main(sys.argv[1])").format(cpus=sorted(cpus))
        proc = subprocess.run([sys.executable, "-c", code, payload], env=env, capture_output=True,
                              text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise ParadnnError(f"thread scan child with {t} threads exited {proc.returncode}: "
                               f"{proc.stderr.strip().splitlines()[-1:] or ''}")
        rows.extend(json.loads(proc.stdout))
    return rows


# ---------------------------------------------------------------------------------------------
# Op rows next to model points on the roofline.

def op_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The op rows of a loaded store (``family == "op"``)."""
    if "family" not in df.columns:
        return df.iloc[0:0]
    return df[df["family"] == OP_FAMILY]


def roofline_points(df: pd.DataFrame) -> pd.DataFrame:
    """Model and op rows with status ok, classified by :func:`paradnn.analysis.roofline` (its
    columns: ``roof_flops_per_sec``, ``bound``, ``roof_fraction``, ...) plus ``point``
    (``"op"`` or ``"model"``) and ``label`` (the op's shape, or the model family)."""
    from paradnn.analysis import roofline

    ok = df[(df["status"] == "ok") & df["flops_per_sec"].notna() & df["arithmetic_intensity"].notna()]
    out = roofline(ok)
    is_op = out["family"] == OP_FAMILY
    out["point"] = np.where(is_op, "op", "model")
    labels = out["op_label"] if "op_label" in out.columns else pd.Series(None, index=out.index)
    out["label"] = labels.where(is_op, out["family"].astype(str))
    return out
