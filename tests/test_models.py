"""Parameter counts and FLOP counts of the generated models against their analytic formulas."""

import pytest

from paradnn import CNN, FC, RNN, Workload
from paradnn.backends.jax import costs as costs
from paradnn.backends.jax import step as wl
from paradnn.backends.jax.jaxpr_flops import count_matmul_flops
from paradnn.backends.jax.models import build, count_from_shapes, param_count
from paradnn.families.rnn import GATES

SPECS = [
    FC(1, 32, 64, 10),
    FC(4, 1024, 2000, 1000),
    FC(7, 100, 30, 5),
    CNN("residual", 1, 16, 64, 10),
    CNN("residual", 2, 8, 100, 7),
    CNN("bottleneck", 1, 16, 64, 10),
    CNN("bottleneck", 3, 8, 50, 1000),
    RNN("rnn", 1, 32, 5, 50),
    RNN("lstm", 2, 32, 5, 50),
    RNN("gru", 3, 100, 7, 1024),
]


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_param_count_from_shapes_equals_closed_form(spec):
    assert count_from_shapes(build(spec)) == param_count(spec)


def test_closed_forms_by_hand():
    # FC: weights input*nodes + (layers-1)*nodes^2 + nodes*output, biases layers*nodes + output.
    assert param_count(FC(4, 1024, 2000, 1000)) == 2000 * 1024 + 3 * 1024**2 + 1024 * 1000 + 4 * 1024 + 1000
    # LSTM: embedding 50*32, two layers of 4*((32+32)*32 + 32), head 32*50 + 50.
    assert param_count(RNN("lstm", 2, 32, 5, 50)) == 50 * 32 + 2 * 4 * (64 * 32 + 32) + 32 * 50 + 50
    # GRU has 3 gate blocks, basic RNN 1.
    assert param_count(RNN("gru", 1, 32, 5, 50)) == 50 * 32 + 3 * (64 * 32 + 32) + 32 * 50 + 50
    # ResNet-v1 residual, 1 block/group, filters 16: stem 7*7*3*16; per group a 1x1 projection
    # and two 3x3 convs; BN 2 per channel everywhere; head 128*10 + 10.
    convs = 7 * 7 * 3 * 16 + 2 * 16
    ch = 16
    for f in (16, 32, 64, 128):
        convs += ch * f + 2 * f + 9 * ch * f + 2 * f + 9 * f * f + 2 * f
        ch = f
    assert param_count(CNN("residual", 1, 16, 64, 10)) == convs + 128 * 10 + 10


def _xla_flops(spec, batch):
    workload = Workload(spec, batch)
    model = build(spec)
    state, data = wl.abstract_inputs(workload, model, "rmsprop")
    compiled = wl.jit_multi_step(model, "rmsprop").lower(state, data, wl.STEPS_ARG).compile()
    xla = costs.xla_step_costs(workload, model, "rmsprop", compiled)["flops_per_step"]
    return xla, costs.model_flops_per_step(workload)


@pytest.mark.parametrize(
    "spec, batch, tolerance",
    [
        (FC(4, 512, 2000, 1000), 64, 0.10),
        (FC(2, 256, 256, 64), 32, 0.10),
        # Batch 32: at batch 4 the optimizer's per-parameter update and the max-pool gradient's
        # element-wise work (counted by XLA, not by the analytic count) reach 10% of this tiny
        # CNN's FLOPs; compiling costs the same at either batch.
        (CNN("residual", 1, 16, 64, 10), 32, 0.10),
        (CNN("bottleneck", 1, 16, 96, 10), 2, 0.10),
        (RNN("rnn", 2, 128, 12, 256), 64, 0.05),
        (RNN("lstm", 2, 128, 12, 256), 64, 0.05),
        (RNN("gru", 2, 128, 12, 256), 64, 0.05),
    ],
    ids=str,
)
def test_xla_flops_agree_with_analytic(spec, batch, tolerance):
    xla, analytic = _xla_flops(spec, batch)
    assert abs(xla / analytic - 1) <= tolerance, (xla, analytic)


def test_rnn_without_loop_handling_would_undercount():
    # The reason for the extrapolation: XLA counts the scan body once. (The kernel's and the
    # inputs' gradients are matmuls after the loop, so the raw count misses about half.)
    spec = RNN("lstm", 1, 128, 20, 64)
    workload, model = Workload(spec, 8), build(spec)
    raw = costs._cost_dict(costs.lower_single_step(workload, model, "rmsprop").compile())["flops"]
    handled, analytic = _xla_flops(spec, 8)
    assert raw < 0.7 * analytic
    assert abs(handled / analytic - 1) < 0.05


def test_k_step_call_costs_one_step():
    # K is a run-time argument: the program keeps its while loop, whose body XLA counts once.
    spec = FC(3, 256, 512, 100)
    workload, model = Workload(spec, 32), build(spec)
    single = costs._cost_dict(costs.lower_single_step(workload, model, "rmsprop").compile())["flops"]
    state, data = wl.abstract_inputs(workload, model, "rmsprop")
    compiled, _, _ = wl.compile_measured(model, "rmsprop", None, state, data, loop="device")
    assert costs.has_while_loop(compiled)
    xla, _ = _xla_flops(spec, 32)
    assert abs(xla / single - 1) < 0.01, (xla, single)


@pytest.mark.parametrize("spec", [FC(3, 64, 100, 10), RNN("gru", 2, 32, 6, 40), RNN("lstm", 1, 16, 3, 8)], ids=str)
def test_jaxpr_counter_matches_closed_form(spec):
    # Both count matmuls only; the jaxpr walk multiplies scan bodies by their length.
    workload, model = Workload(spec, 4), build(spec)
    state, batch = wl.abstract_inputs(workload, model, "rmsprop")
    counted = count_matmul_flops(wl.step_fn(model, "rmsprop"), state, batch)
    assert counted == pytest.approx(model.train_flops_per_example * 4, rel=1e-6)


def _autodiff_layer(cell, w, b, xs, unroll):
    """The reference: the same cell as a plain ``lax.scan``, differentiated by JAX."""
    import jax
    import jax.numpy as jnp

    from paradnn.backends.jax.models.rnn import UPDATES

    h0 = jnp.zeros((xs.shape[1], w.shape[1] // GATES[cell]), xs.dtype)

    def step(carry, x):
        c, h = UPDATES[cell](jnp.concatenate([x, carry[1]], -1) @ w + b, carry[0])
        return (c, h), h

    return jax.lax.scan(step, (h0 if cell == "lstm" else h0[:, :0], h0), xs, unroll=unroll)[1]


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
@pytest.mark.parametrize("unroll", [1, True])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_one_kernel_layer_gradient_equals_jax_autodiff(cell, unroll, dtype):
    # The hand-written VJP (kernel and input gradients as one matmul each over all time steps)
    # against JAX's transpose of the plain scan: same values up to float rounding.
    import jax
    import jax.numpy as jnp
    import numpy as np

    from paradnn.backends.jax.models.rnn import one_kernel_layer

    steps, batch, in_dim, hidden = 6, 3, 5, 4
    gates = hidden * GATES[cell]
    kw, kb, kx, ky = jax.random.split(jax.random.PRNGKey(1), 4)
    w = jax.random.normal(kw, (in_dim + hidden, gates), dtype) * 0.5
    b = jax.random.normal(kb, (gates,), dtype) * 0.5
    xs = jax.random.normal(kx, (steps, batch, in_dim), dtype)
    probe = jax.random.normal(ky, (steps, batch, hidden), dtype)

    def loss(layer):
        return lambda w, b, xs: jnp.sum((layer(cell, w, b, xs, unroll) * probe).astype(jnp.float32))

    ours = jax.grad(loss(one_kernel_layer), argnums=(0, 1, 2))(w, b, xs)
    ref = jax.grad(loss(_autodiff_layer), argnums=(0, 1, 2))(w, b, xs)
    np.testing.assert_allclose(one_kernel_layer(cell, w, b, xs, unroll).astype(np.float32),
                               _autodiff_layer(cell, w, b, xs, unroll).astype(np.float32), rtol=1e-6, atol=1e-6)
    tol = 1e-5 if dtype == "float32" else 5e-2  # bfloat16: 8 mantissa bits, summed in another order
    for name, a, r in zip(("kernel", "bias", "inputs"), ours, ref):
        assert a.dtype == r.dtype and a.shape == r.shape, name
        scale = float(jnp.max(jnp.abs(r.astype(jnp.float32))))
        np.testing.assert_allclose(a.astype(np.float32), r.astype(np.float32), rtol=0, atol=tol * scale, err_msg=name)


def _autodiff_recurrence(update, init, w_h, gx, unroll):
    """The reference: the zoo loop as a plain ``lax.scan``, differentiated by JAX."""
    import jax

    def step(carry, g_x):
        state, h = update(g_x, carry[1].astype(w_h.dtype) @ w_h, *carry)
        return (state, h), h

    return jax.lax.scan(step, init(gx.shape[1]), gx, unroll=unroll)[1]


@pytest.mark.parametrize("unroll", [1, True])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_zoo_hidden_recurrence_gradient_equals_jax_autodiff(unroll, dtype):
    # The zoo LSTM's loop (float32 states, gates summed in the compute dtype) with its
    # hand-written VJP against JAX's transpose of the plain scan.
    from functools import partial

    import jax
    import jax.numpy as jnp
    import numpy as np

    from paradnn.backends.jax.models.zoo import recurrent
    from paradnn.backends.jax.models.zoo.recurrence import hidden_recurrence

    steps, batch, hidden = 6, 3, 4
    update, init = recurrent._lstm_update, partial(recurrent._zero_states, hidden)
    kw, kx, ky = jax.random.split(jax.random.PRNGKey(2), 3)
    w_h = (jax.random.normal(kw, (hidden, 4 * hidden)) * 0.5).astype(dtype)
    gx = jax.random.normal(kx, (steps, batch, 4 * hidden), dtype)
    probe = jax.random.normal(ky, (steps, batch, hidden))

    def loss(loop):
        return lambda w_h, gx: jnp.sum(loop(update, init, w_h, gx, unroll) * probe)

    ours = jax.grad(loss(hidden_recurrence), argnums=(0, 1))(w_h, gx)
    ref = jax.grad(loss(_autodiff_recurrence), argnums=(0, 1))(w_h, gx)
    np.testing.assert_allclose(hidden_recurrence(update, init, w_h, gx, unroll),
                               _autodiff_recurrence(update, init, w_h, gx, unroll), rtol=1e-6, atol=1e-6)
    tol = 1e-5 if dtype == "float32" else 5e-2  # bfloat16: 8 mantissa bits, summed in another order
    for name, a, r in zip(("w_h", "gx"), ours, ref):
        assert a.dtype == r.dtype and a.shape == r.shape, name
        scale = float(jnp.max(jnp.abs(r.astype(jnp.float32))))
        np.testing.assert_allclose(a.astype(np.float32), r.astype(np.float32), rtol=0, atol=tol * scale, err_msg=name)


def _autodiff_gru(wg, bg, wc, bc, xs, unroll):
    """The reference: the TF1 gru step as written before its hand-written gradient, by JAX."""
    import jax
    import jax.numpy as jnp

    def step(h, x):
        r, u = jnp.split(jax.nn.sigmoid(jnp.concatenate([x, h], -1) @ wg + bg), 2, axis=-1)
        cand = jnp.tanh(jnp.concatenate([x, r * h], -1) @ wc + bc)
        h = u * h + (1 - u) * cand
        return h, h

    return jax.lax.scan(step, jnp.zeros((xs.shape[1], wc.shape[1]), xs.dtype), xs, unroll=unroll)[1]


@pytest.mark.parametrize("unroll", [1, True])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gru_layer_gradient_equals_jax_autodiff(unroll, dtype):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from paradnn.backends.jax.models.rnn import gru_layer

    steps, batch, in_dim, hidden = 6, 3, 5, 4
    keys = jax.random.split(jax.random.PRNGKey(3), 6)
    args = (jax.random.normal(keys[0], (in_dim + hidden, 2 * hidden), dtype) * 0.5,
            jax.random.normal(keys[1], (2 * hidden,), dtype) * 0.5,
            jax.random.normal(keys[2], (in_dim + hidden, hidden), dtype) * 0.5,
            jax.random.normal(keys[3], (hidden,), dtype) * 0.5,
            jax.random.normal(keys[4], (steps, batch, in_dim), dtype))
    probe = jax.random.normal(keys[5], (steps, batch, hidden))

    def loss(layer):
        return lambda *a: jnp.sum(layer(*a, unroll).astype(jnp.float32) * probe)

    ours = jax.grad(loss(gru_layer), argnums=range(5))(*args)
    ref = jax.grad(loss(_autodiff_gru), argnums=range(5))(*args)
    np.testing.assert_allclose(gru_layer(*args, unroll).astype(np.float32),
                               _autodiff_gru(*args, unroll).astype(np.float32), rtol=1e-6, atol=1e-6)
    tol = 1e-5 if dtype == "float32" else 5e-2  # bfloat16: 8 mantissa bits, summed in another order
    for name, a, r in zip(("gates_kernel", "gates_bias", "candidate_kernel", "candidate_bias", "inputs"), ours, ref):
        assert a.dtype == r.dtype and a.shape == r.shape, name
        scale = float(jnp.max(jnp.abs(r.astype(jnp.float32))))
        np.testing.assert_allclose(a.astype(np.float32), r.astype(np.float32), rtol=0, atol=tol * scale, err_msg=name)
