"""benchmarks/bench_stopping.py (docs/metrics.md, "Stopping rules: spread of calls or precision
of the median"): the replay stops where ``time_calls`` would, a quiet series lets the ci rule
stop early, a noisy one never meets cv while the median's interval still narrows with more
calls, and the spinning child never outlives the benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT, child_env
from paradnn.measure import MeasureSettings, ci_halfwidth, spread_cv, time_calls

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_stopping  # noqa: E402

STEP_S = 1e-3  # s per step of the synthetic series
K = 200  # steps per call: 0.2 s calls, the default call_target_s
BUDGET_S = MeasureSettings().time_budget_s


def within_budget(run_s: float, step_times_s: list[float]) -> bool:
    """Whether a phase of ``run_s`` seconds kept to the budget as ``time_calls`` does: the call
    that may start is expected to last the median so far, so the slowest call may overrun it."""
    return run_s <= BUDGET_S + (max(step_times_s) - min(step_times_s)) * K


def series(noise: float, n: int = 150, seed: int = 0) -> list[float]:
    """Per-step times (s) with a relative Gaussian ``noise`` (0.01 = 1%)."""
    rng = np.random.default_rng(seed)
    return list(STEP_S * np.maximum(0.05, 1.0 + noise * rng.standard_normal(n)))


def time_calls_on(step_times_s: list[float], rule: str, target: float) -> np.ndarray:
    """The per-step times ``time_calls`` keeps when its calls last ``step_times_s`` x K on a fake
    clock, after a 0.5 s warm-up of two 0.25 s calls (the replay's warm-up)."""
    now = [0.0]
    durations = iter([0.25, 0.25] + [t * K for t in step_times_s])

    def call(state, batch, k):
        now[0] += next(durations)
        return state, 0.0

    settings = MeasureSettings(steps_per_call=K, stop_rule=rule, ci_target=target, cv_target=target)
    return time_calls(call, None, None, settings, sync=lambda x: x, clock=lambda: now[0]).step_times_s


@pytest.mark.parametrize("noise, rule, target", [(0.01, "ci", 0.02), (0.01, "cv", 0.005), (0.05, "ci", 0.02),
                                                 (0.05, "cv", 0.05), (0.3, "ci", 0.02), (0.3, "cv", 0.02)])
def test_replay_stops_where_time_calls_stops(noise, rule, target):
    for seed in range(5):
        t = series(noise, seed=seed)
        stop = bench_stopping.replay(t, K, rule, target)
        kept = time_calls_on(t, rule, target)
        assert stop is not None and stop.calls == kept.size
        assert stop.median_s == pytest.approx(float(np.median(kept)), rel=1e-9)
        assert stop.met == (stop.reason == "target")
        assert within_budget(stop.seconds, t)
        assert stop.reason != "budget" or stop.seconds > BUDGET_S - 2 * max(t) * K  # not stopped early


def test_replay_needs_the_series_to_reach_a_stop():
    t = series(0.3, n=10)  # 10 calls of 0.2 s: neither the 5 s budget nor a 2% target
    assert bench_stopping.replay(t, K, "cv", 0.02) is None
    assert bench_stopping.windows(t, K, "cv", 0.02, stride=1) == []


def test_quiet_series_ci_stops_early_and_meets_the_target():
    t = series(0.01, seed=1)
    runs = bench_stopping.windows(t, K, "ci", 0.02, stride=5)
    s = bench_stopping.summarize(runs)
    assert s["runs"] >= 20
    assert s["met_share"] >= 0.9
    assert s["calls_median"] <= 8 and s["seconds_median"] < 2.5  # 6 calls of 0.2 s + 0.5 s warm-up
    assert s["rel_error_median"] < 0.01


def test_noisy_series_cv_never_meets_while_ci_narrows_with_calls():
    t = series(0.2, seed=2)
    cv_runs = bench_stopping.windows(t, K, "cv", 0.02, stride=5)
    assert cv_runs and all(not r["met"] and r["reason"] == "budget" and within_budget(r["seconds"], t)
                           for r in cv_runs)
    ci_runs = bench_stopping.windows(t, K, "ci", 0.02, stride=5)
    assert [r["start"] for r in ci_runs] == [r["start"] for r in cv_runs]  # the same windows for every rule
    assert all(within_budget(r["seconds"], t) for r in ci_runs)  # under noise the budget bounds it
    # More calls narrow the median's interval (~1/sqrt(n)); the spread of calls stays ~20%.
    long = [series(0.2, n=640, seed=s) for s in range(20)]
    width = {n: np.median([ci_halfwidth(x[:n]) for x in long]) for n in (10, 40, 160, 640)}
    assert width[10] > 1.5 * width[40] > 2.25 * width[160] > 3.3 * width[640]
    # ~2.5 x 20% / sqrt(n): +-2% needs ~600 calls (2 minutes of 0.2 s calls), no 5 s budget.
    assert 0.015 < width[640] < 0.025 and width[40] > 0.06
    assert all(0.15 < spread_cv(x[:n]) < 0.25 for x in long for n in (40, 640))


def test_evaluate_rows_and_table_have_units():
    data = [{"condition": c, "step_times_s": series(noise, seed=i), "steps_per_call": K}
            for i, (c, noise) in enumerate([("quiet", 0.01), ("busy core", 0.2)])]
    rows = bench_stopping.evaluate(data, stride=10)
    assert [(r["condition"], r["rule"], r["target"]) for r in rows] == [
        (c, rule, target) for c in ("quiet", "busy core") for rule, target in bench_stopping.RULE_TARGETS]
    by = {(r["condition"], r["rule"], r["target"]): r for r in rows}
    assert by["quiet", "ci", 0.02]["met_share"] > by["busy core", "ci", 0.02]["met_share"]
    assert by["busy core", "cv", 0.02]["met_share"] == 0.0
    text = bench_stopping.table(rows)
    assert "s med (max)" in text and "%" in text and len(text.splitlines()) == 2 + len(rows)


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_busy_core_kills_its_spinner_however_the_block_ends(error):
    with pytest.raises(error):
        with bench_stopping.busy_core() as proc:
            assert proc.poll() is None  # spinning
            raise error()
    assert proc.poll() is not None


@pytest.mark.slow
def test_quick_benchmark_end_to_end(tmp_path):
    out = tmp_path / "stop.json"
    # A short peak probe: this checkout's first run on a fresh cache measures the host's peak.
    env = child_env(PARADNN_CACHE=str(tmp_path / "cache"), PARADNN_PROBE_BUDGET_S="2")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_stopping.py"), "--quick", "--json",
                           str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "truth in CI" in done.stdout and "load avg 1 min" in done.stdout
    result = json.loads(out.read_text())
    assert [s["condition"] for s in result["series"]] == ["quiet", "busy core"]
    for s in result["series"]:
        assert len(s["step_times_s"]) == result["config"]["calls"] == 50 and s["steps_per_call"] >= 1
    busy = result["series"][1]
    assert busy["other_busy_cores"] > 0.5  # the spinner really kept a core busy
    assert not os.path.exists(f"/proc/{busy['spinner_pid']}") or b"while True" not in open(
        f"/proc/{busy['spinner_pid']}/cmdline", "rb").read()
    rows = result["summary"]
    assert len(rows) == 2 * len(bench_stopping.RULE_TARGETS) and all(r["runs"] >= 1 for r in rows)
    for r in rows:  # every row of the JSON is a line of the printed table
        assert f"{r['condition']:>9} {r['rule']:>4} {r['target'] * 100:>5g}% {r['runs']:>5}" in done.stdout
