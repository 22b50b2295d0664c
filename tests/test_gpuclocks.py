"""The GPU clock meter (paradnn.gpuclocks): its arithmetic over NVML's counters, the note it
leaves where NVML cannot tell, the record's clocks_limited note, and on an NVIDIA GPU the real
readings."""

from types import SimpleNamespace

import pytest
from helpers import FakeNvmlBase

from paradnn import gpuclocks, meters
from paradnn.record import WARNINGS, record_warnings


class FakeNvml(FakeNvmlBase):
    """The pynvml calls the clock meter makes, for the arithmetic a lent GPU cannot exercise on
    demand (a board at its power limit, a driver without the violation counters)."""

    def __init__(self, violations: bool = True):
        self.violations = violations
        self.now_us = 1_000_000
        self.violation_ns = {(0, 0): 0, (0, 1): 0, (1, 0): 0, (1, 1): 0}  # (device, policy)
        super().__init__()

    def nvmlDeviceGetViolationStatus(self, h, policy):
        if not self.violations:
            raise self.NVMLError("Not Supported")
        return SimpleNamespace(referenceTime=self.now_us, violationTime=self.violation_ns[(h, policy)])

    def nvmlDeviceGetClockInfo(self, h, clock):
        assert clock == gpuclocks.CLOCK_SM
        return (1590, 1755)[h]

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return 1980

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000  # mW


class Dev:
    def __init__(self, i):
        self.id = self.local_hardware_id = i


def test_violation_counters_give_the_share_of_the_window_the_clocks_were_held_down():
    nvml = FakeNvml()
    w = gpuclocks.ClockWindow("gpu", [Dev(0), Dev(1)], nvml=nvml)
    w.start()
    nvml.now_us += 2_000_000  # 2 s of NVML's reference clock
    nvml.violation_ns[(0, 0)] += 1_700_000_000  # device 0 power-limited for 1.7 s
    nvml.violation_ns[(1, 0)] += 400_000_000
    nvml.violation_ns[(1, 1)] += 100_000_000  # device 1 hot for 0.1 s
    w.stop()
    m = w.metrics()
    assert m["gpu_power_limited_fraction"] == pytest.approx(0.85)  # the most of the devices
    assert m["gpu_thermal_limited_fraction"] == pytest.approx(0.05)
    assert (m["gpu_sm_clock_mhz"], m["gpu_max_sm_clock_mhz"], m["power_limit_w"]) == (1590.0, 1980.0, 1400.0)
    assert "not read" not in m["gpu_clocks_note"] and nvml.shutdowns == 1
    assert gpuclocks.clocks_text(m) == ("power limit 85% of the window, temperature 5% of the window, "
                                        "SM clock 1,590 of 1,980 MHz, limit 1,400 W")


def test_a_driver_without_violation_counters_leaves_them_null_and_says_so():
    nvml = FakeNvml(violations=False)
    w = gpuclocks.ClockWindow("gpu", [Dev(0)], nvml=nvml)
    w.start()
    w.stop()
    m = w.metrics()
    assert m["gpu_power_limited_fraction"] is None and m["gpu_thermal_limited_fraction"] is None
    assert m["gpu_sm_clock_mhz"] == 1590.0
    assert "violation status" in m["gpu_clocks_note"].split("not read")[1]


def test_off_a_gpu_every_reading_is_null_with_the_reason():
    with meters.window("cpu") as w:
        pass
    m = w.metrics(steps=1, examples=1)
    assert all(m[name] is None for name in gpuclocks.METRICS)
    assert "NVIDIA GPUs only" in m["gpu_clocks_note"]
    assert set(gpuclocks.METRICS) <= meters.MAY_BE_NULL
    with pytest.raises(RuntimeError, match="before stop"):
        gpuclocks.ClockWindow("tpu", []).metrics()


def test_a_record_held_down_for_a_tenth_of_its_window_carries_the_note():
    assert WARNINGS["clocks_limited"].kind == "provenance"
    assert "clocks_limited" in record_warnings({"gpu_power_limited_fraction": gpuclocks.LIMITED_SHARE})
    assert "clocks_limited" in record_warnings({"gpu_thermal_limited_fraction": 0.5})
    assert "clocks_limited" not in record_warnings({"gpu_power_limited_fraction": 0.09,
                                                    "gpu_thermal_limited_fraction": None})


@pytest.mark.gpu  # conftest skips it, with the reason, where JAX's backend is not an NVIDIA GPU
def test_clock_readings_on_the_gpu_during_matmuls():
    import time

    pytest.importorskip("pynvml", reason="needs nvidia-ml-py (pynvml), not installed")

    import jax
    import jax.numpy as jnp

    a = jnp.ones((8192, 8192), jnp.bfloat16)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    with meters.window("gpu", jax.devices()[:1]) as w:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.5:
            f(a).block_until_ready()
    m = w.metrics(steps=1, examples=1)
    assert 0 < m["gpu_sm_clock_mhz"] <= m["gpu_max_sm_clock_mhz"], m["gpu_clocks_note"]
    assert m["power_limit_w"] > 50, m["gpu_clocks_note"]
    for name in ("gpu_power_limited_fraction", "gpu_thermal_limited_fraction"):
        assert m[name] is None or 0 <= m[name] <= 1.05, (name, m[name], m["gpu_clocks_note"])


HELD = {"gpu_power_limited_fraction": 0.85, "gpu_thermal_limited_fraction": 0.0, "gpu_sm_clock_mhz": 1590.0,
        "gpu_max_sm_clock_mhz": 1980.0, "power_limit_w": 700.0}
HELD_TEXT = "power limit 85% of the window, SM clock 1,590 of 1,980 MHz, limit 700 W"


def test_the_run_lines_and_the_reports_table_say_what_held_the_clocks():
    from data import golden

    from paradnn.cli.run import warning_lines
    from paradnn.report.summary import summary_table

    record = SimpleNamespace(status="ok", metrics=HELD, warnings=["clocks_limited"], settings={})
    (line,) = warning_lines(record)
    assert line.startswith(f"paradnn: provenance note: clocks_limited ({HELD_TEXT}):")
    df = golden.make_frame().head(3).copy()
    first = df.index[0]
    df["warnings"] = None  # the golden frame has no column of codes (a store before them)
    df.loc[first, "warnings"] = "clocks_limited"
    for name, value in HELD.items():
        df[name] = None
        df.loc[first, name] = value
    notes = summary_table(df)["notes"]
    assert f"clocks_limited ({HELD_TEXT})" in list(notes)
