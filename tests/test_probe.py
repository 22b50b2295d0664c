"""The peak probe's cache rules: best of several methods, a contended result is never cached,
two probes at once measure once, and a result expires when the software versions change.

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
    monkeypatch.setattr(hardware, "CACHE_PATH", path)
    monkeypatch.setattr(hardware, "_MEMO", {})
    monkeypatch.delenv("PARADNN_PROBE_MAX_CV", raising=False)
    return path


def test_best_method_wins_and_quiet_result_is_cached(cache, monkeypatch):
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")  # the real bandwidth probe on a busy host
    _methods(monkeypatch, {"slow": _sleeper(0.004), "fast": _sleeper(0.002)})
    result = hardware.probe(dtypes=("float32",))
    assert result["best_method"]["float32"] == "fast"
    n = max(hardware._PROBE_SIZES["float32"])
    assert result["peak_flops"]["float32"] == pytest.approx(2 * n**3 / 0.002, rel=0.3)
    assert result["gemm"]["float32"]["slow"] < result["gemm"]["float32"]["fast"]
    assert result["contended"] is False
    assert list(json.loads(cache.read_text()).values())[0]["peak_flops"] == result["peak_flops"]
    peak = hardware.peaks("cpu", "float32", "cpu")
    assert peak.source == "measured" and "fast" in peak.method and peak.flops == result["peak_flops"]["float32"]


def test_contended_result_is_not_cached(cache, monkeypatch):
    # Call times alternating 2 ms / 6 ms: a coefficient of variation of about 0.5.
    _methods(monkeypatch, {"noisy": _sleeper([0.002, 0.006])})
    result = hardware.probe(dtypes=("float32",))
    assert result["contended"] is True and result["spread"]["float32"] > hardware.PROBE_MAX_CV
    assert not cache.exists() or json.loads(cache.read_text()) == {}
    assert "not cached" in hardware.peaks("cpu", "float32", "cpu").method
    # A higher threshold (a shared CI host) accepts it.
    monkeypatch.setattr(hardware, "_MEMO", {})
    monkeypatch.setenv("PARADNN_PROBE_MAX_CV", "5")
    assert hardware.probe(dtypes=("float32",))["contended"] is False
    assert cache.exists()


def test_reduced_precision_peak_is_at_least_float32(cache, monkeypatch):
    fast32 = {"float32": 0.001, "bfloat16": 0.004}

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
    monkeypatch.setattr(hardware, "_MEMO", {})
    second = hardware.probe(dtypes=("float32",))
    assert second["versions"]["jaxlib"] == "99.0"
    entries = json.loads(cache.read_text())
    assert len(entries) == 1 and list(entries.values())[0]["versions"]["jaxlib"] == "99.0"


_CONCURRENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from paradnn import backends, hardware
    hardware.CACHE_PATH = Path(sys.argv[1])
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
    env = {**os.environ, "PARADNN_PROBE_MAX_CV": "5"}  # cached even on a busy host
    procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT, str(cache), str(log)],
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1]  # the second one read the first one's result
    sizes = len(hardware._PROBE_SIZES["float32"])
    # One measurement: per size a warm call + the timed repetitions, then the winner's spread.
    assert len(log.read_text()) == sizes * (1 + hardware._PROBE_REPS) + hardware._SPREAD_REPS
