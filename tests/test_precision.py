"""The ``matmul_precision`` setting and the measured ``matmul_precision_used`` (paradnn.precision):
the classifier against float32 products rounded the way TF32, bfloat16 and 3-pass bfloat16
round them (emulated in numpy), each framework applying the setting for real, a real run's
record, the vendor peak a measured precision divides by, and the flag a comparison of two
precisions carries. On this CPU every framework computes float32 products in float32 whatever
the setting (no tensor cores): the tests say so where they rely on it."""

from __future__ import annotations

import numpy as np
import pytest

import paradnn
from data import fwrows
from helpers import TINY
from paradnn import FC, hardware, precision
from paradnn.errors import SpecError
from paradnn.measure import MeasureSettings


def _rounded(x: np.ndarray, bits: int, truncate: bool = False) -> np.ndarray:
    """``x`` with its mantissa kept to ``bits`` explicit bits (round to nearest, or truncated)."""
    m, e = np.frexp(x.astype(np.float64))
    scaled = m * 2.0 ** (bits + 1)
    return np.ldexp((np.trunc(scaled) if truncate else np.round(scaled)) / 2.0 ** (bits + 1), e)


@pytest.mark.parametrize("truncate", [False, True])
def test_the_classifier_names_emulated_tensor_core_precisions(truncate):
    a, b, exact = precision.probe_operands()["matmul"]
    full = precision.effective_bits(a @ b, exact)
    tf32 = precision.effective_bits((_rounded(a, 10, truncate) @ _rounded(b, 10, truncate)).astype(np.float32), exact)
    bf16 = precision.effective_bits((_rounded(a, 7, truncate) @ _rounded(b, 7, truncate)).astype(np.float32), exact)
    # 3-pass bfloat16: each operand as a high and a low bfloat16 part, the low-low product dropped.
    ah, bh = _rounded(a, 7), _rounded(b, 7)
    al, bl = _rounded(a - ah, 7), _rounded(b - bh, 7)
    x3 = precision.effective_bits((ah @ bh + ah @ bl + al @ bh).astype(np.float32), exact)
    assert full > 20 and precision.label(full) == "highest"
    assert 9.5 < tf32 < 13 and precision.label(tf32) == "tf32"
    assert bf16 < 9.5 and precision.label(bf16) == "bf16"
    assert 13.5 < x3 < 19 and precision.label(x3) == "bf16x3"


def test_the_convolution_operands_have_an_exact_reference():
    x, w, exact = precision.probe_operands()["conv"]
    assert exact.shape == (1, 6, 6, 8)
    # One output element by hand: the 3x3x16 window at (2, 3) against every kernel tap.
    by_hand = np.einsum("ijc,ijco->o", x[0, 2:5, 3:6].astype(np.float64), w.astype(np.float64))
    np.testing.assert_allclose(exact[0, 2, 3], by_hand, rtol=1e-12)


def test_used_labels_and_bits():
    assert precision.used("float32", {"matmul": 23.0, "conv": 22.5}) == ("highest", 22.5)
    assert precision.used("float32", {"matmul": 23.0, "conv": 11.2}) == ("matmul highest, conv tf32", 11.2)
    assert precision.used("bfloat16", {"matmul": 8.0}) == ("bfloat16", None)
    # PyTorch's default (full float32 matmuls, TF32 convolutions) on a model without convolutions.
    fc = precision.ops_in([(1024, 512), (512,), (512, 10)])
    assert fc == ("matmul",) and precision.ops_in([(3, 3, 16, 8), (8,)]) == ("matmul", "conv")
    assert precision.used("float32", {"matmul": 23.0, "conv": 11.2}, fc) == ("highest", 23.0)
    # A product that overflowed or gave NaN has no precision (and labels as the lowest level).
    exact = np.ones((2, 2))
    assert precision.effective_bits(np.full((2, 2), np.nan), exact) == 0.0
    assert precision.effective_bits(np.full((2, 2), np.inf), exact) == 0.0
    assert precision.label(0.0) == "bf16"
    assert precision.is_level("matmul highest, conv tf32") and not precision.is_level("bfloat16")
    assert not precision.is_level(float("nan")) and not precision.is_level(None)


def test_the_setting_is_every_frameworks_option_and_checked():
    assert MeasureSettings(matmul_precision="tf32").options_for("torch").matmul_precision == "tf32"
    assert MeasureSettings().options_for("jax").matmul_precision == "default"
    with pytest.raises(SpecError, match="matmul_precision='fast'.*default, highest, tf32"):
        MeasureSettings(matmul_precision="fast")


def test_jax_traces_the_setting_and_a_cpu_keeps_float32():
    import jax

    from paradnn.backends.jax import step

    if jax.default_backend() != "cpu":
        pytest.skip("checks XLA:CPU, which computes float32 products in float32 at any precision")
    for setting in precision.SETTINGS:
        bits = step.precision_bits(setting)
        assert precision.used("float32", bits)[0] == "highest", (setting, bits)
    # The setting reaches the lowered program: a dot traced under "highest" says so in its HLO.
    a = np.ones((4, 4), np.float32)
    with step.matmul_precision("highest"):
        text = jax.jit(lambda x: x @ x).lower(a).as_text()
    assert "HIGHEST" in text
    assert "HIGHEST" not in jax.jit(lambda x: x @ x + 1).lower(a).as_text()


def test_torch_flags_follow_the_setting_and_default_restores_them():
    torch = pytest.importorskip("torch", reason="PyTorch is an optional backend (pip install -e .[torch])")
    from paradnn.backends.torch import backend

    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    try:
        backend.apply_matmul_precision("highest")
        assert torch.get_float32_matmul_precision() == "highest"
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        backend.apply_matmul_precision("tf32")
        # Inductor reads these switches: a write through torch >= 2.9's fp32_precision flags
        # would make these reads raise ("mix of the legacy and new APIs").
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # the new flags agree
            assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    finally:
        backend.apply_matmul_precision("default")
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before
    bits = backend.precision_bits(torch.device("cpu"))
    assert precision.used("float32", bits)[0] == "highest"  # torch's flags act on CUDA only


def test_a_run_records_the_setting_and_the_measured_precision():
    row = fwrows.jax_rows()[0]  # a real tiny float32 run, shared with other tests
    assert row["matmul_precision"] == "default"
    assert row["matmul_precision_used"] == "highest" and row["matmul_precision_bits"] > 19
    assert row["peak_source"] in ("measured", "none")  # a CPU: the probe, not the vendor table


@pytest.mark.slow
def test_a_reduced_dtype_names_its_dtype_and_the_setting_is_in_the_key():
    bf16 = paradnn.run(FC(2, 16, 8, 4), batch=4, dtype="bfloat16", settings=TINY)
    assert bf16.status == "ok" and bf16.metrics["matmul_precision_used"] == "bfloat16"
    assert bf16.metrics["matmul_precision_bits"] is None
    pinned = paradnn.run(FC(2, 16, 8, 4), batch=4, settings=TINY.replace(), matmul_precision="tf32")
    assert pinned.status == "ok" and pinned.settings["matmul_precision"] == "tf32"
    assert pinned.metrics["matmul_precision_used"] == "highest"  # no TF32 on a CPU
    assert pinned.key != fwrows.jax_rows()[0]["key"]


def test_vendor_peaks_follow_the_measured_precision():
    h100 = "NVIDIA H100 80GB HBM3"
    T = 1e12
    assert hardware.peaks(h100, "float32", "gpu", "highest").flops == 67 * T
    assert hardware.peaks(h100, "float32", "gpu", "tf32").flops == 495 * T
    assert hardware.peaks(h100, "float32", "gpu", None).flops == 495 * T  # older rows: as before
    # Two levels: the faster, so that utilization is never overstated.
    assert hardware.peaks(h100, "float32", "gpu", "matmul highest, conv tf32").flops == 495 * T
    assert hardware.peaks(h100, "float32", "gpu", "bf16x3").flops == pytest.approx(989 * T / 3)
    assert hardware.peaks(h100, "bfloat16", "gpu", "bfloat16").flops == 989 * T
    assert hardware.peaks("TPU v4", "float32", "tpu", "highest").flops == pytest.approx(275 * T / 6)
    assert "FP32 non-tensor" in hardware.peaks(h100, "float32", "gpu", "highest").method
