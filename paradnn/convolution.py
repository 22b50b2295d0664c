"""The multiply-adds of a convolution: kernel taps that land on real input elements.

One place for the fact that every FLOP count of paradnn shares: the analytic counts (the cnn
family's closed form, the jaxpr walk that counts zoo models), torch's counter and the op-level
profile's reading of compiled convolutions. A tap that lands on padding or on a hole of a
dilated input (the input gradient of a strided convolution is a convolution over the output
gradient dilated with zeros) multiplies a zero that the program never has to read; XLA's cost
analysis leaves those taps out, and so do we. Published GMAC figures of CNNs (ResNet-50's 4.1)
count every tap, padding included: at their own image sizes that is a few percent more
(docs/models.md, "FLOP counts").

No paradnn imports: the families, the backends and the profile all read it.
"""

from __future__ import annotations

import math


def valid_taps(size: int, out: int, kernel: int, stride: int = 1, pad_lo: int = 0,
               lhs_dilation: int = 1, rhs_dilation: int = 1) -> int:
    """Pairs (output position, kernel tap) of one spatial dimension whose input position is a real
    element: inside the input (not padding) and, for a dilated input, not one of its holes.

    ``size`` input elements (before ``lhs_dilation``), ``out`` output positions, ``kernel`` taps
    (before ``rhs_dilation``), ``stride``, ``pad_lo`` (the low padding; negative crops). Output
    ``o`` and tap ``t`` read the dilated input at ``p = o * stride + t * rhs_dilation - pad_lo``,
    a real element when ``0 <= p <= (size - 1) * lhs_dilation`` and ``p % lhs_dilation == 0``.
    Counted per tap in closed form (O(kernel), whatever ``size``): the outputs of one tap that
    hit a real element are an arithmetic progression. A convolution's multiply-adds are batch x
    output features x input features per group x the product of this count over its dimensions.
    """
    if min(size, out, kernel, stride, lhs_dilation, rhs_dilation) < 1:
        return 0
    last = (size - 1) * lhs_dilation  # the last real position of the dilated input
    # o * stride must be = c (mod lhs_dilation): solvable iff gcd divides c; then o runs over one
    # residue class modulo period = lhs_dilation / gcd.
    g = math.gcd(stride, lhs_dilation)
    period = lhs_dilation // g
    inverse = pow(stride // g, -1, period) if period > 1 else 0
    total = 0
    for t in range(kernel):
        shift = pad_lo - t * rhs_dilation  # p = o * stride - shift
        c = shift % lhs_dilation
        if c % g:
            continue
        first = max(0, -(-shift // stride))  # smallest o with p >= 0
        final = min(out - 1, (last + shift) // stride)  # largest o with p <= last
        if final < first:
            continue
        residue = (c // g) * inverse % period if period > 1 else 0
        total += (final - residue) // period - (first - 1 - residue) // period
    return total
