"""The toy numpy framework behind paradnn's Backend interface."""

from __future__ import annotations

import socket
import time
from typing import Any, Callable

import numpy as np

from paradnn import hardware
from paradnn.backends import Program
from paradnn.errors import SpecError
from toy_numpy.model import SEED, Optimizer, build_fc


class NumpyBackend:
    name = "numpy"

    def device_info(self) -> dict[str, Any]:
        return {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1,
                "host": socket.gethostname(), "cpu_model": hardware.cpu_model()}

    def software_info(self) -> dict[str, Any]:
        return {"framework_version": np.__version__, "numpy_version": np.__version__}

    def device_memory_bytes(self) -> int | None:
        return hardware.host_memory_bytes()

    def compile(self, workload: Any, settings: Any) -> Program:
        if workload.family != "fc" or workload.devices != 1:
            raise SpecError("framework", "numpy", "fc on one device (the toy)")
        t0 = time.perf_counter()
        model = build_fc(workload.spec, workload.dtype)
        rng = np.random.default_rng(SEED)
        params = model.init(rng)
        optimizer = Optimizer(workload.optimizer, params)
        batch = {"inputs": rng.standard_normal((workload.batch, workload.spec.input)).astype(np.float32),
                 "labels": rng.integers(0, workload.spec.output, workload.batch)}

        def call(state, batch, k):
            loss = None
            for _ in range(k):
                loss, grads = model.loss_and_grads(state["params"], batch["inputs"], batch["labels"])
                state["optimizer"].apply(state["params"], grads)
            return state, loss

        initial = ([p.copy() for p in params], batch)
        nbytes = sum(a.nbytes for a in params + optimizer.slots)
        return Program(workload, call, nbytes,
                       metrics={"params": sum(p.size for p in params), "compile_s": time.perf_counter() - t0,
                                "step_loop_used": "host"},
                       handle=initial)

    def init(self, program: Program) -> tuple[Any, Any]:
        params, batch = program.handle
        params = [p.copy() for p in params]
        return {"params": params, "optimizer": Optimizer(program.workload.optimizer, params)}, batch

    def sync(self, value: Any) -> Any:
        return value  # numpy computes synchronously

    def loss_value(self, loss: Any) -> float:
        return float(loss)

    def costs(self, program: Program) -> dict[str, Any]:
        return {"flops_per_step": None, "bytes_per_step": None,
                "flops_source": "unavailable: the toy numpy backend counts no executed FLOPs"}

    def memory_breakdown(self, program: Program) -> dict[str, Any]:
        return {}

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError)

    def configure_cache(self, path: str | None) -> Callable[[], None]:
        return lambda: None  # nothing is compiled


BACKEND = NumpyBackend()
