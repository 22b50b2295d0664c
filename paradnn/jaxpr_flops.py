"""Analytic matmul/convolution FLOPs of a function, read from its jaxpr.

Counts ``dot_general`` and ``conv_general_dilated`` (2 FLOPs per multiply-add) and multiplies
the bodies of ``scan`` by their length (``while`` bodies count once). Dead code is removed
first; no other XLA optimization is involved, so this is the model's work as written.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
from jax.extend import core as jcore


def _dot_flops(eqn) -> float:
    lhs, rhs = (v.aval for v in eqn.invars[:2])
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    contract = math.prod(lhs.shape[d] for d in lc)
    out = math.prod(eqn.outvars[0].aval.shape)
    return 2.0 * out * contract


def _conv_flops(eqn) -> float:
    lhs, rhs = (v.aval for v in eqn.invars[:2])
    dn = eqn.params["dimension_numbers"]
    out = math.prod(eqn.outvars[0].aval.shape)
    # rhs spec: (out feature dim, in feature dim, spatial...)
    rhs_spec = dn.rhs_spec
    in_features = rhs.shape[rhs_spec[1]]
    kernel = math.prod(rhs.shape[d] for d in rhs_spec[2:])
    # in_features is already per feature group. An input gradient of a strided conv is a conv
    # over the input dilated with zeros (lhs_dilation): only 1 in prod(dilation) taps is real.
    dilation = math.prod(eqn.params.get("lhs_dilation") or (1,))
    return 2.0 * out * in_features * kernel / dilation


def _jaxpr_flops(jaxpr) -> float:
    total = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            total += _dot_flops(eqn)
        elif name == "conv_general_dilated":
            total += _conv_flops(eqn)
        elif name == "scan":
            total += eqn.params["length"] * _jaxpr_flops(eqn.params["jaxpr"].jaxpr)
        else:
            for sub in jcore.jaxprs_in_params(eqn.params):
                total += _jaxpr_flops(sub)
    return total


def count_matmul_flops(fn: Callable, *args: Any) -> float:
    """FLOPs (2 per multiply-add) of matmuls and convolutions in ``fn(*args)``; ``args`` may be
    ``jax.ShapeDtypeStruct`` trees. A ``while`` loop body (fori_loop with dynamic bounds) is
    counted once."""
    closed = jax.make_jaxpr(fn)(*args)
    # Dead code is not work: XLA drops it (e.g. the data gradient a custom VJP computes for the
    # first layer), so the count must too. dce_jaxpr is JAX-internal; jax is pinned < 0.11.
    from jax._src.interpreters import partial_eval as pe

    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
    return _jaxpr_flops(jaxpr)
