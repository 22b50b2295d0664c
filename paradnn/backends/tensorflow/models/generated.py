"""Keras builds of the generated families (FC, CNN, RNN), layer for layer the JAX models.

* FC: ``layers`` x Dense(nodes, ReLU) then Dense(output); Glorot-uniform kernels, biases on.
* CNN: ResNet v1 (post-activation): stem 7x7/2 conv, BN, ReLU, 3x3/2 max-pool (SAME padding,
  as TF and Flax both pad: the extra pixel at the end); four groups (filters x1, x2, x4, x8,
  strides 1, 2, 2, 2), a 1x1 projection + BN on each group's first block; the last BN of a
  block starts with gamma = 0; global average pool and Dense(output). Convs without bias; BN
  momentum 0.9 (Keras and Flax both weight the old statistic by it), epsilon 1e-5.
* RNN: Embedding -> ``layers`` TF1-style fused cells (one kernel over ``[x, h]``; GRU: a
  2-gate kernel with bias 1 and a 1-gate candidate kernel; LSTM: forget bias +1) -> Dense(vocab).
  Each layer is one ``tf.scan`` over time (``unroll`` uses a Python loop instead, for costs).
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from paradnn.families.cnn import GROUP_STRIDE, GROUP_WIDTH
from paradnn.families.rnn import GATES, LSTM_FORGET_BIAS
from paradnn.backends.tensorflow.models import TFModel, compute_dtype, policy, softmax_xent
from paradnn.families.cnn import CNN
from paradnn.families.fc import FC
from paradnn.families.rnn import RNN



def _classification(tfm_name: str, model: keras.Model, make_batch, **kw: Any) -> TFModel:
    return TFModel(tfm_name, model, make_batch,
                   loss=lambda logits, batch: softmax_xent(logits, batch["labels"]),
                   tags={"kind": "generated"}, **kw)


def build_fc(spec: FC, dtype: str) -> TFModel:
    """The FC family in Keras: ``spec.layers`` hidden Dense(ReLU) layers and a Dense head."""
    pol = policy(dtype)
    x = inputs = keras.Input((spec.input,), dtype=compute_dtype(dtype))
    for _ in range(spec.layers):
        x = keras.layers.Dense(spec.nodes, activation="relu", kernel_initializer="glorot_uniform", dtype=pol)(x)
    logits = keras.layers.Dense(spec.output, kernel_initializer="glorot_uniform", dtype=pol)(x)
    model = keras.Model(inputs, logits, name="fc")

    def make_batch(seed: int, batch: int) -> dict[str, tf.Tensor]:
        x = tf.random.stateless_uniform((batch, spec.input), (seed, 1), -0.5, 0.5, tf.float32)
        y = tf.random.stateless_uniform((batch,), (seed, 2), 0, spec.output, tf.int32)
        return {"inputs": tf.cast(x, compute_dtype(dtype)), "labels": y}

    return _classification("fc", model, make_batch)


def _bn(pol: str, zero_gamma: bool = False) -> keras.layers.BatchNormalization:
    return keras.layers.BatchNormalization(momentum=0.9, epsilon=1e-5, dtype=pol,
                                           gamma_initializer="zeros" if zero_gamma else "ones")


def _conv(filters: int, kernel: int, strides: int, pol: str) -> keras.layers.Conv2D:
    return keras.layers.Conv2D(filters, kernel, strides, padding="same", use_bias=False, dtype=pol)


def _cnn_block(x, filters: int, strides: int, bottleneck: bool, project: bool, pol: str):
    out_ch = filters * 4 if bottleneck else filters
    shortcut = x
    if project:
        shortcut = _bn(pol)(_conv(out_ch, 1, strides, pol)(x))
    if bottleneck:
        y = keras.layers.ReLU(dtype=pol)(_bn(pol)(_conv(filters, 1, 1, pol)(x)))
        y = keras.layers.ReLU(dtype=pol)(_bn(pol)(_conv(filters, 3, strides, pol)(y)))
        y = _bn(pol, zero_gamma=True)(_conv(out_ch, 1, 1, pol)(y))
    else:
        y = keras.layers.ReLU(dtype=pol)(_bn(pol)(_conv(filters, 3, strides, pol)(x)))
        y = _bn(pol, zero_gamma=True)(_conv(filters, 3, 1, pol)(y))
    return keras.layers.ReLU(dtype=pol)(keras.layers.Add(dtype=pol)([y, shortcut]))


def build_cnn(spec: CNN, dtype: str) -> TFModel:
    """The CNN family (ResNet v1, residual or bottleneck blocks) in Keras, channels-last."""
    pol = policy(dtype)
    x = inputs = keras.Input((spec.image, spec.image, 3), dtype=compute_dtype(dtype))
    x = keras.layers.ReLU(dtype=pol)(_bn(pol)(_conv(spec.filters, 7, 2, pol)(x)))
    x = keras.layers.MaxPooling2D(3, 2, padding="same", dtype=pol)(x)
    for width, stride in zip(GROUP_WIDTH, GROUP_STRIDE):
        for i in range(spec.blocks):
            x = _cnn_block(x, spec.filters * width, stride if i == 0 else 1, spec.block == "bottleneck",
                           project=(i == 0), pol=pol)
    x = keras.layers.GlobalAveragePooling2D(dtype=pol)(x)
    logits = keras.layers.Dense(spec.output, dtype=pol)(x)
    model = keras.Model(inputs, logits, name="cnn")

    def make_batch(seed: int, batch: int) -> dict[str, tf.Tensor]:
        x = tf.random.stateless_uniform((batch, spec.image, spec.image, 3), (seed, 1), 0.0, 1.0, tf.float32)
        y = tf.random.stateless_uniform((batch,), (seed, 2), 0, spec.output, tf.int32)
        return {"inputs": tf.cast(x, compute_dtype(dtype)), "labels": y}

    return _classification("cnn", model, make_batch)


class Recurrent(keras.layers.Layer):
    """One TF1-style recurrent layer over a batch-major sequence ``[batch, length, features]``."""

    def __init__(self, cell: str, hidden: int, unroll: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.cell, self.hidden, self.unroll = cell, hidden, unroll

    def build(self, input_shape) -> None:
        fan = int(input_shape[-1]) + self.hidden
        h = self.hidden
        if self.cell == "gru":
            self.gates_kernel = self.add_weight((fan, 2 * h), "glorot_uniform", name="gates_kernel")
            self.gates_bias = self.add_weight((2 * h,), "ones", name="gates_bias")
            self.candidate_kernel = self.add_weight((fan, h), "glorot_uniform", name="candidate_kernel")
            self.candidate_bias = self.add_weight((h,), "zeros", name="candidate_bias")
        else:
            self.kernel = self.add_weight((fan, GATES[self.cell] * h), "glorot_uniform", name="kernel")
            self.bias = self.add_weight((GATES[self.cell] * h,), "zeros", name="bias")

    def call(self, xs: tf.Tensor) -> tf.Tensor:
        dt = self.compute_dtype
        c = lambda v: tf.cast(v, dt)  # noqa: E731 (float32 master weights, compute in dt)
        batch = tf.shape(xs)[0]
        h0 = tf.zeros((batch, self.hidden), dt)
        if self.cell == "rnn":
            w, b = c(self.kernel), c(self.bias)

            def step(h, x):
                return tf.tanh(tf.concat([x, h], -1) @ w + b)
            carry0: Any = h0
        elif self.cell == "lstm":
            w, b = c(self.kernel), c(self.bias)

            def step(carry, x):
                cell, h = carry
                i, j, f, o = tf.split(tf.concat([x, h], -1) @ w + b, 4, axis=-1)
                cell = cell * tf.sigmoid(f + LSTM_FORGET_BIAS) + tf.sigmoid(i) * tf.tanh(j)
                return cell, tf.tanh(cell) * tf.sigmoid(o)
            carry0 = (h0, h0)
        else:
            wg, bg = c(self.gates_kernel), c(self.gates_bias)
            wc, bc = c(self.candidate_kernel), c(self.candidate_bias)

            def step(h, x):
                r, u = tf.split(tf.sigmoid(tf.concat([x, h], -1) @ wg + bg), 2, axis=-1)
                cand = tf.tanh(tf.concat([x, r * h], -1) @ wc + bc)
                return u * h + (1 - u) * cand
            carry0 = h0

        def out(carry):
            return carry[1] if self.cell == "lstm" else carry

        if self.unroll:  # a Python loop: XLA sees every time step (cost analysis counts them)
            carry, ys = carry0, []
            for x in tf.unstack(xs, axis=1):
                carry = step(carry, x)
                ys.append(out(carry))
            return tf.stack(ys, axis=1)
        time_major = tf.transpose(xs, (1, 0, 2))
        carries = tf.scan(step, time_major, initializer=carry0)
        return tf.transpose(out(carries), (1, 0, 2))

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.hidden)


def build_rnn(spec: RNN, dtype: str, unroll: bool = False) -> TFModel:
    """The RNN language model in Keras: Embedding, ``spec.layers`` cells, Dense(vocab)."""
    pol = policy(dtype)
    tokens = keras.Input((spec.length,), dtype="int32")
    x = keras.layers.Embedding(spec.vocab, spec.embed, dtype=pol)(tokens)
    for i in range(spec.layers):
        x = Recurrent(spec.cell, spec.embed, unroll, dtype=pol, name=f"layer_{i}")(x)
    logits = keras.layers.Dense(spec.vocab, dtype=pol)(x)
    model = keras.Model(tokens, logits, name="rnn")

    def make_batch(seed: int, batch: int) -> dict[str, tf.Tensor]:
        ids = tf.random.stateless_uniform((batch, spec.length + 1), (seed, 1), 0, spec.vocab, tf.int32)
        return {"inputs": ids[:, :-1], "labels": ids[:, 1:]}

    return _classification("rnn", model, make_batch, loop_length=spec.length,
                           unrolled=lambda n: build_rnn(spec.replace(length=n), dtype, unroll=True))
