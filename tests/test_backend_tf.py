"""The TensorFlow backend (Keras 3 + XLA): layouts, training steps, FLOPs, optimizers, errors.

TensorFlow is never imported in the pytest process (with torchvision in one process it aborts:
"LLVM ERROR: inconsistency in registered CommandLine options"), so every TensorFlow part runs
in a subprocess (``_tf_run``: a small script that prints one JSON line); the comparisons with
JAX and with the analytic counts happen here.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import child_env
from paradnn import families
from paradnn.backends import available
from paradnn.backends.steploop import auto_step_loop

pytestmark = pytest.mark.skipif(available("tensorflow") is not None,
                                reason=f"TensorFlow backend unavailable: {available('tensorflow')}")

ROOT = Path(__file__).resolve().parents[1]
ZOO_TF = ("resnet18", "resnet50", "resnet101", "resnet152", "densenet121", "mobilenet", "vgg16",
          "inception_v3")

# Shared by every script: quiet TensorFlow, the tiny measurement settings of tests/helpers.py
# (tests/ is on the script's PYTHONPATH: helpers.child_env).
_PRELUDE = """
import json, math, sys
from helpers import TINY
from paradnn import families
from paradnn.backends.tensorflow import backend as tb
from paradnn.measure import MeasureSettings, time_calls
from paradnn.families.real import Real
from paradnn.workload import Workload
B = tb.BACKEND
LAST = []  # the program train() ran last

def tiny(family):
    out = []
    for t in families.get(family).tiny:
        t = dict(t); batch = t.pop("batch")
        out.append((families.get(family).spec(**t), batch))
    return out

def train(spec, batch, dtype="float32", optimizer=None, costs=True):
    w = Workload(spec, batch, dtype, optimizer, framework="tensorflow")
    p = B.compile(w, TINY)
    state, data = B.init(p)
    state, loss = p.call(state, data, 1)  # the loss of the first step is the initial loss
    first = B.loss_value(loss)
    state, loss = p.call(state, data, 1)
    second = B.loss_value(loss)
    timing = time_calls(p.call, state, data, TINY, sync=B.sync)
    LAST[:] = [p]
    out = {"spec": spec.to_dict(), "batch": batch, "params": p.metrics["params"],
           "compile_s": p.metrics["compile_s"], "loop": p.metrics["step_loop_used"],
           "platform": tb._device_platform(),
           "state_bytes": p.state_bytes, "first": first, "second": second,
           "timed_loss": timing.final_loss, "median_s": timing.median_s}
    if costs:
        out["costs"] = B.costs(p)
    return out
"""


def _tf_run(body: str, timeout: float = 900, env: dict[str, str] | None = None) -> object:
    """Run ``body`` (after the prelude) in a fresh interpreter; it must ``print(json.dumps(x))``
    last. Returns ``x``."""
    code = _PRELUDE + textwrap.dedent(body)
    environment = child_env(TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          env=environment, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _tiny(family: str):
    out = []
    for t in families.get(family).tiny:
        t = dict(t)
        batch = t.pop("batch")
        out.append((families.get(family).spec(**t), batch))
    return out


def _jax_flops(spec, batch: int, optimizer: str) -> float:
    """Executed FLOPs of one step from the JAX program (XLA cost analysis, the K-step loop)."""
    from paradnn.backends.jax import costs as costs
    from paradnn.backends.jax import step as wl
    from paradnn.backends.jax.models import build
    from paradnn.workload import Workload

    w = Workload(spec, batch, "float32", optimizer)
    model = build(spec, "float32")
    state, data = wl.abstract_inputs(w, model, optimizer)
    compiled, _, _ = wl.compile_measured(model, optimizer, None, state, data, loop="device")
    return costs.xla_step_costs(w, model, optimizer, compiled)["flops_per_step"]


def _check_step(r: dict, classes: int, convolutions: bool = False) -> None:
    """Initial loss near ln(classes) (the JAX models start there too), one step lowers it, the
    timed loss is finite; ``auto`` picked its loop (the host loop for convolutions on a CPU,
    so the first loss is also the state's after compile put the variables back)."""
    assert abs(r["first"] - math.log(classes)) < 0.5 * math.log(classes), r
    assert r["second"] < r["first"], r
    assert math.isfinite(r["timed_loss"]), r
    assert r["loop"] == auto_step_loop(r["platform"], convolutions, "tensorflow")
    assert r["compile_s"] > 0 and r["median_s"] > 0


def test_generated_params_equal_closed_forms_in_every_dtype():
    out = _tf_run("""
        from paradnn.backends.tensorflow.models import trainable_params
        res = []
        for fam in ("fc", "cnn", "rnn"):
            for spec, batch in tiny(fam):
                for dtype in ("float32", "bfloat16", "float16"):
                    m = families.builder(spec, "tensorflow")(spec, dtype)
                    kinds = {v.dtype for v in m.model.trainable_variables}
                    res.append({"spec": spec.to_dict(), "dtype": dtype, "params": trainable_params(m.model),
                                "variable_dtypes": sorted(kinds), "compute": m.model.layers[-1].compute_dtype})
        print(json.dumps(res))
    """)
    assert len(out) == 3 * (1 + 2 + 3)
    for r in out:
        spec = families.get(r["spec"]["family"]).spec(**{k: v for k, v in r["spec"].items() if k != "family"})
        assert r["params"] == families.param_count(spec), r
        assert r["variable_dtypes"] == ["float32"], r  # master weights stay float32
        assert r["compute"] == r["dtype"], r  # mixed_bfloat16 / mixed_float16 compute dtypes


@pytest.mark.slow
def test_fc_trains_costs_and_reports():
    """FC tiny: a step lowers the loss from ~ln(classes), the timing protocol gets a finite loss,
    the executed FLOPs equal JAX's within 10%; bfloat16 trains; a larger FC's executed FLOPs are
    within 10% of the analytic count; the backend's facts and errors."""
    (spec, batch), = _tiny("fc")
    out = _tf_run("""
        from paradnn.families.fc import FC
        from paradnn.errors import ParadnnError, SpecError
        (spec, batch), = tiny("fc")
        r = {"f32": train(spec, batch), "bf16": train(spec, batch, "bfloat16", costs=False)}
        big = Workload(FC(2, 256, 256, 64), 64, "float32", "sgd", framework="tensorflow")
        r["big"] = B.costs(B.compile(big, TINY))
        p = B.compile(Workload(spec, batch, framework="tensorflow"), TINY)
        st, data = B.init(p)
        p.call(st, data, 1)
        try:
            B.init(p)
            r["reinit"] = "no error"
        except ParadnnError as e:
            r["reinit"] = type(e).__name__
        # K steps per call really run K steps: Adam's step counter counts them.
        p = B.compile(Workload(spec, batch, "float32", "adam", framework="tensorflow"), TINY)
        st, data = B.init(p)
        B.sync(p.call(st, data, 3))
        r["adam_count_after_k3"] = int(p.handle.optimizer.count.numpy())
        B.sync(p.call(st, data, 0))
        r["adam_count_after_k0"] = int(p.handle.optimizer.count.numpy())
        # the host step loop: a one-step program called K times
        p = B.compile(Workload(spec, batch, framework="tensorflow"), TINY.replace(step_loop="host"))
        st, data = B.init(p)
        r["host"] = [p.metrics["step_loop_used"], time_calls(p.call, st, data, TINY, sync=B.sync).final_loss]
        # ... compiled in compile (it ran one step there) with every variable put back: Adam's
        # counter and the weights are the fixed-seed state's, and K steps count K.
        p = B.compile(Workload(spec, batch, "float32", "adam", framework="tensorflow"), TINY.replace(step_loop="host"))
        fresh = B.compile(Workload(spec, batch, "float32", "adam", framework="tensorflow"), TINY)
        st, data = B.init(p)
        r["host_count_after_compile"] = int(p.handle.optimizer.count.numpy())
        r["host_weights_as_initialized"] = all(
            bool((a.numpy() == b.numpy()).all()) for a, b in zip(p.handle.tfm.model.variables, fresh.handle.tfm.model.variables))
        B.sync(p.call(st, data, 3))
        r["host_count_after_k3"] = int(p.handle.optimizer.count.numpy())
        try:
            B.compile(Workload(spec, 2, devices=2, framework="tensorflow"), TINY)
        except SpecError as e:
            r["devices"] = e.parameter
        tf = tb.start_tf()
        r["oom"] = [B.is_oom(tf.errors.ResourceExhaustedError(None, None, "oom")), B.is_oom(ValueError("x"))]
        from paradnn import backends
        r["protocol"] = [isinstance(B, backends.Backend), backends.get("tensorflow") is B]
        r["device"], r["software"] = B.device_info(), B.software_info()
        r["memory"] = B.device_memory_bytes()
        restore = B.configure_cache("/nonexistent"); restore()
        print(json.dumps(r))
    """, env={"PARADNN_TF_INTRA_OP_THREADS": "1"})
    _check_step(out["f32"], spec.output)
    _check_step(out["bf16"], spec.output)
    assert out["f32"]["params"] == families.param_count(spec)
    # weights + biases + RMSprop's two slots, float32
    assert out["f32"]["state_bytes"] == 3 * 4 * families.param_count(spec)
    jax_flops = _jax_flops(spec, batch, "rmsprop")
    assert out["f32"]["costs"]["flops_per_step"] == pytest.approx(jax_flops, rel=0.10)
    assert "xla-cost-analysis" in out["f32"]["costs"]["flops_source"]
    from paradnn.families.fc import FC

    big = FC(2, 256, 256, 64)
    assert out["big"]["flops_per_step"] == pytest.approx(families.get("fc").train_flops_per_example(big) * 64, rel=0.10)
    assert out["big"]["bytes_per_step"] > 0
    assert out["reinit"] == "ParadnnError"
    assert out["adam_count_after_k3"] == 3 and out["adam_count_after_k0"] == 3
    assert out["host"][0] == "host" and math.isfinite(out["host"][1])
    assert out["host_count_after_compile"] == 0 and out["host_count_after_k3"] == 3
    assert out["host_weights_as_initialized"]
    assert out["devices"] == "devices"
    assert out["oom"] == [True, False]
    assert out["protocol"] == [True, True]
    assert out["device"]["device_platform"] in ("cpu", "gpu", "tpu") and out["device"]["device_count"] >= 1
    assert out["device"]["cpu_model"]
    sw = out["software"]
    assert sw["framework_version"] == sw["tf_version"] and sw["keras_version"].startswith("3.")
    assert sw["keras_backend"] == "tensorflow"
    assert sw["tf_intra_op_threads"] == 1  # the environment override is applied and recorded
    assert sw["tf_inter_op_threads"] >= 1
    # What the step loops mean is in the key: rows measured before the rule changed resume as
    # other configs (measured again), not as these.
    assert json.loads(sw["tf_step_loops"]) == {"auto": {"host_on": [], "host_for_convolutions_on": ["cpu"]},
                                               "host": "compiled in compile"}
    from paradnn.record import row_key

    row = {"family": "fc", **spec.to_dict(), "batch": batch, "dtype": "float32", "optimizer": "rmsprop",
           "devices": 1, "framework": "tensorflow", **out["device"], **sw}
    before = {k: v for k, v in row.items() if k != "tf_step_loops"}
    assert row_key(row) is not None and row_key(row) != row_key(before)
    assert out["memory"] is None or out["memory"] > 0


@pytest.mark.slow
def test_rnn_cells_train_and_flops_match_jax():
    """Every cell: a step lowers the loss; executed FLOPs (the time loop extrapolated from
    unrolled 1- and 2-step variants, as in JAX) equal JAX's within 10% at width 32, where the
    matmuls dominate (at the tiny width 8 element-wise work, counted slightly differently by
    the two programs, is most of the step)."""
    out = _tf_run("""
        from paradnn.families.rnn import RNN
        r = {"tiny": [train(spec, batch) for spec, batch in tiny("rnn")]}
        r["wide"] = [tb.step_costs(Workload(RNN(c, 1, 32, 3, 32), 4, "float32", "rmsprop",
                                            framework="tensorflow"))["flops"] for c in ("rnn", "lstm", "gru")]
        print(json.dumps(r))
    """)
    from paradnn.families.rnn import RNN

    assert [r["spec"]["cell"] for r in out["tiny"]] == ["rnn", "lstm", "gru"]
    for r, (spec, batch) in zip(out["tiny"], _tiny("rnn")):
        assert r["params"] == families.param_count(spec)
        _check_step(r, spec.vocab)
        analytic = families.get("rnn").train_flops_per_example(spec) * batch
        assert r["costs"]["flops_per_step"] >= analytic  # matmuls plus element-wise work
    for flops, cell in zip(out["wide"], ("rnn", "lstm", "gru")):
        assert flops == pytest.approx(_jax_flops(RNN(cell, 1, 32, 3, 32), 4, "rmsprop"), rel=0.10), cell


@pytest.mark.slow
def test_cnn_blocks_train_and_flops():
    """Both blocks: a step lowers the loss; executed FLOPs equal JAX's within 10%; at filters 32
    (convolutions dominate) within 10% of the analytic count."""
    out = _tf_run("""
        from paradnn.families.cnn import CNN
        r = {"tiny": [], "bn_means": []}
        for spec, batch in tiny("cnn"):
            r["tiny"].append(train(spec, batch, optimizer="momentum"))
            # batch norm's running statistics (initially 0) are updated by the compiled step
            r["bn_means"].append([float(abs(v.numpy()).sum()) for v in LAST[0].handle.tfm.model.non_trainable_variables
                                  if "moving_mean" in v.path])
        r["wide"] = [tb.step_costs(Workload(CNN(b, 1, 32, 32, 10), 8, "float32", "sgd",
                                            framework="tensorflow"))["flops"]
                     for b in ("residual", "bottleneck")]
        print(json.dumps(r))
    """)
    from paradnn.families.cnn import CNN

    for r, (spec, batch) in zip(out["tiny"], _tiny("cnn")):
        assert r["params"] == families.param_count(spec)
        _check_step(r, spec.output, convolutions=True)
        assert r["costs"]["flops_per_step"] == pytest.approx(_jax_flops(spec, batch, "momentum"), rel=0.10)
    for means in out["bn_means"]:
        assert means and all(m > 0 for m in means)
    for flops, block in zip(out["wide"], ("residual", "bottleneck")):
        spec = CNN(block, 1, 32, 32, 10)
        assert flops == pytest.approx(families.get("cnn").train_flops_per_example(spec) * 8, rel=0.10)


@pytest.mark.slow
def test_zoo_params_equal_jax():
    from paradnn.backends.jax.models import param_count
    from paradnn.families.real import Real

    out = _tf_run(f"""
        from paradnn.backends.tensorflow.models import trainable_params
        from paradnn.errors import SpecError
        res = {{}}
        for name in {ZOO_TF!r}:
            spec = Real(name, image=75 if name == "inception_v3" else 32)
            res[name] = trainable_params(families.builder(spec, "tensorflow")(spec, "float32").model)
        # PyTorch-style padding as the conv's own padding equals zero padding + a VALID conv,
        # forward and gradient
        import numpy as np
        from paradnn.backends.tensorflow.models.zoo import PaddedConv2D
        tf = tb.start_tf()
        import keras
        x = tf.random.stateless_normal((2, 9, 9, 3), (0, 1))
        padded = PaddedConv2D(4, 3, 2, 1)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            a = padded(x)
            b = tf.nn.conv2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), padded.kernel, 2, "VALID")
        res["padded_conv"] = [list(a.shape), float(tf.reduce_max(tf.abs(a - b))),
                              float(tf.reduce_max(tf.abs(tape.gradient(a, x) - tape.gradient(b, x)))),
                              list(padded.compute_output_shape((2, 9, 9, 3)))]
        try:
            families.builder(Real("inception_v3", image=64), "tensorflow")(Real("inception_v3", image=64), "float32")
        except SpecError as e:
            res["small_image"] = e.parameter
        print(json.dumps(res))
    """)
    for name in ZOO_TF:
        assert out[name] == param_count(Real(name, image=75 if name == "inception_v3" else 32)), name
    assert out["small_image"] == "image"
    shape, forward_diff, grad_diff, declared = out["padded_conv"]
    assert shape == declared == [2, 5, 5, 4] and forward_diff < 1e-5 and grad_diff < 1e-5


@pytest.mark.slow
def test_zoo_model_trains(monkeypatch):
    """One zoo model end to end (MobileNet: the cheapest to compile); executed FLOPs of two."""
    out = _tf_run("""
        r = train(Real("mobilenet", image=32), 2, costs=False)
        r["flops"] = {n: tb.step_costs(Workload(Real(n, image=32), 2, "float32", "sgd",
                                                framework="tensorflow"))["flops"] for n in ("mobilenet", "resnet50")}
        print(json.dumps(r))
    """)
    _check_step(out, 1000, convolutions=True)
    from paradnn.backends.jax.models import depthwise
    from paradnn.families.real import Real

    # executed FLOPs equal JAX's within 10%: depthwise convolutions, strided PyTorch-padded ones.
    # TensorFlow's XLA computes a depthwise weight gradient as JAX's own transpose does (a dense
    # C x C convolution on a CPU), so MobileNet compares with that; paradnn's JAX model takes it
    # from the taps on a CPU (models/depthwise.py) and executes less.
    taps = _jax_flops(Real("mobilenet", image=32), 2, "sgd")
    monkeypatch.setattr(depthwise, "MIN_CHANNELS", 10 ** 9)
    for name, flops in out["flops"].items():
        assert flops == pytest.approx(_jax_flops(Real(name, image=32), 2, "sgd"), rel=0.10), name
    assert taps < 0.8 * out["flops"]["mobilenet"]


def test_optimizers_follow_optax():
    """Three updates of each optimizer on the same gradients: TensorFlow equals optax (adafactor
    with a factored 2-D, an unfactored 2-D and a 1-D parameter)."""
    out = _tf_run("""
        import numpy as np
        rng = np.random.default_rng(0)
        shapes = [(130, 140), (3, 5), (7,)]
        params = [rng.standard_normal(s).astype("float32") for s in shapes]
        grads = [[rng.standard_normal(s).astype("float32") for s in shapes] for _ in range(3)]
        tf = tb.start_tf()
        res = {}
        for name in ("rmsprop", "sgd", "momentum", "adam", "adafactor"):
            vs = [tf.Variable(p) for p in params]
            opt = tb.make_optimizer(name)
            opt.build(vs)
            for g in grads:
                opt.apply([tf.constant(x) for x in g], vs)
            res[name] = [v.numpy().tolist() for v in vs]
        print(json.dumps({"params": [p.tolist() for p in params],
                          "grads": [[x.tolist() for x in g] for g in grads], "tf": res}))
    """)
    import jax.numpy as jnp
    import numpy as np
    import optax

    from paradnn.backends.jax.step import make_optimizer

    for name, tf_params in out["tf"].items():
        params = [jnp.asarray(p, jnp.float32) for p in out["params"]]
        tx = make_optimizer(name)
        state = tx.init(params)
        for g in out["grads"]:
            updates, state = tx.update([jnp.asarray(x, jnp.float32) for x in g], state, params)
            params = optax.apply_updates(params, updates)
        for want, got in zip(params, tf_params):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6, err_msg=name)
