"""One registry of model families: every fact about a family in one entry, no framework imported.

A :class:`Family` names the spec class, how each framework builds it (an import path, loaded
only when a backend builds the model), the analytic parameter and FLOP counts (plain arithmetic),
the memory estimates the planner adds up (activations, input batch, batch-norm statistics), the
default batch and optimizer, the paper's ranges with their units, the grid presets, the
report's heat-map axes, the figures' marker and display name, and tiny test presets. The CLI,
grids, store columns, sizes, analyses, plots and report read it, and none of them branches on a
family's type; adding a family is one module that defines its spec (on
:class:`paradnn.workload.Spec`) and calls :func:`register`, plus its name in ``BUILTIN`` (or a
:func:`register` call from user code; a built-in name is refused unless the entry only adds
builders, or says ``replaces=True`` and its records then say so).

>>> from paradnn import families
>>> families.get("fc").default_batch(families.get("fc").spec(2, 32, 64, 10))
256
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from paradnn import frameworks
from paradnn.errors import ParadnnError, SpecError
from paradnn.plugins import load_plugins, loading
from paradnn.settings import one_of

#: Built-in family modules under paradnn.families, imported on first lookup.
BUILTIN: tuple[str, ...] = ("fc", "cnn", "rnn", "transformer", "real")

#: Marker of a family that names none (and of rows of a family not registered here).
DEFAULT_MARKER = "D"


@dataclass(frozen=True)
class Axis:
    """One hyperparameter of a family: its unit and its help text (CLI flags, axis labels)."""

    name: str
    unit: str
    help: str
    choices: tuple[str, ...] = ()  # a categorical axis (CNN block, RNN cell); () for integers


@dataclass(frozen=True)
class Family:
    """Everything paradnn knows about one model family.

    Which frameworks build it, and how, each framework says in its own registry entry
    (``FrameworkInfo.builders``: family -> ``"module:function"``; ``function(spec, dtype)``
    returns that backend's model description), so adding a framework edits no family.
    ``builders`` holds the family's own additions (a user family's builders, a framework
    plug-in teaching a built-in family); :meth:`framework_builders` merges both.
    ``frameworks`` (spec -> names) narrows them per spec (a zoo model Keras lacks).

    Counts, all plain arithmetic (no framework): ``param_count`` (trainable parameters: a
    closed form, or a table) and ``train_flops_per_example`` (matmul and convolution FLOPs of
    one training step per example, a closed form valid for every spec); a family without a
    closed form may give ``reference_flops_per_example``, a table of the reference backend's
    count that returns None for specs it does not cover (then the JAX jaxpr counts it when it
    runs). None: not known without building the model.

    Memory estimates for the planner (:mod:`paradnn.sizes`): ``activation_elements`` (spec ->
    (elements in the compute dtype, float32 elements) one example keeps for the backward
    pass), ``example_bytes`` (spec, bytes per compute-dtype element -> bytes of one example of
    the synthetic batch, inputs and int32 labels) and ``non_trainable_count`` (spec -> float32
    entries of non-trainable state, e.g. batch-norm statistics). None: unknown, and the plan
    says so. ``activation_floor`` (spec -> (compute-dtype elements, float32 elements) per
    example) is a lower bound of the activations, which the runner's preflight adds to the
    floor that refuses a model before tracing (a Transformer at a 10^9-token length); None:
    the floor counts no activations.

    Ranges: ``paper`` holds the paper's ranges (axis -> values, batch included) and
    ``presets`` the ``smoke``/``small`` grids; ``paper_fixed`` the values the paper held fixed
    for its heat maps; ``width`` the axis that heat maps put against batch; ``variant`` a
    categorical axis that splits the family in summaries (CNN block). ``display`` is the name
    figures and report headings use ("" : the name in capitals, see :func:`display_name`) and
    ``marker`` its matplotlib marker in scatter plots (:func:`marker`). ``count_rule`` is the
    revision of the counting rule (below).
    """

    name: str
    spec: type
    description: str
    axes: tuple[Axis, ...]
    builders: dict[str, str] = field(default_factory=dict)
    param_count: Callable[[Any], int] | None = None
    train_flops_per_example: Callable[[Any], float] | None = None
    reference_flops_per_example: Callable[[Any], float | None] | None = None
    activation_elements: Callable[[Any], tuple[float, float]] | None = None
    activation_floor: Callable[[Any], tuple[float, float]] | None = None
    example_bytes: Callable[[Any, int], int] | None = None
    non_trainable_count: Callable[[Any], int] = lambda spec: 0
    default_batch: Callable[[Any], int] = lambda spec: 64
    default_optimizer: Callable[[Any], str] = lambda spec: "rmsprop"
    frameworks: Callable[[Any], tuple[str, ...]] | None = None
    kind: str = "generated"  # "generated" (a parameterized family) or "real" (the zoo)
    paper: dict[str, list[Any]] = field(default_factory=dict)
    paper_fixed: dict[str, Any] = field(default_factory=dict)
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    width: str | None = None
    variant: str | None = None
    #: Heat-map grid the report suggests when the store has too few runs: (fixed, varied).
    suggested_grid: tuple[dict[str, Any], dict[str, list[int]]] | None = None
    #: Tiny specs (field values) and batch for tests: seconds on a CPU in every framework.
    tiny: tuple[dict[str, Any], ...] = ()
    display: str = ""
    marker: str = DEFAULT_MARKER
    #: Revision of the rule behind the family's analytic FLOP count (``model_flops_per_step``):
    #: raised by a paradnn change that alters the count of any spec, so that rows counted by an
    #: older rule are told apart (records carry it as ``flops_count_rule``; rows written before
    #: it was recorded are rule 1) and never read with newer ones unmarked.
    count_rule: int = 1

    def fields(self) -> tuple[str, ...]:
        """The spec's hyperparameter names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(self.spec))

    def framework_builders(self) -> dict[str, str]:
        """framework -> ``"module:function"`` building this family, in the registry's order:
        what each registered framework declares for the family's name (its
        ``FrameworkInfo.builders``), then the family's own ``builders`` (which win). A family
        that replaced a built-in one (``register(..., replaces=True)``) has only its own: the
        frameworks' builders were written for the built-in spec."""
        # Read from the registration (register records a replacement), not by comparing this
        # entry with the built-in one: every Workload asks, and the comparison cost 10 us.
        replacement = self.name in _REPLACED and _REGISTRY.get(self.name) is self
        merged = {**({} if replacement else frameworks.builders(self.name)), **self.builders}
        return {fw: merged[fw] for fw in FRAMEWORKS if fw in merged}

    def frameworks_for(self, spec: Any) -> tuple[str, ...]:
        """Frameworks that can build ``spec``."""
        if self.frameworks is not None:
            return self.frameworks(spec)
        return tuple(self.framework_builders())

    def unit(self, axis: str) -> str:
        for a in self.axes:
            if a.name == axis:
                return a.unit
        return ""


_REGISTRY: dict[str, Family] = {}
#: The entries paradnn's own family modules registered: a registration under one of their
#: names by anyone else is a replacement (see :func:`register`).
_BUILTIN_ENTRIES: dict[str, Family] = {}
#: Built-in families that a plugin replaced (``register(..., replaces=True)``) -> the module
#: that registered the replacement: records say so (``replaced_by``).
_REPLACED: dict[str, str] = {}
_KINDS = ("generated", "real")
_loaded = False  # the built-in modules imported and every plugin loaded
_importing = False  # the built-in modules are being imported


def _check_entry(family: Family, replaces: bool, builtin: bool) -> None:
    """Refuse an entry that cannot work: a name that is no identifier, a spec class that is no
    dataclass of this family, no builders (no framework could build it) or a builder that is
    not ``"module:function"``, an unknown kind."""
    if not isinstance(family, Family):
        raise SpecError("family", family, "a paradnn.families.Family")
    name = family.name
    if not isinstance(name, str) or not name.isidentifier():
        raise SpecError("family", name, "an identifier, e.g. toy")
    if not dataclasses.is_dataclass(family.spec) or getattr(family.spec, "family", None) != name:
        raise SpecError("family", name, f"the family name of its spec class ({getattr(family.spec, '__name__', family.spec)!r}, "
                        "a dataclass whose attribute family is that name)")
    if replaces and name not in BUILTIN:
        raise SpecError("replaces", replaces, f"only with a built-in family's name ({', '.join(BUILTIN)}); "
                        f"{name!r} is none: register it without replaces")
    if not isinstance(family.builders, Mapping):
        raise SpecError("builders", family.builders, f"a mapping framework -> 'module:function' for family {name}")
    # paradnn's own family modules declare no builders: the frameworks' entries do (a test
    # checks that each built-in family has one). Any other entry must be buildable: its own
    # builders, or (a new family, not a replacement) a registered framework's.
    if not builtin and not family.builders and (replaces or not frameworks.builders(name)):
        raise SpecError("builders", family.builders, f"at least one framework -> 'module:function' for family {name}: "
                        "a family no framework can build cannot run")
    for framework, path in family.builders.items():
        module, _, function = path.partition(":") if isinstance(path, str) else ("", "", "")
        if not isinstance(framework, str) or not module or not function:
            raise SpecError(f"builders[{framework!r}]", path, f"'module:function' building family {name} in that framework")
    if family.kind not in _KINDS:
        raise SpecError("kind", family.kind, "one of " + ", ".join(_KINDS))


def _extends(family: Family, original: Family) -> bool:
    """Whether ``family`` is ``original`` (a built-in entry) with builders added for frameworks
    it had none for: a framework plugin teaching a built-in family to build in it
    (docs/frameworks.md), which changes no row of the built-in frameworks. ``original`` itself
    too (a test restoring the entry)."""
    kept = all(family.builders.get(fw) == path for fw, path in original.builders.items())
    return kept and dataclasses.replace(family, builders=original.builders) == original


def register(family: Family, replaces: bool = False) -> Family:
    """Add a family; returns it. Refused (SpecError naming the field) where the entry cannot work
    (:func:`_check_entry`: no builders, a spec class of another family, ...).

    A name of a built-in family (fc, cnn, rnn, transformer, real) is refused unless the entry
    only adds builders for frameworks the built-in one lacks, or ``replaces`` is true: then the
    records made in this process carry ``replaced_by`` naming the registering module (another
    model is another config, so it is part of the record key). ``replaces`` with a name that is
    not built in is refused. Registering a name that is not built in again replaces the earlier
    entry."""
    caller = sys._getframe(1).f_globals.get("__name__", "?")  # the module calling register
    builtin = caller.startswith(__name__ + ".")  # paradnn's own family modules register theirs
    _check_entry(family, replaces, builtin)
    name = family.name
    if builtin:
        _BUILTIN_ENTRIES[name] = _REGISTRY[name] = family
        return family
    _load()  # the built-in entries first, so that a clash with one is seen
    original = _BUILTIN_ENTRIES.get(name)
    replacing = original is not None and not _extends(family, original)
    if replacing and not replaces:
        raise ParadnnError(
            f"family {name!r} is built into paradnn: another entry under its name would label its rows "
            f"{name}; to replace it, say so: families.register(family, replaces=True) (its rows then "
            "record replaced_by), register it under a name of its own, or only add builders for "
            "new frameworks (dataclasses.replace(families.get(name), builders={...}))")
    _REGISTRY[name] = family
    if replacing:
        _REPLACED[name] = loading() or caller
    else:
        _REPLACED.pop(name, None)
    return family


def unregister(name: str) -> None:
    """Remove a family (tests that register a toy family clean up with this); a built-in name
    gets its built-in entry back."""
    _REGISTRY.pop(name, None)
    _REPLACED.pop(name, None)
    if name in _BUILTIN_ENTRIES:
        _REGISTRY[name] = _BUILTIN_ENTRIES[name]


def replaced() -> dict[str, str]:
    """Built-in families replaced in this process (``register(..., replaces=True)``) -> the
    module that registered each replacement."""
    _load()
    return dict(_REPLACED)


def _load() -> None:
    global _loaded, _importing
    if _loaded or _importing:
        return  # _importing: a built-in module looked something up while it was imported
    _importing = True
    try:
        for mod in BUILTIN:
            importlib.import_module(f"paradnn.families.{mod}")
    finally:
        _importing = False
    # As in paradnn.backends: a failing plugin raises at every lookup, and a lookup from a
    # plugin's own import does not count as loaded.
    load_plugins()
    _loaded = loading() is None


def names() -> list[str]:
    """Registered family names, built-ins first in their order, then others by registration."""
    _load()
    # A built-in module imported directly (``from paradnn import Transformer``) registers before
    # _load runs the others: order by BUILTIN, not by registration (sorted is stable).
    rank = {name: i for i, name in enumerate(BUILTIN)}
    return sorted(_REGISTRY, key=lambda name: rank.get(name, len(BUILTIN)))


def generated() -> list[str]:
    """The parameterized families (everything but the zoo)."""
    return [n for n in names() if _REGISTRY[n].kind == "generated"]


def get(name: str) -> Family:
    """The family called ``name``; SpecError naming the registered ones otherwise."""
    _load()
    if name not in _REGISTRY:
        raise SpecError("family", name, one_of(names(), "a registered family (none is)"))
    return _REGISTRY[name]


def of(spec: Any) -> Family:
    """The family of a spec instance."""
    return get(getattr(spec, "family", None))


def all_fields() -> tuple[str, ...]:
    """Every hyperparameter name over all families, first-seen order (store columns)."""
    return tuple(dict.fromkeys(f for n in names() for f in _REGISTRY[n].fields()))


def param_count(spec: Any) -> int | None:
    """Trainable parameters counted without building the model (the family's closed form or
    table), or None where the family has none."""
    fam = of(spec)
    return None if fam.param_count is None else int(fam.param_count(spec))


def display_name(family: str) -> str:
    """The family's name in figures and report headings (``FC``, ``real model``): its
    ``display``, else its name in capitals; a family not registered in this process (a row of
    an old store) keeps its name."""
    _load()
    if family not in _REGISTRY:
        return str(family)
    fam = _REGISTRY[family]
    return fam.display or fam.name.upper()


def marker(family: str) -> str:
    """The family's matplotlib marker in scatter plots (``DEFAULT_MARKER`` for a family not
    registered in this process)."""
    _load()
    return _REGISTRY[family].marker if family in _REGISTRY else DEFAULT_MARKER


def builder(spec: Any, framework: str) -> Callable[[Any, str], Any]:
    """The function that builds ``spec`` in ``framework``; SpecError if it cannot."""
    fam = of(spec)
    if framework not in FRAMEWORKS:
        raise SpecError("framework", framework, one_of(FRAMEWORKS, "a registered framework (none is)"))
    able = fam.frameworks_for(spec)
    if framework not in able:
        what = f"model {spec.model}" if hasattr(spec, "model") else f"family {fam.name}"
        # A spec whose family narrows it to no framework: say so, never "one of" nothing.
        allowed = f"one of {', '.join(able)} for {what}" if able else f"none: no registered framework can build {what}"
        raise SpecError("framework", framework, allowed)
    module, _, fn = fam.framework_builders()[framework].partition(":")
    return getattr(importlib.import_module(module), fn)


class RegistryView(Mapping):
    """family name -> one field of its :class:`Family`, read at use time, so that a family
    registered later (user code, a test) appears. Families whose field is empty are absent."""

    def __init__(self, field: Callable[[Family], Any]) -> None:
        self._field = field

    def _items(self) -> dict[str, Any]:
        return {n: v for n in names() if (v := self._field(_REGISTRY[n]))}

    def __getitem__(self, family: str) -> Any:
        return self._items()[family]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


class FieldsView(Sequence):
    """A tuple of names computed from the registry at each use (``*view``, ``x in view``,
    ``view[:-1]``), so that module-level column lists include families registered later."""

    def __init__(self, compute: Callable[[], tuple[str, ...]]) -> None:
        self._compute = compute

    def __getitem__(self, index):  # type: ignore[override]
        return self._compute()[index]

    def __len__(self) -> int:
        return len(self._compute())

    def __iter__(self) -> Iterator[str]:
        return iter(self._compute())

    def __contains__(self, item: object) -> bool:
        return item in self._compute()

    def __repr__(self) -> str:
        return f"FieldsView({self._compute()!r})"


#: The frameworks a family may be built in (``Workload.framework``): a view of the framework
#: registry (:func:`paradnn.frameworks.names`), the one place that lists them.
FRAMEWORKS = FieldsView(frameworks.names)


__all__ = ["BUILTIN", "DEFAULT_MARKER", "FieldsView", "RegistryView", "Axis", "FRAMEWORKS", "Family",
           "all_fields", "builder", "display_name", "generated", "get", "marker", "names", "of",
           "param_count", "register", "replaced", "unregister"]
