"""The PyTorch backend: parameter counts equal to the JAX models', one step lowers the loss,
the timing protocol runs on its programs, executed FLOPs agree with the analytic counts.

Most checks run eagerly (``torch_compile="eager"``): torch.compile of even a tiny model takes
tens of seconds on a 2-core CPU; one slow test compiles. Anything importing torchvision runs in
a subprocess (this module never imports TensorFlow, but other test modules in the same pytest
process may, and TF + torchvision in one process abort).
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra: pip install 'paradnn[torch]'")

from paradnn import backends, families  # noqa: E402
from paradnn.backends.torch import backend as tb
from paradnn.errors import SpecError  # noqa: E402
from paradnn.measure import time_calls  # noqa: E402
from paradnn.families.fc import FC  # noqa: E402
from paradnn.workload import Workload

B = tb.BACKEND


def with_mode(settings, mode: str):
    return settings.replace(torch_compile=mode)


def _tiny_cases():
    for name in families.generated():
        fam = families.get(name)
        if "torch" not in fam.framework_builders():
            continue
        for t in fam.tiny:
            fields = {k: v for k, v in t.items() if k != "batch"}
            yield pytest.param(name, fields, t["batch"], id=f"{name}-" + "-".join(str(v) for v in fields.values()))


TINY_CASES = list(_tiny_cases())


def _classes(spec) -> int:
    return spec.vocab if spec.family in ("rnn", "transformer") else spec.output


def _compiled(name, fields, batch, tiny_settings, dtype="float32", optimizer=None, mode="eager"):
    spec = families.get(name).spec(**fields)
    work = Workload(spec, batch, dtype=dtype, optimizer=optimizer, framework="torch")
    return spec, B.compile(work, with_mode(tiny_settings, mode))


def test_backend_is_registered_and_implements_the_protocol():
    assert backends.available("torch") is None
    assert backends.get("torch") is B
    assert isinstance(B, backends.Backend)


@pytest.mark.parametrize("name,fields,batch", TINY_CASES)
def test_params_equal_the_analytic_count(name, fields, batch, tiny_settings):
    spec, program = _compiled(name, fields, batch, tiny_settings)
    assert program.metrics["params"] == families.param_count(spec)
    assert program.metrics["step_loop_used"] == "host"
    assert program.metrics["compile_s"] > 0
    # weights (+ batch-norm statistics) and rmsprop's two float32 slots per parameter
    assert program.state_bytes >= 3 * 4 * families.param_count(spec)


@pytest.mark.parametrize("name,fields,batch", TINY_CASES)
def test_one_step_lowers_the_loss_from_a_fresh_start(name, fields, batch, tiny_settings):
    spec, program = _compiled(name, fields, batch, tiny_settings)
    state, data = B.init(program)
    state, first = program.call(state, data, 1)
    state, second = program.call(state, data, 1)
    first, second = B.loss_value(first), B.loss_value(second)
    assert second < first
    # A freshly initialized classifier starts near ln(classes); the JAX models' first losses on
    # these presets lie in the same band (batch-normalized CNNs at batch 2 spread widely).
    assert 0.5 * math.log(_classes(spec)) < first < 2.0 * math.log(_classes(spec))
    # init() restores the initial weights and optimizer state: the same first loss again.
    state, data = B.init(program)
    assert B.loss_value(program.call(state, data, 1)[1]) == pytest.approx(first, rel=1e-6)


@pytest.mark.parametrize("name", ["fc", "rnn"])
def test_initial_loss_matches_jax_range(name, tiny_settings):
    from paradnn.backends.jax import step as wl

    t = families.get(name).tiny[0]
    fields = {k: v for k, v in t.items() if k != "batch"}
    spec, program = _compiled(name, fields, t["batch"], tiny_settings)
    state, data = B.init(program)
    torch_loss = B.loss_value(program.call(state, data, 1)[1])
    prepared = wl.prepare(Workload(spec, t["batch"]))
    jax_loss = float(prepared.step(prepared.state, prepared.batch)[1])
    # Different random draws, same initializers: within 25% of ln(classes) of each other.
    assert abs(torch_loss - jax_loss) < 0.25 * math.log(_classes(spec))


@pytest.mark.parametrize("name,fields,batch", TINY_CASES)
def test_executed_flops_within_10_percent_of_analytic(name, fields, batch, tiny_settings):
    spec, program = _compiled(name, fields, batch, tiny_settings)
    costs = B.costs(program)
    analytic = families.get(name).train_flops_per_example(spec) * batch
    assert costs["flops_per_step"] == pytest.approx(analytic, rel=0.10)
    assert costs["bytes_per_step"] is None
    assert "flop_counter" in costs["flops_source"]


def test_grouped_conv_flops_count_each_multiply_once():
    """torch's own formula counts a grouped convolution's weight gradient ``groups`` times;
    ours counts forward, input gradient and weight gradient once each."""
    from torch import nn
    from torch.utils.flop_counter import FlopCounterMode

    from paradnn.backends.torch.models import TorchModel

    channels, side, batch = 8, 6, 2
    model = TorchModel(
        "depthwise",
        lambda: nn.Sequential(nn.Conv2d(channels, channels, 3, padding=0, groups=channels, bias=False),
                              nn.Flatten(), nn.Linear(channels * 4 * 4, 3, bias=False)),
        lambda gen, n, device: {"inputs": torch.ones((n, channels, side, side), device=device, requires_grad=True),
                                "labels": torch.zeros((n,), dtype=torch.long, device=device)},
        lambda out, data: nn.functional.cross_entropy(out.float(), data["labels"]))
    conv = 2 * batch * channels * 9 * 4 * 4  # depthwise: one input channel per output channel
    dense = 2 * batch * channels * 16 * 3
    # inputs require grad here, so both the conv's input and weight gradients are computed
    assert tb.count_flops(model, batch) == 3 * conv + 3 * dense
    module = model.make_module()
    data = model.make_batch(None, batch, torch.device("cpu"))
    with FlopCounterMode(display=False) as counter:
        model.loss(module(data["inputs"]), data).backward()
    assert counter.get_total_flops() > 3 * conv + 3 * dense  # the miscount we avoid


def test_padding_taps_are_not_counted():
    # a 3x3 SAME conv on a 1x1 map multiplies one tap per output, not nine
    assert tb._conv_flops([1, 4, 1, 1], [5, 4, 3, 3], [1, 1], [1, 1], [1, 1], [1, 5, 1, 1]) == 2 * 4 * 5


def test_tf1_rmsprop_equals_optax(tiny_settings):
    import jax.numpy as jnp
    import optax

    from paradnn.backends.jax.step import make_optimizer as jax_optimizer

    values = np.array([0.5, -1.0, 2.0], np.float32)
    grads = [np.array([0.3, -0.2, 1.5], np.float32), np.array([-0.1, 0.4, 0.2], np.float32)]
    p = torch.nn.Parameter(torch.tensor(values))
    opt = tb.make_optimizer("rmsprop", [p])
    tx = jax_optimizer("rmsprop")
    params = jnp.asarray(values)
    opt_state = tx.init(params)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
        updates, opt_state = tx.update(jnp.asarray(g), opt_state, params)
        params = optax.apply_updates(params, updates)
    np.testing.assert_allclose(p.detach().numpy(), np.asarray(params), rtol=1e-5)


@pytest.mark.parametrize("optimizer", ["rmsprop", "sgd", "momentum", "adam", "adafactor"])
def test_every_optimizer_trains(optimizer, tiny_settings):
    t = families.get("fc").tiny[0]
    fields = {k: v for k, v in t.items() if k != "batch"}
    _, program = _compiled("fc", fields, t["batch"], tiny_settings, optimizer=optimizer)
    state, data = B.init(program)
    state, first = program.call(state, data, 1)
    state, later = program.call(state, data, 3)
    assert math.isfinite(B.loss_value(later)) and B.loss_value(later) < B.loss_value(first)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_autocast_trains(dtype, tiny_settings):
    t = families.get("cnn").tiny[0]
    fields = {k: v for k, v in t.items() if k != "batch"}
    _, program = _compiled("cnn", fields, t["batch"], tiny_settings, dtype=dtype)
    state, data = B.init(program)
    assert all(p.dtype == torch.float32 for p in state["module"].parameters())  # master weights
    state, first = program.call(state, data, 1)
    state, second = program.call(state, data, 1)
    assert B.loss_value(second) < B.loss_value(first)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_lstm_under_cpu_autocast_trains_on_any_cpu(dtype):
    """Under CPU autocast torch hands oneDNN's LSTM the reduced dtype, which oneDNN cannot build
    on some CPUs (bfloat16 on AVX2-only hosts, float16 on an AVX512-FP16 Sapphire Rapids: a
    RuntimeError, a plain nn.LSTM too); the layer then casts explicitly and torch's own LSTM
    computes in that dtype. Either way: values near float32's and float32 gradients for every
    weight. The probe that decides agrees with what a plain nn.LSTM does on this CPU."""
    from paradnn.backends.torch.models.generated import Recurrent, _autocast_dtype_onednn_lacks

    try:
        with torch.autocast("cpu", dtype=getattr(torch, dtype)):
            torch.nn.LSTM(8, 8, batch_first=True)(torch.randn(2, 3, 8))
        plain_runs = True
    except RuntimeError:
        plain_runs = False
    with torch.autocast("cpu", dtype=getattr(torch, dtype)):
        assert _autocast_dtype_onednn_lacks(torch.device("cpu")) == (None if plain_runs else getattr(torch, dtype))
    torch.manual_seed(0)
    layer = Recurrent("lstm", 8, 8)
    xs = torch.randn(2, 3, 8)
    exact = layer(xs).detach()
    with torch.autocast("cpu", dtype=getattr(torch, dtype)):
        ys = layer(xs)
    ys.float().sum().backward()
    assert torch.allclose(ys.float(), exact, atol=0.05)
    for p in layer.parameters():
        assert p.grad is not None and p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()


def test_time_calls_on_a_program(tiny_settings):
    t = families.get("fc").tiny[0]
    fields = {k: v for k, v in t.items() if k != "batch"}
    _, program = _compiled("fc", fields, t["batch"], tiny_settings)
    state, data = B.init(program)
    timing = time_calls(program.call, state, data, tiny_settings, sync=B.sync)
    assert math.isfinite(timing.final_loss)
    assert timing.steps_per_call == tiny_settings.steps_per_call
    assert len(timing.step_times_s) >= 2 and np.all(timing.step_times_s > 0)


def test_bad_settings_and_specs_are_spec_errors(tiny_settings):
    work = Workload(FC(2, 16, 8, 4), 4, framework="torch")
    with pytest.raises(SpecError, match="torch_compile"):
        B.compile(work, with_mode(tiny_settings, "fastest"))  # MeasureSettings validates it
    with pytest.raises(SpecError, match="devices"):
        B.compile(Workload(FC(2, 16, 8, 4), 4, devices=2, framework="torch"), with_mode(tiny_settings, "eager"))


def test_device_software_oom_and_cache(tmp_path, monkeypatch):
    info = B.device_info()
    assert info["device_platform"] in ("cpu", "gpu") and info["device_count"] >= 1 and info["cpu_model"]
    soft = B.software_info()
    assert soft["framework_version"] == soft["torch_version"] == torch.__version__
    assert (B.device_memory_bytes() is None) == (not torch.cuda.is_available())
    assert B.is_oom(torch.OutOfMemoryError("x")) and B.is_oom(MemoryError())
    assert not B.is_oom(RuntimeError("CUDA out of memory"))  # classified by type, never by message
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    restore = B.configure_cache(str(tmp_path))
    import os

    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "torchinductor")
    restore()
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ


def test_memory_breakdown_is_empty_on_cpu_with_a_reason(tiny_settings):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU behaviour; on a GPU the allocator reports memory")
    t = families.get("fc").tiny[0]
    _, program = _compiled("fc", {k: v for k, v in t.items() if k != "batch"}, t["batch"], tiny_settings)
    assert B.memory_breakdown(program) == {}
    assert "CPU" in program.tags["memory_note"]


@pytest.mark.slow
def test_torch_compile_default_mode(tiny_settings, tmp_path):
    """One real torch.compile (tens of seconds on a 2-core CPU): same losses as eager. Its
    Inductor cache stays in the test's directory."""
    restore = B.configure_cache(str(tmp_path))
    try:
        _check_compiled_matches_eager(tiny_settings)
    finally:
        restore()
    assert any((tmp_path / "torchinductor").iterdir())  # the cache went where we pointed it


def _check_compiled_matches_eager(tiny_settings):
    t = families.get("fc").tiny[0]
    fields = {k: v for k, v in t.items() if k != "batch"}
    _, eager = _compiled("fc", fields, t["batch"], tiny_settings)
    _, compiled = _compiled("fc", fields, t["batch"], tiny_settings, mode="default")
    assert compiled.tags["torch_compile"] == "default"
    losses = []
    for program in (eager, compiled):
        state, data = B.init(program)
        state, first = program.call(state, data, 1)
        state, third = program.call(state, data, 2)
        losses.append((B.loss_value(first), B.loss_value(third)))
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
    state, data = B.init(compiled)
    timing = time_calls(compiled.call, state, data, tiny_settings, sync=B.sync)
    assert math.isfinite(timing.final_loss)


# ------------------------------------------------------------------- torchvision (subprocess)

ZOO = ["resnet18", "resnet50", "resnet101", "resnet152", "densenet121", "vgg16", "inception_v3", "alexnet",
       "squeezenet"]

_COUNT_SCRIPT = """
import json, sys, torch
from paradnn.backends.torch.models.zoo import build
from paradnn.families.real import Real
counts = {}
for name in sys.argv[1:]:
    with torch.device("meta"):  # shapes only: nothing allocated or initialized for real
        module = build(Real(name), "float32").make_module()
    counts[name] = sum(p.numel() for p in module.parameters() if p.requires_grad)
print(json.dumps(counts))
"""


def _run_json(script: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_zoo_params_equal_the_jax_models():
    from paradnn.backends.jax.models import param_count
    from paradnn.families.real import Real

    counts = _run_json(_COUNT_SCRIPT, *ZOO)
    assert counts == {name: param_count(Real(name)) for name in ZOO}


_STEP_SCRIPT = """
import json, sys
from paradnn.backends.torch.backend import BACKEND as B
from paradnn.measure import MeasureSettings
from paradnn.families.real import Real
from paradnn.workload import Workload
out = {}
for name, image in (("resnet18", 32), ("inception_v3", 75)):
    program = B.compile(Workload(Real(name, image=image), 2, framework="torch"),
                        MeasureSettings(torch_compile="eager"))
    state, data = B.init(program)
    state, first = program.call(state, data, 1)
    state, second = program.call(state, data, 1)
    out[name] = [B.loss_value(first), B.loss_value(second), program.metrics["params"]]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_zoo_training_steps_in_torchvision():
    """resnet18 at 32 px; inception_v3 at its smallest side (75 px: the auxiliary head's
    small-map path) with its auxiliary loss."""
    out = _run_json(_STEP_SCRIPT)
    for name, (first, second, params) in out.items():
        assert math.isfinite(first) and math.isfinite(second), name
        assert params > 10**6
    first, second, _ = out["resnet18"]
    assert second < first
    # inception's loss is main + 0.4 aux: about 1.4 ln(1000) at the start
    assert 0.5 * 1.4 * math.log(1000) < out["inception_v3"][0] < 2 * 1.4 * math.log(1000)


_FLOPS_SCRIPT = """
import json, sys
from paradnn.backends.torch.backend import count_flops
from paradnn.backends.torch.models.zoo import build
from paradnn.families.real import Real
print(json.dumps({f"{name}@{image}": count_flops(build(Real(name, image=int(image)), "float32"), 2)
                  for name, image in (arg.split("@") for arg in sys.argv[1:])}))
"""


@pytest.mark.slow
def test_zoo_flops_equal_the_shared_analytic_count():
    """torch's corrected counter and the jaxpr count (the analytic count every framework's
    records share) agree exactly on torchvision's layouts, at small images where padding taps are
    a large share (a quarter of ResNet-18's at 64 px): both count only taps on real input."""
    from paradnn.backends.jax import costs
    from paradnn.families.real import Real

    cases = ["resnet18@64", "inception_v3@75", "squeezenet@67", "alexnet@63"]
    counted = _run_json(_FLOPS_SCRIPT, *cases)
    for case in cases:
        name, image = case.split("@")
        assert counted[case] == costs.model_flops_per_step(Workload(Real(name, image=int(image)), 2)), case


def test_zoo_rejects_models_torchvision_lacks_and_small_images():
    from paradnn.backends.torch.models import zoo
    from paradnn.families.real import Real

    with pytest.raises(SpecError, match="framework"):
        Workload(Real("mobilenet"), 2, framework="torch")
    with pytest.raises(SpecError, match="image"):
        zoo.build(Real("alexnet", image=40), "float32")  # 63 px is its smallest side


def _flax_leaves(tree):
    """(name, array) of a Flax parameter tree in creation order (jax.tree_util sorts keys)."""
    for key, value in tree.items():
        if hasattr(value, "items"):
            yield from _flax_leaves(value)
        else:
            yield key, np.asarray(value)


def _fused_recurrent_layout(leaves, module):
    """The Flax leaves with each TF1 kernel and bias of an rnn or lstm layer as the torch layer
    that runs torch's fused kernel holds them (weight_ih and weight_hh transposed, the LSTM's
    gates in torch's order); every other leaf as it is."""
    from paradnn.backends.torch.models.generated import Recurrent, tf1_to_torch_gates

    layers = iter([m for m in module.modules() if isinstance(m, Recurrent) and m.cell != "gru"])
    out, it = [], iter(leaves)
    for name, value in it:
        if name != "kernel" or value.ndim != 2:
            out.append((name, value))
            continue
        layer = next(layers, None)
        if layer is None or value.shape[1] != layer.bias.shape[0]:
            out.append((name, value))  # a Dense kernel (the head), not a recurrent one
            continue
        bias_name, bias = next(it)
        assert bias_name == "bias", bias_name
        if layer.cell == "lstm":
            order = tf1_to_torch_gates(layer.hidden).numpy()
            value, bias = value[:, order], bias[order]
        n_in = value.shape[0] - layer.hidden
        # As (out, in) 4-D-free tensors: the copy below transposes only Linear weights.
        out += [("weight_ih", np.ascontiguousarray(value[:n_in].T)),
                ("weight_hh", np.ascontiguousarray(value[n_in:].T)), ("bias", bias)]
    return out


@pytest.mark.parametrize("name,fields,batch", [
    pytest.param(*case.values, marks=[pytest.mark.slow] if case.values[0] == "cnn" else [], id=case.id)
    for case in TINY_CASES] + [
    # The Transformer's other attention x stack x positions combinations than its tiny presets'.
    pytest.param("transformer", {"layers": 2, "d_model": 16, "heads": 2, "d_ff": 32, "length": 8,
                                 "vocab": 32, "attention": "einsum", "positions": "sinusoidal"}, 2,
                 id="transformer-decoder-einsum-sinusoidal"),
    pytest.param("transformer", {"layers": 1, "d_model": 16, "heads": 4, "d_ff": 32, "length": 8,
                                 "vocab": 32, "stack": "encoder"}, 2, id="transformer-encoder-fused-learned")])
def test_forward_equals_jax_with_the_same_weights(name, fields, batch):
    """The torch model computes the JAX model's function: the JAX parameters (perturbed, so
    that no zero-initialized BN scale hides a branch) copied in, the same batch, the same loss.
    Checks the layouts, SAME padding and pooling, the TF1 cells, and the Transformer's attention
    (fused and einsum, causal and not) and position encodings."""
    import jax

    from paradnn.backends.jax.models import build

    spec = families.get(name).spec(**fields)
    jax_model = build(spec, "float32")
    data = jax_model.make_batch(jax.random.key(3), batch)
    # Not jitted: a jitted init returns its tree with sorted keys, and the copy below needs the
    # creation order (for the CNN this eager init is what makes the test slow).
    variables = jax_model.module.init(jax.random.key(1), data["inputs"], train=False)
    rng = np.random.default_rng(0)
    leaves = [(k, v + 0.3 * rng.standard_normal(v.shape).astype(np.float32))
              for k, v in _flax_leaves(variables["params"])]
    # The Flax tree again, with the perturbed leaves, in creation order.
    it = iter(leaves)

    def rebuild(tree):
        return {k: rebuild(v) if hasattr(v, "items") else next(it)[1] for k, v in tree.items()}

    jax_params = rebuild(variables["params"])
    def loss(params, data):
        out, _ = jax_model.module.apply({**variables, "params": params}, data["inputs"], train=True,
                                        mutable=["batch_stats"])
        return jax_model.loss(out, data)

    jax_loss = float(jax.jit(loss)(jax_params, data))

    model = families.builder(spec, "torch")(spec, "float32")
    module = model.make_module().train()
    linears = {n for n, m in module.named_modules() if isinstance(m, torch.nn.Linear)}
    named = list(module.named_parameters())
    leaves = _fused_recurrent_layout(leaves, module)
    assert len(named) == len(leaves)
    with torch.no_grad():
        for (jax_name, value), (torch_name, p) in zip(leaves, named):
            if torch_name.rsplit(".", 1)[0] in linears:
                # Dense kernel (in, out) -> (out, in); a DenseGeneral kernel (the Transformer's
                # Q/K/V [d, 3, heads, head_dim] and output [heads, head_dim, d]) flattened to
                # the Linear's (in, out) first, its bias to the Linear's.
                value = value.reshape(tuple(reversed(p.shape))).T
            elif value.ndim == 4:  # conv kernel HWIO -> OIHW
                value = value.transpose(3, 2, 0, 1)
            assert tuple(value.shape) == tuple(p.shape), (jax_name, torch_name)
            p.copy_(torch.from_numpy(np.ascontiguousarray(value)))
        inputs = torch.from_numpy(np.array(data["inputs"]))
        if name == "cnn":
            inputs = inputs.permute(0, 3, 1, 2).contiguous()  # NHWC -> NCHW
        labels = torch.from_numpy(np.array(data["labels"])).long()
        torch_loss = float(model.loss(module(inputs), {"inputs": inputs, "labels": labels}))
    assert torch_loss == pytest.approx(jax_loss, rel=1e-4)


def test_the_probe_gemm_method_multiplies_queued_matmuls_on_the_device():
    """PyTorch's probe GEMM (the GPU ceiling is the best of the frameworks present): run here on
    the CPU device; None for float32 (a precision the probe's label would not describe) and, on
    a host without CUDA, for its default CUDA device."""
    from paradnn import hardware
    from paradnn.backends.torch import gemm

    make = gemm.gemm_method(queue=3, device="cpu")
    assert make("float32", 16) is None
    call = make("bfloat16", 16)
    assert call.matmuls == 3
    out = call()
    assert out.dtype == torch.bfloat16 and out.shape == (16, 16) and torch.isfinite(out.float()).all()
    result = hardware.measure_gemm("bfloat16", {"torch-cpu": make}, sizes=(32,))
    assert result["best_method"] == "torch-cpu" and result["flops"] > 0
    if not torch.cuda.is_available():
        assert gemm.gemm_method(queue=3)("bfloat16", 16) is None


def test_the_jax_probe_adds_torch_on_a_gpu_with_its_version_in_the_key():
    from paradnn.hardware import probing

    jax_backend = backends.get("jax")
    gpu = jax_backend.gemm_methods("gpu")
    assert set(gpu) == {"xla-stock", "torch-cublas"}
    assert set(jax_backend.gemm_methods("tpu")) == {"xla-stock"}
    assert "torch-cublas" not in jax_backend.gemm_methods("cpu")
    versions = probing._probe_versions(jax_backend.probe_versions(), gpu)
    assert versions["method_versions"] == {"torch-cublas": importlib.metadata.version("torch")}
    assert "method_versions" not in probing._probe_versions(
        jax_backend.probe_versions(), jax_backend.gemm_methods("tpu"))


# ------------------------------------------------------------------------------ Transformer

def _transformer(**overrides):
    from paradnn.families.transformer import Transformer

    return Transformer(**{"layers": 1, "d_model": 16, "heads": 2, "d_ff": 32, "length": 8, "vocab": 32,
                          **overrides})


def test_the_sinusoid_table_is_the_familys_closed_form_in_both_frameworks():
    """One table (paradnn.families.transformer.sinusoid) for both frameworks: its values are
    sin/cos of the position at geometric frequencies, and the torch model adds exactly it."""
    from paradnn.backends.torch.models import transformer as tt
    from paradnn.families.transformer import sinusoid

    table = sinusoid(8, 16)
    p, i = np.arange(8)[:, None], np.arange(8)[None, :]
    angle = p / 10000.0 ** (i / 7)
    np.testing.assert_allclose(table, np.concatenate([np.sin(angle), np.cos(angle)], axis=1), rtol=1e-6, atol=1e-6)
    module = tt.TransformerLM(_transformer(positions="sinusoidal", length=8, d_model=16))
    np.testing.assert_array_equal(module.sinusoid.numpy(), table)


@pytest.mark.parametrize("stack", ["decoder", "encoder"])
def test_transformer_batches_have_the_jax_models_semantics(stack):
    spec = _transformer(stack=stack, length=64)
    model = families.builder(spec, "torch")(spec, "float32")
    assert model.tags["attention_implementation"] == "sdpa"
    data = model.make_batch(torch.Generator().manual_seed(0), 16, torch.device("cpu"))
    inputs, labels = data["inputs"], data["labels"]
    assert inputs.shape == labels.shape == (16, 64) and inputs.dtype == labels.dtype == torch.int64
    assert 0 <= int(inputs.min()) and int(labels.max()) < spec.vocab
    if stack == "decoder":  # next-token prediction: labels are the inputs shifted by one
        assert torch.equal(inputs[:, 1:], labels[:, :-1])
    else:  # corrupted positions show MASK_TOKEN, every label is the original token
        changed = inputs != labels
        assert torch.all(inputs[changed] == 0)
        corrupt = float((inputs == 0).float().mean())
        assert 0.08 < corrupt < 0.25  # 15% corrupted, plus the tokens drawn as 0


def test_transformer_decoder_is_causal_and_encoder_is_not():
    """Changing the last token changes no earlier logit in the decoder, every logit in the encoder."""
    for stack, attention in (("decoder", "fused"), ("decoder", "einsum"), ("encoder", "fused"),
                             ("encoder", "einsum")):
        spec = _transformer(stack=stack, attention=attention)
        model = families.builder(spec, "torch")(spec, "float32")
        torch.manual_seed(0)
        module = model.make_module()
        tokens = torch.randint(1, spec.vocab, (2, spec.length))
        other = tokens.clone()
        other[:, -1] = other[:, -1] % (spec.vocab - 1) + 1  # another token in [1, vocab)
        with torch.no_grad():
            a, b = module(tokens), module(other)
        same_prefix = torch.allclose(a[:, :-1], b[:, :-1], atol=1e-6)
        assert same_prefix == (stack == "decoder"), (stack, attention)


@pytest.mark.parametrize("attention", ["fused", "einsum"])
def test_transformer_bfloat16_autocast_trains(attention, tiny_settings):
    fields = {"layers": 1, "d_model": 16, "heads": 2, "d_ff": 32, "length": 8, "vocab": 32,
              "attention": attention}
    _, program = _compiled("transformer", fields, 2, tiny_settings, dtype="bfloat16")
    state, data = B.init(program)
    assert all(p.dtype == torch.float32 for p in state["module"].parameters())  # master weights
    state, first = program.call(state, data, 1)
    state, second = program.call(state, data, 1)
    assert first.dtype == torch.float32 and B.loss_value(second) < B.loss_value(first)


def test_the_same_max_pool_without_a_pad_takes_the_padded_pools_windows():
    """Where SAME adds one row and column at the end only, the pool uses ceil_mode instead of a
    -inf pad: the same values on every map size, kernel and stride tried."""
    import itertools

    import torch.nn.functional as F

    from paradnn.backends.torch.models.generated import _max_pool_same, same_pads

    gen = torch.Generator().manual_seed(0)
    fast = 0
    for n, m, k, s in itertools.product(range(1, 40), range(1, 12), (1, 2, 3, 4), (1, 2, 3)):
        x = torch.randn(1, 2, n, m, generator=gen)
        (lo_h, hi_h), (lo_w, hi_w) = same_pads(n, k, s), same_pads(m, k, s)
        padded = F.max_pool2d(F.pad(x, (lo_w, hi_w, lo_h, hi_h), value=float("-inf")), k, s)
        assert torch.equal(_max_pool_same(x, k, s), padded), (n, m, k, s)
        fast += lo_h == lo_w == 0 and 0 < max(hi_h, hi_w) <= 1
    assert fast > 100  # the ceil_mode path is among the shapes tried (the stem's: 32x32, 3, 2)


_FAULTS_PER_STEP = """
import json, resource, statistics, sys
import paradnn
from paradnn import backends
from paradnn.backends.torch import allocator
from paradnn.measure import MeasureSettings
from paradnn.workload import Workload
choice = sys.argv[1]
if choice == "fixed":  # the product's path for `system` after `reuse` in one process
    allocator.apply("reuse")
    choice = "system"
b = backends.get("torch")
work = Workload(paradnn.FC(layers=2, nodes=1024, input=1024, output=512), 256, "float32", None, 1, "torch")
program = b.compile(work, MeasureSettings(steps_per_call=1, torch_compile="eager", cpu_allocator=choice))
state, data = b.init(program)
state, loss = program.call(state, data, 10)
per_step = []
for _ in range(20):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    state, loss = program.call(state, data, 1)
    per_step.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
# What faulting 4 MiB of fresh memory costs on this host: 1,024 with 4 KiB pages; a few where the
# kernel backs anonymous mappings with transparent huge pages (THP "always").
import ctypes, mmap
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = mmap.mmap(-1, 4 << 20)
ctypes.memset(ctypes.addressof(ctypes.c_char.from_buffer(block)), 1, 4 << 20)
per_4mib = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"median": statistics.median(per_step), "per_step": per_step, "faults_per_4mib": per_4mib,
                  "used": program.metrics["cpu_allocator_used"]}))
"""


def _faults_per_step(choice: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _FAULTS_PER_STEP, choice], capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(tb.allocator._mallopt() is None, reason="needs glibc's mallopt (a Linux host with glibc)")
def test_the_reuse_allocator_ends_the_page_faults_of_every_step():
    """With glibc's thresholds at their 128 KiB defaults, each CPU step faults in the memory the
    last one freed (about 8,000 minor faults per step on this FC); ``cpu_allocator="reuse"`` keeps
    it. Each setting in a fresh process: mallopt is process-wide and cannot be undone.

    The fixed 128 KiB thresholds (what ``system`` sets back after ``reuse``), not a process with
    glibc's untouched defaults, are the reference: glibc's dynamic threshold makes the untouched
    defaults settle in some processes and not in others (median 0 in 4 of 8 fresh processes here,
    2,016-3,040 faults per step in the other 4; a CI run read 51 per step), so they cannot be
    asserted to fault. Medians of per-step counts, because a one-time allocation (a 4 MiB buffer:
    1,025 faults) can land in any step of either setting."""
    fixed, reuse, untouched = (_faults_per_step(choice) for choice in ("fixed", "reuse", "system"))
    if fixed["faults_per_4mib"] < 512:
        pytest.skip(f"this host faults fresh memory in large pages ({fixed['faults_per_4mib']} faults per "
                    "4 MiB; transparent huge pages): the per-step counts cannot show 4 KiB pages faulted in")
    assert "default thresholds (128 KiB) set back" in fixed["used"], fixed
    assert "kept for reuse" in reuse["used"] and "32 MiB" in reuse["used"], reuse
    assert untouched["used"] == "glibc malloc, defaults", untouched
    assert fixed["median"] > 1000, fixed
    assert reuse["median"] < 50, reuse
    assert sum(reuse["per_step"]) < sum(fixed["per_step"]) / 10, (reuse, fixed)


def test_the_allocator_setting_is_an_option_and_bad_values_say_what_is_allowed():
    from paradnn.measure import MeasureSettings

    assert MeasureSettings().options_for("torch").cpu_allocator == "reuse"
    with pytest.raises(SpecError, match="cpu_allocator='fast'.*reuse, system"):
        MeasureSettings(cpu_allocator="fast")


def test_an_image_model_runs_in_the_layout_asked_for_with_the_same_losses(tiny_settings):
    """``memory_format`` changes where the CNN's tensors keep their elements, not what the step
    computes: channels_last puts the input and every 4-D weight in NHWC order (the record says
    which), contiguous leaves torch's NCHW; both give the same losses step by step. A model
    without image inputs has no layout to choose (None)."""
    name, fields, batch = next(c.values for c in TINY_CASES if c.values[0] == "cnn")
    losses = {}
    for layout in ("channels_last", "contiguous"):
        _, program = _compiled(name, fields, batch, tiny_settings.replace(memory_format=layout))
        assert program.metrics["memory_format_used"] == layout
        state, data = B.init(program)
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        weights = [p for p in state["module"].parameters() if p.dim() == 4]
        assert weights and all(p.is_contiguous(memory_format=fmt) for p in [*weights, data["inputs"]])
        if layout == "channels_last":  # a C x H x W tensor in NHWC order is not NCHW-contiguous
            assert not data["inputs"].is_contiguous()
        losses[layout] = []
        for _ in range(3):
            state, loss = program.call(state, data, 1)
            losses[layout].append(B.loss_value(loss))
    assert losses["channels_last"] == pytest.approx(losses["contiguous"], rel=1e-4)
    fc = next(c.values for c in TINY_CASES if c.values[0] == "fc")
    assert _compiled(*fc, tiny_settings)[1].metrics["memory_format_used"] is None


def test_the_memory_format_is_an_option_and_bad_values_say_what_is_allowed():
    from paradnn.measure import MeasureSettings

    assert MeasureSettings().options_for("torch").memory_format == "channels_last"
    with pytest.raises(SpecError, match="memory_format='nhwc'.*channels_last, contiguous"):
        MeasureSettings(memory_format="nhwc")
