"""Host CPU utilization (/proc/stat), device busy fraction from profiler traces, and the meters
window around a real compiled training step."""

import gzip
import json
import os
import time

import jax
import numpy as np
import pytest

import paradnn
from paradnn import meters
from paradnn.backends.jax import step as wl
from paradnn.hostutil import HostWindow, device_busy_fraction, read_proc_stat
from paradnn.record import METRICS
from paradnn.workload import Workload

STAT = """cpu  30 0 10 60 0 0 0 0 0 0
cpu0 {a} 0 0 {ai} 0 0 0 0 0 0
cpu1 {b} 0 0 {bi} 0 0 0 0 0 0
intr 12345
ctxt 999
"""


def test_per_core_utilization_from_proc_stat_deltas(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(STAT.format(a=100, ai=100, b=50, bi=150))
    assert read_proc_stat(stat) == {"cpu0": (100, 200), "cpu1": (50, 200)}
    w = HostWindow(stat)
    w.start()
    # cpu0: 75 busy of 100 ticks; cpu1: 10 busy of 100 ticks.
    stat.write_text(STAT.format(a=175, ai=125, b=60, bi=240))
    m = w.stop().metrics()
    assert m["host_cpu_utilization_per_core"] == "0.750,0.100"
    assert m["host_cpu_utilization"] == pytest.approx(0.425)
    assert m["process_cpu_s"] >= 0


def test_unreadable_stat_is_unavailable(tmp_path):
    w = HostWindow(tmp_path / "absent")
    w.start()
    r = w.stop()
    assert r.per_core is None and "not readable" in r.note
    assert r.metrics()["host_cpu_utilization"] is None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc/stat")
def test_busy_loop_shows_in_process_and_host_time():
    w = HostWindow()
    w.start()
    end = time.perf_counter() + 0.3
    x = 0
    while time.perf_counter() < end:
        x += 1
    m = w.stop().metrics()
    # This thread spun for 0.3 s of wall time; on a contended host it gets less of a core, but
    # at least one clock tick (10 ms) and at most the wall time on every core.
    assert 0.01 <= m["process_cpu_s"] <= 0.3 * os.cpu_count() + 0.05
    assert 0 < m["host_cpu_utilization"] <= 1
    assert len(m["host_cpu_utilization_per_core"].split(",")) == os.cpu_count()


def _trace(tmp_path, events):
    d = tmp_path / "plugins" / "profile" / "2026_01_01"
    d.mkdir(parents=True)
    with gzip.open(d / "host.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": events}, f)
    return tmp_path


def test_device_busy_fraction_is_the_union_of_stream_kernels(tmp_path):
    meta = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "Stream #7(compute)"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 8, "args": {"name": "Stream #8(copy)"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 9, "args": {"name": "XLA Modules"}},
    ]
    kernels = [  # microseconds: [0,100) and [50,150) overlap -> 150; [300,400) -> 100; span 0..1000
        {"ph": "X", "pid": 1, "tid": 7, "ts": 0, "dur": 100},
        {"ph": "X", "pid": 1, "tid": 8, "ts": 50, "dur": 100},
        {"ph": "X", "pid": 1, "tid": 7, "ts": 300, "dur": 100},
        {"ph": "X", "pid": 1, "tid": 7, "ts": 900, "dur": 100},
        {"ph": "X", "pid": 1, "tid": 9, "ts": 0, "dur": 1000},  # the module: spans the gaps
        {"ph": "X", "pid": 2, "tid": 1, "ts": 0, "dur": 1000},  # host thread
    ]
    d = _trace(tmp_path, meta + kernels)
    fraction, note = device_busy_fraction(d)
    assert fraction == pytest.approx(0.35)  # (150 + 100 + 100) / 1000
    assert "2 device stream(s)" in note
    fraction, _ = device_busy_fraction(d, elapsed_s=0.002)  # over a 2 ms window
    assert fraction == pytest.approx(0.175)


def test_device_busy_fraction_on_a_cpu_trace_is_unavailable(tmp_path):
    if jax.default_backend() != "cpu":
        pytest.skip("checks the CPU backend's trace")
    f = jax.jit(lambda x: x @ x)
    x = np.ones((64, 64), np.float32)
    jax.block_until_ready(f(x))
    with jax.profiler.trace(str(tmp_path)):
        jax.block_until_ready(f(x))
    fraction, why = device_busy_fraction(tmp_path)
    assert fraction is None and "no accelerator device events" in why


def test_window_around_a_compiled_step_gives_registered_metrics(tmp_path, tiny_settings):
    # A fake powercap tree whose counter advances by 12 J inside the window, around two real
    # calls of the compiled K-step program (K = 3): 6 steps of 32 examples.
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0")
    (zone / "energy_uj").write_text("1000")
    (zone / "max_energy_range_uj").write_text("262143328850")
    w_ = Workload(paradnn.FC(layers=2, nodes=64, input=100, output=10), 32, "float32", None, 1)
    model = paradnn.backends.jax.models.build(w_.spec)
    opt = model.default_optimizer
    state_shapes, batch_shapes = wl.abstract_inputs(w_, model, opt)
    compiled, _, _ = wl.compile_measured(model, opt, None, state_shapes, batch_shapes, loop="device")
    state, batch = wl.init_inputs(w_, model, opt)
    k = 3
    with meters.window("cpu", jax.devices()[:1], powercap_root=tmp_path, min_window_s=0.0) as w:
        for _ in range(2):
            state, loss = compiled(state, batch, np.int32(k))
            jax.block_until_ready((state, loss))
        (zone / "energy_uj").write_text(str(1000 + 12_000_000))
    m = w.metrics(steps=2 * k, examples=2 * k * 32)
    assert set(m) <= set(METRICS), set(m) - set(METRICS)
    assert m["energy_source"] == "rapl"
    assert m["energy_per_step_j"] == pytest.approx(2.0)
    assert m["energy_per_example_j"] == pytest.approx(12 / 192)
    assert m["power_w"] == pytest.approx(12 / m["meter_window_s"])
    assert m["process_cpu_s"] >= 0 and m["device_busy_fraction"] is None
    assert "CPU backend" in m["device_busy_note"]


def test_may_be_null_names_registered_metrics_with_a_reason_field():
    assert meters.MAY_BE_NULL <= set(METRICS)
    assert {"energy_note", "device_busy_note"} <= set(METRICS) - meters.MAY_BE_NULL


def test_other_processes_cores_are_the_hosts_busy_cores_less_this_process():
    from paradnn.hostutil import HostReading

    # Two cores: 0.75 and 0.5 busy (1.25 cores) over 2 s, 1 s of it this process's CPU time:
    # other processes kept 0.75 of a core busy.
    reading = HostReading([0.75, 0.5], process_cpu_s=1.0, note="", wall_s=2.0)
    assert reading.other_busy_cores == pytest.approx(0.75)
    assert reading.metrics()["host_other_busy_cores"] == pytest.approx(0.75)
    # Never negative (tick rounding), unknown without per-core readings or wall time.
    assert HostReading([0.1, 0.1], 1.0, "", 2.0).other_busy_cores == 0.0
    assert HostReading(None, 1.0, "", 2.0).other_busy_cores is None
    assert HostReading([0.5], 0.1, "", 0.0).other_busy_cores is None


def test_max_other_cores_is_validated_by_name(monkeypatch):
    from paradnn import hostutil
    from paradnn.errors import ParadnnError

    monkeypatch.delenv("PARADNN_PROBE_MAX_LOAD", raising=False)
    assert hostutil.max_other_cores() == hostutil.MAX_OTHER_CORES
    for bad in ("abc", "-1", "0", "nan"):
        monkeypatch.setenv("PARADNN_PROBE_MAX_LOAD", bad)
        with pytest.raises(ParadnnError, match="PARADNN_PROBE_MAX_LOAD.*positive number"):
            hostutil.max_other_cores()


@pytest.mark.slow
def test_a_run_beside_a_spinning_process_is_contended_with_the_figure(monkeypatch, tiny_settings):
    """Another process spinning on a core while a real FC step is timed: the record says how
    many cores other processes kept busy, flags the run contended (a provenance note, not a
    physics warning) and keeps its utilization (its denominator named)."""
    import subprocess
    import sys

    from paradnn.record import warning_kind

    monkeypatch.setenv("PARADNN_PROBE_MAX_LOAD", "0.5")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # the spinner is running before the timed calls begin
        rec = paradnn.run(paradnn.FC(2, 128, 256, 10), batch=32,
                          settings=tiny_settings.replace(time_budget_s=1.5, steps_per_call=None))
    finally:
        spinner.kill()
        spinner.wait()
    m = rec.metrics
    assert rec.status == "ok", rec.error
    assert m["host_other_busy_cores"] >= 0.5 and m["contended"] is True
    assert "contended" in rec.warnings and warning_kind("contended") == "provenance"
    assert m["model_flops_utilization"] is not None and m["peak_source"] in ("measured", "nominal")
