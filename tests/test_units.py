"""The output formatters of paradnn.units: one SI formatter, one duration formatter, one byte
formatter (the parsers are tested with the specs, tests/test_specs.py)."""

import math

import numpy as np
import pytest

from paradnn import units


def test_compact_is_one_number_format_without_exponents():
    values = (510, 3810, 12_345_678, 0.4234, 1.0, 0.0, 999.7, -2500, np.float64(2.5e12))
    assert [units.compact(v) for v in values] == \
        ["510", "3.81k", "12.3M", "0.423", "1", "0", "1k", "-2.5k", "2.5T"]
    # Not a number: nothing to print (a figure leaves the label out).
    assert [units.compact(v) for v in (None, math.nan, math.inf)] == ["", "", ""]
    assert units.compact(123_456, digits=2) == "120k"


def test_si_puts_the_prefix_on_the_unit():
    assert units.si(1.2e14, "FLOP/s") == "120 TFLOP/s"
    assert units.si(9e11, "B/s") == "900 GB/s"
    assert units.si(12_345_678, "FLOP/s") == "12.3 MFLOP/s"
    assert units.si(12_345_678, "FLOP/s", digits=4) == "12.35 MFLOP/s"
    assert units.si(5, "") == "5"
    # Just below a prefix, the rounded number takes the prefix: never "1e+03 B".
    assert units.si(999.7, "B") == "1 kB"
    assert units.si(None, "B") == units.si(math.nan, "B") == "n/a"


@pytest.mark.parametrize("seconds,text", [
    (0, "0s"), (45, "45s"), (59.6, "1m00s"), (725, "12m05s"), (3599.4, "59m59s"),
    (3720, "1h02m"), (86_399, "23h59m"), (90_000, "1d 01h"), (None, "unknown"),
    (math.nan, "unknown"), (math.inf, "unknown"),
])
def test_duration_reads_as_a_person_reads_it(seconds, text):
    assert units.duration(seconds) == text


def test_byte_size_and_unit_are_binary():
    assert units.byte_size(1_572_864) == "1.5 MiB"
    assert units.byte_size(512) == "512 B"
    assert units.byte_size(3 * 2**30) == "3 GiB"
    assert units.byte_size(None) == "n/a"
    assert units.byte_unit(1.5 * 2**20) == ("MiB", 2**20)
    assert units.byte_unit(100) == ("B", 1)
    # The units the formatter prints are the units the parser reads.
    for name, scale in units.BINARY_UNITS:
        assert units.parse_bytes(f"2{name}") == 2 * scale


@pytest.mark.parametrize("seconds, text", [(25.06, "25.1 s"), (2.0449e-5, "20.4 µs"), (0.00214, "2.14 ms"),
                                           (0.9996, "1 s"), (61, "1m01s"), (0, "0 s"), (None, "unknown")])
def test_precise_duration_never_prints_an_exponent(seconds, text):
    from paradnn.units import precise_duration

    assert precise_duration(seconds) == text


def test_zeros_keep_every_value_at_the_same_precision():
    """A table column shows exactly 3 significant digits in every cell: 47.9k beside 8.19k,
    1.00k, 0.500, never 33.72k beside 47.9k or an exponent for small values."""
    values = (47_900, 33_720, 8_189, 999.7, 9.996, 0.5, 0.0159, 0.000209, 1.009e9, 7.567e8, -2500)
    assert [units.compact(v, 3, zeros=True) for v in values] == \
        ["47.9k", "33.7k", "8.19k", "1.00k", "10.0", "0.500", "0.0159", "0.000209", "1.01G", "757M", "-2.50k"]
    assert units.si(1.5e9, "B/s", zeros=True) == "1.50 GB/s"
    assert units.precise_duration(9.6e-5, zeros=True) == "96.0 µs"
    assert units.precise_duration(0.9996, zeros=True) == "1.00 s"
    # Without zeros (figure ticks), the short forms stay.
    assert units.compact(1000) == "1k" and units.precise_duration(0.9996) == "1 s"


def test_report_table_column_has_one_number_format():
    from paradnn.report.cells import table_column

    # An int beside a float once printed 756700000 beside 1.009e+09: one format per column now.
    assert table_column([756_700_000, 1.009e9, None]) == ["757M", "1.01G", ""]
    # Whole numbers below a million stay whole (counts, batch, bytes).
    assert table_column([2, 8.0, 87_516]) == ["2", "8", "87516"]
    assert table_column([13_868, 25_000_000]) == ["13.9k", "25.0M"]
    assert table_column([0.01593, 0.0261, 0.5, float("nan"), float("inf")]) == \
        ["0.0159", "0.0261", "0.500", "", ""]
    assert table_column([5.06e-6, 1.42e-3, 75.0], seconds=True) == ["5.06 µs", "1.42 ms", "1m15s"]
    # Text (and bools) stay as they are.
    assert table_column(["memory", True, None]) == ["memory", "True", ""]
