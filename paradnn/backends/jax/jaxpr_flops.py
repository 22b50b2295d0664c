"""Analytic matmul/convolution FLOPs of a function, read from its jaxpr.

Counts ``dot_general`` and ``conv_general_dilated`` (2 FLOPs per multiply-add; of a convolution
only the kernel taps on real input elements, not on padding) and multiplies
the bodies of ``scan`` by their length (``while`` bodies count once). Dead code is not counted;
no other XLA optimization is involved, so this is the model's work as written.

Only public JAX API is used (``jax.make_jaxpr`` and ``jax.extend.core``), so the count works
unchanged on jax 0.10 through 0.12: the dead-code pass is this module's own, not JAX's internal
``dce_jaxpr``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
from jax.extend import core as jcore

from paradnn.convolution import valid_taps


def _dot_flops(eqn) -> float:
    lhs, rhs = (v.aval for v in eqn.invars[:2])
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    contract = math.prod(lhs.shape[d] for d in lc)
    out = math.prod(eqn.outvars[0].aval.shape)
    return 2.0 * out * contract


def _conv_flops(eqn) -> float:
    """2 x batch x output features x input features per group x the valid (output position,
    kernel tap) pairs of each spatial dimension (:func:`paradnn.convolution.valid_taps`): taps on
    padding and on the holes of a dilated input (a strided convolution's input gradient) multiply
    zeros and count nothing, as in XLA's cost analysis and the cnn family's closed form. So a
    training step counts each multiply of the forward convolution three times: forward, input
    gradient, weight gradient."""
    lhs, rhs, out = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape, eqn.outvars[0].aval.shape
    dn = eqn.params["dimension_numbers"]
    # Specs: (batch or out-feature dim, feature or in-feature dim, spatial dims...).
    lhs_spec, rhs_spec, out_spec = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    spatial = len(rhs_spec) - 2
    strides = eqn.params["window_strides"]
    lhs_dilation = eqn.params.get("lhs_dilation") or (1,) * spatial
    rhs_dilation = eqn.params.get("rhs_dilation") or (1,) * spatial
    taps = 1
    for d in range(spatial):
        taps *= valid_taps(lhs[lhs_spec[2 + d]], out[out_spec[2 + d]], rhs[rhs_spec[2 + d]], strides[d],
                           eqn.params["padding"][d][0], lhs_dilation[d], rhs_dilation[d])
    # rhs's in-feature size is already per feature group; with batch groups (a grouped weight
    # gradient) each output feature reads one group of the batch, which out's batch size is.
    return 2.0 * out[out_spec[0]] * out[out_spec[1]] * rhs[rhs_spec[1]] * taps


def _is_var(v) -> bool:
    # Literals (constants inlined into an equation) carry no data flow.
    return isinstance(v, jcore.Var) and not isinstance(v, jcore.Literal)


def _sub(param) -> jcore.Jaxpr:
    return param.jaxpr if isinstance(param, jcore.ClosedJaxpr) else param


def _live_flops(jaxpr, used_out: list[bool]) -> tuple[float, list[bool]]:
    """FLOPs of the equations of ``jaxpr`` that the used outputs depend on, and which inputs
    they read.

    A backwards liveness walk: an equation is kept when one of its outputs is live or when it
    has effects (JAX keeps those too); its variable inputs then become live. Calls whose body
    maps inputs and outputs one to one (jit, remat, custom_jvp/custom_vjp calls) and ``scan``
    are walked with the caller's liveness, so a dead output of a jitted or scanned function is
    not work either.
    """
    live = {v for v, u in zip(jaxpr.outvars, used_out) if u and _is_var(v)}
    total = 0.0
    for eqn in reversed(jaxpr.eqns):
        outs = [_is_var(v) and v in live for v in eqn.outvars]
        if not any(outs) and not eqn.effects:
            continue
        flops, used_in = _eqn_flops(eqn, outs if not eqn.effects else [True] * len(outs))
        total += flops
        live.update(v for v, u in zip(eqn.invars, used_in) if u and _is_var(v))
    return total, [v in live for v in jaxpr.invars]


def _eqn_flops(eqn, outs: list[bool]) -> tuple[float, list[bool]]:
    """FLOPs of one live equation given which of its outputs are live; which inputs it reads."""
    name = eqn.primitive.name
    every_input = [True] * len(eqn.invars)
    if name == "dot_general":
        return _dot_flops(eqn), every_input
    if name == "conv_general_dilated":
        return _conv_flops(eqn), every_input
    if name == "scan":
        return _scan_flops(eqn, outs)
    subs = [_sub(j) for j in jcore.jaxprs_in_params(eqn.params)]
    if len(subs) == 1 and len(subs[0].invars) == len(eqn.invars) and len(subs[0].outvars) == len(eqn.outvars):
        return _live_flops(subs[0], outs)  # a call: body inputs/outputs are the equation's
    # Anything else (while, cond, unknown higher-order primitives): every body counts in full,
    # once; a while body therefore counts once whatever its trip count.
    return sum(_live_flops(j, [True] * len(j.outvars))[0] for j in subs), every_input


def _scan_flops(eqn, outs: list[bool]) -> tuple[float, list[bool]]:
    """A scan body times its length. Body inputs are consts, carry, xs; outputs carry, ys. A
    carry is live when its final value is used or when a live part of the body reads it in the
    next iteration: iterate to the fixed point."""
    body = eqn.params["jaxpr"].jaxpr
    n_consts, n_carry = _scan_split(eqn.params)
    carry, ys = list(outs[:n_carry]), list(outs[n_carry:])
    while True:
        flops, used_in = _live_flops(body, carry + ys)
        carry_in = used_in[n_consts:n_consts + n_carry]
        grown = [a or b for a, b in zip(carry, carry_in)]
        if grown == carry:
            break
        carry = grown
    # The carry inputs of the equation are live when the body reads them or they are passed out.
    used_in = used_in[:n_consts] + carry + used_in[n_consts + n_carry:]
    return eqn.params["length"] * flops, used_in


def _scan_split(params: dict[str, Any]) -> tuple[int, int]:
    """(number of consts, number of carries) of a scan equation. jax 0.10 gives them as
    ``num_consts``/``num_carry``; jax 0.11 and 0.12 replaced those with ``ft_in``, a flat tree of
    (consts, carry, xs) whose parts have a length. Both forms are tested: tests/test_jaxpr_flops.py
    passes under jax 0.10.2, 0.11.2 and 0.12.0.1."""
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    if "ft_in" in params:
        consts, carry, _ = params["ft_in"].unpack()
        return len(consts), len(carry)
    raise NotImplementedError(f"scan parameters of jax {jax.__version__} are not known to paradnn: "
                              f"{sorted(params)}; supported: jax 0.10 to 0.12")


def count_matmul_flops(fn: Callable, *args: Any) -> float:
    """FLOPs (2 per multiply-add) of matmuls and convolutions in ``fn(*args)``; ``args`` may be
    ``jax.ShapeDtypeStruct`` trees. A ``while`` loop body (fori_loop with dynamic bounds) is
    counted once."""
    closed = jax.make_jaxpr(fn)(*args)
    # Dead code is not work: XLA drops it (e.g. the data gradient a custom VJP computes for the
    # first layer), so the count must too.
    flops, _ = _live_flops(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
    return flops
