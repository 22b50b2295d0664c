"""The ParaDnn analyses: pure functions from a results DataFrame (``paradnn.load``) to a
DataFrame. Plots of each are in :mod:`paradnn.plots`; :func:`paradnn.report.write_report` runs
every analysis a store supports. The columns' vocabulary (units, labels, which rows are ok,
unstable or flagged) is :mod:`paradnn.analysis.columns`.

>>> import paradnn
>>> df = paradnn.load("results.db")
>>> hm = paradnn.analysis.heatmap(df[df.family == "fc"], "batch", "nodes",
...                               "model_flops_utilization", panels=True)
>>> w = paradnn.analysis.sensitivity(df[df.family == "fc"], "model_flops_utilization",
...                                  ["layers", "nodes", "batch"])   # unstable runs left out
>>> rf = paradnn.analysis.roofline(df)
>>> sp = paradnn.analysis.framework_speedup(df, "tensorflow", "jax")   # per workload, x
"""

from paradnn.analysis.columns import (
    headline_utilization, hyperparameters, label, platform_label, unit, workload_label,
)
from paradnn.analysis.cost import estimate_seconds
from paradnn.analysis.framework import (
    device_platform, framework_of, frameworks, platform_column, with_framework,
)
from paradnn.analysis.heatmap import heatmap
from paradnn.analysis.ledger import ledger_frame, part_sensitivity
from paradnn.analysis.oplevel import above_roof, categorize, op_breakdown, op_roofline, top_ops
from paradnn.analysis.params_range import family_ranges, params_range
from paradnn.analysis.roofline import roofline
from paradnn.analysis.saturation import saturation, saturation_summary
from paradnn.analysis.sensitivity import sensitivity
from paradnn.analysis.speedup import (
    KINDS, Comparison, across_fields, best_stack_speedup, comparisons, framework_speedup, geometric_mean,
    geometric_mean_ci, speedup, speedup_of, speedup_summary,
)

__all__ = [
    "ledger_frame", "part_sensitivity",
    "KINDS", "Comparison", "above_roof", "across_fields", "best_stack_speedup", "categorize", "comparisons",
    "device_platform",
    "estimate_seconds", "family_ranges", "framework_of", "framework_speedup", "frameworks",
    "geometric_mean", "geometric_mean_ci", "headline_utilization", "heatmap", "hyperparameters",
    "label", "op_breakdown", "op_roofline", "params_range", "platform_column", "platform_label",
    "roofline", "saturation", "saturation_summary", "sensitivity", "speedup", "speedup_of",
    "speedup_summary", "top_ops", "unit", "with_framework", "workload_label",
]
