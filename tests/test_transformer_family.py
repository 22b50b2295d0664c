"""The Transformer family: spec validation, exact parameter counts, FLOPs against XLA's count,
attention paths, registry entry, presets and the sweep file. Models are tiny (1-2 layers,
d_model 32-64, 8-64 tokens, vocabulary 64): seconds on a CPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from paradnn import SpecError, Transformer, families
from paradnn.families import transformer as tf_family
from paradnn.backends.jax.models import count_from_shapes
from paradnn.backends.jax.models.transformer_lm import build, fused_implementation
from paradnn.workload import Workload, spec_from_dict

ROOT = Path(__file__).resolve().parents[1]
# The smallest Transformer the tests build (model dimensions, not measurement settings).
TINY_DIMS = dict(layers=1, d_model=32, heads=2, d_ff=64, length=8, vocab=64)


def spec(**overrides) -> Transformer:
    return Transformer(**{**TINY_DIMS, **overrides})


# -- spec ------------------------------------------------------------------------------------

def test_spec_defaults_and_auto_resolve():
    s = Transformer(2, 256, "auto", "auto", 128, 1024)
    assert (s.heads, s.d_ff) == (4, 1024)  # d_model/64 heads, 4*d_model feed-forward
    assert (s.stack, s.positions, s.attention, s.attention_flops) == ("decoder", "learned", "fused", "full")
    assert Transformer(1, 32, "auto", 64, 8, 64).heads == 1  # at least one head
    # The key holds the resolved numbers: "auto" and the number it stands for are one workload.
    assert Workload(s, 4).key == Workload(Transformer(2, 256, 4, 1024, 128, 1024), 4).key


@pytest.mark.parametrize("overrides, param", [
    (dict(heads=3), "heads"),  # does not divide d_model 32
    (dict(d_model=96, heads="auto", layers=1), None),  # valid: 1 head of 96
    (dict(d_model=200, heads="auto"), "heads"),  # auto gives 3, not a divisor of 200
    (dict(d_ff=0), "d_ff"),
    (dict(d_ff="wide"), "d_ff"),
    (dict(layers=0), "layers"),
    (dict(length=2.5), "length"),
    (dict(vocab=True), "vocab"),
    (dict(stack="maybe"), "stack"),
    (dict(stack=True), "stack"),
    (dict(positions="rotary"), "positions"),
    (dict(positions="sinusoidal", d_model=33, heads=1), "d_model"),
    (dict(d_model=33, heads=1), None),  # learned positions take any width
    (dict(attention="flash"), "attention"),
    (dict(attention_flops="quarter"), "attention_flops"),
    (dict(attention_flops="half", stack="encoder"), "attention_flops"),
])
def test_spec_validation_names_the_parameter(overrides, param):
    if param is None:
        spec(**overrides)
        return
    with pytest.raises(SpecError) as err:
        spec(**overrides)
    assert err.value.parameter == param
    assert repr(overrides[param])[:3] in str(err.value) or str(overrides[param]) in str(err.value)


def test_round_trips_through_a_dict():
    s = spec(stack="Encoder", positions="sinusoidal", attention="einsum")
    assert s.stack == "encoder"
    assert spec_from_dict(s.to_dict()) == s


# -- parameters ------------------------------------------------------------------------------

def test_param_count_by_hand():
    # d=32, d_ff=64, T=8, V=64, one block:
    # embedding 64*32 = 2048; positions 8*32 = 256;
    # block: 2 LayerNorms 4*32 = 128, Q/K/V/out 4*32*32 + 4*32 = 4224, FF 2*32*64 + 64 + 32 = 4192;
    # final LayerNorm 2*32 = 64; head 32*64 = 2048.  Total 2048+256+128+4224+4192+64+2048.
    assert tf_family.param_count(spec()) == 12960
    assert tf_family.param_count(spec(positions="sinusoidal")) == 12960 - 256


@pytest.mark.parametrize("overrides", [
    {}, dict(layers=2, d_model=64, heads=4, d_ff=128), dict(positions="sinusoidal"),
    dict(stack="encoder", attention="einsum"), dict(heads=1, d_ff=48, length=16, vocab=50),
    dict(d_model=33, heads=3, d_ff=40),
])
def test_param_count_equals_the_flax_model(overrides):
    s = spec(**overrides)
    assert count_from_shapes(build(s, "float32")) == families.param_count(s) == tf_family.param_count(s)


def test_params_are_float32_under_mixed_precision():
    model = build(spec(), "bfloat16")
    batch = model.make_batch(jax.random.key(0), 2)
    variables = jax.eval_shape(lambda: model.module.init(jax.random.key(0), batch["inputs"], train=False))
    dtypes = {leaf.dtype for leaf in jax.tree_util.tree_leaves(variables["params"])}
    assert dtypes == {jnp.dtype("float32")}
    out = jax.eval_shape(lambda v: model.module.apply(v, batch["inputs"]), variables)
    assert out.shape == (2, 8, 64) and out.dtype == jnp.bfloat16


# -- FLOPs -----------------------------------------------------------------------------------

def test_train_flops_formula_by_hand():
    s = spec()  # d=32, d_ff=64, T=8, V=64, 1 layer
    forward_per_token = (8 * 32 * 32 + 4 * 32 * 64 + 4 * 8 * 32) + 2 * 32 * 64
    assert tf_family.train_flops_per_example(s) == 3 * 8 * forward_per_token
    half = 3 * 8 * (forward_per_token - 2 * 8 * 32)
    assert tf_family.train_flops_per_example(s.replace(attention_flops="half")) == half
    assert build(s, "float32").train_flops_per_example == tf_family.train_flops_per_example(s)


def _xla_flops(s: Transformer, batch: int) -> float:
    """XLA's count of one compiled training step (paradnn.backends.jax.costs, as the runner records it)."""
    from paradnn.backends.jax import costs as costs

    w = Workload(s, batch)
    model = build(s, w.dtype)
    return costs._cost_dict(costs.lower_single_step(w, model, w.optimizer).compile())["flops"]


@pytest.mark.parametrize("overrides", [{}, dict(stack="encoder", attention="einsum")])
def test_train_flops_match_xla_within_10_percent(overrides):
    # length 64 against d_model 64 makes attention a fifth of the matmuls: dropping the score
    # and value products, or halving them, would miss by more than 10% (checked below).
    s = Transformer(1, 64, 2, 128, 64, 64, **overrides)
    batch = 4
    executed = _xla_flops(s, batch)
    analytic = families.get("transformer").train_flops_per_example(s) * batch
    # XLA also counts LayerNorm, softmax, GELU and Adam's elementwise work: above, not far.
    assert analytic <= executed <= 1.10 * analytic, executed / analytic
    if s.stack == "decoder":
        # The program computes every score and masks: the causal-half count undercounts it.
        half = tf_family.train_flops_per_example(s.replace(attention_flops="half")) * batch
        assert executed > 1.10 * half


# -- the model -------------------------------------------------------------------------------

def _logits(s: Transformer, params, inputs):
    return build(s, "float32").module.apply({"params": params}, inputs)


def _params_and_batch(s: Transformer, batch: int):
    """Initialized parameters and a batch, as the runner makes them (paradnn.backends.jax.step: one
    cheaply compiled program; eager initialization takes seconds per model)."""
    from paradnn.backends.jax import step as wl

    state, data = wl.init_inputs(Workload(s, batch), build(s, "float32"), "sgd")
    return state["params"], data


def test_fused_and_einsum_attention_agree():
    # Every option below has the same parameter tree: one initialization serves them all.
    params, data = _params_and_batch(spec(length=16), 3)
    for stack in ("decoder", "encoder"):
        fused = spec(stack=stack, length=16)
        a = _logits(fused, params, data["inputs"])
        b = _logits(fused.replace(attention="einsum"), params, data["inputs"])
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=2e-5)


def test_decoder_is_causal_encoder_is_not():
    params, data = _params_and_batch(spec(), 2)
    inputs = data["inputs"]
    changed = inputs.at[:, -1].set((inputs[:, -1] + 1) % TINY_DIMS["vocab"])
    for attention in ("fused", "einsum"):
        for stack in ("decoder", "encoder"):
            s = spec(stack=stack, attention=attention)
            a, b = _logits(s, params, inputs), _logits(s, params, changed)
            earlier_moved = float(jnp.abs(a[:, :-1] - b[:, :-1]).max())
            if stack == "decoder":
                assert earlier_moved == 0.0, (attention, earlier_moved)
            else:
                assert earlier_moved > 1e-4, (attention, earlier_moved)


def test_batches_next_token_and_corrupted_token_objectives():
    dec = jax.jit(build(spec(), "float32").make_batch, static_argnums=1)(jax.random.key(0), 4)
    assert dec["inputs"].shape == dec["labels"].shape == (4, 8)
    np.testing.assert_array_equal(dec["inputs"][:, 1:], dec["labels"][:, :-1])  # shifted by one
    enc = jax.jit(build(spec(stack="encoder", length=64), "float32").make_batch,
                  static_argnums=1)(jax.random.key(0), 8)
    corrupted = np.asarray(enc["inputs"] != enc["labels"])
    assert 0.05 < corrupted.mean() < 0.30  # about MASK_RATE of the positions, the rest intact
    assert np.all(np.asarray(enc["inputs"])[corrupted] == 0)


def test_fused_implementation_rule():
    assert fused_implementation(64, "bfloat16", "gpu") == "cudnn"
    assert fused_implementation(64, "float16", "gpu") == "cudnn"
    assert fused_implementation(64, "float32", "gpu") == "xla"  # cuDNN flash needs 16-bit
    assert fused_implementation(60, "bfloat16", "gpu") == "xla"  # not a multiple of 8
    assert fused_implementation(256, "bfloat16", "gpu") == "xla"
    assert fused_implementation(64, "bfloat16", "cpu") == "xla"
    assert fused_implementation(64, "bfloat16", "tpu") == "xla"
    assert build(spec(), "bfloat16", platform="gpu").tags["attention_implementation"] == "cudnn"
    assert build(spec(attention="einsum"), "bfloat16", platform="gpu").tags[
        "attention_implementation"] == "einsum"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_training_steps_lower_the_loss(dtype):
    from paradnn.backends.jax import step as wl

    w = Workload(spec(), batch=4, dtype=dtype, optimizer="adam")
    prepared = wl.prepare(w, build(w.spec, w.dtype))
    state, losses = prepared.state, []
    for _ in range(8):  # the same batch each step: the loss must fall
        state, loss = prepared.step(state, prepared.batch)
        losses.append(float(loss))
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0]
    assert abs(losses[0] - np.log(64)) < 0.5  # near uniform over the vocabulary at the start


@pytest.mark.gpu
def test_cudnn_flash_attention_on_gpu_matches_einsum():
    s = Transformer(1, 128, 2, 256, 128, 256)
    model = build(s, "bfloat16")
    assert model.tags["attention_implementation"] == "cudnn"
    inputs = model.make_batch(jax.random.key(1), 2)["inputs"]
    params = model.module.init(jax.random.key(2), inputs)["params"]
    hlo = jax.jit(lambda p: model.module.apply({"params": p}, inputs)).lower(params).compile().as_text()
    assert "__cudnn$fmha" in hlo  # the cuDNN fused attention custom call
    a = model.module.apply({"params": params}, inputs).astype(jnp.float32)
    b = build(s.replace(attention="einsum"), "bfloat16").module.apply({"params": params}, inputs)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b.astype(jnp.float32)), atol=0.1)


# -- registry, presets, sweep file -----------------------------------------------------------

def test_registry_entry():
    fam = families.get("transformer")
    assert fam.spec is Transformer and fam.kind == "generated" and fam.width == "d_model"
    assert "transformer" in families.generated()
    # This module imported the family first (paradnn.Transformer): built-ins keep their order.
    assert families.names()[:5] == ["fc", "cnn", "rnn", "transformer", "real"]
    assert families.builder(spec(), "jax") is build
    from paradnn.backends.torch.models import transformer as torch_transformer

    assert families.builder(spec(), "torch") is torch_transformer.build
    with pytest.raises(SpecError) as err:
        families.builder(spec(), "tensorflow")
    assert err.value.parameter == "framework"
    assert fam.fields() == tuple(f.name for f in dataclasses.fields(Transformer))
    assert {a.name for a in fam.axes} == set(fam.fields())
    assert fam.default_optimizer(spec()) == "adam" and Workload(spec(), 2).optimizer == "adam"
    for tiny in fam.tiny:
        s = Transformer(**{k: v for k, v in tiny.items() if k != "batch"})
        assert count_from_shapes(build(s, "float32")) == families.param_count(s)


def test_presets_and_paper_grid():
    from paradnn import grids

    smoke = grids.preset("smoke", "transformer")
    assert [w.spec.d_model for w in smoke] == [32, 64]
    assert [w.spec.d_ff for w in smoke] == [128, 256]  # auto: 4*d_model
    assert len(grids.preset("small", "transformer")) == 16
    paper = families.get("transformer").paper
    assert paper["d_model"] == [256, 512, 1024, 2048, 4096, 8192]
    assert paper["length"][0] == 128 and paper["length"][-1] == 8192
    assert paper["vocab"][0] == 1024 and paper["vocab"][-1] == 262144
    assert min(paper["layers"]) == 2 and max(paper["layers"]) == 48
    # The largest paper point is a valid spec with 64-dimensional heads.
    big = Transformer(48, 8192, "auto", "auto", 8192, 262144)
    assert (big.heads, big.d_ff) == (128, 32768)
    fixed, varied = families.get("transformer").suggested_grid
    assert len(grids.grid("transformer", **fixed, **varied)) == 12


def test_sweep_file_loads():
    from paradnn.grids import load_sweep_file

    plan = load_sweep_file(ROOT / "sweeps" / "transformer.yaml")
    assert plan.workloads and all(w.family == "transformer" for w in plan.workloads)
    assert {w.spec.d_model // w.spec.heads for w in plan.workloads} == {64}
    assert all(w.spec.d_ff == 4 * w.spec.d_model for w in plan.workloads)


def test_sweep_store_and_report(tmp_path, tiny_settings):
    """A tiny d_model x batch sweep runs through the runner, is stored, and the report draws
    the family's heat map and roofline from it, like the other families'."""
    import paradnn
    from paradnn import report

    grid = paradnn.grid("transformer", layers=1, d_model=[16, 32], heads=2, d_ff="auto", length=8,
                        vocab=32, batch=[2, 4])
    store = tmp_path / "transformer.db"
    df = paradnn.sweep(grid, store=store, executor="inprocess", settings=tiny_settings, progress=False)
    assert (df["status"] == "ok").all(), df[["status", "error"]]
    loaded = paradnn.load(store)
    assert sorted(set(loaded["d_model"])) == [16, 32] and sorted(set(loaded["d_ff"])) == [64, 128]
    assert set(loaded["stack"]) == {"decoder"} and set(loaded["attention"]) == {"fused"}
    for _, row in loaded.iterrows():
        s = Transformer(1, int(row["d_model"]), 2, int(row["d_ff"]), 8, 32)
        assert row["params"] == tf_family.param_count(s)
        assert row["model_flops_per_step"] == tf_family.train_flops_per_example(s) * row["batch"]
    sections, missing = report.plan(loaded, store=str(store))
    ids = [s.id for s in sections]
    assert "heatmap:transformer" in ids and "roofline" in ids, [(m.id, m.needs) for m in missing]
    heatmap = next(s for s in sections if s.id == "heatmap:transformer")
    assert "over batch and d_model" in heatmap.items[0].caption


def test_cli_names_a_bad_field_and_exits_2(paradnn_cmd):
    import subprocess

    base = ["run", "transformer", "--layers", "1", "--d_model", "32", "--d_ff", "64", "--length", "8",
            "--vocab", "64"]
    for extra, param in ((["--heads", "3"], "heads=3"), (["--heads", "2", "--stack", "maybe"], "stack")):
        out = subprocess.run([*paradnn_cmd, *base, *extra], capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stderr
        assert param in out.stderr and "Traceback" not in out.stderr


def test_plan_sizes_the_sweep_file_and_estimates_memory_within_2x():
    """``paradnn plan`` sizes Transformer configs from the closed forms, and its memory
    estimate is within a factor 2 of the compiled program's (as for FC, CNN and RNN)."""
    from paradnn.plan import compiled_memory, config_table, plan

    p = plan(ROOT / "sweeps" / "transformer.yaml", store=None, memory_limit_bytes="80GB")
    assert p.summary["configs"] == len(p.table) == 16800
    w = Workload(Transformer(2, 64, 2, 256, 64, 256), 8)
    row = config_table([w]).iloc[0]
    assert row["params"] == tf_family.param_count(w.spec)
    assert row["model_flops_per_step"] == tf_family.train_flops_per_example(w.spec) * 8
    compiled, _ = compiled_memory(w)
    assert compiled / 2 <= row["memory_bytes"] <= compiled * 2, (row["memory_bytes"], compiled)


def test_too_big_is_oom_before_anything_is_traced(tiny_settings):
    """The closed-form parameter count lets the runner refuse a model whose weights and Adam
    state alone exceed the limit in microseconds (a billion layers would trace for hours)."""
    import time

    from paradnn import runner

    w = Workload(Transformer(10**9, 1024, "auto", "auto", 1024, 32768), 1)
    t0 = time.perf_counter()
    rec = runner.run_workload(w, tiny_settings, memory_limit_bytes=16 * 2**30)
    assert time.perf_counter() - t0 < 5
    assert rec.status == "oom" and rec.metrics["oom_predicted"] is True
    assert rec.metrics["params"] == tf_family.param_count(w.spec)
