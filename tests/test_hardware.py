"""The vendor peak table: which JAX device kind gets which entry."""

import pytest

from paradnn.hardware import PEAKS, peaks, spec_peak, vendor

T = 1e12


@pytest.mark.parametrize("kind, entry", [
    ("NVIDIA H100 80GB HBM3", "h100 sxm"),
    ("NVIDIA H100 SXM5 80GB", "h100 sxm"),
    ("NVIDIA H100 PCIe", "h100 pcie"),
    ("NVIDIA H100 NVL", "h100 nvl"),
    ("NVIDIA H200", "h200 sxm"),
    ("NVIDIA H200 NVL", "h200 nvl"),
    ("NVIDIA A100-SXM4-80GB", "a100"),
    ("Tesla V100-SXM2-16GB", "v100"),
    ("TPU v4", "tpu v4"),
    ("TPU v5 lite", "tpu v5e"),
    ("TPU v5e", "tpu v5e"),
    ("TPU v5p", "tpu v5p"),
    ("TPU v6 lite", "tpu v6e"),
    ("TPU v2", "tpu v2"),
])
def test_device_kind_maps_to_its_entry(kind, entry):
    assert spec_peak(kind) is PEAKS[entry]


@pytest.mark.parametrize("kind", [
    "cpu",
    "NVIDIA GH200 480GB",          # Grace Hopper: other memory, no entry; "h200" is not a word of it
    "NVIDIA H100",                 # form factor unknown: measured, not a guess
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb",  # a MIG slice gets a fraction of the chip
    "NVIDIA H800",
    "NVIDIA H20",
    "NVIDIA GeForce RTX 4090",
])
def test_kinds_without_a_vendor_entry(kind):
    assert spec_peak(kind) is None


def test_pcie_and_nvl_variants_do_not_get_the_sxm_peaks():
    sxm, pcie, nvl = (spec_peak(k) for k in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"))
    assert sxm["flops"]["bfloat16"] == 989 * T and sxm["bw"] == 3.35e12 and sxm["mem"] == 80e9
    assert pcie["flops"]["bfloat16"] == 756 * T and pcie["bw"] == 2.0e12
    assert nvl["flops"]["bfloat16"] == 835 * T and nvl["bw"] == 3.9e12 and nvl["mem"] == 94e9


def test_h200_has_h100_sxm_compute_and_more_memory():
    h200, h100 = spec_peak("NVIDIA H200"), spec_peak("NVIDIA H100 80GB HBM3")
    assert h200["flops"] == h100["flops"]
    assert (h200["bw"], h200["mem"]) == (4.8e12, 141e9)


@pytest.mark.parametrize("name", [n for n in PEAKS if n.startswith(("h1", "h2", "a1"))])
def test_gpu_float32_peak_is_the_tf32_tensor_core_peak(name):
    # JAX's default float32 matmul on Ampere/Hopper runs on TF32 tensor cores: utilization
    # divides by half the 16-bit tensor peak, and the non-tensor FP32 peak is recorded apart.
    e = PEAKS[name]
    assert e["flops"]["float32"] == pytest.approx(e["flops"]["bfloat16"] / 2, rel=0.002)
    assert e["float32_full"] < e["flops"]["float32"] / 5


def test_every_rule_names_an_entry_and_every_entry_is_reachable():
    names = [name for name, _ in vendor._KIND_ORDER]
    assert set(names) == set(PEAKS)


@pytest.mark.parametrize("dtype, expect", [("bfloat16", 989 * T), ("float16", 989 * T), ("float32", 495 * T)])
def test_peaks_on_an_h100_are_spec_peaks(dtype, expect):
    peak = peaks("NVIDIA H100 80GB HBM3", dtype, backend="gpu")
    assert (peak.flops, peak.bytes_per_sec, peak.source) == (expect, 3.35e12, "spec")
