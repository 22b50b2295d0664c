"""Grids of workloads: the paper's Table 2 as data, presets, and product/zip/filter helpers.

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
``preset(name, family)`` expands the ``smoke``, ``small`` and ``paper`` presets.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from paradnn.errors import ParadnnError, SpecError, echo
from paradnn.measure import SETTINGS_FIELDS, parse_setting
from collections.abc import Mapping

from paradnn.families import RegistryView
from paradnn.specs import Workload
from paradnn.units import parse_bytes, parse_duration, parse_int, parse_number  # sizes re-exported

__all__ = [
    "PAPER", "PAPER_FIXED", "PRESETS", "WORKLOAD_AXES", "Zipped", "axes_of", "concat", "filter_grid",
    "geometric", "grid", "linear", "load_sweep_file", "max_params", "param_count", "parse_bytes",
    "preset", "zipped", "SweepPlan",
]

#: Largest grid a sweep file or :func:`grid` expands unless ``max_configs`` is raised (configs).
MAX_CONFIGS = 1_000_000

#: Axes every family has besides its model hyperparameters (Workload fields).
WORKLOAD_AXES = ("batch", "dtype", "optimizer", "devices", "framework")


def geometric(start: int, stop: int, factor: int) -> list[int]:
    """``start, start*factor, ...`` up to and including ``stop`` (Table 2's "x2" steps)."""
    if not (isinstance(factor, int) and factor >= 2):
        raise SpecError("factor", factor, "an integer >= 2")
    if not (isinstance(start, int) and start > 0 and isinstance(stop, int) and stop >= start):
        raise SpecError("range", (start, stop), "positive integers with start <= stop")
    out, v = [], start
    while v <= stop:
        out.append(v)
        v *= factor
    return out


def linear(start: int, stop: int, step: int) -> list[int]:
    """``start, start+step, ...`` up to and including ``stop`` (Table 2's "+N" steps)."""
    values = _linear_range(start, stop, step)
    if len(values) > MAX_CONFIGS:  # len of a range costs nothing; the list would not
        raise SpecError("range", (start, stop, step), f"at most {MAX_CONFIGS} values")
    return list(values)


def _linear_range(start: int, stop: int, step: int) -> range:
    """:func:`linear` as a lazy range (sweep files: a huge range is counted, never listed)."""
    if isinstance(step, bool) or not (isinstance(step, int) and step > 0):
        raise SpecError("step", step, "a positive integer")
    if isinstance(start, bool) or isinstance(stop, bool) or not (
            isinstance(start, int) and isinstance(stop, int) and stop >= start):
        raise SpecError("range", (start, stop), "integers with start <= stop")
    return range(start, stop + 1, step)


# Table 2 of the ParaDnn paper (Wang, Wei and Brooks), as each family's registry entry holds it.
# Bounds are inclusive; a geometric range stops at the last value not above the maximum (RNN
# vocab 2..1024 x4 ends at 512).
PAPER: Mapping[str, dict[str, list[Any]]] = RegistryView(lambda f: f.paper)

#: Values the paper held fixed for its heat maps (Figure 7 instead fixes FC layers at 64).
PAPER_FIXED: Mapping[str, dict[str, Any]] = RegistryView(lambda f: f.paper_fixed)

# Presets: family -> axes. "smoke" runs in seconds on a laptop CPU, "small" in minutes,
# "paper" is the full Table 2 product (thousands of models, days on an accelerator).
PRESETS: dict[str, Mapping[str, dict[str, Any]]] = {
    "smoke": RegistryView(lambda f: f.presets.get("smoke")),
    "small": RegistryView(lambda f: f.presets.get("small")),
    "paper": PAPER,
}


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
    from paradnn import families

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
    from paradnn import families

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
                     framework=point.get("framework", "jax"))
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


def preset(name: str, family: str | None = None) -> list[Workload]:
    """The workloads of preset ``name`` (smoke, small, paper) for one family or all three."""
    if name not in PRESETS:
        raise SpecError("preset", name, "one of " + ", ".join(PRESETS))
    families = [family] if family is not None else list(PRESETS[name])
    out: list[Workload] = []
    for fam in families:
        if fam not in PRESETS[name]:
            raise SpecError("family", fam, "one of " + ", ".join(PRESETS[name]))
        out.extend(grid(fam, **PRESETS[name][fam]))
    return out


def param_count(workload: Workload | Any) -> int:
    """Trainable parameters of a workload's model (or of a bare spec): the family's closed form
    (:mod:`paradnn.families`), else counted from the JAX model's shapes (nothing compiled)."""
    from paradnn import families

    spec = workload.spec if isinstance(workload, Workload) else workload
    count = families.param_count(spec)
    if count is None:
        from paradnn.backends.jax.models import param_count as shape_count

        count = shape_count(spec)
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
# A sweep file (YAML) names a family, fixed values and swept axes, filters, measurement settings
# and run settings. The reference is docs/sweeps.md; every key is checked here.

_GROUP_KEYS = ("family", "fixed", "axes", "zip", "dtypes", "max_params")
_TOP_KEYS = ("description", "settings", "run", "parts") + _GROUP_KEYS
#: Keys of a sweep file's ``run`` section and what each accepts.
RUN_KEYS: dict[str, str] = {
    "executor": "process, inprocess or ray",
    "repeat": "a positive integer (records wanted per config)",
    "timeout_s": "a positive, finite number of seconds per config",
    "max_configs": "a positive integer: the largest grid the file may expand to (default "
                   f"{MAX_CONFIGS})",
    "memory_limit": "bytes, as an integer or a string such as 2GB or 512MiB",
    "cache_dir": "a directory for the XLA compilation cache, or null to disable it",
    "address": "a Ray cluster address HOST:PORT",
    "resources": "Ray resources per task, e.g. {num_gpus: 1} or {resources: {TPU: 4}}",
}
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
            return _linear_range(value["from"], value["to"], value["step"])
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


def _group_workloads(path: str, prefix: str, group: dict[str, Any],
                     max_configs: int) -> list[Workload]:
    family = group.get("family")
    from paradnn import families

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


#: Limits on a sweep file, so that no file can exhaust memory or the stack before it is checked.
MAX_FILE_BYTES = 16 * 2**20
MAX_YAML_DEPTH = 32
#: Values the file may expand to when every alias (``*name``) is replaced by what it names.
MAX_YAML_VALUES = 100_000


class _YamlLimit(Exception):
    def __init__(self, message: str, mark: Any = None):
        self.message, self.mark = message, mark
        super().__init__(message)


def _safe_loader():
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader that refuses duplicate keys and nesting deeper than MAX_YAML_DEPTH."""

        depth = 0

        def compose_node(self, parent, index):  # type: ignore[override]
            self.depth += 1
            try:
                if self.depth > MAX_YAML_DEPTH:
                    raise _YamlLimit(f"nested deeper than {MAX_YAML_DEPTH} levels",
                                     self.peek_event().start_mark)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):  # type: ignore[override]
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = (key_node.tag, key_node.value) if isinstance(key_node, yaml.ScalarNode) \
                    else id(key_node)
                if key in seen:
                    raise _YamlLimit(f"duplicate key {echo(key_node.value)} (first at line "
                                     f"{seen[key].line + 1}); each key may appear once",
                                     key_node.start_mark)
                seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep)

    return Loader


def _expanded_size(root: Any) -> int:
    """Values a YAML node graph holds once every alias is expanded (shared nodes counted each
    time they are used), computed over distinct nodes, so an alias bomb is measured, not built.
    A recursive alias raises _YamlLimit."""
    import yaml

    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Any) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in active:
            raise _YamlLimit("a recursive alias (a value that contains itself)", node.start_mark)
        active.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(c) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            n = 1
        active.discard(id(node))
        sizes[id(node)] = n = min(n, MAX_YAML_VALUES + 1)  # stop counting past the limit
        return n

    return size(root)


def _read_yaml(path: str) -> Any:
    """The data of a YAML file read safely: UTF-8 text of at most MAX_FILE_BYTES, no duplicate
    keys, at most MAX_YAML_DEPTH levels and MAX_YAML_VALUES values after alias expansion."""
    import yaml

    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ParadnnError(f"sweep file {path}: no such file") from None
    except OSError as exc:
        raise ParadnnError(f"sweep file {path}: cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ParadnnError(f"sweep file {path}: larger than {MAX_FILE_BYTES // 2**20} MiB; "
                           "a sweep file names axes, not configs")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParadnnError(f"sweep file {path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                           f"offset {exc.start}); save it as UTF-8") from None
    loader = _safe_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_VALUES:
            raise _YamlLimit(f"expands to more than {MAX_YAML_VALUES:,} values through aliases "
                             "(*name); write the values out or use ranges")
        return loader.construct_document(node)
    except _YamlLimit as exc:
        where = f" at line {exc.mark.line + 1}" if exc.mark is not None else ""
        raise ParadnnError(f"sweep file {path}: {exc.message}{where}") from None
    except RecursionError:
        raise ParadnnError(f"sweep file {path}: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        problem = " ".join(str(problem).split())  # one line
        raise ParadnnError(f"sweep file {path}: not valid YAML{where}: {problem}") from None
    finally:
        loader.dispose()


def load_sweep_file(path: str | Any, max_configs: int | None = None) -> SweepPlan:
    """Parse and check a YAML sweep file (docs/sweeps.md); raises ParadnnError naming the file,
    the key and the reason for anything it cannot use. ``max_configs`` (default: the file's
    ``run.max_configs``, else ``MAX_CONFIGS``) caps the grid, counted before it is expanded."""
    path = str(path)
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise ParadnnError(f"sweep file {path}: the top level must be a mapping with a 'family' "
                           f"key, got {type(data).__name__}")
    for key in data:
        if not isinstance(key, str):
            raise _file_error(path, str(key), "keys must be strings")

    run = data.get("run") or {}
    if max_configs is None and isinstance(run, dict) and "max_configs" in run:
        reason = _check_run_value("max_configs", run["max_configs"])
        if reason:
            raise _file_error(path, "run.max_configs", f"{echo(run['max_configs'])} is not {reason}")
        max_configs = run["max_configs"]
    cap = MAX_CONFIGS if max_configs is None else parse_int(max_configs, "max_configs")

    workloads: list[Workload] = []
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
            workloads.extend(_group_workloads(path, f"parts[{i}].", part, cap - len(workloads)))
    else:
        workloads = _group_workloads(path, "", data, cap)
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
            from paradnn.measure import MeasureSettings

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
        reason = _check_run_value(key, value)
        if reason:
            raise _file_error(path, f"run.{key}", f"{echo(value)} is not {reason}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _file_error(path, "description", "a string")
    return SweepPlan(path, workloads, dict(settings), dict(run), description)


def _check_run_value(key: str, value: Any) -> str | None:
    """None when ``value`` is acceptable for run setting ``key``, else what is allowed."""
    if key == "executor":
        return None if value in ("process", "inprocess", "ray") else RUN_KEYS[key]
    if key == "repeat":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        return None if ok else RUN_KEYS[key]
    if key == "timeout_s":
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value) and value > 0)
        return None if ok else RUN_KEYS[key]
    if key == "max_configs":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
        return None if ok else RUN_KEYS[key]
    if key == "memory_limit":
        try:
            parse_bytes(value)
        except ParadnnError:
            return RUN_KEYS[key]
        return None
    if key == "cache_dir":
        return None if value is None or isinstance(value, str) and value else RUN_KEYS[key]
    if key == "address":
        return None if isinstance(value, str) and value else RUN_KEYS[key]
    if key == "resources":
        return None if isinstance(value, dict) else RUN_KEYS[key]
    return RUN_KEYS.get(key, "known")
