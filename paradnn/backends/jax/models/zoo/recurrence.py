"""A recurrent loop over precomputed input gates whose hidden kernel's gradient is one matmul.

The zoo's LSTM computes its inputs' projection ``gx`` (bias included) for every time step before
the loop, as cuDNN does; its time step is ``gh = h @ w_h`` and an element-wise ``update(gx_t, gh,
state, h) -> (state', h')``. Differentiated by JAX, the scan's transpose accumulates ``w_h``'s
gradient inside the loop: per time step one matmul that contracts only the batch (20 for
``lstm_lm``) and an add into a weight-sized buffer (``[1500, 6000]`` there). The gradient of
:func:`hidden_recurrence` keeps in the loop only what has to be there (the update's pullback and
``dgh @ w_h.T``) and computes ``w_h``'s gradient after it as one ``[H, T*B] @ [T*B, G*H]``
matmul, as cuDNN does. Same math and FLOPs; float rounding differs (summation order). The
generated RNN's layers (one kernel over ``[x, h]``) have their own form of this
(``paradnn.backends.jax.models.rnn``).

An update whose element-wise part has parameters of its own (the zoo GRU's hidden bias, which
its reset gate multiplies) does not fit: the GRU keeps JAX's gradient.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp

#: ``(gx_t [B, G*H], gh [B, G*H], state, h [B, H]) -> (state', h')``: element-wise, no parameters.
Update = Callable[[jax.Array, jax.Array, Any, jax.Array], tuple[Any, jax.Array]]
#: ``batch -> (state, h)`` at the first time step (zeros).
Init = Callable[[int], tuple[Any, jax.Array]]


def _forward(update: Update, init: Init, w_h: jax.Array, gx: jax.Array, unroll: int | bool):
    """Outputs ``[T, B, H]`` and, per time step, what the gradient needs (gh, state, h before it)."""

    def step(carry, g_x):
        state, h = carry
        gh = h.astype(w_h.dtype) @ w_h
        state_next, h_next = update(g_x, gh, state, h)
        return (state_next, h_next), (h_next, (gh, state, h))

    _, (hs, saved) = jax.lax.scan(step, init(gx.shape[1]), gx, unroll=unroll)
    return hs, saved


@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 4))
def hidden_recurrence(update: Update, init: Init, w_h: jax.Array, gx: jax.Array, unroll: int | bool) -> jax.Array:
    """``h_t`` of every time step, ``[T, B, H]``, of the loop ``gh = h @ w_h``; ``(state, h) =
    update(gx[t], gh, state, h)`` over ``gx`` ``[T, B, G*H]`` (time-major) from ``init(B)``.
    ``w_h`` is ``[H, G*H]`` in the matmul's dtype; ``h`` is cast to it. ``unroll`` as in
    ``lax.scan``. Differentiable in ``w_h`` and ``gx``."""
    return _forward(update, init, w_h, gx, unroll)[0]


def _fwd(update, init, w_h, gx, unroll):
    hs, saved = _forward(update, init, w_h, gx, unroll)
    return hs, (w_h, gx, saved)


def _bwd(update, init, unroll, residuals, dhs):
    w_h, gx, (ghs, states, hs_prev) = residuals

    def step(carry, inputs):
        dstate, dh = carry
        dy, g_x, gh, state, h = inputs
        _, pullback = jax.vjp(update, g_x, gh, state, h)  # recomputes the element-wise update: cheap
        dgx, dgh, dstate_prev, dh_prev = pullback((dstate, dh + dy))
        return (dstate_prev, dh_prev + (dgh @ w_h.T).astype(dh_prev.dtype)), (dgx, dgh)

    zeros = jax.tree.map(jnp.zeros_like, init(gx.shape[1]))
    _, (dgx, dghs) = jax.lax.scan(step, zeros, (dhs, gx, ghs, states, hs_prev), reverse=True, unroll=unroll)
    steps_batch = dghs.shape[0] * dghs.shape[1]
    dw_h = hs_prev.astype(w_h.dtype).reshape(steps_batch, -1).T @ dghs.reshape(steps_batch, -1)
    return dw_h, dgx


hidden_recurrence.defvjp(_fwd, _bwd)
