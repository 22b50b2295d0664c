"""The one count of a convolution's multiply-adds that every FLOP count shares."""

import itertools

from paradnn.convolution import valid_taps


def _brute(size, out, kernel, stride, pad_lo, lhs_dilation, rhs_dilation):
    last = (size - 1) * lhs_dilation
    return sum(1 for o in range(out) for t in range(kernel)
               if 0 <= (p := o * stride + t * rhs_dilation - pad_lo) <= last and p % lhs_dilation == 0)


def test_closed_form_equals_the_loop_over_every_output_and_tap():
    # Negative low padding crops; lhs dilation (the input gradient of a strided convolution)
    # leaves holes whose taps count nothing, also where stride and dilation share a factor.
    for args in itertools.product(range(1, 9), range(1, 9), range(1, 6), (1, 2, 3), (-2, 0, 1, 3, 5),
                                  (1, 2, 3, 4), (1, 2)):
        assert valid_taps(*args) == _brute(*args), args


def test_padding_taps_are_not_counted():
    # A 3x3 SAME convolution on a 1x1 map: one of its 9 taps reads the input; on 7x7, 18% of
    # the taps (the border's) read padding.
    assert valid_taps(1, 1, 3, 1, 1) == 1
    assert valid_taps(7, 7, 3, 1, 1) == 7 * 3 - 2
    assert valid_taps(10**9, 10**9, 3, 1, 1) == 3 * 10**9 - 2  # O(kernel), whatever the size
    assert valid_taps(0, 4, 3) == valid_taps(4, 0, 3) == 0
