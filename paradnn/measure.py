"""The timing protocol: adaptive steps per call, warm-up by time, a bounded timed phase.

Each call runs K training steps inside one compiled program (the state donated) and the clock
stops only when its outputs are ready on the device. The protocol:

1. **Steps per call (K).** Unless ``steps_per_call`` fixes it, K starts at 1 and is raised from
   the measured time of the previous call so that one call lasts about ``call_target_s`` (like
   ``timeit``'s autorange): small models get many steps per call, so dispatch does not dominate;
   a model whose single step outlasts the target keeps K = 1.
2. **Warm-up** by time: calls are untimed until at least ``warmup_calls`` calls ran and
   ``warmup_s`` seconds passed (the calls that chose K count).
3. **Timed phase**: calls repeat until ``min_calls`` were timed and the coefficient of variation
   (CV) of their times is at most ``cv_target``, or ``max_calls`` were timed, or the next call
   would end past ``time_budget_s`` measured from the start of warm-up; at least
   :data:`MIN_TIMED_CALLS` calls are always timed.

So the whole timing phase (compile and initialization excluded) lasts at most about
``max(time_budget_s, 3 steps)`` on any device, however large the model. A run whose CV met the
target is ``stable``; the median step time comes with a distribution-free 95% confidence
interval from order statistics.

Nothing here imports JAX: the caller passes the synchronization function, so the statistics and
the stopping rule are testable on a fake clock.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from paradnn.errors import SpecError

#: A spread needs two samples: the budget never cuts the timed phase below this many calls.
MIN_TIMED_CALLS = 2
#: Upper bound on an adaptive K, so that a mis-timed first call cannot make one call run forever.
MAX_STEPS_PER_CALL = 100_000
#: Calls that refine an adaptive K before warm-up proper (each one counts as warm-up).
_AUTORANGE_ROUNDS = 4


@dataclass(frozen=True)
class MeasureSettings:
    """Measurement settings; all are recorded with every run (times in seconds).

    steps_per_call: training steps per compiled call (K); None chooses K adaptively so that one
        call lasts about ``call_target_s``.
    call_target_s: target duration of one call when K is adaptive.
    warmup_calls, warmup_s: untimed calls after compilation: at least this many, and until this
        much time has passed.
    min_calls, max_calls: the CV rule applies from ``min_calls`` timed calls on; never more than
        ``max_calls``. The time budget may stop the phase before ``min_calls`` (never before 2).
    cv_target: the precision target: coefficient of variation of the call times (1 = 100%).
    time_budget_s: bound on warm-up plus timed calls, from the first call on.
    """

    steps_per_call: int | None = None
    call_target_s: float = 0.2
    warmup_calls: int = 1
    warmup_s: float = 0.5
    min_calls: int = 5
    max_calls: int = 200
    cv_target: float = 0.02
    time_budget_s: float = 5.0

    def __post_init__(self) -> None:
        if self.steps_per_call is not None:
            _check_int("steps_per_call", self.steps_per_call, 1, MAX_STEPS_PER_CALL)
        _check_int("warmup_calls", self.warmup_calls, 0, 10**6)
        _check_int("min_calls", self.min_calls, 1, 10**6)
        _check_int("max_calls", self.max_calls, max(self.min_calls, MIN_TIMED_CALLS), 10**6)
        for name in ("call_target_s", "cv_target", "time_budget_s"):
            _check_number(name, getattr(self, name), positive=True)
        _check_number("warmup_s", self.warmup_s, positive=False)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "MeasureSettings":
        return dataclasses.replace(self, **changes)


#: The settings' names, in order: the store's columns and the sweep files' ``settings`` keys.
SETTINGS_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(MeasureSettings))


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    # bool is an int subclass; True as a count is a bug, not a 1.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(name, value, f"an integer from {low} to {high}")


def _check_number(name: str, value: Any, positive: bool) -> None:
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and (value > 0 if positive else value >= 0))
    if not ok:
        raise SpecError(name, value, "a finite number " + ("> 0" if positive else ">= 0"))


def median_ci(sorted_x: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    The narrowest symmetric pair of order statistics ``(x[j], x[n-1-j])`` whose coverage
    ``1 - 2 P(Binomial(n, 1/2) <= j)`` is at least ``level``; below 6 samples no pair reaches
    95%, and the interval is the full range (coverage ``1 - 2^(1-n)``).
    """
    n = len(sorted_x)
    if n == 0:
        return math.nan, math.nan
    # Coverage of (x[i], x[n-1-i]) is 1 - 2 P(B <= i) for B ~ Binomial(n, 1/2): take the
    # largest i whose tail P(B <= i) stays within (1 - level) / 2, else i = 0 (the full range).
    tail = (1.0 - level) / 2.0
    i, cdf = 0, 2.0**-n
    while i + 1 <= (n - 1) // 2 and cdf + math.comb(n, i + 1) / 2.0**n <= tail:
        i += 1
        cdf += math.comb(n, i) / 2.0**n
    j = i
    return float(sorted_x[j]), float(sorted_x[n - 1 - j])


@dataclass(frozen=True)
class Timing:
    """What the protocol measured: per-step times (s) of the timed calls and what it chose."""

    step_times_s: np.ndarray
    final_loss: float
    steps_per_call: int
    warmup_calls: int
    warmup_s: float
    cv_target: float
    timing_s: float

    @property
    def median_s(self) -> float:
        return float(np.median(self.step_times_s))

    @property
    def cv(self) -> float:
        t = self.step_times_s
        mean = float(np.mean(t))
        return float(np.std(t) / mean) if mean > 0 else math.nan

    def stats(self) -> dict[str, Any]:
        """The record's timing metrics (times in seconds per step)."""
        t = np.sort(self.step_times_s)
        low, high = median_ci(t)
        cv = self.cv
        return {
            "step_time_s": self.median_s,
            "step_time_p10_s": float(np.percentile(t, 10)),
            "step_time_p90_s": float(np.percentile(t, 90)),
            "step_time_cv": cv,
            "step_time_ci_low_s": low,
            "step_time_ci_high_s": high,
            "stable": bool(cv <= self.cv_target),
            "timed_calls": int(t.size),
            "steps_per_call_used": self.steps_per_call,
            "warmup_calls_used": self.warmup_calls,
            "warmup_s": self.warmup_s,
            "timing_s": self.timing_s,
        }


def choose_steps(step_s: float, target_s: float) -> int:
    """Steps per call so that a call of steps of ``step_s`` seconds lasts about ``target_s``."""
    if not step_s > 0:
        return MAX_STEPS_PER_CALL
    return int(min(MAX_STEPS_PER_CALL, max(1, math.ceil(target_s / step_s))))


def time_calls(
    call: Callable[[Any, Any, int], tuple[Any, Any]],
    state: Any,
    batch: Any,
    settings: MeasureSettings,
    sync: Callable[[Any], Any] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Run the protocol on ``call(state, batch, k) -> (state, loss)``, k steps per call (state
    donated). ``sync`` blocks until its argument is ready on the device (default
    ``jax.block_until_ready``); ``clock`` returns seconds."""
    if sync is None:
        import jax

        sync = jax.block_until_ready

    loss: Any = None

    def timed(k: int) -> float:
        nonlocal state, loss
        t0 = clock()
        state, loss = call(state, batch, k)
        sync((state, loss))
        return clock() - t0

    start = clock()
    adaptive = settings.steps_per_call is None
    k = 1 if adaptive else settings.steps_per_call
    last = timed(k)  # the first execution: never timed, it may include one-off costs
    warm = 1
    if adaptive:
        for _ in range(_AUTORANGE_ROUNDS):
            want = choose_steps(last / k, settings.call_target_s)
            # Stop raising K once a call is within 10% of the target, or if the next call would
            # break the budget (a warm-up call must not cost the timed phase its samples).
            if want <= k * 1.1 or (clock() - start) + last / k * want > settings.time_budget_s / 2:
                break
            k = want
            last = timed(k)
            warm += 1
    while warm < settings.warmup_calls or (clock() - start) < settings.warmup_s:
        if (clock() - start) + last > settings.time_budget_s / 2:
            break  # warm-up never takes more than half the budget
        last = timed(k)
        warm += 1
    warmup_s = clock() - start

    times: list[float] = []
    while len(times) < settings.max_calls:
        expected = float(np.median(times)) if times else last
        if len(times) >= MIN_TIMED_CALLS and (clock() - start) + expected > settings.time_budget_s:
            break
        times.append(timed(k))
        if len(times) >= max(settings.min_calls, MIN_TIMED_CALLS):
            arr = np.asarray(times)
            if np.std(arr) / np.mean(arr) <= settings.cv_target:
                break
    timing_s = clock() - start
    final_loss = float(loss)
    del state  # the donated state is not needed after timing; free it before cost compiles
    return Timing(np.asarray(times) / k, final_loss, k, warm, warmup_s, settings.cv_target, timing_s)
