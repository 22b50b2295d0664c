"""The input layer: parsing integers, numbers, switches, durations and byte sizes from the command line and
sweep files; and the output layer's formatters, one per job: :func:`compact` and :func:`si`
(numbers and quantities with SI prefixes), :func:`duration` (seconds as a person reads them) and
:func:`byte_size` / :func:`byte_unit` (binary sizes of memory).

Every parser takes the text (or a YAML value) and the parameter's name, and raises
:class:`~paradnn.errors.SpecError` naming the parameter, the value (truncated) and what is
allowed. Integers are parsed as integers: ``"99999999999999999999999"`` is that integer, never a
rounded float, and ``"1e3"`` is accepted only because it is exactly 1000. Non-finite numbers
(``nan``, ``inf``, ``1e999``) are rejected everywhere.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from paradnn.errors import ParadnnError, SpecError

#: Largest integer any count or size may be: array dimensions and byte counts are int64 in XLA.
INT_MAX = 2**63 - 1

_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_NUMBER = re.compile(r"\s*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*")
# An exponent beyond this is refused before Fraction builds a number with that many digits.
_MAX_EXPONENT = 40


def _exact(text: object) -> tuple[Fraction, str] | None:
    """(exact value, unit suffix) of a decimal literal such as '1.5e3GB'; None if not one."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return Fraction(text), ""
    if isinstance(text, float):
        return (Fraction(text), "") if math.isfinite(text) else None
    if not isinstance(text, str) or len(text) > 100:
        return None
    m = _NUMBER.fullmatch(text)
    if not m:
        return None
    mantissa, _, exponent = m.group(1).lower().partition("e")
    if exponent and abs(int(exponent)) > _MAX_EXPONENT:
        return None
    return Fraction(m.group(1)), m.group(2)


def parse_int(text: object, parameter: str, minimum: int = 1, maximum: int = INT_MAX) -> int:
    """An integer in ``[minimum, maximum]`` from an int or exact text ('4', '1e3'); never lossy."""
    allowed = f"an integer from {minimum} to {maximum}"
    parsed = _exact(text)
    if parsed is None or parsed[1] or parsed[0].denominator != 1:
        raise SpecError(parameter, text, allowed)
    value = int(parsed[0])
    if not minimum <= value <= maximum:
        raise SpecError(parameter, text, allowed)
    return value


def parse_number(text: object, parameter: str, minimum: float = 0.0, maximum: float = 1e300,
                 exclusive_minimum: bool = True, unit: str = "") -> float:
    """A finite number in ``(minimum, maximum]`` (``[minimum, ...]`` if not exclusive)."""
    lo = "(" if exclusive_minimum else "["
    allowed = f"a finite number in {lo}{minimum:g}, {maximum:g}]" + (f" {unit}" if unit else "")
    parsed = _exact(text)
    if parsed is None or parsed[1]:
        raise SpecError(parameter, text, allowed)
    value = float(parsed[0])
    if not (math.isfinite(value) and value <= maximum
            and (value > minimum if exclusive_minimum else value >= minimum)):
        raise SpecError(parameter, text, allowed)
    return value


def positive_env(name: str, default: float, unit: str = "") -> float:
    """The positive, finite number in environment variable ``name``, or ``default`` where it is
    not set; ParadnnError naming the variable, its value and what is allowed otherwise (a
    threshold or budget read from the environment)."""
    import os

    raw = os.environ.get(name)
    if raw is None:
        return default
    parsed = _exact(raw.strip())
    value = float(parsed[0]) if parsed is not None and not parsed[1] else math.nan
    if not math.isfinite(value) or value <= 0:
        raise ParadnnError(f"invalid {name}={raw!r}: allowed a positive number" + (f" of {unit}" if unit else ""))
    return value


def parse_duration(text: object, parameter: str, maximum: float = 366 * 86400.0) -> float:
    """A positive, finite number of seconds, at most ``maximum`` (a year by default)."""
    return parse_number(text, parameter, 0.0, maximum, unit="seconds")


_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def parse_bool(text: object, parameter: str) -> bool:
    """A switch: a bool, or the text true/yes/on/1 or false/no/off/0 (any case). The integers 1
    and 0 are not accepted as YAML values: a sweep file says ``true``."""
    if isinstance(text, bool):
        return text
    if isinstance(text, str) and text.strip().lower() in _TRUE + _FALSE:
        return text.strip().lower() in _TRUE
    raise SpecError(parameter, text, "true or false (also yes/no, on/off, 1/0 as text)")


def parse_bytes(text: object, parameter: str = "memory limit") -> int:
    """'2GB', '512MiB', '1.5e9' or an int -> bytes (decimal kB/MB/GB/TB, binary KiB/MiB/GiB/TiB),
    a whole number from 1 to 2**63-1."""
    allowed = "a size from 1 B to 2**63-1 B such as 2GB, 512MiB or 1000000000"
    parsed = _exact(text)
    if parsed is None or parsed[1].lower() not in _BYTE_UNITS:
        raise SpecError(parameter, text, allowed)
    value = parsed[0] * _BYTE_UNITS[parsed[1].lower()]
    if not 1 <= value <= INT_MAX:
        raise SpecError(parameter, text, allowed)
    return int(value)  # a fraction of a byte rounds down


# -- formatting ----------------------------------------------------------------------------

_SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
#: Binary units of memory sizes, largest first (the units parse_bytes accepts).
BINARY_UNITS: tuple[tuple[str, int], ...] = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                                             ("KiB", 2**10))


def _finite(value: object) -> bool:
    try:
        return value is not None and math.isfinite(value)  # type: ignore[arg-type]
    except TypeError:
        return False


def _significant(v: float, digits: int, zeros: bool = False) -> str:
    """``v`` (non-zero) to ``digits`` significant digits in plain decimal notation (120, not
    1.2e+02); trailing zeros dropped (1.5) unless ``zeros`` (1.50), which keeps the precision
    of the number visible."""
    places = digits - 1 - math.floor(math.log10(abs(v)))
    if places >= 0 and abs(round(v, places)) >= 10.0 ** (digits - places):
        places -= 1  # rounding reached the next power of ten (9.996 -> 10.0): one place fewer
    if places < 0:  # digits left of the point: 123.4 to 2 digits is 120
        v, places = round(v, places), 0
    text = f"{v:.{places}f}"
    if zeros:
        return text
    return text.rstrip("0").rstrip(".") if "." in text else text


def significant(value: float, digits: int = 3) -> str:
    """``value`` (finite, non-zero) to ``digits`` significant digits in plain decimal notation:
    25060 -> ``25060`` at 4 digits, 0.0012345 -> ``0.001235``; no exponent."""
    return _significant(float(value), digits)


def compact(value: float | None, digits: int = 3, zeros: bool = False) -> str:
    """A number in one short format: ``digits`` significant digits with an SI suffix (k, M, G,
    T, P) from 1000 up: 0.423, 510, 3.81k, 12.3M; no exponent from 0.001 up; "" for None, NaN
    and infinities. Figures label every measured value with it (ticks read 1k, 2k, 5k).

    ``zeros`` keeps trailing zeros, so that every value shows exactly ``digits`` significant
    digits (47.9k, 33.7k, 8.19k, 1.00k) and smaller values stay plain decimals (0.000209, not
    2e-04): the format of a table column, where one value must not look more precise than
    its neighbour."""
    if not _finite(value):
        return ""
    v = float(value)  # type: ignore[arg-type]
    a = abs(v)
    # Rounded to `digits` digits, 999.7 reads 1.00e3: it takes the next prefix ("1k").
    edge = 1 - 0.5 * 10.0 ** -digits
    for div, suffix in _SI_PREFIXES:
        if a >= div * edge:
            return _significant(v / div, digits, zeros) + suffix
    if a == 0:
        return "0"
    if a < 0.001 and not zeros:
        return f"{v:.1g}" if a >= 1e-9 else "0"
    return _significant(v, digits, zeros)


def si(value: float | None, unit: str, digits: int = 3, zeros: bool = False) -> str:
    """A quantity with an SI-prefixed unit: 12345678, "FLOP/s" -> ``12.3 MFLOP/s``; 9e11, "B/s"
    -> ``900 GB/s``; "n/a" for None, NaN and infinities. The number is :func:`compact`'s
    (``zeros``: with its trailing zeros, ``900 GB/s`` and ``1.50 GB/s`` alike)."""
    if not _finite(value):
        return "n/a"
    text = compact(value, digits, zeros)
    number = text.rstrip("kMGTP")
    return f"{number} {text[len(number):]}{unit}".rstrip()


def duration(seconds: float | None) -> str:
    """Seconds as a person reads them, to the second below an hour: ``45s``, ``12m05s``,
    ``1h02m``, ``3d 04h``; "unknown" for None, NaN and infinities. Progress lines, plans and
    the report's time estimates all use it, so one estimate reads the same everywhere."""
    if not _finite(seconds):
        return "unknown"
    total = int(round(float(seconds)))  # type: ignore[arg-type]
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def precise_duration(seconds: float | None, digits: int = 3, zeros: bool = False) -> str:
    """A measured time to ``digits`` significant digits, in the unit that reads best: ``20.5 µs``
    below a millisecond, ``2.51 ms`` below a second, ``25.1 s`` below a minute, then
    :func:`duration`'s ``12m05s``; never an exponent ("2.506e+04 ms" reads ``25.1 s``).
    "unknown" for None, NaN and infinities. Step times and their intervals use it; ``zeros``
    keeps trailing zeros (``96.0 µs`` beside ``69.4 µs``), as a table column shows them."""
    if not _finite(seconds):
        return "unknown"
    v = float(seconds)  # type: ignore[arg-type]
    if v == 0:
        return "0 s"
    if v >= 59.5:
        return duration(v)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(v) >= scale * (1 - 0.5 * 10.0 ** -digits) or scale == 1e-9:
            return f"{_significant(v / scale, digits, zeros)} {unit}"
    return f"{v} s"  # unreachable: the loop ends with ns


def byte_unit(largest: float) -> tuple[str, int]:
    """``(name, bytes per unit)`` of the binary unit for sizes up to ``largest`` bytes: the
    largest unit that ``largest`` reaches, so 1.5 MiB reads 1.5 MiB, not 0.0015 GiB; ``("B", 1)``
    below 1 KiB. One axis or table uses one unit for all its values."""
    return next(((n, s) for n, s in BINARY_UNITS if largest >= s), ("B", 1))


def byte_size(value: float | None, digits: int = 3) -> str:
    """A memory size in binary units: 1572864 -> ``1.5 MiB``, 512 -> ``512 B``; "n/a" for
    None, NaN and infinities."""
    if not _finite(value):
        return "n/a"
    name, scale = byte_unit(abs(float(value)))  # type: ignore[arg-type]
    return f"{float(value) / scale:.{digits}g} {name}"  # type: ignore[arg-type]
