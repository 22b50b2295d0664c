"""The timing protocol: adaptive steps per call, warm-up by time, a bounded timed phase.

Each call runs K training steps inside one compiled program (the state donated) and the clock
stops only when its outputs are ready on the device. The protocol:

1. **Steps per call (K).** Unless ``steps_per_call`` fixes it, K starts at 1 and is raised from
   the measured time of the previous call so that one call lasts about ``call_target_s`` (like
   ``timeit``'s autorange): small models get many steps per call, so dispatch does not dominate;
   a model whose single step outlasts the target keeps K = 1.
2. **Warm-up** by time: calls are untimed until at least ``warmup_calls`` calls ran and
   ``warmup_s`` seconds passed (the calls that chose K count).
3. **Timed phase**: calls repeat until ``min_calls`` were timed and the precision target of the
   ``stop_rule`` is met, or ``max_calls`` were timed, or the next call would end past
   ``time_budget_s`` measured from the start of warm-up; at least :data:`MIN_TIMED_CALLS` calls
   are always timed (the fewest with which the median's 95% interval and ``paradnn compare``'s
   rank test can say anything).

The stopping rules (:data:`STOP_RULES`): ``ci`` (the default) stops once the distribution-free
95% confidence interval of the median step time is within ``ci_target`` of the median (relative
half-width): a target on the precision of the *estimate*, which more calls do improve, so a
quiet host stops early and a noisy one keeps timing until the budget. ``cv`` (the rule of
paradnn before record schema 5) stops once the coefficient of variation of the calls is at most
``cv_target``: a target on the spread of *single calls*, which more calls never shrink, so
under sustained load no budget meets it. docs/metrics.md compares the two on a quiet host and on
one with a core kept busy (``benchmarks/bench_stopping.py``).

So the whole timing phase (compile and initialization excluded) lasts at most about
``max(time_budget_s, (1 + MIN_TIMED_CALLS) calls)`` on any device, however large the model. A
run whose rule met its target is ``stable``; the median step time comes with its
distribution-free 95% confidence interval from order statistics whatever the rule.

Nothing here imports JAX: the caller passes the synchronization function, so the statistics and
the stopping rule are testable on a fake clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from paradnn import frameworks
from paradnn.errors import SpecError
from paradnn.families import FieldsView
from paradnn.settings import setting as _setting
from paradnn.units import parse_bool, parse_int, parse_number

#: The budget never cuts the timed phase below this many calls: 6 is the fewest samples whose
#: extreme order statistics cover the median with at least 95% (1 - 2^-5 = 96.9%, so the
#: interval says something), and with 6 calls a side ``paradnn compare``'s Mann-Whitney test can
#: reach p = 0.002 (two-sided, 6 vs 6 fully separated): a 2x regression is detectable even after
#: a false-discovery correction over a few dozen configs. With 3 calls a side no test reaches
#: p < 0.05 (at best 0.1), so a CI gate on such records passes any regression.
MIN_TIMED_CALLS = 6
#: Upper bound on an adaptive K, so that a mis-timed first call cannot make one call run forever.
MAX_STEPS_PER_CALL = 100_000
#: Calls that refine an adaptive K before warm-up proper (each one counts as warm-up).
_AUTORANGE_ROUNDS = 4


#: The stopping rules of the timed phase: name -> what it stops on (its target setting).
STOP_RULES: dict[str, str] = {
    "ci": "the 95% confidence interval of the median step time within ci_target of the median "
          "(relative half-width)",
    "cv": "the coefficient of variation of the calls' times at most cv_target (the rule before "
          "record schema 5)",
}


def _stop_rule(value: Any, parameter: str) -> str:
    text = value.strip().lower() if isinstance(value, str) else None  # a list or a number is no rule
    if text not in STOP_RULES:
        raise SpecError(parameter, value, "one of " + ", ".join(STOP_RULES))
    return text


def _steps(value: Any, parameter: str) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    return parse_int(value, parameter, 1, MAX_STEPS_PER_CALL)


@dataclass(frozen=True, init=False)
class MeasureSettings:
    """Measurement settings; all are recorded with every run (times in seconds). Each field's
    meaning is in its metadata (``SETTING_HELP``).

    The fields are the timing protocol's. The registered frameworks' options (``xla_preset``
    and ``step_loop`` of JAX, ``torch_compile`` of PyTorch, ...: :func:`paradnn.backends.
    option_fields`) are accepted as keywords too and read as attributes (an option not given
    reads as its default); they are kept in ``options`` (name -> value, only those given) and
    each backend reads its own with :meth:`options_for`. A record stores the protocol fields
    and its own framework's options (:meth:`to_dict`).

    The stopping rule (``stop_rule``) applies from ``min_calls`` timed calls on; the time budget
    may stop the timed phase before ``min_calls`` (never before :data:`MIN_TIMED_CALLS`).
    """

    steps_per_call: int | None = _setting(
        None, _steps, "training steps per compiled call (K); auto: chosen so that a call lasts "
        "about call_target_s")
    call_target_s: float = _setting(0.2, parse_number, "seconds one call should last when K is auto",
                                    maximum=3600.0)
    warmup_calls: int = _setting(1, parse_int, "fewest untimed warm-up calls", minimum=0, maximum=10**6)
    warmup_s: float = _setting(0.5, parse_number, "seconds of untimed warm-up calls (at most half "
                               "the budget)", maximum=86_400.0, exclusive_minimum=False)
    min_calls: int = _setting(MIN_TIMED_CALLS, parse_int, "timed calls before the stopping rule may "
                              f"stop timing (at least {MIN_TIMED_CALLS}: the median's 95% interval "
                              "and compare's rank test need them)", minimum=MIN_TIMED_CALLS, maximum=10**6)
    max_calls: int = _setting(200, parse_int, "most timed calls (at least min_calls)", minimum=MIN_TIMED_CALLS,
                              maximum=10**6)
    stop_rule: str = _setting("ci", _stop_rule, "when the timed phase may stop: ci (the median's "
                              "95% interval within ci_target) or cv (the calls' coefficient of "
                              "variation within cv_target)")
    ci_target: float = _setting(0.02, parse_number, "precision target of stop_rule ci: stop once the "
                                "95% confidence interval of the median step time is within this "
                                "fraction of the median (relative half-width; 0.02 = +-2 percent)",
                                maximum=10.0)
    cv_target: float = _setting(0.02, parse_number, "precision target of stop_rule cv: stop once the "
                                "coefficient of variation of call times is at most this (1 = 100 "
                                "percent)", maximum=10.0)
    time_budget_s: float = _setting(5.0, parse_number, "seconds for warm-up and timed calls together "
                                    "(at least 2 timed calls always run)", maximum=86_400.0)
    ledger: bool = _setting(False, parse_bool, "after the timed calls, profile a few more steps of "
                            "the same compiled program and split the step time into its causes "
                            "(ledger_* metrics, docs/ledger.md); the timed calls are not changed "
                            "by it, so it is not part of the record key")
    #: Framework options given (sorted (name, value) pairs, parsed); not a protocol setting.
    options: tuple[tuple[str, Any], ...] = dataclasses.field(default=(), metadata={"option_bag": True})

    def __init__(self, options: Any = (), **values: Any) -> None:
        given = dict(options or ())
        protocol = {f.name for f in _PROTOCOL}
        for name in list(values):
            if name not in protocol:
                given[name] = values.pop(name)
        for f in _PROTOCOL:
            object.__setattr__(self, f.name, parse_setting(values.get(f.name, f.default), f.name))
        parsed = {name: parse_setting(value, name) for name, value in given.items()}
        object.__setattr__(self, "options", tuple(sorted(parsed.items())))
        if self.max_calls < self.min_calls:
            raise SpecError("max_calls", self.max_calls, f"an integer >= min_calls={self.min_calls}")

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not fields: a framework option, given or default.
        if name.startswith("__") or name not in frameworks.option_fields():
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return dict(self.options).get(name, frameworks.option_default(name))

    def options_for(self, framework: str) -> Any:
        """The options of ``framework`` (its ``FrameworkInfo.options`` class): those given here,
        defaults for the rest."""
        cls = frameworks.meta(framework).options
        given = dict(self.options)
        return cls(**{f.name: given[f.name] for f in dataclasses.fields(cls) if f.name in given})

    def to_dict(self, framework: str | None = None) -> dict[str, Any]:
        """The protocol fields and the options of ``framework`` (None: of every registered
        framework), defaults included: the record's settings columns."""
        out = {f.name: getattr(self, f.name) for f in _PROTOCOL}
        for name in (frameworks.names() if framework is None else (framework,)):
            out.update(self.options_for(name).to_dict())
        return out

    def replace(self, **changes: Any) -> "MeasureSettings":
        values = {f.name: getattr(self, f.name) for f in _PROTOCOL}
        return MeasureSettings(options=self.options, **{**values, **changes})


#: The timing protocol's fields (every field but the options).
_PROTOCOL = tuple(f for f in dataclasses.fields(MeasureSettings) if not f.metadata.get("option_bag"))
_FIELDS = {f.name: f for f in _PROTOCOL}
#: The timing protocol's setting names, in order.
PROTOCOL_FIELDS: tuple[str, ...] = tuple(_FIELDS)
#: Settings that add work after the timed calls without changing them: not part of a record's
#: key (``paradnn.record.record_key``), so a run with them resumes and compares as the same
#: config; the row still says what was asked.
UNKEYED_SETTINGS: frozenset[str] = frozenset({"ledger"})


def _settings_fields() -> tuple[str, ...]:
    return (*PROTOCOL_FIELDS, *frameworks.option_names())


#: Every setting name, the protocol's then the registered frameworks' options, read at each use
#: (a framework registered later adds its options): the store's columns and the sweep files'
#: ``settings`` keys.
SETTINGS_FIELDS = FieldsView(_settings_fields)
#: The settings that shape the timed calls (SETTINGS_FIELDS without UNKEYED_SETTINGS): what a
#: comparison's "settings" axis and a prediction's "measured alike" test look at.
KEYED_SETTINGS = FieldsView(lambda: tuple(f for f in _settings_fields() if f not in UNKEYED_SETTINGS))
#: name -> what the protocol setting means (with its unit), for help texts and docs; the
#: options' meanings are :func:`paradnn.backends.option_help`.
SETTING_HELP: dict[str, str] = {name: f.metadata["help"] for name, f in _FIELDS.items()}


def parse_setting(value: Any, name: str) -> Any:
    """A measurement setting (a protocol field or a framework option) from text, a YAML value or
    a Python value, typed and range-checked (raises SpecError naming the setting, the value and
    what is allowed)."""
    if name in _FIELDS:
        meta = _FIELDS[name].metadata
        return meta["parse"](value, name, **meta["limits"])
    if name in frameworks.option_fields():
        return frameworks.parse_option(value, name)
    raise SpecError("setting", name, "one of " + ", ".join(_settings_fields()))


def nearest_valid(name: str, value: Any) -> Any:
    """``value`` of setting ``name`` as this version accepts it: itself where valid, else
    raised or lowered to the limit it passed (``min_calls`` 2 of an older store is 6 now), else
    the setting's default. How a sweep file that must time like older rows states their
    settings."""
    try:
        return parse_setting(value, name)
    except SpecError:
        pass
    if name in _FIELDS:
        limits = _FIELDS[name].metadata["limits"]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            for bound in ("minimum", "maximum"):
                if bound in limits:
                    try:
                        return parse_setting(limits[bound], name)
                    except SpecError:
                        continue
        return _FIELDS[name].default
    return frameworks.option_default(name) if name in frameworks.option_fields() else value


#: Up to this many samples the median's interval sums the binomial terms exactly (2**n fits a
#: float to 1023); beyond, in log space.
_EXACT_CI_CALLS = 1000


@functools.lru_cache(maxsize=4096)
def _ci_index(n: int, level: float) -> int:
    """The index ``j`` of :func:`median_ci`'s order statistics for ``n`` samples (cached: the
    stopping rule asks after every timed call)."""
    # Coverage of (x[i], x[n-1-i]) is 1 - 2 P(B <= i) for B ~ Binomial(n, 1/2): take the
    # largest i whose tail P(B <= i) stays within (1 - level) / 2, else i = 0 (the full range).
    tail = (1.0 - level) / 2.0
    if n <= _EXACT_CI_CALLS:
        i, cdf = 0, 2.0**-n
        while i + 1 <= (n - 1) // 2 and cdf + math.comb(n, i + 1) / 2.0**n <= tail:
            i += 1
            cdf += math.comb(n, i) / 2.0**n
        return i
    # 2.0**n overflows past 1023 calls (a long budget with tiny steps times thousands):
    # the binomial terms in log space, from where the lower tail is below exp(-200)
    # (Hoeffding: P(B <= n/2 - t) <= exp(-2 t^2 / n), t = 10 sqrt(n)), which adds nothing.
    def log_term(k: int) -> float:
        return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                - n * math.log(2.0))

    i = max(0, int(n / 2 - 10 * math.sqrt(n)))
    cdf = math.exp(log_term(i))
    while i + 1 <= (n - 1) // 2 and cdf + math.exp(log_term(i + 1)) <= tail:
        i += 1
        cdf += math.exp(log_term(i))
    return i


def median_ci(sorted_x: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    The narrowest symmetric pair of order statistics ``(x[j], x[n-1-j])`` whose coverage
    ``1 - 2 P(Binomial(n, 1/2) <= j)`` is at least ``level``; below 6 samples no pair reaches
    95%, and the interval is the full range (coverage ``1 - 2^(1-n)``).
    """
    n = len(sorted_x)
    if n == 0:
        return math.nan, math.nan
    j = _ci_index(n, float(level))
    return float(sorted_x[j]), float(sorted_x[n - 1 - j])


def ci_halfwidth(times: np.ndarray | list[float]) -> float:
    """The relative half-width of the median's 95% confidence interval (:func:`median_ci`) of
    ``times`` (any order): ``(high - low) / 2 / median``, 1 = 100%; NaN without samples or with
    a median of 0. The precision of ``stop_rule`` ci."""
    t = np.sort(np.asarray(times, dtype=float))
    if t.size == 0:
        return math.nan
    median = float(np.median(t))
    low, high = median_ci(t)
    return (high - low) / 2.0 / median if median > 0 else math.nan


def spread_cv(times: np.ndarray | list[float]) -> float:
    """The coefficient of variation of ``times`` (population standard deviation over the mean,
    1 = 100%): the precision of ``stop_rule`` cv; NaN without samples or with a mean of 0."""
    t = np.asarray(times, dtype=float)
    mean = float(np.mean(t)) if t.size else math.nan
    return float(np.std(t) / mean) if mean > 0 else math.nan


def precision_of(times: np.ndarray | list[float], rule: str) -> float:
    """What ``rule`` (a :data:`STOP_RULES` name) holds to its target, for ``times``: the
    relative half-width of the median's interval (ci) or the coefficient of variation (cv)."""
    return ci_halfwidth(times) if rule == "ci" else spread_cv(times)


def precision_met(times: np.ndarray | list[float], rule: str, target: float) -> bool:
    """Whether ``times`` meet ``target`` under ``rule`` (:func:`precision_of` at most the
    target); False for a NaN precision."""
    value = precision_of(times, rule)
    return bool(value <= target)


def rule_target(settings: "MeasureSettings") -> float:
    """The precision target of ``settings``' stopping rule: ``ci_target`` or ``cv_target``."""
    return settings.ci_target if settings.stop_rule == "ci" else settings.cv_target


def rule_text(settings: "MeasureSettings") -> str:
    """``settings``' stopping rule and its target in words, e.g. ``the median step time's 95% CI
    within +-2%`` (ci) or ``the step times' cv within 2%`` (cv): what "unstable" missed."""
    if settings.stop_rule == "ci":
        return f"the median step time's 95% CI within +-{settings.ci_target * 100:.3g}%"
    return f"the step times' cv within {settings.cv_target * 100:.3g}%"


def precision_text(d: Mapping[str, Any]) -> str:
    """A record's precision against its stopping rule's target, from its settings and metrics
    merged (``{**record.settings, **record.metrics}``), e.g. ``median +-1.20% (95% CI; target
    +-2%: met); calls' cv 3.10%``; rows from before ``stop_rule`` existed name the cv rule."""
    met = "met" if d.get("stable") else "NOT met"
    cv = f"cv {d['step_time_cv']:.2%}"
    if d.get("stop_rule", "cv") == "ci" and d.get("step_time_ci_halfwidth") is not None:
        return (f"median +-{d['step_time_ci_halfwidth']:.2%} (95% CI; target +-{d['ci_target'] * 100:.3g}%: {met}); "
                f"calls' {cv}")
    return f"{cv} (target {d['cv_target'] * 100:.3g}%: {met})"


@dataclass(frozen=True)
class Timing:
    """What the protocol measured: per-step times (s) of the timed calls and what it chose."""

    step_times_s: np.ndarray
    final_loss: float
    steps_per_call: int
    warmup_calls: int
    warmup_s: float
    target: float  # the stopping rule's precision target (1 = 100%)
    timing_s: float
    meter: Any = None  # what ``window()`` yielded around the timed calls (paradnn.meters.Window)
    time_budget_s: float | None = None  # the budget the protocol ran with (s); None: not said
    stop_rule: str = "ci"  # the STOP_RULES name the timed phase stopped by
    #: The state after the last call where ``time_calls(keep_state=True)`` (a profile of the
    #: same program goes on from it); else None: the donated state is freed at once.
    state: Any = None

    @property
    def timed_steps(self) -> int:
        """Training steps run in the timed calls."""
        return int(self.step_times_s.size) * self.steps_per_call

    @property
    def median_s(self) -> float:
        return float(np.median(self.step_times_s))

    @property
    def cv(self) -> float:
        return spread_cv(self.step_times_s)

    def stats(self) -> dict[str, Any]:
        """The record's timing metrics (times in seconds per step), with ``step_times_s``: the
        per-step time of every timed call in call order (the evidence a later comparison tests,
        :mod:`paradnn.analysis.compare`)."""
        t = np.sort(self.step_times_s)
        low, high = median_ci(t)
        return {
            "step_time_s": self.median_s,
            "step_time_p10_s": float(np.percentile(t, 10)),
            "step_time_p90_s": float(np.percentile(t, 90)),
            "step_time_cv": self.cv,
            "step_time_ci_low_s": low,
            "step_time_ci_high_s": high,
            "step_time_ci_halfwidth": ci_halfwidth(t),
            "stable": precision_met(t, self.stop_rule, self.target),
            "timed_calls": int(t.size),
            "steps_per_call_used": self.steps_per_call,
            "warmup_calls_used": self.warmup_calls,
            "warmup_elapsed_s": self.warmup_s,
            "timing_s": self.timing_s,
            "time_budget_used_s": self.time_budget_s,
            "step_times_s": sample_list(self.step_times_s),
        }


#: Significant digits kept of each per-call time in ``step_times_s``: far below the timing
#: noise of any clock (a 1e-6 relative error), and it keeps a 200-call row at about 3 KB.
SAMPLE_DIGITS = 6


def sample_list(times_s: np.ndarray) -> list[float]:
    """Per-call times (s) as the compact JSON list a record stores (``step_times_s``), in call
    order, each rounded to :data:`SAMPLE_DIGITS` significant digits."""
    return [float(f"{float(x):.{SAMPLE_DIGITS}g}") for x in np.asarray(times_s, dtype=float)]


def choose_steps(step_s: float, target_s: float) -> int:
    """Steps per call so that a call of steps of ``step_s`` seconds lasts about ``target_s``."""
    if not step_s > 0:
        return MAX_STEPS_PER_CALL
    return int(min(MAX_STEPS_PER_CALL, max(1, math.ceil(target_s / step_s))))


def timing_bound_s(step_s: float, settings: MeasureSettings) -> float:
    """Upper bound (s) on the timing phase of a model whose step takes ``step_s`` seconds:
    the budget, or the first call and :data:`MIN_TIMED_CALLS` timed calls when those outlast it.
    The phase ends sooner when the stopping rule's target is met."""
    k = settings.steps_per_call or choose_steps(step_s, settings.call_target_s)
    return max(settings.time_budget_s, (1 + MIN_TIMED_CALLS) * k * step_s)


def time_calls(
    call: Callable[[Any, Any, int], tuple[Any, Any]],
    state: Any,
    batch: Any,
    settings: MeasureSettings,
    sync: Callable[[Any], Any],
    clock: Callable[[], float] = time.perf_counter,
    window: Callable[[], Any] | None = None,
    loss_value: Callable[[Any], float] = float,
    keep_state: bool = False,
) -> Timing:
    """Run the protocol on ``call(state, batch, k) -> (state, loss)``, k steps per call (state
    donated). ``sync`` blocks until its argument is ready on the device (the backend's
    ``Backend.sync``); ``clock`` returns seconds; ``loss_value`` turns the framework's loss into
    a float (after the timed phase). ``keep_state``: hand the final state back
    (``Timing.state``) instead of freeing it."""
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
    # The meters (energy, host utilization) read their counters around the timed calls only;
    # every call before and in it is synchronized, so the window holds exactly these calls.
    with (window() if window is not None else contextlib.nullcontext()) as meter:
        while len(times) < settings.max_calls:
            expected = float(np.median(times)) if times else last
            if len(times) >= MIN_TIMED_CALLS and (clock() - start) + expected > settings.time_budget_s:
                break
            times.append(timed(k))
            if (len(times) >= max(settings.min_calls, MIN_TIMED_CALLS)
                    and precision_met(times, settings.stop_rule, rule_target(settings))):
                break
    timing_s = clock() - start
    final_loss = loss_value(loss)
    kept = state if keep_state else None
    del state  # the donated state is not needed after timing; free it before cost compiles
    return Timing(np.asarray(times) / k, final_loss, k, warm, warmup_s, rule_target(settings), timing_s, meter,
                  settings.time_budget_s, settings.stop_rule, kept)
