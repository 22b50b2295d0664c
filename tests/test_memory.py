"""Memory breakdown (TBD Fig 8): parts from shapes and JAX's residuals, summed to the compiled total."""

import io

import pytest

import paradnn
from paradnn.backends.jax import step as wl
from paradnn.backends.jax.memory import MEMORY_PARTS, memory_breakdown, residual_bytes, split_residuals, tree_bytes
from paradnn.backends.jax.models import build
from paradnn.workload import Workload


def _inputs(spec, batch, dtype="float32"):
    w = Workload(spec, batch, dtype, None, 1)
    model = build(spec, dtype)
    state, batch_shapes = wl.abstract_inputs(w, model, model.default_optimizer)
    return w, model, state, batch_shapes


FC = paradnn.FC(layers=4, nodes=256, input=2000, output=1000)


def test_fc_residuals_are_the_layer_activations():
    # A ReLU MLP keeps, per hidden layer, its pre-activation, output and ReLU mask; nothing of
    # the weights (left out) and each value once. Batch 64, 4 hidden layers of 256 nodes:
    # at least the 4 hidden outputs (64*256*4 B each) and at most 3 values per layer plus the
    # logits (64*1000*4 B).
    _, model, state, batch = _inputs(FC, 64)
    r = residual_bytes(model, state, batch)
    assert 4 * 64 * 256 * 4 <= r <= 4 * 3 * 64 * 256 * 4 + 2 * 64 * 1000 * 4
    assert r < tree_bytes(state["params"])  # the weights themselves are not counted


def test_parts_sum_to_the_compiled_total_and_feature_maps_grow_linearly():
    sizes = {}
    for batch in (64, 128):
        w, model, state, batch_shapes = _inputs(FC, batch)
        compiled, _, _ = wl.compile_measured(model, model.default_optimizer, None, state, batch_shapes, loop="device")
        b = memory_breakdown(w, model, state, batch_shapes, compiled)
        m = b.metrics()
        assert set(m) == set(MEMORY_PARTS)
        parts = sum(m.values())
        # The residuals JAX reports must fit in what XLA actually allocated: no overshoot, and
        # the parts then sum to the compiled total.
        assert b.overshoot_bytes <= 0.05 * b.total_bytes, b
        assert abs(parts - b.total_bytes) <= 0.05 * b.total_bytes
        # float32: no weight copies, only scalar residuals (a few bytes) that do not grow with the batch.
        assert 0 <= m["memory_weights_bytes"] - tree_bytes(state["params"]) - tree_bytes(state["extra"]) <= 64
        assert m["memory_optimizer_bytes"] == tree_bytes(state["opt_state"])
        assert 0 <= m["memory_gradients_bytes"] <= tree_bytes(state["params"])
        sizes[batch] = m["memory_activations_bytes"]
    # Feature maps (input batch + residuals) are linear in the batch with no constant term.
    assert sizes[128] == pytest.approx(2 * sizes[64], rel=0.01)


def test_bfloat16_feature_maps_are_smaller():
    # Mixed precision: modules compute in bfloat16, so the saved activations shrink, and the
    # bfloat16 copies of the float32 weights that the backward pass keeps (half the parameters'
    # bytes) are told apart from them because they do not grow with the batch.
    _, model32, state32, batch32 = _inputs(FC, 64, "float32")
    _, model16, state16, batch16 = _inputs(FC, 64, "bfloat16")
    maps32, copies32 = split_residuals(model32, state32, batch32)
    maps16, copies16 = split_residuals(model16, state16, batch16)
    assert copies32 <= 64  # scalars only
    assert maps16 < maps32
    # Whether JAX keeps the bfloat16 weight copies as residuals depends on its version (0.10
    # does, 0.12 recasts them): at most half the float32 parameters' bytes either way.
    assert copies16 <= tree_bytes(state16["params"]) // 2


@pytest.mark.slow
def test_observation_10_feature_maps_dominate_resnet50():
    # TBD Observation 10: feature maps are the largest consumer of ResNet-50 training memory
    # (89% at 224 px). A reduced ResNet-50 (64 px, batch 32), shapes only: nothing compiled.
    w, model, state, batch = _inputs(paradnn.Real("resnet50", image=64), 32)
    m = memory_breakdown(w, model, state, batch).metrics()
    assert m["memory_workspace_bytes"] is None  # no compiled program: no workspace claimed
    others = [m[k] for k in ("memory_weights_bytes", "memory_gradients_bytes", "memory_optimizer_bytes")]
    assert m["memory_activations_bytes"] > max(others)
    # ...and their share grows with the batch: the other parts are fixed.
    m64 = memory_breakdown(*_inputs(paradnn.Real("resnet50", image=64), 64)).metrics()
    share = lambda d: d["memory_activations_bytes"] / sum(v for v in d.values() if v)  # noqa: E731
    assert share(m64) > share(m) > 0.5


def test_memory_figure_renders_stacked_bars_from_a_dataframe():
    import pandas as pd

    from paradnn import plots
    from paradnn.errors import ParadnnError

    rows = []
    for model, batch, maps in (("resnet50", 32, 6e9), ("resnet50", 64, 12e9), ("vgg16", 32, 4e9)):
        rows.append({"status": "ok", "kind": "real", "family": "real", "model": model, "batch": batch,
                     "dtype": "float32", "memory_weights_bytes": 1e8, "memory_gradients_bytes": 1e8,
                     "memory_optimizer_bytes": 2e8, "memory_activations_bytes": maps,
                     "memory_workspace_bytes": 5e7})
    rows.append({**rows[0], "status": "oom", "memory_activations_bytes": None})  # left out
    fig = plots.memory_breakdown(pd.DataFrame(rows))
    ax = fig.axes[0]
    assert len(ax.patches) == 3 * len(MEMORY_PARTS)  # 3 bars of 5 parts
    assert [t.get_text() for t in ax.get_xticklabels()] == ["resnet50 (32)", "resnet50 (64)", "vgg16 (32)"]
    assert "GiB" in ax.get_ylabel()
    shares = [t.get_text() for t in ax.texts]
    assert shares == [f"{100 * m / (m + 4.5e8):.0f}%" for m in (6e9, 12e9, 4e9)]
    fig.savefig(io.BytesIO(), format="png")
    with pytest.raises(ParadnnError, match="memory_weights_bytes"):
        plots.memory_breakdown(pd.DataFrame([{"status": "ok", "batch": 1}]))
