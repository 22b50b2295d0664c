"""The analyses on planted data (known answers) and on the golden store."""

import numpy as np
import pandas as pd
import pytest

from paradnn import analysis as A
from paradnn.errors import ParadnnError

from data import golden


@pytest.fixture(scope="module")
def gold():
    return golden.make_frame()


@pytest.fixture(scope="module")
def trust():
    """The golden store with the trust columns; paradnn.record's warning registry in place
    (a test-only fallback until the record module has it)."""
    with pytest.MonkeyPatch.context() as mp:
        golden.ensure_warning_registry(mp)
        yield golden.make_trust_frame()


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
    assert len(hm) == 16 and set(hm.columns) == {"batch", "nodes", "flops_utilization", "status",
                                                 "n", "unstable", "warnings"}
    assert not hm["unstable"].any() and (hm["warnings"] == "").all()  # old store: unknown = not marked
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
    assert "device_platform" in fixed or "device_kind" in fixed  # one platform
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


def test_above_roof_splits_the_impossible_from_an_overcounted_byte_count():
    """The H200's FC profile, two of its operations as measured (FLOP, B, s per step), against
    its spec roof (989 TFLOP/s, 4.8 TB/s): the softmax-gradient scatter and the loss fusion pass
    only the memory slope (XLA's bytes accessed, full operands, for in-place or cached data);
    a GEMM at twice the peak (a FLOP count doubled) passes the compute peak; however short."""
    ops = pd.DataFrame({
        "name": ["input_scatter_fusion", "loop_add_subtract_fusion", "gemm_doubled", "gemm_ok", "copy"],
        "flops": [24576.0, 8323072.0, 2.2e12, 1.1e12, 0.0],
        "bytes": [65568768.0, 16551840.0, 4.4e8, 4.4e8, 3e7],
        "time_s": [1.717e-6, 2.016e-6, 1.1e-3, 1.34e-3, 5e-6],
    })
    ops["time_fraction"] = ops["time_s"] / ops["time_s"].sum()
    ops["flops_per_sec"] = ops["flops"] / ops["time_s"]
    ops["arithmetic_intensity"] = ops["flops"] / ops["bytes"]
    above = A.above_roof(ops, peak_flops=989e12, peak_bytes_per_sec=4.8e12)
    assert above == {"compute": ["gemm_doubled"], "memory": ["loop_add_subtract_fusion", "input_scatter_fusion"]}
    assert A.above_roof(ops, peak_flops=1e18, peak_bytes_per_sec=1e18) == {"compute": [], "memory": []}


# -- small multiples --------------------------------------------------------------------------

def test_heatmap_panels_split_every_other_varied_column(gold):
    fc = gold[gold.family == "fc"]
    hm = A.heatmap(fc, "batch", "nodes", "examples_per_sec", panels=True)
    split = hm.attrs["panel_columns"]
    # layers {4, 16}, two platforms, two dtypes, two jax versions: one panel per combination
    # present, none of them fixed behind the reader's back.
    assert "layers" in split and "dtype" in split and "device_kind" in split
    assert hm.attrs["auto_fixed"] == []
    ok = fc[fc.status.isin(("ok", "oom"))]
    combos = ok[split].drop_duplicates()
    assert len(hm.attrs["panels"]) == len(combos) == hm["panel"].nunique()
    # every panel holds the full 4 x 4 grid of its configuration, one run per cell
    assert (hm.groupby("panel").size() == 16).all() and (hm["n"] == 1).all()
    # layers=2 and layers=16 both appear: no slice is hidden
    assert set(hm["layers"]) == {4, 16}
    # a cell equals its run
    p = next(i for i, d in enumerate(hm.attrs["panels"]) if d["layers"] == 16
             and d["device_kind"] == "synthetic-b")
    cell = hm[(hm.panel == p) & (hm.batch == 256) & (hm.nodes == 1024)]["examples_per_sec"].iloc[0]
    src = fc[(fc.layers == 16) & (fc.device_kind == "synthetic-b") & (fc.batch == 256) & (fc.nodes == 1024)]
    assert cell == src["examples_per_sec"].iloc[0]


def test_heatmap_panels_beyond_the_limit_are_fixed_and_said(gold):
    fc = gold[gold.family == "fc"]
    hm = A.heatmap(fc, "batch", "nodes", "examples_per_sec", panels=True, max_panels=2)
    assert len(hm.attrs["panels"]) <= 2
    assert hm.attrs["auto_fixed"]  # the rest was fixed, and the attrs say to what
    assert set(hm.attrs["auto_fixed"]) <= set(hm.attrs["fixed"])
    with pytest.raises(ParadnnError, match="max_panels"):
        A.heatmap(fc, "batch", "nodes", "examples_per_sec", panels=True, max_panels=0)


# -- measurement trust: unstable runs and physics warnings (issue 8 columns) ---------------------

def test_old_store_loads_without_trust_columns(gold):
    # Rows written before the trust fields existed: the columns absent (as here) or null.
    old = gold.drop(columns=[c for c in ("stable", "warnings") if c in gold.columns])
    assert not A.columns.unstable_mask(old).any()
    assert A.columns.warning_lists(old).map(len).sum() == 0
    assert A.columns.headline_utilization(old) == "flops_utilization"
    assert not A.columns.unstable_mask(gold).any()
    assert A.columns.warning_lists(gold).map(len).sum() == 0
    assert A.columns.headline_utilization(gold) == "flops_utilization"


def test_unstable_values_are_parsed_as_stored():
    df = pd.DataFrame({"stable": [True, False, None, float("nan"), "false", 0, 1, "True"]})
    assert list(A.columns.unstable_mask(df)) == [False, True, False, False, True, True, False, False]


def test_heatmap_marks_unstable_and_flagged_cells(trust):
    fc = trust[(trust.family == "fc") & (trust.device_kind == "synthetic-a")]
    hm = A.heatmap(fc, "batch", "nodes", "examples_per_sec",
                   fixed={"layers": 4, "dtype": "bfloat16"})
    shaky = hm[hm.unstable]
    assert set(shaky["nodes"]) == {64} and len(shaky) == 4
    flagged = hm[hm.warnings != ""]
    assert len(flagged) == 1 and flagged["warnings"].iloc[0] == "above_roof,utilization_above_1"
    assert (flagged.nodes.iloc[0], flagged.batch.iloc[0]) == (4096, 4096)
    assert trust["model_flops_utilization"].notna().any()
    assert A.columns.headline_utilization(trust) == "model_flops_utilization"


def test_heatmap_cell_prefers_stable_runs(trust):
    fc = trust[(trust.family == "fc") & (trust.device_kind == "synthetic-a") & (trust.layers == 4)
               & (trust.dtype == "float32") & (trust.jax_version == "0.10.2")]
    one = fc[(fc.nodes == 256) & (fc.batch == 256)]
    noisy = one.assign(stable=False, examples_per_sec=one["examples_per_sec"] * 5)
    hm = A.heatmap(pd.concat([fc, noisy]), "batch", "nodes", "examples_per_sec")
    cell = hm[(hm.batch == 256) & (hm.nodes == 256)].iloc[0]
    assert cell["examples_per_sec"] == one["examples_per_sec"].iloc[0] and not cell["unstable"]
    assert cell["n"] == 2


def test_sensitivity_leaves_unstable_rows_out_and_says_so():
    df = planted(n=120)
    bad = df.index[:10]
    df["stable"] = True
    df.loc[bad, "stable"] = False
    df.loc[bad, "y"] = 1e3  # wild outliers: would wreck the fit if used
    s = A.sensitivity(df, "y", list("abcd"), bootstrap=50)
    assert s.attrs["unstable_excluded"] == 10 and s.attrs["n"] == 110 and s.attrs["r2"] > 0.99
    with_bad = A.sensitivity(df, "y", list("abcd"), bootstrap=0, include_unstable=True)
    assert with_bad.attrs["unstable_excluded"] == 0 and with_bad.attrs["n"] == 120
    assert with_bad.attrs["r2"] < 0.5
    few = df.assign(stable=False)
    with pytest.raises(ParadnnError, match="120 unstable rows left out"):
        A.sensitivity(few, "y", ["a"])


def _dtype_comparison(trust):
    return [c for c in A.comparisons(trust) if c.kind == "dtype"][0]


def test_speedup_leaves_unstable_out_and_carries_a_ci(trust):
    c = _dtype_comparison(trust)
    sp = A.speedup_of(c)
    assert sp.attrs["unstable_excluded"] == 4 and not sp["unstable"].any()
    assert len(sp) == 12  # 16 common workloads, the 4 with unstable bfloat16 runs left out
    summary = A.speedup_summary(sp)
    assert summary["n"] == 12 and summary["unstable_excluded"] == 4
    assert summary["ci_low"] <= summary["geomean"] <= summary["ci_high"]
    assert summary["geomean"] == pytest.approx(A.geometric_mean(sp["speedup"]))
    # The planted 7x noise would have moved the claim far outside the honest interval.
    shown = A.speedup_of(c, include_unstable=True)
    assert len(shown) == 16 and shown["unstable"].sum() == 4
    assert A.geometric_mean(shown["speedup"]) > summary["ci_high"] * 1.3


def test_geometric_mean_ci_is_a_bootstrap_over_workloads():
    rng = np.random.default_rng(0)
    v = pd.Series(np.exp(rng.normal(np.log(2.0), 0.2, 400)))
    gm, lo, hi = A.geometric_mean_ci(v, bootstrap=1000, seed=1)
    assert lo < 2.0 < hi and hi / lo < 1.1  # 400 workloads around 2x: a narrow interval
    assert A.geometric_mean_ci(v, bootstrap=1000, seed=1) == (gm, lo, hi)  # seeded
    gm1, lo1, hi1 = A.geometric_mean_ci(pd.Series([1.5]))
    assert gm1 == pytest.approx(1.5) and np.isnan(lo1) and np.isnan(hi1)
    with pytest.raises(ParadnnError, match="ci="):
        A.geometric_mean_ci(v, ci=1.5)


def test_family_ranges_leave_unstable_out_params_keep_them(trust):
    fr = A.family_ranges(trust, "flops_utilization")
    assert fr.attrs["unstable_excluded"] == 4
    assert A.params_range(trust).attrs["unstable_excluded"] == 0


def test_saturation_marks_points_of_unstable_runs(trust):
    fc = trust[(trust.family == "fc") & (trust.device_kind == "synthetic-a") & (trust.dtype == "bfloat16")]
    sat = A.saturation(fc)
    assert sat["unstable"].sum() == 4
    assert set(sat[sat.unstable]["model"]) == {m for m in sat["model"] if "nodes=64 " in m + " "}


# -- time estimates from the store's own records --------------------------------------------------

def test_config_seconds_and_estimate_from_records(gold):
    from paradnn.analysis import cost

    ok = gold[gold.status == "ok"]
    secs = cost.config_seconds(ok)
    # compile + (warm-up calls + timed calls) x steps per call x step time, from the record
    r = ok.iloc[0]
    expected = r.compile_s + (r.warmup_calls + r.timed_calls) * r.steps_per_call * r.step_time_s
    assert secs.iloc[0] == pytest.approx(expected)
    fc = ok[(ok.family == "fc") & (ok.device_kind == ok.device_kind.value_counts().index[0])]
    total, basis = A.estimate_seconds(gold, 10, {"family": "fc"})
    assert total == pytest.approx(10 * cost.config_seconds(fc).median())
    assert "family=fc" in basis and "records" in basis
    # New records: the warm-up time and the steps per call chosen by the adaptive protocol.
    new = ok.head(3).assign(warmup_elapsed_s=2.0, steps_per_call_used=3)
    assert cost.config_seconds(new).iloc[0] == pytest.approx(
        new.compile_s.iloc[0] + 2.0 + new.timed_calls.iloc[0] * 3 * new.step_time_s.iloc[0])
    empty, why = A.estimate_seconds(gold.iloc[0:0], 4, {"family": "cnn"})
    assert empty == 4 * cost.DEFAULT_CONFIG_S and "default" in why


def test_wall_seconds_between_consecutive_records_of_a_host():
    from paradnn.analysis import cost

    t0 = pd.Timestamp("2026-01-01T00:00:00Z")
    df = pd.DataFrame({
        "status": "ok", "family": "fc", "host": ["a", "a", "a", "a", "b", "b"],
        "time_utc": [str(t0 + pd.Timedelta(seconds=s)) for s in (0, 10, 22, 3600, 5, 9)],
        "compile_s": 1.0, "timed_calls": 2, "steps_per_call": 1, "warmup_calls": 1,
        "step_time_s": 1.0,  # compile + timing = 1 + (1 + 2) x 1 x 1 = 4 s
    })
    walls = cost.wall_seconds(df)
    # host a: 10 s and 12 s; the hour-long gap is a pause (> 4 s + MAX_OVERHEAD_S); host b: 4 s
    assert walls.tolist()[1:3] == [10.0, 12.0] and np.isnan(walls.iloc[3])
    assert np.isnan(walls.iloc[0]) and np.isnan(walls.iloc[4]) and walls.iloc[5] == 4.0
    total, basis = A.estimate_seconds(df, 10, {"family": "fc"})
    assert total == pytest.approx(10 * np.median([10.0, 12.0, 4.0]))
    assert "wall time between consecutive records" in basis
    # a gap shorter than the record's own compile + timing is not a config's wall time
    short = df.assign(compile_s=20.0)
    assert cost.wall_seconds(short).notna().sum() == 0
    assert "lower bound" in A.estimate_seconds(short, 1, {})[1]


# -- the columns' vocabulary: read from the data, one label ------------------------------------

def test_sensitivity_fit_is_scikit_learns_least_squares(gold):
    # The fit is numpy's least squares (scikit-learn is not imported by the analyses: 2-3 s);
    # it must be the plane scikit-learn's LinearRegression fits.
    linear_model = pytest.importorskip("sklearn.linear_model")
    from paradnn.analysis.sensitivity import _design, _standardize

    fc = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-b")]
    feats = ["layers", "nodes", "batch"]
    for interactions in (False, True):
        s = A.sensitivity(fc, "flops_utilization", feats, log2=True, interactions=interactions,
                          bootstrap=0)
        X, names = _design(fc, feats, interactions, True)
        X = _standardize(X)
        y = fc["flops_utilization"].to_numpy(float)
        y = (y - y.mean()) / y.std()
        ref = linear_model.LinearRegression().fit(X, y)
        got = s.set_index("feature")["weight"]
        np.testing.assert_allclose([got[n] for n in names], ref.coef_, rtol=1e-9, atol=1e-12)
        assert s.attrs["r2"] == pytest.approx(ref.score(X, y), rel=1e-9)


def test_sensitivity_ties_of_collinear_features_keep_their_order():
    # heads = d_model / 64: the two share one weight; the order is the features', not noise.
    rng = np.random.default_rng(3)
    d = 2.0 ** rng.integers(6, 11, 40)
    df = pd.DataFrame({"d_model": d, "heads": d / 64, "batch": 2.0 ** rng.integers(2, 8, 40)})
    df["y"] = np.log2(df.d_model) + 2 * np.log2(df.batch) + rng.normal(0, 0.1, 40)
    s = A.sensitivity(df, "y", ["d_model", "heads", "batch"], log2=True, bootstrap=0)
    assert list(s.feature) == ["batch", "d_model", "heads"]
    assert s.weight[1] == pytest.approx(s.weight[2], rel=1e-9)


def test_software_columns_are_read_from_the_data():
    cols = ["family", "xla_flags", "torch_version", "jax_version", "framework_version",
            "toyfw_version", "paradnn_version", "python_version", "schema_version",
            "jaxlib_version"]
    df = pd.DataFrame(columns=cols)
    # A new framework's version column counts without an edit; the record format, paradnn's
    # own revision and the interpreter do not.
    assert A.columns.software_columns(df) == [
        "framework_version", "jax_version", "jaxlib_version", "torch_version", "toyfw_version",
        "xla_flags"]
    assert "toyfw_version" in A.columns.group_columns(df)
    assert "paradnn_version" not in A.columns.group_columns(df)
    assert A.columns.software_columns(pd.DataFrame(columns=["family"])) == []


def test_heatmap_panels_split_a_new_frameworks_versions(gold):
    fc = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-b")]
    two = pd.concat([fc.assign(toyfw_version="1.0"),
                     fc.assign(toyfw_version="2.0", key=fc.key + "-2")], ignore_index=True)
    hm = A.heatmap(two, "batch", "nodes", "examples_per_sec", panels=True)
    assert "toyfw_version" in hm.attrs["panel_columns"]
    # ... and a saturation curve per version: never one curve of two stacks.
    assert A.saturation(two).model.nunique() == 2 * A.saturation(fc).model.nunique()


def test_software_label_names_the_framework_that_ran_the_row():
    label = A.columns.software_label
    assert label({"framework": "torch", "framework_version": "2.5", "jax_version": "0.10"}) == "torch 2.5"
    # Rows from before the framework columns: JAX's, with its own version column.
    assert label({"jax_version": "0.9.0", "tf_version": None}) == "jax 0.9.0"
    assert label({"framework": "toyfw", "toyfw_version": "3"}) == "toyfw 3"
    assert label({}) == "unknown software"


def test_label_is_one_function_for_axes_colour_bars_and_table_headers():
    label = A.label
    assert label("examples_per_sec") == "throughput (examples/s)"
    assert label("batch", "log2 scale") == "batch (examples, log2 scale)"
    assert label("model_flops_utilization") == "model FLOPS utilization (fraction of peak)"
    assert label("model_ceiling_utilization") == "model ceiling utilization (fraction of the measured ceiling)"
    assert label("no_such_column") == "no_such_column"
    assert label("no_such_column", "log2 scale") == "no_such_column (log2 scale)"
    # Table headers keep the column's own name (to find it in the data); counts have no unit.
    assert label("examples_per_sec", table=True) == "examples_per_sec [examples/s]"
    assert label("params", table=True) == "params"
    assert label("host_cpu_utilization", table=True) == \
        "host_cpu_utilization [fraction of the host's cores]"
    assert A.unit("device_busy_fraction") == "fraction of the timed window"


def test_frameworks_order_reads_new_names_from_the_data():
    from paradnn.analysis.framework import framework_pairs, frameworks

    df = pd.DataFrame({"framework": ["torch", None, "toyfw", "tensorflow"]})
    # JAX (the reference, and every old store's) first, the others by name.
    assert frameworks(df) == ["jax", "tensorflow", "torch", "toyfw"]
    assert framework_pairs(["toyfw", "jax", "torch"]) == [
        ("torch", "jax"), ("toyfw", "jax"), ("toyfw", "torch")]


# -- how the analysis, figure and report packages import -----------------------------------------

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
# Files whose imports another change owns (the wall-time estimator moves in the plan work).
_OWNED_ELSEWHERE: set[str] = set()


def _pipeline_files():
    for pattern in ("paradnn/analysis/*.py", "paradnn/plots/*.py", "paradnn/report/*.py",
                    "paradnn/status.py"):
        for path in sorted(ROOT.glob(pattern)):
            if str(path.relative_to(ROOT)) not in _OWNED_ELSEWHERE:
                yield path


def _imports(path):
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield node, [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            yield node, [f"{node.module}.{a.name}" for a in node.names]


#: Imports a pipeline module may make inside a function, and why: scikit-learn and SciPy cost
#: about 5 s of start-up, which every ``paradnn`` command would pay (the prediction fit is the
#: only user; measured 7.5 s vs 2.7 s for ``paradnn --help``).
_LAZY_ALLOWED = {"paradnn/analysis/prediction/correction.py": ("sklearn", "scipy", "threadpoolctl")}


def test_pipeline_imports_at_module_level_and_no_private_names():
    """Module-level imports (except _LAZY_ALLOWED) and no private names; the stage order (no
    runner, executors or framework package) is tests/test_imports.py's."""
    bad = []
    for path in _pipeline_files():
        where = path.relative_to(ROOT)
        lazy_ok = _LAZY_ALLOWED.get(str(where), ())
        for node, names in _imports(path):
            if node.col_offset and not all(n.split(".")[0] in lazy_ok for n in names):
                bad.append(f"{where}:{node.lineno}: import inside a function: {names}")
            for name in names:
                parts = name.split(".")
                if any(p.startswith("_") and p != "__future__" for p in parts):
                    bad.append(f"{where}:{node.lineno}: private name {name}")
    assert not bad, "\n".join(bad)


def test_analysis_modules_import_no_circle():
    graph = {}
    for path in ROOT.glob("paradnn/analysis/*.py"):
        me = f"paradnn.analysis.{path.stem}"
        graph[me] = {n.rsplit(".", 1)[0] if n.rsplit(".", 1)[0].startswith("paradnn.analysis.")
                     else n for _, names in _imports(path) for n in names}
    graph = {k: {d for d in v if d in graph} for k, v in graph.items()}
    seen, path_ = set(), []

    def visit(node):
        assert node not in path_, f"import circle: {' -> '.join(path_[path_.index(node):] + [node])}"
        if node in seen:
            return
        path_.append(node)
        for dep in sorted(graph[node]):
            visit(dep)
        path_.pop()
        seen.add(node)

    for node in sorted(graph):
        visit(node)
    assert "paradnn.analysis.speedup" not in graph["paradnn.analysis.framework"]


@pytest.mark.slow  # a fresh interpreter
def test_reading_results_imports_no_framework():
    import subprocess
    import sys

    code = ("import sys, paradnn.analysis, paradnn.plots, paradnn.report, paradnn.status; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('jax', 'flax', 'optax', 'tensorflow', 'keras', 'torch', 'sklearn') "
            "or m.startswith(('paradnn.runner', 'paradnn.executors'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# -- analytic FLOP counts that changed between revisions ------------------------------------------

def _counted(**over):
    row = {"family": "fc", "layers": 4, "nodes": 64, "input": 32, "output": 10, "batch": 8,
           "dtype": "float32", "optimizer": "sgd", "devices": 1, "framework": "jax",
           "status": "ok", "warnings": "", "model_flops_per_step": 1.0e9,
           "time_utc": "2026-11-29T10:00:00+00:00"}
    return {**row, **over}


def test_a_count_that_differs_from_the_latest_of_its_workload_is_flagged_as_physics():
    df = pd.DataFrame([
        _counted(model_flops_per_step=1.08e9, time_utc="2026-11-01T10:00:00+00:00"),  # older rule
        _counted(),                                                                    # the latest
        _counted(time_utc="2026-11-02T10:00:00+00:00"),                                # a repeat
        _counted(framework="torch", model_flops_per_step=2.0e9),     # another framework: its own
        _counted(batch=16, model_flops_per_step=2.0e9),              # another workload
        _counted(replaced_by="family fc: mylab.fc", model_flops_per_step=3.0e9,  # a plugin's
                 time_utc="2026-11-30T10:00:00+00:00"),
        _counted(status="failed", model_flops_per_step=float("nan"),
                 time_utc="2026-11-30T10:00:00+00:00"),              # no count: never flagged
    ])
    assert list(A.columns.count_changed_mask(df)) == [True] + [False] * 6
    codes = A.columns.warning_lists(df)
    assert list(codes) == [["flops_count_changed"]] + [[]] * 6
    assert A.columns.warning_lists(df, "precision").map(len).sum() == 0
    assert list(A.columns.flagged_mask(df)) == [True] + [False] * 6
    # The code is a registered physics warning, and its text says what to do.
    assert A.columns.warning_kind("flops_count_changed") == "physics"
    assert "Measure the config again" in A.columns.warning_meaning("flops_count_changed")
    # Read alone, the older row is consistent with itself: nothing to flag.
    assert not A.columns.count_changed_mask(df.iloc[[0, 3, 4]]).any()
    # Equal counts (to the last digit a JSON float keeps) are one count.
    same = pd.DataFrame([_counted(model_flops_per_step=123456789012.0),
                         _counted(model_flops_per_step=123456789012.0, time_utc="2026-12-01")])
    assert not A.columns.count_changed_mask(same).any()


def test_a_count_check_needs_its_columns():
    assert not A.columns.count_changed_mask(pd.DataFrame([_counted()])).any()
    old = pd.DataFrame([_counted(), _counted(model_flops_per_step=2e9)]).drop(columns="time_utc")
    assert not A.columns.count_changed_mask(old).any()
    assert A.columns.count_changed_mask(pd.DataFrame()).empty


def test_rows_of_a_family_counted_by_an_older_rule_are_flagged_whatever_their_configs():
    """The zoo's convolution counts changed rule on 2026-11-29 (rule 2): a store whose zoo rows
    of other configs were counted before (no ``flops_count_rule``: rule 1) mixes the two
    conventions in one figure; those rows, and only those of that family, are marked."""
    zoo = {"family": "real", "layers": None, "nodes": None, "input": None, "output": None,
           "model": "resnet50", "image": 0, "length": 0}
    df = pd.DataFrame([
        _counted(**{**zoo, "model": "resnet18"}, flops_count_rule=float("nan")),     # rule 1
        _counted(**{**zoo, "model": "resnet50"}, flops_count_rule=2),
        _counted(**{**zoo, "model": "vgg16"}, flops_count_rule=2),
        _counted(flops_count_rule=float("nan")),                 # FC, rule 1: its current rule
        _counted(batch=16, flops_count_rule=1),
    ])
    assert list(A.columns.count_changed_mask(df)) == [True, False, False, False, False]
    # Without a newer rule among them, rule-1 rows are consistent with each other.
    assert not A.columns.count_changed_mask(df.drop(columns="flops_count_rule")).any()
    assert not A.columns.count_changed_mask(df.iloc[[0, 3, 4]]).any()
