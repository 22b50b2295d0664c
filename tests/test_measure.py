"""The timing protocol on a fake clock (exact choices of K and stopping, both stopping rules),
its statistics, the stability flag, the warnings by kind, and the peak probe's cache rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paradnn.errors import SpecError
from paradnn.measure import (
    MAX_STEPS_PER_CALL, MIN_TIMED_CALLS, MeasureSettings, choose_steps, ci_halfwidth, median_ci, precision_text,
    rule_text, time_calls,
)
from paradnn.record import READ_WARNINGS, WARNING_KINDS, WARNINGS, record_warnings, warning_codes, warning_kind


def physics_warnings(metrics, devices=1):
    """The physics codes of ``record_warnings``: what these tests check (the other kinds are
    tested on their own below)."""
    return [c for c in record_warnings(metrics, devices) if warning_kind(c) == "physics"]


class FakeDevice:
    """A device whose call of k steps takes ``overhead + k * step`` seconds on a fake clock;
    ``jitter(i)`` scales the i-th call's duration."""

    def __init__(self, step: float, overhead: float = 0.0, first_extra: float = 0.0, jitter=None):
        self.now = 0.0
        self.step, self.overhead, self.first_extra = step, overhead, first_extra
        self.jitter = jitter or (lambda i: 1.0)
        self.calls: list[int] = []

    def clock(self) -> float:
        return self.now

    def call(self, state, batch, k):
        i = len(self.calls)
        self.calls.append(k)
        self.now += (self.overhead + k * self.step) * self.jitter(i) + (self.first_extra if i == 0 else 0.0)
        return state + k, 1.0


def run(device: FakeDevice, **settings):
    return time_calls(device.call, 0, None, MeasureSettings(**settings), sync=lambda x: x,
                      clock=device.clock)


def test_small_model_gets_many_steps_per_call():
    # 1 ms steps, 2 ms dispatch: K = ceil(0.2 / 0.003) = 67 after the first call, then
    # ceil(0.2 / (0.069 / 67)) = 195 once the dispatch share is known, then stable at 195.
    dev = FakeDevice(step=1e-3, overhead=2e-3)
    t = run(dev)
    assert dev.calls[:3] == [1, 67, 195]
    assert t.steps_per_call == 195 and set(dev.calls[2:]) == {195}
    # No noise: the rule stops at min_calls (6) timed calls.
    assert len(t.step_times_s) == 6
    assert t.step_times_s == pytest.approx((2e-3 + 195e-3) / 195)
    stats = t.stats()
    assert stats["stable"] is True and stats["step_time_cv"] == pytest.approx(0.0, abs=1e-12)
    assert stats["step_time_ci_halfwidth"] == pytest.approx(0.0, abs=1e-12)
    assert stats["steps_per_call_used"] == 195 and stats["timed_calls"] == 6
    # Warm-up lasted until 0.5 s had passed: 1 + 67 + 195 (x3) steps.
    assert stats["warmup_calls_used"] == 5
    assert stats["warmup_elapsed_s"] == pytest.approx(0.003 + 0.069 + 3 * 0.197)


def test_big_model_stays_within_the_fewest_calls():
    # A 10 s step against a 5 s budget: one warm-up call and the fewest timed calls (6: what
    # the median's interval and compare's rank test need), nothing more.
    dev = FakeDevice(step=10.0)
    t = run(dev)
    assert dev.calls == [1] * (1 + MIN_TIMED_CALLS)
    assert dev.now == pytest.approx(70.0)  # = max(budget, 7 steps)
    assert t.stats()["timed_calls"] == MIN_TIMED_CALLS and t.stats()["timing_s"] == pytest.approx(70.0)


@pytest.mark.parametrize("step", [1e-5, 3e-4, 0.01, 0.3, 1.0, 2.0, 4.0, 60.0])
def test_timing_phase_is_bounded(step):
    budget = 5.0
    dev = FakeDevice(step=step, overhead=1e-4, first_extra=step)  # a slow first execution too
    run(dev, time_budget_s=budget)
    # Whatever the step time, the phase ends within max(budget, 1 + MIN_TIMED_CALLS steps) plus
    # the slow first call's extra time (one call past the budget at most at K > 1: a call
    # lasts ~0.2 s).
    assert dev.now <= max(budget + 0.25, (1 + MIN_TIMED_CALLS) * (step + 1e-4)) + step


def test_fixed_steps_per_call_is_kept():
    dev = FakeDevice(step=1e-3)
    t = run(dev, steps_per_call=7)
    assert set(dev.calls) == {7} and t.steps_per_call == 7


@pytest.mark.parametrize("rule", ["ci", "cv"])
def test_noisy_device_runs_to_the_budget_and_is_unstable(rule):
    # Alternating +-20% call times meet neither a 2% CV nor a +-2% interval of the median (it
    # spans both values): timed calls go on until the next call would end past the 5 s budget.
    dev = FakeDevice(step=0.1, jitter=lambda i: 1.2 if i % 2 else 0.8)
    t = run(dev, stop_rule=rule)
    stats = t.stats()
    assert stats["stable"] is False and stats["step_time_cv"] > 0.02
    assert stats["step_time_ci_halfwidth"] > 0.02
    assert dev.now <= 5.0
    assert stats["timed_calls"] >= 10
    assert stats["step_time_ci_low_s"] <= stats["step_time_s"] <= stats["step_time_ci_high_s"]


def _noise(scale: float, seed: int = 0):
    """Independent call-time noise of relative size ``scale`` (uniform), reproducible."""
    rng = np.random.default_rng(seed)
    draws = 1.0 + scale * rng.uniform(-1.0, 1.0, 100_000)
    return lambda i: float(draws[i])


def test_the_ci_rule_is_met_by_more_calls_where_the_cv_rule_never_is():
    """Calls spread +-8% (a CV of about 4.6%): no number of calls brings the spread of single
    calls under 2%, so the cv rule runs to the budget, unstable; the median's interval narrows
    as calls accumulate, so the ci rule meets +-2% within a 30 s budget and stops early."""
    budget = 30.0
    cv = run(FakeDevice(step=0.02, jitter=_noise(0.08)), stop_rule="cv", time_budget_s=budget).stats()
    ci_dev = FakeDevice(step=0.02, jitter=_noise(0.08))
    ci = run(ci_dev, stop_rule="ci", time_budget_s=budget).stats()
    assert cv["stable"] is False and cv["step_time_cv"] > 0.02
    assert ci["stable"] is True and ci["step_time_ci_halfwidth"] <= 0.02
    assert ci["timed_calls"] < cv["timed_calls"] and ci_dev.now < budget - 1.0


def test_a_quiet_device_stops_at_the_fewest_calls_under_either_rule():
    for rule in ("ci", "cv"):
        t = run(FakeDevice(step=0.01, jitter=_noise(0.002)), stop_rule=rule).stats()
        assert t["stable"] is True and t["timed_calls"] == MIN_TIMED_CALLS, rule


def test_ci_halfwidth_is_the_relative_half_width_of_the_median_interval():
    x = np.arange(1.0, 10.0)  # median 5, 95% interval (2, 8)
    assert ci_halfwidth(x) == pytest.approx(3.0 / 5.0)
    assert ci_halfwidth(x[::-1]) == pytest.approx(3.0 / 5.0)  # any order
    assert math.isnan(ci_halfwidth([]))


def test_max_calls_bounds_the_timed_phase():
    dev = FakeDevice(step=1e-3, jitter=lambda i: 1.0 + 0.5 * (i % 2))
    t = run(dev, max_calls=6, time_budget_s=1000.0)
    assert t.stats()["timed_calls"] == 6


def test_choose_steps():
    assert choose_steps(0.01, 0.2) == 20
    assert choose_steps(0.3, 0.2) == 1
    assert choose_steps(0.0, 0.2) == MAX_STEPS_PER_CALL
    assert choose_steps(1e-12, 0.2) == MAX_STEPS_PER_CALL


def test_median_ci_exact_ranks():
    x = np.arange(1.0, 10.0)  # n = 9: P(B <= 1) = 10/512 <= 2.5% < P(B <= 2) = 46/512
    assert median_ci(x) == (2.0, 8.0)
    assert median_ci(np.arange(5.0)) == (0.0, 4.0)  # n <= 5: the full range
    assert median_ci(np.arange(6.0)) == (0.0, 5.0)  # n = 6: full range covers 96.9%
    # n = 20: the classic table gives ranks 6 and 15 (1-based).
    assert median_ci(np.arange(20.0)) == (5.0, 14.0)
    assert all(math.isnan(v) for v in median_ci(np.array([])))


def test_median_ci_of_thousands_of_calls():
    """Past 1023 timed calls (2.0**n overflows a float) the ranks are still the exact ones: the
    largest j with P(Binomial(n, 1/2) <= j) <= 2.5%, checked in exact integer arithmetic."""
    from fractions import Fraction

    for n in (1001, 1500, 4000):
        total, cdf, j = 2**n, 0, -1
        while Fraction(cdf + math.comb(n, j + 1), total) <= Fraction(0.025):
            j += 1
            cdf += math.comb(n, j)
        assert median_ci(np.arange(float(n))) == (float(max(j, 0)), float(n - 1 - max(j, 0))), n
    low, high = median_ci(np.arange(1e6))  # the most max_calls allows: quick, no overflow
    assert 499_000 < low < 500_000 < high < 501_000


def test_settings_validation():
    with pytest.raises(SpecError, match="steps_per_call"):
        MeasureSettings(steps_per_call=0)
    with pytest.raises(SpecError, match="time_budget_s"):
        MeasureSettings(time_budget_s=math.inf)
    with pytest.raises(SpecError, match="cv_target"):
        MeasureSettings(cv_target=math.nan)
    with pytest.raises(SpecError, match="ci_target"):
        MeasureSettings(ci_target=0)
    with pytest.raises(SpecError, match="stop_rule.*one of ci, cv"):
        MeasureSettings(stop_rule="spread")
    with pytest.raises(SpecError, match="max_calls"):
        MeasureSettings(min_calls=10, max_calls=7)
    # Fewer calls than compare's test and the median's interval need are refused, by name.
    with pytest.raises(SpecError, match="min_calls.*from 6"):
        MeasureSettings(min_calls=2)
    with pytest.raises(SpecError, match="max_calls.*from 6"):
        MeasureSettings(max_calls=3)


# -- physics checks ----------------------------------------------------------------------------

def _metrics(**overrides):
    base = {"flops_utilization": 0.5, "model_flops_utilization": 0.5, "arithmetic_intensity": 100.0,
            "peak_bytes_per_sec": 1e10, "peak_flops": 1e11, "flops_per_sec": 5e10,
            "useful_flops_ratio": 1.0, "peak_source": "measured"}
    return {**base, **overrides}


def test_clean_record_has_no_warnings():
    assert physics_warnings(_metrics()) == []


def test_utilization_above_one():
    assert "utilization_above_1" in physics_warnings(_metrics(model_flops_utilization=1.07))
    assert "utilization_above_1" in physics_warnings(_metrics(flops_utilization=1.01))


def test_above_roof():
    # Intensity 1 FLOP/B x 10 GB/s = a 10 GFLOP/s roof; 50 GFLOP/s is above it.
    assert physics_warnings(_metrics(arithmetic_intensity=1.0)) == ["above_roof"]
    # A 30 GFLOP/s roof per device: 50 GFLOP/s is above it on one device, not on two.
    assert physics_warnings(_metrics(arithmetic_intensity=3.0), devices=1) == ["above_roof"]
    assert physics_warnings(_metrics(arithmetic_intensity=3.0), devices=2) == []


@pytest.mark.parametrize("ratio, flagged", [(0.79, True), (0.8, False), (1.25, False), (1 / 3.4, True), (1.3, True)])
def test_flops_mismatch(ratio, flagged):
    assert ("flops_mismatch" in physics_warnings(_metrics(useful_flops_ratio=ratio))) is flagged


@pytest.mark.parametrize("executed, flagged", [
    # useful 100 FLOP, estimated non-matmul work 50: executed counts from 80 to 187.5 agree.
    (79, True), (80, False), (150, False), (187.5, False), (190, True), (340, True)])
def test_flops_mismatch_grants_the_estimated_elementwise_work(executed, flagged):
    metrics = _metrics(useful_flops_ratio=100 / executed, model_flops_per_step=100.0,
                       elementwise_flops_per_step=50.0)
    assert ("flops_mismatch" in physics_warnings(metrics)) is flagged


def test_elementwise_estimate_covers_the_optimizer_and_the_activations():
    from paradnn import families, sizes
    from paradnn.families.fc import FC
    from paradnn.families.real import Real
    from paradnn.workload import Workload

    spec = FC(layers=2, nodes=32, input=64, output=10)
    params = sizes.param_count(spec)
    kept = sum(families.of(spec).activation_elements(spec))
    one = sizes.elementwise_flops_per_step(Workload(spec, 8, optimizer="adam"))
    assert one == 13 * params + sizes.ELEMENTWISE_FLOPS_PER_ACTIVATION * kept * 8
    # Two devices update two replicas of the weights; the activations are the global batch's.
    two = sizes.elementwise_flops_per_step(Workload(spec, 8, optimizer="adam", devices=2))
    assert two == one + 13 * params
    # A zoo model has no activation estimate: the update alone.
    real = Workload(Real("mobilenet"), 2)
    assert sizes.elementwise_flops_per_step(real) == (
        sizes.OPTIMIZERS[real.optimizer].update_flops * sizes.param_count(real.spec))


TINY_TRANSFORMER = {"family": "transformer", "layers": 1, "d_model": 32, "heads": 2, "d_ff": 64,
                    "length": 8, "vocab": 64, "batch": 2}


def test_smoke_configs_raise_no_physics_flag_on_flops(tiny_settings):
    """The smoke sweep's tiny models (and the smallest Transformer) executed 0.76-0.80 of their
    useful FLOPs before the optimizer's and element-wise work was granted: nothing is wrong."""
    from paradnn.grids.sweepfile import load_sweep_file
    from paradnn.runner import run_workload
    from paradnn.workload import Workload, spec_from_dict

    workloads = list(load_sweep_file("sweeps/smoke.yaml").workloads)
    fields = dict(TINY_TRANSFORMER)
    batch = fields.pop("batch")
    workloads.append(Workload(spec_from_dict(fields), batch))
    for w in workloads:
        record = run_workload(w, tiny_settings)
        assert record.status == "ok", record.error
        assert "flops_mismatch" not in record.warnings, (w.spec, record.metrics["useful_flops_ratio"])


def test_warning_codes_round_trip():
    assert warning_codes("utilization_above_1,above_roof") == ["utilization_above_1", "above_roof"]
    for empty in (None, "", math.nan):
        assert warning_codes(empty) == []
    # Every code can fire (peak_below_ceiling needs a spec peak, no_quiet_peak none, the notes
    # of a nominal peak and a loaded roof a nominal source).
    fired = set(record_warnings(_metrics(model_flops_utilization=2.0, arithmetic_intensity=1.0,
                                         useful_flops_ratio=3.0, peak_source="none", peak_spread=0.2,
                                         model_ceiling_utilization=2.0, contended=True, stable=False,
                                         gpu_power_limited_fraction=0.5),
                                peak_spread_limit=0.1))
    fired |= set(record_warnings(_metrics(peak_source="spec", ceiling_flops=2e11)))
    fired |= set(record_warnings(_metrics(model_flops_utilization=2.0, arithmetic_intensity=1.0)))
    fired |= set(record_warnings(_metrics(peak_source="nominal", model_flops_utilization=1.2,
                                          peak_bytes_source="measured under load", arithmetic_intensity=1.0)))
    # The time ledger's: operations beating a trusted compute bound, and an analytic count above
    # the executed one where every counted operation was profiled.
    fired |= set(record_warnings(_metrics(step_time_s=0.01, ledger_split=True, ledger_faster_than_roof_s=-0.002,
                                          ledger_extra_s=-0.002, ledger_flops_matched=1.0)))
    fired |= set(record_warnings(_metrics(host_huge_pages="none", page_faults_per_step=32_000.0,
                                          process_system_cpu_s=0.7, process_cpu_s=2.8)))
    # flops_count_changed comes from rows read together (test_analysis), never from one record.
    assert fired == set(WARNINGS) - set(READ_WARNINGS) and set(READ_WARNINGS) <= set(WARNINGS)
    assert {flag.kind for flag in WARNINGS.values()} == set(WARNING_KINDS)


def test_page_faults_are_noted_only_with_4k_pages_and_a_real_cost():
    """The note needs all three: 4 KiB pages, at least PAGE_FAULTS_PER_STEP faults per step and
    at least PAGE_FAULT_KERNEL_SHARE of the process's CPU time in the kernel."""
    from paradnn.hostmem import PAGE_FAULT_KERNEL_SHARE, PAGE_FAULTS_PER_STEP

    costly = dict(host_huge_pages="none", page_faults_per_step=float(PAGE_FAULTS_PER_STEP),
                  process_system_cpu_s=PAGE_FAULT_KERNEL_SHARE * 2.0, process_cpu_s=2.0)
    assert "page_faults" in record_warnings(_metrics(**costly))
    assert warning_kind("page_faults") == "provenance"
    for change in ({"host_huge_pages": "malloc"}, {"host_huge_pages": "always"}, {"host_huge_pages": None},
                   {"page_faults_per_step": PAGE_FAULTS_PER_STEP - 1.0},
                   {"process_system_cpu_s": PAGE_FAULT_KERNEL_SHARE * 2.0 * 0.99},
                   {"process_cpu_s": 0.0}, {"page_faults_per_step": None}):
        assert "page_faults" not in record_warnings(_metrics(**{**costly, **change})), change


def test_a_nominal_denominator_raises_notes_not_physics():
    """Above a nominal peak (boost clocks exceed the clock the host reports) or above a roof
    whose bandwidth was probed under load is a provenance note; above a vendor or quiet measured
    peak it is impossible."""
    loaded = {"peak_bytes_source": "measured under load"}
    nominal = record_warnings(_metrics(peak_source="nominal", model_flops_utilization=1.1,
                                       arithmetic_intensity=1.0, **loaded))
    assert nominal == ["nominal_peak", "above_nominal_peak", "roof_under_load"]
    assert all(warning_kind(c) == "provenance" for c in nominal)
    measured = record_warnings(_metrics(peak_source="measured", model_flops_utilization=1.1,
                                        arithmetic_intensity=1.0))
    assert measured == ["utilization_above_1", "above_roof"]
    # A quiet bandwidth still bounds a nominal run's memory-bound leg: above it is physics.
    assert "above_roof" in record_warnings(_metrics(peak_source="nominal", peak_bytes_source="measured",
                                                    arithmetic_intensity=1.0))


def test_contention_and_instability_are_their_own_kinds():
    codes = record_warnings(_metrics(contended=True, stable=False))
    assert codes == ["contended", "unstable"]
    assert [warning_kind(c) for c in codes] == ["provenance", "precision"]
    assert record_warnings(_metrics(contended=False, stable=True)) == []
    assert warning_codes("nominal_peak,above_roof,unstable", "physics") == ["above_roof"]


def test_above_the_measured_ceiling():
    """A run faster than the best GEMM the host measured is a bug on any platform, even well
    below the vendor peak (a GPU's spec): above_ceiling fires on either ceiling utilization
    above 1, never below it."""
    below = _metrics(ceiling_utilization=0.97, model_ceiling_utilization=0.9)
    assert physics_warnings(below) == []
    assert physics_warnings(_metrics(ceiling_utilization=1.02)) == ["above_ceiling"]
    assert physics_warnings(_metrics(model_ceiling_utilization=1.3, model_flops_utilization=0.8)) == ["above_ceiling"]
    assert physics_warnings(_metrics(ceiling_utilization=None, model_ceiling_utilization=None)) == []


def test_a_spec_peak_below_the_measured_ceiling_is_flagged():
    """A vendor peak below what the device was measured to do is a wrong table entry; a
    measured peak is the ceiling itself, and a ceiling below the spec is the usual case."""
    assert physics_warnings(_metrics(peak_source="spec", ceiling_flops=1.2e11)) == ["peak_below_ceiling"]
    assert physics_warnings(_metrics(peak_source="spec", ceiling_flops=0.8e11)) == []
    assert physics_warnings(_metrics(peak_source="measured", ceiling_flops=1e11)) == []
    assert physics_warnings(_metrics(peak_source="spec", ceiling_flops=None)) == []


def test_peak_spread_is_held_to_the_probes_own_threshold():
    """A probe's spread is held to the threshold it is judged by (10% by default), not to a
    run's precision target: a 3% probe is a quiet one, not a note on every run."""
    from paradnn import hardware

    assert record_warnings(_metrics(peak_spread=0.03), peak_spread_limit=hardware.PROBE_MAX_CV) == []
    assert record_warnings(_metrics(peak_spread=0.03), peak_spread_limit=0.05) == []
    assert record_warnings(_metrics(peak_spread=0.08), peak_spread_limit=0.05) == ["peak_spread_above_target"]
    assert warning_kind("peak_spread_above_target") == "provenance"
    assert record_warnings(_metrics(peak_spread=0.08)) == []  # no target given: nothing to hold it to


def test_real_big_model_is_timed_in_the_fewest_steps(tiny_settings):
    """A real compiled FC whose step (about 0.1-0.3 s here) outlasts a 0.1 s budget: one warm-up
    call and the fewest timed calls of one step each, so the timing phase stays within 7 steps."""
    from paradnn import FC, run

    rec = run(FC(layers=2, nodes=1024, input=2000, output=1000), batch=512,
              settings=MeasureSettings(time_budget_s=0.1))
    m = rec.metrics
    assert rec.status == "ok", rec.error
    assert (m["steps_per_call_used"], m["warmup_calls_used"], m["timed_calls"]) == (1, 1, MIN_TIMED_CALLS)
    # The phase is the warm-up call plus the timed calls, nothing else: the gaps between the
    # calls (the meter's reads, a pause of the loaded host) add up to less than half a step.
    calls = m["warmup_elapsed_s"] + sum(m["step_times_s"])
    assert calls <= m["timing_s"] < calls + 0.5 * min(m["step_times_s"]), (m["timing_s"], calls)


def test_row_field_names_never_collide():
    """A row is one flat dict: a metric named like a setting or a platform field would
    silently overwrite it (warmup_s the setting vs the measured warm-up time)."""
    from paradnn.measure import SETTINGS_FIELDS
    from paradnn.record import METRICS, PLATFORM_FIELDS, SOFTWARE_FIELDS

    groups = [set(METRICS), set(SETTINGS_FIELDS), set(PLATFORM_FIELDS), set(SOFTWARE_FIELDS)]
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            assert not a & b, a & b


def test_the_precision_texts_name_the_rule_its_target_and_the_verdict():
    """What a user reads for an unstable run: the rule that was missed, with its own quantity
    (the median's interval for ci, never only the cv, which ci does not hold to a target)."""
    ci = MeasureSettings()
    assert rule_text(ci) == "the median step time's 95% CI within +-2%"
    assert rule_text(ci.replace(stop_rule="cv", cv_target=0.05)) == "the step times' cv within 5%"
    row = {**ci.to_dict(), "stable": False, "step_time_ci_halfwidth": 0.0313, "step_time_cv": 0.2750}
    assert precision_text(row) == "median +-3.13% (95% CI; target +-2%: NOT met); calls' cv 27.50%"
    assert precision_text({**row, "stable": True, "step_time_ci_halfwidth": 0.012}).startswith(
        "median +-1.20% (95% CI; target +-2%: met)")
    # A row from before stop_rule existed was held to its cv.
    old = {"stable": True, "step_time_cv": 0.015, "cv_target": 0.02}
    assert precision_text(old) == "cv 1.50% (target 2%: met)"
