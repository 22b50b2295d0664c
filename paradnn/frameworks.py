"""The framework registry and the one interface every framework implements (the ground floor:
this module imports nothing of paradnn but its errors, settings and plug-in loader).

**Registry.** A framework is a package (``paradnn.backends.jax``, ``.tensorflow``, ``.torch``, or
one of the user's) registered under a name: :func:`register` ``(name, package)``; a built-in
name is refused unless the registration says ``replaces=True``, and its records then say
which module replaced it (``replaced_by``). It is the only
place paradnn learns which frameworks exist (``--framework`` choices, ``Workload.framework``,
store columns, CLI flags and sweep-file settings of the frameworks' options) and which families
each framework builds (``FrameworkInfo.builders``). The package's
``__init__`` is framework-free and defines ``INFO``, a :class:`FrameworkInfo` (pip extra,
software fields, options class, builders, frameworks it cannot share a process with);
:func:`meta` reads it without importing the framework. ``<package>.backend`` defines ``BACKEND``
(an object with the :class:`Backend` methods) and may define ``check()`` raising ImportError
where the framework is missing; :func:`get` imports it on first use. Modules named in
``$PARADNN_PLUGINS`` are imported when the registry first loads (:mod:`paradnn.plugins`), so a
framework registered by user code exists in the CLI and in executor child processes too.
docs/frameworks.md shows a whole framework in one screen. ``paradnn.backends`` re-exports these
names for plug-in authors; paradnn's own modules import them from here.

**Backend.** The runner, ``maxbatch``, the timing protocol, sweeps and executors talk to a
framework only through :class:`Backend`. A backend turns a :class:`~paradnn.workload.Workload`
into a :class:`Program` (built, compiled ahead of time where the framework can, its memory known
where the framework reports it), initializes its state and batch on the device, runs K training
steps per call, and reports executed FLOPs, memory and out-of-memory in its own terms. Facts
about a model family (analytic counts, defaults) live in :mod:`paradnn.families`, never here.
Optional capabilities (operator and collective micro-benchmarks, the probe's GEMMs, profiles,
infeed, the analytic FLOP count of models without a closed form) are methods a backend may
lack: :func:`capability` finds one or says which framework lacks it. No framework package
imports another's: one that needs another framework's capability asks the registry for it.

Words: ``framework`` is the software (jax, tensorflow, torch); ``device_platform`` is the kind
of device (cpu, gpu, tpu). Records keep both.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from paradnn.errors import ParadnnError, SpecError
from paradnn.plugins import load_plugins, loading
from paradnn.settings import NoOptions, Options, one_of

#: The frameworks paradnn ships: name -> package. Registered first, in this order.
BUILTIN: dict[str, str] = {
    "jax": "paradnn.backends.jax",
    "tensorflow": "paradnn.backends.tensorflow",
    "torch": "paradnn.backends.torch",
}

#: Name of the framework used where none is named (the reference implementation).
DEFAULT = "jax"


# -- the registry ------------------------------------------------------------------------------

@dataclass(frozen=True)
class FrameworkInfo:
    """What paradnn knows of a framework without importing it (the package's ``INFO``).

    ``extra``: the pip extra that installs it ("" when paradnn's own dependencies do).
    ``description``: one line for ``--framework`` help. ``software_fields``: the fields of
    :meth:`Backend.software_info` besides ``framework_version`` (record columns, part of the
    record key). ``version_fields``: those that are versions of installed software (store
    columns every row has, None where another framework ran). ``options``: its options class
    (:class:`Options`). ``exclusive_with``: frameworks that must not run in the same process
    (their native libraries clash); the process executor gives them separate children.
    ``builders``: family -> ``"module:function"`` building that family's model in this
    framework: the one place that says which families a framework builds (a family's own
    entry may add more, :meth:`paradnn.families.Family.framework_builders`).
    ``check_environment``: ``"module:function"`` of a framework-free check of the environment
    variables the framework reads (raising SpecError naming the variable), which every command
    runs at its start (:func:`check_environments`); "" for none. ``mark``: the matplotlib
    marker drawn inside a point of this framework where a figure holds several ("" for none). ``name`` and
    ``package`` are filled in by the registry.
    """

    extra: str = ""
    description: str = ""
    software_fields: tuple[str, ...] = ()
    version_fields: tuple[str, ...] = ()
    options: type = NoOptions
    exclusive_with: tuple[str, ...] = ()
    builders: Mapping[str, str] = field(default_factory=dict)
    check_environment: str = ""
    mark: str = "1"
    name: str = ""
    package: str = ""


_PACKAGES: dict[str, str] = {}
#: Built-in frameworks that a plugin replaced (``register(..., replaces=True)``) -> the module
#: that registered the replacement: every record of the framework says so (``replaced_by``).
_REPLACED: dict[str, str] = {}
_loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    for name, package in BUILTIN.items():
        _PACKAGES.setdefault(name, package)
    # A plugin that fails raises here, and again at every later lookup (_loaded stays False):
    # nothing goes on without it. A lookup made by a plugin's own code, while it is imported,
    # returns at once (paradnn.plugins) and does not count as loaded: the rest are not in yet.
    load_plugins()
    _loaded = loading() is None


def register(name: str, package: str, replaces: bool = False) -> None:
    """Register the framework ``name`` implemented by ``package`` (a dotted module path whose
    ``__init__`` defines ``INFO`` and whose ``backend`` module defines ``BACKEND``). The
    package's framework-free ``__init__`` is imported here, so that a package that cannot be
    imported or defines no ``INFO`` is refused now (a ParadnnError naming the framework and the
    package), not when a command first uses it; its ``backend`` (the framework) is not imported.

    A built-in name (jax, tensorflow, torch) with another package is refused unless
    ``replaces`` is true: then every record of the framework in this process carries
    ``replaced_by`` naming the registering module (another implementation is another config,
    so it is part of the record key). ``replaces`` with a name that is not built in is refused
    too (a typo would otherwise register a second framework). Registering a name that is not
    built in again replaces the earlier registration."""
    caller = sys._getframe(1).f_globals.get("__name__", "?")  # the module calling register
    _load()
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise SpecError("framework", name, "a lower-case identifier, e.g. numpy")
    if not isinstance(package, str) or not package:
        raise SpecError("package", package, "a dotted module path, e.g. mylab.numpy_backend")
    builtin = BUILTIN.get(name)
    replacing = builtin is not None and package != builtin
    if replacing and not replaces:
        raise ParadnnError(
            f"framework {name!r} is built into paradnn (package {builtin}): registering package "
            f"{package} under its name would label its rows {name}; to replace it, say so: "
            f"backends.register({name!r}, {package!r}, replaces=True) (its rows then record "
            "replaced_by), or register it under a name of its own")
    if replaces and builtin is None:
        raise SpecError("replaces", replaces, f"only with a built-in framework's name ({', '.join(BUILTIN)}); "
                        f"{name!r} is none: register it without replaces")
    previous = _PACKAGES.get(name)
    _set_package(name, package)
    try:
        meta(name)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's package is refused here
        _set_package(name, previous)
        why = str(exc) if isinstance(exc, ParadnnError) else f"{type(exc).__name__}: {exc}"
        raise ParadnnError(f"framework {name!r}: package {package} cannot be used ({why}); allowed: "
                           "an importable package whose __init__ defines INFO, a "
                           "paradnn.backends.FrameworkInfo (docs/frameworks.md)") from None
    if replacing:
        _REPLACED[name] = loading() or caller
    else:
        _REPLACED.pop(name, None)


def _set_package(name: str, package: str | None) -> None:
    if package is None:
        _PACKAGES.pop(name, None)
    else:
        _PACKAGES[name] = package
    meta.cache_clear()
    _instances.pop(name, None)


def unregister(name: str) -> None:
    """Remove a registered framework (tests that register a toy framework clean up with this);
    a built-in name gets its built-in package back."""
    _set_package(name, BUILTIN.get(name))
    _REPLACED.pop(name, None)


def replaced_by(name: str) -> str | None:
    """The module that registered the package now implementing the built-in framework ``name``
    in its place (``register(..., replaces=True)``), or None (the built-in, or not built in)."""
    _load()
    return _REPLACED.get(name)


def names() -> tuple[str, ...]:
    """Registered framework names: the built-in ones first, then others by registration."""
    _load()
    return tuple(_PACKAGES)


def builders(family: str) -> dict[str, str]:
    """framework -> ``"module:function"`` building the family named ``family``, from every
    registered framework's ``FrameworkInfo.builders`` (registry order): how a framework says
    which families it builds, so that adding a framework edits no family."""
    return {name: path for name in names() if (path := meta(name).builders.get(family))}


def check_environments() -> None:
    """Run every registered framework's check of its environment variables
    (``FrameworkInfo.check_environment``, framework-free): the first bad one raises."""
    for name in names():
        path = meta(name).check_environment
        if path:
            module, _, function = path.partition(":")
            getattr(importlib.import_module(module), function)()


def _check_name(name: str) -> str:
    if name not in names():
        raise SpecError("framework", name, one_of(names(), "a registered framework (none is)"))
    return name


@functools.lru_cache(maxsize=None)
def meta(name: str) -> FrameworkInfo:
    """The :class:`FrameworkInfo` of ``name``, read from its package's framework-free
    ``__init__``; SpecError for a name that is not registered, ParadnnError for a package
    whose ``INFO`` is missing or whose options are no :class:`Options` dataclass."""
    package = _PACKAGES[_check_name(name)]
    info = getattr(importlib.import_module(package), "INFO", None)
    if not isinstance(info, FrameworkInfo):
        raise ParadnnError(f"framework {name!r}: package {package} defines no INFO "
                           "(a paradnn.backends.FrameworkInfo); see docs/frameworks.md")
    options = info.options
    if not (isinstance(options, type) and issubclass(options, Options) and dataclasses.is_dataclass(options)):
        raise ParadnnError(f"framework {name!r}: INFO.options of package {package} is {options!r}; "
                           "allowed: a frozen dataclass subclassing paradnn.backends.Options "
                           "(NoOptions for none)")
    return dataclasses.replace(info, name=name, package=package)


def available(framework: str) -> str | None:
    """None if ``framework`` can be used here, else why not (with the install command)."""
    info = meta(framework)
    try:
        module = importlib.import_module(info.package + ".backend")
        check = getattr(module, "check", None)
        if check is not None:
            check()
    except ImportError as exc:
        install = f"pip install 'paradnn[{info.extra}]'" if info.extra else "install it"
        return f"{framework} is not installed ({exc}); {install}"
    return None


_instances: dict[str, "Backend"] = {}


def get(framework: str = DEFAULT) -> "Backend":
    """The backend of ``framework`` (one instance per process). SpecError for an unknown name
    or one whose framework is not installed."""
    if framework not in _instances:
        why = available(framework)
        if why is not None:
            raise SpecError("framework", framework, f"an installed framework: {why}")
        _instances[framework] = importlib.import_module(meta(framework).package + ".backend").BACKEND
    return _instances[framework]


def capability(framework: str, method: str, what: str) -> Callable[..., Any]:
    """The optional :class:`Backend` method ``method`` of ``framework``'s backend, or a
    ParadnnError saying that this framework cannot do ``what``. (Other backends are not
    imported to say which can: some frameworks must not share a process.)"""
    fn = getattr(get(framework), method, None)
    if fn is None:
        raise ParadnnError(f"framework {framework!r} cannot {what}: its backend has no "
                           f"{method} capability (docs/frameworks.md lists who has which)")
    return fn


# -- options of every registered framework, as one flat namespace of settings ------------------

def option_fields() -> dict[str, list[tuple[str, dataclasses.Field]]]:
    """option name -> [(framework, its dataclass field), ...] over the registered frameworks.
    Frameworks may share a name (jax and tensorflow both have ``step_loop``): one setting, which
    every framework declaring it parses and applies in its own way."""
    out: dict[str, list[tuple[str, dataclasses.Field]]] = {}
    for name in names():
        for f in dataclasses.fields(meta(name).options):
            out.setdefault(f.name, []).append((name, f))
    return out


def option_names(framework: str | None = None) -> tuple[str, ...]:
    """The option names of ``framework`` (None: of every registered framework)."""
    if framework is not None:
        return tuple(f.name for f in dataclasses.fields(meta(framework).options))
    return tuple(option_fields())


def parse_option(value: Any, name: str) -> Any:
    """The option ``name`` from text, a YAML value or a Python value, checked by every framework
    that declares it (SpecError naming the option, the value and what is allowed)."""
    declared = option_fields().get(name)
    if not declared:
        raise SpecError("setting", name, "a framework option: " + one_of(option_fields(), "none: no registered "
                                                                           "framework has options"))
    value_out = value
    for _framework, f in declared:
        value_out = f.metadata["parse"](value, name, **f.metadata["limits"])
    return value_out


def option_help(name: str) -> str:
    """What option ``name`` means, said once, after the frameworks that declare it: ``(jax,
    tensorflow, torch) <meaning>`` where they mean the same; where they differ, the part their
    texts share once, then each framework's own rest (``(jax, tensorflow) how a call runs its K
    steps: jax: device (...); tensorflow: device (...)``). Frameworks with the same text are
    named together."""
    texts: dict[str, list[str]] = {}  # text -> the frameworks declaring it so
    for fw, f in option_fields()[name]:
        texts.setdefault(str(f.metadata["help"]), []).append(fw)
    if len(texts) == 1:
        ((text, fws),) = texts.items()
        return f"({', '.join(fws)}) {text}"
    shared = _shared_clause(list(texts))
    rest = "; ".join(f"{', '.join(fws)}: {text[len(shared):].lstrip()}" for text, fws in texts.items())
    every = ", ".join(fw for fws in texts.values() for fw in fws)
    return f"({every}) {shared} {rest}" if shared else f"({every}) {rest}"


def _shared_clause(texts: list[str]) -> str:
    """The longest start of every text in ``texts`` that ends a clause (at ``:``), or ""."""
    common = texts[0]
    for t in texts[1:]:
        n = 0
        while n < min(len(common), len(t)) and common[n] == t[n]:
            n += 1
        common = common[:n]
    end = common.rfind(":")
    return common[:end + 1] if end >= 0 else ""


def option_default(name: str) -> Any:
    """The default of option ``name`` (the first declaring framework's)."""
    return option_fields()[name][0][1].default


# -- the interface ------------------------------------------------------------------------------

@dataclass
class Program:
    """One workload built and compiled by one backend, ready to initialize and time.

    ``call(state, batch, k) -> (state, loss)`` runs ``k`` training steps (state donated where
    the framework can) and may return before the device is done; ``Backend.sync`` waits.
    ``metrics`` holds what building and compiling measured, under ``record.METRICS`` names:
    ``params`` (from the built model's shapes), ``compile_s``, ``step_loop_used``, and where the
    framework reports them ``memory_argument_bytes``, ``memory_output_bytes``,
    ``memory_temp_bytes``, ``memory_peak_bytes`` (B per device). ``state_bytes`` (B per device)
    is the weights plus optimizer state: a true lower bound on the step's memory, known before
    anything is allocated. ``handle`` is the backend's own.
    """

    workload: Any
    call: Callable[[Any, Any, int], tuple[Any, Any]]
    state_bytes: int
    metrics: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)
    handle: Any = None
    #: The framework's device objects the program runs on (energy meters map them to counters:
    #: an object with an ``id`` attribute, the device's index as CUDA numbers it).
    devices: tuple[Any, ...] = ()


@runtime_checkable
class Backend(Protocol):
    """What a framework implements. Every method is typed and documented with units.

    Optional capabilities, found with :func:`capability` (a backend without one cannot run
    that experiment; the message says so): ``clear_caches()``; ``gemm_methods(device_platform)``,
    ``measure_bandwidth(megabytes, calls)``, ``probe_precision()`` and ``probe_versions()`` (``paradnn probe``); ``op_program`` and
    ``cpu_child_env`` (``paradnn ops``); ``collective_program``, ``simulated_devices`` and
    ``simulate_host_devices`` (``paradnn collectives``, ``scaling``); ``profile_inputs`` and
    ``trace_step`` (operation-level profiles), ``profiler_trace`` (device busy fraction),
    ``ledger_ops`` (the time ledger's operations);
    ``infeed_trainer`` (``paradnn infeed``'s training side) and ``input_pipeline`` (its host
    pipeline). Their contracts are in the modules that call them (paradnn.hardware,
    paradnn.experiments.ops, paradnn.experiments.collectives, paradnn.experiments.profile, paradnn.meters, paradnn.experiments.infeed,
    paradnn.ledger).
    """

    name: str  # its name in the registry

    def device_info(self) -> dict[str, Any]:
        """``device_platform`` (cpu|gpu|tpu), ``device_kind`` (the device's name),
        ``device_count`` (devices this framework sees), ``host``, ``cpu_model``."""

    def software_info(self) -> dict[str, Any]:
        """``framework_version`` plus the framework's own ``FrameworkInfo.software_fields``
        (``jax_version``, ``tf_version``, compiler options...): what changes the numbers."""

    def device_memory_bytes(self) -> int | None:
        """Memory of one device (B), the default memory limit; None if unknown."""

    def compile(self, workload: Any, settings: Any) -> Program:
        """Build the model and its training step and compile it ahead of time (no state
        allocated yet). ``settings`` is a :class:`paradnn.measure.MeasureSettings`; the
        framework's options are ``settings.options_for(name)``. Raises ``ParadnnError`` for
        specs the framework cannot build."""

    def init(self, program: Program) -> tuple[Any, Any]:
        """(state, batch): initialized state and a synthetic batch on the device(s), from a
        fixed seed."""

    def sync(self, value: Any) -> Any:
        """Block until ``value`` (arrays, a tree of them) is computed on the device."""

    def loss_value(self, loss: Any) -> float:
        """The loss as a Python float (synchronizes)."""

    def costs(self, program: Program) -> dict[str, Any]:
        """Executed cost of one step over all devices: ``flops_per_step`` (FLOP),
        ``bytes_per_step`` (B) where the framework counts them (None otherwise) and
        ``flops_source`` saying where they came from (or why they are missing)."""

    def memory_breakdown(self, program: Program) -> dict[str, Any]:
        """``memory_*_bytes`` breakdown metrics (B per device) where the framework can tell;
        {} otherwise."""

    def is_oom(self, exc: BaseException) -> bool:
        """Whether an exception raised by this framework means the device ran out of memory."""

    def configure_cache(self, path: str | None) -> Callable[[], None]:
        """Point the framework's compilation cache at ``path`` (None: leave it); returns a
        function that restores the previous setting. An unwritable ``path`` raises
        InfrastructureError."""


__all__ = ["BUILTIN", "DEFAULT", "Backend", "FrameworkInfo", "Program", "available", "builders",
           "capability", "check_environments", "get", "meta", "names", "option_default", "option_fields", "option_help",
           "option_names", "parse_option", "register", "replaced_by", "unregister"]
