"""Sweep files (YAML): a family, fixed values and swept axes, filters, measurement settings and
run settings, read safely and checked key by key (the reference is docs/sweeps.md), and the
one place that turns what a sweep is given (a file or a list of workloads) into a
:class:`SweepPlan` and its measurement settings.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable
from typing import Any, Union

from paradnn import families, frameworks
from paradnn.errors import ParadnnError, SpecError, echo
from paradnn.families.ranges import MAX_CONFIGS, geometric, linear_range
from paradnn.grids.product import Zipped, axes_of, check_size, concat, grid, max_params
from paradnn.grids.runsettings import MAX_REPEAT, RUN_KEYS, check_run_value, parse_overlap, parse_retry_unstable
from paradnn.grids.yamlsafe import read_yaml
from paradnn.measure import SETTINGS_FIELDS, MeasureSettings, parse_setting
from paradnn.units import parse_int
from paradnn.workload import Workload

# A sweep file (YAML) names a family, fixed values and swept axes, filters, measurement settings
# and run settings. The reference is docs/sweeps.md; every key is checked here.

_GROUP_KEYS = ("family", "fixed", "axes", "zip", "dtypes", "max_params")
_TOP_KEYS = ("description", "settings", "run", "parts") + _GROUP_KEYS
# The run settings (RUN_KEYS, their checks) are declared once in paradnn.grids.runsettings.
# Measurement settings are parsed and range-checked where they are defined (their fields'
# metadata in paradnn.measure): one place for each setting's type, limits and meaning.


@dataclasses.dataclass(frozen=True)
class SweepPlan:
    """A parsed sweep file: the workloads, measurement settings overrides and run settings."""

    path: str
    workloads: list[Workload]
    settings: dict[str, Any]
    run: dict[str, Any]
    description: str = ""


def _file_error(path: str, key: str, reason: str) -> ParadnnError:
    return ParadnnError(f"sweep file {path}: key {echo(key)}: {reason}")


def _yaml_axis(path: str, key: str, value: Any) -> Any:
    """A YAML axis value: a scalar, a list, or a range mapping {from, to, times|step}."""
    if isinstance(value, dict):
        allowed = {"from", "to", "times", "step"}
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise _file_error(path, f"{key}.{unknown[0]}",
                              "unknown key in a range (allowed: from, to, and times or step)")
        if "from" not in value or "to" not in value or ("times" in value) == ("step" in value):
            raise _file_error(path, key, "a range needs from, to, and exactly one of times, step")
        try:
            if "times" in value:
                return geometric(value["from"], value["to"], value["times"])
            return linear_range(value["from"], value["to"], value["step"])
        except SpecError as exc:
            raise _file_error(path, key, str(exc)) from None
    if isinstance(value, list):
        if not value:
            raise _file_error(path, key, "an empty list sweeps nothing; give at least one value")
        for v in value:
            if isinstance(v, (list, dict)):
                raise _file_error(path, key, f"list items must be plain values, got {echo(v)}")
        return value
    if value is None:
        raise _file_error(path, key, "a value, a list or a range mapping, not null")
    return value


#: The framework value of a sweep file that asks for the platform's best stack (run.best_stack).
BEST_STACK = "best"


def _asks_best(value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    return any(isinstance(v, str) and v.strip().lower() == BEST_STACK for v in values)


def _group_workloads(path: str, prefix: str, group: dict[str, Any],
                     max_configs: int, best_groups: list[str]) -> list[Workload]:
    """The configs of one family's group (the whole file, or one of its ``parts``); a group
    whose framework is ``best`` leaves framework at its default and appends the key that said
    so to ``best_groups``."""
    family = group.get("family")
    if family is None:
        raise _file_error(path, prefix + "family", "required: one of " + ", ".join(families.names()))
    if family not in families.names():
        raise _file_error(path, prefix + "family", f"{echo(family)} is not one of "
                          + ", ".join(families.names()))
    names = axes_of(family)
    where: dict[str, str] = {}  # axis -> key path that set it, for error messages
    axes: dict[str, Any] = {}

    def put(axis: str, keypath: str, value: Any) -> None:
        if axis not in names:
            raise _file_error(path, keypath, f"unknown key (axes of {family}: "
                              + ", ".join(names) + f"; sections: {', '.join(_TOP_KEYS)})")
        if axis in where:
            raise _file_error(path, keypath, f"axis {axis!r} is already set by {where[axis]!r}")
        where[axis] = keypath
        axes[axis] = value

    for section in ("fixed", "axes"):
        part = group.get(section, {})
        if not isinstance(part, dict):
            raise _file_error(path, prefix + section, "a mapping of axis names to values")
        for axis, value in part.items():
            keypath = f"{prefix}{section}.{axis}"
            if section == "fixed" and isinstance(value, (list, dict)):
                raise _file_error(path, keypath, "fixed values are single values; "
                                  "put lists and ranges under axes")
            put(axis, keypath, _yaml_axis(path, keypath, value))
    if "dtypes" in group:
        dtypes = group["dtypes"]
        if isinstance(dtypes, str):
            dtypes = [dtypes]
        if not isinstance(dtypes, list) or not dtypes:
            raise _file_error(path, prefix + "dtypes", "a non-empty list of dtype names")
        put("dtype", prefix + "dtypes", dtypes)
    for name, value in group.items():
        if name not in _TOP_KEYS:
            put(name, prefix + name, _yaml_axis(path, prefix + name, value))
    zips: list[Zipped] = []
    zip_spec = group.get("zip", [])
    if isinstance(zip_spec, dict):
        zip_spec = [zip_spec]
    if not isinstance(zip_spec, list):
        raise _file_error(path, prefix + "zip", "a list of mappings of axis names to lists")
    for i, z in enumerate(zip_spec):
        keypath = f"{prefix}zip[{i}]"
        if not isinstance(z, dict) or not z:
            raise _file_error(path, keypath, "a mapping of axis names to equal-length lists")
        lists: dict[str, list[Any]] = {}
        for axis, value in z.items():
            values = _yaml_axis(path, f"{keypath}.{axis}", value)
            if axis not in names:
                raise _file_error(path, f"{keypath}.{axis}", f"unknown axis of {family} "
                                  f"(allowed: {', '.join(names)})")
            if axis in where:
                raise _file_error(path, f"{keypath}.{axis}",
                                  f"axis {axis!r} is already set by {where[axis]!r}")
            where[axis] = f"{keypath}.{axis}"
            if isinstance(values, range) and len(values) > max_configs:
                check_size(len(values), max_configs, f"sweep file {path}: {keypath}.{axis}")
            lists[axis] = list(values) if isinstance(values, (list, range)) else [values]
        lengths = {len(v) for v in lists.values()}
        if len(lengths) != 1:
            raise _file_error(path, keypath, "zipped axes must have equal lengths, got "
                              + ", ".join(f"{a}: {len(v)}" for a, v in lists.items()))
        zips.append(Zipped(lists))
    if _asks_best(axes.get("framework")):
        # framework: best is the run setting best_stack (load_sweep_file): the configs are
        # the default framework's until the sweep's calibration chooses.
        if axes["framework"] not in (BEST_STACK, [BEST_STACK]):
            raise _file_error(path, where["framework"], f"{echo(axes['framework'])}: best stands "
                              "alone (the calibration chooses one framework per family)")
        del axes["framework"]
        best_groups.append(where["framework"])
    # Count the product from the axes' lengths before building a single point.
    size = math.prod([len(z.points()) for z in zips]
                     + [len(v) if isinstance(v, (list, range)) else 1 for v in axes.values()])
    check_size(size, max_configs, f"sweep file {path}: {prefix or 'the grid'}".rstrip("."))
    try:
        workloads = grid(family, *zips, max_configs=max_configs, **axes)
    except SpecError as exc:
        key = where.get(exc.parameter, prefix + exc.parameter)
        raise _file_error(path, key, str(exc)) from None
    if "max_params" in group:
        limit = group["max_params"]
        if (isinstance(limit, bool) or not isinstance(limit, (int, float))
                or not math.isfinite(limit) or limit <= 0):
            raise _file_error(path, prefix + "max_params",
                              f"{echo(limit)} is not a positive, finite number of parameters")
        workloads = max_params(workloads, limit)
    return workloads


def load_sweep_file(path: str | Any, max_configs: int | None = None, text: str | None = None) -> SweepPlan:
    """Parse and check a YAML sweep file (docs/sweeps.md); raises ParadnnError naming the file,
    the key and the reason for anything it cannot use. ``max_configs`` (default: the file's
    ``run.max_configs``, else ``MAX_CONFIGS``) caps the grid, counted before it is expanded.
    ``text``: the file's content, parsed instead of reading ``path`` (a recipe's sweep file
    before it is written)."""
    path = str(path)
    data = read_yaml(path, text)
    if not isinstance(data, dict):
        raise ParadnnError(f"sweep file {path}: the top level must be a mapping with a 'family' "
                           f"key, got {type(data).__name__}")
    for key in data:
        if not isinstance(key, str):
            raise _file_error(path, str(key), "keys must be strings")

    run = data.get("run") or {}
    if max_configs is None and isinstance(run, dict) and "max_configs" in run:
        reason = check_run_value("max_configs", run["max_configs"])
        if reason:
            raise _file_error(path, "run.max_configs", f"{echo(run['max_configs'])} is not {reason}")
        max_configs = run["max_configs"]
    cap = MAX_CONFIGS if max_configs is None else parse_int(max_configs, "max_configs")

    workloads: list[Workload] = []
    best_groups: list[str] = []  # the keys that said framework: best
    if "parts" in data:
        stray = sorted(set(data) - {"description", "settings", "run", "parts"})
        if stray:
            raise _file_error(path, stray[0], "with 'parts', families and axes go inside each "
                              "part; the top level holds only description, settings, run")
        parts = data["parts"]
        if not isinstance(parts, list) or not parts:
            raise _file_error(path, "parts", "a non-empty list of mappings, each with a family")
        for i, part in enumerate(parts):
            if not isinstance(part, dict):
                raise _file_error(path, f"parts[{i}]", "a mapping with a family")
            for bad in ("settings", "run", "parts", "description"):
                if bad in part:
                    raise _file_error(path, f"parts[{i}].{bad}", "belongs at the top level")
            workloads.extend(_group_workloads(path, f"parts[{i}].", part, cap - len(workloads),
                                              best_groups))
    else:
        workloads = _group_workloads(path, "", data, cap, best_groups)
    workloads = concat(workloads)

    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise _file_error(path, "settings", "a mapping of measurement settings")
    for key, value in settings.items():
        if key not in SETTINGS_FIELDS:
            raise _file_error(path, f"settings.{key}",
                              "unknown key (allowed: " + ", ".join(SETTINGS_FIELDS) + ")")
    if settings:
        try:
            # Typed and range-checked like the CLI flags (no nan, no 1e12 steps per call).
            settings = {k: parse_setting(v, k) for k, v in settings.items()}
            MeasureSettings(**settings)
        except SpecError as exc:
            raise _file_error(path, f"settings.{exc.parameter}", str(exc)) from None

    if not isinstance(run, dict):
        raise _file_error(path, "run", "a mapping of run settings")
    for key, value in run.items():
        if key not in RUN_KEYS:
            raise _file_error(path, f"run.{key}", "unknown key (allowed: "
                              + ", ".join(RUN_KEYS) + ")")
        reason = check_run_value(key, value)
        if reason:
            raise _file_error(path, f"run.{key}", f"{echo(value)} is not {reason}")
    run = dict(run)
    if best_groups:
        if run.get("best_stack") is False:
            raise _file_error(path, "run.best_stack", f"false, but {best_groups[0]} is best")
        others = sorted({w.framework for w in workloads} - {frameworks.DEFAULT})
        if others:
            raise _file_error(path, best_groups[0], f"best, but other configs name framework "
                              f"{others[0]}: best applies to the whole sweep (every part leaves "
                              "framework out or says best)")
        run["best_stack"] = True
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _file_error(path, "description", "a string")
    return SweepPlan(path, workloads, dict(settings), run, description)


#: What :func:`paradnn.sweep` and :func:`paradnn.plan.plan` accept as a sweep.
GridLike = Union[str, os.PathLike, Workload, Iterable[Workload]]


def resolve(grid_or_file: GridLike, max_configs: int | None = None) -> SweepPlan:
    """A sweep as a :class:`SweepPlan`: a sweep file path is loaded (:func:`load_sweep_file`),
    a Workload or a list of them becomes a plan with no settings or run overrides (its path
    ``<grid>``). SpecError for anything else."""
    if isinstance(grid_or_file, (str, os.PathLike)):
        return load_sweep_file(grid_or_file, max_configs=max_configs)
    if isinstance(grid_or_file, Workload):
        items: list[Any] = [grid_or_file]
    else:
        try:
            items = list(grid_or_file)
        except TypeError:
            raise SpecError("grid_or_file", grid_or_file,
                            "a sweep file path or a list of Workloads (paradnn.grid(...))") from None
    for item in items:
        if not isinstance(item, Workload):
            raise SpecError("grid item", item, "Workload values (paradnn.grid(...) builds them)")
    return SweepPlan("<grid>", items, {}, {})


def resolve_settings(plan: SweepPlan, settings: Any) -> MeasureSettings:
    """The measurement settings of a sweep: the file's ``settings:`` overridden by
    ``settings`` (a MeasureSettings replaces them, a dict of its fields overrides them, None
    keeps them)."""
    base = MeasureSettings(**plan.settings)
    if settings is None:
        return base
    if isinstance(settings, MeasureSettings):
        return settings
    if isinstance(settings, dict):
        return base.replace(**settings)
    raise SpecError("settings", settings, "a MeasureSettings, a dict of its fields, or None")


__all__ = ["GridLike", "MAX_REPEAT", "RUN_KEYS", "SweepPlan", "load_sweep_file", "parse_overlap",
           "parse_retry_unstable", "resolve", "resolve_settings"]
