"""One run of one workload on one platform, as a flat, versioned row.

``Record.to_dict()`` is the row the store keeps and ``paradnn.load`` returns: one key per field,
no nesting. Spec fields keep their names (``layers``, ``nodes``, ...), metrics keep the names of
``METRICS``, platform and software fields keep the names below. Never rename a field; add new
ones and bump ``SCHEMA_VERSION`` only when a field's meaning changes.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from paradnn.specs import Workload, stable_hash

SCHEMA_VERSION = 1

STATUSES = ("ok", "oom", "error", "timeout", "crashed")

# name -> (unit, where it comes from). The contract of DESIGN.md "Metric names" plus extras.
METRICS: dict[str, tuple[str, str]] = {
    "examples_per_sec": ("examples/s", "measured: global batch / median step time"),
    "step_time_s": ("s", "measured: median time of one training step"),
    "step_time_p10_s": ("s", "measured: 10th percentile step time"),
    "step_time_p90_s": ("s", "measured: 90th percentile step time"),
    "step_time_cv": ("1", "measured: coefficient of variation of the step time"),
    "flops_per_step": ("FLOP", "XLA cost analysis of one step, loops scaled, all devices"),
    "model_flops_per_step": ("FLOP", "analytic count of one step (matmul/conv), all devices"),
    "bytes_per_step": ("B", "XLA cost analysis: bytes accessed by one step, all devices"),
    "flops_per_sec": ("FLOP/s", "flops_per_step / step_time_s"),
    "flops_utilization": ("1", "flops_per_sec / (peak_flops x devices)"),
    "peak_flops": ("FLOP/s", "peak of one device for the dtype; see peak_source"),
    "peak_bytes_per_sec": ("B/s", "peak memory bandwidth of one device; see peak_source"),
    "peak_source": ("", "spec (vendor table) or measured (paradnn probe)"),
    "arithmetic_intensity": ("FLOP/B", "flops_per_step / bytes_per_step"),
    "params": ("1", "trainable parameters, from shapes"),
    "memory_argument_bytes": ("B", "XLA memory analysis, per device"),
    "memory_output_bytes": ("B", "XLA memory analysis, per device"),
    "memory_temp_bytes": ("B", "XLA memory analysis, per device"),
    "memory_peak_bytes": ("B", "XLA memory analysis, per device: its peak, else argument+output+temp-alias"),
    "compile_s": ("s", "measured: wall time of ahead-of-time lowering and compilation"),
    "final_loss": ("1", "measured: loss after the last timed step"),
    "timed_calls": ("1", "measured: number of timed compiled calls"),
    "model_flops_utilization": ("1", "model_flops_per_step / step_time_s / (peak x devices)"),
}

PLATFORM_FIELDS = ("backend", "device_kind", "device_count", "host", "cpu_model")
SOFTWARE_FIELDS = (
    "paradnn_version", "jax_version", "jaxlib_version", "flax_version", "optax_version",
    "tf_version", "python_version", "xla_flags",
)


@dataclass
class Record:
    """One run. ``status`` is one of ``STATUSES``; metrics are absent (None) unless measured."""

    status: str
    workload: dict[str, Any]  # Workload.to_dict(): family, hyperparameters, batch, dtype, ...
    platform: dict[str, Any]  # PLATFORM_FIELDS
    software: dict[str, Any]  # SOFTWARE_FIELDS
    settings: dict[str, Any]  # measurement settings (MeasureSettings.to_dict())
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    tags: dict[str, Any] = field(default_factory=dict)  # model tags, e.g. kind=real
    time_utc: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat())
    schema_version: int = SCHEMA_VERSION

    @property
    def workload_key(self) -> str:
        """Identity of the computation: spec + batch + dtype + optimizer + devices."""
        return stable_hash(self.workload)

    @property
    def key(self) -> str:
        """Identity for resume and deduplication: workload + platform + software + settings.

        ``host`` is left out so that the same run on two identical machines dedups as one
        configuration measured twice is not lost: ``merge`` keys rows on ``key`` + ``time_utc``.
        ``paradnn_revision`` (the source commit, "+dirty" after any edit) is left out too, so a
        sweep resumes across commits and edits of paradnn; every row still stores it.
        """
        platform = {k: v for k, v in self.platform.items() if k != "host"}
        software = {k: v for k, v in self.software.items() if k != "paradnn_revision"}
        return stable_hash([self.workload, platform, software, self.settings])

    def to_dict(self) -> dict[str, Any]:
        """The flat row: identity, status, workload fields, platform, software, settings, metrics."""
        row: dict[str, Any] = {
            "key": self.key,
            "workload_key": self.workload_key,
            "status": self.status,
            "error": self.error,
            "time_utc": self.time_utc,
            "schema_version": self.schema_version,
            "kind": self.tags.get("kind", "generated"),
            "task": self.tags.get("task"),  # real models: vision, detection, translation, ...
        }
        row.update(self.workload)
        row.update(self.platform)
        row.update(self.software)
        row.update(self.settings)
        row.update({name: self.metrics.get(name) for name in METRICS})
        row.update({k: v for k, v in self.metrics.items() if k not in METRICS})
        return row

    @classmethod
    def failed(cls, workload: Workload, status: str, error: str, **context: Any) -> "Record":
        """A record for a run that did not produce metrics (oom, error, timeout, crashed)."""
        assert status in STATUSES and status != "ok", status
        return cls(status=status, workload=workload.to_dict(), error=error, **context)
