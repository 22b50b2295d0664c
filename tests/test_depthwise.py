"""The depthwise convolution whose weight gradient a CPU takes from the useful taps
(paradnn/backends/jax/models/depthwise.py): the same values as JAX's own convolution, the
useful FLOPs executed on a CPU, the same jaxpr count, and JAX's own gradient on other platforms."""

import re

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from paradnn.backends.jax.jaxpr_flops import count_matmul_flops
from paradnn.backends.jax.models import depthwise as D

NHWC = ("NHWC", "HWIO", "NHWC")
C = D.MIN_CHANNELS


def _grad(conv, stride, padding, channels):
    def loss(x, w):
        y = conv(x, w, (stride, stride), padding, dimension_numbers=NHWC, feature_group_count=channels)
        return jnp.sum(jnp.sin(y))  # a gradient that differs at every output position
    return jax.jit(jax.grad(loss, argnums=(0, 1)))


def _inputs(side, channels, dtype=jnp.float32):
    kx, kw = jax.random.split(jax.random.key(side))
    return (jax.random.normal(kx, (2, side, side, channels), dtype),
            jax.random.normal(kw, (3, 3, 1, channels), dtype))


def _flops(compiled):
    cost = compiled.cost_analysis()
    return (cost[0] if isinstance(cost, (list, tuple)) else cost)["flops"]


@pytest.mark.parametrize("side,stride,padding", [
    (9, 1, "SAME"), (10, 2, "SAME"), (9, 2, "SAME"), (7, 1, ((0, 2), (1, 0))), (8, 1, "VALID")])
def test_gradients_equal_jax_and_a_cpu_executes_the_useful_flops(side, stride, padding):
    x, w = _inputs(side, C)
    ours, jax_own = _grad(D.conv_general_dilated, stride, padding, C), _grad(lax.conv_general_dilated, stride, padding, C)
    for a, b in zip(ours(x, w), jax_own(x, w)):
        assert a.shape == b.shape
        assert float(jnp.abs(a - b).max()) <= 1e-5 * float(jnp.abs(b).max())
    # The jaxpr count (the analytic one) is unchanged: the traced program keeps JAX's own
    # weight gradient as the other platforms' branch.
    assert count_matmul_flops(ours, x, w) == count_matmul_flops(jax_own, x, w)
    # XLA executes C x the weight gradient's useful multiply-adds with JAX's own; with ours the
    # step's FLOPs are the three convolutions' useful work plus the taps read on padding and
    # the element-wise work (sin, cos), within 10% of the analytic count (a sum of n products
    # is n - 1 additions to XLA: one fewer per tap and channel, so 1% below it at most).
    analytic = count_matmul_flops(ours, x, w)
    assert _flops(jax_own.lower(x, w).compile()) > 10 * analytic
    assert 0.99 * analytic <= _flops(ours.lower(x, w).compile()) <= 1.1 * analytic + 4 * x.size


def test_the_taps_helper_is_the_weight_gradient_of_a_strided_unevenly_padded_convolution():
    x, _ = _inputs(8, C)
    w = jnp.zeros((3, 3, 1, C))
    pads = ((0, 1), (2, 0))

    def conv(w):
        return lax.conv_general_dilated(x, w, (2, 2), pads, dimension_numbers=NHWC, feature_group_count=C)

    dy = jax.random.normal(jax.random.key(1), conv(w).shape)
    reference = jax.vjp(conv, w)[1](dy)[0]
    grad = D.weight_grad_from_taps(x, dy, (3, 3), (2, 2), pads)
    assert grad.shape == reference.shape == (3, 3, 1, C)
    assert float(jnp.abs(grad - reference).max()) <= 1e-5 * float(jnp.abs(reference).max())


def test_bfloat16_accumulates_in_float32():
    x, w = _inputs(9, C, jnp.bfloat16)
    ours, jax_own = _grad(D.conv_general_dilated, 1, "SAME", C), _grad(lax.conv_general_dilated, 1, "SAME", C)
    a, b = ours(x, w)[1].astype(jnp.float32), jax_own(x, w)[1].astype(jnp.float32)
    assert a.dtype == b.dtype and ours(x, w)[1].dtype == jnp.bfloat16
    # Both round a float32 sum to bfloat16: at most a couple of bfloat16 steps apart.
    assert float(jnp.abs(a - b).max()) <= 2 ** -6 * float(jnp.abs(b).max())


def test_other_convolutions_are_jax_own():
    """Below MIN_CHANNELS, a dilated or a non-depthwise convolution: the call is JAX's own
    (the same jaxpr)."""
    x, w = _inputs(9, C // 2)
    cases = [
        (x, w, dict(feature_group_count=C // 2)),                                    # few channels
        (*_inputs(9, C), dict(feature_group_count=C, rhs_dilation=(2, 2))),          # dilated
        (_inputs(9, C)[0], jnp.ones((3, 3, C, 8)), dict(feature_group_count=1)),     # dense
    ]
    for lhs, rhs, kw in cases:
        ours = jax.make_jaxpr(lambda a, b: D.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=NHWC, **kw))
        theirs = jax.make_jaxpr(lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=NHWC, **kw))
        assert str(ours(lhs, rhs)) == str(theirs(lhs, rhs)), kw


def _convolutions(platform: str) -> int:
    """Convolutions in the gradient program exported for ``platform`` (lowered here, no device
    of that kind needed)."""
    x, w = _inputs(9, C)
    exported = jax.export.export(_grad(D.conv_general_dilated, 1, "SAME", C), platforms=[platform])(x, w)
    return len(re.findall(r"stablehlo\.convolution", exported.mlir_module()))


def test_the_taps_are_the_cpu_branch_only():
    """On a CPU the weight gradient is no convolution (forward and input gradient are); for
    CUDA and TPUs the program keeps JAX's own three."""
    assert _convolutions("cpu") == 2
    assert _convolutions("cuda") == 3
    assert _convolutions("tpu") == 3
