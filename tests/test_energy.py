"""Energy meters: RAPL on a fake powercap tree (wrap-around, packages, short windows), NVML on
the GPU where one is lent, and 'unavailable' with a reason everywhere else."""

import os
import time
from pathlib import Path

import pytest
from helpers import FakeNvmlBase

from paradnn import energy
from paradnn.energy import EnergyWindow, RaplCounter


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def zone(root: Path, name: str, label: str, uj: int, max_uj: int = 262_143_328_850) -> Path:
    """One zone laid out like /sys/class/powercap/<name>."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "name").write_text(label + "\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def set_uj(d: Path, uj: int) -> None:
    (d / "energy_uj").write_text(f"{uj}\n")


def test_rapl_sums_packages_unwraps_and_skips_subzones(tmp_path):
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    p1 = zone(tmp_path, "intel-rapl:1", "package-1", 999_000_000, max_uj=1_000_000_000)
    core = zone(tmp_path, "intel-rapl:0:0", "core", 5)  # part of package-0: never added
    psys = zone(tmp_path, "intel-rapl:2", "psys", 5)  # the whole platform: would double count
    clock = FakeClock()
    w = EnergyWindow("cpu", powercap_root=tmp_path, clock=clock)
    w.start()
    set_uj(p0, 31_000_000)  # +30 J
    set_uj(p1, 9_000_000)  # wrapped at 1000 J: +1 J to the top, +9 J after = 10 J
    set_uj(core, 10**12)
    set_uj(psys, 10**12)
    clock.t += 2.0
    r = w.stop()
    assert r.source == "rapl"
    assert r.joules == pytest.approx(40.0)
    assert "intel-rapl:0 (package-0)" in r.note and "intel-rapl:1 (package-1)" in r.note
    assert "core" not in r.note and "psys" not in r.note
    m = r.metrics(steps=8, examples=256)
    assert m["energy_per_step_j"] == pytest.approx(5.0)
    assert m["energy_per_example_j"] == pytest.approx(40.0 / 256)
    assert m["power_w"] == pytest.approx(20.0)
    assert m["examples_per_joule"] == pytest.approx(256 / 40.0)
    assert m["energy_source"] == "rapl"


def test_short_window_refused(tmp_path):
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", 0)
    clock = FakeClock()
    w = EnergyWindow("cpu", powercap_root=tmp_path, clock=clock)
    w.start()
    set_uj(p0, 5_000_000)
    clock.t += 0.4
    r = w.stop()
    assert r.joules is None and r.source == "unavailable"
    assert "0.400 s shorter than the 1 s" in r.note
    m = r.metrics(steps=4, examples=128)
    assert m["energy_source"] == "unavailable"
    assert all(m[k] is None for k in ("energy_per_step_j", "energy_per_example_j", "power_w", "examples_per_joule"))


def test_counter_that_did_not_advance_is_no_measurement(tmp_path):
    zone(tmp_path, "intel-rapl:0", "package-0", 7)
    clock = FakeClock()
    w = EnergyWindow("cpu", powercap_root=tmp_path, clock=clock)
    w.start()
    clock.t += 3.0
    m = w.stop().metrics(steps=4, examples=128)
    assert m["energy_source"] == "unavailable" and m["power_w"] is None
    assert "did not advance" in m["energy_note"]


def test_no_counter_says_why(tmp_path):
    r = EnergyWindow("cpu", powercap_root=tmp_path / "absent").stop()
    assert r.source == "unavailable" and r.joules is None
    assert "no RAPL package zone" in r.note
    assert "TPUs expose no energy" in EnergyWindow("tpu").stop().note
    assert "no energy counter known for backend 'metal'" in EnergyWindow("metal").stop().note


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: a root-only counter cannot be simulated")
def test_root_only_counter_is_unavailable(tmp_path):
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", 0)
    (p0 / "energy_uj").chmod(0o000)
    try:
        counter, why = energy.open_counter("cpu", powercap_root=tmp_path)
    finally:
        (p0 / "energy_uj").chmod(0o644)
    assert counter is None
    assert "permission denied" in why and "energy_uj" in why


def test_rapl_of_this_host_or_the_reason():
    # The real /sys/class/powercap: either a reading that advances over a busy second, or a
    # reason; never a number from nowhere.
    counter, why = energy.open_counter("cpu")
    if counter is None:
        assert why
        pytest.skip(f"no readable RAPL counter on this host: {why}")
    assert isinstance(counter, RaplCounter)
    w = EnergyWindow("cpu")
    w.start()
    x, end = 0, time.perf_counter() + 1.1
    while time.perf_counter() < end:
        x += 1
    r = w.stop()
    assert r.source == "rapl" and r.joules > 0 and 0.5 < r.joules / r.seconds < 5000


class FakeNvml(FakeNvmlBase):
    """The few pynvml calls the meter makes, for the logic that a lent GPU cannot exercise
    on demand (a GPU without the energy counter)."""

    def __init__(self, energy_supported: bool):
        self.energy_supported = energy_supported
        self.mj = {0: 1000, 1: 5000}
        super().__init__()

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.energy_supported:
            raise self.NVMLError("Not Supported")
        return self.mj[h]

    def nvmlDeviceGetPowerUsage(self, h):
        return 150_000  # mW


class Dev:
    def __init__(self, i):
        self.id = self.local_hardware_id = i


def test_nvml_counter_sums_devices_in_millijoules(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")  # JAX device 0 is NVML GPU 1
    nvml = FakeNvml(energy_supported=True)
    clock = FakeClock()
    w = EnergyWindow("gpu", [Dev(0)], nvml=nvml, clock=clock)
    assert w.counter.indices == [1]
    w.start()
    nvml.mj[1] += 2500
    nvml.mj[0] += 10**6  # not a device of the run
    clock.t += 1.5
    r = w.stop()
    assert (r.source, r.joules) == ("nvml", pytest.approx(2.5))
    assert nvml.shutdowns == 1


def test_nvml_power_fallback_integrates_samples():
    nvml = FakeNvml(energy_supported=False)
    w = EnergyWindow("gpu", [Dev(0), Dev(1)], nvml=nvml, min_window_s=0.1)
    w.start()
    time.sleep(0.3)
    r = w.stop()
    assert r.source == "nvml-power" and "sampled every 50 ms" in r.note
    assert r.joules / r.seconds == pytest.approx(300.0, rel=0.05)  # 2 x 150 W


def _gpu_reason():
    import jax

    if jax.default_backend() != "gpu":
        return f"needs an NVIDIA GPU; the JAX backend here is {jax.default_backend()}"
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return "needs nvidia-ml-py (pynvml), not installed"
    return None


@pytest.mark.skipif(_gpu_reason() is not None, reason=str(_gpu_reason()))
def test_nvml_on_the_gpu_during_matmuls():
    import jax
    import jax.numpy as jnp

    dev = jax.devices()[:1]
    x = jnp.ones((8192, 8192), jnp.bfloat16)
    f = jax.jit(lambda a: (a @ a).sum())
    jax.block_until_ready(f(x))
    w = EnergyWindow("gpu", dev)
    w.start()
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.5:
        jax.block_until_ready(f(x))
        n += 1
    r = w.stop()
    assert r.source in ("nvml", "nvml-power"), r.note
    power = r.joules / r.seconds
    assert 50 < power < 1500, (power, r)  # a busy data-centre GPU draws tens to hundreds of W
    print(f"NVML: {r.joules:.1f} J over {r.seconds:.2f} s = {power:.0f} W, {n} matmuls, source {r.source}")


def test_energy_figure_by_model_and_batch_leaves_out_unavailable_rows():
    import io

    import pandas as pd

    from paradnn import plots
    from paradnn.errors import ParadnnError

    base = {"status": "ok", "kind": "real", "family": "real", "dtype": "float32"}
    rows = [{**base, "model": m, "batch": b, "power_w": p, "energy_per_example_j": p / (b * 10),
             "energy_source": "nvml", "energy_note": "NVML"}
            for m, p in (("resnet50", 300.0), ("bert_base", 350.0)) for b in (32, 64, 128)]
    rows.append({**base, "model": "resnet50", "batch": 256, "power_w": None, "energy_per_example_j": None,
                 "energy_source": "unavailable", "energy_note": "window too short"})
    fig = plots.energy(pd.DataFrame(rows))
    power, per_example = fig.axes
    assert [len(line.get_xdata()) for line in power.get_lines()] == [3, 3]
    assert power.get_ylabel() == "average power (W)" and "J/example" in per_example.get_ylabel()
    assert "1 run(s) without energy left out" in fig._suptitle.get_text()
    assert "nvml" in fig._suptitle.get_text()
    fig.savefig(io.BytesIO(), format="png")
    with pytest.raises(ParadnnError, match="window too short"):
        plots.energy(pd.DataFrame(rows[-1:]))
