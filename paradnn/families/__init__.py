"""One registry of model families: every fact about a family in one entry, no framework imported.

A :class:`Family` names the spec class, how each framework builds it (an import path, loaded
only when a backend builds the model), the analytic parameter and FLOP counts (plain arithmetic),
the memory estimates the planner adds up (activations, input batch, batch-norm statistics), the
default batch and optimizer, the paper's ranges with their units, the grid presets, the
report's heat-map axes, the figures' marker and display name, and tiny test presets. The CLI,
grids, store columns, sizes, analyses, plots and report read it, and none of them branches on a
family's type; adding a family is one module that defines its spec (on
:class:`paradnn.workload.Spec`) and calls :func:`register`, plus its name in ``BUILTIN`` (or a
:func:`register` call from user code).

>>> from paradnn import families
>>> families.get("fc").default_batch(families.get("fc").spec(2, 32, 64, 10))
256
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from paradnn import backends
from paradnn.errors import SpecError
from paradnn.plugins import load_plugins

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

    ``builders`` maps a framework to ``"module:function"``; ``function(spec, dtype)`` returns
    that backend's model description (a :class:`paradnn.backends.jax.models.ModelDef` for
    jax). ``frameworks`` (spec -> names) narrows them per spec (a zoo model Keras lacks).

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
    says so.

    Ranges: ``paper`` holds the paper's ranges (axis -> values, batch included) and
    ``presets`` the ``smoke``/``small`` grids; ``paper_fixed`` the values the paper held fixed
    for its heat maps; ``width`` the axis that heat maps put against batch; ``variant`` a
    categorical axis that splits the family in summaries (CNN block). ``display`` is the name
    figures and report headings use ("" : the name in capitals, see :func:`display_name`) and
    ``marker`` its matplotlib marker in scatter plots (:func:`marker`).
    """

    name: str
    spec: type
    description: str
    axes: tuple[Axis, ...]
    builders: dict[str, str]
    param_count: Callable[[Any], int] | None = None
    train_flops_per_example: Callable[[Any], float] | None = None
    reference_flops_per_example: Callable[[Any], float | None] | None = None
    activation_elements: Callable[[Any], tuple[float, float]] | None = None
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

    def fields(self) -> tuple[str, ...]:
        """The spec's hyperparameter names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(self.spec))

    def frameworks_for(self, spec: Any) -> tuple[str, ...]:
        """Frameworks that can build ``spec``."""
        if self.frameworks is not None:
            return self.frameworks(spec)
        return tuple(f for f in FRAMEWORKS if f in self.builders)

    def unit(self, axis: str) -> str:
        for a in self.axes:
            if a.name == axis:
                return a.unit
        return ""


_REGISTRY: dict[str, Family] = {}
_loaded = False


def register(family: Family) -> Family:
    """Add (or replace) a family; returns it. Its spec class's ``family`` must equal its name."""
    if getattr(family.spec, "family", None) != family.name:
        raise SpecError("family", family.name, f"the family name of its spec class ({family.spec.__name__})")
    _REGISTRY[family.name] = family
    return family


def unregister(name: str) -> None:
    """Remove a family (tests that register a toy family clean up with this)."""
    _REGISTRY.pop(name, None)


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in BUILTIN:
            importlib.import_module(f"paradnn.families.{mod}")
        load_plugins()


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
        raise SpecError("family", name, "one of " + ", ".join(_REGISTRY))
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
        raise SpecError("framework", framework, "one of " + ", ".join(FRAMEWORKS))
    if framework not in fam.frameworks_for(spec):
        what = f"model {spec.model}" if hasattr(spec, "model") else f"family {fam.name}"
        raise SpecError("framework", framework,
                        f"one of {', '.join(fam.frameworks_for(spec))} for {what}")
    module, _, fn = fam.builders[framework].partition(":")
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
#: registry (:func:`paradnn.backends.names`), the one place that lists them.
FRAMEWORKS = FieldsView(backends.names)


__all__ = ["BUILTIN", "DEFAULT_MARKER", "FieldsView", "RegistryView", "Axis", "FRAMEWORKS", "Family",
           "all_fields", "builder", "display_name", "generated", "get", "marker", "names", "of",
           "param_count", "register", "unregister"]
