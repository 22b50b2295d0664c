"""JAX's training side of ``paradnn infeed`` (:mod:`paradnn.experiments.infeed`): the jitted training step
with the state donated, the resident synthetic batch, and the transfer of host batches to the
device. The host pipeline (tf.data) is the TensorFlow package's; the timing loop, the feeder
thread and the rows are framework-free."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import numpy as np

from paradnn.backends.jax import step as wl
from paradnn.backends.jax import xla_stack
from paradnn.backends.jax.models.zoo.layers import IMAGENET_CLASSES


@dataclass
class Trainer:
    """One workload's compiled training step and what the infeed loop needs around it.

    ``step(state, batch) -> (state, loss)`` (state donated); ``state`` and ``batch`` (the
    synthetic batch, resident on the device) to start from; ``compile_s`` (s) the compile time;
    ``classes`` the model's output classes (labels of the generated images); ``settings`` what
    shaped the step, recorded in every row's settings; ``to_device(host_batch)`` moves a dict of
    numpy arrays to the device(s) and returns once transferred; ``sync(value)`` waits for it."""

    step: Callable[[Any, Any], tuple[Any, Any]]
    state: Any
    batch: Any
    compile_s: float
    classes: int
    to_device: Callable[[dict[str, np.ndarray]], Any]
    sync: Callable[[Any], Any] = jax.block_until_ready
    settings: dict[str, Any] = field(default_factory=dict)


def trainer(workload: Any) -> Trainer:
    """Build ``workload`` (:func:`paradnn.backends.jax.step.prepare`), compile its one-step
    program with the state donated (the default ``xla_preset``), and place its batches as the
    measured step does (split over a ``data`` mesh on several devices)."""
    prepared = wl.prepare(workload)
    t = time.perf_counter()
    step = wl.compile_step(wl.jit_step(prepared.model, prepared.optimizer_name, prepared.mesh, donate=True),
                           prepared.state, prepared.batch)
    compile_s = time.perf_counter() - t
    sharding = None
    if prepared.mesh is not None:
        sharding = jax.sharding.NamedSharding(prepared.mesh, jax.sharding.PartitionSpec("data"))

    def to_device(host: dict[str, np.ndarray]) -> Any:
        device = jax.device_put(host, sharding)
        jax.block_until_ready(device)  # "ready" means transferred, not merely queued
        return device

    classes = int(getattr(workload.spec, "output", 0) or IMAGENET_CLASSES)
    return Trainer(step, prepared.state, prepared.batch, compile_s, classes, to_device,
                   settings={"xla_preset": xla_stack.DEFAULT_PRESET})


__all__ = ["Trainer", "trainer"]
