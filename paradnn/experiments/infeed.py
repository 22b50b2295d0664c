"""Host infeed: one model trained from synthetic device-resident batches and from a real host
input pipeline, and how long the device waits for input (ParaDnn's Figure 5).

Two feeds of the same compiled training step (the framework's ``Backend.infeed_trainer``: JAX's
jitted step, the state donated):

* ``synthetic``: the batch made on the device from a fixed seed (the path of ``paradnn run``);
  no data preparation at all, the throughput the device alone allows.
* ``pipeline``: a tf.data pipeline on the host reads JPEG files, decodes them, random-crops
  and flips them, normalizes them with the ImageNet mean and standard deviation and batches
  them, with ``workers`` parallel map calls on a private pool of ``workers`` threads, and
  prefetches ``prefetch`` batches on the host. A feeder thread moves each numpy batch to the
  device (the trainer's ``to_device``, waited for there) and keeps one transferred batch ready
  while the step runs on the other: double buffering.

The pipeline is the TensorFlow package's (:mod:`paradnn.backends.tensorflow.pipeline`, where
the choice of tf.data is explained); TensorFlow there runs on the CPU only (its GPUs hidden).

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

import math
import os
import queue
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from paradnn import frameworks, sizes
from paradnn.errors import ParadnnError, SpecError
from paradnn.record import Record
from paradnn.workload import Workload

INFEED_FAMILY = "infeed"
FEEDS = ("synthetic", "pipeline")
#: The framework whose ``host_batches`` capability is the host pipeline (tf.data).
PIPELINE_FRAMEWORK = "tensorflow"
#: The software field of a pipeline row that records the pipeline framework's version (None in
#: the synthetic feed's rows, which run no pipeline).
PIPELINE_VERSION_FIELD = "tf_version"
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


#: Largest generated file side over the crop side. Every crop decodes its whole file, so a file
#: of 4x the crop's side costs 16x the crop's pixels: beyond that the pipeline measures the JPEG
#: decoder, not a training input pipeline (8192 px files for 32 px crops grew past 5.8 GB of
#: host memory in 200 s on a 2-core host, before one step was timed).
MAX_SIDE_OVER_CROP = 4


def stored_side(image: int) -> int:
    """Side (px) of the generated JPEG files for crops of ``image`` px (256 for 224)."""
    return int(round(image * STORED_OVER_CROP))


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
        if not self.image <= self.jpeg_side <= MAX_SIDE_OVER_CROP * self.image:
            raise SpecError("jpeg_side", self.jpeg_side, f"from the crop side image={self.image} px to "
                            f"{MAX_SIDE_OVER_CROP}x it, {MAX_SIDE_OVER_CROP * self.image} px")


class DeviceFeeder:
    """Moves host batches to the device in a background thread, one ahead of the consumer:
    while the step uses one batch, the next is already transferred (double buffering).

    ``batches`` yields dicts of numpy arrays; ``to_device(batch)`` (the trainer's) moves one to
    the device(s) and returns once it is transferred. Errors of the producer are raised by
    :meth:`next`."""

    def __init__(self, batches: Iterator[dict[str, np.ndarray]], to_device: Callable[[Any], Any]):
        self._batches = batches
        self._to_device = to_device
        self._queue: queue.Queue = queue.Queue(maxsize=DEVICE_BUFFER)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paradnn-infeed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for host in self._batches:
                device = self._to_device(host)  # returns once transferred, not merely queued
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
                warmup_steps: int, sync: Callable[[Any], Any]) -> tuple[Any, np.ndarray, np.ndarray, float]:
    """Run ``warmup_steps`` untimed and ``steps`` timed training steps, each fed by
    ``next_batch()``; returns (state, wait_s, step_s, final loss): per timed step the seconds
    spent waiting for input and the seconds of the whole step (wait, dispatch and compute).
    ``sync(loss)`` waits until the step's loss is computed on the device."""
    wait = np.empty(steps)
    total = np.empty(steps)
    loss = None
    for i in range(warmup_steps + steps):
        t0 = time.perf_counter()
        batch = next_batch()
        t1 = time.perf_counter()
        state, loss = step(state, batch)
        sync(loss)  # nothing runs on the device while the next input is awaited
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
    (default :func:`default_data_dir`) once. ``delay_ms`` adds host time per image on purpose.
    The training side is the workload framework's ``infeed_trainer``; the host pipeline
    ``PIPELINE_FRAMEWORK``'s ``host_batches`` (tf.data)."""
    from paradnn.experiments.collectives import simulated_devices
    from paradnn.runner import context

    framework = workload.framework
    backend = frameworks.get(framework)
    make_trainer = frameworks.capability(framework, "infeed_trainer", "train from a host infeed")
    host_batches = frameworks.capability(PIPELINE_FRAMEWORK, "host_batches", "build a host input pipeline")
    pipeline = frameworks.get(PIPELINE_FRAMEWORK)

    workers = sorted(set(workers))
    for w in workers:
        PipelineConfig(w, 1, 1, 1)  # validates the worker count alone
    if not 1 <= int(steps) <= 1_000_000:
        raise SpecError("steps", steps, "an integer from 1 to 1000000")
    if not 0 <= int(warmup_steps) <= 1_000_000:
        raise SpecError("warmup_steps", warmup_steps, "an integer from 0 to 1000000")
    crop = getattr(workload.spec, "image", None)
    if jpeg_side is not None and isinstance(crop, int) and crop > 0:
        # The crop side is known from the spec: refuse a bad file side before compiling.
        PipelineConfig(workers[0], crop, int(jpeg_side), 1, workload.dtype, prefetch, float(delay_ms))
    # Cheapest check first (paradnn.sizes): weights + optimizer state against the device's
    # memory, before the trainer traces the model.
    sizes.refuse_oom(workload, backend.device_memory_bytes(), "infeed")
    trainer = make_trainer(workload)
    image, batch = image_batch_layout(trainer.batch)
    side = stored_side(image) if jpeg_side is None else int(jpeg_side)
    configs = [PipelineConfig(w, image, side, batch, workload.dtype, prefetch, float(delay_ms)) for w in workers]
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    paths, labels = pipeline.make_jpegs(data_dir, side, files, trainer.classes)
    state = trainer.state

    platform, software = context(framework)
    device_is_host = platform["device_platform"] == "cpu"
    settings = {"infeed_steps": int(steps), "infeed_warmup_steps": int(warmup_steps), **trainer.settings}
    simulated = simulated_devices(framework)

    # simulated_devices: several forced host-platform devices (one CPU host), as scaling rows say.
    common = {"device_is_host": device_is_host, "simulated_devices": simulated, "compile_s": trainer.compile_s,
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
                      software={**software, PIPELINE_VERSION_FIELD: tf}, settings=settings,
                      metrics={**common, **metrics}, error=error, tags={"kind": INFEED_FAMILY})

    records: list[Record] = []
    tf_ver = pipeline.pipeline_version()
    feeds: list[tuple[str, PipelineConfig | None]] = [("synthetic", None)] if synthetic else []
    feeds += [("pipeline", c) for c in configs]
    for feed, config in feeds:
        feeder = None
        try:
            if config is None:
                resident = trainer.batch
                next_batch: Callable[[], Any] = lambda: resident  # noqa: E731
            else:
                feeder = DeviceFeeder(host_batches(paths, labels, config), trainer.to_device)
                next_batch = feeder.next
            state, wait, total, loss = time_stream(trainer.step, state, next_batch, steps, warmup_steps,
                                                   trainer.sync)
        except Exception as exc:  # noqa: BLE001 - a failed feed (bad file, OOM) is a row; the scan goes on
            records.append(record(feed, {}, config, f"{type(exc).__name__}: {exc}"[:4000],
                                  tf_ver if config else None, "oom" if backend.is_oom(exc) else "error"))
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
        # Each ok record compared with the synthetic feed: known only once every feed ran, so
        # the records are rebuilt with it (records are frozen).
        synthetic = float(base.iloc[0])
        records = [rec.with_metrics(synthetic_examples_per_sec=synthetic,
                                    synthetic_speedup=synthetic / rec.metrics["examples_per_sec"])
                   if rec.status == "ok" else rec for rec in records]
    return InfeedResult(records, table, device_is_host, str(data_dir))


def infeed_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The infeed rows of a loaded store (``family == "infeed"``)."""
    if "family" not in df.columns:
        return df.iloc[0:0]
    return df[df["family"] == INFEED_FAMILY]


__all__ = [
    "DEVICE_IS_HOST_NOTE", "FEEDS", "INFEED_FAMILY", "PIPELINE_FRAMEWORK", "DeviceFeeder", "InfeedResult",
    "PipelineConfig", "default_data_dir", "image_batch_layout", "infeed_fraction", "infeed_rows",
    "run_infeed", "stored_side", "stream_metrics", "summarize", "time_stream",
]
