"""Host infeed: one model trained from synthetic device-resident batches and from a real host
input pipeline, and how long the device waits for input (ParaDnn's Figure 5).

Two feeds of the same jitted training step (:func:`paradnn.backends.jax.step.prepare`, the state donated):

* ``synthetic``: the batch made on the device from a fixed seed (the path of ``paradnn run``);
  no data preparation at all, the throughput the device alone allows.
* ``pipeline``: a tf.data pipeline on the host reads JPEG files, decodes them, random-crops
  and flips them, normalizes them with the ImageNet mean and standard deviation and batches
  them, with ``workers`` parallel map calls on a private pool of ``workers`` threads, and
  prefetches ``prefetch`` batches on the host. A feeder thread moves each numpy batch to the
  device (``jax.device_put``, waited for there) and keeps one transferred batch ready while the
  step runs on the other: double buffering.

Why tf.data: its decode, crop and flip run as C++ kernels on its own threads, outside Python's
GIL, so ``workers`` map calls really run in parallel next to the JAX step loop;
``num_parallel_calls`` and the private thread pool set the worker count exactly; ``prefetch``
overlaps the host with the device. Grain would add a dependency and run Python decoding
in worker processes. TensorFlow here runs on the CPU only (its GPUs are hidden).

The JPEG files are generated locally (smooth random colour fields with noise, encoded with
``tf.io.encode_jpeg``, quality 90) and cached in ``data_dir``; nothing is downloaded.

Timing, per training step (perf_counter, seconds)::

    t0; batch = next input          # the wait for input: the device is idle meanwhile
    t1; state, loss = step(state, batch); wait until loss is ready
    t2

The step waits for its result before the next one is dispatched, so the device runs nothing
while the loop waits for input: ``t1 - t0`` is time the device waited. Per feed:
``infeed_bound_fraction = sum(t1 - t0) / sum(t2 - t0)`` over the timed steps and
``examples_per_sec = batch x steps / sum(t2 - t0)``. The synthetic feed runs the same loop
(its "next input" returns the resident batch), so the two are comparable.

On a CPU-only host the "device" is the host's own CPU: the input workers and the training step
share the same cores, so the rows carry ``device_is_host = True`` and are not a measurement
of an accelerator's infeed. On a GPU or TPU host the same command measures for real.

Rows are :class:`~paradnn.record.Record` objects with ``family = "infeed"`` and tag
``kind = "infeed"``; model analyses that select model families never see them.
"""

from __future__ import annotations

import json
import math
import os
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from paradnn.errors import ParadnnError, SpecError
from paradnn.record import Record
from paradnn.specs import Workload

INFEED_FAMILY = "infeed"
FEEDS = ("synthetic", "pipeline")
#: ImageNet channel mean and standard deviation on the 0-255 scale (RGB), the normalization of
#: the reference ResNet input pipelines.
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)
#: JPEG quality of the generated files (ImageNet's files are mostly quality 90 or above).
JPEG_QUALITY = 90
#: Side of the stored images over the crop side: 256 px files for 224 px crops, as ImageNet
#: training pipelines resize before cropping.
STORED_OVER_CROP = 256 / 224
MAX_WORKERS = 256
#: Batches on the device at once besides the one the step uses (double buffering).
DEVICE_BUFFER = 1
DEVICE_IS_HOST_NOTE = ("the device is this host's CPU: the input workers and the training step "
                       "share its cores, so these timings are NOT an accelerator infeed measurement")


def default_data_dir() -> Path:
    """Where generated JPEG files are cached when no folder is given: ``paradnn-infeed`` in the
    system's temporary folder (``TMPDIR``)."""
    return Path(tempfile.gettempdir()) / "paradnn-infeed"


# ---------------------------------------------------------------------------------------------
# Bookkeeping: no framework needed.

def infeed_fraction(wait_s: Sequence[float], step_s: Sequence[float]) -> float:
    """Fraction of the step time the device waited for input: ``sum(wait) / sum(step)`` over
    the timed steps (seconds each; a step's time includes its wait). 0 = never waited."""
    wait, step = np.asarray(wait_s, dtype=float), np.asarray(step_s, dtype=float)
    if wait.shape != step.shape or step.size == 0:
        raise ParadnnError(f"infeed fraction: needs as many waits as steps, at least one "
                           f"(got {wait.size} waits, {step.size} steps)")
    if np.any(wait < 0) or np.any(wait > step):
        raise ParadnnError("infeed fraction: every wait must lie within its step (0 <= wait <= step)")
    return float(wait.sum() / step.sum())


def stream_metrics(wait_s: Sequence[float], step_s: Sequence[float], batch: int) -> dict[str, Any]:
    """The metrics of one feed from per-step wait and step times (s) at a global ``batch``
    (examples): throughput over the timed window and the step-time distribution."""
    wait, step = np.asarray(wait_s, dtype=float), np.asarray(step_s, dtype=float)
    fraction = infeed_fraction(wait, step)
    mean = float(step.mean())
    return {
        "examples_per_sec": batch * step.size / float(step.sum()),
        "step_time_s": float(np.median(step)),
        "step_time_p10_s": float(np.percentile(step, 10)),
        "step_time_p90_s": float(np.percentile(step, 90)),
        "step_time_cv": float(step.std() / mean) if mean > 0 else math.nan,
        "infeed_wait_s": float(wait.mean()),
        "infeed_wait_p90_s": float(np.percentile(wait, 90)),
        "infeed_bound_fraction": fraction,
        "device_step_time_s": float(np.median(step - wait)),
        "timed_steps": int(step.size),
    }


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """The table of an infeed experiment from its rows (``feed``, ``workers``,
    ``examples_per_sec``, ``infeed_bound_fraction``, ...): ok rows, synthetic first then the
    pipeline by worker count, with ``synthetic_speedup`` (synthetic examples/s over the row's:
    how much faster training would be without data preparation, 1 = no infeed cost)."""
    ok = rows[rows["status"] == "ok"].copy() if "status" in rows.columns else rows.copy()
    synthetic = ok.loc[ok["feed"] == "synthetic", "examples_per_sec"]
    base = float(synthetic.iloc[0]) if len(synthetic) else math.nan
    ok["synthetic_speedup"] = base / ok["examples_per_sec"]
    ok["_order"] = (ok["feed"] != "synthetic").astype(int)
    ok = ok.sort_values(["_order", "workers"], na_position="first").drop(columns="_order")
    return ok.reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# The host input pipeline (TensorFlow, imported here only).

def _tf():
    """TensorFlow, quiet and on the CPU only (it must not take an accelerator from JAX)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
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


def stored_side(image: int) -> int:
    """Side (px) of the generated JPEG files for crops of ``image`` px (256 for 224)."""
    return int(round(image * STORED_OVER_CROP))


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


@dataclass(frozen=True)
class PipelineConfig:
    """One host input pipeline: ``workers`` parallel map calls (and threads), crops of
    ``image`` px from files of ``jpeg_side`` px, ``prefetch`` batches prefetched on the host,
    ``delay_ms`` of extra host time per image (a sleep inside the map, to make the pipeline
    slow on purpose; 0 normally)."""

    workers: int
    image: int
    jpeg_side: int
    batch: int
    dtype: str = "float32"
    prefetch: int = 2
    delay_ms: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.workers, int) or not 1 <= self.workers <= MAX_WORKERS:
            raise SpecError("workers", self.workers, f"integers from 1 to {MAX_WORKERS}")
        if not isinstance(self.prefetch, int) or not 1 <= self.prefetch <= 1024:
            raise SpecError("prefetch", self.prefetch, "an integer from 1 to 1024 batches")
        if not (isinstance(self.delay_ms, (int, float)) and 0 <= self.delay_ms <= 60_000):
            raise SpecError("delay_ms", self.delay_ms, "a number of milliseconds from 0 to 60000")
        if self.jpeg_side < self.image:
            raise SpecError("jpeg_side", self.jpeg_side, f"at least the crop side image={self.image} px")


def build_pipeline(files: Sequence[str], labels: Sequence[int], config: PipelineConfig, seed: int = 0):
    """The tf.data pipeline of ``config`` over ``files``: endless, shuffled every epoch; yields
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


class DeviceFeeder:
    """Moves host batches to the device in a background thread, one ahead of the consumer:
    while the step uses one batch, the next is already transferred (double buffering).

    ``batches`` yields dicts of numpy arrays; ``sharding`` (or None: the default device) is
    where they go. Errors of the producer are raised by :meth:`next`."""

    def __init__(self, batches: Iterator[dict[str, np.ndarray]], sharding: Any = None):
        self._batches = batches
        self._sharding = sharding
        self._queue: queue.Queue = queue.Queue(maxsize=DEVICE_BUFFER)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paradnn-infeed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import jax

        try:
            for host in self._batches:
                device = jax.device_put(host, self._sharding)
                jax.block_until_ready(device)  # "ready" means transferred, not merely queued
                while not self._stop.is_set():
                    try:
                        self._queue.put(("batch", device), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    return
            self._queue.put(("error", ParadnnError("infeed: the input pipeline ended")))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            self._queue.put(("error", exc))

    def next(self) -> Any:
        """The next device batch; blocks until one is ready."""
        kind, value = self._queue.get()
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        self._stop.set()
        while True:  # unblock a producer waiting to put
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=30)


# ---------------------------------------------------------------------------------------------
# Measurement.

def time_stream(step: Callable, state: Any, next_batch: Callable[[], Any], steps: int,
                warmup_steps: int) -> tuple[Any, np.ndarray, np.ndarray, float]:
    """Run ``warmup_steps`` untimed and ``steps`` timed training steps, each fed by
    ``next_batch()``; returns (state, wait_s, step_s, final loss): per timed step the seconds
    spent waiting for input and the seconds of the whole step (wait, dispatch and compute)."""
    import jax

    wait = np.empty(steps)
    total = np.empty(steps)
    loss = None
    for i in range(warmup_steps + steps):
        t0 = time.perf_counter()
        batch = next_batch()
        t1 = time.perf_counter()
        state, loss = step(state, batch)
        jax.block_until_ready(loss)  # nothing runs on the device while the next input is awaited
        t2 = time.perf_counter()
        if i >= warmup_steps:
            wait[i - warmup_steps] = t1 - t0
            total[i - warmup_steps] = t2 - t0
    return state, wait, total, float(np.asarray(loss, dtype=np.float32)) if loss is not None else math.nan


def image_batch_layout(batch: dict[str, Any]) -> tuple[int, int]:
    """(image side in px, global batch) of a synthetic batch, which must be an image
    classifier's: ``inputs`` NHWC square with 3 channels, ``labels`` integers, one per example."""
    inputs, labels = batch.get("inputs"), batch.get("labels")
    ok = (set(batch) == {"inputs", "labels"} and inputs is not None and len(inputs.shape) == 4
          and inputs.shape[3] == 3 and inputs.shape[1] == inputs.shape[2]
          and labels is not None and labels.shape == inputs.shape[:1]
          and np.issubdtype(np.dtype(labels.dtype), np.integer))
    if not ok:
        shapes = {k: tuple(v.shape) for k, v in batch.items()}
        raise SpecError("model", shapes, "an image classifier (inputs NHWC, square, 3 channels; one "
                        "integer label per example), e.g. real --model resnet50 or cnn")
    return int(inputs.shape[1]), int(inputs.shape[0])


def _classes(spec: Any) -> int:
    """Classes of the model's output: a generated CNN's ``output``, else ImageNet's 1000."""
    from paradnn.backends.jax.models.zoo.layers import IMAGENET_CLASSES

    return int(getattr(spec, "output", 0) or IMAGENET_CLASSES)


@dataclass(frozen=True)
class InfeedResult:
    """The rows of one infeed experiment (one per feed and worker count) and its table."""

    records: list[Record]
    table: pd.DataFrame
    device_is_host: bool
    data_dir: str


def run_infeed(workload: Workload, workers: Sequence[int] = (1, 2, 4), steps: int = 30,
               warmup_steps: int = 3, data_dir: str | os.PathLike | None = None, files: int = 256,
               jpeg_side: int | None = None, prefetch: int = 2, delay_ms: float = 0.0,
               synthetic: bool = True) -> InfeedResult:
    """Train ``workload`` (an image classifier) from the synthetic device batch (if
    ``synthetic``) and from the host pipeline at each worker count; ``steps`` timed steps after
    ``warmup_steps`` untimed ones per feed (the step is compiled once before). ``files`` JPEG files of
    ``jpeg_side`` px (default: :func:`stored_side` of the model's image) are made in ``data_dir``
    (default :func:`default_data_dir`) once. ``delay_ms`` adds host time per image on purpose."""
    import jax

    from paradnn.backends.jax import step as wl
    from paradnn.backends.jax import xla_stack as xla_stack
    from paradnn.runner import context

    workers = sorted(set(workers))
    for w in workers:
        PipelineConfig(w, 1, 1, 1)  # validates the worker count alone
    if not 1 <= int(steps) <= 1_000_000:
        raise SpecError("steps", steps, "an integer from 1 to 1000000")
    if not 0 <= int(warmup_steps) <= 1_000_000:
        raise SpecError("warmup_steps", warmup_steps, "an integer from 0 to 1000000")
    prepared = wl.prepare(workload)
    image, batch = image_batch_layout(prepared.batch)
    side = stored_side(image) if jpeg_side is None else int(jpeg_side)
    configs = [PipelineConfig(w, image, side, batch, workload.dtype, prefetch, float(delay_ms)) for w in workers]
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    paths, labels = make_jpegs(data_dir, side, files, _classes(workload.spec))

    t = time.perf_counter()
    step = wl.compile_step(wl.jit_step(prepared.model, prepared.optimizer_name, prepared.mesh, donate=True),
                           prepared.state, prepared.batch)
    compile_s = time.perf_counter() - t
    state = prepared.state
    sharding = None
    if prepared.mesh is not None:
        P = jax.sharding.PartitionSpec
        sharding = jax.sharding.NamedSharding(prepared.mesh, P("data"))

    platform, software = context()
    device_is_host = jax.default_backend() == "cpu"
    settings = {"infeed_steps": int(steps), "infeed_warmup_steps": int(warmup_steps),
                "xla_preset": xla_stack.DEFAULT_PRESET}
    from paradnn.collectives import simulated_devices

    # simulated_devices: several forced host-platform devices (one CPU host), as scaling rows say.
    common = {"device_is_host": device_is_host, "simulated_devices": simulated_devices(), "compile_s": compile_s,
              "host_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
              "infeed_source": "measured: per step, wall time waiting for the next device batch "
                               "(the device idle) over the whole step time"}

    def record(feed: str, metrics: dict[str, Any], config: PipelineConfig | None, error: str | None = None,
               tf: str | None = None, status: str = "ok") -> Record:
        fields = {**workload.to_dict(), "family": INFEED_FAMILY, "model_family": workload.family,
                  "feed": feed, "workers": config.workers if config else None,
                  "delay_ms": config.delay_ms if config else None,
                  "jpeg_side": config.jpeg_side if config else None,
                  "jpeg_files": files if config else None,
                  "host_prefetch_batches": config.prefetch if config else None}
        return Record(status=status, workload=fields, platform=platform,
                      software={**software, "tf_version": tf}, settings=settings,
                      metrics={**common, **metrics}, error=error, tags={"kind": INFEED_FAMILY})

    records: list[Record] = []
    tf_ver = tf_version()
    feeds: list[tuple[str, PipelineConfig | None]] = [("synthetic", None)] if synthetic else []
    feeds += [("pipeline", c) for c in configs]
    for feed, config in feeds:
        feeder = None
        try:
            if config is None:
                resident = prepared.batch
                next_batch: Callable[[], Any] = lambda: resident  # noqa: E731
            else:
                pipeline = build_pipeline(paths, labels, config)
                feeder = DeviceFeeder(({"inputs": x, "labels": y} for x, y in pipeline.as_numpy_iterator()),
                                      sharding)
                next_batch = feeder.next
            state, wait, total, loss = time_stream(step, state, next_batch, steps, warmup_steps)
        except Exception as exc:  # noqa: BLE001 - a failed feed (bad file, OOM) is a row; the scan goes on
            from paradnn.backends.jax.backend import BACKEND

            records.append(record(feed, {}, config, f"{type(exc).__name__}: {exc}"[:4000],
                                  tf_ver if config else None, "oom" if BACKEND.is_oom(exc) else "error"))
            continue
        finally:
            if feeder is not None:
                feeder.close()
        metrics = {**stream_metrics(wait, total, batch), "final_loss": loss}
        records.append(record(feed, metrics, config, None, tf_ver if config else None))
    rows = pd.DataFrame([r.to_dict() for r in records])
    table = summarize(rows)
    base = table.loc[table["feed"] == "synthetic", "examples_per_sec"]
    if len(base):
        for rec in records:
            if rec.status == "ok":
                rec.metrics["synthetic_examples_per_sec"] = float(base.iloc[0])
                rec.metrics["synthetic_speedup"] = float(base.iloc[0]) / rec.metrics["examples_per_sec"]
    return InfeedResult(records, table, device_is_host, str(data_dir))


def infeed_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The infeed rows of a loaded store (``family == "infeed"``)."""
    if "family" not in df.columns:
        return df.iloc[0:0]
    return df[df["family"] == INFEED_FAMILY]


__all__ = [
    "DEVICE_IS_HOST_NOTE", "FEEDS", "INFEED_FAMILY", "DeviceFeeder", "InfeedResult", "PipelineConfig",
    "build_pipeline", "default_data_dir", "image_batch_layout", "infeed_fraction", "infeed_rows",
    "make_jpegs", "run_infeed", "stored_side", "stream_metrics", "summarize", "time_stream",
]
