"""The base of every family's model spec: integer coercion, validation, a canonical dict.

It lives with the families (each family module defines its spec on :class:`Spec`), below the
workload that pairs a spec with its training settings; it imports nothing of paradnn but errors,
units and settings.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from paradnn.errors import SpecError
from paradnn.units import INT_MAX


def positive_int(name: str, value: Any) -> int:
    """``value`` as a positive int of at most 64 bits (:data:`paradnn.units.INT_MAX`: array
    dimensions and byte counts are int64 in XLA, and a batch of 1e308 examples overflowed the
    size arithmetic); integral floats and strings from YAML or argparse ("4", 4.0) are
    accepted, anything lossy (2.5, True) is a SpecError naming ``name``."""
    allowed = f"a positive integer up to {INT_MAX}"
    # bool is an int subclass; True as a layer count is a bug, not a 1.
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            as_float = float(value)
        except (TypeError, ValueError, OverflowError):
            raise SpecError(name, value, allowed) from None
        if isinstance(value, bool) or not as_float.is_integer():
            raise SpecError(name, value, allowed)
        value = int(as_float)
    if not 0 < value <= INT_MAX:
        raise SpecError(name, value, allowed)
    return value


class Spec:
    """Base of model specs (frozen dataclasses): integer coercion, validation, a canonical dict.

    A subclass declares ``family`` (its registry name) and ``_ints`` (the fields coerced with
    :func:`positive_int`), and may override ``_validate`` for its other checks.
    """

    family: ClassVar[str]
    _ints: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for name in self._ints:
            object.__setattr__(self, name, positive_int(name, getattr(self, name)))
        self._validate()

    def _validate(self) -> None:  # per-family choices
        pass

    def to_dict(self) -> dict[str, Any]:
        """The hyperparameters, plus ``family``."""
        return {"family": self.family, **dataclasses.asdict(self)}

    def replace(self, **changes: Any) -> "Spec":
        return dataclasses.replace(self, **changes)


__all__ = ["Spec", "positive_int"]
