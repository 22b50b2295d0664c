"""Scaling: efficiency, overhead share and the Amdahl fit on planted data; one tiny real run."""

import io
import json
import os
import subprocess

import numpy as np
import pandas as pd
import pytest

import paradnn
from paradnn.errors import SpecError
from paradnn.experiments.scaling import amdahl_fit, amdahl_speedup, efficiency, summarize


def test_efficiency_on_planted_throughputs():
    eff = efficiency([1, 2, 4, 8], [100.0, 190.0, 360.0, 640.0])
    np.testing.assert_allclose(eff, [1.0, 0.95, 0.9, 0.8], rtol=1e-12)
    with pytest.raises(SpecError, match="devices"):
        efficiency([2, 4], [1.0, 2.0])


def test_amdahl_fit_recovers_the_planted_serial_fraction():
    d = np.array([1, 2, 4, 8, 16])
    for s in (0.0, 0.05, 0.3, 1.0):
        t = 2.0 * (s + (1 - s) / d)  # step times of a 2 s single-device step
        assert amdahl_fit(d, t) == pytest.approx(s, abs=1e-12)
        np.testing.assert_allclose(amdahl_speedup(d, s), t[0] / t, rtol=1e-12)
    # Noisy data: least squares lands near the truth; a slowdown clips to 1.
    rng = np.random.default_rng(0)
    t = (0.1 + 0.9 / d) * (1 + rng.normal(0, 0.01, d.size))
    t = t / t[0]
    assert amdahl_fit(d, t) == pytest.approx(0.1, abs=0.02)
    assert amdahl_fit([1, 2], [1.0, 3.0]) == 1.0
    assert np.isnan(amdahl_fit([1], [1.0]))


def test_summarize_planted_weak_and_strong():
    points = pd.DataFrame({
        "mode": ["weak", "weak", "strong", "strong"],
        "devices": [1, 4, 1, 4],
        "batch": [32, 128, 128, 128],
        "step_time_s": [1.0, 1.25, 4.0, 1.25],
        "compute_step_time_s": [1.0, 1.0, 4.0, 1.0],
    })
    table, serial = summarize(points)
    weak = table[table["mode"] == "weak"].set_index("devices")
    strong = table[table["mode"] == "strong"].set_index("devices")
    assert weak.loc[4, "examples_per_sec"] == pytest.approx(128 / 1.25)
    assert weak.loc[4, "per_device_examples_per_sec"] == pytest.approx(128 / 1.25 / 4)
    assert weak.loc[4, "scaling_efficiency"] == pytest.approx(0.8)
    assert weak.loc[4, "overhead_share"] == pytest.approx(0.2)
    assert strong.loc[4, "speedup"] == pytest.approx(3.2)
    assert strong.loc[4, "scaling_efficiency"] == pytest.approx(0.8)
    # t(4)/t(1) = 1.25/4 = s + (1-s)/4  ->  s = (0.3125 - 0.25) / 0.75
    assert serial == pytest.approx(0.0625 / 0.75)


def test_scaling_figure_renders_with_linear_reference():
    from paradnn import plots

    table = pd.DataFrame({"mode": ["weak"] * 3, "devices": [1, 2, 4], "speedup": [1.0, 1.9, 3.5],
                          "simulated_devices": [False] * 3})
    fig = plots.scaling(table, serial_fraction=0.05)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0] == "linear (ideal)" and "weak scaling" in labels and any("Amdahl" in x for x in labels)
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [1, 2, 4])
    assert "[count]" in ax.get_xlabel() and "simulated" not in ax.get_title()


@pytest.mark.slow
def test_real_scaling_run_on_forced_cpu_devices(paradnn_cmd, tmp_path):
    db = tmp_path / "s.db"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [*paradnn_cmd, "scaling", "fc", "--layers", "1", "--nodes", "16", "--input", "8", "--output", "4",
         "--batch", "4", "--devices", "1,2", "--simulate-devices", "--steps-per-call", "2", "--warmup-s", "0",
         "--min-calls", "6", "--max-calls", "6", "--time-budget-s", "0.2", "--json", "--store", str(db)],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["simulated_devices"] is True
    table = pd.DataFrame(out["table"])
    assert sorted(zip(table["mode"], table["devices"], table["batch"])) == [
        ("strong", 1, 8), ("strong", 2, 8), ("weak", 1, 4), ("weak", 2, 8)]
    for mode, g in table.groupby("mode"):
        g = g.set_index("devices")
        assert g.loc[2, "scaling_efficiency"] == pytest.approx(
            g.loc[2, "examples_per_sec"] / (2 * g.loc[1, "examples_per_sec"]))
        assert g.loc[1, "overhead_share"] == 0.0
    assert 0.0 <= out["serial_fraction"] <= 1.0
    df = paradnn.load(db)
    # Three distinct workloads measured: (batch 4, 1 device) serves weak d=1 and is the
    # compute-only variant of both d=2 points; (8, 2) serves weak and strong; (8, 1) strong d=1.
    assert len(df) == 3 and df["simulated_devices"].astype(bool).all() and (df["status"] == "ok").all()
    modes = dict(zip(zip(df["batch"], df["devices"]), df["scaling_modes"]))
    assert modes == {(4, 1): "weak", (8, 2): "weak,strong", (8, 1): "strong"}
    shared = df[(df["batch"] == 8) & (df["devices"] == 2)].iloc[0]
    t = table.set_index(["mode", "devices"])
    assert shared["weak_scaling_efficiency"] == pytest.approx(t.loc[("weak", 2), "scaling_efficiency"])
    assert shared["strong_scaling_efficiency"] == pytest.approx(t.loc[("strong", 2), "scaling_efficiency"])


def test_scaling_cli_needs_the_baseline(paradnn_cmd):
    proc = subprocess.run([*paradnn_cmd, "scaling", "fc", "--layers", "1", "--nodes", "8", "--input", "4",
                           "--output", "2", "--devices", "2,x"], capture_output=True, text=True)
    assert proc.returncode == 2 and "devices" in proc.stderr and "Traceback" not in proc.stderr


def test_summarize_skips_a_mode_without_its_baseline():
    points = pd.DataFrame({"mode": ["weak", "strong"], "devices": [1, 2], "batch": [4, 8],
                           "step_time_s": [1.0, 1.0], "compute_step_time_s": [1.0, 1.0]})
    table, serial = summarize(points)
    assert list(table["mode"]) == ["weak"] and np.isnan(serial)


def test_failed_points_are_kept_as_rows_and_exit_1(paradnn_cmd, tmp_path):
    # A 1 KB memory limit makes every run an oom found before compiling: the rows are stored,
    # the points are listed as left out, nothing is lost.
    db = tmp_path / "f.db"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [*paradnn_cmd, "scaling", "fc", "--layers", "1", "--nodes", "16", "--input", "8", "--output", "4",
         "--batch", "4", "--devices", "1,2", "--simulate-devices", "--memory-limit", "1KB", "--json",
         "--store", str(db)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["table"] == [] and len(out["failed"]) == 4
    assert all("oom" in line for line in out["failed"])
    df = paradnn.load(db)
    assert len(df) == 3 and set(df["status"]) == {"oom"}
