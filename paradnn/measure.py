"""The timing protocol (DESIGN.md): K steps per compiled call, warm-up, repeat until stable.

Each timed call runs ``steps_per_call`` training steps inside one compiled program with the
state donated, and the clock stops only when the outputs are ready on the device. Calls repeat
until at least ``min_calls`` were timed and the coefficient of variation of the call times is
below ``cv_target``, or ``time_budget_s`` of timed calls is spent, or ``max_calls`` is reached.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import jax
import numpy as np

from paradnn.errors import SpecError


@dataclass(frozen=True)
class MeasureSettings:
    """Measurement settings; all are recorded with every run.

    steps_per_call: training steps per compiled call (K).
    warmup_calls: untimed calls after compilation.
    min_calls, max_calls: bounds on the number of timed calls.
    cv_target: stop once the coefficient of variation of call times is below this (1 = 100%).
    time_budget_s: stop once timed calls have taken this long (seconds), if min_calls are done.
    xla_preset: XLA compile options of the measured step (``paradnn.xla_stack.PRESETS``): "best"
        (the platform's fastest correct stack) or "stock" (XLA's defaults).
    """

    steps_per_call: int = 10
    warmup_calls: int = 2
    min_calls: int = 5
    max_calls: int = 200
    cv_target: float = 0.02
    time_budget_s: float = 5.0
    xla_preset: str = "best"

    def __post_init__(self) -> None:
        from paradnn.xla_stack import check_preset

        check_preset(self.xla_preset)
        for name in ("steps_per_call", "min_calls", "max_calls"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpecError(name, value, "a positive integer")
        if isinstance(self.warmup_calls, bool) or not isinstance(self.warmup_calls, int) or self.warmup_calls < 0:
            raise SpecError("warmup_calls", self.warmup_calls, "an integer >= 0")
        if self.max_calls < self.min_calls:
            raise SpecError("max_calls", self.max_calls, f"an integer >= min_calls={self.min_calls}")
        for name in ("cv_target", "time_budget_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise SpecError(name, value, "a positive number")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "MeasureSettings":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Timing:
    """Per-step times (seconds) derived from timed calls, and the loss after the last one."""

    step_times_s: np.ndarray
    final_loss: float

    @property
    def median_s(self) -> float:
        return float(np.median(self.step_times_s))

    def stats(self) -> dict[str, float]:
        t = self.step_times_s
        mean = float(np.mean(t))
        return {
            "step_time_s": self.median_s,
            "step_time_p10_s": float(np.percentile(t, 10)),
            "step_time_p90_s": float(np.percentile(t, 90)),
            "step_time_cv": float(np.std(t) / mean) if mean > 0 else math.nan,
            "timed_calls": int(t.size),
        }


def time_calls(call: Callable, state: Any, batch: Any, settings: MeasureSettings) -> Timing:
    """Run the protocol on ``call(state, batch) -> (state, loss)`` (state donated).

    Returns per-step times: each call's wall time divided by ``steps_per_call``.
    """
    loss = None
    for _ in range(settings.warmup_calls):
        state, loss = call(state, batch)
    jax.block_until_ready((state, loss))
    times: list[float] = []
    spent = 0.0
    while len(times) < settings.max_calls:
        t0 = time.perf_counter()
        state, loss = call(state, batch)
        jax.block_until_ready((state, loss))
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
        if len(times) >= settings.min_calls:
            arr = np.asarray(times)
            if np.std(arr) / np.mean(arr) < settings.cv_target or spent >= settings.time_budget_s:
                break
    final_loss = float(loss)
    del state  # the donated state is not needed after timing; free it before cost compiles
    return Timing(np.asarray(times) / settings.steps_per_call, final_loss)
