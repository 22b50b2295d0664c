"""A calibration run for ``paradnn plan --calibrate``: time a few configs of the sweep itself (in
a temporary store, the user's store untouched) and fit the wall-time estimator to them.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from typing import Any

import numpy as np
import pandas as pd

from paradnn.analysis.cost import TimeModel, fit_time_model
from paradnn.measure import MeasureSettings
from paradnn.store import load
from paradnn.sweeper import sweep
from paradnn.workload import Workload


def calibration_configs(table: pd.DataFrame, per_family: int = 2) -> list[int]:
    """Row indices of a short calibration run: per family, the configs predicted to run at the
    10th and 50th percentile of FLOPs (the cheap half: a calibration must stay short)."""
    chosen: list[int] = []
    todo = table[table["predicted"] == "run"]
    for _fam, g in todo.groupby("family"):
        g = g.sort_values("model_flops_per_step")
        for q in np.linspace(0.1, 0.5, per_family):
            chosen.append(int(g.index[min(len(g) - 1, int(q * (len(g) - 1)))]))
    return list(dict.fromkeys(chosen))


def calibrate(workloads: list[Workload], table: pd.DataFrame, settings: MeasureSettings,
              per_family: int, platform: dict[str, Any]) -> TimeModel:
    """Run the configs :func:`calibration_configs` picks from the plan's ``table`` (one row per
    workload of ``workloads``) into a temporary store with the sweep's ``settings``, and fit
    the time model to their records on ``platform``."""
    picks = calibration_configs(table, per_family)
    if not picks:
        return TimeModel(source="calibration run: no config predicted to run")
    with tempfile.TemporaryDirectory(prefix="paradnn-calibrate-") as tmp:
        path = os.path.join(tmp, "calibration.db")
        start = datetime.datetime.now(datetime.timezone.utc).isoformat()
        # No automatic retry of unstable configs: the time model is fitted to what a config
        # costs at the sweep's own time budget.
        sweep([workloads[i] for i in picks], store=path, settings=settings, progress=False,
              retry_unstable_s=0)
        frame = load(path)
    return fit_time_model(frame, platform, method="calibration run",
                          label=f"a calibration run of {len(picks)} config(s)", start_utc=start)


__all__ = ["calibrate", "calibration_configs"]
