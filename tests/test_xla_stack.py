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
        call, _, _ = wl.compile_measured(model, opt, None, state, batch, preset, loop="device")
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
    # One step of work either way: the executed FLOPs agree. XLA counts each optimized program;
    # this CNN compiles with best's fallback (no algebraic simplifier), which leaves the two
    # programs different element-wise leftovers (10.03 and 9.83 MFLOP: 2%; 0.5% with stock).
    assert auto.metrics["flops_per_step"] == pytest.approx(device.metrics["flops_per_step"], rel=0.05)
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


CNN = paradnn.CNN("residual", 1, 4, 32, 5)
#: One tiny config of each kind of step program: dense layers, a scanned recurrence, attention,
#: convolutions with batch norm (its statistics an extra, mutable state).
REPLAYED = [SPEC, paradnn.RNN("lstm", 1, 8, 3, 11), paradnn.Transformer(1, 16, 2, 32, 4, 32), CNN]


def _abstract(spec):
    model = build(spec, "float32")
    opt = model.default_optimizer
    return (model, opt, *wl.abstract_inputs(Workload(spec, 2, "float32", None, 1), model, opt))


@pytest.mark.parametrize("spec", REPLAYED, ids=lambda s: type(s).__name__)
def test_a_replayed_step_lowers_to_the_same_k_step_program(spec):
    """The K-step loop around a replay of the traced single step (what ``compile_measured``
    lowers, tracing the model once) is the program that tracing the model inside the loop gives."""
    model, opt, state, batch = _abstract(spec)
    single = wl.jit_step(model, opt, donate=True).trace(state, batch)
    replayed = wl.jit_multi_step(model, opt, step=wl.replay(single)).lower(state, batch, wl.STEPS_ARG)
    direct = wl.jit_multi_step(model, opt).lower(state, batch, wl.STEPS_ARG)
    assert replayed.as_text() == direct.as_text()


def _count_model_traces(monkeypatch) -> list[int]:
    """A list that grows by one each time a training step of ``wl.step_fn`` is traced (the
    model's Python runs: Flax modules, optax). XLA's compile is skipped: only the tracing is
    under test, and the lowered program is the one tested above."""
    monkeypatch.setattr(xla_stack, "compile_lowered", lambda lowered, preset, platform: (None, {}))
    traced: list[int] = []
    real_step_fn = wl.step_fn

    def counting_step_fn(model, optimizer_name):
        step = real_step_fn(model, optimizer_name)

        def counted(*args):
            traced.append(1)
            return step(*args)

        return counted

    monkeypatch.setattr(wl, "step_fn", counting_step_fn)
    return traced


@pytest.mark.parametrize("spec, loop", [(SPEC, "auto"), (CNN, "auto"), (SPEC, "device"), (SPEC, "host"),
                                        (CNN, "device")], ids=str)
def test_the_measured_program_traces_the_model_once(monkeypatch, spec, loop):
    """Whichever loop runs, and however ``auto`` picks it, the model's Python runs once per
    compile: a CNN's auto step on a CPU used to be traced as the K-step loop, then again as the
    single step."""
    model, opt, state, batch = _abstract(spec)
    traced = _count_model_traces(monkeypatch)
    _, used, _ = wl.compile_measured(model, opt, None, state, batch, loop=loop)
    assert len(traced) == 1
    has_convolution = isinstance(spec, paradnn.CNN)
    assert used == (auto_step_loop(jax.default_backend(), has_convolution) if loop == "auto" else loop)


@pytest.mark.parametrize("spec", [SPEC, CNN], ids=str)
@pytest.mark.parametrize("hint", [True, False])
def test_autos_loop_comes_from_the_program_whatever_is_traced_first(monkeypatch, spec, hint):
    """The batch's shape only says which form of the step to trace first: a step traced first as
    the single step and without a convolution is replayed into the K-step loop (no second trace),
    and a step traced first as the K-step loop that has one is traced again as the single step;
    the loop used is the same either way."""
    monkeypatch.setattr(wl, "_likely_convolutional", lambda batch: hint)
    model, opt, state, batch = _abstract(spec)
    traced = _count_model_traces(monkeypatch)
    _, used, _ = wl.compile_measured(model, opt, None, state, batch)
    has_convolution = isinstance(spec, paradnn.CNN)
    assert used == auto_step_loop(jax.default_backend(), has_convolution)
    program_decides = auto_step_loop(jax.default_backend()) != auto_step_loop(jax.default_backend(), True)
    assert len(traced) == (2 if program_decides and has_convolution and not hint else 1)


def _small_spatial_conv_grad():
    """The gradient of a 3x3 SAME convolution over a 2x2 image (a CNN's last stage on small
    images): XLA:CPU's algebraic simplifier swaps its operands into a loop-emitted convolution."""
    x = jax.random.normal(jax.random.key(0), (4, 2, 2, 8))
    w = jax.random.normal(jax.random.key(1), (3, 3, 8, 8))

    def loss(x, w):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return (y ** 2).sum()

    return jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w), (x, w)


def test_the_best_presets_fallback_replaces_loop_emitted_convolutions_with_the_same_results():
    if jax.default_backend() != "cpu":
        pytest.skip("the fallback is XLA:CPU's; this backend is " + jax.default_backend())
    lowered, args = _small_spatial_conv_grad()
    stock = lowered.compile()
    assert xla_stack.loop_emitted_convolutions(stock.as_text()) > 0  # the slow path is there
    best, used = xla_stack.compile_lowered(lowered, "best", "cpu")
    assert used == xla_stack.FALLBACKS["best"]["cpu"].options == {"xla_disable_hlo_passes": "algsimp"}
    assert xla_stack.loop_emitted_convolutions(best.as_text()) == 0
    for a, b in zip(stock(*args), best(*args)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    # stock has no fallback: XLA's defaults, slow path and all
    assert xla_stack.compile_lowered(lowered, "stock", "cpu")[1] == {}


def test_an_operation_profile_compiles_the_program_a_run_measures():
    # paradnn profile must time the program paradnn run times: with the fallback, not XLA's defaults
    if jax.default_backend() != "cpu":
        pytest.skip("the fallback is XLA:CPU's; this backend is " + jax.default_backend())
    from paradnn.backends.jax.profile import _compile_for_profile

    lowered, _ = _small_spatial_conv_grad()
    assert xla_stack.loop_emitted_convolutions(_compile_for_profile(lowered).as_text()) == 0


def test_a_program_without_the_slow_path_keeps_the_presets_own_options():
    work = Workload(SPEC, 32, "float32", None, 1)
    model = build(SPEC, "float32")
    state, batch = wl.abstract_inputs(work, model, model.default_optimizer)
    lowered = wl.jit_step(model, model.default_optimizer).lower(state, batch)
    compiled, used = xla_stack.compile_lowered(lowered, "best", jax.default_backend())
    assert used == (xla_stack.compile_options("best", jax.default_backend()) or {})
    assert xla_stack.loop_emitted_convolutions(compiled.as_text()) == 0


@pytest.mark.slow
def test_a_cnn_record_says_which_options_compiled_it(tiny_settings):
    """The smoke CNN (image 32: a 1x1 last stage) runs with the fallback under best, XLA's
    defaults under stock; each record says so, and its software field says what best means."""
    if jax.default_backend() != "cpu":
        pytest.skip("the fallback is XLA:CPU's; this backend is " + jax.default_backend())
    spec = paradnn.CNN(block="residual", blocks=1, filters=4, image=32, output=10)
    best = paradnn.run(spec, batch=2, settings=tiny_settings)
    stock = paradnn.run(spec, batch=2, settings=tiny_settings, xla_preset="stock")
    assert best.status == stock.status == "ok", (best.error, stock.error)
    assert json.loads(best.metrics["xla_options_used"]) == {"xla_disable_hlo_passes": "algsimp"}
    assert json.loads(stock.metrics["xla_options_used"]) == {}
    meaning = json.loads(best.software["xla_compile_options"])
    assert meaning["best fallback"]["options"] == {"xla_disable_hlo_passes": "algsimp"}
    assert "plain loops" in meaning["best fallback"]["when"]
    # XLA counts the program that ran: the same convolutions, a few element-wise operations
    # more without the simplifier (1.7% on this CNN); the analytic count is the same
    assert best.metrics["flops_per_step"] == pytest.approx(stock.metrics["flops_per_step"], rel=0.05)
    assert best.metrics["model_flops_per_step"] == stock.metrics["model_flops_per_step"]
