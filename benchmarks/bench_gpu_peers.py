"""paradnn against the plain training loop of its own framework, side by side on one device
(issue 19, item 5: on a GPU, paradnn's examples/s should be >= 0.97x the plain loop's).

For each (model, framework) pair, in one child process per pair (so that a crash, an OOM or
JAX's memory preallocation cannot touch the other pairs, and JAX and PyTorch never share one
process's view of the GPU):

1. the plain loop is built, compiled and warmed, then timed ("before");
2. ``paradnn.run(spec, batch=..., dtype=..., framework=...)`` measures the same workload
   (examples/s from its median step time);
3. the plain loop is timed again ("after").

ratio = paradnn's examples/s / the mean of the plain loop's two rates; pass = ratio >= 0.97.
With ``--rounds R`` steps 2 and 3 repeat R times (plain, paradnn, plain, paradnn, ..., plain) and
the ratio is the median of the R rounds' ratios, each against the plain timings beside it: a
dispatch-bound pair (a small LSTM in PyTorch, whose step time follows the host CPU's speed)
drifts within one run more than the 3% the target allows.

The plain loop is what a user of that framework writes, with the SAME network (paradnn's
builder for that framework, so the comparison is the harness, not two models), the same
optimizer (paradnn's default for the model, with paradnn's hyperparameters), the same dtype
policy (float32 master weights, compute in the dtype, float32 loss) and the same batch of
synthetic data resident on the device:

* jax: ``paradnn.backends.jax.models.build`` -> Flax module; an optax step (value_and_grad of
  the float32 loss, ``tx.update``, ``optax.apply_updates``) under ``jax.jit`` with the state
  donated, called in a Python loop (XLA's default compile options);
* torch: paradnn's torch module (``families.builder(spec, "torch")``, as
  ``paradnn/backends/torch/backend.py`` builds it) wrapped in ``torch.compile(module)`` (the
  mode paradnn uses, ``--torch-compile``); each step ``zero_grad``, the forward under
  ``torch.autocast`` in the dtype, the float32 loss, ``backward``, ``opt.step()`` (eager, not
  compiled: what ``torch.compile`` on the model leaves), ``torch.cuda.synchronize()`` around
  the timed steps on CUDA.

Models (``--models``, comma list; default ``fc1024,fc8192,transformer``):

* fc1024:      FC(layers 4, nodes 1024, input 1024, output 1000), batch 1024 (dispatch-bound)
* fc8192:      FC(layers 4, nodes 8192, input 8192, output 1000), batch 8192 (compute-bound)
* transformer: Transformer(layers 1, d_model 1024, heads 16, d_ff 4096, length 512, vocab 1024),
               a GPT-like decoder block, batch 32 sequences (16k tokens)
* resnet50:    Real("resnet50", image 224), batch 256
* cnn:         CNN(block residual, blocks 1, filters 16, image 64, output 100), batch 32
* lstm:        RNN(cell lstm, layers 1, embed 256, length 20, vocab 1024), batch 64
               (cnn and lstm: the configs of ``benchmarks/bench_peers.py``, issue 37's CPU
               comparison, here on the GPU)

Besides each pair's ratio, one line per model gives paradnn at its best stack (the framework
whose paradnn run was fastest) against the fastest plain loop of either framework
(:func:`best_stack`; issue 37's target >= 1.0x), and the JSON has it as ``best_stack``.

On the GPU (bfloat16). On the first H100 (2026-11-28) fc1024 and fc8192 with both frameworks
took 130 s, mostly compiles and process starts, and the torch ResNet-50 pair did not finish in
108 s (torch.compile of ResNet-50); ``--pair-timeout`` bounds each pair:

    python benchmarks/bench_gpu_peers.py --json gpu_peers.json
    python benchmarks/bench_gpu_peers.py --models resnet50 --json gpu_peers_resnet.json
    python benchmarks/bench_gpu_peers.py --models cnn,lstm --json gpu_peers_cnn_lstm.json

paradnn's side runs its own protocol, shortened: K steps per call chosen by autorange (its
default; ``--steps-per-call`` fixes K), a 3 s time budget (``--time-budget``), its default XLA
preset (XLA's defaults on a GPU) and ``torch_compile`` mode (``--torch-compile``, which sets
the plain torch loop's mode too). Its one-time peak probe is capped at ``--probe-budget``
seconds of GEMMs (PARADNN_PROBE_BUDGET_S, unless set); it runs in the first JAX pair and the
torch pairs read it from paradnn's cache.

Rehearsal on a CPU, the same code paths at tiny sizes (float32: bfloat16 on XLA:CPU is
emulated and slow; ``--torch-compile eager`` because Inductor's C++ compiles add tens of
seconds per model on a small host; ratios on a CPU are noise):

    python benchmarks/bench_gpu_peers.py --tiny --models fc1024,transformer --torch-compile eager

Not a test (tests/test_bench_gpu_peers.py rehearses it); on a CPU the ratio is noise. Exit
status 0 when every pair paradnn builds ran (whatever its ratio), 1 when one failed or its
framework is missing.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable

TARGET = 0.97
FRAMEWORKS = ("jax", "torch")
DEFAULT_MODELS = "fc1024,fc8192,transformer"
#: The ratio paradnn at its best stack must reach against the fastest plain loop of a model
#: (issue 37: ">= 1.0x the fastest peer").
BEST_STACK_TARGET = 1.0


def _specs() -> dict[str, tuple[tuple[Any, int], tuple[Any, int]]]:
    """Every ``--models`` name: ((spec, batch) full size, (spec, batch) tiny). Imported lazily:
    the parent parses its options before paradnn (and JAX) load."""
    import paradnn
    from paradnn.families.transformer import Transformer

    return {
        "fc1024": ((paradnn.FC(layers=4, nodes=1024, input=1024, output=1000), 1024),
                   (paradnn.FC(layers=2, nodes=64, input=64, output=10), 16)),
        "fc8192": ((paradnn.FC(layers=4, nodes=8192, input=8192, output=1000), 8192),
                   (paradnn.FC(layers=2, nodes=128, input=128, output=10), 32)),
        "transformer": ((Transformer(layers=1, d_model=1024, heads=16, d_ff=4096, length=512, vocab=1024), 32),
                        (Transformer(layers=1, d_model=64, heads=2, d_ff=256, length=16, vocab=64), 4)),
        "resnet50": ((paradnn.Real("resnet50", image=224), 256), (paradnn.Real("resnet50", image=32), 2)),
        # benchmarks/bench_peers.py's CNN and LSTM (its CONFIGS; tests/test_bench_gpu_peers.py
        # checks they are the same): the CPU comparison of issue 37, here on the GPU.
        "cnn": ((paradnn.CNN(block="residual", blocks=1, filters=16, image=64, output=100), 32),
                (paradnn.CNN(block="residual", blocks=1, filters=4, image=32, output=10), 2)),
        "lstm": ((paradnn.RNN(cell="lstm", layers=1, embed=256, length=20, vocab=1024), 64),
                 (paradnn.RNN(cell="lstm", layers=1, embed=16, length=4, vocab=32), 4)),
    }


def model_spec(name: str, tiny: bool) -> tuple[Any, int]:
    """(spec, batch) of a ``--models`` name, full size or tiny."""
    specs = _specs()
    if name not in specs:
        raise SystemExit(f"unknown model {name!r}: one of {', '.join(specs)}")
    return specs[name][1 if tiny else 0]


def measure_settings(args: argparse.Namespace, step_loop: str | None = None) -> Any:
    """paradnn's timing protocol for this bench: short (``--time-budget``), K auto (paradnn's
    default: a call lasts about 0.2 s, 0.05 s with ``--tiny``) unless ``--steps-per-call``;
    ``step_loop`` sets JAX's option of that name (default: paradnn's, auto)."""
    from paradnn.measure import MeasureSettings

    options: dict[str, Any] = {}
    if args.framework_in_child == "torch":
        options["torch_compile"] = args.torch_compile
    if step_loop is not None:
        options["step_loop"] = step_loop
    if args.tiny:
        return MeasureSettings(steps_per_call=args.steps_per_call, call_target_s=0.05, warmup_calls=1,
                               warmup_s=0.0, min_calls=6, max_calls=6, ci_target=0.5,
                               time_budget_s=args.time_budget, **options)
    return MeasureSettings(steps_per_call=args.steps_per_call, warmup_calls=1, min_calls=6, max_calls=50,
                           ci_target=0.02, time_budget_s=args.time_budget, **options)


# ------------------------------------------------------------------------------- timing


def time_plain(run_steps: Callable[[int], None], sync: Callable[[], None], target_s: float,
               min_steps: int, warm_steps: int = 2, max_steps: int = 100_000) -> tuple[float, int]:
    """(seconds per step, steps timed) of a plain loop: ``warm_steps`` untimed steps, then
    untimed runs of ``min_steps``, doubling, until half of ``target_s`` went by (warm-up that
    also sizes the timed run), then as many steps as fill ``target_s`` (at least
    ``min_steps``), queued without synchronization and timed to the last result."""
    run_steps(warm_steps)
    sync()
    n, start = min_steps, time.perf_counter()
    while True:
        t0 = time.perf_counter()
        run_steps(n)
        sync()
        per_step = (time.perf_counter() - t0) / n
        if time.perf_counter() - start >= target_s / 2 or n >= max_steps:
            break
        n *= 2
    steps = int(min(max_steps, max(min_steps, target_s / max(per_step, 1e-9))))
    t0 = time.perf_counter()
    run_steps(steps)
    sync()
    return (time.perf_counter() - t0) / steps, steps


# --------------------------------------------------------------------------- plain loops


#: (run k steps, wait for them, {"final_loss": () -> float}) of a plain loop.
Loop = tuple[Callable[[int], None], Callable[[], None], dict[str, Any]]


def plain_jax(spec: Any, batch: int, dtype: str, optimizer: str,
              init_options: dict[str, Any] | None = None) -> Loop:
    """The hand-written Flax/optax loop of ``spec``: (run k steps, sync, info). The training
    step compiles with XLA's default options on its first call; ``init_options`` are the
    compile options of the (never timed) programs that make the batch and the parameters
    (default: XLA's); the optimizer state is made eagerly, as optax users do."""
    import jax
    import optax

    from paradnn.backends.jax.models import build
    from paradnn.backends.jax.step import make_optimizer  # optax's, with paradnn's hyperparameters

    model = build(spec, dtype)
    tx = make_optimizer(optimizer)
    key_init, key_data = jax.random.split(jax.random.key(1))

    def once(fn: Callable, key: Any) -> Any:
        return jax.jit(fn).lower(key).compile(init_options)(key)

    data = once(lambda k: model.make_batch(k, batch), key_data)
    variables = once(lambda k: model.module.init(k, model.make_batch(k, 1)["inputs"], train=False), key_init)
    params = variables["params"]
    extra = {k: v for k, v in variables.items() if k != "params"}  # batch_stats, where the model has them
    state = {"params": params, "extra": extra, "opt": tx.init(params)}

    def train_step(state: dict[str, Any], data: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        def loss_fn(params: Any) -> Any:
            outputs, updates = model.module.apply({"params": params, **state["extra"]}, data["inputs"],
                                                  train=True, mutable=list(state["extra"]))
            return model.loss(outputs, data), updates  # float32 loss (logits cast to float32)

        (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(state["params"])
        deltas, opt = tx.update(grads, state["opt"], state["params"])
        return {"params": optax.apply_updates(state["params"], deltas), "extra": dict(updates), "opt": opt}, loss

    step = jax.jit(train_step, donate_argnums=0)
    box: dict[str, Any] = {"state": state, "loss": None}

    def run_steps(k: int) -> None:
        s, loss = box["state"], box["loss"]
        for _ in range(k):
            s, loss = step(s, data)
        box["state"], box["loss"] = s, loss

    def sync() -> None:
        jax.block_until_ready((box["state"], box["loss"]))

    def final_loss() -> float:
        return float(box["loss"])

    return run_steps, sync, {"final_loss": final_loss}


def plain_torch(spec: Any, batch: int, dtype: str, optimizer: str, compile_mode: str) -> Loop:
    """The plain PyTorch loop of ``spec`` with ``torch.compile(module)``: (run k steps, sync, info)."""
    import torch

    from paradnn import families
    from paradnn.backends.torch.backend import make_optimizer  # torch.optim / TF1RMSprop, paradnn's hyperparameters

    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"the plain torch loop runs float32 or bfloat16, not {dtype}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = families.builder(spec, "torch")(spec, dtype)
    torch.manual_seed(1)
    with device:
        module = model.make_module()
    module.train()
    opt = make_optimizer(optimizer, module.parameters())
    gen = torch.Generator(device=device).manual_seed(2)
    data = model.make_batch(gen, batch, device)
    net = module if compile_mode == "eager" else torch.compile(
        module, mode=None if compile_mode == "default" else compile_mode)
    amp = torch.bfloat16 if dtype == "bfloat16" else None
    box: dict[str, Any] = {"loss": None}

    def run_steps(k: int) -> None:
        loss = None
        for _ in range(k):
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=amp or torch.float32, enabled=amp is not None):
                outputs = net(data["inputs"])
            loss = model.loss(outputs, data)  # float32: the loss casts the logits
            loss.backward()
            opt.step()
        box["loss"] = loss.detach()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def final_loss() -> float:
        return float(box["loss"])

    return run_steps, sync, {"final_loss": final_loss}


# ------------------------------------------------------------------------------ one pair


def versions(framework: str) -> dict[str, Any]:
    import paradnn

    out: dict[str, Any] = {"paradnn_version": getattr(paradnn, "__version__", None), "python": sys.version.split()[0]}
    if framework == "jax":
        import flax
        import jax
        import optax

        out.update(jax_version=jax.__version__, flax_version=flax.__version__, optax_version=optax.__version__)
    else:
        import torch

        out.update(torch_version=torch.__version__, torch_cuda_version=torch.version.cuda)
    return out


def device_kind(framework: str) -> tuple[str, str]:
    """(platform, device kind) as the framework sees its first device."""
    if framework == "jax":
        import jax

        d = jax.devices()[0]
        return d.platform, d.device_kind
    import torch

    if torch.cuda.is_available():
        return "gpu", torch.cuda.get_device_name(0)
    return "cpu", "cpu"


def policy(framework: str, optimizer: str, dtype: str, batch: int, compile_mode: str) -> str:
    loop = ("jax.jit(step, donate_argnums=0), XLA default options, host loop" if framework == "jax"
            else f"torch.compile(module, mode={compile_mode}), eager opt.step()"
            if compile_mode != "eager" else "eager module, eager opt.step()")
    return (f"both sides: paradnn's {framework} network, optimizer {optimizer} (paradnn's default, its "
            f"hyperparameters), compute {dtype} with float32 master weights and float32 loss, batch {batch}, "
            f"synthetic data on the device; plain loop: {loop}")


def _paradnn_row(record: Any) -> dict[str, Any]:
    """The ``paradnn_*`` columns of one ``paradnn.run`` record."""
    m = record.metrics
    return dict(paradnn_status=record.status, paradnn_error=record.error,
                paradnn_examples_per_sec=m.get("examples_per_sec"), paradnn_step_time_s=m.get("step_time_s"),
                paradnn_stable=m.get("stable"), paradnn_steps_per_call=m.get("steps_per_call_used"),
                paradnn_step_times_s=m.get("step_times_s"),
                paradnn_compile_s=m.get("compile_s"), paradnn_step_loop=m.get("step_loop_used"),
                paradnn_matmul_precision_used=m.get("matmul_precision_used"),
                paradnn_settings=dict(record.settings), paradnn_device_kind=record.platform.get("device_kind"))


def round_ratios(paradnn_rates: list[float], plain_rates: list[float]) -> list[float]:
    """Per round i: paradnn's rate over the mean of the plain loop's rates timed just before and
    just after it (``plain_rates`` has one more entry than ``paradnn_rates``)."""
    return [ours / statistics.fmean(plain_rates[i:i + 2]) for i, ours in enumerate(paradnn_rates)]


def run_pair(name: str, framework: str, args: argparse.Namespace) -> dict[str, Any]:
    """Plain loop, then ``args.rounds`` times paradnn.run and the plain loop again, in this
    process; never raises. One round: ratio = paradnn's rate / the mean of the plain loop's
    before and after. More rounds (a dispatch-bound pair, whose rate drifts with the host's
    CPU): the median of the rounds' ratios, each against the plain timings beside it; paradnn's
    and the plain loop's rates are then the medians of theirs."""
    import paradnn
    from paradnn.workload import Workload

    t_start = time.perf_counter()
    spec, batch = model_spec(name, args.tiny)
    dtype = args.dtype or ("float32" if args.tiny else "bfloat16")
    row: dict[str, Any] = {"model": name, "framework": framework, "batch": batch, "dtype": dtype,
                           "spec": spec.to_dict(), "status": "error"}
    stage = "setup"
    try:
        optimizer = Workload(spec, batch, dtype, None, 1, framework).optimizer
        row["optimizer"] = optimizer
        row["policy"] = policy(framework, optimizer, dtype, batch, args.torch_compile)
        row.update(versions(framework))
        row["device_platform"], row["device_kind"] = device_kind(framework)
        stage = "plain loop build"
        t0 = time.perf_counter()
        if framework == "jax":
            run_steps, sync, info = plain_jax(spec, batch, dtype, optimizer)
        else:
            run_steps, sync, info = plain_torch(spec, batch, dtype, optimizer, args.torch_compile)
        target, min_steps = args.plain_s, (3 if args.tiny else 5)
        stage = "plain loop (before)"
        before, steps_before = time_plain(run_steps, sync, target, min_steps)
        row["plain_setup_and_before_s"] = time.perf_counter() - t0  # build, compile, warm-up, first timing
        stage = "paradnn.run"
        t0 = time.perf_counter()
        record = paradnn.run(spec, batch=batch, dtype=dtype, framework=framework, settings=measure_settings(args))
        row["paradnn_wall_s"] = time.perf_counter() - t0
        m = record.metrics
        row.update(_paradnn_row(record))
        if framework == "jax" and args.jax_step_loops:
            # The same workload with each other JAX step loop: on a GPU the device loop's
            # runtime trip count may cost a host round trip per step, which a fast step feels.
            stage = "paradnn.run (other step loops)"
            by_loop = {f"auto ({m.get('step_loop_used')})": m.get("examples_per_sec")}
            for loop in args.jax_step_loops.split(","):
                other = paradnn.run(spec, batch=batch, dtype=dtype, framework=framework,
                                    settings=measure_settings(args, step_loop=loop))
                by_loop[loop] = other.metrics.get("examples_per_sec") if other.status == "ok" else other.status
            row["paradnn_examples_per_sec_by_step_loop"] = by_loop
        stage = "plain loop (after)"
        after, steps_after = time_plain(run_steps, sync, target, min_steps)
        rates, steps = [batch / before, batch / after], [steps_before, steps_after]
        records = [record]
        for i in range(1, args.rounds if record.status == "ok" else 1):
            stage = f"paradnn.run (round {i + 1})"
            records.append(paradnn.run(spec, batch=batch, dtype=dtype, framework=framework,
                                       settings=measure_settings(args)))
            if records[-1].status != "ok":
                break
            stage = f"plain loop (after round {i + 1})"
            after, n = time_plain(run_steps, sync, target, min_steps)
            rates.append(batch / after)
            steps.append(n)
        row.update(plain_examples_per_sec=statistics.fmean(rates), plain_examples_per_sec_before_after=rates,
                   plain_steps_timed=steps, plain_final_loss=info["final_loss"]())
        bad = next((r for r in records if r.status != "ok"), None)
        if bad is not None:
            row.update(_paradnn_row(bad))
            row["status"] = f"paradnn {bad.status}"
            row["error"] = f"paradnn.run: {bad.status}: {bad.error}"
        elif len(records) == 1:
            row["ratio"] = m["examples_per_sec"] / row["plain_examples_per_sec"]
            row["pass"] = row["ratio"] >= TARGET
            row["status"] = "ok"
        else:
            ours = [r.metrics["examples_per_sec"] for r in records]
            per_round = round_ratios(ours, rates)
            row.update(rounds=len(records), ratio_rounds=per_round, ratio=statistics.median(per_round),
                       paradnn_examples_per_sec_rounds=ours, paradnn_examples_per_sec=statistics.median(ours),
                       plain_examples_per_sec=statistics.median(rates),
                       paradnn_stable_rounds=[r.metrics.get("stable") for r in records],
                       paradnn_step_times_s_rounds=[r.metrics.get("step_times_s") for r in records])
            row["pass"] = row["ratio"] >= TARGET
            row["status"] = "ok"
    except Exception as exc:  # noqa: BLE001 - one pair's failure is reported, the others run
        try:
            from paradnn import backends

            oom = backends.get(framework).is_oom(exc)
        except Exception:  # noqa: BLE001
            oom = False
        row["status"] = "oom" if oom else "error"
        row["error"] = f"{stage}: {type(exc).__name__}: {exc}"[:2000]
        row["traceback"] = traceback.format_exc()[-4000:]
    row["wall_s"] = time.perf_counter() - t_start
    return row


# -------------------------------------------------------------------------------- parent


def _pump(stream: Any, tail: collections.deque) -> None:
    """Echo a child's stderr to ours (its progress lines) and keep the last lines."""
    for line in stream:
        sys.stderr.write(line)
        sys.stderr.flush()
        tail.append(line)


def spawn_pair(name: str, framework: str, argv: list[str], timeout_s: float) -> dict[str, Any]:
    """Run one pair in a child process of this script; a crash or timeout becomes a row."""
    fd, out = tempfile.mkstemp(prefix=f"gpu_peers_{name}_{framework}_", suffix=".json")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--child", f"{name}:{framework}", "--child-out", out]
    t0 = time.perf_counter()
    tail: collections.deque = collections.deque(maxlen=40)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pump = threading.Thread(target=_pump, args=(proc.stderr, tail), daemon=True)
    pump.start()
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
        proc.wait()
    pump.join(timeout=5)
    try:
        with open(out) as f:
            text = f.read()
        row = json.loads(text) if text.strip() else None
    finally:
        os.unlink(out)
    if row is None:
        row = {"model": name, "framework": framework,
               "status": "timeout" if rc is None else "crashed",
               "error": (f"no result within {timeout_s:.0f} s" if rc is None else f"child exited with status {rc}")
               + ("; stderr tail: " + "".join(tail)[-1500:] if tail else "")}
    row["child_wall_s"] = time.perf_counter() - t0
    return row


def pair_plan(models: list[str], frameworks: list[str], tiny: bool) -> list[tuple[str, str, str | None]]:
    """(model, framework, why not runnable or None) in run order: model-major, jax first (its
    run measures the device's probe once; the torch run's ceiling reads it from the cache)."""
    from paradnn import families

    plan = []
    for name in models:
        spec, _ = model_spec(name, tiny)
        built = families.of(spec).frameworks_for(spec)
        for fw in frameworks:
            why = None
            if fw not in built:
                why = f"unsupported: paradnn builds {name} in {', '.join(built)} only"
            elif importlib.util.find_spec(fw) is None:
                why = f"missing: {fw} is not installed"
            plan.append((name, fw, why))
    return plan


def fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def table(rows: list[dict[str, Any]]) -> str:
    head = ("model", "fw", "batch", "dtype", "paradnn ex/s", "plain ex/s (before/after)", "ratio", "pass",
            "status", "s")
    lines = []
    for r in rows:
        ba = r.get("plain_examples_per_sec_before_after")
        plain = f"{fmt(r.get('plain_examples_per_sec'))} ({'/'.join(fmt(x) for x in ba)})" if ba else "-"
        passed = "-" if r.get("pass") is None else ("yes" if r["pass"] else "NO")
        lines.append((r["model"], r["framework"], str(r.get("batch", "-")), r.get("dtype", "-"),
                      fmt(r.get("paradnn_examples_per_sec")), plain, fmt(r.get("ratio"), ".3f"), passed,
                      r["status"], fmt(r.get("child_wall_s", r.get("wall_s")), ".0f")))
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines]
    return "\n".join(out)


def best_stack(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model: paradnn at its best stack against the fastest plain loop (issue 37 on a GPU).

    paradnn's side is the framework whose ``paradnn.run`` was fastest (what ``framework="best"``
    chooses, less its 3% margin for the reference); the peer is the fastest plain loop of any
    framework (the hand-written Flax loop or the ``torch.compile`` loop). The rates come from
    the pairs' own processes, one after another on the same device: each plain rate is the mean
    of its before and after timings. ``complete`` is False where a framework that builds the
    model did not run (failed, timed out, not installed): the fastest peer may be missing, so
    such a model never passes."""
    out = []
    for name in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == name and r.get("status") != "unsupported"]
        ok = [r for r in mine if r.get("status") == "ok"]
        row: dict[str, Any] = {"model": name, "frameworks_ok": [r["framework"] for r in ok],
                               "frameworks_not_ok": {r["framework"]: r.get("status") for r in mine if r not in ok},
                               "target_ratio": BEST_STACK_TARGET}
        row["complete"] = bool(ok) and not row["frameworks_not_ok"]
        if ok:
            ours = max(ok, key=lambda r: r["paradnn_examples_per_sec"])
            peer = max(ok, key=lambda r: r["plain_examples_per_sec"])
            row.update(paradnn_framework=ours["framework"], paradnn_examples_per_sec=ours["paradnn_examples_per_sec"],
                       peer_framework=peer["framework"], peer_examples_per_sec=peer["plain_examples_per_sec"],
                       ratio=ours["paradnn_examples_per_sec"] / peer["plain_examples_per_sec"])
            row["pass"] = row["complete"] and row["ratio"] >= BEST_STACK_TARGET
        out.append(row)
    return out


def best_stack_lines(best: list[dict[str, Any]]) -> list[str]:
    """One line per model of :func:`best_stack`."""
    lines = []
    for b in best:
        if "ratio" not in b:
            lines.append(f"{b['model']}: no pair ran ({b['frameworks_not_ok']})")
            continue
        missing = "" if b["complete"] else f" (incomplete: {b['frameworks_not_ok']})"
        lines.append(f"{b['model']}: paradnn at its best stack ({b['paradnn_framework']}) "
                     f"{fmt(b['paradnn_examples_per_sec'])} / fastest plain loop ({b['peer_framework']}) "
                     f"{fmt(b['peer_examples_per_sec'])} examples/s = {b['ratio']:.3f}x "
                     f"(target >= {b['target_ratio']}x){missing}")
    return lines


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"comma list of {', '.join(_specs())}")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="comma list of jax, torch")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a CPU rehearsal (float32 by default)")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16"),
                        help="compute dtype (default bfloat16; float32 with --tiny)")
    parser.add_argument("--torch-compile", default="default",
                        choices=("default", "eager", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
                        help="torch.compile mode of both sides (paradnn's torch_compile; default: paradnn's "
                             "default); eager to rehearse quickly on a CPU")
    parser.add_argument("--steps-per-call", type=int, default=None,
                        help="paradnn steps_per_call (default auto, paradnn's own)")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="paradnn time_budget_s per run (default 3 s; 1 s with --tiny)")
    parser.add_argument("--plain-s", type=float, default=None,
                        help="seconds of each timed plain-loop run (default 2; 0.3 with --tiny)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="paradnn runs per pair, each followed by a plain-loop timing; the ratio is the "
                             "median of the rounds' (default 1: plain, paradnn, plain)")
    parser.add_argument("--pair-timeout", type=float, default=900.0, help="seconds one pair's child may run")
    parser.add_argument("--probe-budget", type=float, default=10.0,
                        help="PARADNN_PROBE_BUDGET_S for paradnn's one-time peak probe, unless already set (s)")
    parser.add_argument("--jax-step-loops", default="",
                        help="comma list of other JAX step_loop settings (device, host) that paradnn also "
                             "measures each JAX model with (paradnn_examples_per_sec_by_step_loop)")
    parser.add_argument("--json", default=None, help="write the rows here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: allowed a whole number >= 1")
    if args.time_budget is None:
        args.time_budget = 1.0 if args.tiny else 3.0
    if args.plain_s is None:
        args.plain_s = 0.3 if args.tiny else 2.0
    args.framework_in_child = None
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.child:
        name, framework = args.child.split(":")
        args.framework_in_child = framework
        row = run_pair(name, framework, args)
        with open(args.child_out, "w") as f:
            json.dump(row, f, default=str)
        return 0

    os.environ.setdefault("PARADNN_PROBE_BUDGET_S", str(args.probe_budget))
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    for fw in frameworks:
        if fw not in FRAMEWORKS:
            raise SystemExit(f"unknown framework {fw!r}: one of {', '.join(FRAMEWORKS)}")
    # The children get the same options, less the parent's own.
    child_argv, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--json", "--models", "--frameworks"):
            skip = True
            continue
        if a.startswith(("--json=", "--models=", "--frameworks=")):
            continue
        child_argv.append(a)
    t0 = time.perf_counter()
    rows = []
    for name, fw, why in pair_plan(models, frameworks, args.tiny):
        if why is not None:
            spec, batch = model_spec(name, args.tiny)
            rows.append({"model": name, "framework": fw, "batch": batch, "status": why.split(":")[0], "error": why})
            print(f"[{name} {fw}] {why}", file=sys.stderr, flush=True)
            continue
        print(f"[{name} {fw}] running (child process) ...", file=sys.stderr, flush=True)
        row = spawn_pair(name, fw, child_argv, args.pair_timeout)
        row.setdefault("batch", model_spec(name, args.tiny)[1])
        row.setdefault("dtype", args.dtype or ("float32" if args.tiny else "bfloat16"))
        rows.append(row)
        print(f"[{name} {fw}] {row['status']}" + (f": {row.get('error')}" if row.get("error") else "")
              + (f"; ratio {row['ratio']:.3f}" if row.get("ratio") is not None else ""), file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    print(table(rows))
    # Across frameworks only where more than one was asked for (``--frameworks torch`` alone has
    # no best stack to choose).
    best = best_stack(rows) if len(frameworks) > 1 else []
    for line in best_stack_lines(best):
        print(line)
    for r in rows:
        if r.get("policy"):
            print(f"{r['model']} {r['framework']}: {r['policy']}")
    kinds = sorted({f"{r['framework']}: {r.get('device_kind')}" for r in rows if r.get("device_kind")})
    print(f"devices: {'; '.join(kinds) or '-'}; target ratio >= {TARGET}; wall {wall:.0f} s"
          + ("; TINY rehearsal: ratios on a CPU are noise" if args.tiny else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"target_ratio": TARGET, "tiny": args.tiny, "argv": argv, "wall_s": wall, "pairs": rows,
                       "best_stack": best},
                      f, indent=1, default=str)
    ran = all(r["status"] == "ok" for r in rows if r["status"] != "unsupported")
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
