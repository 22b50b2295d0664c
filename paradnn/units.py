"""Parsing and printing quantities with units."""

from __future__ import annotations

import re

from paradnn.errors import SpecError

_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str | int, parameter: str = "memory limit") -> int:
    """'2GB', '512MiB', '1e9' or an int -> bytes (decimal kB/MB/GB, binary KiB/MiB/GiB)."""
    if isinstance(text, int) and not isinstance(text, bool) and text > 0:
        return text
    m = None if isinstance(text, (bool, int)) else re.fullmatch(
        r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _BYTE_UNITS or float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()] < 1:
        raise SpecError(parameter, text, "a positive size such as 2GB, 512MiB or 1000000000")
    return int(float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()])


def si(value: float | None, unit: str, digits: int = 3) -> str:
    """12345678 'FLOP/s' -> '12.3 MFLOP/s'."""
    if value is None:
        return "n/a"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}".rstrip()
