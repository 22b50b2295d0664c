"""``paradnn.plan``: what a sweep would do (configs, size, memory, time) without running it.

>>> from paradnn.plan import plan
>>> p = plan("sweeps/fc.yaml", store="results.db")   # doctest: +SKIP
>>> p.table[["layers", "nodes", "batch", "params", "memory_bytes", "predicted", "wall_s"]]  # doctest: +SKIP
>>> p.summary["wall_s"], p.summary["calibration"]["method"]  # doctest: +SKIP

Per config, cheaply (closed forms, no compilation, no tracing of generated models):

* ``params``: trainable parameters (``paradnn.backends.jax.models.param_count``'s closed forms).
* ``model_flops_per_step``: analytic matmul and convolution FLOPs of one training step
  (``train_flops_per_example`` of the model times the batch; the same count the records carry).
* ``memory_bytes``: predicted bytes per device, the sum of
  ``state_bytes`` (float32 weights, optimizer slots and batch-norm statistics, exactly what
  the runner's out-of-memory floor counts), ``gradient_bytes`` (float32, one per parameter),
  ``batch_bytes`` (the synthetic input batch) and ``activation_bytes`` (an estimate of what the
  forward pass keeps for the backward pass, described at :func:`activation_elements`). With
  ``compile=True`` each config's training program is compiled instead and XLA's memory analysis
  gives the bytes (slow: seconds per config).
* ``predicted``: ``oom`` when ``memory_bytes`` exceeds the memory limit (the argument, the
  sweep file's ``memory_limit``, the device's memory, or on a CPU the host's memory), else
  ``run``; ``stored`` when the store already has the records the sweep wants (resume skips it).
* ``compile_s``, ``timing_s``, ``overhead_s``, ``wall_s``: the estimated wall time of the config
  (:class:`TimeModel`), 0 for ``stored`` configs.

Real models (``family: real``) have no closed forms: their parameters and FLOPs come from a
stored record of the same workload, else from tracing the model once per distinct spec.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd

from paradnn.measure import timing_bound_s
from paradnn.errors import ParadnnError
from paradnn.specs import CNN, FC, RNN, Real, Workload

__all__ = ["Plan", "TimeModel", "plan", "config_table", "activation_elements", "state_bytes",
           "fit_time_model", "short_name", "OPTIMIZER_SLOTS"]

#: float32 copies of the parameters each optimizer keeps, as an estimate (optax's state, checked
#: against ``jax.eval_shape`` in tests): rmsprop with momentum keeps the squared-gradient average
#: and the momentum trace; adam its two moments; adafactor one full copy for matrices under
#: 128 x 128 (it factors larger ones into row and column vectors). Not the same fact as
#: ``paradnn.preflight.OPTIMIZER_STATE_SLOTS``, a lower bound (adafactor 0) that may refuse a
#: config before tracing only when it surely does not fit.
OPTIMIZER_SLOTS = {"sgd": 0, "momentum": 1, "rmsprop": 2, "adam": 2, "adafactor": 1}
_ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
_F32 = 4  # bytes: master weights, gradients, optimizer state, logits and the loss are float32


def short_name(workload: Workload | dict[str, Any]) -> str:
    """``fc layers=4 nodes=1024 input=2000 output=1000 batch=256 float32``: a workload in one
    line, for progress lines and tables (optimizer and devices only when not the defaults)."""
    from paradnn import families

    d = workload.to_dict() if isinstance(workload, Workload) else dict(workload)
    family = d.get("family")
    names = list(families.get(family).fields()) if family in families.names() else []
    parts = [str(family)]
    for k in names:
        v = d.get(k)
        if v in (None, 0, "") or _is_nan(v):
            continue
        if isinstance(v, float) and v.is_integer():  # a DataFrame row turns ints into floats
            v = int(v)
        parts.append(f"{k}={v}")
    parts += [f"batch={int(d['batch'])}" if d.get("batch") is not None else "batch=?",
              str(d.get("dtype"))]
    if d.get("optimizer") not in (None, "rmsprop") and not _is_nan(d.get("optimizer")):
        parts.append(f"optimizer={d['optimizer']}")
    if d.get("devices") not in (None, 1) and not _is_nan(d.get("devices")):
        parts.append(f"devices={int(d['devices'])}")
    return " ".join(parts)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


# -- sizes: closed forms per model spec ---------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _spec_sizes(spec: FC | CNN | RNN) -> tuple[int, float, int, float, float]:
    """(params, train FLOPs per example, batch-norm statistics, activation elements per example
    in the compute dtype, in float32) of a generated model; cached: grids repeat specs."""
    from paradnn import families

    # The family's closed forms (paradnn.families), the numbers the runner records.
    params = int(families.param_count(spec))
    flops = float(families.of(spec).train_flops_per_example(spec))
    bn_stats = 0
    if isinstance(spec, CNN):
        # Every conv is followed by a batch norm with a running mean and variance per channel.
        from paradnn.families import cnn

        bn_stats = sum(2 * cout for _k, _cin, cout, *_ in cnn.convs(spec))
    compute, f32 = activation_elements(spec)
    return params, flops, bn_stats, compute, f32


def activation_elements(spec: FC | CNN | RNN) -> tuple[float, float]:
    """Estimated activations one example keeps from the forward pass for the backward pass, as
    (elements in the compute dtype, float32 elements). An estimate, not XLA's buffer plan:

    * FC: the input, each hidden layer's pre- and post-ReLU output (2 x layers x nodes), and the
      float32 logits and their softmax (2 x output).
    * CNN: the input image (3 x image^2) and three tensors per convolution (its output, the
      batch norm's and the ReLU's: 3 x side^2 x channels), then the float32 logits and softmax.
    * RNN: per time step the embedding and, per layer, the gate pre-activations and the cell and
      hidden states ((gates + 2) x embed), then the float32 logits and softmax (2 x vocab).
    * Transformer: :func:`paradnn.families.transformer.activation_elements` (per token, the
      block outputs and the attention probabilities, then float32 logits and softmax).

    On the CPU, checked against compiled memory analysis (arguments + temporaries) for FC, CNN
    and RNN configs, the whole memory estimate is within a factor 2 (tests/test_plan.py).
    """
    if isinstance(spec, FC):
        return float(spec.input + 2 * spec.layers * spec.nodes), 2.0 * spec.output
    if isinstance(spec, CNN):
        from paradnn.families import cnn

        elements = 3.0 * spec.image ** 2
        for _k, _cin, cout, side, stride, _stem in cnn.convs(spec):
            out_side = math.ceil(side / stride)
            elements += 3.0 * out_side ** 2 * cout
        return elements, 2.0 * spec.output
    if isinstance(spec, RNN):
        from paradnn.families.rnn import GATES

        per_step = spec.embed + spec.layers * (GATES[spec.cell] + 2) * spec.embed
        return float(spec.length * per_step), 2.0 * spec.length * spec.vocab
    if spec.family == "transformer":
        from paradnn.families import transformer

        return transformer.activation_elements(spec)
    raise TypeError(f"no activation estimate for {type(spec).__name__}")


def state_bytes(params: int, optimizer: str, bn_stats: int = 0) -> int:
    """Bytes of the training state: float32 weights, optimizer slots and batch-norm statistics
    (the runner's out-of-memory floor, without compiling)."""
    return _F32 * (params * (1 + OPTIMIZER_SLOTS[optimizer]) + bn_stats)


def _batch_bytes(spec: Any, batch: int, dtype: str) -> int:
    """Bytes of the synthetic batch (inputs in the compute dtype, int32 labels or tokens)."""
    if isinstance(spec, FC):
        return batch * (spec.input * _ITEMSIZE[dtype] + 4)
    if isinstance(spec, CNN):
        return batch * (3 * spec.image ** 2 * _ITEMSIZE[dtype] + 4)
    if isinstance(spec, RNN) or spec.family == "transformer":
        return batch * 2 * spec.length * 4
    return 0


@functools.lru_cache(maxsize=None)
def _real_sizes(spec: Real) -> tuple[int, float]:
    """(params, train FLOPs per example) of a real model, by tracing it once (no compile).
    Neither depends on the dtype or the optimizer (no matmuls in an update), so one float32
    trace with the model's default optimizer serves every variant."""
    from paradnn.backends.jax import costs as costs
    from paradnn.backends.jax.models import build, count_from_shapes

    model = build(spec, "float32")
    flops = costs.model_flops_per_step(Workload(spec, 1, "float32"))
    return count_from_shapes(model), float(flops)


def config_table(workloads: Iterable[Workload], known: pd.DataFrame | None = None,
                 trace_real: bool = True) -> pd.DataFrame:
    """One row per workload: its fields, ``params``, ``model_flops_per_step`` (FLOP),
    ``state_bytes``, ``gradient_bytes``, ``batch_bytes``, ``activation_bytes`` and
    ``memory_bytes`` (B per device; NaN where unknown) and ``memory_source``.

    ``known``: store rows; a real model's params and FLOPs are taken from an ``ok`` row of the
    same ``workload_key`` when there is one instead of tracing the model. ``trace_real`` False:
    a real model without such a row gets NaN sizes instead of being traced (seconds each).
    """
    stored: dict[str, tuple[float, float]] = {}
    if known is not None and len(known):
        ok = known[(known["status"] == "ok") & (known["family"] == "real")]
        for wk, params, flops in zip(ok["workload_key"], ok["params"], ok["model_flops_per_step"]):
            if pd.notna(params) and pd.notna(flops):
                stored[wk] = (float(params), float(flops))
    rows = []
    for w in workloads:
        row = w.to_dict()
        row["workload_key"] = w.key
        per_device = w.batch // w.devices
        if isinstance(w.spec, Real):
            if w.key in stored:
                params, step_flops = stored[w.key]
                source = "stored record"
            elif not trace_real:
                row.update(params=math.nan, model_flops_per_step=math.nan, state_bytes=math.nan,
                           gradient_bytes=math.nan, batch_bytes=math.nan,
                           activation_bytes=math.nan, memory_bytes=math.nan,
                           memory_source="unknown (real model not traced)")
                rows.append(row)
                continue
            else:
                params, per_example = _real_sizes(w.spec)
                step_flops = per_example * w.batch
                source = "traced"
            state = state_bytes(int(params), w.optimizer)
            row.update(params=int(params), model_flops_per_step=step_flops, state_bytes=state,
                       gradient_bytes=_F32 * int(params), batch_bytes=math.nan,
                       activation_bytes=math.nan, memory_bytes=state + _F32 * int(params),
                       memory_source=f"floor: weights + optimizer state + gradients ({source}; "
                                     "no activation estimate for real models)")
        else:
            params, per_example, bn_stats, compute, f32 = _spec_sizes(w.spec)
            state = state_bytes(params, w.optimizer, bn_stats)
            act = per_device * (compute * _ITEMSIZE[w.dtype] + f32 * _F32)
            batch_b = _batch_bytes(w.spec, per_device, w.dtype)
            row.update(params=params, model_flops_per_step=per_example * w.batch,
                       state_bytes=state, gradient_bytes=_F32 * params, batch_bytes=batch_b,
                       activation_bytes=act,
                       memory_bytes=state + _F32 * params + batch_b + act,
                       memory_source="analytic estimate")
        rows.append(row)
    return pd.DataFrame.from_records(rows)


def compiled_memory(workload: Workload, xla_preset: str = "best", step_loop: str = "auto") -> tuple[int, float]:
    """(bytes per device, compile seconds) of ``workload``'s training program, compiled as the
    runner compiles it, from the compiled memory analysis (``Backend.compile``)."""
    from paradnn import backends
    from paradnn.measure import MeasureSettings

    program = backends.get(workload.framework).compile(
        workload, MeasureSettings(xla_preset=xla_preset, step_loop=step_loop))
    peak = program.metrics.get("memory_peak_bytes")
    if peak is None:
        raise ParadnnError(f"--compile: {workload.framework} gives no memory analysis; use the "
                           "analytic estimate (drop --compile)")
    return int(peak), float(program.metrics["compile_s"])


# -- time model ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PowerFit:
    """``y = 10**a * x**b`` fitted in log-log space over ``n`` points up to ``x_max``.

    ``floor_rate`` (x per y) bounds it: a prediction is never faster than ``x / floor_rate``.
    With ``rate_above`` (x per y), beyond ``x_max`` y is ``x / rate_above``: the median rate of
    the larger half of the records. A sub-linear slope fitted on small models (where fixed
    costs dominate), or the best rate of one noisy small record, must not promise ever higher
    efficiency for models larger than any measured."""

    a: float
    b: float
    n: int
    floor_rate: float = math.inf
    x_max: float = math.inf
    rate_above: float | None = None

    def __call__(self, x: float) -> float:
        if not x > 0:
            return 10 ** self.a
        if self.rate_above is not None and x > self.x_max:
            return max(x / self.rate_above, 10 ** (self.a + self.b * math.log10(self.x_max)))
        y = 10 ** (self.a + self.b * math.log10(x))
        return max(y, x / self.floor_rate) if math.isfinite(self.floor_rate) else y


def _power_fit(x: np.ndarray, y: np.ndarray, slope: tuple[float, float],
               default_slope: float, bounded: bool) -> PowerFit | None:
    keep = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if not len(x):
        return None
    lx, ly = np.log10(x), np.log10(y)
    if len(x) >= 3 and np.ptp(lx) >= math.log10(4):
        b = float(np.clip(np.polyfit(lx, ly, 1)[0], *slope))
    else:  # too few or too similar points for a slope: assume the default one
        b = default_slope
    a = float(np.median(ly - b * lx))
    if not bounded:
        return PowerFit(a, b, int(len(x)))
    top = x >= np.median(x)
    return PowerFit(a, b, int(len(x)), float(np.max(x / y)), float(np.max(x)),
                    float(np.median(x[top] / y[top])))


@dataclass
class TimeModel:
    """Estimated wall time of one config, in seconds:

    ``overhead_s + compile_s + timing_s``

    * ``step_s``: a power law in the analytic FLOPs per step fitted to ok records of the same
      family and dtype on this platform (slope 0.5..1, 1 when fewer than 3 records or less
      than a 4x FLOP range), never faster than the best FLOP rate those records reached, and
      beyond the largest record FLOPs over the median rate of the larger half of the records;
      falls back to the family's records of any dtype, then to all records.
    * ``compile_s``: a power law of the same kind (slope 0..1, 0 = the median when few records).
    * ``timing_s``: the timing protocol's bound, ``paradnn.measure.timing_bound_s``: the time
      budget, or three calls when those outlast it (an upper bound: a run stops earlier when its
      times are stable to ``cv_target``).
    * ``overhead_s``: the rest of a config's wall time (child process, model build,
      initialization, cost-analysis compiles), the median per family of the gap between
      consecutive records' ``time_utc`` less their compile and timing; where no gaps are known,
      as long as the compile (an assumption, said in ``source``).
    """

    step: dict[tuple[str, ...], PowerFit] = field(default_factory=dict)
    #: (min, max) analytic FLOPs per step of the calibration records, per family: estimates
    #: outside it are extrapolations.
    flops_range: dict[str, tuple[float, float]] = field(default_factory=dict)
    compile: dict[tuple[str, ...], PowerFit] = field(default_factory=dict)
    overhead: dict[str, float] = field(default_factory=dict)
    method: str = "none"  # "store", "calibration run", "none"
    source: str = "no records of this platform: no time estimate"
    records: int = 0

    def _lookup(self, table: dict[tuple[str, ...], PowerFit], family: str, dtype: str):
        for key in ((family, dtype), (family,), ()):
            if key in table:
                return table[key]
        return None

    def predict(self, family: str, dtype: str, flops: float, settings: Any) -> dict[str, float]:
        """``compile_s``, ``step_s``, ``timing_s``, ``overhead_s``, ``wall_s`` (all seconds;
        NaN without records to calibrate from)."""
        step_fit = self._lookup(self.step, family, dtype)
        compile_fit = self._lookup(self.compile, family, dtype)
        if step_fit is None or compile_fit is None or not math.isfinite(flops) or flops <= 0:
            nan = math.nan
            return dict(compile_s=nan, step_s=nan, timing_s=nan, overhead_s=nan, wall_s=nan)
        step_s = step_fit(flops)
        compile_s = compile_fit(flops)
        timing_s = timing_bound_s(step_s, settings)
        overhead = self.overhead.get(family, self.overhead.get("", compile_s))
        return dict(compile_s=compile_s, step_s=step_s, timing_s=timing_s, overhead_s=overhead,
                    wall_s=overhead + compile_s + timing_s)


def _platform_rows(frame: pd.DataFrame, platform: dict[str, Any]) -> pd.DataFrame:
    """Rows of the same backend and device kind (and CPU model on a CPU backend)."""
    if not len(frame):
        return frame
    same = (frame["device_platform"] == platform["device_platform"]) & (frame["device_kind"] == platform["device_kind"])
    if platform["device_platform"] == "cpu":
        same &= frame["cpu_model"] == platform["cpu_model"]
    return frame[same]


def _overheads(rows: pd.DataFrame, start_utc: str | None = None) -> dict[str, float]:
    """Median per family (and "" over all) of each ok record's unexplained wall time: the gap to
    the previous record of the same host, less its compile and timing. Gaps above 30 minutes
    are pauses between sweeps, not configs."""
    if not len(rows):
        return {}
    df = rows.assign(t=pd.to_datetime(rows["time_utc"], utc=True, format="ISO8601"))
    df = df.sort_values("t")
    residual: dict[str, list[float]] = {}
    for _host, group in df.groupby("host", dropna=False):
        prev = group["t"].shift(1)
        if start_utc is not None:
            prev = prev.fillna(pd.Timestamp(start_utc))
        gap = (group["t"] - prev).dt.total_seconds()
        calls = group["timed_calls"].astype(float) + group["warmup_calls"].astype(float)
        steps = group["steps_per_call"].astype(float)
        if "steps_per_call_used" in group:  # records of an adaptive protocol say what it chose
            steps = group["steps_per_call_used"].astype(float).fillna(steps)
        timed = calls * steps * group["step_time_s"].astype(float)
        rest = gap - group["compile_s"].astype(float) - timed
        ok = (group["status"] == "ok") & gap.notna() & (gap > 0) & (gap < 1800) & rest.notna()
        for family, value in zip(group["family"][ok], rest[ok]):
            residual.setdefault(family, []).append(max(0.0, float(value)))
    out = {fam: float(np.median(v)) for fam, v in residual.items()}
    if residual:
        out[""] = float(np.median([x for v in residual.values() for x in v]))
    return out


def fit_time_model(frame: pd.DataFrame, platform: dict[str, Any], method: str = "store",
                   label: str = "the store", start_utc: str | None = None) -> TimeModel:
    """A :class:`TimeModel` from store rows (``paradnn.load``'s frame) of this ``platform``
    (``hardware.platform_info()``); ``start_utc``: when the first record's run began (a
    calibration run), so that its gap counts too."""
    rows = _platform_rows(frame, platform)
    ok = rows[rows["status"] == "ok"] if len(rows) else rows
    needed = ["model_flops_per_step", "step_time_s", "compile_s"]
    if len(ok):
        ok = ok.dropna(subset=needed)
    if not len(ok):
        return TimeModel(source=f"no ok records of {platform['device_platform']}/"
                         f"{platform['device_kind']} in {label}: no time estimate "
                         "(use --calibrate, or run a few configs first)")
    model = TimeModel(method=method, records=len(ok))
    groups: list[tuple[tuple[str, ...], pd.DataFrame]] = [((), ok)]
    groups += [((fam,), g) for fam, g in ok.groupby("family")]
    groups += [((fam, dt), g) for (fam, dt), g in ok.groupby(["family", "dtype"])]
    for key, g in groups:
        x = g["model_flops_per_step"].to_numpy(float)
        step = _power_fit(x, g["step_time_s"].to_numpy(float), (0.5, 1.0), 1.0, bounded=True)
        comp = _power_fit(x, g["compile_s"].to_numpy(float), (0.0, 1.0), 0.0, bounded=False)
        if step is not None and comp is not None:
            model.step[key], model.compile[key] = step, comp
    for fam, g in ok.groupby("family"):
        model.flops_range[fam] = (float(g["model_flops_per_step"].min()),
                                  float(g["model_flops_per_step"].max()))
    model.overhead = _overheads(rows, start_utc)
    where = f"{platform['device_platform']}/{platform['device_kind']}"
    if platform["device_platform"] == "cpu":
        where += f" ({platform['cpu_model']})"
    overhead_note = ("per-config overhead from record gaps" if model.overhead
                     else "per-config overhead assumed equal to the compile time (no record gaps)")
    model.source = (f"{method}: {len(ok)} ok record(s) on {where} in {label}; step time and "
                    f"compile time fitted on analytic FLOPs per step; {overhead_note}")
    return model


# -- the plan -----------------------------------------------------------------------------------

@dataclass
class Plan:
    """What a sweep would do: ``table`` (one row per config, see the module docstring) and
    ``summary`` (counts, ranges, the memory limit and its source, the total estimated wall time
    in seconds, and the calibration used)."""

    table: pd.DataFrame
    summary: dict[str, Any]


def _memory_limit(argument: int | str | None, run: dict[str, Any],
                  platform: dict[str, Any]) -> tuple[int, str]:
    from paradnn import hardware
    from paradnn.units import parse_bytes

    if argument is not None:
        return parse_bytes(argument), "argument"
    if run.get("memory_limit") is not None:
        return parse_bytes(run["memory_limit"]), "sweep file run.memory_limit"
    # The runner's default limit (device memory; the host's on a CPU), so plan predicts what runs.
    device = hardware.device_memory_bytes()
    if device is not None and platform["device_platform"] != "cpu":
        return device, f"memory of one {platform['device_kind']} device"
    host = device if device is not None else hardware.host_memory_bytes()
    if host is None:
        raise ParadnnError("this host reports no memory size: pass a memory limit (--memory-limit)")
    return host, "host memory (CPU backend; what the runner uses unless given --memory-limit)"


def calibration_configs(table: pd.DataFrame, per_family: int = 2) -> list[int]:
    """Row indices of a short calibration run: per family, the configs to run at the 10th and
    50th percentile of FLOPs (the cheap half: a calibration must stay short)."""
    chosen: list[int] = []
    todo = table[table["predicted"] == "run"]
    for _fam, g in todo.groupby("family"):
        g = g.sort_values("model_flops_per_step")
        for q in np.linspace(0.1, 0.5, per_family):
            chosen.append(int(g.index[min(len(g) - 1, int(q * (len(g) - 1)))]))
    return list(dict.fromkeys(chosen))


def plan(
    grid_or_file: Any,
    store: str | os.PathLike | None = "results.db",
    memory_limit_bytes: int | str | None = None,
    settings: Any = None,
    repeat: int | None = None,
    compile: bool = False,
    calibrate: bool = False,
    calibrate_configs: int = 2,
) -> Plan:
    """Plan a sweep (a sweep file path or a list of Workloads) on this host without timing it.

    ``store``: results store whose records say which configs are done (resume) and calibrate
    the time model (None or a missing file: none). ``memory_limit_bytes``: bytes (or "16GB")
    per device for the ``oom`` prediction (default: the sweep file's, the device's, or on a CPU
    the host's memory). ``settings`` and ``repeat`` as in :func:`paradnn.sweep`. ``compile``:
    compile every config for XLA's memory analysis instead of the analytic estimate (seconds per
    config). ``calibrate``: time ``calibrate_configs`` configs per family first (in a temporary
    store; minutes) and fit the time model to them instead of the store's records.
    """
    from paradnn.record import Record
    from paradnn.store import load
    from paradnn.sweeper import _plan as sweep_plan, _settings as sweep_settings

    t_start = time.perf_counter()
    parsed = sweep_plan(grid_or_file)
    measure = sweep_settings(parsed, settings)
    repeat = repeat if repeat is not None else parsed.run.get("repeat", 1)
    from paradnn.runner import context

    platform, _ = context("jax")  # the JAX device platform: memory limit and calibration
    frame = pd.DataFrame()
    if store is not None and os.path.exists(store) and os.path.getsize(store) > 0:
        frame = load(store)

    table = config_table(parsed.workloads, frame)
    limit, limit_source = _memory_limit(memory_limit_bytes, parsed.run, platform)
    if compile:
        compiled = [compiled_memory(w, measure.xla_preset, measure.step_loop) for w in parsed.workloads]
        table["memory_bytes"] = [b for b, _ in compiled]
        table["measured_compile_s"] = [s for _, s in compiled]
        table["memory_source"] = "compiled memory analysis"

    # Resume: the record key the sweep would give each config here.
    settings_dict = measure.to_dict()
    keys = [Record(status="ok", workload=w.to_dict(), platform=context(w.framework)[0],
                   software=context(w.framework)[1], settings=settings_dict).key
            for w in parsed.workloads]
    table.insert(0, "key", keys)
    have = frame.groupby("key").size().to_dict() if len(frame) else {}
    table["stored_records"] = [int(have.get(k, 0)) for k in keys]
    table["to_measure"] = [max(0, repeat - have.get(k, 0)) for k in keys]
    over = table["memory_bytes"] > limit
    table["predicted"] = np.where(table["to_measure"] == 0, "stored",
                                  np.where(over, "oom", "run"))

    if calibrate:
        model = _calibrate(parsed.workloads, table, measure, calibrate_configs, platform)
    else:
        model = fit_time_model(frame, platform, label=str(store)) if len(frame) else TimeModel(
            source="no store records to calibrate from: no time estimate (use --calibrate, "
                   "or run a few configs first)")
    estimates = [model.predict(f, d, fl, measure) for f, d, fl in
                 zip(table["family"], table["dtype"], table["model_flops_per_step"])]
    est = pd.DataFrame.from_records(estimates, index=table.index)
    for col in ("compile_s", "timing_s", "overhead_s", "wall_s"):
        table[col] = est[col]
    # A predicted oom is refused after the floor check or the compile: overhead (+ compile).
    oom = table["predicted"] == "oom"
    floor_oom = oom & (table["state_bytes"] > limit)
    table.loc[oom, "timing_s"] = 0.0
    table.loc[floor_oom, "compile_s"] = 0.0
    table["wall_s"] = (table["overhead_s"] + table["compile_s"] + table["timing_s"]) * table["to_measure"]
    table.loc[table["predicted"] == "stored", ["compile_s", "timing_s", "overhead_s", "wall_s"]] = 0.0

    lo_hi = [model.flops_range.get(f) for f in table["family"]]
    table["extrapolated"] = [r is None or not (r[0] / 2 <= x <= r[1] * 2)
                             for r, x in zip(lo_hi, table["model_flops_per_step"])]
    counts = table["predicted"].value_counts().to_dict()
    summary: dict[str, Any] = {
        "source": str(getattr(parsed, "path", "<grid>")),
        "description": parsed.description,
        "configs": len(table),
        "by_family": table["family"].value_counts().to_dict(),
        "stored": int(counts.get("stored", 0)),
        "to_run": int(counts.get("run", 0)),
        "oom": int(counts.get("oom", 0)),
        "repeat": repeat,
        "params_min": int(table["params"].min()) if len(table) else 0,
        "params_max": int(table["params"].max()) if len(table) else 0,
        "flops_min": float(table["model_flops_per_step"].min()) if len(table) else 0.0,
        "flops_max": float(table["model_flops_per_step"].max()) if len(table) else 0.0,
        "memory_max_bytes": float(table["memory_bytes"].max()) if len(table) else 0.0,
        "memory_limit_bytes": int(limit),
        "memory_limit_source": limit_source,
        "memory_method": "compiled" if compile else "analytic",
        # Seconds; None without a calibrated time model.
        "wall_s": _total(table, "wall_s", model),
        "compile_s": _total(table, "compile_s", model),
        "timing_s": _total(table, "timing_s", model),
        "calibration": {"method": model.method, "records": model.records, "source": model.source,
                        "flops_range": dict(model.flops_range)},
        # Configs to measure whose FLOPs lie outside 1/2..2x the calibrated range.
        "extrapolated": int((table["extrapolated"] & (table["predicted"] == "run")).sum()),
        "settings": settings_dict,
        "platform": f"{platform['device_platform']}/{platform['device_kind']}",
        "plan_s": time.perf_counter() - t_start,
    }
    return Plan(table, summary)


def _total(table: pd.DataFrame, column: str, model: TimeModel) -> float | None:
    if model.method == "none":
        return None
    weights = table["to_measure"] if column != "wall_s" else 1
    return float((table[column] * weights).sum())


def _calibrate(workloads: list[Workload], table: pd.DataFrame, measure: Any, per_family: int,
               platform: dict[str, Any]) -> TimeModel:
    """Run a few configs (see :func:`calibration_configs`) into a temporary store with the
    sweep's settings and fit the time model to their records."""
    import datetime as _dt

    from paradnn.store import load
    from paradnn.sweeper import sweep

    picks = calibration_configs(table, per_family)
    if not picks:
        return TimeModel(source="calibration run: no config predicted to run")
    with tempfile.TemporaryDirectory(prefix="paradnn-calibrate-") as tmp:
        path = os.path.join(tmp, "calibration.db")
        start = _dt.datetime.now(_dt.timezone.utc).isoformat()
        sweep([workloads[i] for i in picks], store=path, settings=measure, progress=False)
        frame = load(path)
    return fit_time_model(frame, platform, method="calibration run",
                          label=f"a calibration run of {len(picks)} config(s)", start_utc=start)


def estimate_seconds(workloads: Iterable[Workload], frame: pd.DataFrame,
                     platform: dict[str, Any], settings: Any) -> tuple[dict[str, float], str]:
    """Estimated wall seconds of one measurement per workload key, from store rows with the
    time model of :func:`plan`, and the calibration it used (a sentence). For the sweep's
    progress line; workloads without an estimate are left out."""
    workloads = list(workloads)
    if not len(frame) or not workloads:
        return {}, "no records of this platform in the store yet"
    model = fit_time_model(frame, platform)
    if model.method == "none":
        return {}, model.source
    # No tracing here: the sweep is waiting to start. Real models without a stored record of
    # the same workload get no estimate (the progress line uses the mean of the others).
    table = config_table(workloads, frame, trace_real=False)
    out: dict[str, float] = {}
    for w, fam, dt, fl in zip(workloads, table["family"], table["dtype"],
                              table["model_flops_per_step"]):
        s = model.predict(fam, dt, fl, settings)["wall_s"]
        if math.isfinite(s):
            out[w.key] = s
    return out, model.source
