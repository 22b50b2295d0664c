"""Deep Speech 2 (Amodei et al. 2016) in the layout of deepspeech.pytorch, which paper 000 ran
on AN4, with CTC loss.

Input: spectrograms of ``length`` frames (10 ms hop) x 161 frequency bins (20 ms windows at
16 kHz). Two 2-D convs (32 channels; 11x41 kernel stride 2x2, then 11x21 stride 1x2, over time x
frequency, with biases) each followed by BN and a clipped ReLU (hardtanh 0..20); five
bidirectional GRU layers of 640 units per direction whose directions are summed, each but the
first preceded by sequence-wise BN; then BN and a dense layer (no bias) to 29 characters
(blank, space, apostrophe, 26 letters). The GRU width 640 is chosen so that the count,
27,471,008 trainable parameters, matches the 27 M of paper 000's Table 5 (deepspeech.pytorch's
default width 800 gives 41 M).

One departure from deepspeech.pytorch: the convs do not pad along time (they do along
frequency), so the GRUs run ``T' = floor((length - 11) / 2) - 9`` steps (185 for the default
400 frames) instead of ``length / 2``. Why: XLA's cost analysis counts only the kernel taps that
fall on real data, so with time padding the conv cost of the short unrolled variants that the
cost model extrapolates from is not on the line through the full model's cost; without it,
every cost is exactly affine in ``T'``.

Targets: ``length // 16`` characters (25 for the default 400 frames, AN4-like), uniform over the
28 non-blank symbols; loss ``optax.ctc_loss`` averaged over the batch. ``loop_length`` is
``T'``; ``unrolled(n)`` takes ``2n + 29`` frames (so the loops run ``n`` steps) with the same
number of target characters. CTC's own scan is element-wise work: it is outside the matmul
FLOPs, and XLA counts its body once.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from paradnn.backends.jax.models.base import ModelDef
from paradnn.backends.jax.models.registry import Entry, register
from paradnn.backends.jax.models.zoo.layers import batch_norm, no_image, real_tags, sequence_length
from paradnn.backends.jax.models.zoo.recurrent import GRU
from paradnn.families.real import Real

FREQ_BINS = 161
CHARACTERS = 29  # index 0 is the CTC blank
CHANNELS, HIDDEN, RNN_LAYERS = 32, 640, 5
FRAMES_PER_CHARACTER = 16
MIN_FRAMES = 48


def rnn_steps(frames: int) -> int:
    """GRU steps after the two convs (no time padding; kernel 11, strides 2 then 1)."""
    return (frames - 11) // 2 + 1 - 10


def _clipped_relu(x: jax.Array) -> jax.Array:
    return jnp.clip(x, 0, 20)


class DeepSpeech2(nn.Module):
    """``spectrogram [B, frames, 161]`` -> character logits ``[B, rnn_steps(frames), 29]``."""

    unroll: int | bool = 1
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        x = x.astype(self.dtype)[..., None]
        x = nn.Conv(CHANNELS, (11, 41), (2, 2), padding=((0, 0), (20, 20)), dtype=self.dtype)(x)
        x = _clipped_relu(batch_norm(train, self.dtype)(x))
        x = nn.Conv(CHANNELS, (11, 21), (1, 2), padding=((0, 0), (10, 10)), dtype=self.dtype)(x)
        x = _clipped_relu(batch_norm(train, self.dtype)(x))
        x = x.reshape(x.shape[0], x.shape[1], -1)  # [B, T', freq x channels]
        for i in range(RNN_LAYERS):
            if i:
                x = batch_norm(train, self.dtype)(x)
            fwd = GRU(HIDDEN, unroll=self.unroll, dtype=self.dtype)(x)
            bwd = GRU(HIDDEN, reverse=True, unroll=self.unroll, dtype=self.dtype)(x)
            x = fwd + bwd
        x = batch_norm(train, self.dtype)(x)
        return nn.Dense(CHARACTERS, use_bias=False, dtype=self.dtype)(x)


def loss(logits: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    logits = logits.astype(jnp.float32)
    labels = batch["labels"]
    per_utterance = optax.ctc_loss(
        logits, jnp.zeros(logits.shape[:2], jnp.float32), labels, jnp.zeros(labels.shape, jnp.float32), blank_id=0
    )
    return per_utterance.mean()


def _build(frames: int, characters: int, dtype: str, unroll: int | bool) -> ModelDef:
    def make_batch(key: jax.Array, batch: int) -> dict[str, jax.Array]:
        kx, ky = jax.random.split(key)
        x = jax.random.normal(kx, (batch, frames, FREQ_BINS), jnp.float32).astype(dtype)
        return {"inputs": x, "labels": jax.random.randint(ky, (batch, characters), 1, CHARACTERS)}

    return ModelDef(
        name="deepspeech2",
        module=DeepSpeech2(unroll, dtype=jnp.dtype(dtype)),
        make_batch=make_batch,
        loss=loss,
        default_optimizer="momentum",
        loop_length=rnn_steps(frames),
        unrolled=lambda n: _build(2 * n + 29, characters, dtype, True),
        tags=real_tags("speech_recognition", length=frames),
    )


def build(spec: Real, dtype: str) -> ModelDef:
    no_image(spec)
    frames = sequence_length(spec, 400, MIN_FRAMES)
    return _build(frames, frames // FRAMES_PER_CHARACTER, dtype, 1)


register(Entry(name="deepspeech2", factory=build))
