"""The ParaDnn generated families (FC, CNN, RNN) in PyTorch, layer for layer as the JAX models.

Same layouts, parameter counts and initializers as ``paradnn/backends/jax/models/{fc,cnn,rnn}.py`` (Flax's
defaults mirrored: Glorot-uniform FC and RNN kernels, LeCun-normal conv and head kernels, zero
biases). Convolutions and pools use TensorFlow/XLA "SAME" padding (asymmetric where the total
is odd, the extra row at the end), so the feature-map sides equal the JAX model's.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from paradnn.families.cnn import GROUP_STRIDE, GROUP_WIDTH
from paradnn.families.rnn import GATES, LSTM_FORGET_BIAS
from paradnn.backends.torch.models import TorchModel, dense, lecun_normal_, softmax_xent
from paradnn.families.cnn import CNN
from paradnn.families.fc import FC
from paradnn.families.rnn import RNN



def same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(low, high) padding of a SAME convolution or pool along one dimension of ``size``."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class SameConv2d(nn.Conv2d):
    """Conv2d without bias, SAME padding: the symmetric part in the convolution, the extra
    row/column of an odd total (at the high end, as XLA) by an explicit pad."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1) -> None:
        super().__init__(cin, cout, kernel, stride, bias=False)
        lecun_normal_(self.weight, cin * kernel * kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, s = self.kernel_size[0], self.stride[0]
        lo_h, hi_h = same_pads(x.shape[-2], k, s)
        lo_w, hi_w = same_pads(x.shape[-1], k, s)
        if hi_h != lo_h or hi_w != lo_w:
            x = F.pad(x, (0, hi_w - lo_w, 0, hi_h - lo_h))
        return F.conv2d(x, self.weight, None, self.stride, (lo_h, lo_w))


def _max_pool_same(x: torch.Tensor, kernel: int, stride: int) -> torch.Tensor:
    lo_h, hi_h = same_pads(x.shape[-2], kernel, stride)
    lo_w, hi_w = same_pads(x.shape[-1], kernel, stride)
    if lo_h == lo_w == 0 and hi_h <= 1 and hi_w <= 1 and all(
            n >= kernel and -(-(n - kernel) // stride) + 1 == -(-n // stride) for n in x.shape[-2:]):
        # Only one extra row/column at the end (the ResNet stem's pool on an even map):
        # ceil_mode's last window reaches one past the edge and ignores it, as a -inf pad does,
        # without copying the map into a padded one.
        return F.max_pool2d(x, kernel, stride, ceil_mode=True)
    x = F.pad(x, (lo_w, hi_w, lo_h, hi_h), value=float("-inf"))
    return F.max_pool2d(x, kernel, stride)


def _bn(channels: int, zero_scale: bool = False) -> nn.BatchNorm2d:
    # Flax momentum 0.9 keeps 90% of the running statistics: torch's momentum 0.1.
    bn = nn.BatchNorm2d(channels, eps=1e-5, momentum=0.1)
    if zero_scale:
        nn.init.zeros_(bn.weight)
    return bn


# ---------------------------------------------------------------------------------------- FC


class FCNet(nn.Module):
    """``layers`` x Linear(nodes) + ReLU, then Linear(output); Glorot-uniform weights, zero biases."""

    def __init__(self, spec: FC) -> None:
        super().__init__()
        sizes = [spec.input] + [spec.nodes] * spec.layers
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.out = nn.Linear(spec.nodes, spec.output)
        for layer in [*self.hidden, self.out]:
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.hidden:
            x = F.relu(layer(x))
        return self.out(x)


def build_fc(spec: FC, dtype: str) -> TorchModel:
    def make_batch(gen: torch.Generator, batch: int, device: Any) -> dict[str, torch.Tensor]:
        x = torch.rand((batch, spec.input), generator=gen, device=device) - 0.5
        y = torch.randint(0, spec.output, (batch,), generator=gen, device=device)
        return {"inputs": x, "labels": y}

    return TorchModel("fc", lambda: FCNet(spec), make_batch,
                      lambda out, batch: softmax_xent(out, batch["labels"]), tags={"kind": "generated"})


# --------------------------------------------------------------------------------------- CNN


class Block(nn.Module):
    """ResNet v1 block (post-activation); the last BN's scale starts at 0."""

    def __init__(self, cin: int, filters: int, stride: int, bottleneck: bool, project: bool) -> None:
        super().__init__()
        out_ch = filters * 4 if bottleneck else filters
        self.project = nn.Sequential(SameConv2d(cin, out_ch, 1, stride), _bn(out_ch)) if project else None
        if bottleneck:
            self.body = nn.Sequential(
                SameConv2d(cin, filters, 1), _bn(filters), nn.ReLU(),
                SameConv2d(filters, filters, 3, stride), _bn(filters), nn.ReLU(),
                SameConv2d(filters, out_ch, 1), _bn(out_ch, zero_scale=True))
        else:
            self.body = nn.Sequential(
                SameConv2d(cin, filters, 3, stride), _bn(filters), nn.ReLU(),
                SameConv2d(filters, filters, 3), _bn(filters, zero_scale=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.project is None else self.project(x)
        return F.relu(self.body(x) + shortcut)


class ResNetV1(nn.Module):
    def __init__(self, spec: CNN) -> None:
        super().__init__()
        self.stem = nn.Sequential(SameConv2d(3, spec.filters, 7, 2), _bn(spec.filters), nn.ReLU())
        blocks, ch = [], spec.filters
        bottleneck = spec.block == "bottleneck"
        for width, stride in zip(GROUP_WIDTH, GROUP_STRIDE):
            f = spec.filters * width
            for i in range(spec.blocks):
                blocks.append(Block(ch, f, stride if i == 0 else 1, bottleneck, project=(i == 0)))
                ch = f * 4 if bottleneck else f
        self.blocks = nn.Sequential(*blocks)
        self.head = dense(ch, spec.output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _max_pool_same(self.stem(x), 3, 2)
        x = self.blocks(x)
        return self.head(x.mean(dim=(2, 3)))


def build_cnn(spec: CNN, dtype: str) -> TorchModel:
    def make_batch(gen: torch.Generator, batch: int, device: Any) -> dict[str, torch.Tensor]:
        x = torch.rand((batch, 3, spec.image, spec.image), generator=gen, device=device)
        y = torch.randint(0, spec.output, (batch,), generator=gen, device=device)
        return {"inputs": x, "labels": y}

    return TorchModel("cnn", lambda: ResNetV1(spec), make_batch,
                      lambda out, batch: softmax_xent(out, batch["labels"]), tags={"kind": "generated"})


# --------------------------------------------------------------------------------------- RNN


def tf1_to_torch_gates(hidden: int) -> torch.Tensor:
    """Column order that takes a TF1 LSTM kernel's gates (i, j, f, o) to torch's (i, f, g, o)
    (TF1's ``j`` is torch's ``g``, the cell input)."""
    i, j, f, o = (torch.arange(k * hidden, (k + 1) * hidden) for k in range(4))
    return torch.cat([i, f, j, o])


@functools.cache
def _onednn_lstm_builds(dtype: torch.dtype) -> bool:
    """Whether torch's fused LSTM runs under CPU autocast to ``dtype`` on this CPU, found by
    running a 1x1x1 one once (cached per process). torch's own capability checks
    (``torch.ops.mkldnn._is_mkldnn_fp16_supported``) are not enough: on an Intel Sapphire
    Rapids (AVX512-FP16) the float16 check says yes and oneDNN still cannot build a float16
    LSTM primitive (torch 2.14; a plain ``nn.LSTM`` fails too), as bfloat16 fails on AVX2-only
    CPUs."""
    x, w_ih, w_hh, b = torch.zeros(1, 1, 1), torch.zeros(4, 1), torch.zeros(4, 1), torch.zeros(4)
    try:
        # Grad mode on whatever the caller's: under no_grad torch takes another oneDNN path that
        # builds where the training one does not (measured: float16 on the host above).
        with torch.inference_mode(False), torch.enable_grad(), torch.autocast("cpu", dtype=dtype):
            torch.lstm(x, (torch.zeros(1, 1, 1),) * 2, [w_ih, w_hh, b, b], True, 1, 0.0, True, False, True)
    except RuntimeError:  # oneDNN's "could not create a primitive descriptor"
        return False
    return True


def _autocast_dtype_onednn_lacks(device: torch.device) -> torch.dtype | None:
    """The reduced dtype CPU autocast computes in on ``device``, where torch's fused LSTM cannot
    run in it on this CPU (:func:`_onednn_lstm_builds`); None on a GPU, without autocast, for
    float32, or where it runs."""
    if device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return None
    dtype = torch.get_autocast_dtype("cpu")
    if dtype not in (torch.bfloat16, torch.float16):
        return None
    return None if _onednn_lstm_builds(dtype) else dtype


class Recurrent(nn.Module):
    """One TF1-style recurrent layer over a batch-major sequence ``[batch, length, features]``.

    The ``rnn`` and ``lstm`` cells run torch's fused recurrent kernels (``torch.rnn_tanh``,
    ``torch.lstm``: oneDNN on a CPU, cuDNN on a GPU), the kernels a plain PyTorch loop runs
    through ``nn.RNN``/``nn.LSTM``. Their weights are kept as those kernels take them: the TF1
    kernel over ``[x, h]`` (Glorot-uniform over its whole shape, as Flax's) split into the input
    weights ``weight_ih`` and the recurrent weights ``weight_hh``, transposed, the LSTM's gates in
    torch's order (:func:`tf1_to_torch_gates`); one trainable bias; the LSTM's constant forget bias
    is the kernel's second bias (a buffer, not trained). Same numbers, same function, same
    parameter count as the TF1 cell. The fused kernels run eagerly inside a compiled step
    (TorchDynamo leaves them out of its graphs, as it does ``nn.LSTM``): compiled, the cell
    loop took 1.65x the fused kernel's time on the bench LSTM (embed 256, length 20, batch 64).
    Under CPU autocast to a dtype this CPU's oneDNN lacks, the LSTM casts for itself and runs
    torch's ATen kernel (see ``_fused``).

    The ``gru`` cell has no fused counterpart (TF1 multiplies ``h`` by the reset gate before the
    candidate's matmul, torch after it): its loop over time is Python, which torch.compile
    unrolls."""

    def __init__(self, cell: str, in_dim: int, hidden: int) -> None:
        super().__init__()
        self.cell, self.hidden = cell, hidden
        glorot = nn.init.xavier_uniform_
        if cell == "gru":
            # Stored (in, out) as Flax's kernels; xavier's fans are symmetric, so the law is the same.
            self.gates_kernel = nn.Parameter(glorot(torch.empty(in_dim + hidden, 2 * hidden)))
            self.gates_bias = nn.Parameter(torch.ones(2 * hidden))
            self.candidate_kernel = nn.Parameter(glorot(torch.empty(in_dim + hidden, hidden)))
            self.candidate_bias = nn.Parameter(torch.zeros(hidden))
            return
        width = GATES[cell] * hidden
        kernel = glorot(torch.empty(in_dim + hidden, width))
        second = torch.zeros(width)
        if cell == "lstm":
            kernel = kernel[:, tf1_to_torch_gates(hidden)]
            second[hidden:2 * hidden] = LSTM_FORGET_BIAS  # torch's f slot
        self.weight_ih = nn.Parameter(kernel[:in_dim].t().contiguous())
        self.weight_hh = nn.Parameter(kernel[in_dim:].t().contiguous())
        self.bias = nn.Parameter(torch.zeros(width))
        self.register_buffer("bias_hh", second)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        if self.cell == "gru":
            return self._gru(xs)
        return self._fused(xs)

    @torch.compiler.disable
    def _fused(self, xs: torch.Tensor) -> torch.Tensor:
        # torch.compile's Inductor fails on these kernels' training graph (torch 2.14:
        # "expected Tensor() for op: aten.mkldnn_rnn_layer"); eager they are the fastest path.
        weights = [self.weight_ih, self.weight_hh, self.bias, self.bias_hh]
        zeros = xs.new_zeros((1, xs.shape[0], self.hidden))
        if self.cell == "lstm":
            low = _autocast_dtype_onednn_lacks(xs.device)
            if low is not None:
                # Under CPU autocast torch hands oneDNN's LSTM the reduced dtype, which oneDNN cannot
                # build on a CPU without that dtype's kernels (torch 2.14 on an AVX2-only AMD EPYC:
                # "could not create a primitive descriptor for the LSTM forward propagation
                # primitive", a plain nn.LSTM too). Cast explicitly instead: torch then runs its own
                # ATen LSTM in that dtype, the computation autocast asks for.
                with torch.autocast("cpu", enabled=False):
                    return torch.lstm(xs.to(low), (zeros.to(low), zeros.to(low)), [w.to(low) for w in weights],
                                      True, 1, 0.0, self.training, False, True)[0]
            return torch.lstm(xs, (zeros, zeros), weights, True, 1, 0.0, self.training, False, True)[0]
        return torch.rnn_tanh(xs, zeros, weights, True, 1, 0.0, self.training, False, True)[0]

    def _gru(self, xs: torch.Tensor) -> torch.Tensor:
        h = xs.new_zeros((xs.shape[0], self.hidden))
        ys = []
        for x in xs.unbind(1):
            r, u = torch.sigmoid(torch.cat([x, h], -1) @ self.gates_kernel + self.gates_bias).chunk(2, -1)
            cand = torch.tanh(torch.cat([x, r * h], -1) @ self.candidate_kernel + self.candidate_bias)
            h = u * h + (1 - u) * cand
            ys.append(h)
        return torch.stack(ys, 1)


class RNNLM(nn.Module):
    def __init__(self, spec: RNN) -> None:
        super().__init__()
        self.embed = nn.Embedding(spec.vocab, spec.embed)
        nn.init.normal_(self.embed.weight, std=1.0 / math.sqrt(spec.embed))  # Flax Embed's default
        self.layers = nn.ModuleList(Recurrent(spec.cell, spec.embed, spec.embed) for _ in range(spec.layers))
        self.head = dense(spec.embed, spec.vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)  # batch-major throughout, as the tokens and the loss are
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def build_rnn(spec: RNN, dtype: str) -> TorchModel:
    def make_batch(gen: torch.Generator, batch: int, device: Any) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, spec.vocab, (batch, spec.length + 1), generator=gen, device=device)
        return {"inputs": ids[:, :-1].contiguous(), "labels": ids[:, 1:].contiguous()}

    return TorchModel("rnn", lambda: RNNLM(spec), make_batch,
                      lambda out, batch: softmax_xent(out, batch["labels"]), tags={"kind": "generated"})


__all__ = ["build_cnn", "build_fc", "build_rnn", "same_pads", "tf1_to_torch_gates"]
