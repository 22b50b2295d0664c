"""A sweep, resolved and checked: :class:`SweepConfig`, whose run-setting fields are those
declared in :data:`paradnn.grids.runsettings.RUN_SETTINGS` (one declaration each: the sweep
file's ``run:`` key, the flags and the field come from it)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from paradnn.errors import SpecError
from paradnn.executors import default_cache_dir
from paradnn.grids.runsettings import (
    DEFAULT_RETRY_UNSTABLE_S,
    DEFAULT_TIMEOUT_S,
    RETRY_BUDGET_FACTOR,
    RUN_SETTINGS,
    check_combination,
    default_retry_unstable_s,
)
from paradnn.grids.sweepfile import GridLike, resolve, resolve_settings
from paradnn.measure import MeasureSettings
from paradnn.record import FrozenDict
from paradnn.workload import Workload

__all__ = ["SweepConfig", "DEFAULT_CACHE", "DEFAULT_TIMEOUT_S", "DEFAULT_RETRY_UNSTABLE_S",
           "RETRY_BUDGET_FACTOR", "default_retry_unstable_s"]


class _Default:
    def __repr__(self) -> str:
        return "<default: ~/.cache/paradnn/xla>"


#: Sentinel for "the sweep file's cache_dir, else ``executors.default_cache_dir()``".
DEFAULT_CACHE: Any = _Default()


def _with_run_settings(cls: type) -> type:
    """Add a field per registered run setting (after the class's own fields, each with its
    setting's default) to ``cls`` before it becomes a dataclass."""
    annotations = cls.__dict__.get("__annotations__", {})
    for s in RUN_SETTINGS.values():
        annotations[s.name] = s.annotation
        setattr(cls, s.name, dataclasses.field(default_factory=s.default_factory)
                if s.default_factory is not None else s.default)
    cls.__annotations__ = annotations
    return cls


@dataclasses.dataclass(frozen=True)
@_with_run_settings
class SweepConfig:
    """A sweep, resolved and checked: what :func:`paradnn.sweep` measures, where, and how.

    Build it with :meth:`resolve` (a grid or a sweep file plus overrides); constructing it
    directly checks the same values (``__post_init__``) but applies no file and no defaults
    beyond the fields' own.

    Besides the fields below, one field per run setting of
    :data:`paradnn.grids.runsettings.RUN_SETTINGS` (its meaning, default and check are declared
    there): ``executor`` (``"process"``, ``"inprocess"`` or ``"ray"``: ``paradnn.executors.
    EXECUTORS``), ``repeat`` (records wanted per config; configs that have them are skipped),
    ``memory_limit_bytes`` (device memory in bytes against which models are recorded ``oom``
    before running; None: the device's own), ``timeout_s`` (seconds one config may take; not
    enforced in-process), ``cache_dir`` (persistent compilation cache; None disables it),
    ``address`` and ``resources`` (Ray only), ``max_configs`` (the grid-size cap a sweep file
    was expanded under), ``remeasure_unstable`` (unstable ``ok`` rows do not count towards
    ``repeat``), ``retry_unstable_s`` (extra seconds, 0 = off, to measure unstable configs once
    more with ``RETRY_BUDGET_FACTOR`` times the time budget; the retry's row keeps the settings
    asked for and says its budget in ``time_budget_used_s``) and ``overlap`` (workers compiling
    the next configs while one is measured: ``"auto"`` or a count; process executor only).
    """

    #: The configs in grid order (a config listed twice is measured once).
    workloads: tuple[Workload, ...]
    #: The SQLite results store, created if missing (docs/schema.md).
    store: Path
    #: The measurement protocol's settings, recorded with every row.
    settings: MeasureSettings = dataclasses.field(default_factory=MeasureSettings)
    #: The sweep file's path, or ``"<grid>"`` for a list of workloads (named in progress lines).
    source: str = "<grid>"
    #: The sweep file's ``description`` ("" for a grid).
    description: str = ""
    #: Where each run setting's value came from (name -> ``"argument"`` or ``"sweep file
    #: run.KEY"``; a setting at its default is absent): ``paradnn plan`` names it.
    origins: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)
    #: Workload key -> the best-stack calibration that chose the config's framework (set when a
    #: ``best_stack`` sweep starts: :func:`paradnn.sweeper.stacks.resolve_best`); empty otherwise.
    calibrations: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # Checked here, not only in resolve(), so that no unchecked config reaches the sweep;
        # values are normalized in place (a frozen dataclass's own __init__ is the only writer).
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("workloads", tuple(self.workloads))
        for item in self.workloads:
            if not isinstance(item, Workload):
                raise SpecError("grid item", item,
                                "Workload values (paradnn.grid(...) builds them)")
        for s in RUN_SETTINGS.values():
            put(s.name, s.parse(getattr(self, s.name), s.name))
        if self.cache_dir is not None:
            put("cache_dir", Path(os.path.expanduser(str(self.cache_dir))))
        if self.resources is not None:
            put("resources", FrozenDict(self.resources))
        check_combination({s: getattr(self, s) for s in RUN_SETTINGS})
        if not isinstance(self.settings, MeasureSettings):
            raise SpecError("settings", self.settings, "a MeasureSettings")
        if not isinstance(self.store, (str, os.PathLike)) or not str(self.store):
            raise SpecError("store", self.store, "the path of a SQLite store file")
        put("store", Path(self.store))
        put("origins", FrozenDict(self.origins))
        put("calibrations", FrozenDict(self.calibrations))

    @property
    def stale_after_s(self) -> float:
        """Seconds after which another host's claim on a config counts as dead (its sweep was
        killed): twice the time limit of one config, plus ten minutes."""
        return float(self.timeout_s) * 2 + 600

    def run_settings(self) -> dict[str, Any]:
        """The run settings by name (the registered ones)."""
        return {name: getattr(self, name) for name in RUN_SETTINGS}

    @classmethod
    def resolve(cls, grid_or_file: GridLike, store: str | os.PathLike = "results.db", *,
                settings: MeasureSettings | dict[str, Any] | None = None,
                cache_dir: str | os.PathLike | None = DEFAULT_CACHE, **run: Any) -> SweepConfig:
        """Resolve a grid or a sweep file plus overrides into a SweepConfig.

        ``grid_or_file``: a list of :class:`~paradnn.workload.Workload` (``paradnn.grid(...)``)
        or the path of a YAML sweep file (docs/sweeps.md). Each value is the argument given
        here, else the file's ``run`` / ``settings`` value, else the default. ``settings`` (a
        MeasureSettings replaces the file's, a dict of its fields overrides them; default the
        protocol's); ``cache_dir`` (default ``~/.cache/paradnn/xla``; None disables the cache);
        ``run``: the run settings by name (:data:`paradnn.grids.runsettings.RUN_SETTINGS`:
        ``executor`` default ``"process"``, ``repeat`` 1, ``memory_limit_bytes`` bytes or text
        such as ``"2GB"`` (default the device's own), ``timeout_s`` 1800 seconds per config,
        ``address`` and ``resources`` (Ray only), ``max_configs`` (checked before a file's grid
        is expanded; default ``paradnn.grids.MAX_CONFIGS``), ``remeasure_unstable`` False,
        ``retry_unstable_s`` (seconds, 0 = off; default :func:`default_retry_unstable_s`),
        ``overlap`` ``"auto"`` (1 on a GPU host, else 0; process executor only); None means
        not given). SpecError (naming the parameter, the value and what is allowed) or the
        sweep file's ParadnnError for anything it cannot use.
        """
        unknown = sorted(set(run) - set(RUN_SETTINGS))
        if unknown:
            raise SpecError("keyword", unknown[0], "one of settings, cache_dir, "
                            + ", ".join(n for n in RUN_SETTINGS if n != "cache_dir"))
        # Executor first: an unknown one is the likeliest typo, checked before the file is read.
        if run.get("executor") is not None:
            RUN_SETTINGS["executor"].parse(run["executor"], "executor")
        plan = resolve(grid_or_file, run.get("max_configs"))
        values: dict[str, Any] = {}
        origins: dict[str, str] = {}
        given = dict(run, cache_dir=None if cache_dir is DEFAULT_CACHE else cache_dir)
        for s in RUN_SETTINGS.values():
            if s.name in run and run[s.name] is not None and not (s.switch and run[s.name] is False) \
                    or s.name == "cache_dir" and cache_dir is not DEFAULT_CACHE:
                values[s.name], origins[s.name] = given[s.name], "argument"
            elif s.key is not None and s.key in plan.run:
                values[s.name], origins[s.name] = plan.run[s.key], f"sweep file run.{s.key}"
            elif s.name == "cache_dir":
                values[s.name] = default_cache_dir()
            else:
                values[s.name] = s.default_value()
        return cls(workloads=tuple(plan.workloads), store=store,
                   settings=resolve_settings(plan, settings), source=plan.path,
                   description=plan.description, origins=origins,
                   **values)
