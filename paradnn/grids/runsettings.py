"""The run settings of a sweep, each declared once (:data:`RUN_SETTINGS`), as the measurement
settings are in :class:`paradnn.measure.MeasureSettings`.

A run setting says where and how a sweep runs (executor, repeat, time limit, ...), not what is
measured. Everything that names one is derived from its declaration here: the sweep file's
``run:`` keys and their checks (:data:`RUN_KEYS`, :func:`check_run_value`), the flags of
``paradnn sweep`` and ``paradnn plan`` (:func:`add_flags`), the fields of
:class:`paradnn.sweeper.SweepConfig` and their checks, and the keywords of
``paradnn.sweep(...)`` / ``SweepConfig.resolve``. Adding a setting is one :func:`register`
call (before :mod:`paradnn.sweeper` is imported, which builds ``SweepConfig`` from the
registry).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from paradnn.errors import SpecError
from paradnn.families.ranges import MAX_CONFIGS
from paradnn.units import parse_bytes, parse_duration, parse_int, parse_number

#: Most records one config may ask for (``run.repeat``, ``--repeat``): a sweep's resume loop and
#: progress count per config, and a repeat beyond this is a typo, not a plan (a million
#: records of one config at 0.1 s each is more than a day).
MAX_REPEAT = 1_000_000

#: Seconds one config (compile + measurement) may take in the process and Ray executors.
DEFAULT_TIMEOUT_S = 1800.0

#: Extra seconds a sweep spends on those retries unless told otherwise (``retry_unstable_s``):
#: ten minutes whatever the sweep's size. A retry costs about its first measurement plus 3x
#: the time budget (about 20 s for a small model at the default 5 s budget on a 2-core host:
#: docs/sweeps.md), so this is a few dozen retries, a bounded cost on a small sweep and a few
#: percent of a sweep of the paper's grids (hours), where a larger value is a deliberate
#: choice; 0 turns the retry off.
DEFAULT_RETRY_UNSTABLE_S = 600.0

#: A config that came back ``ok`` but unstable is measured once more with this many times its
#: ``time_budget_s``: a longer warm-up, room for more timed calls (the CV rule stops it as soon
#: as the target is met), and a later moment than the first try, when the burst of other work
#: that spoiled it may be over.
RETRY_BUDGET_FACTOR = 4

#: Most seconds ``retry_unstable_s`` may name (a year, as any other duration).
MAX_RETRY_UNSTABLE_S = 366 * 86400.0


@dataclass(frozen=True)
class RunSetting:
    """One run setting: its name (the ``SweepConfig`` field and keyword), its default, how a
    value is checked, and where it appears.

    ``parse(value, parameter)`` checks a value given to the API or read from a sweep file and
    returns it normalized; it raises SpecError naming ``parameter``, the value and what is
    allowed. ``text(value, parameter)`` does the same for a flag's text (default ``parse``).
    ``default`` is the value when neither the caller nor the sweep file names one; a callable
    ``default_factory`` is called instead (a default read from the environment).
    """

    name: str
    default: Any
    parse: Callable[[Any, str], Any]
    #: What the setting accepts, in words: sweep-file errors and :data:`RUN_KEYS` say it (a
    #: function giving the text, where it names what a registry holds when asked).
    allowed: str | Callable[[], str]
    #: The flag's help text (``%(default)s`` is not used: the defaults come from the file).
    help: str | Callable[[], str]
    #: The annotation of the ``SweepConfig`` field.
    annotation: str = "Any"
    #: The sweep file's ``run:`` key; None: not a file key.
    key: str | None = None
    #: The flag of ``paradnn sweep``; None: no flag.
    flag: str | None = None
    metavar: str | None = None
    #: The flag's text parser; None: ``parse``.
    text: Callable[[Any, str], Any] | None = None
    #: ``paradnn plan`` takes the flag too (the plan reads the setting).
    plan: bool = False
    #: A switch flag (``store_true``): present means True.
    switch: bool = False
    default_factory: Callable[[], Any] | None = None

    def default_value(self) -> Any:
        """The value when nobody names one."""
        return self.default_factory() if self.default_factory is not None else self.default

    @property
    def dest(self) -> str:
        """The attribute of the parsed flags that holds the flag's value (``--memory-limit``:
        ``memory_limit``)."""
        return (self.flag or self.name).lstrip("-").replace("-", "_")

    @property
    def parameter(self) -> str:
        """The name a flag's errors give: the flag without its dashes."""
        return (self.flag or self.name).lstrip("-")


#: Every run setting by name, in the order of the flags and of the sweep file's keys.
RUN_SETTINGS: dict[str, RunSetting] = {}


def register(setting: RunSetting) -> RunSetting:
    """Declare a run setting (its name is new). The sweep file, the flags and ``SweepConfig``
    built after this call know it."""
    if setting.name in RUN_SETTINGS:
        raise SpecError("run setting", setting.name, "a name not yet registered: "
                        + ", ".join(RUN_SETTINGS))
    RUN_SETTINGS[setting.name] = setting
    return setting


def unregister(name: str) -> None:
    """Remove a run setting registered by :func:`register` (a test's temporary one)."""
    RUN_SETTINGS.pop(name)


def _text(value: str | Callable[[], str]) -> str:
    return value() if callable(value) else value


class _RunKeys(Mapping[str, str]):
    """A live view: the sweep file's ``run:`` key -> what it accepts."""

    def _items(self) -> dict[str, str]:
        return {s.key: _text(s.allowed) for s in RUN_SETTINGS.values() if s.key is not None}

    def __getitem__(self, key: str) -> str:
        return self._items()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return repr(self._items())


#: Keys of a sweep file's ``run`` section and what each accepts (derived from RUN_SETTINGS).
RUN_KEYS: Mapping[str, str] = _RunKeys()


def by_key(key: str) -> RunSetting | None:
    """The run setting of the sweep file's ``run:`` key ``key``, None for an unknown key."""
    return next((s for s in RUN_SETTINGS.values() if s.key == key), None)


def check_run_value(key: str, value: Any) -> str | None:
    """None when ``value`` is acceptable for the sweep file's ``run:`` key ``key``, else what is
    allowed."""
    setting = by_key(key)
    if setting is None:
        return "a known key: " + ", ".join(RUN_KEYS)
    try:
        setting.parse(value, setting.name)
    except SpecError as exc:
        return exc.allowed
    return None


# -- the checks ---------------------------------------------------------------------------------

def executor_names() -> tuple[str, ...]:
    """The registered executors (:data:`paradnn.executors.EXECUTORS`), in their order."""
    from paradnn.executors import EXECUTORS  # the executors' registry (its package imports backends)

    return tuple(EXECUTORS)


def _one_of(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def parse_executor(value: Any, parameter: str = "executor") -> str:
    """An executor's name (:data:`paradnn.executors.EXECUTORS`); SpecError otherwise."""
    names = executor_names()
    if not isinstance(value, str) or value not in names:
        raise SpecError(parameter, value, "one of " + _one_of(names))
    return value


def parse_repeat(value: Any, parameter: str = "repeat") -> int:
    """Records wanted per config: an int from 1 to :data:`MAX_REPEAT` (the API and the sweep
    file take ints; a flag's text goes through :func:`paradnn.units.parse_int`)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_REPEAT:
        raise SpecError(parameter, value, f"an integer from 1 to {MAX_REPEAT:,} (records wanted per config)")
    return value


def parse_timeout(value: Any, parameter: str = "timeout_s") -> float:
    """Seconds one config may take: a positive, finite number (not text, not a bool)."""
    if isinstance(value, (bool, str)):
        raise SpecError(parameter, value, "a positive, finite number of seconds per config")
    return parse_duration(value, parameter)


def parse_max_configs(value: Any, parameter: str = "max_configs") -> int | None:
    """The largest grid a sweep file may expand to: a positive int, or None (the default)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(parameter, value, "a positive integer: the largest grid the file may expand "
                        f"to (default {MAX_CONFIGS})")
    return value


def parse_memory_limit(value: Any, parameter: str = "memory limit") -> int | None:
    """Bytes per device (an int or text such as ``2GB``), or None: the device's own."""
    return None if value is None else parse_bytes(value)


def parse_cache_dir(value: Any, parameter: str = "cache_dir") -> Any:
    """A compilation cache folder (text or a path, not empty), or None to disable the cache."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise SpecError(parameter, value, "a directory for the XLA compilation cache, or null to disable it")
    return value


def parse_address(value: Any, parameter: str = "address") -> str | None:
    """A Ray cluster address HOST:PORT, or None (a local cluster)."""
    if value is not None and (not isinstance(value, str) or not value):
        raise SpecError(parameter, value, "a Ray cluster address HOST:PORT")
    return value


def parse_resources(value: Any, parameter: str = "resources") -> Mapping[str, Any] | None:
    """Ray resources per task (a mapping), or None."""
    if value is not None and not isinstance(value, Mapping):
        raise SpecError(parameter, value, "Ray resources per task, e.g. {num_gpus: 1} or "
                        "{resources: {TPU: 4}}")
    return value


def parse_overlap(value: Any, parameter: str = "overlap") -> int | str:
    """``overlap`` (run setting, ``--overlap``): ``"auto"``, or a count of prepare workers from 0
    to the number of CPU cores (``os.cpu_count()``), from an int or text. SpecError otherwise."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    cores = os.cpu_count() or 1
    allowed = f"auto or an integer from 0 to {cores} (the CPU cores)"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SpecError("overlap", value, allowed)
    try:
        return parse_int(value, "overlap", minimum=0, maximum=cores)
    except SpecError:
        raise SpecError("overlap", value, allowed) from None


def parse_retry_unstable(value: Any, parameter: str = "retry_unstable_s") -> float:
    """The extra seconds a sweep may spend measuring unstable configs again: a finite number
    from 0 (no retry) to :data:`MAX_RETRY_UNSTABLE_S`; SpecError naming ``parameter`` otherwise."""
    if isinstance(value, bool):
        raise SpecError(parameter, value, f"a finite number in [0, {MAX_RETRY_UNSTABLE_S:g}] seconds")
    return parse_number(value, parameter, 0.0, MAX_RETRY_UNSTABLE_S, exclusive_minimum=False,
                        unit="seconds")


def parse_switch(value: Any, parameter: str) -> bool:
    """True or False (the API takes a bool, not text)."""
    if not isinstance(value, bool):
        raise SpecError(parameter, value, "True or False")
    return value


def default_retry_unstable_s() -> float:
    """``retry_unstable_s`` when neither the caller nor the sweep file names it:
    ``$PARADNN_RETRY_UNSTABLE_S`` where set (a site's or a test suite's own default, checked as
    the setting is), else :data:`DEFAULT_RETRY_UNSTABLE_S`."""
    text = os.environ.get("PARADNN_RETRY_UNSTABLE_S", "").strip()
    return parse_retry_unstable(text, "$PARADNN_RETRY_UNSTABLE_S") if text else DEFAULT_RETRY_UNSTABLE_S


def check_combination(values: Mapping[str, Any]) -> None:
    """The checks across settings, in one place: ``address`` and ``resources`` only with the
    Ray executor, compiling ahead (``overlap`` other than 0 or auto) only with the process
    executor. SpecError naming the setting, its value and what is allowed."""
    executor = values.get("executor")
    for name in ("address", "resources"):
        if values.get(name) is not None and executor != "ray":
            value = values[name]
            raise SpecError(name, dict(value) if isinstance(value, Mapping) else value,
                            "only with executor='ray'")
    check_overlap(executor, values.get("overlap", "auto"))
    if values.get("best_stack") and executor == "ray":
        # The calibration times the frameworks on the machine the sweep starts on; a Ray
        # cluster's nodes may be other machines.
        raise SpecError("best_stack", True, "only with executor='process' or 'inprocess' (the "
                        "best-stack calibration measures the machine the sweep runs on)")


def check_overlap(executor: Any, overlap: Any) -> None:
    """``overlap`` compiles ahead only in the process executor: elsewhere 0 or auto."""
    if executor != "process" and overlap not in (0, "auto"):
        raise SpecError("overlap", overlap, f"0 or auto with executor={executor!r} "
                        "(compiling ahead needs executor='process')")


# -- the flags ----------------------------------------------------------------------------------

def add_flags(parser: argparse.ArgumentParser, *, plan: bool = False, default: Any = None,
              typed: Callable[..., Any] | None = None,
              options: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Add a flag for each run setting that has one to ``parser`` (``paradnn sweep``; with
    ``plan`` only those the plan reads). A flag's value is the setting's text parser's, its
    error the usage error naming the flag (``typed``: :func:`paradnn.cli.typed`); absent, it
    is ``default`` (None: the file's value, else the setting's default; ``argparse.SUPPRESS``:
    absent from the namespace). ``options``: extra ``add_argument`` keywords by setting name (a
    path check of the command line's own)."""
    for s in RUN_SETTINGS.values():
        if s.flag is None or (plan and not s.plan):
            continue
        kwargs: dict[str, Any] = {"help": _text(s.help)}
        if s.switch:
            kwargs.update(action="store_true", default=default if default is not None else False)
        else:
            parse = s.text or s.parse
            kwargs.update(default=default, metavar=s.metavar,
                          type=typed(parse, s.parameter) if typed else parse)
        kwargs.update(dict((options or {}).get(s.name, {})))
        parser.add_argument(s.flag, dest=s.dest, **kwargs)


def from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The run settings given as flags, by setting name (those not given are None, and left
    out)."""
    out = {}
    for s in RUN_SETTINGS.values():
        if s.flag is None or not hasattr(args, s.dest):
            continue
        value = getattr(args, s.dest)
        if value is not None and not (s.switch and value is False):
            out[s.name] = value
    return out


# -- the settings -------------------------------------------------------------------------------

register(RunSetting(
    "executor", "process", parse_executor, lambda: _one_of(executor_names()),
    lambda: f"where configs run: {_one_of(executor_names())} (default: the file's, else process)",
    annotation="str", key="executor", flag="--executor", metavar="NAME"))
register(RunSetting(
    "repeat", 1, parse_repeat, f"an integer from 1 to {MAX_REPEAT:,} (records wanted per config)",
    "records wanted per config, a count (default: the file's, else 1)", annotation="int",
    key="repeat", flag="--repeat", metavar="N", plan=True,
    text=lambda v, p: parse_int(v, p, maximum=MAX_REPEAT)))
register(RunSetting(
    "memory_limit_bytes", None, parse_memory_limit,
    "bytes, as an integer or a string such as 2GB or 512MiB",
    "memory of one device in bytes for out-of-memory prediction, e.g. 2GB or 512MiB (default: "
    "the file's, else the device's; the host's on a CPU)", annotation="int | None",
    key="memory_limit", flag="--memory-limit", metavar="SIZE", plan=True,
    text=lambda v, p: parse_bytes(v)))
register(RunSetting(
    "timeout_s", DEFAULT_TIMEOUT_S, parse_timeout, "a positive, finite number of seconds per config",
    "seconds per config, compile included (default: the file's, else 1800)", annotation="float",
    key="timeout_s", flag="--timeout", metavar="SECONDS", text=parse_duration))
register(RunSetting(
    "cache_dir", None, parse_cache_dir,
    "a directory for the XLA compilation cache, or null to disable it",
    "persistent XLA compilation cache folder (default: the file's, else "
    "$XDG_CACHE_HOME/paradnn/xla or ~/.cache/paradnn/xla)", annotation="Path | None",
    key="cache_dir", flag="--cache-dir"))
register(RunSetting(
    "address", None, parse_address, "a Ray cluster address HOST:PORT",
    "Ray cluster HOST:PORT (with --executor ray; an unreachable address fails within the "
    "connect timeout, default: none = a local cluster)", annotation="str | None",
    key="address", flag="--address"))
register(RunSetting(
    "resources", None, parse_resources,
    "Ray resources per task, e.g. {num_gpus: 1} or {resources: {TPU: 4}}",
    "Ray resources per task", annotation="Mapping[str, Any] | None", key="resources"))
register(RunSetting(
    "max_configs", None, parse_max_configs,
    f"a positive integer: the largest grid the file may expand to (default {MAX_CONFIGS})",
    "refuse sweep files whose grid has more configs than this, before expanding it (default: "
    f"the file's run.max_configs, else {MAX_CONFIGS})", annotation="int | None",
    key="max_configs", flag="--max-configs", metavar="N", plan=True, text=parse_int))
register(RunSetting(
    "remeasure_unstable", False, parse_switch, "true or false",
    "measure again the configs whose stored runs missed their precision target (stable "
    "false); their old rows stay", annotation="bool", flag="--remeasure-unstable", switch=True))
register(RunSetting(
    "retry_unstable_s", None, parse_retry_unstable,
    "a number of seconds >= 0: extra time to measure unstable configs again with a longer time "
    "budget (0: no automatic retry)",
    "extra seconds the sweep may spend, after the other configs, measuring once more with "
    f"{RETRY_BUDGET_FACTOR}x its time_budget_s each config that came back ok but missed its cv_target (stable false); "
    "the retry keeps the config's settings and record key (time_budget_used_s says the budget "
    "it had), both rows stay and resume never repeats it; 0 turns it off (default: the file's "
    "run.retry_unstable_s, else $PARADNN_RETRY_UNSTABLE_S, else "
    f"{DEFAULT_RETRY_UNSTABLE_S:g})", annotation="float", key="retry_unstable_s",
    flag="--retry-unstable-s", metavar="SECONDS", plan=True,
    default_factory=default_retry_unstable_s))
register(RunSetting(
    "overlap", "auto", parse_overlap,
    "auto or an integer from 0 to the number of CPU cores: workers compiling the next configs "
    "while one is measured (process executor; auto: 1 on a GPU host, else 0)",
    "workers compiling the next configs while one is measured (process executor): a count from "
    "0 to the CPU cores, or auto = 1 on a GPU host, 0 elsewhere (default: the file's, else "
    "auto; docs/performance.md)", annotation="int | str", key="overlap", flag="--overlap",
    metavar="N|auto"))
register(RunSetting(
    "best_stack", False, parse_switch, "true or false",
    "measure every config with the framework that trains its family fastest on this machine, "
    "chosen by a short measured calibration per family that is stored and reused "
    "(docs/frameworks.md, \"The platform at its best stack\"); every record names the framework that ran and "
    "carries the calibration (framework_choice, best_calibration). The configs must leave "
    "framework at its default; a sweep file can also say framework: best",
    annotation="bool", key="best_stack", flag="--best-stack", switch=True, plan=True))

__all__ = ["DEFAULT_RETRY_UNSTABLE_S", "DEFAULT_TIMEOUT_S", "MAX_REPEAT", "RETRY_BUDGET_FACTOR", "RUN_KEYS", "RUN_SETTINGS", "RunSetting", "add_flags", "check_combination",
           "check_overlap", "check_run_value", "default_retry_unstable_s", "from_flags",
           "parse_overlap", "parse_retry_unstable", "register", "unregister"]
