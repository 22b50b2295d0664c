"""Collectives: NCCL-tests bus-bandwidth normalization, size parsing, a real run on forced CPU devices."""

import io
import json
import os
import subprocess

import pandas as pd
import pytest

import paradnn
from paradnn.experiments.collectives import BUS_FACTORS, bus_bandwidth, parse_sizes
from paradnn.errors import SpecError


def test_bus_bandwidth_factors_exact_on_planted_numbers():
    assert bus_bandwidth("all_reduce", 100.0, 4) == 150.0  # 2(n-1)/n = 1.5
    assert bus_bandwidth("all_reduce", 100.0, 2) == 100.0
    assert bus_bandwidth("all_gather", 100.0, 4) == 75.0  # (n-1)/n
    assert bus_bandwidth("reduce_scatter", 80.0, 8) == 70.0
    assert bus_bandwidth("broadcast", 100.0, 8) == 100.0
    with pytest.raises(SpecError, match="collective"):
        bus_bandwidth("all_to_all", 1.0, 2)


def test_parse_sizes_ranges_lists_and_bad_input():
    assert parse_sizes("1KiB..8KiB") == [1024, 2048, 4096, 8192]
    big = parse_sizes("1KB..1GB")
    assert big[0] == 1000 and big[-1] <= 10**9 < big[-1] * 2 and len(big) == 20
    assert parse_sizes("4KB,1KB") == [1000, 4000]
    for bad in ("1KB..", "2KB..1KB", "1 parsec", "0..1KB"):
        with pytest.raises(SpecError, match="sizes"):
            parse_sizes(bad)


def test_bad_device_counts_exit_2(paradnn_cmd):
    proc = subprocess.run([*paradnn_cmd, "collectives", "--devices", "1"], capture_output=True, text=True)
    assert proc.returncode == 2 and "devices" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_real_run_on_forced_cpu_devices(paradnn_cmd, tmp_path):
    db = tmp_path / "c.db"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [*paradnn_cmd, "collectives", "--devices", "2,4", "--sizes", "4KiB", "--simulate-devices",
         "--steps-per-call", "2", "--warmup-s", "0", "--min-calls", "6", "--max-calls", "6",
         "--time-budget-s", "0.2", "--json", "--store", str(db)],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["simulated_devices"] is True
    rows = out["rows"]
    assert sorted((r["collective"], r["devices"]) for r in rows) == sorted(
        (c, n) for c in BUS_FACTORS for n in (2, 4))
    for r in rows:
        assert r["status"] == "ok" and r["simulated_devices"] is True and r["family"] == "collective"
        # 4 KiB of float32, divisible by both device counts: nothing rounded away.
        assert r["size_bytes"] == 4096
        assert r["algbw_bytes_per_sec"] == pytest.approx(4096 / r["step_time_s"], rel=1e-12)
        assert r["busbw_bytes_per_sec"] == pytest.approx(
            r["algbw_bytes_per_sec"] * BUS_FACTORS[r["collective"]](r["devices"]), rel=1e-12)
        assert "xla_force_host_platform_device_count=4" in r["xla_flags"]
    df = paradnn.load(db)
    assert len(df) == 8 and set(df["family"]) == {"collective"}


def test_bandwidth_figure_renders():
    from paradnn import plots

    rows = pd.DataFrame({"collective": ["all_reduce"] * 3 + ["all_gather"] * 3, "devices": [2] * 3 + [4] * 3,
                         "size_bytes": [1024, 2048, 4096] * 2, "status": "ok",
                         "busbw_bytes_per_sec": [1e6, 2e6, 3e6, 1e6, 1.5e6, 2.5e6],
                         "simulated_devices": True})
    fig = plots.bandwidth(rows)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    ax = fig.axes[0]
    assert "[B]" in ax.get_xlabel() and "[B/s]" in ax.get_ylabel()
    assert len(ax.get_lines()) == 2 and "simulated" in ax.get_title()
