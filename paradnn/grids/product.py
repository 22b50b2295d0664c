"""Grids of workloads: the cartesian product of axes, zipped axes, filters.

A grid is a plain ``list[Workload]``. :func:`grid` builds the cartesian product of its axes; an
axis is a single value, a list, or a ``range``. Model hyperparameters (``layers``, ``nodes``,
...) and the training settings ``batch``, ``dtype``, ``optimizer``, ``devices`` and
``framework`` are all axes.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from paradnn import families, frameworks, sizes
from paradnn.errors import ParadnnError, SpecError
from paradnn.families.ranges import MAX_CONFIGS
from paradnn.workload import Workload

#: Axes every family has besides its model hyperparameters (Workload fields).
WORKLOAD_AXES = ("batch", "dtype", "optimizer", "devices", "framework")


@dataclasses.dataclass(frozen=True)
class Zipped:
    """Axes that vary together (element i of each list forms one point), from :func:`zipped`."""

    axes: dict[str, list[Any]]

    def points(self) -> list[dict[str, Any]]:
        names = list(self.axes)
        return [dict(zip(names, values)) for values in zip(*self.axes.values())]


def zipped(**axes: Any) -> Zipped:
    """Axes that vary together instead of as a product; all must have the same length.

    >>> zipped(nodes=[32, 64], batch=[8, 16]).points()
    [{'nodes': 32, 'batch': 8}, {'nodes': 64, 'batch': 16}]
    """
    if not axes:
        raise SpecError("zipped", axes, "at least one axis")
    lists = {name: _values(name, v) for name, v in axes.items()}
    lengths = {name: len(v) for name, v in lists.items()}
    if len(set(lengths.values())) != 1:
        raise SpecError("zipped", lengths, "axes of equal length")
    return Zipped(lists)


def axes_of(family: str) -> tuple[str, ...]:
    """Every axis name a grid of ``family`` accepts: hyperparameters, then workload settings."""
    return families.get(family).fields() + WORKLOAD_AXES


def _values(name: str, value: Any) -> list[Any]:
    """An axis as a list: a scalar is one value; a list, tuple or range its elements."""
    if isinstance(value, (list, tuple, range)):
        if not len(value):
            raise SpecError(name, value, "a value or a non-empty list or range")
        # A range stays lazy: its length is known without listing it (see check_size).
        return value if isinstance(value, range) else list(value)
    if isinstance(value, (set, frozenset, dict)) or isinstance(value, Iterable) and not isinstance(
            value, str):
        # Sets have no order and generators are consumed once: ask for a list.
        raise SpecError(name, value, "a value, a list or a range")
    return [value]


def grid(family: str, *zips: Zipped, max_configs: int | None = None, **axes: Any) -> list[Workload]:
    """The cartesian product of ``axes`` (and of each :class:`Zipped` group) as Workloads.

    Every model hyperparameter of ``family`` must be given (a real model's ``image`` and
    ``length`` default to the model's own). ``batch`` is required except for ``family="real"``,
    where it defaults to the model's registered batch size. ``dtype`` defaults to float32,
    ``optimizer`` to the model's default, ``devices`` to 1, ``framework`` to jax. Points are ordered like nested loops
    over the axes in the order given (the last axis varies fastest). Duplicate points are kept
    once. A product of more than ``max_configs`` points (default ``MAX_CONFIGS``) raises
    SpecError before anything is expanded.
    """
    names = axes_of(family)
    zip_points: list[list[dict[str, Any]]] = []
    seen: set[str] = set()
    for z in zips:
        if not isinstance(z, Zipped):
            raise SpecError("grid positional argument", z, "zipped(...) groups; pass axes by name")
        zip_points.append(z.points())
        seen.update(z.axes)
    axis_values: dict[str, Any] = {}
    for name, value in axes.items():
        if name in seen:
            raise SpecError(name, value, "each axis once (it is also in a zipped group)")
        axis_values[name] = _values(name, value)
        seen.add(name)
    unknown = sorted(seen - set(names))
    if unknown:
        raise SpecError(unknown[0], axes.get(unknown[0]), f"axes of {family}: {', '.join(names)}")
    spec_type = families.get(family).spec
    spec_names = [f.name for f in dataclasses.fields(spec_type)]
    required = [f.name for f in dataclasses.fields(spec_type)
                if f.default is dataclasses.MISSING]
    if family != "real":
        required.append("batch")
    missing = [n for n in required if n not in seen]
    if missing:
        raise SpecError(missing[0], None, f"a value or list (required axis of {family})")
    check_size(math.prod(len(v) for v in [*zip_points, *axis_values.values()]), max_configs)
    groups: list[list[dict[str, Any]]] = zip_points + [
        [{name: v} for v in values] for name, values in axis_values.items()]

    out: list[Workload] = []
    keys: set[str] = set()
    for combo in itertools.product(*groups):
        point: dict[str, Any] = {}
        for part in combo:
            point.update(part)
        spec = spec_type(**{n: point[n] for n in spec_names if n in point})
        batch = point.get("batch")
        if batch is None and family == "real":
            batch = families.get(family).default_batch(spec)
        w = Workload(spec, batch=batch, dtype=point.get("dtype", "float32"),
                     optimizer=point.get("optimizer"), devices=point.get("devices", 1),
                     framework=point.get("framework", frameworks.DEFAULT))
        if w.key not in keys:
            keys.add(w.key)
            out.append(w)
    return out


def check_size(configs: int, max_configs: int | None = None, where: str = "grid") -> None:
    """Raise SpecError if a grid of ``configs`` points exceeds ``max_configs`` (default
    ``MAX_CONFIGS``): counted from the axes' lengths, before any point is built."""
    cap = MAX_CONFIGS if max_configs is None else max_configs
    if configs > cap:
        raise ParadnnError(f"{where} has {configs:,} configs, more than max_configs={cap:,}; "
                           "raise run.max_configs in the sweep file or --max-configs if you mean it")


def param_count(workload: Workload | Any) -> int:
    """Trainable parameters of a workload's model (or of a bare spec), counted without
    building it (``paradnn.sizes.param_count``: the family's closed form or table); SpecError
    for a family that has no such count (filter such grids by hand)."""
    spec = workload.spec if isinstance(workload, Workload) else workload
    count = sizes.param_count(spec)
    if count is None:
        raise SpecError("family", spec.family, "a family with a parameter count (its Family "
                        "entry's param_count) to filter by parameters")
    return int(count)


def filter_grid(workloads: Iterable[Workload],
                keep: Callable[[Workload], bool]) -> list[Workload]:
    """The workloads for which ``keep(workload)`` is true, in order."""
    return [w for w in workloads if keep(w)]


def max_params(workloads: Iterable[Workload], limit: float) -> list[Workload]:
    """Drop models with more than ``limit`` trainable parameters (see :func:`param_count`)."""
    return [w for w in workloads if param_count(w) <= limit]


def concat(*grids: Sequence[Workload]) -> list[Workload]:
    """Several grids as one, each workload once (first occurrence kept)."""
    out: list[Workload] = []
    keys: set[str] = set()
    for g in grids:
        for w in g:
            if w.key not in keys:
                keys.add(w.key)
                out.append(w)
    return out


# -- sweep files ----------------------------------------------------------------------------
