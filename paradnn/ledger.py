"""The time ledger: where a config's step time goes (docs/ledger.md).

A run with the setting ``ledger`` profiles a few more steps of its own compiled program after
the timed calls (the framework's ``ledger_ops`` capability: per-operation time, FLOPs and bytes
per step and per device) and splits the measured median step time ``T`` (s) into the parts of
:data:`paradnn.record.LEDGER_PARTS`, which add up to ``T`` exactly. With ``P`` the peak FLOP/s
and ``B`` the peak bandwidth (B/s) of one device, and for each operation ``i`` its measured time
``t_i``, its FLOPs ``f_i`` and bytes ``b_i`` (per step, per device):

* compute bound ``c_i = f_i / P``, bandwidth bound ``m_i = b_i / B``;
* memory-bound time ``min(max(m_i - c_i, 0), max(t_i - c_i, 0))``: how far the operation's
  bandwidth bound exceeds its compute bound, never more than it measured beyond its compute
  bound (an operation served from cache runs faster than its bytes at ``B`` would take);
* below roof ``t_i - c_i - memory_i``: measured time beyond its roofline bound (negative only
  for an operation faster than its compute bound, which breaks physics: ``faster_than_roof``);
* useful work ``U / (N P)`` (``U`` the analytic FLOPs of a step on all ``N`` devices) and extra
  work ``sum(c_i) - useful`` (executed beyond the analytic count: optimizer, elementwise,
  padding, rematerialisation);
* communication: the time of the collective operations (not split by the roof);
* input: 0 (the runs feed a synthetic batch already on the device: no input pipeline);
* outside operations ``max(T - sum(t_i), 0)`` (dispatch, host, synchronisation gaps) and
  overlap ``min(T - sum(t_i), 0)``: where operations run concurrently (XLA:CPU runs some
  asynchronously) or the profiler slowed them, their times add up to more than ``T``; the excess
  is reported as a negative part, not hidden.

Nothing here imports a framework: the backend hands over the operations table.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping
from typing import Any

import pandas as pd

from paradnn import frameworks
from paradnn.analysis.oplevel import COLLECTIVE
from paradnn.errors import ParadnnError
from paradnn.experiments.profile import OPAQUE
from paradnn.record import LEDGER_PARTS, ledger_metric

#: Seconds of steps the ledger's profile covers (at least one step, at most
#: :data:`MAX_STEPS`, never more than the timed calls ran per call): enough events to time
#: every operation of a short step, few enough that reading the trace stays cheap.
TRACE_S = 0.05
MAX_STEPS = 20
#: The bound the summed operation times are held to: within this fraction of the step time
#: (``ledger_ops_s`` / ``step_time_s`` in [1 - bound, 1 + bound]); outside it the run's
#: ``ledger_note`` says why (time outside operations, overlap, the profiler's own cost).
OPS_BOUND = 0.25


def trace_steps(step_time_s: float, steps_per_call: int) -> int:
    """Steps the ledger profiles: about :data:`TRACE_S` seconds of them, from 1 to
    :data:`MAX_STEPS` and at most the timed calls' ``steps_per_call``."""
    want = math.ceil(TRACE_S / step_time_s) if step_time_s > 0 else MAX_STEPS
    return max(1, min(want, MAX_STEPS, max(1, steps_per_call)))


def profile_ops(program: Any, state: Any, batch: Any, steps: int) -> pd.DataFrame:
    """The operations of ``steps`` steps of ``program`` (a :class:`paradnn.frameworks.Program`)
    run from ``state`` under its framework's profiler (``Backend.ledger_ops``): ``category``,
    ``flops``, ``bytes``, ``time_s`` per step and per device, ``attrs`` ``wall_step_s`` (s,
    wall time of a step under the profiler), ``source`` and ``note``. ParadnnError where the
    framework has no such capability."""
    ops_of = frameworks.capability(program.workload.framework, "ledger_ops", "profile its operations "
                                 "for the time ledger")
    with tempfile.TemporaryDirectory(prefix="paradnn-ledger-") as tmp:
        return ops_of(program, state, batch, steps, tmp)


def _opaque_costs(work: pd.DataFrame, column: str, per_step: float | None, devices: int) -> pd.Series:
    """``work[column]`` (FLOP or B per step and device) with the NaN of the operations compiled as
    one call (:data:`paradnn.experiments.profile.OPAQUE`: XLA:CPU runs a small region as one function,
    whose operations have no events) filled with what the step executes beyond the listed
    operations (``per_step``, all devices, from the cost analysis), split by their times."""
    values = work[column].astype(float).copy()
    opaque = work["category"] == OPAQUE
    if opaque.any():
        rest = max((per_step or 0.0) / devices - float(values[~opaque].sum()), 0.0)
        t = work.loc[opaque, "time_s"].astype(float)
        values[opaque] = rest * (t / t.sum() if t.sum() > 0 else 1.0 / len(t))
    return values


def parts(ops: pd.DataFrame, step_time_s: float, model_flops_per_step: float | None, devices: int,
          peak_flops: float | None, peak_bytes_per_sec: float | None,
          flops_per_step: float | None = None, bytes_per_step: float | None = None,
          traced_step_s: float | None = None) -> dict[str, Any]:
    """The ledger of one run: ``ledger_<part>_s`` (s per step, :data:`LEDGER_PARTS`) adding up to
    ``step_time_s``, with ``ledger_ops_s`` (summed operation time), ``ledger_faster_than_roof_s``
    (<= 0: time operations ran below their compute bound), ``ledger_largest_part``,
    ``ledger_largest_loss``, ``ledger_split`` (whether the operations' time was split by the
    roof: it needs ``peak_flops``) and ``ledger_opaque_s`` (time of operations compiled as one
    call, whose FLOPs and bytes are the executed ones, ``flops_per_step`` and
    ``bytes_per_step`` of all devices, beyond the listed operations). Times are per step and
    per device; FLOP/s and B/s of one device; ``model_flops_per_step`` over all ``devices``.

    Where a step under the profiler took longer (``traced_step_s``, s) than the timed step, the
    profiler's own cost is in the operations' events: every operation's time is scaled by
    ``step_time_s / traced_step_s`` (``ledger_time_scale``), which keeps the operations' share
    of the traced step. Otherwise the times are taken as they are."""
    scale = (step_time_s / traced_step_s if traced_step_s and step_time_s and traced_step_s > step_time_s
             else 1.0)
    ops = ops.assign(time_s=ops["time_s"].astype(float) * scale)
    collective = ops["category"] == COLLECTIVE
    work = ops[~collective]
    t = work["time_s"]
    ops_s = float(ops["time_s"].sum())
    gap = step_time_s - ops_s
    out: dict[str, Any] = {name: None for name in map(ledger_metric, LEDGER_PARTS)}
    out.update({
        ledger_metric("communication"): float(ops.loc[collective, "time_s"].sum()),
        ledger_metric("input"): 0.0,
        ledger_metric("outside"): max(gap, 0.0),
        ledger_metric("overlap"): min(gap, 0.0),
        "ledger_ops_s": ops_s,
        "ledger_faster_than_roof_s": None,
        "ledger_split": bool(peak_flops),
        "ledger_opaque_s": float(t[work["category"] == OPAQUE].sum()),
        "ledger_time_scale": scale,
    })
    if peak_flops:
        compute = _opaque_costs(work, "flops", flops_per_step, devices).fillna(0.0) / peak_flops
        if peak_bytes_per_sec:
            bound = _opaque_costs(work, "bytes", bytes_per_step, devices) / peak_bytes_per_sec
            # An operation without bytes (a profiler that gives none) has no bandwidth bound:
            # its time beyond the compute bound stays below roof.
            memory = (bound - compute).clip(lower=0.0).clip(upper=(t - compute).clip(lower=0.0)).fillna(0.0)
        else:
            memory = compute * 0.0
        useful = (model_flops_per_step or 0.0) / (devices * peak_flops)
        out.update({
            ledger_metric("useful"): useful,
            ledger_metric("extra"): float(compute.sum()) - useful,
            ledger_metric("memory"): float(memory.sum()),
            ledger_metric("below_roof"): float((t - compute - memory).sum()),
            "ledger_faster_than_roof_s": float((t - compute).clip(upper=0.0).sum()),
        })
    else:
        # No peak: the operations' time stays one part, below the roof by an unknown amount.
        out[ledger_metric("below_roof")] = float(t.sum())
    out["ledger_largest_part"] = largest(out)
    out["ledger_largest_loss"] = largest(out, losses_only=True)
    return out


def largest(metrics: Mapping[str, Any], losses_only: bool = False) -> str | None:
    """The name (a :data:`LEDGER_PARTS` key) of the largest positive part in ``metrics`` (a
    record's or a row's ``ledger_<part>_s``); ``losses_only`` leaves useful work out. None
    where no part is positive (no ledger). The overlap, negative by definition, is never it."""
    best, name = 0.0, None
    for part in LEDGER_PARTS:
        if part == "overlap" or (losses_only and part == "useful"):
            continue
        value = metrics.get(ledger_metric(part))
        if isinstance(value, (int, float)) and value == value and value > best:
            best, name = float(value), part
    return name


def note(metrics: Mapping[str, Any], ops: pd.DataFrame) -> str:
    """What a reader of the ledger should know: how its times were taken, and, where the
    operations' summed time is outside :data:`OPS_BOUND` of the step time, why."""
    step = metrics["step_time_s"]
    ops_s = metrics["ledger_ops_s"]
    words = [str(ops.attrs.get("note") or "")]
    ratio = ops_s / step if step else math.nan
    if not (1 - OPS_BOUND <= ratio <= 1 + OPS_BOUND):
        why = (f"operations sum to {ratio:.2f}x the step time (outside the +-{OPS_BOUND:.0%} bound): ")
        if ratio < 1:
            why += "the rest is time outside operations (dispatch, host work, gaps between them)"
        else:
            why += "operations ran concurrently (the overlap part)"
        words.append(why)
    scale = metrics.get("ledger_time_scale") or 1.0
    if scale < 1.0:
        words.append(f"under the profiler a step took {1 / scale:.2f}x the timed step: the operations' "
                     f"times are scaled by {scale:.3g} (their share of the traced step kept)")
    opaque = metrics.get("ledger_opaque_s") or 0.0
    if opaque > 0 and ops_s > 0:
        words.append(f"{opaque / ops_s:.0%} of the operations' time ran in regions compiled as one call "
                     "(no events of their own): their FLOPs and bytes are the step's executed ones beyond "
                     "the listed operations, split by time")
    if not metrics.get("ledger_split"):
        words.append("no peak FLOP/s: the operations' time is not split by the roof (all below roof)")
    elif not metrics.get("peak_bytes_per_sec"):
        words.append("no peak bandwidth: memory-bound time is counted as below roof")
    return "; ".join(w for w in words if w)


def ledger_metrics(ops: pd.DataFrame, metrics: Mapping[str, Any], devices: int) -> dict[str, Any]:
    """The record's ledger metrics from the profiled operations ``ops`` (:func:`profile_ops`) and
    the run's ``metrics`` (``step_time_s``, ``model_flops_per_step``, ``peak_flops``,
    ``peak_bytes_per_sec``, ``peak_source``), with the ledger's provenance
    (``ledger_source``, ``ledger_note``, ``ledger_steps``, ``ledger_traced_step_s``)."""
    out = parts(ops, metrics["step_time_s"], metrics.get("model_flops_per_step"), devices,
                metrics.get("peak_flops"), metrics.get("peak_bytes_per_sec"),
                metrics.get("flops_per_step"), metrics.get("bytes_per_step"), ops.attrs.get("wall_step_s"))
    peak = (f"peak {metrics.get('peak_source')} FLOP/s, bandwidth {metrics.get('peak_bytes_source')}"
            if out["ledger_split"] else "no peak")
    out.update(
        ledger_steps=int(ops.attrs.get("steps", 0)) or None,
        ledger_traced_step_s=ops.attrs.get("wall_step_s"),
        ledger_flops_matched=ops.attrs.get("flops_matched_fraction"),
        ledger_source=f"{ops.attrs.get('source', 'profile')}; useful work from the analytic count "
                      f"(model_flops_per_step); {peak}; step time measured (step_time_s)",
    )
    out["ledger_note"] = note({**metrics, **out}, ops)
    return out


def shares(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Each ledger part's share of the step time (a fraction; the overlap negative), in
    :data:`LEDGER_PARTS` order, for a record's or a row's metrics; empty without a ledger."""
    step = metrics.get("step_time_s")
    out = {}
    for part in LEDGER_PARTS:
        value = metrics.get(ledger_metric(part))
        if isinstance(value, (int, float)) and value == value and step:
            out[part] = float(value) / float(step)
    return out


def summary(metrics: Mapping[str, Any]) -> str | None:
    """One line of a run's ledger for people: each non-zero part's share of the step time and
    the largest loss; None without a ledger."""
    share = shares(metrics)
    if not share:
        return None
    text = ", ".join(f"{LEDGER_PARTS[p][0]} {v:.0%}" for p, v in share.items() if abs(v) >= 0.005)
    loss = metrics.get("ledger_largest_loss")
    return (f"{text} of the {metrics['step_time_s'] * 1e3:.4g} ms step"
            + (f"; largest loss: {LEDGER_PARTS[loss][0]}" if loss in LEDGER_PARTS else ""))


def safe_metrics(ops: pd.DataFrame, metrics: Mapping[str, Any], devices: int) -> dict[str, Any]:
    """:func:`ledger_metrics`, or :func:`unavailable` saying why where the profile's table could
    not be split (a framework's table missing a column, a step time of 0): the run keeps its
    measurement either way."""
    try:
        return ledger_metrics(ops, metrics, devices)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        return unavailable(f"the profile could not be split: {type(exc).__name__}: {exc}"[:1000])


def unavailable(why: str) -> dict[str, Any]:
    """The ledger metrics of a run whose ledger could not be taken, saying why."""
    return {"ledger_source": None, "ledger_note": f"no ledger: {why}"}


def safe_profile(program: Any, state: Any, batch: Any, steps: int) -> tuple[pd.DataFrame | None, str]:
    """:func:`profile_ops`, or (None, why) where the framework cannot profile or the profile
    failed: a ledger that cannot be taken never fails the run it belongs to."""
    try:
        return profile_ops(program, state, batch, steps), ""
    except ParadnnError as exc:
        return None, str(exc)
    except OSError:
        raise  # the environment (a temporary folder), not the ledger: the runner says so
    except Exception as exc:  # noqa: BLE001 - a profiler failure is the ledger's, not the run's
        return None, f"the profile failed: {type(exc).__name__}: {exc}"[:1000]
