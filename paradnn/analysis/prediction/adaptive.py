"""What the adaptive sweep measures next: a space-filling start, then the configs whose
intervals are widest."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd

from paradnn.analysis.prediction.correction import farthest_first
from paradnn.analysis.prediction.data import MIN_CONFIGS
from paradnn.analysis.prediction.fitting import Predictor
from paradnn.analysis.prediction.model import FeatureSpace, StepTimeModel, difficulty_of


#: Share of a budget that the space-filling start takes; the rest goes to the widest intervals.
START_FRACTION = 0.4


def start_size(budget: int) -> int:
    """Configs of the space-filling start of an adaptive sweep of ``budget`` configs."""
    return min(budget, max(MIN_CONFIGS, int(round(START_FRACTION * budget))))


def space_filling(cand: pd.DataFrame, n: int) -> list[str]:
    """The space-filling start: ``n`` workload keys spread over each group's axes in proportion
    to the group's size (at least ``MIN_CONFIGS`` per group where it has them)."""
    out = []
    groups = list(cand.groupby(["framework", "dtype", "family"], sort=True))
    for _, rows in groups:
        share = max(MIN_CONFIGS, int(round(n * len(rows) / len(cand))))
        space = FeatureSpace.of(str(rows["family"].iloc[0]), rows)
        idx = farthest_first(space.axes(rows), min(share, len(rows)))
        out.extend(rows["workload_key"].iloc[idx])
    return out


def next_configs(predictor: Predictor, left: pd.DataFrame, k: int) -> tuple[list[str], float]:
    """The ``k`` configs of ``left`` to measure next (widest relative interval first, each pick
    counting as measured for the next) and the widest relative width (inf: no finite interval
    yet, then the most difficult configs go first).

    After each pick the configs of its group are rescored together (one neighbour search for
    all), not one by one: on the paper's FC grid (19,440 configs) a round of 10 picks took 79 s
    CPU one by one."""
    keys: list[Any] = []
    widths, diffs, gids, local = [], [], [], []
    models: list[StepTimeModel | None] = []
    axes: list[np.ndarray | None] = []
    for (fw, dtype, fam), rows in left.groupby(["framework", "dtype", "family"], sort=True):
        model = next((m for m in predictor.models if (m.group.get("framework"), m.group.get("dtype"),
                                                     m.group.get("family")) == (fw, dtype, fam)), None)
        if model is None:  # a group with no model yet: its configs are the most uncertain
            widths.append(np.full(len(rows), np.inf))
            diffs.append(np.full(len(rows), np.inf))
            axes.append(None)
        else:
            model = copy.copy(model)  # the picks below extend its neighbours, not the caller's
            widths.append(model.predict(rows)["prediction_relative_width"].to_numpy(float))
            diffs.append(np.asarray(model.difficulty(rows), dtype=float))
            axes.append(model._space.axes(rows))
        gids.append(np.full(len(rows), len(models)))
        local.append(np.arange(len(rows)))
        models.append(model)
        keys.extend(rows["workload_key"])
    if not keys:
        raise ValueError("next_configs: no configs left to choose from")
    width, diff = np.concatenate(widths), np.concatenate(diffs)
    gid, pos = np.concatenate(gids), np.concatenate(local)
    widest = float(width.max())
    alive = np.ones(len(keys), dtype=bool)
    order = np.arange(len(keys))  # the candidates' order in the list that is sorted each pick
    picks: list[str] = []
    while alive.any() and len(picks) < k:
        # Widest first, then most difficult; ties keep their order in the list (a stable sort,
        # as the list of tuples this replaces was sorted).
        idx = order[alive[order]]
        order = idx[np.lexsort((np.arange(len(idx)), -diff[idx], -width[idx]))]
        pick = int(order[0])
        picks.append(keys[pick])
        alive[pick] = False
        g = int(gid[pick])
        model = models[g]
        if model is None:
            continue
        # Believe the pick measured: it is a neighbour of the others from now on, so the next
        # pick of this round goes elsewhere.
        x = axes[g]
        model._train_axes = np.vstack([model._train_axes, x[pos[pick]][None, :]])
        model._residuals = np.append(model._residuals, model._res_median)
        same = np.flatnonzero(alive & (gid == g))
        if not len(same):
            continue
        d = difficulty_of(x[pos[same]], model._train_axes, model._residuals, model._scale0,
                        model._res_median)
        diff[same] = d
        width[same] = (np.exp(model.quantile * d) - np.exp(-model.quantile * d)
                       if np.isfinite(model.quantile) else np.inf)
    return picks, widest
