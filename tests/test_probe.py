"""The peak probe's rules: best of several methods, one peak per host and software (the best
quiet measurement on record), a contended result stored as such and never used, two probes at
once measure once, and a result expires when the software versions change.

The GEMM methods (the JAX backend's ``gemm_methods`` capability) are replaced by calls that
sleep a known time, so that the rules are checked exactly and fast; the bandwidth measurement
and the cache file are the real ones."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from paradnn import backends, hardware
from paradnn.hardware import host, probe_cache, probing, selection


def _sleeper(seconds):
    """A GEMM method whose call takes ``seconds`` (a list cycles: its spread is the jitter)."""
    cycle = itertools.cycle(seconds if isinstance(seconds, list) else [seconds])

    def factory(dtype, n):
        return lambda: time.sleep(next(cycle))

    return factory


def _methods(monkeypatch, methods):
    """Make the probe's framework (JAX) offer ``methods`` as its GEMM methods."""
    monkeypatch.setattr(backends.get("jax"), "gemm_methods", lambda platform: methods)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "probe.json"
    monkeypatch.setattr(probe_cache, "CACHE_PATH", path)
    monkeypatch.setattr(probing, "_MEMO", {})
    monkeypatch.delenv("PARADNN_PROBE_MAX_CV", raising=False)
    monkeypatch.delenv("PARADNN_PROBE_BUDGET_S", raising=False)  # the suite's short budget (conftest.py)
    # Other processes' load on a shared test host is not what these tests are about (one test
    # sets its own threshold and load).
    monkeypatch.setenv("PARADNN_PROBE_MAX_LOAD", "1000")
    # The sleeping GEMMs "reach" TFLOP/s, beyond this CPU's nominal peak: no nominal here (the
    # tests of that bound give their own).
    monkeypatch.setattr(host, "nominal_cpu_flops", lambda: None)
    return path


def _measurements(cache):
    return [m for v in json.loads(cache.read_text()).values() for m in v["measurements"]]


def test_best_method_wins_and_quiet_result_is_cached(cache, monkeypatch):
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")  # the real bandwidth probe on a busy host
    # Sleeps of tens of ms: a busy host oversleeps by a few ms, not by 100%.
    _methods(monkeypatch, {"slow": _sleeper(0.04), "fast": _sleeper(0.02)})
    result = hardware.probe(dtypes=("float32",))
    assert result["best_method"]["float32"] == "fast"
    n = max(hardware.probe_plan("cpu")["gemm_sizes"]["float32"])
    assert result["peak_flops"]["float32"] == pytest.approx(2 * n**3 / 0.02, rel=0.3)
    assert result["gemm"]["float32"]["slow"] < result["gemm"]["float32"]["fast"]
    assert result["contended"] is False and result["in_use"] is True
    assert _measurements(cache)[0]["peak_flops"] == result["peak_flops"]
    assert result["host_load"]["cpus"] >= 1
    # No GPU clocks to read on a CPU; the probe says so rather than leaving them out.
    assert result["gemm_clocks"]["gpu_sm_clock_mhz"] is None
    assert "NVIDIA GPUs only" in result["gemm_clocks"]["gpu_clocks_note"]
    peak = hardware.peaks("cpu", "float32", "cpu")
    assert peak.source == "measured" and "fast" in peak.method and peak.flops == result["peak_flops"]["float32"]
    assert (peak.id, peak.measured_utc, peak.spread) == (result["id"], result["measured_utc"],
                                                         result["spread"]["float32"])


def test_a_probe_past_its_budget_keeps_one_pair_per_dtype_and_records_the_rest(cache, monkeypatch):
    """The GEMM budget (``PARADNN_PROBE_BUDGET_S``, float32 half of it, each other dtype a
    quarter): past its share a dtype measures no further (method, size) pair, but always its
    first, and the skipped pairs are recorded as ``incomplete``. The suite's own probes run so
    (tests/conftest.py), so this is the rule that their peaks come from."""
    monkeypatch.setenv("PARADNN_PROBE_BUDGET_S", "0.3")
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    # One pair of method a is a warm call and two timed ones, 0.18 s: past float32's 0.15 s, and
    # the winner's five spread calls take every later dtype past its own end before it starts.
    _methods(monkeypatch, {"a": _sleeper(0.06), "b": _sleeper(0.01)})
    result = hardware.probe()
    sizes = hardware.probe_plan("cpu")["gemm_sizes"]
    for dtype in hardware.PROBE_DTYPES:
        first, second = sizes[dtype]
        assert result["incomplete"][dtype] == [f"a {second}", f"b {first}", f"b {second}"], dtype
        assert set(result["gemm"][dtype]) == {"a"}, dtype
    assert result["peak_flops"]["float32"] == pytest.approx(2 * sizes["float32"][0] ** 3 / 0.06, rel=0.3)
    assert result["in_use"] is True and "within 0.3 s" in result["method"]


def test_a_pair_predicted_to_end_past_the_deadline_is_skipped():
    """The budget bounds the probe even where one method is far slower than the others (jax
    0.10.2's oneDNN float16 GEMM on an Intel host: one 2048^3 pair took about 66 s of a 40 s budget):
    its time at the smaller size, scaled by N^3, predicts the larger pair, which is skipped."""
    def cubic(base):  # a method whose call takes base x (N / 1000)^3 seconds
        return lambda dtype, n: (lambda: time.sleep(base * (n / 1000) ** 3))

    start = time.perf_counter()
    # slow at 1000: a warm call and two timed ones, 0.15 s; at 2000 they would take 1.2 s.
    out = probing.measure_gemm("float32", {"fast": cubic(0.002), "slow": cubic(0.05)}, sizes=(1000, 2000),
                               deadline=start + 1.0)
    assert out["skipped"] == ["slow 2000"] and set(out["by_method"]) == {"fast", "slow"}
    # Without the prediction the slow pairs alone take 1.35 s; about 0.3 s with it (slack for a busy host).
    assert out["best_method"] == "fast" and time.perf_counter() - start < 1.3
    # Without a deadline every pair runs.
    assert probing.measure_gemm("float32", {"fast": cubic(0.001), "slow": cubic(0.01)},
                                sizes=(1000, 2000))["skipped"] == []


def test_a_probe_cut_short_answers_only_probes_with_no_larger_budget(cache, monkeypatch, capsys):
    """A probe that skipped pairs under a small budget (a test suite's) answers a later probe
    with the same budget, but not one with a larger budget, which would have measured the pairs
    it skipped (the fastest method among them: on an H200 a 2 s probe left in the cache read
    666 TFLOP/s bfloat16 against 767); after the fuller probe the better peak is in use."""
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    # Method a (slow) runs first and uses up the small budget; b (five times faster) is skipped.
    _methods(monkeypatch, {"a": _sleeper(0.05), "b": _sleeper(0.01)})
    monkeypatch.setenv("PARADNN_PROBE_BUDGET_S", "0.3")
    short = hardware.probe(dtypes=("float32",))
    assert short["incomplete"]["float32"] and short["budget_s"] == 0.3
    assert set(short["gemm"]["float32"]) == {"a"}
    monkeypatch.setattr(probing, "_MEMO", {})
    assert hardware.probe(dtypes=("float32",))["id"] == short["id"]  # same budget: served
    from paradnn.cli import main

    assert main(["probe"]) == 0  # the command says what the budget left out
    out = capsys.readouterr().out
    assert "skipped    past the GEMM budget of 0.3 s (PARADNN_PROBE_BUDGET_S): float32: " in out, out
    monkeypatch.setenv("PARADNN_PROBE_BUDGET_S", "0.2")
    assert hardware.probe(dtypes=("float32",))["id"] == short["id"]  # smaller budget: served
    assert len(_measurements(cache)) == 1
    monkeypatch.setenv("PARADNN_PROBE_BUDGET_S", "40")
    full = hardware.probe(dtypes=("float32",))
    assert full["id"] != short["id"] and not full["incomplete"] and full["best_method"]["float32"] == "b"
    assert full["in_use"] is True and full["peak_flops"]["float32"] > 3 * short["peak_flops"]["float32"]
    assert len(_measurements(cache)) == 2
    assert hardware.peaks("cpu", "float32", "cpu").id == full["id"]
    # Now complete on record: a probe with any budget is answered by the full one, measuring nothing.
    monkeypatch.setattr(probing, "_MEMO", {})
    monkeypatch.setenv("PARADNN_PROBE_BUDGET_S", "0.3")
    assert hardware.probe(dtypes=("float32",))["id"] == full["id"]
    assert len(_measurements(cache)) == 2
    # An entry cached before ``budget_s`` was recorded, with skipped pairs, covers no budget.
    old = {k: v for k, v in short.items() if k != "budget_s"}
    assert not probing.covers(old, "float32", 0.1) and probing.covers(full, "float32", 1e9)


def test_contended_result_is_stored_as_such_and_never_used(cache, monkeypatch):
    # Call times alternating 2 ms / 6 ms: a coefficient of variation of about 0.5.
    _methods(monkeypatch, {"noisy": _sleeper([0.002, 0.006])})
    result = hardware.probe(dtypes=("float32",))
    assert result["contended"] is True and result["spread"]["float32"] > hardware.PROBE_MAX_CV
    assert result["in_use"] is False and "float32 spread" in result["contended_reasons"][0]
    [stored] = _measurements(cache)
    assert stored["contended"] is True and stored["id"] == result["id"] and "host_load" in stored
    peak = hardware.peaks("cpu", "float32", "cpu")
    assert peak.flops is None and peak.source == "none" and result["id"] in peak.method
    # A busy host does not pay a probe on every run: within PROBE_RETRY_S the contended one answers.
    monkeypatch.setattr(probing, "_MEMO", {})
    assert hardware.probe(dtypes=("float32",))["id"] == result["id"]
    assert len(_measurements(cache)) == 1
    # A higher threshold (a shared CI host) accepts a new one, which then divides.
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    quiet = hardware.probe(refresh=True, dtypes=("float32",))
    assert quiet["contended"] is False and quiet["in_use"] is True
    assert hardware.peaks("cpu", "float32", "cpu").id == quiet["id"]
    assert [m["contended"] for m in _measurements(cache)] == [True, False]


def test_a_contended_probe_does_not_change_the_utilization_of_a_config(cache, monkeypatch, tiny_settings):
    """Measured before and after a contended probe (and a quiet one that came out lower), one
    config divides by the same peak: the best quiet one on record."""
    from paradnn import FC, run

    # The quiet probes are accepted under a raised threshold (the real bandwidth loop on a
    # shared test host spreads); the busy one's GEMM spread (cv about 0.7) exceeds any usual one.
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    _methods(monkeypatch, {"lib": _sleeper(0.02)})
    first = hardware.probe()
    assert first["contended"] is False
    before = run(FC(2, 16, 12, 5), batch=4, settings=tiny_settings)
    # The host gets busy: a probe measures a slower, noisy GEMM. It is stored, contended.
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "0.3")
    _methods(monkeypatch, {"lib": _sleeper([0.03, 0.15])})
    busy = hardware.probe(refresh=True)
    assert busy["contended"] is True and busy["peak_flops"]["float32"] < first["peak_flops"]["float32"]
    # A quiet probe that came out lower (a method slowed down) does not replace the best one.
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    _methods(monkeypatch, {"lib": _sleeper(0.04)})
    lower = hardware.probe(refresh=True)
    assert lower["contended"] is False and lower["in_use"] is False
    monkeypatch.setattr(probing, "_MEMO", {})  # as a new process would: from the file
    after = run(FC(2, 16, 12, 5), batch=4, settings=tiny_settings)
    assert len(_measurements(cache)) == 3
    for rec in (before, after):
        assert rec.status == "ok", rec.error
        assert rec.metrics["peak_id"] == first["id"]
        assert rec.metrics["peak_flops"] == first["peak_flops"]["float32"]
    # Utilization x step time is the denominator's inverse times the FLOPs: the same for both.
    u = [r.metrics["model_flops_utilization"] * r.metrics["step_time_s"] for r in (before, after)]
    assert u[0] == pytest.approx(u[1], rel=1e-12)


def test_no_quiet_peak_means_no_utilization_and_says_why(cache, monkeypatch, tiny_settings):
    from paradnn import FC, run

    _methods(monkeypatch, {"noisy": _sleeper([0.002, 0.006])})
    rec = run(FC(2, 16, 12, 5), batch=4, settings=tiny_settings)
    assert rec.status == "ok", rec.error
    assert rec.metrics["model_flops_utilization"] is None and rec.metrics["flops_utilization"] is None
    assert rec.metrics["peak_source"] == "none" and "no_quiet_peak" in rec.warnings
    assert rec.metrics["examples_per_sec"] > 0  # throughput needs no peak


def test_a_peak_noisier_than_the_target_flags_the_utilization(cache, monkeypatch, tiny_settings):
    from paradnn import FC, run

    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")  # accepted under a raised threshold...
    _methods(monkeypatch, {"noisy": _sleeper([0.002, 0.006])})
    assert hardware.probe()["in_use"] is True
    rec = run(FC(2, 16, 12, 5), batch=4, settings=tiny_settings.replace(cv_target=0.2))
    assert rec.metrics["peak_spread"] > 0.2
    assert "peak_spread_above_target" in rec.warnings  # ...but never silently


def _probe_beside_a_spinner():
    """A float32 probe while a child process spins on one core (another process's load)."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        return hardware.probe(dtypes=("float32",))
    finally:
        spinner.kill()
        spinner.wait()


def test_a_busy_neighbour_makes_the_probe_contended(cache, monkeypatch):
    """Load from another process (a spinning child) is seen and recorded, even when the probe's
    own timings are steady (its GEMMs sleep, so the neighbour does not slow them)."""
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    monkeypatch.setenv("PARADNN_PROBE_MAX_LOAD", "0.3")
    _methods(monkeypatch, {"lib": _sleeper(0.05)})
    result = _probe_beside_a_spinner()
    assert result["host_load"]["other_busy_cores"] > 0.3
    assert result["contended"] is True and "other processes" in " ".join(result["contended_reasons"])
    assert hardware.peaks("cpu", "float32", "cpu").flops is None


def test_reduced_precision_peak_is_at_least_float32(cache, monkeypatch):
    fast32 = {"float32": 0.001, "bfloat16": 0.004, "float16": 0.004}

    def factory(dtype, n):
        return lambda: time.sleep(fast32[dtype])

    _methods(monkeypatch, {"lib": factory})
    result = hardware.probe(dtypes=("bfloat16",))
    assert result["peak_flops"]["bfloat16"] >= result["gemm"]["float32"]["lib"] * 0.99
    assert result["best_method"]["bfloat16"] == "float32 lib"


def test_result_expires_when_versions_change(cache, monkeypatch):
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")  # sleep jitter on a busy host is not the point
    _methods(monkeypatch, {"lib": _sleeper(0.001)})
    first = hardware.probe(dtypes=("float32",))
    assert hardware.probe(dtypes=("float32",))["measured_utc"] == first["measured_utc"]  # a hit
    jax_backend = backends.get("jax")
    real = jax_backend.probe_versions
    monkeypatch.setattr(jax_backend, "probe_versions", lambda: {**real(), "jaxlib": "99.0"})
    monkeypatch.setattr(probing, "_MEMO", {})
    second = hardware.probe(dtypes=("float32",))
    assert second["versions"]["jaxlib"] == "99.0" and second["measured_utc"] != first["measured_utc"] or \
        second["id"] != first["id"]
    # Both installations keep their probe in the shared cache: two Pythons or two JAX versions on
    # one host no longer expire each other's entry (each re-probed on every run).
    entries = json.loads(cache.read_text())
    assert len(entries) == 2
    monkeypatch.setattr(jax_backend, "probe_versions", real)
    monkeypatch.setattr(probing, "_MEMO", {})
    assert hardware.probe(dtypes=("float32",))["id"] == first["id"]  # a hit, nothing measured


def test_the_shared_cache_keeps_the_newest_software_keys_per_host():
    info = {"host": "h", "device_kind": "cpu"}
    cache = {f"k{i}": {**info, "updated_epoch_s": float(i), "measurements": []}
             for i in range(hardware.KEEP_SOFTWARE_KEYS + 3)}
    cache["other"] = {"host": "elsewhere", "device_kind": "cpu", "updated_epoch_s": 0.0, "measurements": []}
    kept = probe_cache.keep_recent(cache, info)
    mine = sorted(k for k in kept if k != "other")
    assert "other" in kept and len(mine) == hardware.KEEP_SOFTWARE_KEYS
    assert "k0" not in kept and f"k{hardware.KEEP_SOFTWARE_KEYS + 2}" in kept


_CONCURRENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from paradnn import backends, hardware
    from paradnn.hardware import probe_cache
    probe_cache.CACHE_PATH = Path(sys.argv[1])
    log = Path(sys.argv[2])
    def factory(dtype, n):
        def call():
            with open(log, "a") as f:
                f.write("x")
            time.sleep(0.05)
        return call
    backends.get("jax").gemm_methods = lambda platform: {"lib": factory}
    print(hardware.probe(dtypes=("float32",))["measured_utc"])
""")


@pytest.mark.slow
def test_two_probes_at_once_measure_once(tmp_path):
    cache, log = tmp_path / "probe.json", tmp_path / "calls.log"
    # Quiet even on a busy host, and every pair measured: its sleeps take the same time at every
    # size, which the budget's N^3 prediction (from the suite's 2 s budget) would cut short.
    env = {**os.environ, "PARADNN_PROBE_MAX_CV": "5", "PARADNN_PROBE_MAX_LOAD": "1000", "PARADNN_PROBE_BUDGET_S": "40"}
    procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT, str(cache), str(log)],
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1]  # the second one read the first one's result
    # One measurement: per dtype and size a warm call + the timed repetitions, then the winner's
    # spread.
    calls = sum(len(hardware.probe_plan("cpu")["gemm_sizes"][d]) * (1 + probing._PROBE_REPS) + probing._SPREAD_REPS
                for d in hardware.PROBE_DTYPES)
    assert len(log.read_text()) == calls


def test_an_entry_of_the_earlier_cache_format_keeps_one_id_and_is_never_the_denominator(cache):
    """A cache of the earlier format (one result per key, judged quiet by its spread alone) read
    twice names the same measurement with the same id, and it is not used: on the project's
    host such an entry, measured while a neighbour kept the cores busy, read 42 GFLOP/s against
    about 150 quiet, and every utilization divided by it was above 1."""
    info = {"host": "h", "device_platform": "cpu", "device_kind": "cpu", "cpu_model": "x"}
    key = probing._probe_key(info, {"jax": "1"})
    old = {**info, "peak_flops": {"float32": 4.2e10}, "spread": {"float32": 0.02},
           "measured_utc": "2026-11-24T21:52:32Z"}
    cache.write_text(json.dumps({key: old}))
    first = probe_cache.entries_of(probe_cache.read_cache(), key)
    second = probe_cache.entries_of(probe_cache.read_cache(), key)
    assert [e["id"] for e in first] == [e["id"] for e in second]
    assert first[0]["contended"] is True and hardware.UNCHECKED_LOAD in first[0]["contended_reasons"]
    assert hardware.best_quiet(first, "float32") is None
    # Converted into the list format (an earlier version wrote it back so): still not used.
    cache.write_text(json.dumps({key: {"measurements": [{**old, "id": "abc", "contended": False,
                                                         "contended_reasons": []}]}}))
    [converted] = probe_cache.entries_of(probe_cache.read_cache(), key)
    assert converted["id"] == "abc" and converted["contended"] is True


def test_a_noisy_reduced_precision_is_not_used_for_itself_only(cache, monkeypatch):
    """float16's GEMMs (emulated on most CPUs) vary by about 10% on a quiet host: a wide float16
    spread keeps that dtype's utilization off this probe, not float32's, and a second probe
    within the retry window does not measure again."""
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "0.2")
    jitter = itertools.cycle([0.01, 0.05])

    def factory(dtype, n):
        if dtype == "float16":
            return lambda: time.sleep(next(jitter))
        return lambda: time.sleep(0.03)

    _methods(monkeypatch, {"lib": factory})
    result = hardware.probe(dtypes=("float32", "float16"))
    if result["spread"]["float32"] > 0.2:
        pytest.skip("a 30 ms sleep varied by more than 20% (a very busy host): not this test's subject")
    # (bfloat16's sleeps may jitter on a busy host too: only float16's spread is this test's.)
    assert result["contended"] is False and "float16" in result["noisy_dtypes"]
    assert "float32" not in result["noisy_dtypes"]
    assert hardware.peaks("cpu", "float32", "cpu").id == result["id"]
    # float16's own probe is not its denominator: the nominal peak is, and says why.
    nominal16 = hardware.peaks("cpu", "float16", "cpu")
    assert nominal16.source in ("nominal", "none") and "float16 spread" in nominal16.method
    again = hardware.probe(dtypes=("float32", "float16"))
    assert again["id"] == result["id"] and len(_measurements(cache)) == 1


# -- probe sizes per platform, the ceiling, and probes faster than their bounds ---------------

def test_accelerators_get_gemms_and_arrays_large_enough_for_their_plateau():
    """A CPU's sizes (N 1024-3072, 256 MiB) are seconds on a 2-core host; an H100 needs N 8192
    for its bfloat16 plateau (about 790-800 of its 989 TFLOP/s dense) and an array far beyond
    its 50 MiB L2."""
    cpu = hardware.probe_plan("cpu")
    for platform in ("gpu", "tpu", "cuda", "rocm"):
        plan = hardware.probe_plan(platform)
        assert plan is not cpu
        for dtype in hardware.PROBE_DTYPES:
            sizes = plan["gemm_sizes"][dtype]
            assert 8192 in sizes and min(sizes) >= 4096, (platform, dtype)
            assert max(sizes) > max(cpu["gemm_sizes"][dtype])
        assert plan["bandwidth_mib"] >= 10 * 50  # ten times the H100's L2
        assert plan["bandwidth_calls"] > 1
    assert max(cpu["gemm_sizes"]["float32"]) <= 3072 and cpu["bandwidth_calls"] == 1


def _fake_h100(monkeypatch, gemm_s=0.03, bandwidth=2.9e12):
    """Make the probe's framework look like an H100 SXM: JAX's device info says so, its GEMMs
    sleep ``gemm_s`` and record their sizes, its bandwidth loop records its arguments."""
    jax_backend = backends.get("jax")
    real_info = jax_backend.device_info()
    monkeypatch.setattr(jax_backend, "device_info", lambda: {
        **real_info, "device_platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3"})
    sizes, streams = [], []

    def factory(dtype, n):
        sizes.append((dtype, n))

        def call():
            time.sleep(gemm_s)
        call.matmuls = 8  # queued per call, as the JAX backend's accelerator method does
        return call

    _methods(monkeypatch, {"xla-stock": factory})
    monkeypatch.setattr(jax_backend, "measure_bandwidth", lambda megabytes, calls: (
        streams.append((megabytes, calls)) or {"bytes_per_sec": bandwidth, "cv": 0.01, "method": "fake"}))
    return sizes, streams


def test_a_gpu_probe_uses_the_accelerator_sizes_and_gives_the_ceiling_beside_the_spec_peak(cache, monkeypatch):
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    sizes, streams = _fake_h100(monkeypatch)
    result = hardware.probe()
    plan = hardware.probe_plan("gpu")
    assert {n for d, n in sizes} == set(plan["gemm_sizes"]["bfloat16"]) == {4096, 8192}
    assert streams == [(plan["bandwidth_mib"], plan["bandwidth_calls"])]
    # The FLOPs of a call are its queued matmuls': 8 x 2 N^3 in about 30 ms (293 TFLOP/s).
    assert result["peak_flops"]["bfloat16"] == pytest.approx(8 * 2 * 8192**3 / 0.03, rel=0.3)
    assert result["spec"]["peak_flops"]["bfloat16"] == hardware.PEAKS["h100 sxm"]["flops"]["bfloat16"]
    assert result["above_spec"] == {} and result["nominal_flops"] is None
    peak = hardware.peaks("NVIDIA H100 80GB HBM3", "bfloat16", "gpu")
    ceiling = hardware.ceiling("gpu", "bfloat16", "jax", peak)
    assert (peak.source, peak.flops, peak.id) == ("spec", 989e12, "spec:h100 sxm")
    assert (ceiling.source, ceiling.id, ceiling.flops) == ("measured", result["id"], result["peak_flops"]["bfloat16"])
    assert ceiling.bytes_per_sec == 2.9e12


def test_a_busy_host_cpu_does_not_make_a_gpu_probe_contended(cache, monkeypatch):
    """A GPU's GEMMs run on the device: other processes' CPU load (a busy host's data loaders)
    is recorded but judges nothing, where on a CPU it makes the probe contended."""
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    monkeypatch.setenv("PARADNN_PROBE_MAX_LOAD", "0.3")
    _fake_h100(monkeypatch)
    result = _probe_beside_a_spinner()
    assert result["host_load"]["other_busy_cores"] > 0.3
    assert result["contended"] is False and result["in_use"] is True


def test_a_gpu_probe_faster_than_the_datasheet_flags_the_table_entry(cache, monkeypatch):
    """A 'measured' 1.1 PFLOP/s bfloat16 and 3.6 TB/s on an H100 SXM (989 TFLOP/s, 3.35 TB/s
    in the table): the entry is wrong for this device. The measurement stays the ceiling."""
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    _fake_h100(monkeypatch, gemm_s=8 * 2 * 8192**3 / 1.1e15, bandwidth=3.6e12)
    result = hardware.probe()
    assert {"bfloat16", "float16", "float32", "bandwidth"} <= set(result["above_spec"])
    assert "NVIDIA H100 80GB HBM3" in result["above_spec"]["bfloat16"]
    assert result["contended"] is False and result["in_use"] is True
    assert hardware.ceiling("gpu", "bfloat16", "jax").id == result["id"]


def test_a_probe_above_the_nominal_clock_is_used_and_noted(cache, monkeypatch):
    """A quiet 2-core cloud VM reporting a 2.45 GHz base clock measured 187 GFLOP/s float32
    against a nominal 157: boost clocks exceed the clock the host reports, so the nominal bounds
    nothing. Such a probe is stored with a note (above_nominal) and used."""
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    n = max(hardware.probe_plan("cpu")["gemm_sizes"]["float32"])
    _methods(monkeypatch, {"lib": _sleeper(0.02)})
    rate = 2 * n**3 / 0.02
    base_clock = {"float32": rate / 1.2, "bfloat16": rate / 1.2 * 2, "float16": rate / 1.2}
    monkeypatch.setattr(host, "nominal_cpu_flops", lambda: (base_clock, "2 cores x 2.45 GHz ..."))
    result = hardware.probe()
    assert "float32" in result["above_nominal"] and "boost" in result["above_nominal"]["float32"]
    assert result["impossible"] == {} and result["contended"] is False and result["in_use"] is True
    peak = hardware.peaks("cpu", "float32", "cpu")
    assert peak.source == "measured" and peak.flops == pytest.approx(result["peak_flops"]["float32"])


def test_a_probe_that_used_more_cpus_than_allowed_is_never_used(cache, monkeypatch):
    """The pinning bug of an earlier session: a worker whose main thread alone was pinned to
    one CPU probed 199 GFLOP/s while its BLAS threads kept both cores busy. The probe's own CPU
    time over its GEMMs' wall time says so (2 CPUs used, 1 allowed): stored, flagged, never a
    denominator; such a host then divides by its nominal peak. Entries cached before the check
    (no CPU time) are judged possible."""
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    _methods(monkeypatch, {"lib": _sleeper(0.02)})
    measured = probing._measure

    def pinned_wrong(*args, **kwargs):
        out = measured(*args, **kwargs)
        return {**out, "gemm_cores_used": 1.98, "gemm_cores_allowed": 1.0,
                "impossible": hardware.impossible({"gemm_cores_used": 1.98, "gemm_cores_allowed": 1.0})}

    monkeypatch.setattr(probing, "_measure", pinned_wrong)
    result = hardware.probe()
    assert "cores" in result["impossible"] and "1.98" in result["impossible"]["cores"]
    assert result["contended"] is False and result["in_use"] is False
    for dtype in hardware.PROBE_DTYPES:  # every dtype: the probe ran on CPUs it may not use
        assert not hardware.usable(result, dtype)
        assert any("BLAS threads" in why for why in hardware.unusable_reasons(result, dtype))
    peak = hardware.peaks("cpu", "float32", "cpu")
    assert peak.source in ("nominal", "none") and "BLAS threads" in peak.method
    old = {k: v for k, v in result.items() if k not in ("gemm_cores_used", "gemm_cores_allowed")}
    assert hardware.impossible(old) == {} and hardware.best_quiet([old], "float32") is old
    within = {**old, "gemm_cores_used": 1.05, "gemm_cores_allowed": 1.0}
    assert hardware.impossible(within) == {}


def test_a_host_without_a_quiet_probe_divides_by_its_nominal_peak(cache, monkeypatch):
    """Every run gets a utilization: where only contended probes are on record, a CPU divides by
    its nominal peak (peak_source nominal, the figures named), with the best bandwidth of the
    loaded probes as a lower-bound roof (peak_bytes_source says so), and no ceiling."""
    _methods(monkeypatch, {"lib": _sleeper(0.02)})
    monkeypatch.setenv("PARADNN_PROBE_MAX_LOAD", "0.0001")  # any neighbour at all is contention
    monkeypatch.setattr(host, "busy_cores_since", lambda start: ((0.0, 0, 0, 0.0), 1.0))
    monkeypatch.setattr(host, "nominal_cpu_flops", lambda: ({"float32": 3e11, "bfloat16": 6e11,
                                                                 "float16": 3e11}, "2 cores x 2.60 GHz ..."))
    result = hardware.probe()
    assert result["contended"] is True
    peak = hardware.peaks("cpu", "float32", "cpu")
    assert (peak.source, peak.flops) == ("nominal", 3e11) and peak.method.startswith("2 cores x 2.60 GHz")
    assert peak.id.startswith("nominal:") and peak.bytes_source == "measured under load"
    assert peak.bytes_per_sec == pytest.approx(result["peak_bytes_per_sec"])
    assert hardware.ceiling("cpu", "float32", "jax", peak).flops is None
    metrics = hardware.utilization_metrics(peak, hardware.ceiling("cpu", "float32", "jax", peak), 1.5e11, 1.5e11)
    assert metrics["peak_source"] == "nominal" and metrics["peak_bytes_source"] == "measured under load"
    assert metrics["model_flops_utilization"] == pytest.approx(0.5)


def test_contention_is_judged_by_load_and_the_gemm_spread_not_the_bandwidth_loop():
    """On a cloud host other tenants share the memory bandwidth however quiet this host is (a
    quiet VM's bandwidth loop spread 27%): a wide bandwidth spread judges nothing; the float32
    GEMM's spread or other processes' cores do. Cached entries are judged again by this rule."""
    quiet = {"device_platform": "cpu", "spread": {"float32": 0.01, "bandwidth": 0.27},
             "host_load": {"other_busy_cores": 0.01}, "max_cv": 0.1, "max_other_cores": 0.5}
    assert hardware.contention_reasons(quiet) == []
    assert hardware.contention_reasons({**quiet, "spread": {"float32": 0.2}}) == ["float32 spread cv 20% > 10%"]
    busy = {**quiet, "host_load": {"other_busy_cores": 1.0}}
    assert hardware.contention_reasons(busy) == ["other processes kept 1.00 CPU cores busy > 0.5"]
    key = "k"
    cached = {key: {"measurements": [{**quiet, "id": "a", "peak_flops": {"float32": 1e11},
                                      "contended": True, "contended_reasons": ["bandwidth spread cv 27% > 10%"]}]}}
    [entry] = probe_cache.entries_of(cached, key)
    assert entry["contended"] is False and hardware.usable(entry, "float32")


def test_a_queued_gemm_call_counts_each_matmul():
    def factory(matmuls):
        def make(dtype, n):
            def call():
                time.sleep(0.02)
            call.matmuls = matmuls
            return call
        return make

    one = hardware.measure_gemm("float32", {"m": factory(1)}, sizes=(512,))["flops"]
    four = hardware.measure_gemm("float32", {"m": factory(4)}, sizes=(512,))["flops"]
    assert four / one == pytest.approx(4, rel=0.3)


@pytest.mark.slow
def test_another_frameworks_ceiling_comes_from_a_child_probe(tmp_path, monkeypatch):
    """On an accelerator a PyTorch run gets the ceiling from ``paradnn probe --json`` in a child
    process (JAX in its own process would reserve the device memory): the child's answer, read
    back, is the probe on record, once per process. A child that saw another device than the
    run's (here the CPU, for a run that says it is on a GPU: JAX without its CUDA plugin) gives
    no ceiling, and neither does a child that failed, remembered so that it is not started
    again for every config; neither fails the run."""
    monkeypatch.setenv("PARADNN_CACHE", str(tmp_path))
    monkeypatch.setenv("PARADNN_PROBE_BUDGET_S", "2")
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "10")
    monkeypatch.setattr(selection, "_CHILD_CEILINGS", {})
    ceiling = selection._child_ceiling("float32", "cpu")
    assert ceiling.source == "measured" and ceiling.flops > 0 and ceiling.bytes_per_sec > 0
    [entry] = _measurements(tmp_path / "probe.json")
    assert ceiling.id == entry["id"] and ceiling.flops == entry["peak_flops"]["float32"]
    assert selection._child_ceiling("bfloat16", "cpu").id == entry["id"]
    # The same answer for a run on a GPU: the child probed the CPU, so no ceiling, with why.
    spec = hardware.Peak(989e12, 3.35e12, "spec", "vendor table: NVIDIA H100 80GB HBM3", "spec:h100 sxm", None, 0.0)
    wrong = hardware.ceiling("gpu", "bfloat16", "torch", spec)
    assert wrong.flops is None and wrong.source == "none" and "another device (cpu" in wrong.method
    unknown = hardware.peaks("NVIDIA GeForce RTX 4090", "float32", "gpu", framework="torch")
    assert unknown.source == "none" and "another device" in unknown.method
    assert len(_measurements(tmp_path / "probe.json")) == 1  # the child ran once

    # A child that fails (a bad probe setting: it exits 2) is remembered, and no run fails.
    monkeypatch.setenv("PARADNN_PROBE_BUDGET_S", "-1")
    monkeypatch.setenv("PARADNN_CACHE", str(tmp_path / "empty"))  # nothing on record: it must measure
    monkeypatch.setattr(selection, "_CHILD_CEILINGS", {})
    failed = hardware.ceiling("gpu", "bfloat16", "torch", spec)
    assert failed.source == "none" and "exited with status 2" in failed.method
    assert "exited with status 2" in selection._CHILD_CEILINGS["error"]
    assert "exited with status 2" in hardware.peaks("NVIDIA GeForce RTX 4090", "float32", "gpu",
                                                     framework="torch").method


def test_a_float32_ceiling_bounds_only_runs_at_the_probes_precision():
    """A TF32 probe bounds a TF32 run (and a run whose fastest products are TF32), not one at
    full float32 (it would read low) nor a reduced-dtype run's float32 question; a probe whose
    precision is unknown (an earlier version's) bounds every run, as before."""
    tf32 = hardware.Peak(4e14, 3e12, "measured", "m", "p1", "t", 0.01, "tf32")
    assert hardware.at_precision(tf32, "float32", "tf32") is tf32
    assert hardware.at_precision(tf32, "float32", "matmul highest, conv tf32") is tf32
    assert hardware.at_precision(tf32, "bfloat16", "bfloat16") is tf32
    assert hardware.at_precision(tf32, "float32", None) is tf32
    none = hardware.at_precision(tf32, "float32", "highest")
    assert none.flops is None and none.source == "none" and "tf32" in none.method and "highest" in none.method
    unknown = tf32._replace(precision=None)
    assert hardware.at_precision(unknown, "float32", "highest") is unknown


def test_a_gpu_run_at_full_float32_gets_no_tf32_ceiling(cache, monkeypatch):
    """On a GPU whose probe ran float32 GEMMs at TF32, a run measured at full float32 divides by
    the non-tensor FP32 spec rate and gets no ceiling (not a TF32 one that would raise
    peak_below_ceiling); a TF32 run gets the probe."""
    from paradnn.record import record_warnings

    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    _fake_h100(monkeypatch)
    monkeypatch.setattr(backends.get("jax"), "probe_precision", lambda: "tf32", raising=False)
    result = hardware.probe()
    assert result["float32_precision"] == "tf32"
    kind = "NVIDIA H100 80GB HBM3"
    full = hardware.peaks(kind, "float32", "gpu", "highest")
    assert full.flops == hardware.PEAKS["h100 sxm"]["float32_full"]
    assert hardware.ceiling("gpu", "float32", "jax", full, "highest").flops is None
    tf32 = hardware.ceiling("gpu", "float32", "jax", hardware.peaks(kind, "float32", "gpu", "tf32"), "tf32")
    assert tf32.id == result["id"] and tf32.precision == "tf32" and "precision tf32" in tf32.method
    # With the TF32 probe as the ceiling of a full-float32 run, the physics check would fire:
    # the reason the ceiling is withheld.
    metrics = hardware.utilization_metrics(full, tf32, 1e13, 1e13)
    assert "peak_below_ceiling" in record_warnings(metrics)
