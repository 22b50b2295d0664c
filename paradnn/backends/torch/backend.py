"""The PyTorch backend: ``torch.compile`` of the training step (eager as a setting).

A workload becomes a module (float32 master weights), an optimizer and a synthetic batch on
the device from a fixed seed. One training step zeroes the gradients, runs the forward under
``torch.autocast`` in the compute dtype, takes the float32 loss, its backward and the
optimizer update. The setting ``torch_compile`` (``COMPILE_MODES``) picks eager execution or a
``torch.compile`` mode; compiled, the forward (with the backward AOTAutograd derives from it)
and the optimizer update are the two compiled regions, and the loss runs eagerly between them, as
in a plain ``torch.compile(model)`` loop (ATen's fused cross-entropy kernels: Inductor's CPU code
for it took about 1.5x their time).

torch compiles lazily, so :meth:`TorchBackend.compile` builds everything and runs two warm
steps (the first compiles; the second recompiles once where the optimizer created its state
on the first); ``compile_s`` is their wall time. ``init`` then restores the initial weights and
zeroes the optimizer state in place (the same tensors, so the compiled code stays valid): the
timed run starts from the freshly initialized model. K steps per call are K calls of the step
(``step_loop_used`` "host"); they queue on a GPU without synchronization.

Dtype policy: bfloat16/float16 run the forward under ``torch.autocast`` (weights, gradients
and optimizer state float32). float16 on a GPU scales the loss with ``torch.amp.GradScaler``
(its overflow check costs a host synchronization per step, as in any AMP training loop); on a
CPU float16 runs without loss scaling, as the JAX backend does everywhere.

Optimizers follow ``paradnn.backends.jax.step.make_optimizer``: rmsprop is TF1's (epsilon 1.0 inside the
square root, which ``torch.optim.RMSprop`` cannot express: :class:`TF1RMSprop`); sgd, momentum
and adam are torch's with optax's hyperparameters (the same updates); adafactor is
``torch.optim.Adafactor(lr=1e-3)``, torch's variant (relative step capped at lr, scaled by the
parameter RMS; it factors every matrix, optax only dimensions >= 128).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable

from paradnn import hardware, precision
from paradnn.backends.torch import allocator, gemm
from paradnn.backends.torch.options import COMPILE_MODES
from paradnn.convolution import valid_taps
from paradnn.errors import SpecError
from paradnn.frameworks import Program
from paradnn.sizes import optimizer as optimizer_entry

WARM_STEPS = 2  # see the module doc: compile, then the recompile after optimizer state appears


def check() -> None:
    """Raises ImportError if PyTorch is not installed."""
    import torch  # noqa: F401


def compile_mode(settings: Any) -> str:
    """The ``torch_compile`` option of ``settings`` (a MeasureSettings; validated by
    :class:`paradnn.backends.torch.options.TorchOptions`)."""
    return settings.options_for("torch").torch_compile


# ------------------------------------------------------------------------- matmul precision

#: The float32 precision of the ``matmul_precision`` setting, through PyTorch's long-standing
#: switches: the float32 matmul precision ("highest": full float32, "high": TF32 on CUDA) and
#: cuDNN's TF32 switch (convolutions and RNNs). Not the ``fp32_precision`` flags of torch >= 2.9:
#: after a write there, reading the old switches raises ("mix of the legacy and new APIs"), and
#: torch.compile's Inductor still reads them (its cache key among others: pytorch issue 166387,
#: seen on torch 2.14 here), so every compiled run would fail. The old switches act on CUDA only;
#: on a CPU torch computes float32 in full float32 whatever they say.
_PRECISION_SWITCHES = {"highest": ("highest", False), "tf32": ("high", True)}
#: The switches as they were before paradnn first changed them: the framework's own default.
_DEFAULT_SWITCHES: dict[str, Any] = {}


def apply_matmul_precision(setting: str) -> None:
    """Set torch's float32 precision switches for the ``matmul_precision`` setting
    (process-wide: every compile and init of a run applies its own). ``default`` restores the
    switches paradnn found (the measured ``matmul_precision_used`` says what they were)."""
    import torch

    _DEFAULT_SWITCHES.setdefault("matmul", torch.get_float32_matmul_precision())
    _DEFAULT_SWITCHES.setdefault("cudnn", torch.backends.cudnn.allow_tf32)
    matmul, cudnn = _PRECISION_SWITCHES.get(setting, (_DEFAULT_SWITCHES["matmul"], _DEFAULT_SWITCHES["cudnn"]))
    torch.set_float32_matmul_precision(matmul)
    torch.backends.cudnn.allow_tf32 = cudnn


def set_cpu_threads() -> int:
    """Set torch's intra-op threads to the CPUs this process may run on (its affinity), before
    anything is compiled, and return the count. A plain PyTorch loop on a CPU calls
    ``torch.set_num_threads(os.cpu_count())``; measured on the 2-core host
    (``benchmarks/bench_peers.py``, each contender in its own process, 7 interleaved rounds), the
    CNN step compiled without that call ran at 0.93x a plain ``torch.compile`` loop and 1.02x
    with it, although ``torch.get_num_threads()`` is 2 either way."""
    import torch

    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(count)
    return count


def apply_memory_format(module: Any, batch: dict[str, Any], setting: str) -> str | None:
    """Put an image model (4-D ``batch["inputs"]``, NCHW) in the layout ``setting`` names
    (``MEMORY_FORMATS``): its 4-D parameters and buffers in place (the same Parameter objects)
    and its input tensor in ``batch``; convolutions then produce activations in that layout.
    Returns the layout used (the ``memory_format_used`` metric), or None for a model without
    image inputs, which the setting leaves as it is. Shapes and the maths stay the same: only the
    order of elements in memory, and so the convolution kernels chosen, change.

    Why ``channels_last`` by default: on a CPU, oneDNN's convolutions run in NHWC and reorder an
    NCHW input and its gradients on every call; the bench CNN's step (``bench_peers.py``) ran
    1.03-1.08x faster in it and torchvision's ResNet-18 1.06x (medians of interleaved rounds,
    docs/performance.md). On NVIDIA GPUs it is the layout of cuDNN's Tensor Core convolutions
    (PyTorch's own performance guide), not measured by paradnn yet."""
    import torch

    if batch["inputs"].dim() != 4:
        return None
    if setting == "channels_last":
        module.to(memory_format=torch.channels_last)
        batch["inputs"] = batch["inputs"].contiguous(memory_format=torch.channels_last)
    return setting


def precision_bits(device: Any) -> dict[str, float]:
    """Effective mantissa bits (:func:`paradnn.precision.effective_bits`) of a float32 matmul
    and convolution on ``device`` with torch's current flags (eager: the same cuBLAS and cuDNN
    settings the compiled step reads)."""
    import torch

    ops = precision.probe_operands()
    a, b = (torch.from_numpy(v).to(device) for v in ops["matmul"][:2])
    x, w = (torch.from_numpy(v).to(device) for v in ops["conv"][:2])
    with torch.no_grad():
        mm = a @ b
        # NHWC / HWIO (the probe's layout) to torch's NCHW / OIHW and back.
        conv = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1)).permute(0, 2, 3, 1)
    return {"matmul": precision.effective_bits(mm.cpu().numpy(), ops["matmul"][2]),
            "conv": precision.effective_bits(conv.cpu().numpy(), ops["conv"][2])}


# ------------------------------------------------------------------------------- optimizers


def _tf1_rmsprop_class():
    import torch

    class TF1RMSprop(torch.optim.Optimizer):
        """TF1's RMSProp with momentum, as optax.rmsprop(eps_in_sqrt=True):
        ``ms = decay*ms + (1-decay)*g^2; mom = momentum*mom + lr*g/sqrt(ms + eps); p -= mom``.
        ``torch.optim.RMSprop`` adds eps outside the square root, which with eps = 1.0 is a
        different optimizer. State is created here (zeros, as optax), not on the first step."""

        def __init__(self, params: Any, lr: float = 0.1, decay: float = 0.9, momentum: float = 0.9,
                     eps: float = 1.0) -> None:
            super().__init__(params, {"lr": lr, "decay": decay, "momentum": momentum, "eps": eps})
            for group in self.param_groups:
                for p in group["params"]:
                    self.state[p] = {"ms": torch.zeros_like(p), "mom": torch.zeros_like(p)}

        @torch.no_grad()
        def step(self, closure: Any = None) -> None:
            # Public in-place tensor ops, one parameter at a time (torch's own optimizers use
            # the private torch._foreach_* kernels; torch.compile fuses these loops anyway).
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g, state = p.grad, self.state[p]
                    state["ms"].mul_(group["decay"]).addcmul_(g, g, value=1.0 - group["decay"])
                    denom = state["ms"].add(group["eps"]).sqrt_()
                    state["mom"].mul_(group["momentum"]).addcdiv_(g, denom, value=group["lr"])
                    p.sub_(state["mom"])

    return TF1RMSprop


def make_optimizer(name: str, params: Any) -> Any:
    """The torch optimizer a workload names, with the hyperparameters of its row in
    ``paradnn.sizes.OPTIMIZERS`` (the settings every framework reads; adafactor is torch's
    variant, see the module notes)."""
    import torch

    o = optimizer_entry(name)
    params = list(params)
    if o.algorithm == "rmsprop":
        return _tf1_rmsprop_class()(params, lr=o.learning_rate, decay=o.decay, momentum=o.momentum,
                                    eps=o.epsilon)
    if o.algorithm == "sgd":
        return torch.optim.SGD(params, lr=o.learning_rate, momentum=o.momentum or 0.0)
    if o.algorithm == "adam":
        return torch.optim.Adam(params, lr=o.learning_rate, betas=(o.beta1, o.beta2), eps=o.epsilon)
    if o.algorithm == "adafactor":
        # torch's epsilon for g^2 stays its own (None: the dtype's machine epsilon).
        return torch.optim.Adafactor(params, lr=o.learning_rate, beta2_decay=-o.decay_rate,
                                     eps=(None, o.min_scale), d=o.clipping_threshold)
    raise SpecError("optimizer", name, f"an optimizer whose algorithm PyTorch implements ({o.algorithm} is not)")


# ------------------------------------------------------------------------------ FLOP counts


def _conv_flops(x_shape: Any, w_shape: Any, stride: Any, padding: Any, dilation: Any,
                out_shape: Any) -> int:
    """FLOPs (2 per multiply-add) of a convolution, counting only taps inside the input as
    XLA's cost analysis does; ``w_shape`` is [out, in/groups, k...], so groups count right."""
    cout, cin_per_group, *kernel = w_shape
    taps = 1
    for d, k in enumerate(kernel):
        taps *= valid_taps(x_shape[2 + d], out_shape[2 + d], k, stride[d], padding[d], 1, dilation[d])
    return 2 * x_shape[0] * cout * cin_per_group * taps


def _conv_formula(x_shape, w_shape, _bias, stride, padding, dilation, transposed, *args,
                  out_shape=None, **kwargs) -> int:
    if transposed:
        from torch.utils.flop_counter import conv_flop_count

        return conv_flop_count(x_shape, w_shape, out_shape, transposed=True)
    return _conv_flops(x_shape, w_shape, stride, padding, dilation, out_shape)


def _conv_backward_formula(grad_out_shape, x_shape, w_shape, _bias, stride, padding, dilation,
                           transposed, _output_padding, _groups, output_mask, out_shape=None,
                           **kwargs) -> int:
    # The input gradient and the weight gradient each make every multiply of the forward once.
    # (torch's own formula counts the weight gradient of a grouped convolution groups times.)
    if transposed:
        from torch.utils.flop_counter import conv_backward_flop

        return conv_backward_flop(grad_out_shape, x_shape, w_shape, _bias, stride, padding, dilation,
                                  transposed, _output_padding, _groups, output_mask, out_shape)
    forward = _conv_flops(x_shape, w_shape, stride, padding, dilation, grad_out_shape)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


# Counted over one eager forward+backward on the meta device: matmuls and convolutions, with
# convolution taps on padding not counted (as XLA does); docs/frameworks-torch.md.
FLOPS_SOURCE = "torch.utils.flop_counter (matmuls, convolutions; no bytes)"


def count_flops(model: Any, batch: int) -> int:
    """Executed FLOPs of one training step of ``model`` (a TorchModel) at ``batch`` examples:
    forward and backward matmuls and convolutions, counted by ``FlopCounterMode`` on meta
    tensors (shapes only, nothing allocated); the optimizer update has none."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    aten = torch.ops.aten
    mapping = {aten.convolution: _conv_formula, aten._convolution: _conv_formula,
               aten.convolution_backward: _conv_backward_formula}
    with torch.device("meta"):
        module = model.make_module()
    module.train()
    data = model.make_batch(None, batch, torch.device("meta"))
    with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        model.loss(module(data["inputs"]), data).backward()
    return int(counter.get_total_flops())


# ---------------------------------------------------------------------------------- backend


def _tensor_bytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _optimizer_tensors(opt: Any) -> list[Any]:
    import torch

    return [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]


class TorchBackend:
    """:class:`paradnn.frameworks.Backend` for PyTorch: one device (the first CUDA GPU, else the CPU)."""

    name = "torch"

    #: The probe's GEMM on an accelerator (paradnn.backends.torch.gemm): the JAX backend's probe
    #: asks for it through the registry, so that the measured ceiling is the best of the
    #: frameworks present.
    accelerator_gemm = staticmethod(gemm.gemm_method)

    def _device(self) -> Any:
        import torch

        return torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def device_info(self) -> dict[str, Any]:
        import torch

        gpu = torch.cuda.is_available()
        return {
            "device_platform": "gpu" if gpu else "cpu",
            "device_kind": torch.cuda.get_device_name(0) if gpu else "cpu",
            "device_count": torch.cuda.device_count() if gpu else 1,
            "host": socket.gethostname(),
            "cpu_model": hardware.cpu_model(),
        }

    def software_info(self) -> dict[str, Any]:
        import torch

        return {
            "framework_version": torch.__version__,
            "torch_version": torch.__version__,
            "torch_cuda_version": torch.version.cuda,
            "torch_threads": torch.get_num_threads(),
        }

    def device_memory_bytes(self) -> int | None:
        import torch

        if not torch.cuda.is_available():
            return None
        return int(torch.cuda.get_device_properties(0).total_memory)

    def compile(self, workload: Any, settings: Any) -> Program:
        """Build ``workload`` in torch and run WARM_STEPS steps (torch compiles on the first
        call): Program.call runs K steps as K calls. ``compile_s`` (s) is the warm steps'
        wall time; on a GPU ``memory_peak_bytes`` is the allocator's peak over them."""
        import torch

        from paradnn import families
        from paradnn.backends.torch.models import SEED

        if workload.devices != 1:
            raise SpecError("devices", workload.devices, "1 for framework torch (one device per run)")
        mode = compile_mode(settings)
        chosen = settings.options_for(self.name)
        setting = chosen.matmul_precision
        apply_matmul_precision(setting)
        device = self._device()
        malloc = None
        if device.type == "cpu":
            set_cpu_threads()
            malloc = allocator.apply(chosen.cpu_allocator)
        model = families.builder(workload.spec, "torch")(workload.spec, workload.dtype)
        torch.manual_seed(SEED)
        with device:
            module = model.make_module()
        module.train()
        gen = torch.Generator(device=device).manual_seed(SEED + 1)
        batch = model.make_batch(gen, workload.batch, device)
        layout = apply_memory_format(module, batch, chosen.memory_format)
        used, bits = precision.used(workload.dtype, precision_bits(device) if workload.dtype == "float32" else None,
                                    precision.ops_in(p.shape for p in module.parameters()))
        opt = make_optimizer(workload.optimizer, module.parameters())
        # The initial weights (host copy), restored by init() after the warm steps.
        initial = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}

        amp = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}[workload.dtype]
        scaler = (torch.amp.GradScaler("cuda") if amp is torch.float16 and device.type == "cuda" else None)

        forward, update = module, opt.step
        if mode != "eager":
            # Two compiled regions, the module's forward (whose backward AOTAutograd compiles with
            # it) and the optimizer update: the graph breaks torch.compile of the whole step makes
            # anyway (at zero_grad and backward), made explicit. As in a plain torch.compile(model)
            # loop, autocast is entered outside the compiled module and the loss runs eagerly.
            # Compiled with the forward, Inductor's CPU kernels for the cross-entropy and its
            # gradient took about 1.5x ATen's (1280x1024 logits): the bench LSTM's step ran 3-5%
            # slower (docs/performance.md). Autocast inside the compiled function put the fused
            # recurrent kernels' graph break inside a `with` block, which cost TorchDynamo extra
            # frames on every step (0.9 ms against 0.4 ms on that LSTM).
            options = {"mode": None if mode == "default" else mode}
            forward = torch.compile(module, **options)
            update = torch.compile(opt.step, **options)

        def forward_loss(batch: dict[str, Any]) -> Any:
            with torch.autocast(device.type, dtype=amp or torch.float32, enabled=amp is not None):
                outputs = forward(batch["inputs"])
            return model.loss(outputs, batch)  # float32: the loss casts the logits

        def fn(batch: dict[str, Any]) -> Any:
            opt.zero_grad(set_to_none=True)
            loss = forward_loss(batch)
            if scaler is None:
                loss.backward()
                update()
            else:  # GPU float16: loss scaling; the scaler checks for overflow, then steps eagerly
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            return loss.detach()

        scaler_state = scaler.state_dict() if scaler is not None else None
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        for _ in range(WARM_STEPS):
            loss = fn(batch)
        self.sync(loss)
        compile_s = time.perf_counter() - t0

        def call(state: Any, batch: Any, k: int) -> tuple[Any, Any]:
            loss = None
            for _ in range(k):  # no synchronization in between: the steps queue on a GPU
                loss = fn(batch)
            return state, loss

        weights = _tensor_bytes(module.state_dict().values())
        optimizer = _tensor_bytes(_optimizer_tensors(opt))
        metrics: dict[str, Any] = {
            "params": sum(p.numel() for p in module.parameters() if p.requires_grad),
            "compile_s": compile_s,
            "step_loop_used": "host",
            "matmul_precision_used": used,
            "matmul_precision_bits": bits,
            "cpu_allocator_used": malloc,
            "memory_format_used": layout,
        }
        memory: dict[str, Any] = {}
        if device.type == "cuda":
            memory = {"memory_peak_bytes": int(torch.cuda.max_memory_allocated(device)),
                      "memory_weights_bytes": weights, "memory_optimizer_bytes": optimizer}
            metrics.update(memory)
        handle = {"model": model, "module": module, "optimizer": opt, "batch": batch, "initial": initial,
                  "device": device, "memory": memory, "scaler": scaler,
                  "scaler_state": scaler_state, "matmul_precision": setting,
                  "cpu_allocator": chosen.cpu_allocator if device.type == "cpu" else None}
        tags = {"torch_compile": mode, **model.tags}
        if device.type != "cuda":
            tags["memory_note"] = "no allocator statistics on the CPU (torch reports device memory on CUDA only)"
        return Program(workload, call, weights + optimizer, metrics, tags, handle)

    def init(self, program: Program) -> tuple[Any, Any]:
        """Restore the initial weights and zero the optimizer state (in place: the compiled step
        keeps its tensors); the state is ``{"module", "optimizer"}``, updated in place by calls."""
        import torch

        h = program.handle
        # The flags are process-wide: the timed calls run with this program's, whatever was
        # compiled since (another config, a prepare step).
        apply_matmul_precision(h["matmul_precision"])
        if h["cpu_allocator"] is not None:  # what the timed calls run with is what the record says
            program.metrics["cpu_allocator_used"] = allocator.apply(h["cpu_allocator"])
        with torch.no_grad():
            for name, value in h["module"].state_dict().items():
                value.copy_(h["initial"][name])
            for t in _optimizer_tensors(h["optimizer"]):
                t.zero_()  # a zero moment/step is what a fresh optimizer's first step starts from
        if h["scaler"] is not None:  # the loss scale and its growth counter back to their start
            h["scaler"].load_state_dict(h["scaler_state"])
        return {"module": h["module"], "optimizer": h["optimizer"]}, h["batch"]

    def sync(self, value: Any) -> Any:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return value  # CPU kernels run synchronously in the calling thread

    def loss_value(self, loss: Any) -> float:
        return float(loss)

    def costs(self, program: Program) -> dict[str, Any]:
        flops = count_flops(program.handle["model"], program.workload.batch)
        return {"flops_per_step": float(flops), "bytes_per_step": None,
                "flops_source": FLOPS_SOURCE}

    def memory_breakdown(self, program: Program) -> dict[str, Any]:
        return dict(program.handle["memory"])

    def is_oom(self, exc: BaseException) -> bool:
        import torch

        return isinstance(exc, (torch.OutOfMemoryError, MemoryError))

    @staticmethod
    def ledger_ops(program: Program, state: Any, batch: Any, steps: int, trace_dir: str) -> Any:
        """The time ledger's operations: torch.profiler's per-operator self times
        (:func:`paradnn.backends.torch.ledger.ledger_ops`; imported here, it reads with pandas)."""
        from paradnn.backends.torch import ledger

        return ledger.ledger_ops(program, state, batch, steps, trace_dir)

    def configure_cache(self, path: str | None) -> Callable[[], None]:
        """Point Inductor's cache (TORCHINDUCTOR_CACHE_DIR) at ``path``/torchinductor."""
        key = "TORCHINDUCTOR_CACHE_DIR"
        previous = os.environ.get(key)
        if path is not None:
            os.environ[key] = os.path.join(path, "torchinductor")

        def restore() -> None:
            if previous is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = previous

        return restore


BACKEND = TorchBackend()

__all__ = ["BACKEND", "COMPILE_MODES", "FLOPS_SOURCE", "TorchBackend", "apply_memory_format", "check",
           "compile_mode", "count_flops", "make_optimizer"]
