"""The tf.data host input pipeline of ``paradnn infeed`` (:mod:`paradnn.experiments.infeed`) and the JPEG
files it reads: TensorFlow on the CPU only (its GPUs hidden: it must not take an accelerator from
the framework that trains).

Why tf.data: its decode, crop and flip run as C++ kernels on its own threads, outside Python's
GIL, so ``workers`` map calls really run in parallel next to the training step loop;
``num_parallel_calls`` and the private thread pool set the worker count exactly; ``prefetch``
overlaps the host with the device. Grain would add a dependency and run Python decoding in
worker processes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from paradnn.errors import ParadnnError, SpecError

#: ImageNet channel mean and standard deviation on the 0-255 scale (RGB), the normalization of
#: the reference ResNet input pipelines.
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)
#: JPEG quality of the generated files (ImageNet's files are mostly quality 90 or above).
JPEG_QUALITY = 90


def _tf():
    """TensorFlow, quiet and on the CPU only (it must not take an accelerator from JAX)."""
    from paradnn.backends.tensorflow import startup

    # Its C++ start-up lines filtered from stderr (startup.quiet), the devices' discovery too.
    with startup.quiet():
        try:
            import tensorflow as tf
        except ImportError as exc:
            raise ParadnnError("infeed: the host input pipeline needs TensorFlow (tf.data): install "
                               f"paradnn[tf] ({exc})") from None
        for kind in ("GPU", "TPU"):
            try:
                tf.config.set_visible_devices([], kind)
            except (RuntimeError, ValueError):
                pass  # already initialized, or no such device type in this build: nothing to hide
    return tf


def tf_version() -> str | None:
    """TensorFlow's version if it is installed (the pipeline rows record it), else None."""
    try:
        return _tf().__version__
    except ParadnnError:
        return None


def make_jpegs(data_dir: str | os.PathLike, side: int, count: int, classes: int,
               seed: int = 0) -> tuple[list[str], list[int]]:
    """``count`` JPEG files of ``side`` x ``side`` RGB pixels and their labels (integers below
    ``classes``) in a folder of ``data_dir`` named by the parameters; made once, then reused.

    Each image is a random 8x8 colour field resized to ``side`` plus Gaussian noise (sigma 12),
    so it compresses like a photograph more than white noise does. The folder is written under
    a temporary name and renamed when complete, so a half-written set is never used."""
    side = int(side)
    if not 8 <= side <= 8192:
        raise SpecError("jpeg_side", side, "an integer from 8 to 8192 pixels")
    if not 1 <= count <= 1_000_000:
        raise SpecError("files", count, "an integer from 1 to 1000000")
    root = Path(data_dir)
    folder = root / f"jpeg-{side}px-{count}-c{classes}-s{seed}"
    manifest = folder / "manifest.json"
    if manifest.is_file():
        entries = json.loads(manifest.read_text())
        return [str(folder / e["file"]) for e in entries], [int(e["label"]) for e in entries]
    tf = _tf()
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=root))
    rng = np.random.default_rng(seed)
    entries = []
    try:
        for i in range(count):
            field = rng.uniform(0, 255, size=(1, 8, 8, 3)).astype(np.float32)
            smooth = tf.image.resize(field, (side, side), method="bilinear")[0].numpy()
            pixels = np.clip(smooth + rng.normal(0, 12, size=smooth.shape), 0, 255).astype(np.uint8)
            name = f"img_{i:06d}.jpg"
            data = tf.io.encode_jpeg(pixels, quality=JPEG_QUALITY).numpy()
            (work / name).write_bytes(data)
            entries.append({"file": name, "label": int(rng.integers(0, classes))})
        (work / "manifest.json").write_text(json.dumps(entries))
        try:
            os.replace(work, folder)
        except OSError:
            if not manifest.is_file():  # not a concurrent maker that finished first
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return make_jpegs(data_dir, side, count, classes, seed)


def build_pipeline(files: Sequence[str], labels: Sequence[int], config: Any, seed: int = 0):
    """The tf.data pipeline of ``config`` (a :class:`paradnn.experiments.infeed.PipelineConfig`) over ``files``: endless, shuffled every epoch; yields
    ``(images, labels)`` batches, images NHWC in ``config.dtype``, labels int32."""
    tf = _tf()
    image, workers = config.image, config.workers
    mean = tf.constant(IMAGENET_MEAN, tf.float32)
    std = tf.constant(IMAGENET_STD, tf.float32)
    out_dtype = tf.as_dtype(config.dtype)

    def load(path, label):
        pixels = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        pixels = tf.image.random_crop(pixels, [image, image, 3])
        pixels = tf.image.random_flip_left_right(pixels)
        pixels = (tf.cast(pixels, tf.float32) - mean) / std
        return tf.cast(pixels, out_dtype), label

    def slow(path, label):
        # time.sleep releases the GIL, so sleeping map calls overlap like real work would.
        tf.py_function(lambda: time.sleep(config.delay_ms / 1e3), [], [])
        return load(path, label)

    ds = tf.data.Dataset.from_tensor_slices((list(files), np.asarray(labels, np.int32)))
    ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.map(slow if config.delay_ms > 0 else load, num_parallel_calls=workers, deterministic=False)
    ds = ds.batch(config.batch, drop_remainder=True).prefetch(config.prefetch)
    options = tf.data.Options()
    options.threading.private_threadpool_size = workers
    options.threading.max_intra_op_parallelism = 1  # one worker decodes one image on one thread
    options.autotune.enabled = False  # the worker count and buffers are what we set, not tuned
    options.deterministic = False
    return ds.with_options(options)



def host_batches(files: Sequence[str], labels: Sequence[int], config: Any, seed: int = 0):
    """The numpy batches of :func:`build_pipeline`: ``{"inputs", "labels"}`` dicts, endless."""
    return ({"inputs": x, "labels": y} for x, y in build_pipeline(files, labels, config, seed).as_numpy_iterator())


__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "JPEG_QUALITY", "build_pipeline", "host_batches", "make_jpegs",
           "tf_version"]
