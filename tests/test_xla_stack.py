"""XLA presets: "best" is the recorded default, "stock" one option away, both compile the same
maths, and the record says which ran."""

import json
import subprocess

import jax
import numpy as np
import pytest

import paradnn
from paradnn.backends.jax import step as wl
from paradnn.backends.jax import xla_stack as xla_stack
from paradnn.backends.jax.models import build
from paradnn.backends.steploop import auto_step_loop
from paradnn.families.fc import FC
from paradnn.workload import Workload

SPEC = FC(layers=2, nodes=64, input=100, output=10)


def _compiled_text(preset: str) -> str:
    work = Workload(SPEC, 32, "float32", None, 1)
    model = build(SPEC, "float32")
    state, batch = wl.abstract_inputs(work, model, model.default_optimizer)
    return wl.compile_step(wl.jit_step(model, model.default_optimizer), state, batch, preset=preset).as_text()


def test_every_preset_compiles_here():
    # An option this jaxlib does not know fails the compile ("No such compile option"): a
    # jax upgrade that drops one must fail here, not in every record of a sweep.
    for preset in xla_stack.PRESETS:
        assert "ENTRY" in _compiled_text(preset)


def test_preset_options_reach_the_compiler_per_compile(monkeypatch):
    # The options travel with one compile, not through XLA_FLAGS: a preset with YNNPACK's
    # dot+epilogue fusion gives another program than stock, in the same process.
    if jax.default_backend() != "cpu":
        pytest.skip("the planted option is an XLA:CPU option; this backend is " + jax.default_backend())
    monkeypatch.setitem(xla_stack.PRESETS, "ynn-dot",
                        {"cpu": {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}})
    assert _compiled_text("ynn-dot") != _compiled_text("stock")
    assert xla_stack.compile_options("stock", "cpu") is None


def test_best_is_default_and_stock_gives_the_same_losses(tiny_settings):
    assert paradnn.MeasureSettings().xla_preset == "best"
    best = paradnn.run(SPEC, batch=32, settings=tiny_settings)
    stock = paradnn.run(SPEC, batch=32, settings=tiny_settings, xla_preset="stock")
    assert best.status == stock.status == "ok", (best.error, stock.error)
    # (The protocol may time a different number of calls per preset, so the losses are
    # compared step for step in the next test.)
    assert best.settings["xla_preset"] == "best" and stock.settings["xla_preset"] == "stock"
    assert best.key != stock.key  # never deduplicated into one row
    meaning = json.loads(best.software["xla_compile_options"])
    assert meaning["stock"] == {}
    assert meaning["best"] == xla_stack.PRESETS["best"].get(jax.default_backend(), {})


def test_same_loss_trajectory_under_both_presets():
    work = Workload(SPEC, 32, "float32", None, 1)
    model = build(SPEC, "float32")
    opt = model.default_optimizer
    losses = {}
    for preset in ("best", "stock"):
        state, batch = wl.init_inputs(work, model, opt)
        call, _ = wl.compile_measured(model, opt, None, state, batch, preset, loop="device")
        trajectory = []
        for _ in range(3):
            state, loss = call(state, batch, np.int32(2))
            trajectory.append(float(loss))
        losses[preset] = trajectory
    assert losses["best"][-1] < losses["best"][0]  # it trains
    np.testing.assert_allclose(losses["best"], losses["stock"], rtol=1e-4)


def test_unknown_preset_is_a_spec_error():
    with pytest.raises(paradnn.SpecError, match="xla_preset"):
        paradnn.MeasureSettings(xla_preset="fastest")


def test_cli_xla_preset_flag(paradnn_cmd):
    proc = subprocess.run(paradnn_cmd + ["run", "fc", "--layers", "1", "--nodes", "8", "--input", "8",
                                         "--output", "8", "--xla-preset", "fastest"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "xla_preset" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        paradnn_cmd + ["run", "fc", "--layers", "2", "--nodes", "64", "--input", "100", "--output", "10",
                       "--batch", "32", "--json", "--steps-per-call", "2", "--min-calls", "6",
                       "--max-calls", "6", "--time-budget-s", "0.2", "--xla-preset", "stock"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert row["status"] == "ok" and row["xla_preset"] == "stock"
    assert json.loads(row["xla_compile_options"])["stock"] == {}


def test_step_loop_auto_runs_convolutions_from_the_host_on_cpu(tiny_settings):
    """XLA:CPU runs convolution gradients slowly inside a while-loop body, so ``auto`` calls a
    one-step program K times for a CNN on a CPU and keeps the in-program loop otherwise; both
    loops compute the same training steps."""
    cnn = paradnn.CNN("residual", 1, 8, 32, 10)
    auto = paradnn.run(cnn, batch=4, settings=tiny_settings)
    device = paradnn.run(cnn, batch=4, settings=tiny_settings, step_loop="device")
    fc = paradnn.run(SPEC, batch=32, settings=tiny_settings)
    assert auto.status == device.status == fc.status == "ok", (auto.error, device.error, fc.error)
    backend = jax.default_backend()
    assert auto.metrics["step_loop_used"] == auto_step_loop(backend, has_convolution=True)
    assert device.metrics["step_loop_used"] == "device"
    assert fc.metrics["step_loop_used"] == auto_step_loop(backend)
    # One step of work either way: the executed FLOPs agree.
    assert auto.metrics["flops_per_step"] == pytest.approx(device.metrics["flops_per_step"], rel=0.02)
    with pytest.raises(paradnn.SpecError, match="step_loop"):
        paradnn.MeasureSettings(step_loop="gpu")


def test_auto_step_loop_by_platform():
    """``auto``: (JAX) the host loop on a GPU for every program (XLA:GPU waits for the host
    after each iteration of a loop with a run-time trip count) and on a CPU for a program with a
    convolution (slow in an XLA:CPU loop body); the in-program loop elsewhere."""
    assert auto_step_loop("gpu") == "host" and auto_step_loop("gpu", has_convolution=True) == "host"
    assert auto_step_loop("cpu") == "device" and auto_step_loop("cpu", has_convolution=True) == "host"
    assert auto_step_loop("tpu") == "device" and auto_step_loop("tpu", has_convolution=True) == "device"
    # TensorFlow: the convolution rule only (its host calls cost about 0.5 ms each).
    assert auto_step_loop("gpu", framework="tensorflow") == "device"
    assert auto_step_loop("cpu", True, "tensorflow") == "host" and auto_step_loop("cpu", False, "tensorflow") == "device"
    # One list of loops for every XLA framework's option.
    from paradnn.backends.jax.options import JaxOptions
    from paradnn.backends.tensorflow.options import TensorFlowOptions
    from paradnn.backends.steploop import STEP_LOOPS

    for options in (JaxOptions, TensorFlowOptions):
        assert options().step_loop == "auto"
        for loop in STEP_LOOPS:
            assert options(step_loop=loop).step_loop == loop
