"""The jaxpr FLOP counter's own dead-code pass (public JAX API only, jax 0.10-0.12)."""

import jax
import jax.numpy as jnp
import pytest

from paradnn.backends.jax.jaxpr_flops import count_matmul_flops

A = jax.ShapeDtypeStruct((8, 16), jnp.float32)
B = jax.ShapeDtypeStruct((16, 32), jnp.float32)
MATMUL = 2.0 * 8 * 16 * 32  # one (8,16)@(16,32) product


def test_a_matmul_counts_two_flops_per_multiply_add():
    assert count_matmul_flops(lambda a, b: a @ b, A, B) == MATMUL


def test_a_matmul_whose_result_is_unused_is_not_counted():
    def f(a, b):
        _ = (a @ b) * 2.0  # dead
        return a.sum() + b.sum()

    assert count_matmul_flops(f, A, B) == 0.0


def test_dead_output_of_a_jitted_call_is_not_counted():
    @jax.jit
    def both(a, b):
        return a @ b, (a @ b) @ b.T  # the second product is only needed for the dead output

    assert count_matmul_flops(lambda a, b: both(a, b)[0], A, B) == MATMUL
    assert count_matmul_flops(lambda a, b: both(a, b)[1], A, B) == MATMUL + 2.0 * 8 * 32 * 16


def test_scan_body_counts_times_length_and_dead_ys_drop_out():
    def f(a, b, keep_ys):
        def body(carry, _):
            y = carry @ b  # (8, 32): read only by the ys output
            return carry * 1.5, y

        carry, ys = jax.lax.scan(body, a, None, length=5)
        return ys.sum() if keep_ys else carry.sum()

    assert count_matmul_flops(lambda a, b: f(a, b, True), A, B) == 5 * MATMUL
    assert count_matmul_flops(lambda a, b: f(a, b, False), A, B) == 0.0


def test_scan_carry_that_feeds_a_live_carry_is_live():
    # The matmul feeds carry 0, which is dead at the end but read by carry 1 in the next
    # iteration; carry 1 is returned, so the matmul is live work in every iteration.
    sq = jax.ShapeDtypeStruct((16, 16), jnp.float32)

    def f(x, w):
        def body(c, _):
            c0, c1 = c
            return (c0 @ w, c1 + c0), None

        (c0, c1), _ = jax.lax.scan(body, (x, x), None, length=3)
        return c1

    assert count_matmul_flops(f, sq, sq) == pytest.approx(3 * 2.0 * 16**3)


def test_gradient_counts_forward_and_both_backward_products():
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w))

    # d/dw only: the data gradient x_bar = y_bar @ w.T is dead and must not count.
    assert count_matmul_flops(jax.grad(loss), B, A) == 2 * MATMUL
    assert count_matmul_flops(jax.grad(loss, argnums=(0, 1)), B, A) == 3 * MATMUL
