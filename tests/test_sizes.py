"""paradnn.sizes: framework-neutral counts and bytes, the zoo's table of reference counts, the
optimizer table every backend reads, and closed forms that cost O(1) in the network's depth."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from paradnn import sizes
from paradnn.families import cnn
from paradnn.families.cnn import CNN
from paradnn.families.fc import FC
from paradnn.families.real import ZOO, Real
from paradnn.workload import Workload


# -- the CNN's closed forms: O(1) in blocks, equal to walking every conv ------------------------

def _loop_convs(spec: CNN):
    """The network conv by conv, as the counts walked it before they became closed forms."""
    yield 7, 3, spec.filters, spec.image, 2, True
    side = math.ceil(math.ceil(spec.image / 2) / 2)
    ch = spec.filters
    for width, stride in zip(cnn.GROUP_WIDTH, cnn.GROUP_STRIDE):
        f = spec.filters * width
        out_ch = 4 * f if spec.block == "bottleneck" else f
        for i in range(spec.blocks):
            s = stride if i == 0 else 1
            out_side = math.ceil(side / s)
            if i == 0:
                yield 1, ch, out_ch, side, s, False
            if spec.block == "bottleneck":
                yield 1, ch, f, side, 1, False
                yield 3, f, f, side, s, False
                yield 1, f, out_ch, out_side, 1, False
            else:
                yield 3, ch, f, side, s, False
                yield 3, f, f, out_side, 1, False
            ch, side = out_ch, out_side


def _loop_taps(size: int, kernel: int, stride: int) -> int:
    out = math.ceil(size / stride)
    pad_lo = max((out - 1) * stride + kernel - size, 0) // 2
    return sum(min(kernel, size + pad_lo - i * stride) - max(0, pad_lo - i * stride) for i in range(out))


def _loop_counts(spec: CNN) -> tuple[int, float, int, float]:
    params = flops = stem = bn = 0
    act = 3.0 * spec.image ** 2
    for k, cin, cout, side, stride, is_stem in _loop_convs(spec):
        params += k * k * cin * cout + 2 * cout
        f = 2.0 * _loop_taps(side, k, stride) ** 2 * cin * cout
        flops += f
        stem += f if is_stem else 0.0
        bn += 2 * cout
        act += 3.0 * math.ceil(side / stride) ** 2 * cout
    final = cnn.final_channels(spec)
    params += final * spec.output + spec.output
    flops = 3.0 * (flops + 2.0 * final * spec.output) - stem
    return params, flops, bn, act


@pytest.mark.parametrize("block", ["residual", "bottleneck"])
@pytest.mark.parametrize("blocks", [1, 2, 3, 7])
@pytest.mark.parametrize("image", [32, 33, 64, 225, 300])
def test_cnn_closed_forms_equal_the_loop_over_every_conv(block, blocks, image):
    spec = CNN(block, blocks, 8, image, 10)
    params, flops, bn, act = _loop_counts(spec)
    assert cnn.param_count(spec) == params
    assert cnn.train_flops_per_example(spec) == pytest.approx(flops, rel=1e-12)
    assert cnn.batch_norm_statistics(spec) == bn
    assert cnn.activation_elements(spec)[0] == pytest.approx(act, rel=1e-12)
    assert list(cnn.convs(spec)) == list(_loop_convs(spec))


def test_valid_taps_closed_form_equals_the_loop():
    for size in range(1, 70):
        for kernel in (1, 2, 3, 5, 7, 11):
            for stride in (1, 2, 3, 4):
                assert cnn.valid_taps(size, kernel, stride) == _loop_taps(size, kernel, stride)


def test_a_billion_block_cnn_is_sized_in_well_under_a_second():
    """``--blocks 1000000000`` used to walk every block (hours); the counts, the floor and the
    planner's row are closed forms in the depth and in the image side."""
    spec = CNN("bottleneck", 10**9, 64, 10**6, 1000)
    t0 = time.perf_counter()
    params = cnn.param_count(spec)
    row = sizes.config_sizes(Workload(spec, 64))
    oom = sizes.predicted_oom(Workload(spec, 64), 80 * 10**9)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5, elapsed
    small = CNN("bottleneck", 1, 64, 10**6, 1000)
    # each extra block adds the same repeated block's parameters
    per_block = (cnn.param_count(CNN("bottleneck", 3, 64, 224, 1000))
                 - cnn.param_count(CNN("bottleneck", 2, 64, 224, 1000)))
    assert params == cnn.param_count(small) + (10**9 - 1) * per_block
    assert row["params"] == params and row["model_flops_per_step"] > 0
    assert oom is not None and oom["metrics"]["params"] == params


# -- the zoo's table: the reference backend's counts, checked against it ------------------------

def _jax_counts(spec: Real) -> tuple[int, float]:
    from paradnn.backends.jax import costs
    from paradnn.backends.jax.models import build, count_from_shapes

    return count_from_shapes(build(spec, "float32")), costs.model_flops_per_step(Workload(spec, 1))


def _check_zoo_row(name: str) -> None:
    entry = ZOO[name]
    params, flops = _jax_counts(Real(name))
    assert (entry.params, entry.train_flops) == (params, flops), name
    assert sizes.param_count(Real(name)) == params
    assert sizes.model_flops_per_step(Workload(Real(name), 3)) == 3 * flops
    # Another input size: the parameters stay (the table says so), the FLOPs need a trace.
    other = Real(name, image=entry.default_image * 2 if entry.default_image else 0,
                 length=entry.default_length * 2 if entry.default_length else 0)
    assert _jax_counts(other)[0] == params and sizes.param_count(other) == params
    assert sizes.train_flops_per_example(other) is None


@pytest.mark.parametrize("name", ["lstm_lm", "squeezenet", "vgg16"])
def test_zoo_table_equals_the_jax_counts(name):
    _check_zoo_row(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(ZOO) - {"lstm_lm", "squeezenet", "vgg16"}))
def test_zoo_table_equals_the_jax_counts_every_model(name):
    _check_zoo_row(name)


def test_default_size_given_explicitly_uses_the_table():
    entry = ZOO["resnet50"]
    assert sizes.train_flops_per_example(Real("resnet50", image=entry.default_image)) == entry.train_flops
    assert sizes.train_flops_per_example(Real("resnet50", image=160)) is None


# -- the optimizer table: one place for every framework's settings ------------------------------

def test_optimizer_table_names_both_slot_counts():
    for o in sizes.OPTIMIZERS.values():
        assert 0 <= o.floor_slots <= o.estimate_slots, o.name
        assert o.learning_rate > 0 and o.algorithm in ("sgd", "rmsprop", "adam", "adafactor")
    assert sizes.state_bytes(10, "adafactor", bound="floor") == 40  # factored: no full slot
    assert sizes.state_bytes(10, "adafactor") == 80
    with pytest.raises(Exception, match="optimizer='lamb'"):
        sizes.optimizer("lamb")


@pytest.mark.parametrize("name", ["sgd", "momentum", "rmsprop", "adam"])
def test_jax_optimizer_follows_the_table(name):
    """Two steps of the JAX optimizer on one parameter equal the update rule written out with
    the table's hyperparameters (a changed row changes what JAX runs)."""
    import jax.numpy as jnp

    from paradnn.backends.jax.step import make_optimizer

    o = sizes.OPTIMIZERS[name]
    tx = make_optimizer(name)
    p = jnp.array([1.0, -2.0])
    state = tx.init(p)
    grads = [jnp.array([0.5, 0.25]), jnp.array([-1.0, 2.0])]
    expected = np.array([1.0, -2.0])
    m = v = np.zeros(2)
    for t, g in enumerate(grads, start=1):
        updates, state = tx.update(g, state, p)
        p = p + updates
        g = np.asarray(g)
        if o.algorithm == "sgd":
            m = g + (o.momentum or 0.0) * m
            expected = expected - o.learning_rate * m
        elif o.algorithm == "rmsprop":
            v = o.decay * v + (1 - o.decay) * g * g
            m = o.momentum * m + g / np.sqrt(v + o.epsilon)
            expected = expected - o.learning_rate * m
        else:
            m = o.beta1 * m + (1 - o.beta1) * g
            v = o.beta2 * v + (1 - o.beta2) * g * g
            expected = expected - o.learning_rate * (m / (1 - o.beta1 ** t)) / (
                np.sqrt(v / (1 - o.beta2 ** t)) + o.epsilon)
    np.testing.assert_allclose(np.asarray(p), expected, rtol=1e-5)


def test_torch_optimizer_reads_the_table():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'paradnn[torch]')")
    from paradnn.backends.torch.backend import make_optimizer

    params = [torch.nn.Parameter(torch.zeros(3))]
    for name, o in sizes.OPTIMIZERS.items():
        group = make_optimizer(name, params).param_groups[0]
        assert group["lr"] == o.learning_rate, name
        if o.algorithm == "sgd":
            assert group["momentum"] == (o.momentum or 0.0)
        if o.algorithm == "rmsprop":
            assert (group["decay"], group["momentum"], group["eps"]) == (o.decay, o.momentum, o.epsilon)
        if o.algorithm == "adam":
            assert (group["betas"], group["eps"]) == ((o.beta1, o.beta2), o.epsilon)
        if o.algorithm == "adafactor":
            assert (group["beta2_decay"], group["d"], group["eps"][1]) == (
                -o.decay_rate, o.clipping_threshold, o.min_scale)


# -- bytes: what is known, what is not -----------------------------------------------------------

def test_config_sizes_are_per_device_and_say_what_is_unknown():
    w = Workload(FC(2, 64, 100, 10), 8, "bfloat16", "adam", devices=2)
    row = sizes.config_sizes(w)
    params = row["params"]
    assert row["state_bytes"] == 4 * params * 3 and row["gradient_bytes"] == 4 * params
    assert row["batch_bytes"] == 4 * (100 * 2 + 4)  # 4 examples per device, bfloat16 inputs
    assert row["memory_bytes"] == row["memory_floor_bytes"] and row["memory_source"] == "analytic estimate"
    real = sizes.config_sizes(Workload(Real("resnet18"), 8))
    assert real["params"] == ZOO["resnet18"].params and np.isnan(real["memory_bytes"])
    assert real["memory_floor_bytes"] == real["state_bytes"] + real["gradient_bytes"]
    other = sizes.config_sizes(Workload(Real("resnet18", image=64), 8))
    assert np.isnan(other["model_flops_per_step"]) and "unknown" in other["counts_source"]
    known = {Workload(Real("resnet18", image=64), 8).key: (1.0, 123.0)}
    stored = sizes.config_sizes(Workload(Real("resnet18", image=64), 8), known)
    assert stored["model_flops_per_step"] == 123.0 and stored["params"] == ZOO["resnet18"].params
    assert stored["counts_source"] == "a stored record of the same workload"
