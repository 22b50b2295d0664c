"""paradnn.experiments.maxbatch: the largest power-of-two batch under a memory limit, on real compiled XLA."""

import pytest

from paradnn import FC, ParadnnError, Real, SpecError, Workload
from paradnn import hardware
from paradnn.experiments.maxbatch import max_batch, probe_batch

# Activations dominate at the batches probed: 256 inputs and two 64-wide layers per example
# (~1.6 KiB in float32), against ~0.3 MiB of weights, gradients and optimizer state.
SPEC = FC(layers=2, nodes=64, input=256, output=16)


@pytest.fixture(scope="module")
def peaks():
    """Compiled peak bytes of batches 256 and 512 (no limit in the way)."""
    return {b: probe_batch(Workload(SPEC, b), 1 << 40)["peak_bytes"] for b in (256, 512)}


def test_peak_grows_with_batch(peaks):
    assert 0 < peaks[256] < peaks[512]


def test_largest_power_of_two_under_the_limit(peaks, tiny_settings):
    # A limit that admits batch 256 but not 512: the search stops at 256 and the trial runs it.
    result = max_batch(SPEC, memory_limit_bytes=peaks[256], start=16, limit=4096, settings=tiny_settings)
    assert result["batch"] == 256
    assert [p["batch"] for p in result["probes"]] == [16, 32, 64, 128, 256, 512]
    assert [p["fits"] for p in result["probes"]] == [True] * 5 + [False]
    assert result["probes"][-1]["peak_bytes"] == peaks[512] > peaks[256]
    assert result["trial_status"] == "ok" and result["trial_examples_per_sec"] > 0
    assert result["limit_source"] == "argument" and result["memory_limit_bytes"] == peaks[256]
    assert result["family"] == "fc" and result["dtype"] == "float32"


def test_stops_at_the_limit_argument(peaks):
    result = max_batch(SPEC, memory_limit_bytes=1 << 40, start=2, limit=8, trial=False)
    assert result["batch"] == 8 and [p["batch"] for p in result["probes"]] == [2, 4, 8]
    assert result["trial_status"] is None


def test_nothing_fits_below_the_weights():
    # 4 KiB cannot even hold the weights: refused from shapes, before compiling anything.
    result = max_batch(SPEC, memory_limit_bytes=4096, trial=False)
    assert result["batch"] is None
    (probe,) = result["probes"]
    assert probe["peak_bytes"] is None and "weights" in probe["reason"]


def test_real_model_probe_from_shapes():
    # The zoo goes through the same path: VGG-16's 138 M float32 weights alone exceed 1 GiB.
    probe = probe_batch(Workload(Real("vgg16", image=32), 1), 1 << 30)
    assert not probe["fits"] and probe["floor_bytes"] >= 138_357_544 * 4 * 2  # weights + momentum


@pytest.mark.parametrize("kwargs, parameter", [
    ({"start": 0}, "start"),
    ({"limit": 0}, "limit"),
    ({"start": 8, "limit": 4}, "limit"),
    ({"start": 3, "devices": 2}, "start"),
    ({"memory_limit_bytes": -1}, "memory_limit_bytes"),
    ({"dtype": "float8"}, "dtype"),
])
def test_bad_input_raises_spec_error(kwargs, parameter):
    with pytest.raises(SpecError) as info:
        max_batch(SPEC, **{"memory_limit_bytes": 1 << 30, "trial": False, **kwargs})
    assert info.value.parameter == parameter


def test_cpu_without_a_limit_says_what_to_pass():
    if hardware.device_memory_bytes() is not None:
        pytest.skip("this device reports its memory size; the error is for devices that do not")
    with pytest.raises(ParadnnError, match="memory-limit"):
        max_batch(SPEC)
