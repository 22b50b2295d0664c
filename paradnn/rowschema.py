"""The type of every field of a stored record row, and the one reader that holds a row to them.

A store keeps each record as a JSON object (:mod:`paradnn.store`). JSON says nothing about what a
field holds, and a row edited by hand, written by a bug or by another tool can carry a list where
a batch belongs, a dict for a metric, NaN for a layer count or ``"many"`` for ``nodes``. Every
analysis, the report, ``paradnn status`` and Parquet need one scalar type per column, so each row
is read through :func:`read_row` before anything uses it: a field is kept, coerced to its type,
or refused (:class:`~paradnn.errors.SpecError` naming the field, the value and what is allowed;
the store then counts the row unreadable, docs/reliability.md "Store content").

>>> from paradnn.rowschema import read_row
>>> read_row({"key": "k", "status": "ok", "family": "fc", "nodes": "32", "batch": 8.0})["nodes"]
32

The types come from the registries that declare the fields, read at each call (a family or a
framework registered later adds its fields), and one kind per field (:data:`KINDS`):

* identity and status (``key``, ``status``, ``error``, ``time_utc``, ...): text, and
  ``schema_version`` an integer (declared here: :class:`paradnn.record.Record` builds them);
* model fields: the annotations of each family's spec dataclass (``int``: integer, ``str``:
  text), for a row of that family; a field two families declare with different types takes the
  row's family's, and any of them for a row of a family not registered here (infeed rows);
* ``batch``, ``devices`` integers; ``dtype``, ``optimizer``, ``framework`` text;
* platform (:data:`paradnn.record.PLATFORM_FIELDS`): text, ``device_count`` an integer;
* software: the core fields and every framework's ``version_fields``: text;
* settings: the annotations of :class:`paradnn.measure.MeasureSettings` and of every framework's
  options class. Their types only, not their parsers' ranges and choices: an older row keeps a
  value today's parser refuses (``min_calls`` 2, from before the protocol's minimum of 6;
  :func:`paradnn.measure.nearest_valid` reads such values), and refusing it would lose a
  measurement;
* metrics (:data:`paradnn.record.METRICS`), by unit: ``""`` text, ``"bool"`` a bool, any other
  unit a number; ``step_times_s`` a list of numbers (the one list field), and
  ``host_cpu_utilization_per_core`` text (its unit is 1, its value comma-separated numbers).

Any other field (one a newer record carries, an infeed or scaling row's own) is kept as it is
when it is a scalar (text, number, bool or null); a list or an object there becomes its JSON
text, because a row is a flat table row and no analysis reads such a field.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from paradnn import families, frameworks
from paradnn.errors import SpecError
from paradnn.measure import MeasureSettings
from paradnn.record import CORE_SOFTWARE_FIELDS, METRICS, PLATFORM_FIELDS

__all__ = ["KINDS", "RowSchema", "row_schema", "read_row"]

#: Field kinds -> what a value of that kind may be (the "allowed" of a refusal).
KINDS: dict[str, str] = {
    "text": "text",
    "integer": "an integer within 64 bits (or its text)",
    "number": "a number (or its text)",
    "bool": "true or false (or 0 or 1)",
    "samples": "a list of finite numbers",
    "scalar": "text, a number, true or false",
}

# Parquet (and numpy) hold integers in 64 bits: a bigger one fails the export of the whole store.
_INT_MIN, _INT_MAX = -2**63, 2**63 - 1
_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")

#: Fields every record row has, declared by :meth:`paradnn.record.Record.to_dict`.
_IDENTITY: dict[str, str] = {
    "key": "text", "workload_key": "text", "status": "text", "error": "text", "time_utc": "text",
    "schema_version": "integer", "kind": "text", "task": "text", "warnings": "text",
    "family": "text", "batch": "integer", "dtype": "text", "optimizer": "text",
    "devices": "integer", "framework": "text",
}
#: Metrics whose value is not what their unit says: the unit of ``host_cpu_utilization_per_core``
#: is that of each number in its comma-separated text.
_METRIC_KINDS: dict[str, str] = {"step_times_s": "samples", "host_cpu_utilization_per_core": "text"}


@dataclass(frozen=True)
class RowSchema:
    """The kind (a :data:`KINDS` key) of every declared field: ``fields`` for any row, and
    ``spec`` (family -> field -> kind) for the model fields of a registered family's rows."""

    fields: Mapping[str, str]
    spec: Mapping[str, Mapping[str, str]]
    _by_family: dict[Any, tuple[dict[str, str], dict[str, frozenset[type]]]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False)

    def _family(self, family: Any) -> tuple[dict[str, str], dict[str, frozenset[type]]]:
        family = family if isinstance(family, str) else None
        found = self._by_family.get(family)
        if found is None:
            kinds = {**self.fields, **self.spec.get(family, {})} if family else dict(self.fields)
            found = (kinds, {name: _FAST[kind] for name, kind in kinds.items()})
            self._by_family[family] = found
        return found

    def kinds(self, family: Any) -> Mapping[str, str]:
        """field -> kind in a row of ``family`` (its own model fields by its spec); a field not
        listed is ``scalar``."""
        return self._family(family)[0]

    def kind(self, name: str, family: Any) -> str:
        """The kind of field ``name`` in a row of ``family``; ``scalar`` for an undeclared one."""
        return self.kinds(family).get(name, "scalar")


def _kind_of(annotation: Any) -> str:
    """The kind of a dataclass field annotation (``int``, ``str | None``, ...); ``scalar`` for
    anything else."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = found[0] if len(found) == 1 else None
    return {int: "integer", float: "number", str: "text", bool: "bool"}.get(annotation, "scalar")


def _annotated(cls: type) -> dict[str, str]:
    """field name -> kind of a dataclass's fields (``scalar`` where its annotations cannot be
    resolved: a plugin's class with names its module does not import)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # any error evaluating foreign annotations: the fields take any scalar
        hints = {}
    return {f.name: _kind_of(hints.get(f.name)) for f in dataclasses.fields(cls)}


def _metric_kind(name: str, unit: str) -> str:
    if name in _METRIC_KINDS:
        return _METRIC_KINDS[name]
    return {"": "text", "bool": "bool"}.get(unit, "number")


def row_schema() -> RowSchema:
    """The schema of this process's registries (families, frameworks, settings, metrics): built
    once per set of registered families and frameworks."""
    family_specs = tuple((name, families.get(name).spec) for name in families.names())
    options = tuple((name, frameworks.meta(name).options) for name in frameworks.names())
    return _build(family_specs, options)


_cache: dict[tuple[Any, ...], RowSchema] = {}


def _build(family_specs: tuple[tuple[str, type], ...],
           options: tuple[tuple[str, type], ...]) -> RowSchema:
    key = (family_specs, options)
    if key in _cache:
        return _cache[key]
    spec = {name: _annotated(cls) for name, cls in family_specs}
    fields: dict[str, str] = {}
    # A model field that families declare alike has that kind for every row (an infeed row
    # carries its model's fields under its own family); declared differently, any scalar.
    for declared in spec.values():
        for name, kind in declared.items():
            fields[name] = kind if fields.get(name, kind) == kind else "scalar"
    fields.update(_IDENTITY)
    fields.update({name: "text" for name in PLATFORM_FIELDS})
    fields["device_count"] = "integer"
    fields.update({name: "text" for name in CORE_SOFTWARE_FIELDS})
    for framework, cls in options:
        fields.update({name: "text" for name in frameworks.meta(framework).version_fields})
        for name, kind in _annotated(cls).items():
            fields[name] = kind if fields.get(name, kind) == kind else "scalar"
    protocol = {f.name for f in dataclasses.fields(MeasureSettings)
                if not f.metadata.get("option_bag")}
    fields.update({name: kind for name, kind in _annotated(MeasureSettings).items()
                   if name in protocol})
    fields.update({name: _metric_kind(name, unit) for name, (unit, _) in METRICS.items()})
    schema = RowSchema(fields=fields, spec=spec)
    if len(_cache) > 64:  # registries that change in a loop (tests): keep the cache bounded
        _cache.clear()
    _cache[key] = schema
    return schema


def _refuse(name: str, value: Any, kind: str) -> SpecError:
    return SpecError(name, value, KINDS[kind])


def _number(name: str, value: Any, kind: str) -> int | float | None:
    """``value`` as an int (within 64 bits) or a finite float; None for NaN and infinity; refuses
    anything else (bools included: ``true`` is no measurement)."""
    if isinstance(value, str):
        if _INTEGER_TEXT.fullmatch(value):
            value = int(value)
        else:
            try:
                value = float(value)
            except ValueError:
                raise _refuse(name, value, kind) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse(name, value, kind)
    if isinstance(value, int):
        if _INT_MIN <= value <= _INT_MAX:
            return value
        try:
            return float(value)  # a count too big for 64 bits: its magnitude, as a float
        except OverflowError:
            raise _refuse(name, value, kind) from None
    return value if math.isfinite(value) else None


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise _refuse(name, value, "integer")
    number = _number(name, value, "integer")
    # NaN and infinity are no count; neither is 2.5, nor an integer past 64 bits (made a float).
    if not (isinstance(number, int) or (isinstance(number, float) and number.is_integer()
                                        and _INT_MIN <= number <= _INT_MAX)):
        raise _refuse(name, value, "integer")
    return int(number)


def _text(name: str, value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value) if math.isfinite(value) else None
    raise _refuse(name, value, "text")


def _bool(name: str, value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    number = _number(name, value, "bool")
    if number is None:
        return None
    if number not in (0, 1):
        raise _refuse(name, value, "bool")
    return bool(number)


def _samples(name: str, value: Any) -> list[float]:
    # As stored: floats whose sum is finite, so each is (a NaN or an infinity makes it neither).
    if type(value) is list and all(type(x) is float for x in value) and math.isfinite(sum(value)):
        return value
    if isinstance(value, str):  # a list as its JSON text (a CSV export's cell)
        try:
            value = json.loads(value)
        except ValueError:
            raise _refuse(name, value, "samples") from None
    if not isinstance(value, list):
        raise _refuse(name, value, "samples")
    out = []
    for item in value:
        number = None if isinstance(item, bool) else _number(name, item, "samples")
        if number is None:  # a bool, NaN or infinity is no time
            raise _refuse(name, value, "samples")
        out.append(float(number))
    return out


def _scalar(name: str, value: Any) -> Any:
    if isinstance(value, (list, dict)):
        # A newer record's structured field: kept, as its JSON text (a table cell is a scalar).
        return json.dumps(value, sort_keys=True, default=str)
    return value


_READERS: dict[str, Callable[[str, Any], Any]] = {
    "text": _text, "integer": _integer, "number": lambda n, v: _number(n, v, "number"),
    "bool": _bool, "samples": _samples, "scalar": _scalar,
}
# Values already of their kind, by type (an int within 64 bits and a finite float are checked
# on the way): most fields of most rows take this path, so reading a store of many rows costs
# little more than parsing its JSON.
_FAST: dict[str, frozenset[type]] = {
    "text": frozenset({str}), "bool": frozenset({bool}), "integer": frozenset({int}),
    "number": frozenset({int, float}), "samples": frozenset(), "scalar": frozenset({str, bool}),
}
_SCALAR_FAST = _FAST["scalar"]


def read_row(row: Mapping[str, Any], schema: RowSchema | None = None) -> dict[str, Any]:
    """A stored row with every field read as its kind (a new dict; ``row`` is not changed):
    coerced where the value is its type in another form (``"32"`` for 32, ``8.0`` for 8, NaN for
    a missing number), refused otherwise with a SpecError naming the first such field, its value
    and what is allowed. ``schema``: :func:`row_schema` (built here when not given; a reader of
    many rows passes one)."""
    schema = schema if schema is not None else row_schema()
    kinds, fast = schema._family(row.get("family"))
    out: dict[str, Any] = {}
    for name, value in row.items():
        t = type(value)
        # x - x is 0.0 for a finite float only (NaN and infinity give NaN).
        if value is None or (t in fast.get(name, _SCALAR_FAST)
                             and (t is not int or _INT_MIN <= value <= _INT_MAX)
                             and (t is not float or value - value == 0.0)):
            out[name] = value
        else:
            out[name] = _READERS[kinds.get(name, "scalar")](name, value)
    return out
