"""Ranges of hyperparameter values as the ParaDnn paper's Table 2 writes them ("x2" and "+N"
steps), for families to state their ranges and for grids and sweep files to expand axes.

>>> geometric(4, 128, 2)
[4, 8, 16, 32, 64, 128]
>>> linear(200, 1000, 200)
[200, 400, 600, 800, 1000]
"""

from __future__ import annotations

from paradnn.errors import SpecError

#: Largest grid a sweep file or ``paradnn.grid`` expands unless ``max_configs`` is raised
#: (configs), and so the most values one range may list.
MAX_CONFIGS = 1_000_000


def geometric(start: int, stop: int, factor: int) -> list[int]:
    """``start, start*factor, ...`` up to and including ``stop`` (Table 2's "x2" steps)."""
    if not (isinstance(factor, int) and factor >= 2):
        raise SpecError("factor", factor, "an integer >= 2")
    if not (isinstance(start, int) and start > 0 and isinstance(stop, int) and stop >= start):
        raise SpecError("range", (start, stop), "positive integers with start <= stop")
    out, v = [], start
    while v <= stop:
        out.append(v)
        v *= factor
    return out


def linear(start: int, stop: int, step: int) -> list[int]:
    """``start, start+step, ...`` up to and including ``stop`` (Table 2's "+N" steps)."""
    values = linear_range(start, stop, step)
    if len(values) > MAX_CONFIGS:  # len of a range costs nothing; the list would not
        raise SpecError("range", (start, stop, step), f"at most {MAX_CONFIGS} values")
    return list(values)


def linear_range(start: int, stop: int, step: int) -> range:
    """:func:`linear` as a lazy range (sweep files: a huge range is counted, never listed)."""
    if isinstance(step, bool) or not (isinstance(step, int) and step > 0):
        raise SpecError("step", step, "a positive integer")
    if isinstance(start, bool) or isinstance(stop, bool) or not (
            isinstance(start, int) and isinstance(stop, int) and stop >= start):
        raise SpecError("range", (start, stop), "integers with start <= stop")
    return range(start, stop + 1, step)


__all__ = ["MAX_CONFIGS", "geometric", "linear", "linear_range"]
