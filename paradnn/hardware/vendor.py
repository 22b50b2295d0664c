"""The vendor peak table: each known accelerator's dense peak FLOP/s per dtype, memory bandwidth
and memory (:data:`PEAKS`), how a device kind names its entry (:func:`spec_name`), and the rate
of an entry at a measured float32 precision (:func:`spec_flops`)."""

from __future__ import annotations

import re
from typing import Any

from paradnn import precision

T = 1e12
# Vendor peak of one JAX device: "flops" {dtype: FLOP/s} (what utilization divides by), "bw"
# (memory bandwidth, B/s), "mem" (device memory, B). Dense vendor peaks (docs/gpu.md lists
# them), never "sparse" ones. TPU v2/v3 chips expose one JAX device per TensorCore, so the chip
# figures are halved. TPU float32 matmuls run as bfloat16 passes at default precision, and JAX's
# default float32 matmul on Ampere/Hopper uses TF32 tensor cores (JAX's "Matmul precision"
# docs: "TF32 on recent GPUs" unless jax_default_matmul_precision asks for more): those float32
# peaks are the ones the default precision can reach. The GPU entries also record "float32_full", the non-tensor-core
# FP32 peak that true float32 is bounded by: a float32 run whose measured matmul_precision_used
# is "highest" divides by it (:func:`spec_flops`).
# NVIDIA datasheets print tensor-core peaks "with sparsity"; the dense figures here are half.
#   H100 SXM/PCIe/NVL: NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100):
#     SXM 67 FP32, 989 TF32*, 1979 BF16/FP16*, 3.35 TB/s, 80 GB; PCIe 51, 756*, 1513*, 2.0 TB/s,
#     80 GB; NVL 60, 835*, 1671*, 3.9 TB/s, 94 GB (* sparse).
#   H200 SXM/NVL: NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200):
#     SXM 67, 989*, 1979*, 4.8 TB/s, 141 GB; NVL 60, 835*, 1671*, 4.8 TB/s, 141 GB.
PEAKS: dict[str, dict[str, Any]] = {
    "tpu v2": {"flops": {"bfloat16": 45 * T / 2, "float32": 45 * T / 2}, "bw": 600e9 / 2, "mem": 8 * 2**30},
    "tpu v3": {"flops": {"bfloat16": 123 * T / 2, "float32": 123 * T / 2}, "bw": 900e9 / 2, "mem": 16 * 2**30},
    "tpu v4": {"flops": {"bfloat16": 275 * T, "float32": 275 * T}, "bw": 1200e9, "mem": 32 * 2**30},
    "tpu v5e": {"flops": {"bfloat16": 197 * T, "float32": 197 * T}, "bw": 819e9, "mem": 16e9},
    "tpu v5p": {"flops": {"bfloat16": 459 * T, "float32": 459 * T}, "bw": 2765e9, "mem": 95e9},
    "tpu v6e": {"flops": {"bfloat16": 918 * T, "float32": 918 * T}, "bw": 1638e9, "mem": 32e9},
    "v100": {"flops": {"float16": 125 * T, "bfloat16": 15.7 * T, "float32": 15.7 * T}, "float32_full": 15.7 * T,
             "bw": 900e9, "mem": 16e9},
    "a100": {"flops": {"float16": 312 * T, "bfloat16": 312 * T, "float32": 156 * T}, "float32_full": 19.5 * T,
             "bw": 2039e9, "mem": 80e9},
    "h100 sxm": {"flops": {"float16": 989 * T, "bfloat16": 989 * T, "float32": 495 * T}, "float32_full": 67 * T,
                 "bw": 3.35e12, "mem": 80e9},
    "h100 pcie": {"flops": {"float16": 756 * T, "bfloat16": 756 * T, "float32": 378 * T}, "float32_full": 51 * T,
                  "bw": 2.0e12, "mem": 80e9},
    "h100 nvl": {"flops": {"float16": 835 * T, "bfloat16": 835 * T, "float32": 418 * T}, "float32_full": 60 * T,
                 "bw": 3.9e12, "mem": 94e9},
    "h200 sxm": {"flops": {"float16": 989 * T, "bfloat16": 989 * T, "float32": 495 * T}, "float32_full": 67 * T,
                 "bw": 4.8e12, "mem": 141e9},
    "h200 nvl": {"flops": {"float16": 835 * T, "bfloat16": 835 * T, "float32": 418 * T}, "float32_full": 60 * T,
                 "bw": 4.8e12, "mem": 141e9},
}
# How JAX device_kind strings map to PEAKS entries: the first rule whose words all appear as
# whole words of the lower-cased kind wins (words split at anything not a letter or digit), so
# "NVIDIA H100 PCIe" never falls into the SXM entry and "NVIDIA GH200 480GB" is not an H200.
# Kinds CUDA reports (JAX's device_kind is the CUDA device name): "NVIDIA H100 80GB HBM3" (SXM;
# the PCIe card has HBM2e), "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200",
# "NVIDIA H200 NVL". An H100 kind that names neither form nor HBM3 gets no spec entry (the
# measured probe is used) rather than a guess. A plain "NVIDIA H200" is taken as the SXM part.
_KIND_ORDER: list[tuple[str, tuple[str, ...]]] = [
    ("tpu v5p", ("tpu", "v5p")), ("tpu v5e", ("tpu", "v5", "lite")), ("tpu v5e", ("tpu", "v5e")),
    ("tpu v6e", ("tpu", "v6", "lite")), ("tpu v6e", ("tpu", "v6e")),
    ("tpu v2", ("tpu", "v2")), ("tpu v3", ("tpu", "v3")), ("tpu v4", ("tpu", "v4")),
    ("h100 nvl", ("h100", "nvl")), ("h100 pcie", ("h100", "pcie")),
    ("h100 sxm", ("h100", "sxm")), ("h100 sxm", ("h100", "sxm5")), ("h100 sxm", ("h100", "hbm3")),
    ("h200 nvl", ("h200", "nvl")), ("h200 sxm", ("h200",)),
    ("a100", ("a100",)), ("v100", ("v100",)),
]


def spec_name(device_kind: str) -> str | None:
    """The ``PEAKS`` entry name for a JAX device kind (see ``_KIND_ORDER``), or None for devices
    without one (CPUs, unknown accelerators, and MIG slices, which get a fraction of the chip)."""
    words = set(re.split(r"[^a-z0-9]+", device_kind.lower()))
    if "mig" in words:
        return None
    for name, needed in _KIND_ORDER:
        if words.issuperset(needed):
            return name
    return None


def spec_peak(device_kind: str) -> dict[str, Any] | None:
    """The vendor peak entry for a JAX device kind (:func:`spec_name`), or None."""
    name = spec_name(device_kind)
    return PEAKS[name] if name is not None else None


def spec_flops(entry: dict[str, Any], dtype: str, precision_used: str | None) -> tuple[float, str]:
    """(FLOP/s, which rate) of a vendor-table entry for ``dtype`` computed at the measured
    ``matmul_precision_used`` (:mod:`paradnn.precision`). The table's float32 rate is what the
    default precision reaches (TF32 on NVIDIA Ampere and later, bfloat16 passes on a TPU); a run
    measured at full float32 on a GPU divides by the non-tensor FP32 rate (``float32_full``),
    one at bfloat16 passes by the bfloat16 rate (a third of it for 3 passes, a sixth for full
    float32 on a TPU). Not yet validated on a GPU or TPU (docs/gpu.md). A label naming two
    levels (matmul and convolution) takes the faster, so that utilization is never overstated."""
    flops = entry["flops"]
    if dtype != "float32" or not precision_used:
        return flops.get(dtype, flops["float32"]), f"{dtype} rate"
    # A TPU (no float32_full) computes full float32 as 6 bfloat16 passes (JAX's BF16_BF16_F32_X6).
    by_level = {"highest": ((entry["float32_full"], "FP32 non-tensor rate") if "float32_full" in entry
                            else (flops["bfloat16"] / 6, "bfloat16 rate / 6 passes")),
                "tf32": (flops["float32"], "float32 (TF32) rate"),
                "bf16x3": (flops.get("bfloat16", flops["float32"]) / 3, "bfloat16 rate / 3 passes"),
                "bf16": (flops.get("bfloat16", flops["float32"]), "bfloat16 rate")}
    rates = [by_level[level] for level in precision.levels_of(precision_used) if level in by_level]
    return max(rates) if rates else (flops["float32"], "float32 rate")
