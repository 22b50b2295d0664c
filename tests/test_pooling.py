"""The JAX models' max pooling: XLA's values and gradients, bitwise, without select-and-scatter."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

from paradnn.backends.jax.models.pooling import max_pool, spatial_pads

CASES = [
    ((4, 9, 9, 3), (3, 3), (2, 2), "SAME"),            # the CNNs' stem pool: overlapping windows
    ((4, 9, 9, 3), (3, 3), (1, 1), "SAME"),            # up to 9 windows share an input
    ((4, 10, 7, 5), (2, 2), (2, 2), "VALID"),          # VGG's pools: disjoint windows
    ((4, 13, 13, 8), (3, 3), (2, 2), [(1, 2), (1, 2)]),  # PyTorch-style padding, ceil mode
    ((2, 8, 8, 4), (2, 2), (3, 3), "VALID"),           # inputs no window reads
    ((2, 7, 7, 4), (3, 2), (2, 1), [(1, 1), (0, 1)]),  # unequal window, strides and padding
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape,window,strides,padding", CASES)
def test_max_pool_matches_xla_bitwise(shape, window, strides, padding, dtype):
    # ReLU outputs: a quarter of the windows hold ties at 0, where the first tap must win.
    x = jax.nn.relu(jax.random.normal(jax.random.PRNGKey(0), shape)).astype(dtype)
    pads = spatial_pads(shape, window, strides, padding)

    def xla(x):
        return nn.max_pool(x, window, strides, padding=pads)

    def ours(x):
        return max_pool(x, window, strides, padding)

    y_xla, y_ours = xla(x), ours(x)
    assert y_xla.shape == y_ours.shape and bool(jnp.all(y_xla == y_ours))
    g = jax.random.normal(jax.random.PRNGKey(1), y_xla.shape).astype(dtype)
    want = jax.jit(lambda x, g: jax.vjp(xla, x)[1](g)[0])(x, g)
    got = jax.jit(lambda x, g: jax.vjp(ours, x)[1](g)[0])(x, g)
    assert got.dtype == want.dtype
    # Bitwise: the same tap chosen in every tie and the same order of additions where windows
    # overlap (a different order moves float32 sums by up to 5e-7).
    assert bool(jnp.all(got == want)), float(jnp.max(jnp.abs(got.astype(jnp.float32) - want.astype(jnp.float32))))


def test_cnn_gradient_on_a_cpu_has_no_select_and_scatter():
    from paradnn.backends.jax.models import build
    from paradnn.families.cnn import CNN

    model = build(CNN(block="residual", blocks=1, filters=4, image=32, output=10))
    batch = model.make_batch(jax.random.PRNGKey(0), 2)
    variables = model.module.init(jax.random.PRNGKey(0), batch["inputs"], train=False)

    def loss(params):
        logits, _ = model.module.apply({**variables, "params": params}, batch["inputs"], train=True,
                                       mutable=["batch_stats"])
        return model.loss(logits, batch)

    # JAX lowers a max-pool's gradient to select_and_scatter, which XLA:CPU expands into a
    # reduce-window over (value, index) tuples and a scatter: the slow part.
    lowered = jax.jit(jax.grad(loss)).lower(variables["params"]).as_text()
    assert jax.default_backend() == "cpu"
    assert "reduce_window" in lowered and "select_and_scatter" not in lowered
