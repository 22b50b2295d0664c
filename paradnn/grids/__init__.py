"""Grids of workloads: products of axes, presets, the paper's Table 2 as data, sweep files.

A grid is a plain ``list[Workload]``. :func:`grid` builds the cartesian product of its axes; an
axis is a single value, a list, or a ``range``. Model hyperparameters (``layers``, ``nodes``,
...) and the training settings ``batch``, ``dtype``, ``optimizer`` and ``devices`` are all axes.

>>> from paradnn.grids import grid, geometric, zipped, max_params
>>> g = grid("fc", layers=[2, 4], nodes=geometric(32, 128, 2), input=64, output=10, batch=8)
>>> len(g)
6
>>> len(grid("fc", zipped(nodes=[32, 64], batch=[8, 16]), layers=2, input=64, output=10))
2
>>> len(max_params(g, 10_000))  # drops FC models above 10k trainable parameters
3

``PAPER[family]`` holds the ranges of Table 2 of the ParaDnn paper (Wang, Wei and Brooks, 2019),
``PAPER_FIXED[family]`` the values the paper held fixed for its heat maps, and
``preset(name, family)`` expands the ``smoke``, ``small`` and ``paper`` presets;
:func:`load_sweep_file` reads a YAML sweep file (docs/sweeps.md).

This package only gathers the public names; each job is a module of its own: ranges
(:mod:`paradnn.families.ranges`, where families state theirs), products of axes
(:mod:`paradnn.grids.product`), presets (:mod:`paradnn.grids.presets`), sweep files
(:mod:`paradnn.grids.sweepfile`, read with :mod:`paradnn.grids.yamlsafe`).
"""

from __future__ import annotations

from paradnn.families.ranges import MAX_CONFIGS, geometric, linear
from paradnn.grids.presets import PAPER, PAPER_FIXED, PRESETS, preset
from paradnn.grids.product import (WORKLOAD_AXES, Zipped, axes_of, check_size, concat, filter_grid,
                                   grid, max_params, param_count, zipped)
from paradnn.grids.sweepfile import MAX_REPEAT, RUN_KEYS, GridLike, SweepPlan, load_sweep_file, resolve, resolve_settings

__all__ = [
    "MAX_CONFIGS", "MAX_REPEAT", "PAPER", "PAPER_FIXED", "PRESETS", "RUN_KEYS", "WORKLOAD_AXES", "GridLike", "SweepPlan",
    "Zipped", "axes_of", "check_size", "concat", "filter_grid", "geometric", "grid", "linear",
    "load_sweep_file", "max_params", "param_count", "preset", "resolve", "resolve_settings",
    "zipped",
]
