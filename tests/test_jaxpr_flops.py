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


def _xla_flops(f, *args) -> float:
    """XLA:CPU's count of ``f``, on any host: on a GPU, XLA's cost analysis gives cuDNN's
    convolution calls -1 FLOPs (an H200, jax 0.11.2), which is what these tests are not about."""
    with jax.default_device(jax.devices("cpu")[0]):
        cost = jax.jit(f).lower(*args).compile().cost_analysis()
    return (cost[0] if isinstance(cost, (list, tuple)) else cost)["flops"]


@pytest.mark.parametrize("side, kernel, stride, padding, groups, rhs_dilation", [
    (7, 3, 1, "SAME", 1, 1),            # border taps on padding
    (1, 3, 1, "SAME", 1, 1),            # a 3x3 on a 1x1 map: 1 tap of 9 is real
    (8, 3, 2, "SAME", 1, 1),            # strided: its input gradient runs over a dilated input
    (9, 5, 2, ((1, 3), (2, 0)), 1, 1),  # uneven explicit padding
    (5, 3, 1, "SAME", 1, 2),            # atrous kernel
    (8, 3, 2, "SAME", 4, 1),            # depthwise (4 groups of 1 channel)
])
def test_a_convolution_counts_its_real_taps_as_xla_does(side, kernel, stride, padding, groups, rhs_dilation):
    """Forward, input gradient and weight gradient each make every multiply of the forward once,
    and XLA's cost analysis agrees on each program: taps on padding and on the holes of a
    dilated input count nothing. (XLA:CPU computes the depthwise weight gradient as a dense
    convolution, groups times the work: that is what flops_mismatch reports, not a count.)"""
    x = jax.ShapeDtypeStruct((2, side, side, 4), jnp.float32)
    w = jax.ShapeDtypeStruct((kernel, kernel, 4 // groups, 8), jnp.float32)

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (stride, stride), padding, rhs_dilation=(rhs_dilation,) * 2,
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)

    def grad(argnums):
        return lambda x, w: jax.grad(lambda x, w: conv(x, w).sum(), argnums)(x, w)

    forward = count_matmul_flops(conv, x, w)
    assert forward == _xla_flops(conv, x, w)
    assert count_matmul_flops(grad(0), x, w) == forward == _xla_flops(grad(0), x, w)
    assert count_matmul_flops(grad(1), x, w) == forward
    if groups == 1:
        assert _xla_flops(grad(1), x, w) == forward
    assert count_matmul_flops(grad((0, 1)), x, w) == 2 * forward
    if (side, kernel) == (1, 3):
        assert forward == 2.0 * 2 * 8 * 4  # batch x out features x in features, one tap


def test_a_models_jaxpr_count_is_kept_and_a_warm_run_does_not_trace_its_step_again(tmp_path, monkeypatch):
    """Models without a closed form (the zoo's) get their analytic count from a walk over the
    step's jaxpr, which traces the whole step: the count is kept in the analyses folder, so a
    new process with the same folder reads it instead of tracing again."""
    from paradnn import Real, Workload
    from paradnn.backends.jax import analyses, costs
    from paradnn.backends.jax import jaxpr_flops

    walks = []
    real_count = jaxpr_flops.count_matmul_flops
    monkeypatch.setattr(jaxpr_flops, "count_matmul_flops", lambda *a: walks.append(1) or real_count(*a))
    work = Workload(Real("lstm_lm", length=4), batch=2)
    restore = analyses.configure(tmp_path)
    try:
        first = costs.model_flops_per_step(work)
        analyses._memory.clear()  # as in a new process: from the folder
        again = costs.model_flops_per_step(work)
    finally:
        restore()
        analyses._memory.clear()
    assert first == again > 0 and walks == [1]
    assert list((tmp_path / "analyses").glob(f"model_flops-{work.key}-*"))
