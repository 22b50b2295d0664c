"""The analyses on planted data (known answers) and on the golden store."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paradnn import analysis as A
from paradnn.errors import ParadnnError

sys.path.insert(0, str(Path(__file__).parent / "data"))
import golden  # noqa: E402


@pytest.fixture(scope="module")
def gold():
    return golden.make_frame()


def planted(n=200, seed=1, noise=0.1):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({f: rng.uniform(0, 10, n) for f in "abcd"})
    # Planted effects on standardized scale: a +3, b -2, c +0.5, d none.
    z = (df - df.mean()) / df.std(ddof=0)
    df["y"] = 3 * z["a"] - 2 * z["b"] + 0.5 * z["c"] + rng.normal(0, noise, n)
    df["status"] = "ok"
    return df


def test_sensitivity_recovers_planted_signs_and_ranking():
    s = A.sensitivity(planted(), "y", ["d", "c", "b", "a"], bootstrap=100, seed=3)
    assert list(s.columns) == ["feature", "weight", "ci_low", "ci_high"]
    assert list(s["feature"]) == ["a", "b", "c", "d"]  # ranked by |weight|
    w = dict(zip(s["feature"], s["weight"]))
    assert w["a"] > 0 and w["b"] < 0 and w["c"] > 0
    # standardized target: weights are the planted ones over the target's SD (sqrt(9+4+.25))
    sd = np.sqrt(3 ** 2 + 2 ** 2 + 0.5 ** 2)
    assert w["a"] == pytest.approx(3 / sd, abs=0.05)
    assert w["b"] == pytest.approx(-2 / sd, abs=0.05)
    assert s.attrs["r2"] > 0.99 and s.attrs["n"] == 200
    for _, r in s.iterrows():
        assert r["ci_low"] <= r["weight"] <= r["ci_high"]
    d = s.set_index("feature").loc["d"]
    assert d["ci_low"] < 0 < d["ci_high"]  # no effect: the interval spans zero


def test_sensitivity_bootstrap_is_seeded():
    df = planted(n=60, noise=1.0)
    a = A.sensitivity(df, "y", list("abcd"), bootstrap=50, seed=7)
    b = A.sensitivity(df, "y", list("abcd"), bootstrap=50, seed=7)
    c = A.sensitivity(df, "y", list("abcd"), bootstrap=50, seed=8)
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["ci_low"], c["ci_low"])
    none = A.sensitivity(df, "y", list("abcd"), bootstrap=0)
    assert none["ci_low"].isna().all()


def test_sensitivity_interaction_term():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.uniform(-1, 1, 300), "b": rng.uniform(-1, 1, 300)})
    df["y"] = 4 * df["a"] * df["b"] + 0.2 * df["a"] + rng.normal(0, 0.05, 300)
    plain = A.sensitivity(df, "y", ["a", "b"], bootstrap=0)
    inter = A.sensitivity(df, "y", ["a", "b"], interactions=True, bootstrap=0)
    assert inter["feature"].iloc[0] == "a x b" and inter["weight"].iloc[0] > 0
    assert inter.attrs["r2"] > 0.95 > plain.attrs["r2"]


def test_sensitivity_log2_and_constant_and_errors():
    df = planted()
    df["const"] = 5
    s = A.sensitivity(df.assign(a=2.0 ** df["a"]), "y", ["a", "b", "const"], log2=True, bootstrap=0)
    assert s.attrs["constant"] == ["const"] and "const" not in set(s["feature"])
    assert s.set_index("feature").loc["a", "weight"] > 0.7  # log2 undoes the 2**a
    with pytest.raises(ParadnnError, match="at least 8 ok rows"):
        A.sensitivity(df.head(5), "y", ["a", "b"])
    with pytest.raises(ParadnnError, match="'missing'"):
        A.sensitivity(df, "y", ["missing"])
    with pytest.raises(ParadnnError, match="not numeric"):
        A.sensitivity(df.assign(cell="lstm"), "y", ["cell"])
    failed = df.assign(status="oom")
    with pytest.raises(ParadnnError, match="0 ok rows"):
        A.sensitivity(failed, "y", ["a"])


def test_sensitivity_recovers_golden_planted_effects(gold):
    # The golden model's efficiency grows with batch and width (nodes), not with input.
    fc = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-a") & (gold.dtype == "float32")
              & (gold.jax_version == "0.10.2")]
    s = A.sensitivity(fc, "flops_utilization", ["layers", "nodes", "batch"], log2=True)
    w = dict(zip(s["feature"], s["weight"]))
    assert w["nodes"] > 0 and w["batch"] > 0
    assert s["feature"].iloc[0] in ("nodes", "batch")


def test_roofline_classifies_both_sides_of_the_ridge():
    df = pd.DataFrame({
        "arithmetic_intensity": [1.0, 5.0, 10.0, 100.0, np.nan],
        "flops_per_sec": [5.0, 50.0, 100.0, 25.0, 1.0],
    })
    rf = A.roofline(df, peak_flops=100.0, peak_bytes_per_sec=10.0)  # ridge at 10 FLOP/B
    assert list(rf["bound"][:4]) == ["memory", "memory", "compute", "compute"]
    assert rf["bound"].iloc[4] is None
    assert list(rf["roof_flops_per_sec"][:4]) == [10.0, 50.0, 100.0, 100.0]
    assert list(rf["roof_fraction"][:4]) == pytest.approx([0.5, 1.0, 1.0, 0.25])
    assert (rf["ridge_intensity"] == 10.0).all()
    assert "bound" not in df.columns  # a copy


def test_roofline_uses_row_peaks_scaled_by_devices():
    df = pd.DataFrame({
        "arithmetic_intensity": [4.0, 4.0], "flops_per_sec": [40.0, 40.0],
        "peak_flops": [100.0, 100.0], "peak_bytes_per_sec": [10.0, 10.0], "devices": [1, 4],
    })
    rf = A.roofline(df)
    assert list(rf["roof_flops_per_sec"]) == [40.0, 160.0]
    assert list(rf["roof_fraction"]) == [1.0, 0.25]
    with pytest.raises(ParadnnError, match="peak_flops"):
        A.roofline(df.drop(columns=["peak_flops"]))
    with pytest.raises(ParadnnError, match="positive"):
        A.roofline(df, peak_flops=-1.0)


def test_roofline_golden_has_both_bounds(gold):
    rf = A.roofline(gold)
    ok = rf[rf.status == "ok"]
    assert set(ok["bound"]) == {"memory", "compute"}
    assert (ok["roof_fraction"] <= 1.0 + 1e-9).all() and (ok["roof_fraction"] > 0).all()
    assert rf[rf.status == "oom"]["bound"].isna().all()


def test_heatmap_cells_oom_and_fixed(gold):
    fc = gold[gold.family == "fc"]
    hm = A.heatmap(fc, "batch", "nodes", "flops_utilization",
                   fixed={"layers": 16, "device_kind": "synthetic-a"})
    assert len(hm) == 16 and set(hm.columns) == {"batch", "nodes", "flops_utilization", "status", "n"}
    oom = hm[hm.status == "oom"]
    assert set(oom["nodes"]) == {4096} and oom["flops_utilization"].isna().all()
    assert hm.attrs["fixed"]["layers"] == 16 and hm.attrs["unit"] == "fraction of peak"
    # a cell is the value of its run
    cell = hm[(hm.batch == 256) & (hm.nodes == 1024)]["flops_utilization"].iloc[0]
    src = fc[(fc.layers == 16) & (fc.device_kind == "synthetic-a") & (fc.batch == 256)
             & (fc.nodes == 1024) & (fc.status == "ok")]
    assert len(src) == 1 and cell == src["flops_utilization"].iloc[0]


def test_heatmap_auto_fixes_other_settings(gold):
    hm = A.heatmap(gold[gold.family == "fc"], "batch", "nodes", "examples_per_sec")
    fixed = hm.attrs["fixed"]
    assert {"layers", "dtype", "jax_version"} <= set(fixed)
    assert "backend" in fixed or "device_kind" in fixed  # one platform
    assert (hm["n"] == 1).all()  # one configuration per cell


def test_heatmap_errors(gold):
    with pytest.raises(ParadnnError, match="layers=3"):
        A.heatmap(gold, "batch", "nodes", "examples_per_sec", fixed={"layers": 3})
    with pytest.raises(ParadnnError, match="both"):
        A.heatmap(gold, "batch", "batch", "examples_per_sec")
    with pytest.raises(ParadnnError, match="'nope'"):
        A.heatmap(gold, "batch", "nope", "examples_per_sec")


def test_speedup_ratio_on_workload_key(gold):
    a = gold[gold.device_kind == "synthetic-a"]
    b = gold[gold.device_kind == "synthetic-b"]
    sp = A.speedup(a, b)
    both_ok = set(a[a.status == "ok"].workload_key) & set(b[b.status == "ok"].workload_key)
    assert set(sp["workload_key"]) == both_ok
    k = sp["workload_key"].iloc[0]
    ea = a[(a.workload_key == k) & (a.status == "ok")]["examples_per_sec"].median()
    eb = b[(b.workload_key == k) & (b.status == "ok")]["examples_per_sec"].median()
    assert sp.set_index("workload_key").loc[k, "speedup"] == pytest.approx(ea / eb)
    assert {"params", "label", "examples_per_sec_a", "examples_per_sec_b", "family"} <= set(sp.columns)


def test_speedup_without_workload_key_and_across_dtypes(gold):
    a = gold[gold.device_kind == "synthetic-a"].drop(columns=["workload_key"])
    b = gold[gold.device_kind == "synthetic-b"].drop(columns=["workload_key"])
    sp = A.speedup(a, b)
    assert len(sp) == len(A.speedup(gold[gold.device_kind == "synthetic-a"],
                                     gold[gold.device_kind == "synthetic-b"]))
    plat = gold[(gold.device_kind == "synthetic-a") & (gold.jax_version == "0.10.2")]
    on = [c for c in ("family", "layers", "nodes", "input", "output", "batch") if c in gold]
    dt = A.speedup(plat[plat.dtype == "bfloat16"], plat[plat.dtype == "float32"], on=on)
    assert len(dt) > 0 and (dt["speedup"] > 1).all()  # golden bf16 has twice the peak


def test_comparisons_of_golden(gold):
    kinds = sorted(c.kind for c in A.comparisons(gold))
    assert kinds == ["dtype", "platform", "software"]
    sw = [c for c in A.comparisons(gold) if c.kind == "software"][0]
    assert sw.a.startswith("jax 0.10.2") and sw.b.startswith("jax 0.9.0")
    sp = A.speedup_of(sw)
    assert A.geometric_mean(sp["speedup"]) == pytest.approx(1.25, rel=0.05)  # planted
    single = gold[(gold.device_kind == "synthetic-b")]
    assert A.comparisons(single) == []


def test_params_range(gold):
    pr = A.params_range(gold)
    fc = pr.set_index("label").loc["FC"]
    ok = gold[(gold.family == "fc") & (gold.status == "ok")]["params"]
    assert fc["min"] == ok.min() and fc["max"] == ok.max() and fc["kind"] == "generated"
    real = pr[pr.kind == "real"]
    assert set(real["label"]) == {"resnet50", "transformer"}
    assert (real["min"] == real["max"]).all()
    assert pr.attrs["unit"] == "count"


def test_saturation_smallest_batch_reaching_threshold():
    df = pd.DataFrame({
        "family": "fc", "layers": 4, "nodes": 64, "input": 10, "output": 2, "status": "ok",
        "batch": [16, 32, 64, 128, 256], "examples_per_sec": [10.0, 50.0, 90.0, 95.0, 100.0],
    })
    sat = A.saturation(df)
    assert (sat["saturation_batch"] == 64).all() and (sat["best_batch"] == 256).all()
    assert list(sat["fraction_of_best"]) == pytest.approx([0.1, 0.5, 0.9, 0.95, 1.0])
    assert (A.saturation(df, threshold=0.95)["saturation_batch"] == 128).all()
    summary = A.saturation_summary(sat)
    assert len(summary) == 1 and summary["batches_measured"].iloc[0] == 5
    with pytest.raises(ParadnnError, match="threshold"):
        A.saturation(df, threshold=1.5)


def test_saturation_golden_separates_platforms(gold):
    sat = A.saturation(gold[gold.family == "cnn"])
    summary = A.saturation_summary(sat)
    assert summary["model"].is_unique
    assert any("synthetic-a" in m for m in summary["model"])
    assert (summary["saturation_batch"] <= summary["best_batch"]).all()


@pytest.mark.parametrize("opcode, inner, expected", [
    ("fusion", {"dot", "add"}, A.oplevel.MATMUL),
    ("convolution", set(), A.oplevel.MATMUL),
    ("custom-call", set(), A.oplevel.ELEMENTWISE),
    ("fusion", {"multiply", "add", "broadcast"}, A.oplevel.ELEMENTWISE),
    ("fusion", {"reduce", "exponential"}, A.oplevel.REDUCE),
    ("all-reduce", set(), A.oplevel.COLLECTIVE),
    ("fusion", {"transpose", "copy", "bitcast"}, A.oplevel.FORMATTING),
    ("copy", set(), A.oplevel.FORMATTING),
    ("while", set(), A.oplevel.CONTROL),
])
def test_categorize(opcode, inner, expected):
    assert A.categorize(opcode, inner) == expected


def test_categorize_gemm_custom_call():
    assert A.categorize("custom-call", (), "__cublas$gemm") == A.oplevel.MATMUL


def test_op_roofline_keeps_ops_above_one_percent_with_flops():
    ops = pd.DataFrame({
        "name": ["big_dot", "small", "copy", "ew"], "category": [A.oplevel.MATMUL, A.oplevel.ELEMENTWISE,
                                                             A.oplevel.FORMATTING, A.oplevel.ELEMENTWISE],
        "time_s": [0.8, 0.005, 0.1, 0.095], "flops": [8e9, 1e3, 0.0, 1e6], "bytes": [1e7, 1e4, 1e6, 1e6],
    })
    ops["time_fraction"] = ops["time_s"] / ops["time_s"].sum()
    ops["flops_per_sec"] = ops["flops"] / ops["time_s"]
    ops["arithmetic_intensity"] = ops["flops"] / ops["bytes"]
    orf = A.op_roofline(ops, peak_flops=1e11, peak_bytes_per_sec=1e9)  # ridge 100
    assert list(orf["name"]) == ["big_dot", "ew"]
    assert list(orf["bound"]) == ["compute", "memory"]
    br = A.op_breakdown(ops)
    assert br["time_fraction"].sum() == pytest.approx(1.0)
    assert br["category"].iloc[0] == A.oplevel.MATMUL
    assert list(A.top_ops(ops, n=2)["name"]) == ["big_dot", "copy"]
