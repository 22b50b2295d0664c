"""Checks that need an NVIDIA GPU as the default JAX backend (``-m gpu``). Elsewhere every test
here skips with the reason (tests/conftest.py). Kept tiny: benchmarks/gpu_validation.sh does the
measurements at full size."""

import importlib.util
import math

import jax
import pytest

import paradnn
from paradnn import FC, Workload, hardware
from paradnn.experiments import profile

pytestmark = pytest.mark.gpu


def _stats() -> dict:
    return jax.devices()[0].memory_stats() or {}


def test_the_device_kind_has_a_spec_peak():
    kind = jax.devices()[0].device_kind
    assert hardware.spec_peak(kind) is not None, f"no PEAKS entry matches device kind {kind!r}"
    for dtype in ("float32", "bfloat16", "float16"):
        peak = hardware.peaks(kind, dtype, "gpu")
        assert peak.source == "spec" and peak.flops > 0 and peak.bytes_per_sec > 0


def test_device_memory_comes_from_the_runtime():
    # The allocator's limit (a fraction of the board's memory, XLA_PYTHON_CLIENT_MEM_FRACTION)
    # is what a config must fit in; the spec sheet's memory is only the fallback.
    limit = _stats().get("bytes_limit")
    assert limit, "memory_stats() reports no bytes_limit"
    assert hardware.device_memory_bytes() == int(limit)
    spec = hardware.spec_peak(jax.devices()[0].device_kind)
    if spec is not None:
        assert 0.3 * spec["mem"] <= limit <= 1.1 * spec["mem"]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_fc_runs_within_the_peak(dtype, tiny_settings):
    record = paradnn.run(FC(2, 1024, 1024, 1024), batch=1024, dtype=dtype, settings=tiny_settings)
    assert record.status == "ok", record.error
    m = record.metrics
    assert m["peak_source"] == "spec"
    assert 0 < m["flops_utilization"] <= 1.0
    assert math.isfinite(m["final_loss"])


def test_the_ceiling_probe_measures_below_the_spec_and_near_the_known_figures():
    """The probe of this GPU (accelerator sizes, queued calls): below the datasheet in every
    dtype and in bandwidth (nothing above_spec), and not far below it: an H100 SXM is expected
    at about 790-800 of its 989 TFLOP/s bfloat16 dense on 8192^3, HBM near its 3.35 TB/s."""
    kind = jax.devices()[0].device_kind
    spec = hardware.spec_peak(kind)
    result = hardware.probe()
    assert result["device_platform"] == "gpu" and result["above_spec"] == {}, result["above_spec"]
    # The best of the frameworks present: XLA's GEMM, and PyTorch's where it is installed, each
    # measured or, past the probe's time budget (2 s in this suite: conftest.py), recorded as skipped.
    torch_present = importlib.util.find_spec("torch") is not None
    skipped = result.get("incomplete", {}).get("bfloat16", [])  # "method size" pairs
    tried = set(result["gemm"]["bfloat16"]) | {pair.split()[0] for pair in skipped}
    assert tried == {"xla-stock"} | ({"torch-cublas"} if torch_present else set())
    assert result["peak_flops"]["bfloat16"] == max(result["gemm"]["bfloat16"].values())
    assert 0.5 * spec["flops"]["bfloat16"] < result["peak_flops"]["bfloat16"] <= spec["flops"]["bfloat16"]
    assert 0.6 * spec["bw"] < result["peak_bytes_per_sec"] <= spec["bw"]
    ceiling = hardware.ceiling("gpu", "bfloat16", "jax", hardware.peaks(kind, "bfloat16", "gpu"))
    assert ceiling.source == "measured" and ceiling.flops == hardware.best_quiet(
        hardware.on_record(), "bfloat16")["peak_flops"]["bfloat16"]


def test_records_carry_both_utilizations_none_above_1(tiny_settings):
    record = paradnn.run(FC(2, 4096, 4096, 1024), batch=4096, dtype="bfloat16", settings=tiny_settings)
    assert record.status == "ok", record.error
    m = record.metrics
    assert m["peak_source"] == "spec" and m["ceiling_id"] != m["peak_id"]
    assert 0 < m["ceiling_flops"] <= m["peak_flops"]
    assert 0 < m["model_flops_utilization"] < m["model_ceiling_utilization"] <= 1.0
    assert not {"above_ceiling", "peak_below_ceiling", "utilization_above_1"} & set(record.warnings)


def test_oom_is_predicted_above_device_memory_without_allocating(tiny_settings):
    before = _stats().get("peak_bytes_in_use", 0)
    # 64 layers of 16384^2 float32 weights: 68.7 GB of weights alone, plus optimizer state.
    weights = paradnn.run(FC(64, 16384, 1024, 1000), batch=64, settings=tiny_settings)
    assert weights.status == "oom" and "before compiling" in weights.error
    # Refused before compiling: the device's peak use did not grow by a gigabyte.
    assert _stats().get("peak_bytes_in_use", 0) - before < 1e9


def test_oom_is_predicted_from_the_compiled_memory_analysis(tiny_settings):
    # Weights + state ~26 GB fit; 32 saved activations of 131072 x 8192 float32 (4.3 GB each) do
    # not. (Compiling may allocate autotuning buffers; the program itself never runs.)
    acts = paradnn.run(FC(32, 8192, 8192, 1000), batch=131072, settings=tiny_settings)
    assert acts.status == "oom" and "memory analysis" in acts.error, acts.error
    assert acts.metrics["memory_peak_bytes"] > hardware.device_memory_bytes()
    assert "step_time_s" not in acts.metrics


def test_profile_times_operations_from_device_events():
    ops = profile.capture(Workload(FC(2, 1024, 1024, 1024), 512), steps=2, warmup=1)
    assert ops.attrs["device_platform"] == "gpu" and not ops.attrs["approximate"]
    assert (ops["time_s"] > 0).all()
    # The matmuls (cuBLAS/Triton kernels) are found in the trace and carry their HLO FLOPs.
    assert ops.attrs["flops_matched_fraction"] > 0.5
    assert ops["flops"].sum() > 0


def _executed_over_analytic(record) -> float:
    assert record.status == "ok", record.error
    m = record.metrics
    assert "custom calls counted" in m["flops_source"], m["flops_source"]
    assert "flops_mismatch" not in record.warnings, (m["flops_per_step"], m["model_flops_per_step"])
    return m["flops_per_step"] / m["model_flops_per_step"]


def test_cudnn_convolutions_are_counted_as_the_convolutions_they_compute(tiny_settings):
    # On a GPU every convolution and its two gradients are cuDNN custom calls, counted from their
    # shapes; the first H100 run read ResNet-50 at 1.38x its analytic count, the backward calls
    # counted from the wrong operands. Strided and 1x1 convolutions between 16, 64 and 256
    # features; float32 (no tensor-core channel padding of the 3-channel stem). The bound leaves
    # room for the element-wise work XLA counts beside the convolutions, large in a CNN this
    # small: XLA:CPU counts it 1.10x its analytic count, an H200 (2026-11-29) 1.215x (the other
    # 11% not yet explained); ResNet-50 at 224 px read 1.017x on the same H200.
    record = paradnn.run(paradnn.CNN(block="bottleneck", blocks=1, filters=16, image=64, output=10), batch=16,
                         settings=tiny_settings)
    assert 0.9 <= _executed_over_analytic(record) <= 1.25


def test_cudnn_attention_is_counted(tiny_settings):
    # Attention about half of each block's products (length 512, d_model 128): uncounted, as
    # before, the step read about 0.67x of its analytic count. The analytic count takes the
    # causal triangle (attention_flops "half"), cuDNN computes it, and its backward pass computes
    # the scores once more: about 1.1x.
    spec = paradnn.Transformer(1, 128, 2, 256, 512, 256, attention_flops="half")
    record = paradnn.run(spec, batch=4, dtype="bfloat16", settings=tiny_settings)
    assert record.tags["attention_implementation"] == "cudnn"
    assert 0.9 <= _executed_over_analytic(record) <= 1.3
