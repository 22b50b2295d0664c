"""Settings declared once: a dataclass field that says how to parse itself and what it means.

Every setting a user can give (the timing protocol's :class:`paradnn.measure.MeasureSettings`,
each framework's options) is a dataclass field made by :func:`setting`: its default, a
``parse(value, name, **limits)`` that turns text, a YAML value or a Python value into the
setting's value (raising :class:`~paradnn.errors.SpecError` naming the parameter, the value and
what is allowed), its limits and its help text with the unit. The CLI flags, the sweep files'
keys and validation all read that one declaration. :func:`choice` is the one parser of a
setting with named values.

This module is on the ground floor: it imports nothing of paradnn but its errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from paradnn.errors import SpecError


def setting(default: Any, parse: Callable[..., Any], help: str, **limits: Any) -> Any:
    """A dataclass field whose metadata says how to parse it from text (``parse(value, name,
    **limits)``, raising SpecError) and what it means (``help``, with its unit): the CLI flags,
    the sweep files' ``settings`` keys and validation all read it. Used by
    :class:`paradnn.measure.MeasureSettings` and by every framework's options class."""
    return dataclasses.field(default=default, metadata={"parse": parse, "limits": limits, "help": help})


def parse_field(cls: type, name: str, value: Any) -> Any:
    """``value`` parsed by the metadata of field ``name`` of the dataclass ``cls``."""
    meta = {f.name: f for f in dataclasses.fields(cls)}[name].metadata
    return meta["parse"](value, name, **meta["limits"])


def one_of(allowed: Sequence[str], none: str) -> str:
    """``one of a, b, c``, or ``none`` (what to do) where ``allowed`` is empty: no message says
    "one of" followed by nothing."""
    return "one of " + ", ".join(allowed) if allowed else none


def choice(*allowed: str | Iterable[str], any_case: bool = False) -> Callable[..., str]:
    """A ``parse(value, parameter)`` for :func:`setting` that accepts one of ``allowed``.

    ``allowed`` holds strings, or one iterable read at each call (a registry view, so that a
    name registered later is allowed). Exact strings by default; ``any_case`` accepts any
    letter case and returns the lower-case name (names typed on a command line or in YAML:
    ``Float32``, ``JAX``)."""
    def names() -> tuple[str, ...]:
        if len(allowed) == 1 and not isinstance(allowed[0], str):
            return tuple(allowed[0])
        return tuple(str(a) for a in allowed)

    def parse(value: Any, parameter: str) -> str:
        options = names()
        if isinstance(value, str) and any_case:
            value_in = value.lower()
        else:
            value_in = value
        if not isinstance(value_in, str) or value_in not in options:
            raise SpecError(parameter, value, one_of(options, "no value (the setting declares none)"))
        return value_in

    parse.__name__ = "choice"
    return parse


class Options:
    """Base of a framework's options: a frozen dataclass of :func:`setting` fields (defaults
    included), parsed and range-checked on construction. Its fields are record columns under
    their own names and ``settings`` keys of sweep files and ``--flag`` options of the CLI."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, parse_field(type(self), f.name, getattr(self, f.name)))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class NoOptions(Options):
    """Options of a framework that has none."""


__all__ = ["NoOptions", "Options", "choice", "one_of", "parse_field", "setting"]
